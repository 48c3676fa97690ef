"""The Python API: the embedded Memory and the HTTP Client answer the same records and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import chainrecall
from chainrecall import Client, Memory
from chainrecall.errors import InvalidCursor, NotFound, UnknownReference
from tests.servers import ThreadServer


def story(memory: Memory | Client) -> dict[str, str]:
    """The payments retry story, written through either API."""
    ci, _ = memory.record_trigger(
        source="github", kind="check_run.completed", thread_key="github:acme/payments#412",
        summary="CI failed on PR #412: 3 payment timeouts", payload={"log": "timeout " * 100},
        dedupe_key="ci-1",
    )  # fmt: skip
    worker = memory.start_worker(ci.thread_id, "make the payment client survive timeouts")
    memory.report(
        worker.id, summary="added retry with backoff", body="three timeouts in CI",
        refs=[ci.id], status="ready",
    )  # fmt: skip
    return {"trigger": ci.id, "thread": ci.thread_id, "worker": worker.id}


def test_the_embedded_api_follows_the_three_hops(tmp_path: Path) -> None:
    with chainrecall.open(str(tmp_path / "m.db")) as memory:
        ids = story(memory)
        hit = memory.search("retry logic payment").items[0]
        assert hit.thread_id == ids["thread"]
        thread = memory.get_thread(hit.thread_id)
        worker = memory.get_worker(thread.owner_workers[0])
        assert worker.report is not None
        cited = memory.get_trigger(worker.report.refs[0])
        assert "3 payment timeouts" in cited.summary
        assert memory.get_payload(cited.id).json_value()["log"].startswith("timeout")


def test_client_and_embedded_answer_identical_records(tmp_path: Path) -> None:
    memory = chainrecall.open(str(tmp_path / "m.db"))
    ids = story(memory)
    from chainrecall.api.app import create_app

    with ThreadServer(create_app(memory.store)) as server, Client(server.url) as client:
        assert client.get_trigger(ids["trigger"]) == memory.get_trigger(ids["trigger"])
        assert client.get_thread(ids["thread"]) == memory.get_thread(ids["thread"])
        assert client.get_worker(ids["worker"]) == memory.get_worker(ids["worker"])
        assert client.find_thread("github:acme/payments#412").id == ids["thread"]
        assert list(client.walk_events(ids["thread"])) == list(memory.walk_events(ids["thread"]))
        assert client.get_payload(ids["trigger"]).data == memory.get_payload(ids["trigger"]).data
        assert client.search("timeouts") == memory.search("timeouts")
        # the same exceptions, with the ID they name
        for api in (client, memory):
            with pytest.raises(NotFound) as missing:
                api.get_trigger("trg_missing")
            assert missing.value.object_id == "trg_missing"  # type: ignore[attr-defined]
            with pytest.raises(InvalidCursor):
                api.list_events(ids["thread"], cursor="forged")
            with pytest.raises(UnknownReference):
                api.report(ids["worker"], summary="x", refs=["trg_missing"])
        created, fresh = client.record_trigger(
            source="chat", kind="message", thread_id=ids["thread"], payload="via http"
        )
        assert fresh and memory.get_trigger(created.id) == created
    memory.close()

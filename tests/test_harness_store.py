"""Agent history in the store (every backend): sessions, append-only messages, request log."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from chainrecall.errors import NotFound
from chainrecall.history import NewMessage, NewModelRequest
from chainrecall.store import Store, open_store


def test_messages_append_in_order_and_read_back_with_the_same_encoding(store: Store) -> None:
    session = store.create_session("default", kind="worker", model="m", worker_id="wkr_a1",
                                   thread_id="thr_b2")  # fmt: skip
    assert session.id.startswith("ses_") and session.status == "open"
    calls = [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"query\":\"é\"}"}}]  # fmt: skip
    first = store.append_messages(
        "default", session.id,
        [NewMessage(role="system", content="be brief"), NewMessage(role="user", content="héllo")],
    )  # fmt: skip
    second = store.append_messages(
        "default", session.id,
        [NewMessage(role="assistant", content="", tool_calls=calls),
         NewMessage(role="tool", content="{}", tool_call_id="c1", name="search")],
    )  # fmt: skip
    assert [m.position for m in first + second] == [0, 1, 2, 3]
    stored = store.list_messages("default", session.id)
    assert [m.encoded() for m in stored] == [m.encoded() for m in first + second]
    assert stored[1].bytes == len(stored[1].encoded().encode("utf-8"))
    assert stored[2].tool_calls == calls
    assert store.list_sessions("default", worker_id="wkr_a1")[0].id == session.id
    assert store.list_sessions("default", kind="router") == []
    assert store.set_session_status("default", session.id, "done").status == "done"


def test_the_request_log_keeps_usage_and_outcome_per_session(store: Store) -> None:
    session = store.create_session("default", kind="router", model="m")
    other = store.create_session("default", kind="router", model="m")
    store.log_model_request("default", NewModelRequest(
        session_id=session.id, model="m", message_count=2, bytes_sent=512, prompt_tokens=100,
        completion_tokens=5, cache_hit_tokens=64, cache_miss_tokens=36, latency_ms=40, outcome="ok"))  # fmt: skip
    store.log_model_request("default", NewModelRequest(
        session_id=other.id, model="m", message_count=2, bytes_sent=300, latency_ms=1000,
        outcome="timeout", error="no answer within 1 s"))  # fmt: skip
    logged = store.list_model_requests("default", session.id)
    assert [(r.prompt_tokens, r.cache_hit_tokens, r.outcome) for r in logged] == [(100, 64, "ok")]
    assert [r.outcome for r in store.list_model_requests("default")] == ["ok", "timeout"]
    assert store.list_model_requests("default", other.id)[0].prompt_tokens is None


def test_an_unknown_session_or_one_of_another_namespace_is_not_found(store: Store) -> None:
    session = store.create_session("team-a", kind="router", model="m")
    with pytest.raises(NotFound):
        store.get_session("team-b", session.id)
    with pytest.raises(NotFound):
        store.append_messages("team-b", session.id, [NewMessage(role="user", content="x")])
    with pytest.raises(NotFound):
        store.list_messages("default", "ses_nothere1")
    assert store.list_sessions("team-b") == []
    assert store.list_model_requests("team-b") == []


def test_racing_appenders_get_consecutive_positions(store: Store, db_url: str) -> None:
    """Two store objects (as two processes would) append to one session at once."""
    session = store.create_session("default", kind="router", model="m")
    other = open_store(db_url)

    def append(target: Store, who: str) -> list[int]:
        return [
            message.position
            for n in range(15)
            for message in target.append_messages(
                "default",
                session.id,
                [
                    NewMessage(role="user", content=f"{who}{n}a"),
                    NewMessage(role="assistant", content=f"{who}{n}b"),
                ],
            )
        ]

    try:
        with ThreadPoolExecutor(2) as pool:
            mine, theirs = pool.map(append, [store, other], ["x", "y"])
    finally:
        other.close()
    assert sorted(mine + theirs) == list(range(60))
    stored = store.list_messages("default", session.id)
    assert [m.position for m in stored] == list(range(60))
    # Each append's pair stays together: a position is never interleaved inside one call.
    assert all(stored[i].content[:-1] == stored[i + 1].content[:-1] for i in range(0, 60, 2))


def test_a_nul_in_a_message_is_kept_as_a_replacement_character_on_every_backend(
    store: Store,
) -> None:
    session = store.create_session("default", kind="router", model="m")
    store.append_messages("default", session.id, [NewMessage(role="user", content="a\x00b")])
    assert [m.content for m in store.list_messages("default", session.id)] == ["a\ufffdb"]

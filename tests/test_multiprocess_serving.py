"""Several server processes on one PostgreSQL database answer as one.

Two `chainrecall serve` commands on the same database, one of them with
`--workers 2`: an ID created through one resolves through the other to the
same record, a cursor issued by one pages on the other, and a dedupe key
sent to both makes one record.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import postgres_schema_url
from tests.servers import ProcessServer

pytestmark = pytest.mark.slow


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from postgres_schema_url()


def post(api: httpx.Client, path: str, body: dict[str, object]) -> dict[str, object]:
    response = api.post(path, json=body)
    assert response.status_code in (200, 201), response.text
    answer: dict[str, object] = response.json()
    return answer


def test_servers_with_several_workers_on_one_database_answer_the_same(pg_url: str) -> None:
    with (
        ProcessServer(pg_url, "--workers", "2") as pair,
        ProcessServer(pg_url) as single,
        # No keep-alive on the pair: each request is a new connection, which either worker may accept.
        httpx.Client(
            base_url=pair.url, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
        ) as a,
        httpx.Client(base_url=single.url, timeout=30) as b,
    ):
        first = post(a, "/triggers", {"source": "chat", "kind": "message", "thread_key": "t:1",
                                      "payload": {"text": "deploy is blocked"}})  # fmt: skip
        second = post(b, "/triggers", {"source": "chat", "kind": "message",
                                       "thread_id": first["thread_id"], "payload": "rolled back",
                                       "in_reply_to": first["id"]})  # fmt: skip
        worker = post(a, "/workers", {"thread_id": first["thread_id"], "task": "unblock deploy"})
        post(b, f"/workers/{worker['id']}/report", {"summary": "unblocked", "refs": [second["id"]]})

        for path in (
            f"/triggers/{first['id']}",
            f"/triggers/{second['id']}",
            f"/triggers/{second['id']}/payload",
            f"/threads/{first['thread_id']}",
            f"/workers/{worker['id']}",
            "/search?q=deploy",
        ):
            from_b = b.get(path)
            assert from_b.status_code == 200, from_b.text
            for _ in range(4):  # several connections: both workers of the pair answer
                assert a.get(path).content == from_b.content, path

        # A cursor issued by one server pages on the other: the secret lives in the database.
        page = a.get(f"/threads/{first['thread_id']}/events", params={"limit": 2}).json()
        assert [e["seq"] for e in page["items"]] == [1, 2]
        rest = b.get(
            f"/threads/{first['thread_id']}/events", params={"cursor": page["next_cursor"]}
        ).json()
        assert [(e["seq"], e["kind"]) for e in rest["items"]] == [(3, "worker"), (4, "report")]

        # One delivery retried through both servers is one record.
        delivery = {"source": "github", "kind": "push", "thread_key": "t:2",
                    "payload": "push", "dedupe_key": "delivery-7"}  # fmt: skip
        made = a.post("/triggers", json=delivery)
        again = b.post("/triggers", json=delivery)
        assert (made.status_code, again.status_code) == (201, 200)
        assert made.json() == again.json()

"""The HTTP contract of shared/API.md, rule by rule, over a real server on every backend."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from tests.servers import ThreadServer

PROBLEM = "application/problem+json"


def post_trigger(api: httpx.Client, **fields: Any) -> httpx.Response:
    body = {"source": "chat", "kind": "message", "thread_key": "chat:general", "payload": "hi"}
    body.update(fields)
    return api.post("/triggers", json=body)


def assert_problem(
    response: httpx.Response, status: int, names: str | None = None
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert {"type", "title", "status", "detail", "instance"} <= body.keys()
    assert body["status"] == status
    if names is not None:
        assert names in body["detail"]
    return body


# -- identifiers and reading -------------------------------------------------------


def test_a_created_trigger_resolves_to_the_same_record_twice(api: httpx.Client) -> None:
    created = post_trigger(api, payload={"text": "CI failed"}, summary="CI failed on PR #412")
    assert created.status_code == 201
    record = created.json()
    assert created.headers["location"] == f"/triggers/{record['id']}"
    first = api.get(f"/triggers/{record['id']}").json()
    second = api.get(f"/triggers/{record['id']}").json()
    assert first == second == record
    assert record["id"].startswith("trg_") and record["thread_id"].startswith("thr_")
    assert record["summary"] == "CI failed on PR #412"


def test_ids_match_the_documented_pattern_and_are_short(api: httpx.Client) -> None:
    import re

    record = post_trigger(api).json()
    worker = api.post("/workers", json={"thread_id": record["thread_id"], "task": "t"}).json()
    for value in (record["id"], record["thread_id"], worker["id"]):
        assert re.fullmatch(r"(trg|thr|wkr)_[0-9a-z_]{1,40}", value)
        assert len(value) <= 16


def test_a_thread_record_counts_its_events_and_lists_owner_workers(api: httpx.Client) -> None:
    first = post_trigger(api, thread_key="github:acme/payments#412", summary="PR opened").json()
    post_trigger(api, thread_key="github:acme/payments#412", summary="CI failed")
    thread = api.get(f"/threads/{first['thread_id']}").json()
    assert thread["key"] == "github:acme/payments#412"
    assert thread["event_count"] == 2 and isinstance(thread["event_count"], int)
    assert thread["owner_workers"] == []
    worker = api.post("/workers", json={"thread_id": thread["id"], "task": "fix CI"})
    assert worker.status_code == 201
    assert worker.headers["location"] == f"/workers/{worker.json()['id']}"
    thread = api.get(f"/threads/{first['thread_id']}").json()
    assert thread["owner_workers"] == [worker.json()["id"]]
    for field in ("title", "summary", "status", "first_activity_at", "last_activity_at"):
        assert thread[field]


def test_json_payload_comes_back_whole_as_json(api: httpx.Client) -> None:
    payload = {"log": "timeout\n" * 6000, "n": [1, 2.5, None, True], "ü": "ễ"}
    record = post_trigger(api, payload=payload).json()
    assert record["payload"]["bytes"] > 40_000
    assert len(json.dumps(record)) < 1500  # the record never carries a large payload
    response = api.get(record["payload"]["href"])
    assert response.headers["content-type"] == "application/json"
    assert response.json() == payload


def test_string_payload_comes_back_as_utf8_text(api: httpx.Client) -> None:
    text = "Lỗi thanh toán: 3 lần hết thời gian chờ\nline 2"
    record = post_trigger(api, payload=text).json()
    response = api.get(f"/triggers/{record['id']}/payload")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.content == text.encode("utf-8")


@pytest.mark.parametrize(
    "path",
    [
        "/triggers/{id}",
        "/triggers/{id}/payload",
        "/threads/{id}",
        "/threads/{id}/events",
        "/workers/{id}",
    ],
)
@pytest.mark.parametrize(
    "bad_id",
    ["trg_doesnotexist", "thr_doesnotexist", "wkr_doesnotexist", "nonsense", "TRG_ABC", "trg_-x"],
)
def test_unknown_malformed_and_wrong_kind_ids_answer_404_problem(
    api: httpx.Client, path: str, bad_id: str
) -> None:
    post_trigger(api)
    response = api.get(path.format(id=bad_id))
    body = assert_problem(response, 404, names=bad_id)
    assert body["instance"] == path.format(id=bad_id)


def test_an_existing_id_of_the_wrong_kind_answers_404(api: httpx.Client) -> None:
    record = post_trigger(api).json()
    assert_problem(api.get(f"/threads/{record['id']}"), 404, names=record["id"])
    assert_problem(api.get(f"/triggers/{record['thread_id']}"), 404, names=record["thread_id"])
    assert_problem(api.get(f"/workers/{record['id']}"), 404, names=record["id"])
    assert_problem(api.get(f"/threads/{record['id']}/events"), 404, names=record["id"])


def test_report_on_unknown_worker_answers_404_problem(api: httpx.Client) -> None:
    assert_problem(
        api.post("/workers/wkr_nope/report", json={"summary": "x"}), 404, names="wkr_nope"
    )


def test_framework_errors_are_problems_too(api: httpx.Client) -> None:
    assert_problem(api.get("/no/such/route"), 404)
    response = api.delete("/threads/thr_abc/events")
    assert_problem(response, 405)
    assert "GET" in response.headers["allow"]
    assert_problem(api.put("/triggers", json={}), 405)


def test_openapi_is_served(api: httpx.Client) -> None:
    spec = api.get("/openapi.json").json()
    assert {"/triggers/{trigger_id}", "/threads/{thread_id}/events", "/search"} <= set(
        spec["paths"]
    )


# -- paging --------------------------------------------------------------------------


def walk(
    api: httpx.Client, thread_id: str, limit: int | None = None
) -> tuple[list[dict[str, Any]], str]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = limit
        page = api.get(f"/threads/{thread_id}/events", params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        assert body["next_cursor"]
        items.extend(body["items"])
        cursor = body["next_cursor"]
        if not body["has_more"]:
            return items, cursor


def test_walking_yields_every_event_once_in_order(api: httpx.Client) -> None:
    thread_id = post_trigger(api, thread_key="t:walk", summary="e1").json()["thread_id"]
    batch = [
        {
            "source": "chat",
            "kind": "message",
            "thread_id": thread_id,
            "payload": i,
            "summary": f"e{i}",
        }
        for i in range(2, 24)
    ]
    assert api.post("/triggers/batch", json={"items": batch}).status_code == 200
    items, _ = walk(api, thread_id, limit=5)
    assert [e["seq"] for e in items] == list(range(1, 24))
    assert [e["summary"] for e in items] == [f"e{i}" for i in range(1, 24)]
    assert all(e["kind"] == "trigger" and e["id"].startswith("trg_") for e in items)


def test_the_last_cursor_later_yields_exactly_the_new_events(api: httpx.Client) -> None:
    thread_id = post_trigger(api, thread_key="t:later").json()["thread_id"]
    items, last = walk(api, thread_id)
    assert len(items) == 1
    empty = api.get(f"/threads/{thread_id}/events", params={"cursor": last}).json()
    assert empty["items"] == [] and empty["has_more"] is False and empty["next_cursor"]
    new = [post_trigger(api, thread_id=thread_id, thread_key=None).json()["id"] for _ in range(3)]
    page = api.get(f"/threads/{thread_id}/events", params={"cursor": last}).json()
    assert [e["id"] for e in page["items"]] == new


def test_workers_and_reports_appear_in_the_thread_events(api: httpx.Client) -> None:
    trigger = post_trigger(api, thread_key="t:w").json()
    worker = api.post("/workers", json={"thread_id": trigger["thread_id"], "task": "look"}).json()
    api.post(
        f"/workers/{worker['id']}/report",
        json={"summary": "done", "body": "b", "refs": [trigger["id"]], "status": "ready"},
    )
    items, _ = walk(api, trigger["thread_id"])
    assert [(e["kind"], e["id"]) for e in items] == [
        ("trigger", trigger["id"]),
        ("worker", worker["id"]),
        ("report", worker["id"]),
    ]


@pytest.mark.parametrize("limit", ["0", "-1", "501", "abc", "1.5", "", " "])
def test_a_limit_out_of_range_or_not_an_integer_is_400(api: httpx.Client, limit: str) -> None:
    thread_id = post_trigger(api).json()["thread_id"]
    response = api.get(f"/threads/{thread_id}/events", params={"limit": limit})
    if limit == "":
        assert response.status_code == 200  # an empty value means the default
    else:
        assert_problem(response, 400, names="limit")


def test_limit_accepts_the_documented_maximum(api: httpx.Client) -> None:
    thread_id = post_trigger(api).json()["thread_id"]
    assert api.get(f"/threads/{thread_id}/events", params={"limit": 500}).status_code == 200
    assert api.get(f"/threads/{thread_id}/events", params={"limit": 100}).status_code == 200


def test_forged_altered_and_foreign_cursors_answer_400(api: httpx.Client) -> None:
    a = post_trigger(api, thread_key="t:a").json()["thread_id"]
    b = post_trigger(api, thread_key="t:b").json()["thread_id"]
    cursor = api.get(f"/threads/{a}/events").json()["next_cursor"]
    altered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
    for bad in ["garbage", "", altered, cursor + "x", "YzE6dGhyX2FhYWE6OTk5"]:
        response = api.get(f"/threads/{a}/events", params={"cursor": bad})
        if bad == "":
            continue  # an empty cursor parameter is the start: not issued, but not forged
        assert_problem(response, 400)
    assert_problem(api.get(f"/threads/{b}/events", params={"cursor": cursor}), 400)


def test_paging_is_exactly_once_while_writers_append(server: ThreadServer) -> None:
    """Several threads append to one thread while a pager walks it with cursors."""
    with httpx.Client(base_url=server.url, timeout=30) as api:
        thread_id = post_trigger(api, thread_key="t:race").json()["thread_id"]
        errors: list[str] = []
        written: list[str] = []
        lock = threading.Lock()

        def writer(n: int) -> None:
            with httpx.Client(base_url=server.url, timeout=30) as own:
                for i in range(15):
                    r = post_trigger(own, thread_key=None, thread_id=thread_id, payload=f"{n}-{i}")
                    if r.status_code != 201:
                        errors.append(r.text)
                    with lock:
                        written.append(r.json()["id"])

        writers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for w in writers:
            w.start()
        seen: list[dict[str, Any]] = []
        cursor = None
        while any(w.is_alive() for w in writers) or cursor is None:
            params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
            body = api.get(f"/threads/{thread_id}/events", params=params).json()
            seen.extend(body["items"])
            cursor = body["next_cursor"]
        for w in writers:
            w.join(timeout=60)
        rest, _ = walk(api, thread_id)
        final = api.get(
            f"/threads/{thread_id}/events", params={"cursor": cursor, "limit": 500}
        ).json()
        seen.extend(final["items"])
        assert not errors
        assert [e["seq"] for e in seen] == list(range(1, 62))
        assert sorted(e["id"] for e in seen[1:]) == sorted(written)
        assert [e["id"] for e in rest] == [e["id"] for e in seen]


# -- writing -------------------------------------------------------------------------


def test_a_repeated_dedupe_key_answers_200_with_the_first_record(api: httpx.Client) -> None:
    first = post_trigger(api, dedupe_key="delivery-1", payload="a")
    again = post_trigger(api, dedupe_key="delivery-1", payload="b", thread_key="elsewhere")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json() == first.json()
    other_source = post_trigger(api, dedupe_key="delivery-1", source="github", thread_key="gh")
    assert other_source.status_code == 201
    thread = api.get(f"/threads/{first.json()['thread_id']}").json()
    assert thread["event_count"] == 1
    assert api.get("/threads", params={"key": "elsewhere"}).status_code == 404


def test_simultaneous_retries_with_one_dedupe_key_make_one_record(server: ThreadServer) -> None:
    results: list[httpx.Response] = []
    barrier = threading.Barrier(8)

    def retry() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as own:
            barrier.wait(timeout=10)
            results.append(post_trigger(own, dedupe_key="same-moment", thread_key="t:dup"))

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(r.status_code for r in results) == [200] * 7 + [201]
    assert len({r.json()["id"] for r in results}) == 1


def test_an_unknown_thread_id_is_422_naming_it(api: httpx.Client) -> None:
    for bad in ("thr_zzzzzzzz", "trg_zzzzzzzz", "???"):
        response = post_trigger(api, thread_key=None, thread_id=bad)
        assert_problem(response, 422, names=bad)


def test_a_report_ref_that_does_not_resolve_is_422_and_stores_nothing(api: httpx.Client) -> None:
    trigger = post_trigger(api).json()
    worker = api.post("/workers", json={"thread_id": trigger["thread_id"], "task": "t"}).json()
    bad = api.post(
        f"/workers/{worker['id']}/report",
        json={
            "summary": "s",
            "body": "b",
            "refs": [trigger["id"], "trg_missing1"],
            "status": "ready",
        },
    )
    assert_problem(bad, 422, names="trg_missing1")
    after = api.get(f"/workers/{worker['id']}").json()
    assert after["report"] is None and after["status"] == "running"


def test_a_worker_keeps_earlier_reports_and_shows_the_latest(api: httpx.Client) -> None:
    trigger = post_trigger(api).json()
    worker = api.post("/workers", json={"thread_id": trigger["thread_id"], "task": "t"}).json()
    for status in ("waiting", "ready"):
        response = api.post(
            f"/workers/{worker['id']}/report",
            json={
                "summary": f"now {status}",
                "body": "",
                "refs": [trigger["id"]],
                "status": status,
            },
        )
        assert response.status_code == 201
    record = api.get(f"/workers/{worker['id']}").json()
    assert record["status"] == "ready"
    assert record["report"]["summary"] == "now ready" and record["report"]["refs"] == [
        trigger["id"]
    ]
    assert [r["summary"] for r in record["earlier_reports"]] == ["now waiting"]
    assert record["thread_ids"] == [trigger["thread_id"]]


def test_a_worker_on_an_unknown_thread_is_422(api: httpx.Client) -> None:
    assert_problem(
        api.post("/workers", json={"thread_id": "thr_nope", "task": "t"}), 422, "thr_nope"
    )


BAD_BODIES: list[tuple[str, bytes | dict[str, Any]]] = [
    ("malformed json", b'{"source": "chat", '),
    ("not an object", b"[1, 2]"),
    ("missing source", {"kind": "m", "thread_key": "new:key", "payload": 1}),
    ("missing kind", {"source": "s", "thread_key": "new:key", "payload": 1}),
    ("missing payload", {"source": "s", "kind": "m", "thread_key": "new:key"}),
    ("missing thread", {"source": "s", "kind": "m", "payload": 1}),
    (
        "both threads",
        {"source": "s", "kind": "m", "thread_key": "new:key", "thread_id": "thr_x", "payload": 1},
    ),
    ("source not a string", {"source": 5, "kind": "m", "thread_key": "new:key", "payload": 1}),
    (
        "refs not a list",
        {"source": "s", "kind": "m", "thread_key": "new:key", "payload": 1, "refs": "trg_a"},
    ),
    (
        "unknown field",
        {"source": "s", "kind": "m", "thread_key": "new:key", "payload": 1, "thred": 1},
    ),
    ("empty source", {"source": "", "kind": "m", "thread_key": "new:key", "payload": 1}),
    (
        "bad time",
        {
            "source": "s",
            "kind": "m",
            "thread_key": "new:key",
            "payload": 1,
            "occurred_at": "yesterday",
        },
    ),
    (
        "unknown ref",
        {"source": "s", "kind": "m", "thread_key": "new:key", "payload": 1, "refs": ["trg_nope"]},
    ),
]


@pytest.mark.parametrize("name,body", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_input_answers_4xx_problem_and_stores_nothing(
    api: httpx.Client, name: str, body: bytes | dict[str, Any]
) -> None:
    if isinstance(body, bytes):
        response = api.post("/triggers", content=body, headers={"content-type": "application/json"})
    else:
        response = api.post("/triggers", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert_problem(response, response.status_code)
    assert_problem(api.get("/threads", params={"key": "new:key"}), 404)
    assert api.get("/threads").json() == []


def test_a_body_over_the_size_limit_answers_413_and_stores_nothing(store: Any) -> None:
    from chainrecall.api.app import create_app
    from chainrecall.config import ServerConfig

    app = create_app(store, ServerConfig(db=store.url, max_body_bytes=10_000))
    with ThreadServer(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as api:
        big = post_trigger(api, payload="x" * 20_000, thread_key="big:one")
        assert_problem(big, 413)

        def chunks() -> Any:  # no Content-Length: the limit is enforced while streaming
            for _ in range(20):
                yield b" " * 1000

        streamed = api.post(
            "/triggers", content=chunks(), headers={"content-type": "application/json"}
        )
        assert_problem(streamed, 413)
        assert api.get("/threads").json() == []
        assert post_trigger(api, payload="x" * 100).status_code == 201


def test_the_default_body_limit_is_25_mib(server: ThreadServer) -> None:
    """A body announced one byte over 25 MiB is refused before it is sent."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(
            b"POST /triggers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {25 * 1024 * 1024 + 1}\r\n\r\n".encode()
        )
        head = sock.recv(65536).decode()
    assert head.startswith("HTTP/1.1 413")
    assert "application/problem+json" in head


# -- search --------------------------------------------------------------------------


def test_search_finds_entry_points_by_summary_and_payload_text(api: httpx.Client) -> None:
    ci = post_trigger(
        api, thread_key="github:acme/payments#412", summary="CI failed on PR #412",
        payload={"log": "PaymentClientTimeout in test_charge"},
    ).json()  # fmt: skip
    post_trigger(api, thread_key="chat:lunch", summary="pizza on friday?")
    hits = api.get("/search", params={"q": "PaymentClientTimeout"}).json()["items"]
    assert hits[0]["id"] == ci["id"]
    assert hits[0]["thread_id"] == ci["thread_id"]
    assert hits[0]["summary"] == "CI failed on PR #412"
    assert all(h["id"] != "" for h in hits)
    assert_problem(api.get("/search"), 400, names="q")
    assert api.get("/search", params={"q": "nothing-matches-this"}).json()["items"] == []


def test_a_body_that_is_not_sent_as_json_says_how_to_send_it(api: httpx.Client) -> None:
    body = b'{"source": "s", "kind": "k", "thread_key": "form:key", "payload": 1}'
    form = api.post(
        "/triggers", content=body, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert "Content-Type: application/json" in assert_problem(form, 415)["detail"]
    empty = api.post("/triggers", headers={"content-type": "application/json"})
    assert "empty" in assert_problem(empty, 400)["detail"]
    assert_problem(api.get("/threads", params={"key": "form:key"}), 404)


def test_cited_by_lists_what_links_back_to_a_trigger(api: httpx.Client) -> None:
    first = post_trigger(api, thread_key="t:links", payload="CI failed").json()
    reply = post_trigger(api, thread_key="t:links", in_reply_to=first["id"]).json()
    citing = post_trigger(api, thread_key="t:other", refs=[first["id"]]).json()
    worker = api.post("/workers", json={"thread_id": first["thread_id"], "task": "fix"}).json()
    api.post(
        f"/workers/{worker['id']}/report", json={"summary": "fixed", "refs": [first["id"]]}
    ).raise_for_status()
    body = api.get(f"/triggers/{first['id']}/cited_by").json()
    assert body == {
        "id": first["id"],
        "cited_by": sorted([reply["id"], citing["id"], worker["id"]]),
    }
    assert api.get(f"/triggers/{reply['id']}/cited_by").json()["cited_by"] == []
    assert_problem(api.get("/triggers/trg_nothere1/cited_by"), 404, names="trg_nothere1")
    api.delete(f"/triggers/{reply['id']}").raise_for_status()  # its link goes with its content
    after = api.get(f"/triggers/{first['id']}/cited_by").json()["cited_by"]
    assert reply["id"] not in after and citing["id"] in after
    api.delete(f"/triggers/{first['id']}").raise_for_status()
    assert_problem(api.get(f"/triggers/{first['id']}/cited_by"), 410)

"""Tokens, scopes, namespaces, deletion and rate limits, over a live server on every backend."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainrecall.api.app import create_app
from chainrecall.auth import issue_token
from chainrecall.config import ServerConfig
from chainrecall.store import Store
from tests.servers import ProcessServer, ThreadServer, cli_env

TRIGGER = {"source": "chat", "kind": "message", "thread_key": "c:1", "payload": "secret plans"}


class Tokens:
    def __init__(self, store: Store) -> None:
        self.a_read = issue_token(store, "team-a", "read")[1]
        self.a_write = issue_token(store, "team-a", "write")[1]
        self.a_admin = issue_token(store, "team-a", "admin")[1]
        self.b_admin = issue_token(store, "team-b", "admin")[1]


@pytest.fixture
def tokens(store: Store) -> Tokens:
    return Tokens(store)


def as_token(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture
def seeded(api: httpx.Client, tokens: Tokens) -> dict[str, str]:
    created = api.post("/triggers", json=TRIGGER, headers=as_token(tokens.a_write)).json()
    worker = api.post(
        "/workers", json={"thread_id": created["thread_id"], "task": "t"},
        headers=as_token(tokens.a_write),
    ).json()  # fmt: skip
    return {"trigger": created["id"], "thread": created["thread_id"], "worker": worker["id"]}


def reads(ids: dict[str, str]) -> list[str]:
    return [
        f"/triggers/{ids['trigger']}",
        f"/triggers/{ids['trigger']}/payload",
        f"/threads/{ids['thread']}",
        f"/threads/{ids['thread']}/events",
        f"/workers/{ids['worker']}",
        "/search?q=secret",
        "/threads",
    ]


def test_with_tokens_every_call_needs_one(api: httpx.Client, seeded: dict[str, str]) -> None:
    for path in reads(seeded):
        body = problem(api.get(path), 401)
        assert "Bearer" in body["detail"]
    problem(api.post("/triggers", json=TRIGGER), 401)
    problem(api.get(reads(seeded)[0], headers=as_token("crt_not-a-token")), 401)
    problem(api.get(reads(seeded)[0], headers={"Authorization": "Basic abc"}), 401)
    assert api.get("/healthz").status_code == 200  # liveness stays open for load balancers


def test_scopes_nest_read_write_admin(
    api: httpx.Client, tokens: Tokens, seeded: dict[str, str]
) -> None:
    for path in reads(seeded):
        assert api.get(path, headers=as_token(tokens.a_read)).status_code == 200, path
    problem(api.post("/triggers", json=TRIGGER, headers=as_token(tokens.a_read)), 403)
    problem(
        api.post(f"/workers/{seeded['worker']}/report", json={"summary": "s"},
                 headers=as_token(tokens.a_read)), 403,
    )  # fmt: skip
    assert api.post("/triggers", json=TRIGGER, headers=as_token(tokens.a_admin)).status_code == 201
    for token in (tokens.a_read, tokens.a_write):
        problem(api.delete(f"/triggers/{seeded['trigger']}", headers=as_token(token)), 403)
        problem(api.get("/deletions", headers=as_token(token)), 403)


def test_another_namespace_sees_nothing_not_even_existence(
    api: httpx.Client, tokens: Tokens, seeded: dict[str, str]
) -> None:
    other = as_token(tokens.b_admin)
    for path in reads(seeded)[:5]:
        body = problem(api.get(path, headers=other), 404)
        unknown = problem(
            api.get(path.replace(path.split("/")[2], "trg_unknown0"), headers=other), 404
        )
        assert body["title"] == unknown["title"] and body["type"] == unknown["type"]
    assert api.get("/search", params={"q": "secret plans"}, headers=other).json()["items"] == []
    assert api.get("/threads", headers=other).json() == []
    problem(
        api.post("/triggers", json={**TRIGGER, "thread_key": None, "thread_id": seeded["thread"]},
                 headers=other), 422,
    )  # fmt: skip
    problem(api.delete(f"/triggers/{seeded['trigger']}", headers=other), 404)
    # the same natural key in another namespace is another thread
    mine = api.post("/triggers", json=TRIGGER, headers=other).json()
    assert mine["thread_id"] != seeded["thread"]


def test_delete_trigger_answers_410_and_erases_content(
    api: httpx.Client, tokens: Tokens, seeded: dict[str, str]
) -> None:
    admin = as_token(tokens.a_admin)
    second = api.post("/triggers", json={**TRIGGER, "payload": "keep me"}, headers=admin).json()
    cursor = api.get(f"/threads/{seeded['thread']}/events", params={"limit": 1}, headers=admin)
    deletion = api.delete(
        f"/triggers/{seeded['trigger']}", params={"reason": "gdpr"}, headers=admin
    )
    assert deletion.status_code == 200
    assert deletion.json()["actor"].startswith("tok_") and deletion.json()["reason"] == "gdpr"
    problem(api.get(f"/triggers/{seeded['trigger']}", headers=admin), 410)
    problem(api.get(f"/triggers/{seeded['trigger']}/payload", headers=admin), 410)
    problem(api.delete(f"/triggers/{seeded['trigger']}", headers=admin), 410)
    assert api.get("/search", params={"q": "secret plans"}, headers=admin).json()["items"] == []
    events = api.get(f"/threads/{seeded['thread']}/events", headers=admin).json()["items"]
    assert events[0] == {**events[0], "id": seeded["trigger"], "deleted": True, "summary": None}
    assert "secret" not in str(api.get(f"/threads/{seeded['thread']}", headers=admin).json())
    # a cursor issued before the deletion still pages on, across the erased event
    after = api.get(
        f"/threads/{seeded['thread']}/events",
        params={"cursor": cursor.json()["next_cursor"]}, headers=admin,
    ).json()  # fmt: skip
    assert [e["id"] for e in after["items"]][-1] == second["id"]
    log = api.get("/deletions", headers=admin).json()
    assert log[0]["object_id"] == seeded["trigger"]


def test_delete_thread_erases_its_triggers_and_retires_the_ids(
    api: httpx.Client, tokens: Tokens, seeded: dict[str, str]
) -> None:
    admin = as_token(tokens.a_admin)
    deletion = api.delete(f"/threads/{seeded['thread']}", headers=admin).json()
    assert deletion["erased_triggers"] == 1
    problem(api.get(f"/threads/{seeded['thread']}", headers=admin), 410)
    problem(api.get(f"/threads/{seeded['thread']}/events", headers=admin), 410)
    problem(api.get(f"/triggers/{seeded['trigger']}", headers=admin), 410)
    # the natural key starts afresh with a new thread; old IDs never come back
    again = api.post("/triggers", json=TRIGGER, headers=admin).json()
    assert again["thread_id"] != seeded["thread"] and again["id"] != seeded["trigger"]


def test_rate_limit_answers_429_with_retry_after(store: Store) -> None:
    token = issue_token(store, "default", "read")[1]
    app = create_app(store, ServerConfig(db=store.url, rate_limit=0.5, rate_burst=3))
    with ThreadServer(app) as server, httpx.Client(base_url=server.url) as api:
        answers = [api.get("/threads", headers=as_token(token)) for _ in range(5)]
    assert [a.status_code for a in answers[:3]] == [200, 200, 200]
    limited = answers[3]
    problem(limited, 429)
    assert int(limited.headers["retry-after"]) >= 1


def test_tokens_never_appear_in_logs(tmp_path: Path) -> None:
    db = str(tmp_path / "logs.db")
    env = cli_env()
    created = subprocess.run(
        [sys.executable, "-m", "chainrecall", "token", "create", "--db", db, "--scope", "write"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("crt_") and token not in created.stderr
    log = tmp_path / "server.log"
    with (
        ProcessServer(db, log_path=log, log_level="debug") as server,
        httpx.Client(base_url=server.url, headers=as_token(token)) as api,
    ):
        api.post("/triggers", json=TRIGGER).raise_for_status()
        api.get("/threads").raise_for_status()
        assert api.get("/threads", headers=as_token(token + "x")).status_code == 401
    listed = subprocess.run(
        [sys.executable, "-m", "chainrecall", "token", "list", "--db", db],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    text = log.read_text()
    assert "POST /triggers" in text  # the log did record the requests
    assert token not in text and token not in listed.stdout


def test_serve_refuses_a_public_address_without_tokens(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chainrecall", "serve", "--db", str(tmp_path / "x.db"),
         "--host", "0.0.0.0", "--port", "0"],
        env=cli_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "token create" in result.stderr and "--insecure" in result.stderr


def test_prune_dry_run_counts_and_prune_erases(tmp_path: Path) -> None:
    import chainrecall

    db = str(tmp_path / "prune.db")
    with chainrecall.open(db) as memory:
        old, _ = memory.record_trigger(source="s", kind="k", thread_key="t", payload="old")
    # received_at has one-second resolution: let the trigger age past a "0s" cutoff first
    time.sleep(1.1)
    run = [sys.executable, "-m", "chainrecall", "prune", "--db", db, "--older-than", "0s"]
    dry = subprocess.run([*run, "--dry-run"], env=cli_env(), capture_output=True, text=True)
    assert "1 triggers" in dry.stdout, dry.stderr
    with chainrecall.open(db) as memory:
        assert memory.get_trigger(old.id).summary == "old"
    done = subprocess.run(run, env=cli_env(), capture_output=True, text=True)
    assert "erased 1 triggers" in done.stdout, done.stderr
    with chainrecall.open(db) as memory, pytest.raises(chainrecall.Gone):
        memory.get_trigger(old.id)

"""Helpers of the ingest tests: a live server with webhook secrets, and signed senders."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from chainrecall.api.app import create_app
from chainrecall.config import ServerConfig
from chainrecall.ingest.chat import slack_sign
from chainrecall.ingest.github import sign
from chainrecall.store import Store
from tests.servers import ThreadServer

GITHUB_SECRET = "It's a Secret to Everybody"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
OWN_FIXTURES = Path(__file__).resolve().parent / "fixtures"


@contextmanager
def ingest_client(
    store: Store,
    *,
    github_secret: str | None = GITHUB_SECRET,
    slack_secret: str | None = SLACK_SECRET,
) -> Iterator[httpx.Client]:
    """An HTTP client to a live server over `store` with the given webhook secrets."""
    config = ServerConfig(
        db=store.url, github_secret=github_secret, slack_signing_secret=slack_secret
    )
    with (
        ThreadServer(create_app(store, config)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        yield client


def post_github(
    client: httpx.Client,
    event: str,
    body: bytes,
    *,
    delivery: str | None = None,
    secret: str | None = GITHUB_SECRET,
    signature: str | None = None,
    content_type: str = "application/json",
) -> httpx.Response:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": content_type,
        "User-Agent": "GitHub-Hookshot/test",
    }
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    elif secret is not None:
        headers["X-Hub-Signature-256"] = sign(secret, body)
    return client.post("/webhooks/github", content=body, headers=headers)


def post_slack(
    client: httpx.Client,
    payload: dict[str, Any],
    *,
    secret: str | None = SLACK_SECRET,
    timestamp: int | None = None,
) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        sent = str(int(time.time()) if timestamp is None else timestamp)
        headers["X-Slack-Request-Timestamp"] = sent
        headers["X-Slack-Signature"] = slack_sign(secret, sent, body)
    return client.post("/webhooks/slack", content=body, headers=headers)


def trigger_count(store: Store) -> int:
    """How many triggers the store holds, summed over its threads (all live)."""
    return sum(t.event_count for t in store.list_threads("default", 500))


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["detail"]
    return body


@contextmanager
def shared_ingest_server(db_path: Path) -> Iterator[tuple[Store, httpx.Client]]:
    """One store and server for many refusal tests (each compares counts before and after)."""
    from chainrecall.store import open_store

    store = open_store(str(db_path))
    try:
        with ingest_client(store) as client:
            yield store, client
    finally:
        store.close()

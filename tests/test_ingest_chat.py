"""Chat over real HTTP: the plain chat shape, and Slack's signed Events API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainrecall.ingest.chat import slack_sign, verify_slack_signature
from chainrecall.service import Memory
from chainrecall.store import Store
from tests.ingest_support import (
    SLACK_SECRET,
    assert_problem,
    ingest_client,
    post_slack,
    shared_ingest_server,
    trigger_count,
)

TEAM = "T0001"
CHANNEL = "C0PAYMENTS"


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, httpx.Client]]:
    with shared_ingest_server(tmp_path_factory.mktemp("chat") / "memory.db") as running:
        yield running


def slack_message(event_id: str, ts: str, text: str, **event: Any) -> dict[str, Any]:
    return {
        "token": "unused-verification-token",
        "team_id": TEAM,
        "api_app_id": "A0001",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1793000000,
        "event": {
            "type": "message",
            "channel": CHANNEL,
            "user": "U0ALICE",
            "text": text,
            "ts": ts,
            **event,
        },
    }


def test_plain_chat_messages_thread_by_root_and_cite_what_they_answer(store: Store) -> None:
    memory = Memory(store)
    with ingest_client(store) as client:
        root = client.post(
            "/ingest/chat",
            json={
                "channel": "payments-dev", "author": "alice", "message_id": "m-1",
                "text": "Staging deploy of the retry PR is failing the health check",
                "occurred_at": "2026-11-03T09:12:44+01:00",
            },
        )  # fmt: skip
        reply = client.post(
            "/ingest/chat",
            json={"channel": "payments-dev", "author": "bob", "message_id": "m-2",
                  "thread": "m-1", "text": "Looking at the timeout budget now"},
        )  # fmt: skip
        answer = client.post(
            "/ingest/chat",
            json={"channel": "payments-dev", "author": "alice", "message_id": "m-3",
                  "reply_to": "m-2", "text": "thanks!"},
        )  # fmt: skip
        retried = client.post(
            "/ingest/chat",
            json={"channel": "payments-dev", "author": "alice", "message_id": "m-3",
                  "reply_to": "m-2", "text": "thanks!"},
        )  # fmt: skip
        other = client.post(
            "/ingest/chat", json={"channel": "random", "text": "lunch?", "author": "carol"}
        )
    assert [r.status_code for r in (root, reply, answer, retried, other)] == [
        201, 201, 201, 200, 201,
    ]  # fmt: skip
    first, second, third = root.json(), reply.json(), answer.json()
    assert memory.get_thread(first["thread_id"]).key == "chat:payments-dev/m-1"
    assert second["thread_id"] == first["thread_id"] == third["thread_id"]
    assert second["in_reply_to"] == first["id"]
    assert third["in_reply_to"] == second["id"]
    assert retried.json()["id"] == third["id"]
    assert first["summary"].startswith("alice in payments-dev: Staging deploy")
    assert first["occurred_at"] == "2026-11-03T08:12:44Z"
    assert memory.get_thread(other.json()["thread_id"]).key == "chat:random"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b'["a list"]',
        b'{"text": "no channel"}',
        b'{"channel": "c"}',
        b'{"channel": "c", "text": ""}',
        b'{"channel": "c", "text": 5}',
        b'{"channel": "c", "text": "hi", "colour": "red"}',
        b'{"channel": "c", "text": "hi", "occurred_at": "yesterday"}',
        b'{"channel": "c\\u0007", "text": "hi"}',
    ],
    ids=[
        "empty", "not-json", "array", "no-channel", "no-text", "empty-text", "text-not-string",
        "unknown-field", "bad-time", "control-char-in-channel",
    ],
)  # fmt: skip
def test_malformed_chat_answers_400_and_stores_nothing(
    hooks: tuple[Store, httpx.Client], body: bytes
) -> None:
    store, client = hooks
    before = trigger_count(store)
    response = client.post(
        "/ingest/chat", content=body, headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 400)
    assert trigger_count(store) == before


def test_slack_url_verification_answers_the_challenge_and_stores_nothing(
    hooks: tuple[Store, httpx.Client],
) -> None:
    store, client = hooks
    before = trigger_count(store)
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    response = post_slack(
        client, {"token": "x", "challenge": challenge, "type": "url_verification"}
    )
    assert response.status_code == 200
    assert response.json() == {"challenge": challenge}
    assert trigger_count(store) == before


@pytest.mark.parametrize("case", ["unsigned", "wrong-secret", "stale", "future"])
def test_unsigned_or_badly_signed_slack_requests_are_401_and_store_nothing(
    hooks: tuple[Store, httpx.Client], case: str
) -> None:
    store, client = hooks
    before = trigger_count(store)
    payload = slack_message("Ev-refused", "1793000000.000100", "should not be stored")
    now = int(time.time())
    if case == "unsigned":
        response = post_slack(client, payload, secret=None)
    elif case == "wrong-secret":
        response = post_slack(client, payload, secret=SLACK_SECRET + "0")
    elif case == "stale":
        response = post_slack(client, payload, timestamp=now - 301)
    else:
        response = post_slack(client, payload, timestamp=now + 301)
    assert_problem(response, 401)
    assert trigger_count(store) == before
    challenge = post_slack(
        client, {"type": "url_verification", "challenge": "c"}, secret=None
    )  # a challenge is answered only when signed
    assert_problem(challenge, 401)


def test_slack_signature_check_matches_slacks_documented_example() -> None:
    # the example of api.slack.com/authentication/verifying-requests-from-slack
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
        b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    assert slack_sign("8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body) == signature
    verify_slack_signature(
        "8f742231b10e8888abcd99yyyzzz85a5", body, "1531420618", signature, now=1531420618 + 10
    )


def test_slack_messages_thread_by_thread_ts_and_retries_are_not_doubled(store: Store) -> None:
    memory = Memory(store)
    with ingest_client(store) as client:
        root = post_slack(client, slack_message("Ev1", "1793000000.000100", "deploy is red"))
        reply = post_slack(
            client,
            slack_message(
                "Ev2", "1793000050.000200", "rolling back", thread_ts="1793000000.000100",
                user="U0BOB",
            ),
        )  # fmt: skip
        retry = post_slack(
            client,
            slack_message(
                "Ev2", "1793000050.000200", "rolling back", thread_ts="1793000000.000100",
                user="U0BOB",
            ),
        )  # fmt: skip
        edited = post_slack(
            client,
            {
                **slack_message("Ev3", "1793000060.000300", ""),
                "event": {
                    "type": "message", "subtype": "message_changed", "channel": CHANNEL,
                    "ts": "1793000060.000300",
                    "message": {"user": "U0ALICE", "text": "deploy is red (again)",
                                "ts": "1793000000.000100"},
                },
            },
        )  # fmt: skip
        reaction = post_slack(
            client,
            {
                **slack_message("Ev4", "1", ""),
                "event": {
                    "type": "reaction_added", "user": "U0CAROL", "reaction": "eyes",
                    "item": {"type": "message", "channel": CHANNEL, "ts": "1793000050.000200"},
                    "event_ts": "1793000070.000400",
                },
            },
        )  # fmt: skip
        team_event = post_slack(
            client,
            {**slack_message("Ev5", "1", ""),
             "event": {"type": "team_join", "user": {"id": "U0DAVE"}}},
        )  # fmt: skip
    assert [r.status_code for r in (root, reply, retry, edited, reaction, team_event)] == [
        201, 201, 200, 201, 201, 201,
    ]  # fmt: skip
    first = root.json()
    key = memory.get_thread(first["thread_id"]).key
    assert key == f"slack:{TEAM}/{CHANNEL}/1793000000.000100"
    assert reply.json()["thread_id"] == first["thread_id"]
    assert reply.json()["in_reply_to"] == first["id"]
    assert retry.json()["id"] == reply.json()["id"]
    assert edited.json()["thread_id"] == first["thread_id"]
    assert first["id"] in edited.json()["refs"]
    assert reaction.json()["thread_id"] == first["thread_id"]  # where its message went
    assert reply.json()["id"] in reaction.json()["refs"]
    assert memory.get_thread(team_event.json()["thread_id"]).key == f"slack:{TEAM}"
    assert first["summary"] == f"U0ALICE in {CHANNEL}: deploy is red"
    assert first["occurred_at"] == "2026-10-26T07:33:20Z"
    assert trigger_count(store) == 5


def test_slack_without_a_signing_secret_refuses_and_says_how_to_configure(store: Store) -> None:
    with ingest_client(store, slack_secret=None) as client:
        response = post_slack(client, slack_message("Ev1", "1.0", "hi"))
    problem = assert_problem(response, 503)
    assert "--slack-signing-secret" in problem["detail"]
    assert trigger_count(store) == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "event_callback", "team_id": TEAM, "event_id": "Ev9"},
        {"type": "event_callback", "team_id": TEAM, "event": {"type": "message"}},
        {"type": "url_verification"},
        {"no": "type"},
    ],
    ids=["no-event", "no-event-id", "no-challenge", "no-type"],
)
def test_malformed_slack_events_answer_400_and_store_nothing(
    hooks: tuple[Store, httpx.Client], payload: dict[str, Any]
) -> None:
    store, client = hooks
    before = trigger_count(store)
    assert_problem(post_slack(client, payload), 400)
    assert trigger_count(store) == before


def test_a_signed_body_that_is_not_json_is_400(hooks: tuple[Store, httpx.Client]) -> None:
    store, client = hooks
    before = trigger_count(store)
    body = b"payload=not-json"
    sent = str(int(time.time()))
    response = client.post(
        "/webhooks/slack",
        content=body,
        headers={
            "X-Slack-Request-Timestamp": sent,
            "X-Slack-Signature": slack_sign(SLACK_SECRET, sent, body),
        },
    )
    assert_problem(response, 400)
    assert trigger_count(store) == before
    assert json.loads(response.text)["instance"] == "/webhooks/slack"


@pytest.mark.slow
def test_serve_takes_the_slack_secret_from_its_flag_and_the_github_secret_from_env(
    tmp_path: Path,
) -> None:
    from tests.ingest_support import GITHUB_SECRET, post_github
    from tests.servers import ProcessServer

    server = ProcessServer(
        str(tmp_path / "served.db"),
        "--slack-signing-secret",
        SLACK_SECRET,
        env={"CHAINRECALL_GITHUB_SECRET": GITHUB_SECRET},
    )
    with server, httpx.Client(base_url=server.url, timeout=30) as client:
        verified = post_slack(client, {"type": "url_verification", "challenge": "xyz"})
        ping = post_github(client, "ping", b'{"zen": "Keep it logically awesome."}')
    assert verified.status_code == 200 and verified.json() == {"challenge": "xyz"}
    assert ping.status_code == 201, ping.text
    assert ping.json()["summary"].startswith("webhook ping")


def test_plain_ingest_posts_need_a_token_once_the_server_has_tokens(store: Store) -> None:
    from chainrecall.auth import issue_token

    _, writer = issue_token(store, "ops", "write")
    _, reader = issue_token(store, "ops", "read")
    message = {"channel": "ops", "text": "disk 91% full", "message_id": "x1"}
    with ingest_client(store) as client:
        anonymous = client.post("/ingest/chat", json=message)
        read_only = client.post(
            "/ingest/chat", json=message, headers={"Authorization": f"Bearer {reader}"}
        )
        written = client.post(
            "/ingest/chat", json=message, headers={"Authorization": f"Bearer {writer}"}
        )
        ci_anonymous = client.post("/ingest/ci", json={"run_id": 1, "status": "passed"})
        # webhooks prove their sender by signature, not by token
        hook = post_slack(client, slack_message("Ev-t", "1793000000.000100", "signed"))
    assert_problem(anonymous, 401)
    assert_problem(read_only, 403)
    assert_problem(ci_anonymous, 401)
    assert written.status_code == 201, written.text
    assert Memory(store, "ops").find_thread("chat:ops/x1").event_count == 1
    assert hook.status_code == 201, hook.text
    assert trigger_count(store) == 1  # the default namespace holds only the webhook's

"""GitHub webhooks over real HTTP: signatures, redelivery, routing, summaries and links."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from chainrecall.errors import NotFound
from chainrecall.service import Memory
from chainrecall.store import Store
from tests.conftest import shared_path
from tests.ingest_support import (
    GITHUB_SECRET,
    OWN_FIXTURES,
    assert_problem,
    ingest_client,
    post_github,
    shared_ingest_server,
    trigger_count,
)

HELLO = "github:Codertocat/Hello-World"


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, httpx.Client]]:
    """One server for the refusal tests: each checks that the count did not change."""
    with shared_ingest_server(tmp_path_factory.mktemp("hooks") / "memory.db") as running:
        yield running


# CI events and pushes of the shared fixtures, sent after every pull_request* and push
# fixture: where the rules put each (by pull_requests[], a PR seen with the same head
# SHA or branch, a push of the commit, else the branch or commit).
EXPECTED_CI_AND_PUSH = {
    "check_run/completed.1.payload.json": f"{HELLO}#2",
    "check_run/completed.payload.json": f"{HELLO}#2",
    "check_run/completed.with-organization.payload.json": f"{HELLO}#2",
    "check_run/created.payload.json": f"{HELLO}#2",
    "check_run/created.with-organization.payload.json": f"{HELLO}#2",
    "check_run/requested_action.payload.json": "github:electron/electron#26764",
    "check_run/rerequested.payload.json": "github:github/hello-world:branch:master",
    "check_run/rerequested.with-organization.payload.json": "github:github/hello-world:branch:master",
    # no pull_requests[], but its head SHA is PR #2's
    "check_suite/completed.1.payload.json": f"{HELLO}#2",
    "check_suite/completed.payload.json": f"{HELLO}#2",
    "check_suite/completed.with-organization.payload.json": f"{HELLO}#2",
    "check_suite/requested.payload.json": f"{HELLO}:branch:master",
    "check_suite/requested.payload.with-email-with-special-characters.json": f"{HELLO}:branch:master",
    "check_suite/requested.with-organization.payload.json": f"{HELLO}:branch:master",
    "check_suite/rerequested.payload.json": f"{HELLO}#2",
    "check_suite/rerequested.with-organization.payload.json": f"{HELLO}#2",
    "workflow_job/completed.failure.with-organization.payload.json": f"{HELLO}:branch:main",
    "workflow_job/completed.success.with-organization.payload.json": f"{HELLO}:branch:main",
    "workflow_job/in_progress.payload.json": f"{HELLO}:branch:main",
    "workflow_job/in_progress.with-queued-steps.payload.json": (
        "github:wolfy1339/github-events-schemas:branch:renovate/got-13.x"
    ),
    "workflow_job/queued.payload.json": f"{HELLO}:branch:main",
    "workflow_job/queued.with-deployment.payload.json": (
        "github:lineville/elastic-machines-testing:branch:main"
    ),
    "workflow_job/waiting.payload.json": "github:lineville/elastic-machines-testing:branch:main",
    "workflow_run/completed.payload.json": "github:octo-org/octo-repo:branch:master",
    "workflow_run/completed.with-pull-requests.payload.json": "github:octo-org/octo-repo#2",
    "workflow_run/requested.payload.json": "github:octo-org/octo-repo:branch:master",
    "workflow_run/requested.with-conclusion.payload.json": "github:octo-org/octo-repo:branch:master",
    # the commit of a status was pushed to master: the status joins that branch's thread
    "status/payload.json": f"{HELLO}:branch:master",
    "status/with-author-committer-null.payload.json": f"{HELLO}:branch:master",
    "status/with-installation.payload.json": f"{HELLO}:branch:master",
    "push/1.payload.json": f"{HELLO}:tag:simple-tag",
    "push/payload.json": f"{HELLO}:tag:simple-tag",
    "push/with-installation.payload.json": f"{HELLO}:tag:simple-tag",
    "push/with-new-branch.payload.json": f"{HELLO}:branch:master",
    "push/with-no-username-committer.payload.json": f"{HELLO}:branch:master",
    "push/with-organization.payload.json": f"{HELLO}:tag:simple-tag",
}


def expected_key(name: str, payload: dict[str, Any]) -> str:
    """The thread key the issue's rules give a shared fixture."""
    if name in EXPECTED_CI_AND_PUSH:
        return EXPECTED_CI_AND_PUSH[name]
    event = name.split("/")[0]
    repo = (payload.get("repository") or {}).get("full_name")
    if event.startswith("pull_request"):
        return f"github:{repo}#{payload['pull_request']['number']}"
    if event in {"issues", "issue_comment"}:
        return f"github:{repo}#{payload['issue']['number']}"
    assert event not in {"check_run", "check_suite", "workflow_run", "workflow_job", "status"}
    return f"github:{repo}" if repo else f"github:{payload['organization']['login']}"


def payload_numbers(payload: dict[str, Any]) -> list[int]:
    """The PR, issue or discussion numbers a delivery carries."""
    numbers = [
        (payload.get(name) or {}).get("number") for name in ("pull_request", "issue", "discussion")
    ]
    for name in ("check_run", "check_suite", "workflow_run"):
        numbers += [pr.get("number") for pr in (payload.get(name) or {}).get("pull_requests", [])]
    return [n for n in numbers if isinstance(n, int)]


def send_order(root: Path) -> list[Path]:
    files = sorted(root.glob("*/*.json"))

    def rank(path: Path) -> int:
        event = path.parent.name
        return 0 if event.startswith("pull_request") else 1 if event == "push" else 2

    return sorted(files, key=lambda p: (rank(p), str(p)))


def test_every_shared_fixture_is_accepted_routed_and_summarised(store: Store) -> None:
    root = shared_path("fixtures", "github-webhooks")
    files = send_order(root)
    assert len(files) == 136
    memory = Memory(store)
    records: dict[str, dict[str, Any]] = {}
    with ingest_client(store) as client:
        for path in files:
            name = path.relative_to(root).as_posix()
            body = path.read_bytes()
            response = post_github(client, path.parent.name, body)
            assert response.status_code == 201, (name, response.text)
            record = response.json()
            records[name] = record
            payload = json.loads(body)
            key = memory.get_thread(record["thread_id"]).key
            assert key == expected_key(name, payload), name
            for number in payload_numbers(payload):
                assert f"#{number}" in record["summary"], (name, record["summary"])
            if match := re.search(r"#(\d+)$", key):
                assert f"#{match.group(1)}" in record["summary"], (name, record["summary"])
            assert record["source"] == "github" and record["kind"].startswith(path.parent.name)
            assert len(record["summary"]) <= 200
            stored = client.get(f"/triggers/{record['id']}/payload")
            assert stored.content == body, name  # byte for byte
    assert trigger_count(store) == 136  # nothing dropped, nothing doubled

    # a CI trigger cites the latest PR update with its head SHA
    update = records["pull_request/synchronize.payload.json"]["id"]
    assert update in records["check_run/completed.1.payload.json"]["refs"]
    assert update in records["check_suite/completed.1.payload.json"]["refs"]
    failed = records["check_run/completed.1.payload.json"]["summary"]
    assert "Octocoders-linter" in failed and "failed" in failed
    job = records["workflow_job/completed.failure.with-organization.payload.json"]["summary"]
    assert "failed" in job and "linters" in job
    # the push that made a commit a branch head is cited by the status on it
    push = records["push/with-no-username-committer.payload.json"]["id"]
    assert push in records["status/payload.json"]["refs"]
    # an edit of a comment cites the comment's first event
    created = records["pull_request_review_comment/created.payload.json"]["id"]
    assert created in records["pull_request_review_comment/edited.payload.json"]["refs"]
    # neighbours: each trigger cites the previous one on its thread
    second = memory.get_trigger(
        records["pull_request/assigned.with-organization.payload.json"]["id"]
    )
    assert second.neighbours.prev == records["pull_request/assigned.payload.json"]["id"]


def own_deliveries() -> list[tuple[str, bytes, str]]:
    root = OWN_FIXTURES / "github"
    files = sorted(root.glob("*/*.json"), key=lambda p: p.name)
    return [(p.parent.name, p.read_bytes(), p.name) for p in files]


def test_own_fixtures_route_by_sha_branch_push_and_reply(store: Store) -> None:
    memory = Memory(store)
    out: dict[str, dict[str, Any]] = {}
    with ingest_client(store) as client:
        for event, body, name in own_deliveries():
            response = post_github(client, event, body)
            assert response.status_code == 201, response.text
            out[name] = response.json()

    def key(name: str) -> str:
        return memory.get_thread(out[name]["thread_id"]).key

    pr = "github:acme/payments#412"
    assert key("1-opened.json") == pr
    assert out["1-opened.json"]["summary"] == (
        "alice opened PR #412: Retry payment client calls on timeout"
    )
    assert key("3-reply.json") == pr
    assert out["3-reply.json"]["in_reply_to"] == out["2-created.json"]["id"]
    assert "payments/client.py:88" in out["2-created.json"]["summary"]
    # a check run without pull_requests[] finds the PR by its head SHA, cites the PR update
    assert key("4-failed-by-sha.json") == pr
    check = out["4-failed-by-sha.json"]
    assert check["summary"] == (
        "Check 'unit-tests' failed on PR #412 (aaaa111): 3 of 118 tests red in payments/tests/"
    )
    assert out["1-opened.json"]["id"] in check["refs"]
    # a job on a new SHA of the PR's branch finds the PR by branch
    assert key("5-by-branch.json") == pr
    assert "at step 'Run ruff'" in out["5-by-branch.json"]["summary"]
    assert key("6-main.json") == "github:acme/payments:branch:main"
    assert out["6-main.json"]["summary"].startswith("alice pushed 1 commit to branch main")
    # a status on the pushed commit joins the branch and cites the push
    assert key("7-on-pushed-commit.json") == "github:acme/payments:branch:main"
    assert out["6-main.json"]["id"] in out["7-on-pushed-commit.json"]["refs"]
    assert "health check timed out" in out["7-on-pushed-commit.json"]["summary"]
    # a commit on two branches, never pushed here: its own commit thread
    assert key("8-unknown-commit.json") == (
        "github:acme/payments:commit:eeee111122223333444455556666777788889999"
    )
    # an event type this code has never heard of is stored on the repository thread
    assert key("9-an-event-type-from-the-future.json") == "github:acme/payments"
    assert out["9-an-event-type-from-the-future.json"]["kind"] == "repository_ruleset.created"
    hits = memory.search("retry budget configurable")
    assert out["2-created.json"]["id"] in [hit.id for hit in hits.items]


def _one_delivery() -> tuple[str, bytes]:
    event, body, _ = own_deliveries()[0]
    return event, body


def test_a_redelivery_answers_200_with_the_record_already_stored(store: Store) -> None:
    event, body = _one_delivery()
    with ingest_client(store) as client:
        first = post_github(client, event, body, delivery="d-1")
        again = post_github(client, event, body, delivery="d-1")
        other = post_github(client, event, body, delivery="d-2")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json() == first.json()
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    assert trigger_count(store) == 2


@pytest.mark.parametrize(
    "signature",
    [
        None,  # missing
        "sha256=" + "0" * 64,  # wrong
        "sha1=2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",  # not the SHA-256 header's form
        "",
    ],
    ids=["missing", "wrong", "sha1", "empty"],
)
def test_a_missing_or_wrong_signature_is_401_and_stores_nothing(
    hooks: tuple[Store, httpx.Client], signature: str | None
) -> None:
    store, client = hooks
    before = trigger_count(store)
    event, body = _one_delivery()
    if signature is None:
        response = post_github(client, event, body, secret=None)
    else:
        response = post_github(client, event, body, signature=signature)
    problem = assert_problem(response, 401)
    assert "X-Hub-Signature-256" in problem["detail"]
    assert trigger_count(store) == before


def test_a_signature_made_with_another_secret_or_over_other_bytes_is_refused(
    hooks: tuple[Store, httpx.Client],
) -> None:
    store, client = hooks
    before = trigger_count(store)
    event, body = _one_delivery()
    response = post_github(client, event, body, secret=GITHUB_SECRET + "x")
    tampered = post_github(client, event, body.replace(b"alice", b"mallory"), signature=_sign(body))
    assert_problem(response, 401)
    assert_problem(tampered, 401)
    assert trigger_count(store) == before
    assert post_github(client, event, body).status_code == 201  # the same, signed right


def _sign(body: bytes) -> str:
    from chainrecall.ingest.github import sign

    return sign(GITHUB_SECRET, body)


def test_without_a_secret_configured_deliveries_are_refused_with_how_to_configure(
    store: Store,
) -> None:
    event, body = _one_delivery()
    with ingest_client(store, github_secret=None) as client:
        response = post_github(client, event, body)
    problem = assert_problem(response, 503)
    assert "--github-secret" in problem["detail"]
    assert "CHAINRECALL_GITHUB_SECRET" in problem["detail"]
    assert trigger_count(store) == 0


def test_a_form_encoded_delivery_is_accepted_and_kept_as_sent(store: Store) -> None:
    event, body = _one_delivery()
    form = urlencode({"payload": body.decode()}).encode()
    with ingest_client(store) as client:
        response = post_github(
            client, event, form, content_type="application/x-www-form-urlencoded"
        )
        assert response.status_code == 201, response.text
        stored = client.get(f"/triggers/{response.json()['id']}/payload")
    assert stored.content == form
    assert "PR #412" in response.json()["summary"]


@pytest.mark.parametrize(
    ("event", "body", "headers_removed"),
    [
        ("pull_request", b"{not json", ()),
        ("pull_request", b"[1, 2]", ()),
        ("pull_request", b"", ()),
        ("pull_request", b'{"action": "opened", "repository": {"full_name": "a/b"}}', ()),
        ("issues", b'{"issue": {"number": "one"}, "repository": {"full_name": "a/b"}}', ()),
        ("check_run", b'{"action": "completed", "check_run": {"name": "x"}}', ()),
        ("push", b'{"repository": {"full_name": "a/b"}}', ()),
        ("Not An Event!", b"{}", ()),
        ("ping", b'{"zen": "hi"}', ("X-GitHub-Delivery",)),
        ("ping", b'{"zen": "hi"}', ("X-GitHub-Event",)),
    ],
    ids=[
        "bad-json", "array", "empty", "pr-without-pull_request", "issue-number-not-int",
        "check-without-repository", "push-without-ref", "bad-event-name", "no-delivery-id",
        "no-event-header",
    ],
)  # fmt: skip
def test_malformed_deliveries_answer_400_and_store_nothing(
    hooks: tuple[Store, httpx.Client], event: str, body: bytes, headers_removed: tuple[str, ...]
) -> None:
    store, client = hooks
    before = trigger_count(store)
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "d-malformed",
        "X-Hub-Signature-256": _sign(body),
        "Content-Type": "application/json",
    }
    for name in headers_removed:
        del headers[name]
    response = client.post("/webhooks/github", content=body, headers=headers)
    assert_problem(response, 400)
    assert trigger_count(store) == before


def test_a_delivery_over_the_size_limit_is_413(store: Store) -> None:
    from chainrecall.api.app import create_app
    from chainrecall.config import ServerConfig
    from tests.servers import ThreadServer

    body = json.dumps({"zen": "x" * 5000, "repository": {"full_name": "a/b"}}).encode()
    config = ServerConfig(db=store.url, github_secret=GITHUB_SECRET, max_body_bytes=1000)
    with (
        ThreadServer(create_app(store, config)) as server,
        httpx.Client(base_url=server.url) as client,
    ):
        response = post_github(client, "ping", body)
    assert_problem(response, 413)
    assert trigger_count(store) == 0


def test_control_characters_in_a_title_are_kept_in_the_payload_not_the_summary(
    store: Store,
) -> None:
    event, body = _one_delivery()
    payload = json.loads(body)
    payload["pull_request"]["title"] = "Fix \u001b[31mred\u001b[0m output\u0000"
    raw = json.dumps(payload).encode()
    with ingest_client(store) as client:
        response = post_github(client, event, raw)
        assert response.status_code == 201, response.text
        assert client.get(f"/triggers/{response.json()['id']}/payload").content == raw
    assert response.json()["summary"] == "alice opened PR #412: Fix [31mred [0m output"


def test_a_secret_set_for_a_namespace_routes_its_deliveries_there(store: Store) -> None:
    store.set_webhook_secret("team-b", "github", "team-b-secret")
    event, body = _one_delivery()
    with ingest_client(store) as client:
        ours = post_github(client, event, body)
        theirs = post_github(client, event, body, secret="team-b-secret")
        neither = post_github(client, event, body, secret="nobody's")
    assert ours.status_code == 201 and theirs.status_code == 201
    assert_problem(neither, 401)
    team_b = Memory(store, "team-b")
    assert team_b.get_trigger(theirs.json()["id"]).summary == theirs.json()["summary"]
    with pytest.raises(NotFound):
        Memory(store).get_trigger(theirs.json()["id"])
    with pytest.raises(NotFound):
        team_b.get_trigger(ours.json()["id"])


def test_a_stored_secret_alone_is_enough_to_accept_deliveries(store: Store) -> None:
    store.set_webhook_secret("default", "github", "only-in-the-database")
    event, body = _one_delivery()
    with ingest_client(store, github_secret=None) as client:
        response = post_github(client, event, body, secret="only-in-the-database")
    assert response.status_code == 201, response.text

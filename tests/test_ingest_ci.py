"""CI callbacks over real HTTP: routing to PRs, large logs stored whole, lean records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chainrecall.ingest.common import RunCounts, count_tests, describe_counts, failing_area
from chainrecall.service import Memory
from chainrecall.store import Store
from tests.ingest_support import (
    OWN_FIXTURES,
    assert_problem,
    ingest_client,
    post_github,
    shared_ingest_server,
    trigger_count,
)

HEAD = "aaaa111122223333444455556666777788889999"


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, httpx.Client]]:
    with shared_ingest_server(tmp_path_factory.mktemp("ci") / "memory.db") as running:
        yield running


def big_log(size: int = 200 * 1024) -> str:
    failures = (
        "FAILED payments/tests/test_retry.py::test_budget - AssertionError: 4 != 3\n"
        "FAILED payments/tests/test_retry.py::test_jitter - TimeoutError\n"
        "FAILED payments/client/test_http.py::test_timeout - TimeoutError\n"
        "=========== 3 failed, 115 passed, 2 skipped in 41.20s ===========\n"
    )
    filler = "".join(f"payments/tests/test_case_{i}.py::test_ok PASSED\n" for i in range(200))
    log = ""
    while len(log) + len(failures) < size:
        log += filler
    return log[: size - len(failures)] + failures


def test_a_callback_with_a_200_kb_log_is_stored_whole_with_a_lean_record(store: Store) -> None:
    memory = Memory(store)
    opened = (OWN_FIXTURES / "github" / "pull_request" / "1-opened.json").read_bytes()
    with ingest_client(store) as client:
        pr = post_github(client, "pull_request", opened).json()
        running = client.post(
            "/ingest/ci",
            json={"run_id": 8812, "status": "running", "provider": "buildkite", "name": "unit",
                  "repository": "acme/payments", "commit": HEAD},
        )  # fmt: skip
        body = json.dumps(
            {"run_id": "8812", "status": "failed", "provider": "buildkite", "name": "unit",
             "repository": "acme/payments", "commit": HEAD, "log": big_log(),
             "url": "https://ci.example.com/runs/8812"}
        ).encode()  # fmt: skip
        failed = client.post(
            "/ingest/ci", content=body, headers={"Content-Type": "application/json"}
        )
        again = client.post(
            "/ingest/ci", content=body, headers={"Content-Type": "application/json"}
        )
        record_bytes = client.get(f"/triggers/{failed.json()['id']}").content
        payload = client.get(f"/triggers/{failed.json()['id']}/payload")
    assert running.status_code == 201 and failed.status_code == 201, failed.text
    record = failed.json()
    assert len(body) > 200 * 1024
    assert payload.content == body  # whole, byte for byte
    assert len(record_bytes) < 1500  # the record points at the log, never carries it
    assert record["payload"]["bytes"] == len(body)
    assert record["summary"] == (
        "CI failed on PR #412: 3 of 118 tests red in payments/ (unit, run 8812)"
    )
    # found the PR by the commit's SHA, cites the PR update and the run's previous status
    assert memory.get_thread(record["thread_id"]).key == "github:acme/payments#412"
    assert record["thread_id"] == pr["thread_id"] == running.json()["thread_id"]
    assert pr["id"] in record["refs"] and running.json()["id"] in record["refs"]
    assert again.status_code == 200 and again.json()["id"] == record["id"]
    # the failing tests are searchable although the log is not indexed whole
    assert record["id"] in [h.id for h in memory.search("test_jitter TimeoutError").items]


@pytest.mark.parametrize(
    ("callback", "key", "summary"),
    [
        ({"run_id": "r1", "status": "passed", "provider": "gitlab", "pr": 7},
         "ci:gitlab:pr:7", "CI passed on PR #7 (run r1)"),
        ({"run_id": "r2", "status": "queued", "branch": "main", "name": "nightly"},
         "ci:ci:branch:main", "CI queued on branch main (nightly, run r2)"),
        ({"run_id": "r3", "status": "errored", "commit": "abcdef1234567"},
         "ci:ci:commit:abcdef1234567", "CI errored on commit abcdef1 (run r3)"),
        ({"run_id": "r4", "status": "cancelled"}, "ci:ci:run:r4", "CI cancelled on run r4 (run r4)"),
        ({"run_id": "r5", "status": "failed", "repository": "acme/web", "pr": 9,
          "tests": {"total": 40, "failed": 2, "failed_tests": ["web/ui/a.test.ts", "web/ui/b.test.ts"]}},
         "github:acme/web#9", "CI failed on PR #9: 2 of 40 tests red in web/ui/ (run r5)"),
        ({"run_id": "r6", "status": "passed", "thread_key": "ticket:OPS-17"},
         "ticket:OPS-17", "CI passed on ticket:OPS-17 (run r6)"),
    ],
    ids=["pr-without-repo", "branch", "commit", "run-only", "github-pr-with-counts", "explicit"],
)  # fmt: skip
def test_callbacks_route_by_what_they_name(
    hooks: tuple[Store, httpx.Client], callback: dict[str, Any], key: str, summary: str
) -> None:
    store, client = hooks
    response = client.post("/ingest/ci", json=callback)
    assert response.status_code == 201, response.text
    assert Memory(store).get_thread(response.json()["thread_id"]).key == key
    assert response.json()["summary"] == summary
    assert response.json()["kind"] == f"ci.{callback['status']}"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"status": "failed"}',
        b'{"run_id": "1"}',
        b'{"run_id": "1", "status": "Failed badly!"}',
        b'{"run_id": true, "status": "failed"}',
        b'{"run_id": "1", "status": "failed", "pr": "412"}',
        b'{"run_id": "1", "status": "failed", "repository": "payments"}',
        b'{"run_id": "1", "status": "failed", "log": ["a", "b"]}',
        b'{"run_id": "1", "status": "failed", "tests": {"failed_tests": "x"}}',
        b'{"run_id": "1", "status": "failed", "colour": "red"}',
        b'{"run_id": "1", "status": "failed", "occurred_at": "soon"}',
    ],
    ids=[
        "not-json", "array", "no-run-id", "no-status", "status-not-a-word", "run-id-bool",
        "pr-string", "repo-without-owner", "log-not-text", "failed-tests-not-list",
        "unknown-field", "bad-time",
    ],
)  # fmt: skip
def test_malformed_callbacks_answer_400_and_store_nothing(
    hooks: tuple[Store, httpx.Client], body: bytes
) -> None:
    store, client = hooks
    before = trigger_count(store)
    response = client.post("/ingest/ci", content=body, headers={"Content-Type": "application/json"})
    assert_problem(response, 400)
    assert trigger_count(store) == before


@pytest.mark.parametrize(
    ("log", "counts"),
    [
        ("==== 3 failed, 115 passed, 1 error in 4.20s ====", RunCounts(4, 119)),
        ("Tests:       2 failed, 38 passed, 40 total", RunCounts(2, 40)),
        ("Tests run: 118, Failures: 3, Errors: 1, Skipped: 0", RunCounts(4, 118)),
        ("first\n== 1 failed in 1.0s ==\nretry\n== 12 passed in 2.0s ==", RunCounts(0, 12)),
        ("no test output here", None),
    ],
    ids=["pytest", "jest", "junit", "last-run-wins", "none"],
)
def test_test_counts_are_read_from_common_runners(log: str, counts: RunCounts | None) -> None:
    assert count_tests(log) == counts


def test_the_failing_area_is_the_directory_failures_share() -> None:
    log = "FAILED payments/a/test_x.py::t - E\nFAILED payments/b/test_y.py::u - E\n"
    assert failing_area(log) == "payments/"
    assert failing_area("FAILED test_top.py::t - E") is None
    assert describe_counts(RunCounts(3, 118), "payments/") == "3 of 118 tests red in payments/"
    assert describe_counts(RunCounts(0, 12), None) == "all 12 tests green"

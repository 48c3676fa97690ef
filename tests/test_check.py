"""`chainrecall check` against our server (every check passes) and against broken servers.

The broken servers are our app wrapped in a small ASGI middleware that bends
one rule of API.md: a 200 with an empty object for an unknown ID, offset
paging that skips under appends, a forged cursor taken as a restart, a token
not asked for. Each must be caught by the check for that rule, with the rule
named; the reports (terminal, JSON, JUnit) and the exit status are tested
through the command itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest
from typer.testing import CliRunner

from chainrecall.api.app import create_app
from chainrecall.auth import issue_token
from chainrecall.check import CHECKS, CheckOptions, RunReport, run_checks
from chainrecall.check.reporters import junit_tree
from chainrecall.cli import app
from chainrecall.config import ServerConfig
from chainrecall.store import DEFAULT_NAMESPACE, Store
from tests.servers import ThreadServer, cli_env, free_port

SMALL_LIMIT = 64 * 1024  # the body limit of the test servers: a 413 check without 25 MiB
OPTIONS = CheckOptions(max_body_bytes=SMALL_LIMIT)

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def our_app(store: Store) -> Any:
    return create_app(store, ServerConfig(db=store.url, max_body_bytes=SMALL_LIMIT))


@pytest.fixture
def our_server(store: Store) -> Iterator[ThreadServer]:
    with ThreadServer(our_app(store)) as running:
        yield running


def failures(report: RunReport) -> dict[str, str]:
    return {r.name: f"{r.message} [{r.rule}]" for r in report.results if r.outcome == "fail"}


# -- small ASGI tools for the broken servers --------------------------------------------


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def call_app(app: ASGIApp, scope: dict[str, Any]) -> tuple[int, bytes, bytes]:
    """(status, content type, body) of a GET through `app`."""
    answer: dict[str, Any] = {"status": 500, "type": b"", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["type"] = dict(message.get("headers", [])).get(b"content-type", b"")
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    await app(scope, _no_body, send)
    return answer["status"], answer["type"], answer["body"]


async def respond(send: Any, status: int, body: bytes, content_type: bytes) -> None:
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def is_events_call(scope: dict[str, Any]) -> bool:
    parts = scope["path"].strip("/").split("/")
    return scope["method"] == "GET" and len(parts) == 3 and parts[::2] == ["threads", "events"]


class EmptyObjectForUnknownIds:
    """Broken: a GET of an ID it cannot find answers 200 `{}` instead of 404."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        status, content_type, body = await call_app(self.app, scope)
        if status == 404:
            status, content_type, body = 200, b"application/json", b"{}"
        await respond(send, status, body, content_type)


class OffsetPaging:
    """Broken: pages by an offset counted from the newest event, so appends shift it.

    The cursor says how many events are left after the page; an event appended
    between two pages moves every position by one, and the walk skips one.
    """

    def __init__(self, app: ASGIApp, store: Store) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not is_events_call(scope):
            await self.app(scope, receive, send)
            return
        thread_id = scope["path"].strip("/").split("/")[1]
        query = parse_qs(scope["query_string"].decode())
        try:
            events, _ = self.store.list_events(DEFAULT_NAMESPACE, thread_id, 0, 1_000_000)
        except Exception:  # unknown thread: let our app answer it
            await self.app(scope, receive, send)
            return
        limit = int(query.get("limit", ["50"])[0])
        left = int(query["cursor"][0]) if "cursor" in query else len(events)
        start = max(len(events) - left, 0)
        page = events[start : start + limit]
        left_after = len(events) - start - len(page)
        body = json.dumps({
            "items": [event.to_json() for event in page],
            "next_cursor": str(left_after), "has_more": left_after > 0,
        }).encode()  # fmt: skip
        await respond(send, 200, body, b"application/json")


class RestartOnBadCursor:
    """Broken: a cursor it did not issue is taken as no cursor (a silent restart)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not is_events_call(scope):
            await self.app(scope, receive, send)
            return
        status, content_type, body = await call_app(self.app, scope)
        if status == 400:
            query = parse_qs(scope["query_string"].decode())
            query.pop("cursor", None)
            restarted = dict(scope, query_string=urlencode(query, doseq=True).encode())
            status, content_type, body = await call_app(self.app, restarted)
        await respond(send, status, body, content_type)


class TokenIgnored:
    """Broken: takes any token or none, as if authentication were off."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            scope = dict(scope, headers=headers)
        await self.app(scope, receive, send)


# -- our server -------------------------------------------------------------------------


def test_our_server_passes_every_check(our_server: ThreadServer, store: Store) -> None:
    report = run_checks(our_server.url, OPTIONS)

    assert failures(report) == {}
    assert report.passed
    assert [r.name for r in report.results] == [c.name for c in CHECKS]
    skipped = {r.name for r in report.results if r.outcome == "skip"}
    assert skipped == {"auth.missing-or-invalid-token"}  # no --token: nothing to check
    # It wrote only into threads of its own, and says which.
    threads = store.list_threads(DEFAULT_NAMESPACE, 500)
    assert sorted(t.id for t in threads) == sorted(report.thread_ids)
    assert all(t.key.startswith(report.thread_keys[0]) for t in threads)
    assert report.thread_keys[0] in report.writes_note()


def test_read_only_run_passes_and_writes_nothing(our_server: ThreadServer, store: Store) -> None:
    written = run_checks(our_server.url, CheckOptions(select=("paging.walk",)))
    thread_id = written.thread_ids[0]
    before = [t.model_dump() for t in store.list_threads(DEFAULT_NAMESPACE, 500)]

    report = run_checks(our_server.url, CheckOptions(read_only=True, thread=thread_id))

    assert failures(report) == {}
    assert [t.model_dump() for t in store.list_threads(DEFAULT_NAMESPACE, 500)] == before
    ran = {r.name for r in report.results if r.outcome == "pass"}
    assert {"paging.walk", "paging.forged-cursor", "404.thread.wrong-kind"} <= ran
    assert report.result("dedupe.concurrent").outcome == "skip"


def test_with_an_admin_token_every_check_passes_including_401s(store: Store) -> None:
    _, token = issue_token(store, DEFAULT_NAMESPACE, "admin")
    with ThreadServer(our_app(store)) as server:
        report = run_checks(server.url, OPTIONS, token=token)

    assert failures(report) == {}
    assert report.count("skip") == 0


def test_a_read_token_runs_the_read_only_checks(our_server: ThreadServer, store: Store) -> None:
    written = run_checks(our_server.url, CheckOptions(select=("paging.walk",)))
    _, token = issue_token(store, DEFAULT_NAMESPACE, "read")

    options = CheckOptions(read_only=True, thread=written.thread_ids[0])
    report = run_checks(our_server.url, options, token=token)

    assert failures(report) == {}
    assert report.result("auth.missing-or-invalid-token").outcome == "pass"
    assert report.result("auth.missing-or-invalid-token").outcome == "pass"


# -- broken servers: each is caught, with the rule named ----------------------------------


def test_a_200_with_an_empty_object_for_an_unknown_id_is_caught(store: Store) -> None:
    with ThreadServer(EmptyObjectForUnknownIds(our_app(store))) as server:
        report = run_checks(server.url, CheckOptions(select=("404.",)))

    failed = failures(report)
    for resource in ("trigger", "trigger-payload", "thread", "thread-events", "worker"):
        for variant in ("unknown", "malformed", "wrong-kind"):
            message = failed[f"404.{resource}.{variant}"]
            assert "answered 200" in message
            assert "Reading, rule 3 (Unknown ID)" in message
    assert report.result("404.worker-report.unknown").outcome == "pass"  # a POST: not bent


def test_offset_paging_that_skips_under_appends_is_caught(store: Store) -> None:
    with ThreadServer(OffsetPaging(our_app(store), store)) as server:
        report = run_checks(server.url, CheckOptions(select=("paging.",)))

    assert report.result("paging.walk").outcome == "pass"  # without appends offsets work
    message = failures(report)["paging.appends-between-pages"]
    assert "never seen" in message and "skipped behind the cursor" in message
    assert "Paging, rule 2" in message


def test_a_forged_cursor_taken_as_a_restart_is_caught(store: Store) -> None:
    with ThreadServer(RestartOnBadCursor(our_app(store))) as server:
        report = run_checks(server.url, CheckOptions(select=("paging.",)))

    failed = failures(report)
    for name in ("paging.forged-cursor", "paging.altered-cursor", "paging.foreign-cursor"):
        assert "was accepted (200): a silent restart" in failed[name]
        assert "Paging, rule 4" in failed[name]
    assert report.result("paging.walk").outcome == "pass"


def test_a_server_that_ignores_the_token_is_caught(store: Store) -> None:
    with ThreadServer(TokenIgnored(our_app(store))) as server:
        report = run_checks(server.url, CheckOptions(select=("auth.",)), token="s3cret")

    message = failures(report)["auth.missing-or-invalid-token"]
    assert "answered 200, expected 401" in message and "Authentication" in message


def test_a_failure_shows_the_request_and_the_answer(store: Store) -> None:
    with ThreadServer(EmptyObjectForUnknownIds(our_app(store))) as server:
        report = run_checks(server.url, CheckOptions(select=("404.thread.unknown",)))

    result = report.result("404.thread.unknown")
    assert result.exchange is not None
    assert result.exchange.method == "GET" and "/threads/thr_" in result.exchange.url
    assert result.exchange.status == 200 and result.exchange.response_body == "{}"


def test_junit_report_of_a_failing_run_is_valid_xml_naming_the_rule(store: Store) -> None:
    with ThreadServer(EmptyObjectForUnknownIds(our_app(store))) as server:
        report = run_checks(server.url, CheckOptions(select=("404.thread",)))

    root = ET.fromstring(ET.tostring(junit_tree(report).getroot()))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == int(suite.get("tests", "-1")) == len(report.results)
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == int(suite.get("failures", "-1")) == report.count("fail") == 6
    text = failed[0].findtext("failure") or ""
    assert "Reading, rule 3" in text and "request: GET" in text and "answer: 200" in text


# -- the command: reports on disk and the exit status -------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chainrecall", "check", *args],
        env=cli_env({"COLUMNS": "160"}), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_command_exits_0_when_all_pass_and_writes_json_and_junit(
    our_server: ThreadServer, tmp_path: Path
) -> None:
    json_file, junit_file = tmp_path / "check.json", tmp_path / "check.xml"
    done = run_cli(
        our_server.url, "--only", "404.thread", "--only", "paging.walk",
        "--json", str(json_file), "--junit", str(junit_file),
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert "writes only into threads of its own: thread_key chainrecall-check:" in done.stdout
    assert "PASS paging.walk" in done.stdout
    data = json.loads(json_file.read_text())
    assert data["summary"]["ok"] is True and data["summary"]["failed"] == 0
    names = {c["name"] for c in data["checks"]}
    assert {"setup.post-trigger", "404.thread-events.malformed", "paging.walk"} <= names
    suite = ET.parse(junit_file).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"


@pytest.mark.slow
def test_command_exits_1_on_a_broken_server_and_prints_the_rule(
    store: Store, tmp_path: Path
) -> None:
    json_file = tmp_path / "check.json"
    with ThreadServer(RestartOnBadCursor(our_app(store))) as server:
        done = run_cli(server.url, "--only", "paging.forged", "--json", str(json_file))

    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL paging.forged-cursor" in done.stdout
    assert "rule: API.md Paging, rule 4" in done.stdout
    failed = [c for c in json.loads(json_file.read_text())["checks"] if c["outcome"] == "fail"]
    assert [c["name"] for c in failed] == ["paging.forged-cursor"]
    assert failed[0]["exchange"]["response"]["status"] == 200


def test_command_exits_2_when_the_server_cannot_be_reached_or_the_flags_conflict() -> None:
    runner = CliRunner()
    unreachable = runner.invoke(app, ["check", f"http://127.0.0.1:{free_port()}"])
    assert unreachable.exit_code == 2 and "cannot reach" in unreachable.stderr

    conflicting = runner.invoke(app, ["check", "http://127.0.0.1:1", "--thread", "thr_abc"])
    assert conflicting.exit_code == 2 and "--read-only" in conflicting.stderr

    not_a_thread = runner.invoke(app, ["check", "http://127.0.0.1:1", "--read-only",
                                       "--thread", "trg_abc"])  # fmt: skip
    assert not_a_thread.exit_code == 2 and "not a thread ID" in not_a_thread.stderr

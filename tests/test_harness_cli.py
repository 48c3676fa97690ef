"""`chainrecall ask` and `chainrecall log` as a user runs them: child processes, real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from chainrecall.cli import app
from chainrecall.service import Memory
from chainrecall.store import open_store
from tests.fake_openai import FakeChatServer, Turn, tool_call, usage
from tests.harness_story import Story, record_story
from tests.servers import ThreadServer, cli_env

QUESTION = "why did we add retry logic to the payment client?"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Story]]:
    path = str(tmp_path / "memory.db")
    memory = Memory(open_store(path))
    story = record_story(memory)
    memory.close()
    yield path, story


def chainrecall(*args: str) -> Result:
    """The command in-process (quick); the kill test below runs a real child process."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def chainrecall_child(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chainrecall", *args],
        env=cli_env({"CHAINRECALL_API_KEY": "test-key", "COLUMNS": "200"}),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_ask_without_a_model_prints_each_hop_and_the_evidence(db: tuple[str, Story]) -> None:
    path, story = db
    done = chainrecall("ask", QUESTION, "--db", path)
    assert done.exit_code == 0, done.output
    out = done.stdout
    assert 'search(query="why did we add retry logic' in out
    assert f'hop 1  get_thread(id="{story.thread_id}")' in out
    assert f'hop 2  get_worker(id="{story.worker_id}")' in out
    assert f'hop 3  get_trigger_payload(id="{story.ci_id}")' in out
    assert "3 failed, 200 passed" in out
    assert out.count("PaymentTimeout: POST /v1/charges timed out") >= 3


def test_a_client_killed_mid_call_leaves_the_question_recorded_and_resumable(
    db: tuple[str, Story],
) -> None:
    path, story = db
    fake = FakeChatServer([Turn(hang=True)])
    with ThreadServer(fake.app) as server:
        child = subprocess.Popen(
            [sys.executable, "-m", "chainrecall", "ask", QUESTION, "--db", path,
             "--model", "fake-chat", "--base-url", server.url + "/v1", "--timeout", "60"],
            env=cli_env({"CHAINRECALL_API_KEY": "test-key"}),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert fake.arrived.wait(timeout=30), "the ask never reached the model"
            child.kill()  # SIGKILL while the server holds the request
            child.wait(timeout=15)
        finally:
            fake.release.set()
            if child.poll() is None:
                child.kill()
                child.wait(timeout=15)

        store = open_store(path)
        sessions = store.list_sessions("default")
        assert len(sessions) == 1 and sessions[0].status == "open"
        messages = store.list_messages("default", sessions[0].id)
        assert [(m.role, m.content) for m in messages][-1] == ("user", QUESTION)
        store.close()

        fake.turns += [
            Turn(tool_calls=[tool_call("get_worker", {"id": story.worker_id}, "r1")],
                 usage=usage(700, 10, 640)),
            Turn(content="Three payment timeouts in CI run " + story.ci_id, usage=usage(900, 12, 832)),
        ]  # fmt: skip
        done = chainrecall_child(
            "ask", "--resume", sessions[0].id, "--db", path, "--model", "fake-chat",
            "--base-url", server.url + "/v1",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "hop 1  get_worker" in done.stdout
    assert "Three payment timeouts in CI run " + story.ci_id in done.stdout
    killed, resumed = fake.requests()[0], fake.requests()[1]
    assert resumed["messages"] == killed["messages"]  # the recorded question, sent again as it was

    logged = chainrecall("log", "--db", path, "--json")
    assert logged.exit_code == 0, logged.output
    session = json.loads(logged.stdout)["sessions"][0]
    assert session["status"] == "done"
    assert [r["outcome"] for r in session["requests"]] == ["ok", "ok"]
    assert [r["cache_hit_tokens"] for r in session["requests"]] == [640, 832]
    assert session["messages"][1]["content"] == QUESTION

    text = chainrecall("log", "--db", path)
    assert text.exit_code == 0, text.output
    assert sessions[0].id in text.stdout
    assert "get_worker(" in text.stdout and "cache hit 1,472" in text.stdout


def test_ask_with_half_a_model_configuration_says_what_is_missing(db: tuple[str, Story]) -> None:
    path, _ = db
    done = chainrecall("ask", QUESTION, "--db", path, "--model", "deepseek-chat")
    assert done.exit_code == 2
    assert "--base-url" in done.output


def test_handle_runs_triggers_through_the_router_or_straight_to_the_owner(tmp_path: Path) -> None:
    """`chainrecall handle` with and without pass-through, against a scripted model."""
    path = str(tmp_path / "handle.db")
    memory = Memory(open_store(path))
    story = record_story(memory, worker_status="waiting")
    new = [
        memory.record_trigger(
            source="ci",
            kind="run.passed",
            thread_id=story.thread_id,
            summary=f"CI #88{n} passed on #412",
            payload="418 passed",
        ).trigger.id
        for n in (30, 31)
    ]
    memory.close()
    fake = FakeChatServer([])
    with ThreadServer(fake.app) as server:
        report = {"summary": "green again", "refs": [new[0]], "status": "waiting"}
        fake.turns += [Turn(tool_calls=[tool_call("file_report", report, "w1")])]
        passed = chainrecall_child(
            "handle", new[0], "--db", path, "--model", "fake-chat",
            "--base-url", server.url + "/v1",
        )  # fmt: skip
        assert passed.returncode == 0, passed.stderr
        assert f"{new[0]} on {story.thread_id}: worker {story.worker_id} (pass-through)" in (
            passed.stdout
        )
        assert len(fake.requests()) == 1  # the worker only: the Router was skipped

        fake.turns += [
            Turn(tool_calls=[tool_call("route", {"action": "delegate", "task": "merge"}, "r1")]),
            Turn(tool_calls=[tool_call("file_report", {**report, "refs": [new[1]]}, "w2")]),
        ]
        routed = chainrecall_child(
            "handle", new[1], "--db", path, "--model", "fake-chat",
            "--base-url", server.url + "/v1", "--no-pass-through",
        )  # fmt: skip
        fake.release.set()
    assert routed.returncode == 0, routed.stderr
    assert f"{new[1]} on {story.thread_id}: router: delegate -> {story.worker_id}" in routed.stdout
    assert "route" in json.dumps(fake.requests()[1]["tools"])  # the Router saw it this time

"""Router, Workers and thread pass-through, against the scripted server over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from chainrecall.config import ModelConfig
from chainrecall.demo.week import TriggerSpec, generate_week
from chainrecall.harness.agents import Harness
from chainrecall.harness.client import ChatClient
from chainrecall.harness.passthrough import format_comparison, measure_pass_through
from chainrecall.service import Memory
from tests.fake_openai import FakeChatServer, Turn, tool_call, usage
from tests.harness_story import Story, record_story
from tests.servers import ThreadServer


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    server = FakeChatServer([])
    with ThreadServer(server.app) as running:
        server.url = running.url  # type: ignore[attr-defined]
        yield server
        server.release.set()


@pytest.fixture
def client(fake: FakeChatServer) -> Iterator[ChatClient]:
    config = ModelConfig(fake.url + "/v1", "fake-chat", None, 30.0)  # type: ignore[attr-defined]
    with ChatClient(config) as chat:
        yield chat


def tools_of(request: dict[str, object]) -> set[str]:
    return {t["function"]["name"] for t in request["tools"]}  # type: ignore[attr-defined, index]


def new_ci_trigger(memory: Memory, story: Story) -> str:
    return memory.record_trigger(
        source="ci", kind="run.passed", thread_id=story.thread_id,
        summary="CI #8830 passed on #412: 418 passed", payload="418 passed",
    ).trigger.id  # fmt: skip


def test_a_trigger_on_a_thread_a_live_worker_owns_goes_straight_to_it(
    memory: Memory, fake: FakeChatServer, client: ChatClient
) -> None:
    story = record_story(memory, worker_status="waiting")
    trigger_id = new_ci_trigger(memory, story)
    fake.turns += [
        Turn(tool_calls=[tool_call("file_report", {"summary": "CI green; ready to merge",
             "refs": [trigger_id], "status": "ready"}, "w1")], usage=usage(600, 20, 0)),
    ]  # fmt: skip

    dispatch = Harness(memory, client).handle(trigger_id)

    assert dispatch.handled_by == "worker" and dispatch.worker_id == story.worker_id
    assert dispatch.router_requests == 0
    requests = fake.requests()
    assert len(requests) == 1 and "route" not in tools_of(requests[0])
    assert "file_report" in tools_of(requests[0])
    worker = memory.get_worker(story.worker_id)
    assert worker.status == "ready" and worker.report is not None
    assert worker.report.refs == [trigger_id]
    routers = memory.store.list_sessions(memory.namespace, kind="router")
    notices = memory.store.list_messages(memory.namespace, routers[0].id)
    assert notices[-1].content == (
        f"note: {trigger_id} on {story.thread_id} went to {story.worker_id} (pass-through)"
    )
    assert memory.store.list_model_requests(memory.namespace, routers[0].id) == []


def test_without_pass_through_the_router_sees_the_trigger_and_hands_it_to_the_owner(
    memory: Memory, fake: FakeChatServer, client: ChatClient
) -> None:
    story = record_story(memory, worker_status="waiting")
    trigger_id = new_ci_trigger(memory, story)
    fake.turns += [
        Turn(tool_calls=[tool_call("route", {"action": "delegate", "task": "merge it"}, "r1")]),
        Turn(tool_calls=[tool_call("file_report", {"summary": "green", "refs": [trigger_id],
             "status": "ready"}, "w1")]),
    ]  # fmt: skip

    dispatch = Harness(memory, client, pass_through=False).handle(trigger_id)

    assert dispatch.handled_by == "router" and dispatch.action == "delegate"
    assert dispatch.worker_id == story.worker_id  # the live owner, not a second worker
    assert dispatch.router_requests == 1
    router_request, worker_request = fake.requests()
    assert "route" in tools_of(router_request)
    context = router_request["messages"][-1]["content"]
    assert context.startswith(f"trigger {trigger_id} on {story.thread_id} (ci run.passed)")
    index_line = next(
        line for line in context.splitlines() if line.startswith(f"{story.thread_id}: ")
    )
    assert "Retry timed-out gateway calls in the payment client" in index_line
    assert "open" in index_line
    assert memory.get_thread(story.thread_id).owner_workers == [story.worker_id]
    assert "file_report" in tools_of(worker_request)


def test_the_router_delegates_a_new_thread_to_a_new_worker_whose_report_cites_refs(
    memory: Memory, fake: FakeChatServer, client: ChatClient
) -> None:
    trigger = memory.record_trigger(
        source="github", kind="issues.opened", thread_key="github:acme/api#540",
        summary="Orders export times out for large merchants", payload={"number": 540},
    ).trigger  # fmt: skip
    fake.turns += [
        Turn(tool_calls=[tool_call("route", {"action": "delegate"}, "r0")]),  # no task: told so
        Turn(tool_calls=[tool_call("route", {"action": "delegate", "task": "find the cause"}, "r1")]),
        Turn(tool_calls=[tool_call("file_report", {"summary": "pool exhausted",
             "refs": ["trg_unknown1"], "status": "ready"}, "w1")]),
        Turn(tool_calls=[tool_call("file_report", {"summary": "pool exhausted by the export",
             "body": "one connection per page", "refs": [trigger.id], "status": "ready"}, "w2")]),
    ]  # fmt: skip

    dispatch = Harness(memory, client).handle(trigger.id)

    assert dispatch.action == "delegate" and dispatch.worker_id is not None
    worker = memory.get_worker(dispatch.worker_id)
    assert worker.task == "find the cause" and worker.thread_ids == [trigger.thread_id]
    assert worker.report is not None and worker.report.refs == [trigger.id]
    assert worker.report.status == "ready" and len(worker.earlier_reports) == 0
    requests = fake.requests()
    told = json.loads(requests[1]["messages"][-1]["content"])
    assert told["error"] == "invalid_arguments" and "task" in told["message"]
    refused = json.loads(requests[3]["messages"][-1]["content"])
    assert refused["error"] == "invalid_report" and refused["id"] == "trg_unknown1"
    worker_sessions = memory.store.list_sessions(memory.namespace, worker_id=worker.id)
    assert len(worker_sessions) == 1 and worker_sessions[0].status == "done"
    assert worker_sessions[0].thread_id == trigger.thread_id


def test_a_replay_measures_what_pass_through_saves_on_the_router() -> None:
    triggers = [a for a in generate_week() if isinstance(a, TriggerSpec)][:80]
    on, off = measure_pass_through(triggers)

    assert on.triggers == off.triggers == 80
    # without pass-through the Router sees every trigger; with it, only unowned ones
    assert off.router_calls == 80
    assert 0 < on.router_calls < off.router_calls
    assert on.router_bytes < off.router_bytes
    assert on.router_prompt_tokens is None  # the offline policy reports no tokens
    text = format_comparison(on, off)
    assert "Router calls" in text and "pass-through saves" in text

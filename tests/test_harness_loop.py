"""The tool loop against a scripted OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from chainrecall.config import ModelConfig
from chainrecall.harness.client import ChatClient, ModelTimeout
from chainrecall.harness.conversation import Conversation
from chainrecall.harness.recall import ask_model, start_ask
from chainrecall.service import Memory
from tests.fake_openai import FakeChatServer, Turn, tool_call, usage
from tests.harness_story import Story, record_story
from tests.servers import ThreadServer

QUESTION = "why did we add retry logic to the payment client?"


@pytest.fixture
def story(memory: Memory) -> Story:
    return record_story(memory)


class Running:
    def __init__(self, fake: FakeChatServer, url: str) -> None:
        self.fake = fake
        self.url = url

    def client(self, *, timeout_s: float = 30.0, stream: bool = False) -> ChatClient:
        config = ModelConfig(self.url + "/v1", "fake-chat", "test-key", timeout_s, stream)
        return ChatClient(config)


@pytest.fixture
def serve() -> Iterator[object]:
    servers: list[tuple[FakeChatServer, ThreadServer]] = []

    def start(turns: list[Turn]) -> Running:
        fake = FakeChatServer(turns)
        server = ThreadServer(fake.app).__enter__()
        servers.append((fake, server))
        return Running(fake, server.url)

    yield start
    for fake, server in servers:
        fake.release.set()
        server.__exit__(None, None, None)


def raw_messages(body: bytes) -> bytes:
    """The exact bytes of a request's messages array, as sent."""
    text = body.decode("utf-8")
    start = text.index('"messages":') + len('"messages":')
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[start:end].encode("utf-8")


def hop_script(story: Story) -> list[Turn]:
    return [
        Turn(tool_calls=[tool_call("search", {"query": "retry payment client"}, "c1")],
             usage=usage(900, 12, 0)),
        Turn(tool_calls=[tool_call("get_thread", {"id": story.thread_id}, "c2")],
             usage=usage(1100, 14, 896)),
        Turn(tool_calls=[tool_call("get_worker", {"id": story.worker_id}, "c3")],
             usage=usage(1400, 15, 1088)),
        Turn(tool_calls=[tool_call("get_trigger_payload", {"id": story.ci_id}, "c4")],
             usage=usage(1900, 16, 1344)),
        Turn(content=f"Because CI run {story.ci_id} failed with three payment timeouts.",
             usage=usage(4200, 30, 1856)),
    ]  # fmt: skip


def test_the_tool_loop_follows_hops_to_an_answer_resending_history_byte_for_byte(
    memory: Memory, story: Story, serve: object
) -> None:
    running = serve(hop_script(story))  # type: ignore[operator]
    conversation = start_ask(memory, "fake-chat", QUESTION)
    hops: list[str] = []
    with running.client() as client:
        outcome = ask_model(memory, client, conversation, on_hop=lambda h: hops.append(h.tool))

    assert outcome.answer == f"Because CI run {story.ci_id} failed with three payment timeouts."
    assert hops == ["search", "get_thread", "get_worker", "get_trigger_payload"]
    bodies = running.fake.bodies
    assert len(bodies) == 5
    requests = running.fake.requests()
    assert [len(r["messages"]) for r in requests] == [2, 4, 6, 8, 10]
    assert requests[0]["messages"][1] == {"role": "user", "content": QUESTION}
    for earlier, later in itertools.pairwise(bodies):
        assert raw_messages(later).startswith(raw_messages(earlier)[:-1] + b",")
    # what each tool answered reached the model: the next hop's ID came from the last result
    assert story.thread_id in requests[1]["messages"][-1]["content"]
    assert story.worker_id in requests[2]["messages"][-1]["content"]
    assert story.ci_id in requests[3]["messages"][-1]["content"]
    assert "3 failed" not in requests[3]["messages"][-1]["content"]
    payload_result = requests[4]["messages"][-1]["content"]  # the 8 KB log, spilled
    assert "truncated" in payload_result and len(payload_result.encode()) < 3 * 1024
    assert running.fake.headers[0]["authorization"] == "Bearer test-key"
    assert all(r["tools"] and r["model"] == "fake-chat" for r in requests)


def test_every_request_is_logged_and_the_usage_log_adds_up(
    memory: Memory, story: Story, serve: object
) -> None:
    running = serve(hop_script(story))  # type: ignore[operator]
    conversation = start_ask(memory, "fake-chat", QUESTION)
    with running.client() as client:
        ask_model(memory, client, conversation)

    logged = memory.store.list_model_requests(memory.namespace, conversation.id)
    assert [r.outcome for r in logged] == ["ok"] * 5
    assert [r.bytes_sent for r in logged] == [len(b) for b in running.fake.bodies]
    assert [r.message_count for r in logged] == [2, 4, 6, 8, 10]
    assert sum(r.prompt_tokens or 0 for r in logged) == 900 + 1100 + 1400 + 1900 + 4200
    assert sum(r.completion_tokens or 0 for r in logged) == 12 + 14 + 15 + 16 + 30
    assert sum(r.cache_hit_tokens or 0 for r in logged) == 896 + 1088 + 1344 + 1856
    for r in logged:
        assert r.cache_hit_tokens is not None and r.cache_miss_tokens is not None
        assert r.cache_hit_tokens + r.cache_miss_tokens == r.prompt_tokens
    stored = memory.store.list_messages(memory.namespace, conversation.id)
    assert [m.role for m in stored] == ["system", "user"] + ["assistant", "tool"] * 4 + [
        "assistant"
    ]
    assert memory.store.get_session(memory.namespace, conversation.id).status == "done"


def test_malformed_tool_calls_are_answered_back_to_the_model_not_crashed_on(
    memory: Memory, story: Story, serve: object
) -> None:
    running = serve(  # type: ignore[operator]
        [
            Turn(
                tool_calls=[
                    tool_call("fetch_everything", {"id": story.thread_id}, "bad1"),
                    tool_call("get_thread", '{"id": "thr_', "bad2"),
                    tool_call("get_worker", {"id": "wkr_nothere1"}, "bad3"),
                    tool_call("get_trigger", {"identifier": story.ci_id}, "bad4"),
                ]
            ),
            Turn(content="I could not read those."),
        ]
    )
    conversation = start_ask(memory, "fake-chat", QUESTION)
    with running.client() as client:
        outcome = ask_model(memory, client, conversation)

    assert outcome.answer == "I could not read those."
    answered = {m["tool_call_id"]: json.loads(m["content"]) for m in running.fake.requests()[1]["messages"] if m["role"] == "tool"}  # fmt: skip
    assert answered["bad1"]["error"] == "unknown_tool"
    assert "fetch_everything" in answered["bad1"]["message"]
    assert answered["bad2"]["error"] == "invalid_arguments"
    assert "not JSON" in answered["bad2"]["message"]
    assert answered["bad3"]["error"] == "not_found"
    assert answered["bad3"]["id"] == "wkr_nothere1"
    assert answered["bad4"]["error"] == "invalid_arguments"


def test_a_hanging_server_times_out_and_leaves_the_question_recorded_to_resume(
    memory: Memory, story: Story, serve: object
) -> None:
    running = serve([Turn(hang=True), Turn(content="Answered after resuming.")])  # type: ignore[operator]
    conversation = start_ask(memory, "fake-chat", QUESTION)
    with running.client(timeout_s=0.5) as client, pytest.raises(ModelTimeout):
        ask_model(memory, client, conversation)
    running.fake.release.set()

    logged = memory.store.list_model_requests(memory.namespace, conversation.id)
    assert [r.outcome for r in logged] == ["timeout"]
    assert "did not answer within" in (logged[0].error or "")
    stored = memory.store.list_messages(memory.namespace, conversation.id)
    assert [(m.role, m.content) for m in stored][-1] == ("user", QUESTION)

    resumed = Conversation.resume(memory.store, memory.namespace, conversation.id)
    with running.client() as client:
        outcome = ask_model(memory, client, resumed)
    assert outcome.answer == "Answered after resuming."
    first, second = running.fake.bodies
    assert raw_messages(first) == raw_messages(second)


def test_streamed_replies_assemble_tool_call_deltas_and_usage(
    memory: Memory, story: Story, serve: object
) -> None:
    running = serve(  # type: ignore[operator]
        [
            Turn(
                stream=True,
                tool_calls=[tool_call("get_worker", {"id": story.worker_id}, "s1")],
                usage=usage(800, 9, 0),
            ),
            Turn(stream=True, content="Three payment timeouts in CI.", usage=usage(1200, 8, 768)),
        ]
    )
    conversation = start_ask(memory, "fake-chat", QUESTION)
    with running.client(stream=True) as client:
        outcome = ask_model(memory, client, conversation)

    assert outcome.answer == "Three payment timeouts in CI."
    assert [h.tool for h in outcome.hops] == ["get_worker"] and outcome.hops[0].ok
    first = running.fake.requests()[0]
    assert first["stream"] is True
    call = running.fake.requests()[1]["messages"][2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"id": story.worker_id}
    logged = memory.store.list_model_requests(memory.namespace, conversation.id)
    assert [(r.prompt_tokens, r.cache_hit_tokens, r.cache_miss_tokens) for r in logged] == [
        (800, 0, 800),
        (1200, 768, 432),
    ]


def test_past_the_hop_limit_the_model_is_told_to_answer_with_tools_off(
    memory: Memory, story: Story, serve: object
) -> None:
    search = [tool_call("search", {"query": "retry"}, f"h{i}") for i in range(3)]
    running = serve(  # type: ignore[operator]
        [
            Turn(tool_calls=[search[0]]),
            Turn(tool_calls=[search[1]]),
            Turn(content="Best I can say."),
        ]
    )
    conversation = start_ask(memory, "fake-chat", QUESTION)
    with running.client() as client:
        outcome = ask_model(memory, client, conversation, max_hops=2)

    assert outcome.answer == "Best I can say."
    last = running.fake.requests()[-1]
    assert last["tool_choice"] == "none"
    assert "used all 2 tool calls" in last["messages"][-1]["content"]

"""The tool loop: call the model, run the tools it asks for, answer it, until it is done.

The loop owns three rules. Every model request is logged (size, usage, cache
fields, latency, outcome), also when it fails. Nothing a model gets wrong
crashes the loop: an unknown tool name, arguments that are not JSON or an
unknown ID come back to the model as a tool error result it can act on. And
the number of tool calls is bounded (`max_hops`): past the bound the model is
told to answer from what it has read, with tools switched off.

The loop starts from whatever the stored session holds, so the same call
resumes a session that a crash interrupted mid-call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from chainrecall.harness.client import (
    ChatModel,
    ChatReply,
    ModelError,
    ModelTimeout,
    encode_request,
)
from chainrecall.harness.conversation import Conversation, spill
from chainrecall.history import NewMessage, NewModelRequest
from chainrecall.tools import RecallTools, ToolResult, human_size

DEFAULT_MAX_HOPS = 8
HOP_LIMIT_NOTICE = (
    "You have used all {n} tool calls this turn. Answer now from what you have read; "
    "cite the IDs your answer rests on."
)

# A handler gets the parsed arguments and answers a result; `terminal` tools end the turn
# once they succeed (the Router's `route`, a Worker's `file_report`).
Handler = Callable[[dict[str, Any]], ToolResult]


@dataclass(frozen=True)
class ExtraTool:
    spec: dict[str, Any]
    handler: Handler
    terminal: bool = False

    @property
    def name(self) -> str:
        return str(self.spec["function"]["name"])


@dataclass(frozen=True)
class Hop:
    """One tool call as it happened: what was called, how much came back, what it showed."""

    n: int
    tool: str
    arguments: str
    ok: bool
    bytes: int
    evidence: str


@dataclass
class LoopOutcome:
    status: Literal["answered", "tool_ended", "hop_limit"]
    answer: str | None = None
    ended_by: str | None = None
    hops: list[Hop] = field(default_factory=list)
    requests: int = 0


class Toolbox:
    """The recall tools plus any role tools, behind one `call(name, arguments)`."""

    def __init__(self, recall: RecallTools, extra: list[ExtraTool] | None = None) -> None:
        self.recall = recall
        self.extra = {tool.name: tool for tool in extra or []}

    @property
    def specs(self) -> list[dict[str, Any]]:
        return [*self.recall.specs(), *(tool.spec for tool in self.extra.values())]

    @property
    def names(self) -> list[str]:
        return [spec["function"]["name"] for spec in self.specs]

    def is_terminal(self, name: str) -> bool:
        tool = self.extra.get(name)
        return tool is not None and tool.terminal

    def call(self, name: str, arguments: str) -> ToolResult:
        tool = self.extra.get(name)
        if tool is None:
            result = self.recall.call(name, arguments)
            if not result.ok and result.data.get("error") == "unknown_tool":
                return error_result(
                    "unknown_tool",
                    f"there is no tool {name!r}; the tools are {', '.join(self.names)}",
                )
            return result
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return error_result("invalid_arguments", f"arguments of {name} are not JSON: {exc}")
        if not isinstance(parsed, dict):
            return error_result("invalid_arguments", f"arguments of {name} must be a JSON object")
        return tool.handler(parsed)


def error_result(code: str, message: str, **extra: Any) -> ToolResult:
    return ToolResult(False, {"error": code, "message": message, **extra})


def describe_result(name: str, result: ToolResult) -> str:
    """One line saying what a tool result showed (for the hop printout and the log)."""
    data = result.data
    if not result.ok:
        return f"error {data.get('error')}: {data.get('message')}"
    if name == "search":
        hits = data.get("hits") or []
        if not hits:
            return "no hits"
        top = hits[0]
        return f"{len(hits)} hits; top {top['id']} ({top.get('thread_id')}): {top['summary']}"
    if name == "get_thread":
        owners = ", ".join(data.get("owner_workers") or []) or "none"
        return f"{data.get('title')!r} status {data.get('status')}; owner_workers: {owners}"
    if name == "get_worker":
        report = data.get("report")
        if not report:
            return f"status {data.get('status')}, no report yet; task: {data.get('task')}"
        refs = ", ".join(report.get("refs") or []) or "nothing"
        return f"report ({report.get('status')}) cites {refs}: {report.get('summary')}"
    if name == "get_trigger":
        return f"{data.get('source')} {data.get('kind')}: {data.get('summary')}"
    if name == "get_trigger_payload":
        return f"{human_size(int(data.get('bytes', 0)))} {data.get('content_type')}, read from byte {data.get('offset')}"
    if name == "list_thread_events":
        return f"{len(data.get('items') or [])} events" + (
            ", more follow" if data.get("has_more") else ""
        )
    text = json.dumps(data, ensure_ascii=False)
    return text if len(text) <= 160 else text[:159] + "…"


def call_model(
    conversation: Conversation,
    model: ChatModel,
    tools: list[dict[str, Any]],
    tool_choice: str | None = None,
) -> ChatReply:
    """One logged request carrying the whole stored history."""
    body = encode_request(
        model.model, conversation.encoded, tools, stream=model.stream, tool_choice=tool_choice
    )
    started = time.monotonic()
    record: dict[str, Any] = {
        "session_id": conversation.id,
        "model": model.model,
        "message_count": len(conversation.messages),
        "bytes_sent": len(body),
    }
    try:
        reply = model.complete(body)
    except ModelError as exc:
        outcome = "timeout" if isinstance(exc, ModelTimeout) else "error"
        conversation.store.log_model_request(
            conversation.namespace,
            NewModelRequest(
                **record, latency_ms=_elapsed_ms(started), outcome=outcome, error=exc.detail[:1000]
            ),
        )
        raise
    usage = reply.usage
    conversation.store.log_model_request(
        conversation.namespace,
        NewModelRequest(
            **record, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cache_hit_tokens=usage.cache_hit_tokens, cache_miss_tokens=usage.cache_miss_tokens,
            latency_ms=_elapsed_ms(started), outcome="ok",
        ),
    )  # fmt: skip
    return reply


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def run_tool_loop(
    conversation: Conversation,
    model: ChatModel,
    toolbox: Toolbox,
    *,
    max_hops: int = DEFAULT_MAX_HOPS,
    on_hop: Callable[[Hop], None] | None = None,
) -> LoopOutcome:
    """Run the session from its stored state until the model answers or a terminal tool ends it."""
    outcome = LoopOutcome(status="answered")
    tool_choice: str | None = None
    forced = False
    while True:
        last = conversation.last()
        pending = last.tool_calls if last is not None and last.role == "assistant" else None
        if last is not None and last.role == "assistant" and not pending:
            outcome.answer = last.content
            return outcome
        if not pending:
            reply = call_model(conversation, model, toolbox.specs, tool_choice)
            outcome.requests += 1
            calls = [
                {**call, "id": call["id"] or f"call_{len(conversation.messages)}_{i}"}
                for i, call in enumerate(reply.tool_calls)
            ]
            conversation.append(
                NewMessage(role="assistant", content=reply.content or "", tool_calls=calls or None)
            )
            if not calls:
                outcome.answer = reply.content or ""
                return outcome
            pending = calls
        ended_by = None
        results: list[NewMessage] = []
        for call in pending:
            name = call["function"]["name"]
            arguments = call["function"]["arguments"]
            if len(outcome.hops) >= max_hops:
                result = error_result(
                    "hop_limit", f"no more tool calls this turn (limit {max_hops}); answer now"
                )
            else:
                result = toolbox.call(name, arguments)
                text = result.to_text()
                hop = Hop(
                    len(outcome.hops) + 1, name, arguments, result.ok,
                    len(text.encode("utf-8")), describe_result(name, result),
                )  # fmt: skip
                outcome.hops.append(hop)
                if on_hop is not None:
                    on_hop(hop)
                if result.ok and toolbox.is_terminal(name):
                    ended_by = name
            results.append(
                NewMessage(
                    role="tool", content=spill(result.to_text()), tool_call_id=call["id"], name=name
                )
            )
        conversation.append(*results)
        if ended_by is not None:
            outcome.status = "tool_ended"
            outcome.ended_by = ended_by
            return outcome
        if len(outcome.hops) >= max_hops:
            if forced:
                outcome.status = "hop_limit"
                return outcome
            conversation.append(
                NewMessage(role="user", content=HOP_LIMIT_NOTICE.format(n=max_hops))
            )
            tool_choice, forced = "none", True

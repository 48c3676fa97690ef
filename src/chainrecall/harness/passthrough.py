"""Measuring thread pass-through: replay a week of triggers with it on and off.

`measure_pass_through` records the same triggers into two scratch stores and
hands each to a `Harness`, once with pass-through and once without, then counts
from the request log what the Router was asked: calls, bytes sent and, when
the model reports them, prompt tokens (with the cache hits and misses).

With a real model (`model_factory` returning a `ChatClient`) the numbers are the
provider's. Offline, `ReplayPolicy` stands in for the model: a fixed rule
(delegate GitHub and CI triggers, answer chat questions, ignore the rest; a
Worker reports `ready` when its PR merges or CI passes, else `waiting`). It
measures the harness's structure (how many Router calls, how many bytes), not
a model's judgement, and it reports no token counts because it has none.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chainrecall.demo.week import TriggerSpec, generate_week, trigger_item
from chainrecall.harness.agents import Harness
from chainrecall.harness.client import ChatModel, ChatReply
from chainrecall.service import Memory
from chainrecall.store.sqlite import SQLiteStore

_HEADER = re.compile(r"^trigger (trg_\w+) on (thr_\w+) \((\S+) (\S+?)[,)]", re.MULTILINE)
_DONE_KINDS = ("pull_request.closed", "run.passed")


class ReplayPolicy:
    """A deterministic rule standing in for the model in replays (see the module docstring)."""

    model = "replay-policy"
    stream = False

    def complete(self, body: bytes) -> ChatReply:
        request = json.loads(body)
        tools = {t["function"]["name"] for t in request.get("tools", [])}
        header = None
        for message in reversed(request["messages"]):
            if message["role"] == "user" and (match := _HEADER.search(message["content"])):
                header = match
                break
        if header is None:
            return ChatReply(content="nothing to do")
        trigger_id, thread_id, source, kind = header.groups()
        if "route" in tools:
            if source in ("github", "ci"):
                args: dict[str, Any] = {"action": "delegate", "task": f"handle {thread_id}"}
            elif "?" in request["messages"][-1]["content"].split("\n", 1)[0]:
                args = {"action": "answer", "answer": f"noted {trigger_id}"}
            else:
                args = {"action": "ignore"}
            return _call("route", args)
        status = "ready" if kind in _DONE_KINDS else "waiting"
        return _call(
            "file_report",
            {"summary": f"{kind} on {thread_id}", "refs": [trigger_id], "status": status},
        )


def _call(name: str, arguments: dict[str, Any]) -> ChatReply:
    return ChatReply(
        content=None,
        tool_calls=[
            {
                "id": "",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    )


@dataclass(frozen=True)
class ReplayStats:
    pass_through: bool
    triggers: int
    router_calls: int
    router_bytes: int
    router_prompt_tokens: int | None
    router_cache_hit_tokens: int | None
    worker_calls: int
    worker_bytes: int


def _sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def replay(
    triggers: Sequence[TriggerSpec],
    model: ChatModel,
    *,
    pass_through: bool,
    workdir: Path,
) -> ReplayStats:
    """Record and hand each trigger to a fresh Harness; count the Router's and Workers' requests."""
    # A scratch database: durability buys nothing here and fsyncs would dominate the run.
    store = SQLiteStore(
        str(workdir / f"replay-{'on' if pass_through else 'off'}.db"), synchronous="OFF"
    )
    try:
        memory = Memory(store)
        harness = Harness(memory, model, pass_through=pass_through)
        for n, spec in enumerate(triggers):
            appended = memory.record_triggers([trigger_item(spec, n)])[0]
            harness.handle(appended.trigger.id)
        kinds = {s.id: s.kind for s in store.list_sessions("default", limit=1_000_000)}
        requests = store.list_model_requests("default", limit=10_000_000)
        router = [r for r in requests if kinds[r.session_id] == "router"]
        worker = [r for r in requests if kinds[r.session_id] == "worker"]
        return ReplayStats(
            pass_through=pass_through, triggers=len(triggers), router_calls=len(router),
            router_bytes=sum(r.bytes_sent for r in router),
            router_prompt_tokens=_sum([r.prompt_tokens for r in router]),
            router_cache_hit_tokens=_sum([r.cache_hit_tokens for r in router]),
            worker_calls=len(worker), worker_bytes=sum(r.bytes_sent for r in worker),
        )  # fmt: skip
    finally:
        store.close()


def measure_pass_through(
    triggers: Sequence[TriggerSpec] | None = None,
    model_factory: Callable[[], ChatModel] = ReplayPolicy,
) -> tuple[ReplayStats, ReplayStats]:
    """The same replay with pass-through on, then off (default: the demo week's triggers)."""
    if triggers is None:
        triggers = [a for a in generate_week() if isinstance(a, TriggerSpec)]
    with tempfile.TemporaryDirectory(prefix="chainrecall-replay-") as scratch:
        on = replay(triggers, model_factory(), pass_through=True, workdir=Path(scratch))
        off = replay(triggers, model_factory(), pass_through=False, workdir=Path(scratch))
    return on, off


def format_comparison(on: ReplayStats, off: ReplayStats) -> str:
    """Both runs side by side, with what pass-through saved on the Router."""

    def tokens(value: int | None) -> str:
        return "n/a" if value is None else f"{value:,}"

    lines = [
        f"replay of {on.triggers} triggers        with pass-through   without",
        f"Router calls                     {on.router_calls:>17,}   {off.router_calls:,}",
        f"Router bytes sent                {on.router_bytes:>17,}   {off.router_bytes:,}",
        f"Router prompt tokens             {tokens(on.router_prompt_tokens):>17}   {tokens(off.router_prompt_tokens)}",
        f"Router cache-hit tokens          {tokens(on.router_cache_hit_tokens):>17}   {tokens(off.router_cache_hit_tokens)}",
        f"Worker calls                     {on.worker_calls:>17,}   {off.worker_calls:,}",
    ]
    if on.router_prompt_tokens is None:
        lines.append("(n/a: this model reports no token usage)")
    if off.router_calls:
        saved = 1 - on.router_calls / off.router_calls
        lines.append(f"pass-through saves {saved:.0%} of Router calls")
    if off.router_bytes:
        lines.append(
            f"pass-through saves {1 - on.router_bytes / off.router_bytes:.0%} of Router bytes"
        )
    return "\n".join(lines)

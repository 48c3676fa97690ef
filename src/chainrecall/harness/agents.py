"""The Router and its Workers: who handles each trigger, and thread pass-through.

Every trigger goes to the Router with a built context (`router_context_text`),
unless **thread pass-through** applies: a trigger on a thread that a live
Worker owns (status running, waiting or blocked) goes straight to that Worker,
and the Router gets a one-line notice appended to its history, without a model
call. The Router decides with one `route` call: ignore the trigger, answer it,
or delegate its thread to a Worker with a task. A Worker is a session of its
own on one thread (`Memory.start_worker`); it reads what it needs with the
recall tools and ends each turn with `file_report` (summary, body, the trg_
IDs it handled as refs, and a status), which becomes `Memory.report`.

The Router's history is append-only and rolls over to a fresh session when it
passes `router_history_limit` bytes, so its prefix stays cacheable and bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from chainrecall.errors import ChainRecallError
from chainrecall.harness.client import ChatModel
from chainrecall.harness.conversation import Conversation
from chainrecall.harness.loop import (
    DEFAULT_MAX_HOPS,
    ExtraTool,
    Hop,
    LoopOutcome,
    Toolbox,
    error_result,
    run_tool_loop,
)
from chainrecall.harness.router_context import DEFAULT_CONTEXT_BUDGET, router_context_text
from chainrecall.history import NewMessage
from chainrecall.model import Thread, Worker
from chainrecall.service import Memory
from chainrecall.store.base import LIVE_WORKER_STATUSES
from chainrecall.tools import RecallTools, ToolResult

ROUTE_ACTIONS = ("ignore", "answer", "delegate")
REPORT_STATUSES = ("ready", "waiting", "blocked", "failed")
ROUTER_HISTORY_LIMIT = 64 * 1024

ROUTER_SYSTEM = (
    "You are the Router of a software team's agent. Each user message is one inbound "
    "trigger (chat, GitHub, CI) with its context: IDs, one-line summaries, pointers. Decide "
    "with one call to route: action=ignore (noise), answer (reply yourself, in answer), or "
    "delegate (hand the trigger's thread to a Worker, with a task). Use the recall tools "
    "only when the context is not enough. Lines starting 'note:' are notices, not triggers."
)

WORKER_SYSTEM = (
    "You are a Worker on thread {thread_id}. Your task: {task}\n"
    "Each user message is a trigger on your thread. Read what you need with the recall "
    "tools, then end with file_report: summary (one line), body (what you did and why, "
    "exact facts), refs (the trg_ IDs you handled and relied on), status ready (done), "
    "waiting (on someone or something), blocked, or failed."
)

FINISH_WITH_REPORT = "Finish this turn by calling file_report (summary, body, refs, status)."

ROUTE_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "route",
        "description": "Decide what happens to the current trigger (exactly once per trigger).",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ROUTE_ACTIONS)},
                "task": {"type": "string", "description": "delegate: what the Worker is to do"},
                "answer": {"type": "string", "description": "answer: the reply to send"},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    },
}

FILE_REPORT_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "file_report",
        "description": "End your turn with a report on your thread.",
        "parameters": {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "one line"},
                "body": {"type": "string", "description": "what and why, with exact facts"},
                "refs": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "trg_ IDs handled and relied on",
                },
                "status": {"type": "string", "enum": list(REPORT_STATUSES)},
            },
            "required": ["summary", "refs", "status"],
            "additionalProperties": False,
        },
    },
}


@dataclass(frozen=True)
class Dispatch:
    """What became of one trigger."""

    trigger_id: str
    thread_id: str
    handled_by: Literal["router", "worker"]
    action: str | None
    worker_id: str | None
    answer: str | None
    router_requests: int
    worker_requests: int


class Harness:
    """The Router and Workers of one namespace over one chat model."""

    def __init__(
        self,
        memory: Memory,
        model: ChatModel,
        *,
        pass_through: bool = True,
        max_hops: int = DEFAULT_MAX_HOPS,
        context_budget: int = DEFAULT_CONTEXT_BUDGET,
        router_history_limit: int = ROUTER_HISTORY_LIMIT,
        on_hop: Callable[[str, Hop], None] | None = None,
    ) -> None:
        self.memory = memory
        self.model = model
        self.pass_through = pass_through
        self.max_hops = max_hops
        self.context_budget = context_budget
        self.router_history_limit = router_history_limit
        self.on_hop = on_hop
        self.recall = RecallTools(memory)
        self._router: Conversation | None = None

    # -- routing -------------------------------------------------------------
    def handle(self, trigger_id: str) -> Dispatch:
        """Route one stored trigger: to its thread's live Worker, or through the Router."""
        trigger = self.memory.get_trigger(trigger_id)
        thread = self.memory.get_thread(trigger.thread_id)
        owner = self.live_owner(thread)
        if self.pass_through and owner is not None:
            self.router_conversation().append(
                NewMessage(
                    role="user",
                    content=f"note: {trigger.id} on {thread.id} went to {owner.id} (pass-through)",
                )
            )
            outcome = self.run_worker(owner, trigger.id)
            return Dispatch(
                trigger.id, thread.id, "worker", "pass_through", owner.id, None, 0,
                outcome.requests,
            )  # fmt: skip
        return self._route(trigger.id, thread)

    def live_owner(self, thread: Thread) -> Worker | None:
        """The most recent owner of `thread` that is still live, if any."""
        for worker_id in reversed(thread.owner_workers):
            worker = self.memory.get_worker(worker_id)
            if worker.status in LIVE_WORKER_STATUSES:
                return worker
        return None

    def router_conversation(self) -> Conversation:
        """The Router's current session, rolled over once it passes the history limit."""
        if self._router is not None and self._router.size > self.router_history_limit:
            self._router.set_status("done")
            self._router = None
        if self._router is None:
            self._router = Conversation.start(
                self.memory.store, self.memory.namespace, kind="router",
                model=self.model.model, system=ROUTER_SYSTEM,
            )  # fmt: skip
        return self._router

    def _route(self, trigger_id: str, thread: Thread) -> Dispatch:
        conversation = self.router_conversation()
        decision: dict[str, Any] = {}

        def route(args: dict[str, Any]) -> ToolResult:
            action = args.get("action")
            if action not in ROUTE_ACTIONS:
                return error_result(
                    "invalid_arguments",
                    f"action must be one of {', '.join(ROUTE_ACTIONS)}; got {action!r}",
                )
            text_field = {"delegate": "task", "answer": "answer"}.get(action)
            text = args.get(text_field) if text_field else None
            if text_field and (not isinstance(text, str) or not text.strip()):
                return error_result(
                    "invalid_arguments", f"action {action} needs a non-empty {text_field}"
                )
            decision.update(action=action, text=text)
            if action != "delegate":
                return ToolResult(True, {"action": action, "trigger_id": trigger_id})
            owner = self.live_owner(self.memory.get_thread(thread.id))
            if owner is None:
                try:
                    owner = self.memory.start_worker(thread.id, str(text))
                except ChainRecallError as exc:
                    return error_result("invalid_arguments", exc.detail)
            decision["worker"] = owner
            return ToolResult(True, {"action": action, "worker_id": owner.id})

        conversation.append(
            NewMessage(
                role="user",
                content=router_context_text(self.memory, trigger_id, self.context_budget),
            )
        )
        toolbox = Toolbox(self.recall, [ExtraTool(ROUTE_SPEC, route, terminal=True)])
        outcome = self._loop(conversation, toolbox, "router")
        worker: Worker | None = decision.get("worker")
        worker_requests = 0
        if worker is not None:
            worker_requests = self.run_worker(worker, trigger_id).requests
        action = decision.get("action")
        answer = decision.get("text") if action == "answer" else None
        if action is None and outcome.answer:  # answered in plain text instead of via route
            action, answer = "answer", outcome.answer
        return Dispatch(
            trigger_id, thread.id, "router", action, worker.id if worker else None, answer,
            outcome.requests, worker_requests,
        )  # fmt: skip

    # -- workers -------------------------------------------------------------
    def worker_conversation(self, worker: Worker) -> Conversation:
        """The worker's open session (resumed from the store), or a new one."""
        store, ns = self.memory.store, self.memory.namespace
        for session in store.list_sessions(ns, kind="worker", worker_id=worker.id, limit=1):
            if session.status == "open":
                return Conversation.resume(store, ns, session.id)
        thread_id = worker.thread_ids[0]
        return Conversation.start(
            store, ns, kind="worker", model=self.model.model,
            system=WORKER_SYSTEM.format(thread_id=thread_id, task=worker.task),
            worker_id=worker.id, thread_id=thread_id,
        )  # fmt: skip

    def run_worker(self, worker: Worker, trigger_id: str) -> LoopOutcome:
        """Give `trigger_id` to `worker`'s session and run it to its report."""
        conversation = self.worker_conversation(worker)

        def file_report(args: dict[str, Any]) -> ToolResult:
            summary, body = args.get("summary"), args.get("body", "")
            refs, status = args.get("refs", []), args.get("status")
            if status not in REPORT_STATUSES:
                return error_result(
                    "invalid_arguments",
                    f"status must be one of {', '.join(REPORT_STATUSES)}; got {status!r}",
                )
            if not isinstance(summary, str) or not isinstance(body, str):
                return error_result("invalid_arguments", "summary and body must be strings")
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                return error_result("invalid_arguments", "refs must be a list of trg_ IDs")
            try:
                filed = self.memory.report(
                    worker.id, summary=summary, body=body, refs=refs, status=status
                )
            except ChainRecallError as exc:
                return error_result("invalid_report", exc.detail, **exc.extensions)
            n = filed.report.n if filed.report else 0
            return ToolResult(True, {"worker_id": worker.id, "report": n, "status": status})

        conversation.append(
            NewMessage(
                role="user",
                content=router_context_text(self.memory, trigger_id, self.context_budget),
            )
        )
        toolbox = Toolbox(self.recall, [ExtraTool(FILE_REPORT_SPEC, file_report, terminal=True)])
        outcome = self._loop(conversation, toolbox, "worker")
        if outcome.ended_by != "file_report":
            conversation.append(NewMessage(role="user", content=FINISH_WITH_REPORT))
            again = self._loop(conversation, toolbox, "worker")
            again.requests += outcome.requests
            again.hops = outcome.hops + again.hops
            outcome = again
        if outcome.ended_by != "file_report":
            conversation.set_status("incomplete")
        elif self.memory.get_worker(worker.id).status not in LIVE_WORKER_STATUSES:
            conversation.set_status("done")
        return outcome

    def _loop(self, conversation: Conversation, toolbox: Toolbox, role: str) -> LoopOutcome:
        on_hop = self.on_hop
        return run_tool_loop(
            conversation, self.model, toolbox, max_hops=self.max_hops,
            on_hop=(lambda hop: on_hop(role, hop)) if on_hop is not None else None,
        )  # fmt: skip

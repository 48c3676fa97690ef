"""Answering a question from memory by hops: a deterministic planner, or a model driving the tools.

Without a model, `plan_recall` walks the reference graph the way the design
describes: `search` for an entry point, then the best thread
(`get_thread`), its owner workers (`get_worker`) and their latest reports, then
the triggers those reports cite (`get_trigger_payload`), where it picks out
the lines that carry evidence (failures, errors, the question's words). Each
hop is reported with the call made, the bytes read and what it showed.

With a model, `ask_model` stores the question first (write-ahead), then lets
the model drive the same six recall tools through the tool loop; a session
interrupted mid-call is picked up again with `resume_ask`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from chainrecall.harness.client import ChatModel
from chainrecall.harness.conversation import Conversation
from chainrecall.harness.loop import DEFAULT_MAX_HOPS, Hop, LoopOutcome, Toolbox, run_tool_loop
from chainrecall.history import NewMessage
from chainrecall.service import Memory
from chainrecall.store.base import one_line, search_terms
from chainrecall.tools import RecallTools, ToolResult

ASK_SYSTEM = (
    "Answer the user's question from the team's memory. Find an entry point with search, "
    "then follow IDs: get_thread (owner_workers) -> get_worker (report refs) -> get_trigger / "
    "get_trigger_payload. Answer briefly with exact facts and cite the IDs you relied on."
)

# The planner is not a model: it may read a whole payload to pick out evidence lines.
PLANNER_READ_LIMIT = 256 * 1024
MAX_WORKERS = 3
MAX_CITED = 3
EVIDENCE_LINES = 5
_RUNNER_SUMMARY = re.compile(r"^(FAILED|ERROR)\s+\S+ - |\b\d+ failed\b")
_FAILURE = re.compile(
    r"\b(FAILED|FAIL|ERROR|Error|Exception|Traceback|[Tt]imeout|timed out|failed)\b"
)


@dataclass(frozen=True)
class RecallStep:
    """One call of the planner: its label (entry, hop 1, ...), the call, bytes read, evidence."""

    label: str
    call: str
    bytes: int
    evidence: list[str]


@dataclass
class RecallAnswer:
    question: str
    steps: list[RecallStep] = field(default_factory=list)
    answer: str | None = None
    sources: list[str] = field(default_factory=list)
    session_id: str | None = None


def format_call(name: str, arguments: dict[str, object]) -> str:
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return f"{name}({args})"


def evidence_lines(text: str, terms: list[str], limit: int = EVIDENCE_LINES) -> list[str]:
    """The lines of `text` that carry evidence, best first.

    A test runner's summary (`FAILED test - error`, `3 failed, 412 passed`) comes
    first, then exception lines, then other failure lines, then lines naming at
    least two of the question's words.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lowered = [t.lower() for t in terms if len(t) > 2]

    def rank(line: str) -> int:
        if _RUNNER_SUMMARY.search(line):
            return 0
        if line.startswith("E ") and _FAILURE.search(line):
            return 1
        if _FAILURE.search(line):
            return 2
        if sum(t in line.lower() for t in lowered) >= 2:
            return 3
        return 4

    ranked = sorted((r, i, line) for i, line in enumerate(lines) if (r := rank(line)) < 4)
    picked: list[str] = []
    for _, _, line in ranked:
        clipped = one_line(line, 200)
        if clipped not in picked:
            picked.append(clipped)
        if len(picked) == limit:
            break
    return picked


def plan_recall(
    memory: Memory, question: str, *, on_step: Callable[[RecallStep], None] | None = None
) -> RecallAnswer:
    """search -> thread -> owner workers -> cited triggers -> payload, without a model."""
    tools = RecallTools(memory, inline_limit=PLANNER_READ_LIMIT)
    result = RecallAnswer(question)
    hop = 0

    def step(name: str, arguments: dict[str, object]) -> ToolResult:
        nonlocal hop
        outcome = tools.call(name, dict(arguments))
        label = "entry" if name == "search" else f"hop {hop + 1}"
        if name != "search":
            hop += 1
        evidence = _evidence(name, outcome, question)
        recorded = RecallStep(
            label, format_call(name, arguments), len(outcome.to_text().encode("utf-8")), evidence
        )
        result.steps.append(recorded)
        if on_step is not None:
            on_step(recorded)
        return outcome

    found = step("search", {"query": question})
    hits = found.data.get("hits", []) if found.ok else []
    if not hits:
        result.answer = None
        return result
    thread_id = _best_thread(hits)
    if thread_id is None:
        result.answer = f"best match: {hits[0]['id']}: {hits[0]['summary']}"
        result.sources = [hits[0]["id"]]
        return result
    thread = step("get_thread", {"id": thread_id})
    if not thread.ok:
        return result
    owners = list(reversed(thread.data.get("owner_workers") or []))[:MAX_WORKERS]
    reports: list[tuple[str, dict[str, object]]] = []
    for worker_id in owners:
        worker = step("get_worker", {"id": worker_id})
        if worker.ok and worker.data.get("report"):
            reports.append((worker_id, worker.data["report"]))
    cited: list[str] = []
    for _, report in reports:
        for ref in report.get("refs") or []:  # type: ignore[attr-defined]
            if ref not in cited:
                cited.append(ref)
    evidence: list[tuple[str, list[str]]] = []
    for ref in cited[:MAX_CITED]:
        payload = step("get_trigger_payload", {"id": ref})
        if payload.ok:
            evidence.append((ref, result.steps[-1].evidence))
    result.answer, result.sources = _compose(thread.data, reports, evidence)
    return result


def _best_thread(hits: list[dict[str, str]]) -> str | None:
    """The thread the hits point at most strongly (rank-weighted), first seen on a tie."""
    weight: dict[str, float] = {}
    for rank, hit in enumerate(hits):
        if hit.get("thread_id"):
            weight[hit["thread_id"]] = weight.get(hit["thread_id"], 0.0) + 1.0 / (rank + 1)
    if not weight:
        return None
    return max(weight, key=lambda thread_id: weight[thread_id])


def _evidence(name: str, outcome: ToolResult, question: str) -> list[str]:
    data = outcome.data
    if not outcome.ok:
        return [f"error {data.get('error')}: {data.get('message')}"]
    if name == "search":
        return [f"{h['id']} ({h['thread_id']}): {h['summary']}" for h in data["hits"][:3]]
    if name == "get_thread":
        owners = ", ".join(data.get("owner_workers") or []) or "none"
        return [f"{data['title']} ({data['status']}); owner_workers: {owners}"]
    if name == "get_worker":
        report = data.get("report")
        if not report:
            return [f"{data['status']}, no report; task: {one_line(data['task'], 160)}"]
        refs = ", ".join(report["refs"]) or "nothing"
        return [f"report ({report['status']}) cites {refs}: {one_line(report['summary'], 200)}"]
    if name == "get_trigger_payload":
        return evidence_lines(str(data.get("text", "")), search_terms(question))
    return [one_line(json.dumps(data, ensure_ascii=False), 200)]


def _compose(
    thread: dict[str, object],
    reports: list[tuple[str, dict[str, object]]],
    evidence: list[tuple[str, list[str]]],
) -> tuple[str, list[str]]:
    sources = [str(thread["id"])]
    if not reports:
        return f"{thread['id']} ({thread['title']}): {thread['summary']}", sources
    worker_id, report = reports[0]
    sources.append(worker_id)
    body = one_line(str(report.get("body") or ""), 600)
    lines = [f"{report['summary']} ({worker_id})"]
    if body:
        lines.append(body)
    for ref, found in evidence:
        sources.append(ref)
        if found:
            lines.append(f"evidence in {ref}:")
            lines.extend(f"  {line}" for line in found)
    return "\n".join(lines), sources


# -- with a model --------------------------------------------------------------
def start_ask(memory: Memory, model_name: str, question: str) -> Conversation:
    """A new ask session holding the question, written before any model call."""
    conversation = Conversation.start(
        memory.store, memory.namespace, kind="router", model=model_name, system=ASK_SYSTEM
    )
    conversation.append(NewMessage(role="user", content=question))
    return conversation


def ask_model(
    memory: Memory,
    model: ChatModel,
    conversation: Conversation,
    *,
    max_hops: int = DEFAULT_MAX_HOPS,
    on_hop: Callable[[Hop], None] | None = None,
) -> LoopOutcome:
    """Let the model walk the recall tools from the session's stored state to an answer."""
    outcome = run_tool_loop(
        conversation, model, Toolbox(RecallTools(memory)), max_hops=max_hops, on_hop=on_hop
    )
    conversation.set_status("done" if outcome.answer is not None else "incomplete")
    return outcome

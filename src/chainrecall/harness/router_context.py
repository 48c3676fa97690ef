"""The text the Router (or a Worker) reads with each trigger: an interim context builder.

`router_context_text(memory, trigger_id, budget_bytes)` is the single seam
between the harness and context assembly. Until `chainrecall.context.build_context`
lands, it assembles, from records the memory already answers and within a
byte budget: the current trigger inline (ID, thread, source, kind, summary,
payload pointer), its neighbours' summaries, and the thread index
(`thr_x: title, status`, most recently active first). To switch to the real
builder, make this function return `build_context(memory, trigger_id=...,
budget_bytes=...).text`; nothing else in the harness reads records for a prompt.
"""

from __future__ import annotations

from chainrecall.errors import ChainRecallError
from chainrecall.service import Memory
from chainrecall.store.base import one_line
from chainrecall.tools import human_size

DEFAULT_CONTEXT_BUDGET = 4096
INDEX_THREADS = 40


def trigger_header(memory: Memory, trigger_id: str) -> str:
    """The one line that names a trigger to a model: ID, thread, source and kind, summary."""
    trigger = memory.get_trigger(trigger_id)
    return (
        f"trigger {trigger.id} on {trigger.thread_id} ({trigger.source} {trigger.kind}"
        f"{', by ' + trigger.author if trigger.author else ''}): {trigger.summary}"
    )


def router_context_text(
    memory: Memory, trigger_id: str, budget_bytes: int = DEFAULT_CONTEXT_BUDGET
) -> str:
    """Trigger inline, neighbours, then the thread index, cut to `budget_bytes` whole lines."""
    trigger = memory.get_trigger(trigger_id)
    lines = [
        trigger_header(memory, trigger_id),
        f"payload: get_trigger_payload({trigger.id}) "
        f"{human_size(trigger.payload.bytes)} {trigger.payload.content_type.split(';')[0]}",
    ]
    for label, neighbour in (("prev", trigger.neighbours.prev), ("next", trigger.neighbours.next)):
        if neighbour is None:
            continue
        try:
            lines.append(f"{label}: {neighbour}: {memory.get_trigger(neighbour).summary}")
        except ChainRecallError:  # a deleted neighbour is left out, not guessed at
            continue
    thread = memory.get_thread(trigger.thread_id)
    owners = ", ".join(thread.owner_workers) or "none"
    lines.append(
        f"thread {thread.id}: {thread.title}, {thread.status}, "
        f"{thread.event_count} events, workers: {owners}"
    )
    lines.append("threads (most recent first):")
    for item in memory.list_threads(INDEX_THREADS):
        lines.append(f"{item.id}: {one_line(item.title, 80)}, {item.status}")
    return fit_lines(lines, budget_bytes)


def fit_lines(lines: list[str], budget_bytes: int) -> str:
    """As many whole lines, in order, as fit in `budget_bytes` (the first line always)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        size = len(line.encode("utf-8")) + 1
        if kept and used + size > budget_bytes:
            break
        kept.append(line)
        used += size
    return "\n".join(kept)

"""The text the Router (or a Worker) reads with each trigger.

`router_context_text(memory, trigger_id, budget_bytes)` is the single seam
between the harness and context assembly (`chainrecall.context.build_context`);
nothing else in the harness reads records for a prompt. `trigger_header` is
the one line that names a trigger in a worker's task.
"""

from __future__ import annotations

from chainrecall.context import build_context
from chainrecall.service import Memory

DEFAULT_CONTEXT_BUDGET = 4096


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
    """The message the Router (or a Worker) gets with a trigger, within `budget_bytes`.

    Its first line names the trigger (`trigger_header`), so the message says at once
    what arrived; the rest is `build_context`: the memory's stable header, the
    append-only thread index, the thread at hand and the trigger, large fields
    spilled behind API paths.
    """
    header = trigger_header(memory, trigger_id) + "\n"
    room = max(0, budget_bytes - len(header.encode("utf-8")))
    return header + build_context(memory, trigger_id=trigger_id, budget_bytes=room).text

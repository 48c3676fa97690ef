"""Chain of Recall as one call: a question in, the evidence it needs out, within a byte budget.

`recall(memory, question, budget_bytes)` finds entry points by search (BM25),
then follows links one hop at a time (a trigger's neighbours in its thread,
the trigger it replies to, the triggers it cites, a worker's report and the
triggers the report cites) and packs what it found, best first, into at most
`budget_bytes` of UTF-8 text. Each item is one line that starts with its ID,
so every fact in the context can be fetched again exactly. A payload too big
for its share of the budget is cut and left behind a pointer
(`GET /triggers/trg_x/payload (41 KB, truncated)`).

The answer says what it cost: how many store calls it made and how many hops
deep it went, so that a benchmark can compare it with other strategies on
bytes and calls as well as on recall.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.model import Trigger
from chainrecall.service import JSON_TYPE, Memory
from chainrecall.tools import clip_utf8, human_size

MIN_BUDGET = 64
MAX_BUDGET = 1024 * 1024
ENTRY_HITS = 40  # search hits taken as entry points
NEIGHBOUR_DECAY = (0.55, 0.3)  # weight of a hit's neighbours 1 and 2 steps away
LINK_WEIGHT = 0.6  # weight of a trigger reached through in_reply_to / refs / a report
ITEM_SHARE = 0.5  # no single item takes more than this share of the budget


@dataclass
class Recall:
    query: str
    text: str
    items: list[str]
    bytes: int
    budget_bytes: int
    hops: int
    calls: int
    spilled: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "text": self.text,
            "items": self.items,
            "bytes": self.bytes,
            "budget_bytes": self.budget_bytes,
            "hops": self.hops,
            "calls": self.calls,
            "spilled": self.spilled,
        }


@dataclass
class _Candidate:
    id: str
    score: float
    hops: int
    trigger: Trigger | None = None
    text: str = ""


class _Walker:
    """Follows links from the entry points, counting calls and remembering what it read."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.calls = 0
        self.triggers: dict[str, Trigger | None] = {}

    def trigger(self, trigger_id: str) -> Trigger | None:
        if trigger_id not in self.triggers:
            self.calls += 1
            try:
                self.triggers[trigger_id] = self.memory.get_trigger(trigger_id)
            except ChainRecallError:  # deleted, or a dangling neighbour: nothing to recall
                self.triggers[trigger_id] = None
        return self.triggers[trigger_id]

    def text_of(self, trigger: Trigger, limit: int) -> tuple[str, bool]:
        """The trigger's words for the context, and whether they had to be cut."""
        self.calls += 1
        try:
            payload = self.memory.get_payload(trigger.id)
        except ChainRecallError:
            return trigger.summary, False
        ctype = payload.content_type
        if ctype.startswith("text/"):
            body = payload.text()
        elif ctype.startswith(JSON_TYPE):
            body = _json_words(payload.data)
        else:
            body = trigger.summary
        if len(body.encode("utf-8")) <= limit:
            return body, False
        return clip_utf8(body, limit), True


def _json_words(data: bytes) -> str:
    try:
        value = json.loads(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items() if isinstance(v, str | int | float))
    return json.dumps(value, ensure_ascii=False)


def recall(
    memory: Memory, query: str, budget_bytes: int, *, entry_hits: int = ENTRY_HITS
) -> Recall:
    """Assemble the evidence for `query` in at most `budget_bytes` bytes of UTF-8."""
    if not isinstance(budget_bytes, int) or not MIN_BUDGET <= budget_bytes <= MAX_BUDGET:
        raise InvalidInput(
            f"budget_bytes must be an integer from {MIN_BUDGET} to {MAX_BUDGET}",
            field="budget_bytes",
        )
    walker = _Walker(memory)
    results = memory.search(query, min(entry_hits, 100))
    walker.calls += 1
    candidates: dict[str, _Candidate] = {}

    def offer(trigger_id: str, score: float, hops: int) -> None:
        known = candidates.get(trigger_id)
        if known is None:
            candidates[trigger_id] = _Candidate(trigger_id, score, hops)
        elif score > known.score:
            known.score, known.hops = score, min(hops, known.hops)

    top = max((hit.score for hit in results.items), default=1.0) or 1.0
    for rank, hit in enumerate(results.items):
        # BM25 scores vary by query; a relative score with a mild rank prior is comparable.
        score = (hit.score / top) * (1.0 / (1.0 + 0.02 * rank))
        if hit.kind == "trigger":
            offer(hit.id, score, 1)
        elif hit.kind == "worker":
            try:
                worker = memory.get_worker(hit.id)
            except ChainRecallError:
                continue
            walker.calls += 1
            if worker.report is not None:
                for ref in worker.report.refs:
                    offer(ref, score * LINK_WEIGHT, 2)
    # Follow links from the entry points: neighbours in the thread, replies, citations.
    for cand in sorted(candidates.values(), key=lambda c: -c.score)[:entry_hits]:
        trigger = walker.trigger(cand.id)
        if trigger is None:
            continue
        step_prev, step_next = trigger.neighbours.prev, trigger.neighbours.next
        for distance, decay in enumerate(NEIGHBOUR_DECAY, start=1):
            for neighbour_id in (step_prev, step_next):
                if neighbour_id:
                    offer(neighbour_id, cand.score * decay, cand.hops + distance)
            if distance < len(NEIGHBOUR_DECAY):
                prev_t = walker.trigger(step_prev) if step_prev else None
                next_t = walker.trigger(step_next) if step_next else None
                step_prev = prev_t.neighbours.prev if prev_t else None
                step_next = next_t.neighbours.next if next_t else None
        for linked in [trigger.in_reply_to, *trigger.refs]:
            if linked:
                offer(linked, cand.score * LINK_WEIGHT, cand.hops + 1)
    return _pack(walker, query, candidates, budget_bytes)


def _pack(walker: _Walker, query: str, candidates: dict[str, _Candidate], budget: int) -> Recall:
    header = f"Recall for: {' '.join(query.split())[:200]}\n"
    if len(header.encode("utf-8")) > budget // 4:
        header = ""
    used = len(header.encode("utf-8"))
    chosen: list[tuple[_Candidate, str]] = []
    spilled: list[dict[str, Any]] = []
    item_cap = max(MIN_BUDGET, int(budget * ITEM_SHARE))
    for cand in sorted(candidates.values(), key=lambda c: (-c.score, c.id)):
        trigger = walker.trigger(cand.id)
        if trigger is None:
            continue
        cand.trigger = trigger
        prefix = _line_prefix(trigger)
        room = min(item_cap, budget - used) - len(prefix.encode("utf-8")) - 1
        if room < 16:
            spilled.append(
                {"id": trigger.id, "reason": "budget", "pointer": f"GET /triggers/{trigger.id}"}
            )
            continue
        text, cut = walker.text_of(trigger, room)
        if cut:
            pointer = f" [GET /triggers/{trigger.id}/payload ({human_size(trigger.payload.bytes)}, truncated)]"
            text = clip_utf8(text, room - len(pointer.encode("utf-8"))) + pointer
            spilled.append(
                {"id": trigger.id, "reason": "truncated", "pointer": pointer.strip(" []")}
            )
        line = prefix + text + "\n"
        size = len(line.encode("utf-8"))
        if used + size > budget:
            spilled.append(
                {"id": trigger.id, "reason": "budget", "pointer": f"GET /triggers/{trigger.id}"}
            )
            continue
        used += size
        chosen.append((cand, line))
    # Read in story order: threads in order of their best item, events in thread order.
    thread_rank: dict[str, int] = {}
    for cand, _ in chosen:
        assert cand.trigger is not None
        thread_rank.setdefault(cand.trigger.thread_id, len(thread_rank))
    chosen.sort(key=lambda pair: (thread_rank[pair[0].trigger.thread_id], pair[0].trigger.seq))  # type: ignore[union-attr]
    text = header + "".join(line for _, line in chosen)
    return Recall(
        query=query,
        text=text,
        items=[cand.id for cand, _ in chosen],
        bytes=len(text.encode("utf-8")),
        budget_bytes=budget,
        hops=max((cand.hops for cand, _ in chosen), default=0),
        calls=walker.calls,
        spilled=spilled[:50],
    )


def _line_prefix(trigger: Trigger) -> str:
    who = f" {trigger.author}" if trigger.author else ""
    return f"{trigger.id} {trigger.thread_id} {trigger.occurred_at[:10]}{who}: "

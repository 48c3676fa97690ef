"""Chain of Recall as one call: a question in, the evidence it needs out, within a byte budget.

`recall(memory, question, budget_bytes)` finds entry points by search (BM25 over
the question's topic words, question words dropped), searches once more with
the words its best hits share (pseudo-relevance feedback) and fuses the two
rankings, then follows links one hop at a time (a trigger's neighbours in its
thread, the reply after a hit weighing more than what came before it; the
trigger it replies to; the triggers it cites; a worker's report and the
triggers the report cites) and packs what it found, best first, into at most
`budget_bytes` of UTF-8 text. A question that names a person prefers what that
person wrote. Identical texts are packed once (the copy is named in `spilled`).
Each item is one line that starts with its ID, so every fact in the context
can be fetched again exactly. A payload too big for its share of the budget is
cut and left behind a pointer (`GET /triggers/trg_x/payload (41 KB, truncated)`).
Everything is deterministic and model-free; the weights below were tuned on
two LoCoMo conversations only (benchmarks/locomo.py, docs/benchmarks-recall.md).

The answer says what it cost: how many store calls it made and how many hops
deep it went, so that a benchmark can compare it with other strategies on
bytes and calls as well as on recall.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.model import SearchHit, Trigger
from chainrecall.service import JSON_TYPE, Memory
from chainrecall.store.base import search_terms
from chainrecall.tools import clip_utf8, human_size

MIN_BUDGET = 64
MAX_BUDGET = 1024 * 1024
ENTRY_HITS = 100  # search hits taken as entry points (the store answers at most 100)
FUSION = "score"
RANK_PRIOR = 0.02
RRF_K = 20  # rank fusion of the plain and the expanded search: 1 / (RRF_K + rank)
FEEDBACK_DOCS = 8  # pseudo-relevance feedback: words of the top hits' summaries ...
FEEDBACK_TERMS = 6  # ... the most telling of which are added to a second search
FEEDBACK_WEIGHT = 0.5  # weight of the expanded search's ranking against the plain one
NEIGHBOUR_DECAY_PREV = (0.45, 0.2)  # weight of what came 1 and 2 steps before a hit
NEIGHBOUR_DECAY_NEXT = (0.7, 0.35)  # ... and after it (a reply often holds the answer)
AUTHOR_BOOST = 0.3  # a question that names a person prefers what that person wrote
LINK_WEIGHT = 0.6  # weight of a trigger reached through in_reply_to / refs / a report
ITEM_SHARE = 0.25  # no single item takes more than this share of the budget ...
ITEM_FLOOR = 1024  # ... or than 1 KiB, whichever is larger (short messages are never cut)
EXPAND_PER_KIB = 8  # entry points whose links are followed, per KiB of budget (at least 12)
MIN_LINE = 48  # less room than this left: the context is full
MAX_SPILLED = 50  # pointers to what did not fit, best first

# Words that carry no topic in a question; dropped before searching (the store drops its own
# stopwords too). Kept short: a word here can never be found by recall's first search.
_QUESTION_WORDS = frozenset(
    [
        "about",
        "after",
        "again",
        "all",
        "also",
        "any",
        "been",
        "before",
        "being",
        "can",
        "could",
        "did",
        "does",
        "doing",
        "done",
        "ever",
        "feel",
        "felt",
        "get",
        "got",
        "he",
        "her",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "into",
        "just",
        "kind",
        "kinds",
        "like",
        "likely",
        "many",
        "me",
        "might",
        "more",
        "most",
        "much",
        "my",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "their",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "those",
        "thing",
        "things",
        "type",
        "us",
        "very",
        "would",
        "your",
    ]
)
_WORD = re.compile(r"\w+", re.UNICODE)


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
        self.reports: dict[str, list[str]] = {}

    def cited_by(self, trigger_id: str) -> list[str]:
        self.calls += 1
        try:
            return self.memory.cited_by(trigger_id)
        except ChainRecallError:
            return []

    def trigger(self, trigger_id: str) -> Trigger | None:
        if trigger_id not in self.triggers:
            self.calls += 1
            try:
                self.triggers[trigger_id] = self.memory.get_trigger(trigger_id)
            except ChainRecallError:  # deleted, or a dangling neighbour: nothing to recall
                self.triggers[trigger_id] = None
        return self.triggers[trigger_id]

    def around(self, trigger: Trigger, steps: int) -> tuple[list[str], list[str], list[str]]:
        """IDs of the triggers up to `steps` before and after `trigger` in its thread, and
        of the workers that started or reported in that stretch.

        One read of the thread's event log around the trigger's position, instead of one
        read per neighbour; nearest first on both sides.
        """
        self.calls += 1
        events, _ = self.memory.store.list_events(
            self.memory.namespace, trigger.thread_id, max(0, trigger.seq - 1 - 2 * steps),
            4 * steps + 1,
        )  # fmt: skip
        live = [e for e in events if e.kind == "trigger" and not e.deleted]
        workers = list(dict.fromkeys(e.id for e in events if e.kind in ("worker", "report")))
        position = next((i for i, e in enumerate(live) if e.id == trigger.id), None)
        if position is None:
            return [], [], workers
        before = [e.id for e in reversed(live[max(0, position - steps) : position])]
        after = [e.id for e in live[position + 1 : position + 1 + steps]]
        return before, after, workers

    def report_refs(self, worker_id: str) -> list[str]:
        """The triggers a worker's report cites (read once per recall)."""
        if worker_id not in self.reports:
            self.calls += 1
            try:
                report = self.memory.get_worker(worker_id).report
            except ChainRecallError:
                report = None
            self.reports[worker_id] = list(report.refs) if report is not None else []
        return self.reports[worker_id]

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
        # The summary may say what the payload does not (a sender's own one-liner over a
        # null or numeric payload): keep it unless the payload already says it.
        said = " ".join(trigger.summary.rstrip("…").split())
        if said and said not in " ".join(body.split()):
            body = f"{trigger.summary}\n{body}" if body.strip() else trigger.summary
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
    if value is None:
        return ""
    # Leaves as `path: value`, strings verbatim (JSON escapes would break a quoted fact).
    parts: list[str] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))))
        elif node is not None and not isinstance(node, bool):
            parts.append(f"{path}: {node}" if path else str(node))
    return "; ".join(parts)


def query_terms(query: str) -> list[str]:
    """The topic words of a question: the store's search terms less question words."""
    terms = search_terms(query, max_terms=64)
    kept = [t for t in terms if t not in _QUESTION_WORDS and len(t) > 1]
    return kept or terms


def feedback_terms(query: list[str], summaries: list[str]) -> list[str]:
    """Words that recur in the best hits but not in the question (pseudo-relevance feedback).

    A word counts once per hit, weighted by the hit's rank; only words seen in at least two
    hits are kept, so one chatty hit cannot steer the second search.
    """
    asked = set(query)
    weight: dict[str, float] = {}
    seen_in: Counter[str] = Counter()
    for rank, summary in enumerate(summaries):
        words = {w for w in search_terms(summary, max_terms=200) if len(w) > 3 and not w.isdigit()}
        for word in words - asked - _QUESTION_WORDS:
            weight[word] = weight.get(word, 0.0) + 1.0 / (rank + 1)
            seen_in[word] += 1
    ranked = sorted((w for w in weight if seen_in[w] >= 2), key=lambda w: (-weight[w], w))
    return ranked[:FEEDBACK_TERMS]


def recall(
    memory: Memory, query: str, budget_bytes: int, *, entry_hits: int | None = None
) -> Recall:
    """Assemble the evidence for `query` in at most `budget_bytes` bytes of UTF-8."""
    if not isinstance(budget_bytes, int) or not MIN_BUDGET <= budget_bytes <= MAX_BUDGET:
        raise InvalidInput(
            f"budget_bytes must be an integer from {MIN_BUDGET} to {MAX_BUDGET}",
            field="budget_bytes",
        )
    entry_hits = ENTRY_HITS if entry_hits is None else entry_hits
    walker = _Walker(memory)
    terms = query_terms(query)
    limit = min(entry_hits, 100)
    first = memory.search(" ".join(terms) or query, limit).items
    walker.calls += 1
    # Pseudo-relevance feedback: search again with the words the best hits share, and fuse
    # the two rankings by rank (their BM25 scores are not comparable).
    rankings: list[tuple[float, list[SearchHit]]] = [(1.0, first)]
    extra = feedback_terms(terms, [h.summary for h in first[:FEEDBACK_DOCS]])
    if extra:
        rankings.append((FEEDBACK_WEIGHT, memory.search(" ".join(terms + extra), limit).items))
        walker.calls += 1
    fused: dict[str, float] = {}
    hits: dict[str, SearchHit] = {}
    for weight, ranking in rankings:
        best = max((h.score for h in ranking), default=1.0) or 1.0
        for rank, hit in enumerate(ranking):
            hits.setdefault(hit.id, hit)
            if FUSION == "rrf":
                part = weight / (RRF_K + rank + 1)
            else:  # BM25 relative to the best hit, with a mild rank prior
                part = weight * (hit.score / best) / (1.0 + RANK_PRIOR * rank)
            fused[hit.id] = fused.get(hit.id, 0.0) + part
    top = max(fused.values(), default=1.0)
    candidates: dict[str, _Candidate] = {}

    def offer(trigger_id: str, score: float, hops: int) -> None:
        known = candidates.get(trigger_id)
        if known is None:
            candidates[trigger_id] = _Candidate(trigger_id, score, hops)
        elif score > known.score:
            known.score, known.hops = score, min(hops, known.hops)

    entries = sorted(fused, key=lambda i: (-fused[i], i))[:entry_hits]
    for hit_id in entries:
        hit, score = hits[hit_id], fused[hit_id] / top
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
    # A question that names a person prefers what that person wrote.
    asked = set(terms)
    # Follow links from the entry points: neighbours in the thread, replies, citations.
    # Only entry points that could reach the context are worth following: about 8 a KiB.
    expand = min(entry_hits, max(12, budget_bytes * EXPAND_PER_KIB // 1024))
    for cand in sorted(candidates.values(), key=lambda c: (-c.score, c.id))[:expand]:
        trigger = walker.trigger(cand.id)
        if trigger is None:
            continue
        if trigger.author and asked & set(search_terms(trigger.author)):
            cand.score *= 1.0 + AUTHOR_BOOST
        before, after, workers = walker.around(trigger, len(NEIGHBOUR_DECAY_PREV))
        # A worker that reported next to a hit: what its report cites is two hops away.
        for worker_id in workers:
            for ref in walker.report_refs(worker_id):
                offer(ref, cand.score * LINK_WEIGHT * LINK_WEIGHT, cand.hops + 2)
        for neighbour_id, decay, distance in [
            *[
                (n, d, i + 1)
                for i, (n, d) in enumerate(zip(before, NEIGHBOUR_DECAY_PREV, strict=False))
            ],
            *[
                (n, d, i + 1)
                for i, (n, d) in enumerate(zip(after, NEIGHBOUR_DECAY_NEXT, strict=False))
            ],
        ]:
            offer(neighbour_id, cand.score * decay, cand.hops + distance)
        for linked in [trigger.in_reply_to, *trigger.refs]:
            if linked:
                offer(linked, cand.score * LINK_WEIGHT, cand.hops + 1)
        # Links back: what replied to or cited this trigger, and what the workers whose
        # reports cite it cited besides ("what happened after", "what led to").
        for citing in walker.cited_by(trigger.id):
            if citing.startswith("trg_"):
                offer(citing, cand.score * LINK_WEIGHT, cand.hops + 1)
            else:
                for ref in walker.report_refs(citing):
                    offer(ref, cand.score * LINK_WEIGHT * LINK_WEIGHT, cand.hops + 2)
    return _pack(walker, query, candidates, budget_bytes)


def _pack(walker: _Walker, query: str, candidates: dict[str, _Candidate], budget: int) -> Recall:
    # No header: the question is the caller's own, and every byte here is one a model reads.
    used = 0
    chosen: list[tuple[_Candidate, str]] = []
    spilled: list[dict[str, Any]] = []
    seen_texts: dict[str, str] = {}
    item_cap = max(min(budget, ITEM_FLOOR), int(budget * ITEM_SHARE))
    for cand in sorted(candidates.values(), key=lambda c: (-c.score, c.id)):
        if budget - used < MIN_LINE:  # full: name what is left without reading it
            if len(spilled) >= MAX_SPILLED:
                break
            spilled.append(
                {"id": cand.id, "reason": "budget", "pointer": f"GET /triggers/{cand.id}"}
            )
            continue
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
        # The same words twice (a retried webhook, a re-run CI log) cost bytes and say nothing new.
        key = " ".join(text.lower().split())
        if key and key in seen_texts:
            spilled.append(
                {
                    "id": trigger.id,
                    "reason": "duplicate",
                    "pointer": f"same text as {seen_texts[key]}",
                }
            )
            continue
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
        seen_texts.setdefault(key, trigger.id)
        chosen.append((cand, line))
    # Read in story order: threads in order of their best item, events in thread order.
    thread_rank: dict[str, int] = {}
    for cand, _ in chosen:
        assert cand.trigger is not None
        thread_rank.setdefault(cand.trigger.thread_id, len(thread_rank))
    chosen.sort(key=lambda pair: (thread_rank[pair[0].trigger.thread_id], pair[0].trigger.seq))  # type: ignore[union-attr]
    text = "".join(line for _, line in chosen)
    return Recall(
        query=query,
        text=text,
        items=[cand.id for cand, _ in chosen],
        bytes=len(text.encode("utf-8")),
        budget_bytes=budget,
        hops=max((cand.hops for cand, _ in chosen), default=0),
        calls=walker.calls,
        spilled=spilled[:MAX_SPILLED],
    )


def _line_prefix(trigger: Trigger) -> str:
    who = f" {trigger.author}" if trigger.author else ""
    return f"{trigger.id} {trigger.thread_id} {trigger.occurred_at[:10]}{who}: "

"""Inline and spill, pure: records and a budget in, a prompt context out.

A context is cut into pieces (a line of the thread index, one event, the
payload preview, ...). Each piece has a place in the rendered context and a
priority; pieces are taken in priority order while they fit, and what does not
fit is reported in `spilled` with the API path that returns it whole. The
budget (UTF-8 bytes, and tokens when a tokenizer is given) is checked on the
finished rendering, so it is never exceeded.

The rendering is prefix-stable by construction, because providers cache
prompt prefixes and reuse one only when a new request starts with it whole:
a fixed header first, then the thread index ordered by creation (a new thread
appends a line; its last activity is shown to the day so that a busy thread
does not rewrite its line on every event), then the thread at hand, and the
current trigger last. Large fields are never inline: a payload shows a short
preview and `GET /triggers/{id}/payload (41 KB, truncated)`.

Nothing here does I/O: `builder.build_context` reads the records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from chainrecall.context.tokens import TokenCounter
from chainrecall.model import Event, Thread, Trigger, Worker

Format = Literal["text", "json"]
FORMATS: tuple[Format, ...] = ("text", "json")

HEADER = (
    "# Chain of Recall memory. Look up any ID at /triggers/{id}, /threads/{id}, "
    '/workers/{id}; a "GET ..." pointer returns what was left out here.'
)

INDEX_TITLE_LIMIT = 80
THREAD_TITLE_LIMIT = 120
KEY_LIMIT = 100
EVENT_SUMMARY_LIMIT = 160
TASK_LIMIT = 80
REPORT_LIMIT = 120
REFS_SHOWN = 8
PREVIEW_CAP_BYTES = 400  # a payload up to this size may be inline whole; larger ones preview
MIN_PREVIEW_BYTES = 24  # a shorter preview says nothing: leave it out instead
NEWEST_EVENTS = 5  # events that outrank the payload preview and the index
MAX_EVENTS_PAGE = 500  # the API's largest page (GET /threads/{id}/events?limit=)

_SECTION_HEADER, _SECTION_INDEX, _SECTION_THREAD, _SECTION_TRIGGER = 0, 1, 2, 3


# -- inputs -------------------------------------------------------------------------


@dataclass(frozen=True)
class PayloadView:
    """What the builder read of a payload: its size and a decoded start, never more."""

    trigger_id: str
    content_type: str
    size: int
    head: str | None  # the decoded start of the payload; None when it is not text
    complete: bool  # True when `head` is the whole payload
    # The decoded end of a long text payload (a log says what went wrong at its end);
    # None for JSON, whose end is closing brackets, and for a complete head.
    tail: str | None = None


@dataclass(frozen=True)
class LaterEvents:
    """Events of the thread after the trigger at hand, and the cursor that pages them."""

    count: int
    cursor: str


@dataclass(frozen=True)
class ContextSource:
    """The records one context is assembled from (read by `builder.build_context`)."""

    threads: Sequence[Thread]  # index candidates, most recently active first
    more_threads: bool  # live threads exist beyond `threads`
    thread: Thread | None = None
    workers: Sequence[Worker] = ()
    events: Sequence[Event] = ()  # recent events, oldest first; before the trigger, if any
    earlier_events: int = 0  # events of the thread before `events`
    later: LaterEvents | None = None
    trigger: Trigger | None = None
    payload: PayloadView | None = None


@dataclass(frozen=True)
class Budget:
    bytes: int
    tokens: int | None = None
    counter: TokenCounter | None = None


# -- outputs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Spill:
    """Something left out of a context or cut short, and the API call that returns it whole."""

    pointer: str  # "GET /triggers/trg_x/payload"
    size: str  # "41 KB", "8 events"
    reason: Literal["truncated", "left out"]
    what: str

    def __str__(self) -> str:
        return f"{self.pointer} ({self.size}, {self.reason})"

    def to_json(self) -> dict[str, str]:
        return {
            "pointer": self.pointer, "size": self.size, "reason": self.reason,
            "what": self.what, "line": str(self),
        }  # fmt: skip


@dataclass(frozen=True)
class Context:
    """A rendered context and its measurements.

    `text` is what the agent receives, in `format` ("text": compact lines; "json":
    compact JSON of `json`); `bytes` and `tokens` measure `text`. `items` are the
    IDs it names; `spilled` what it left out or cut, each with its pointer.
    """

    text: str
    json: dict[str, Any]
    format: Format
    bytes: int
    tokens: int | None
    tokenizer: str | None
    budget_bytes: int
    budget_tokens: int | None
    spilled: list[Spill]
    items: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "text": self.text,
            "bytes": self.bytes,
            "tokens": self.tokens,
            "tokenizer": self.tokenizer,
            "budget_bytes": self.budget_bytes,
            "budget_tokens": self.budget_tokens,
            "spilled": [spill.to_json() for spill in self.spilled],
            "items": self.items,
            "context": self.json,
        }


# -- pieces -------------------------------------------------------------------------

JsonPath = tuple[str, ...]  # dict keys; a final "[]" appends to a list


@dataclass(frozen=True)
class Variant:
    """One way to render a piece: its lines, its JSON fields, the IDs it names."""

    lines: tuple[str, ...]
    fields: tuple[tuple[JsonPath, Any], ...]
    ids: tuple[str, ...] = ()
    spills: tuple[Spill, ...] = ()  # what this rendering cuts short


@dataclass
class Piece:
    key: str
    section: int
    order: float  # place within its section
    priority: float  # lower is taken first
    variants: list[Variant] = field(default_factory=list)  # tried in order; first that fits
    shrink: Callable[[int, int | None, Budget], Variant | None] | None = None
    requires: str | None = None  # a piece that must be in the context for this one to be
    chain: str | None = None  # once a piece of a chain does not fit, the rest are skipped
    left_out: Spill | None = None  # reported when the piece is not in the context


def _one_line(text: str, limit: int) -> tuple[str, bool]:
    """`text` on one line, at most `limit` characters, and whether it was cut."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat, False
    return flat[: limit - 1].rstrip() + "…", True


def _clip_bytes(text: str, limit: int) -> str:
    """The longest start of `text` within `limit` UTF-8 bytes (never half a character)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[: max(0, limit)].decode("utf-8", errors="ignore")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def human_size(size: int) -> str:
    """41984 -> '41 KB': sizes as a reader skims them (1 KB = 1024 bytes)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _events_pointer(thread_id: str, count: int) -> str:
    if count <= MAX_EVENTS_PAGE:
        return f"GET /threads/{thread_id}/events?limit={count}"
    return f"GET /threads/{thread_id}/events"


def _header_piece() -> Piece:
    return Piece(
        "header", _SECTION_HEADER, 0, 0, [Variant((HEADER,), ((("about",), HEADER),))]
    )  # fmt: skip


def _index_pieces(source: ContextSource) -> list[Piece]:
    if not source.threads:
        return []
    pieces = [
        Piece("index", _SECTION_INDEX, 0, 8, [Variant(("## Threads",), ((("threads",), []),))])
    ]
    # Priority: the thread at hand first, then by recent activity; placement: by
    # creation, so that a new thread appends a line instead of shifting the others.
    focus = source.thread.id if source.thread else None
    ranked = sorted(range(len(source.threads)), key=lambda i: (source.threads[i].id != focus, i))
    rank_of = {index: rank for rank, index in enumerate(ranked)}
    placed = sorted(range(len(source.threads)), key=lambda i: _creation_key(source.threads[i]))
    for place, index in enumerate(placed):
        thread = source.threads[index]
        title, cut = _one_line(thread.title or thread.key, INDEX_TITLE_LIMIT)
        day = thread.last_activity_at[:10]
        spills = (
            (Spill(f"GET /threads/{thread.id}", human_size(len(thread.title)), "truncated",
                   f"title of {thread.id}"),)
            if cut else ()
        )  # fmt: skip
        pieces.append(
            Piece(
                f"index:{thread.id}", _SECTION_INDEX, 1 + place, 8 + 0.001 * (1 + rank_of[index]),
                [Variant(
                    (f"{thread.id}: {title} · {thread.status} · {day}",),
                    ((("threads", "[]"), {"id": thread.id, "title": title,
                                          "status": thread.status, "last_activity": day}),),
                    ids=(thread.id,), spills=spills,
                )],
                requires="index",
            )
        )  # fmt: skip
    return pieces


def _creation_key(thread: Thread) -> tuple[str, str]:
    return (thread.created_at, thread.id)


def _thread_pieces(source: ContextSource) -> list[Piece]:
    thread = source.thread
    if thread is None:
        return []
    title, title_cut = _one_line(thread.title or thread.key, THREAD_TITLE_LIMIT)
    key, key_cut = _one_line(thread.key, KEY_LIMIT)
    spills = []
    if title_cut or key_cut:
        spills.append(Spill(f"GET /threads/{thread.id}", "key and title", "truncated",
                            f"title or key of {thread.id}"))  # fmt: skip
    # No event count here: it changes on every event, and this line sits early in
    # the thread section, so it would end the shared prefix of consecutive contexts.
    meta = f"{key} · {thread.status}"
    workers_left = len(thread.owner_workers) - len(source.workers)
    if workers_left > 0:
        meta += f" · {plural(workers_left, 'more worker')} at /threads/{thread.id}"
        spills.append(Spill(f"GET /threads/{thread.id}", plural(workers_left, "worker"), "left out",
                            f"older owner workers of {thread.id}"))  # fmt: skip
    priority = 3.0 if source.trigger is not None else 1.0
    pieces = [
        Piece(
            "thread", _SECTION_THREAD, 0, priority,
            [Variant(
                (f"## Thread {thread.id}: {title}", meta),
                ((("thread",), {"id": thread.id, "title": title, "key": key,
                                "status": thread.status}),),
                ids=(thread.id,), spills=tuple(spills),
            )],
        )
    ]  # fmt: skip
    for i, worker in enumerate(source.workers):
        task, task_cut = _one_line(worker.task, TASK_LIMIT)
        line = f"{worker.id} {worker.status}: {task}"
        entry: dict[str, Any] = {"id": worker.id, "status": worker.status, "task": task}
        cut = task_cut
        if worker.report is not None:
            report, report_cut = _one_line(worker.report.summary, REPORT_LIMIT)
            line += f" → report: {report}"
            entry["report"] = report
            cut = cut or report_cut
        worker_spills = (
            (Spill(f"GET /workers/{worker.id}", "task and report", "truncated",
                   f"task and report of {worker.id}"),)
            if cut else ()
        )  # fmt: skip
        pieces.append(
            Piece(
                f"worker:{worker.id}", _SECTION_THREAD, 1 + 0.01 * i, 7 + 0.01 * i,
                [Variant((line,), ((("thread", "workers", "[]"), entry),),
                         ids=(worker.id,), spills=worker_spills)],
                requires="thread",
                left_out=Spill(f"GET /workers/{worker.id}", "worker", "left out",
                               f"worker {worker.id}"),
            )
        )  # fmt: skip
    newest_first = list(reversed(source.events))
    for age, event in enumerate(newest_first):
        summary, cut = _one_line(event.summary or "(deleted)", EVENT_SUMMARY_LIMIT)
        priority = (5 + 0.01 * age) if age < NEWEST_EVENTS else (9 + 0.001 * age)
        pointer = _object_path(event.id)
        event_spills = (
            (Spill(f"GET {pointer}", "summary", "truncated", f"summary of event {event.seq}"),)
            if cut else ()
        )  # fmt: skip
        pieces.append(
            Piece(
                f"event:{event.seq}", _SECTION_THREAD, 3 + 0.000001 * event.seq, priority,
                [Variant(
                    (f"#{event.seq} {event.at} {event.id}: {summary}",),
                    ((("thread", "events", "[]"), {"seq": event.seq, "at": event.at,
                                                   "id": event.id, "summary": summary}),),
                    ids=(event.id,), spills=event_spills,
                )],
                requires="thread", chain="events",
            )
        )  # fmt: skip
    if source.later is not None and source.trigger is not None:
        later = source.later
        pointer = f"GET /threads/{thread.id}/events?cursor={later.cursor}"
        what = f"{plural(later.count, 'event')} after {source.trigger.id}"
        pieces.append(
            Piece(
                "later", _SECTION_THREAD, 4, 3.5,
                [Variant((f"later: {pointer} ({what})",), ((("thread", "later"), pointer),))],
                requires="thread",
                left_out=Spill(pointer, plural(later.count, "event"), "left out", what),
            )
        )  # fmt: skip
    return pieces


def _object_path(object_id: str) -> str:
    if object_id.startswith("trg_"):
        return f"/triggers/{object_id}"
    if object_id.startswith("wkr_"):
        return f"/workers/{object_id}"
    return f"/threads/{object_id}"


def _trigger_pieces(source: ContextSource) -> list[Piece]:
    trigger = source.trigger
    if trigger is None:
        return []
    summary, summary_cut = _one_line(trigger.summary, 1000)
    meta = f"{trigger.source}/{trigger.kind} at {trigger.occurred_at}"
    if trigger.author:
        meta += f" by {trigger.author}"
    meta += f" in {trigger.thread_id}"
    head = {
        "id": trigger.id, "source": trigger.source, "kind": trigger.kind,
        "at": trigger.occurred_at, "author": trigger.author, "thread_id": trigger.thread_id,
        "summary": summary,
    }  # fmt: skip
    pieces = [
        Piece(
            "trigger", _SECTION_TRIGGER, 0, 1,
            [Variant(
                (f"## Now: {trigger.id}", meta, f"summary: {summary}"),
                ((("trigger",), head),), ids=(trigger.id, trigger.thread_id),
                spills=((Spill(f"GET /triggers/{trigger.id}", "summary", "truncated",
                               f"summary of {trigger.id}"),) if summary_cut else ()),
            )],
        )
    ]  # fmt: skip
    links: list[str] = []
    link_fields: list[tuple[JsonPath, Any]] = []
    link_ids: list[str] = []
    for name, label, value in (
        ("prev", "prev", trigger.neighbours.prev),
        ("next", "next", trigger.neighbours.next),
        ("in_reply_to", "reply to", trigger.in_reply_to),
    ):
        if value:
            links.append(f"{label} {value}")
            link_fields.append(((("trigger", name)), value))
            link_ids.append(value)
    link_spills: tuple[Spill, ...] = ()
    if trigger.refs:
        shown = trigger.refs[:REFS_SHOWN]
        refs_text = " ".join(shown)
        if len(trigger.refs) > len(shown):
            rest = len(trigger.refs) - len(shown)
            refs_text += f" +{rest} at /triggers/{trigger.id}"
            link_spills = (Spill(f"GET /triggers/{trigger.id}", plural(rest, "ref"), "left out",
                                 f"refs of {trigger.id}"),)  # fmt: skip
        links.append(f"refs {refs_text}")
        link_fields.append(((("trigger", "refs")), list(shown)))
        link_ids.extend(shown)
    if links:
        pieces.append(
            Piece(
                "links", _SECTION_TRIGGER, 1, 4,
                [Variant((" · ".join(links),), tuple(link_fields), ids=tuple(link_ids),
                         spills=link_spills)],
                requires="trigger",
                left_out=Spill(f"GET /triggers/{trigger.id}", "neighbours and refs", "left out",
                               f"links of {trigger.id}"),
            )
        )  # fmt: skip
    if source.payload is not None:
        pieces.extend(_payload_pieces(source.payload))
    return pieces


def _payload_pieces(payload: PayloadView) -> list[Piece]:
    href = f"GET /triggers/{payload.trigger_id}/payload"
    size = human_size(payload.size)
    variants: list[Variant] = []
    head = payload.head
    inline_ok = (
        head is not None and payload.complete and payload.size <= PREVIEW_CAP_BYTES
        and "\n" not in head and "\r" not in head
    )  # fmt: skip
    if inline_ok and head is not None:
        variants.append(
            Variant((f"payload ({payload.content_type}): {head}",),
                    ((("trigger", "content_type"), payload.content_type),
                     (("trigger", "payload"), head)))
        )  # fmt: skip
    truncated = Spill(href, size, "truncated", f"payload of {payload.trigger_id}")
    pointer = str(truncated)
    variants.append(
        Variant((f"payload ({payload.content_type}): {pointer}",),
                ((("trigger", "content_type"), payload.content_type),
                 (("trigger", "payload"), pointer)),
                spills=(truncated,))
    )  # fmt: skip
    pieces = [
        Piece(
            "payload",
            _SECTION_TRIGGER,
            2,
            2,
            variants,
            requires="trigger",
            left_out=Spill(href, size, "left out", f"payload of {payload.trigger_id}"),
        )
    ]
    if head is not None and not inline_ok:
        flat = " ".join(head.split())
        flat_tail = " ".join(payload.tail.split()) if payload.tail else None

        def shrink(avail_bytes: int, avail_tokens: int | None, budget: Budget) -> Variant | None:
            room = min(PREVIEW_CAP_BYTES, avail_bytes - len("preview: …\n".encode()))
            room -= 16  # JSON quoting and escapes of a few characters
            while room >= MIN_PREVIEW_BYTES:
                text = _preview_text(flat, flat_tail, room, payload.complete)
                variant = Variant((f"preview: {text}",), ((("trigger", "preview"), text),))
                if avail_tokens is None or budget.counter is None:
                    return variant
                if budget.counter.count(variant.lines[0]) + 1 <= avail_tokens:
                    return variant
                room = room * 3 // 4
            return None

        pieces.append(Piece("preview", _SECTION_TRIGGER, 3, 6, shrink=shrink, requires="payload"))
    return pieces


def _preview_text(head: str, tail: str | None, room: int, complete: bool) -> str:
    """At most `room` bytes (plus an ellipsis) of a payload: its start, and its end if known."""
    if tail is None:
        text = _clip_bytes(head, room)
        return text + "…" if len(text) < len(head) or not complete else text
    head_room = room // 3
    tail_room = room - head_room - len(" … ")
    end = tail.encode("utf-8")[-tail_room:].decode("utf-8", errors="ignore")
    return _clip_bytes(head, head_room) + " … " + end.lstrip()


# -- selection ----------------------------------------------------------------------


class _Renderer:
    """Renders a selection in one format and measures it."""

    def __init__(self, fmt: Format, budget: Budget) -> None:
        self.format = fmt
        self.budget = budget

    def estimate(self, variant: Variant) -> tuple[int, int]:
        """Bytes and tokens a variant adds (exact for text bytes, close otherwise)."""
        if self.format == "text":
            chunk = "\n".join(variant.lines) + "\n"
        else:
            chunk = "".join(
                json.dumps(path[-1], ensure_ascii=False) + ":"
                + json.dumps(value, ensure_ascii=False, separators=(",", ":")) + ",{}"
                for path, value in variant.fields
            )  # fmt: skip
        size = len(chunk.encode("utf-8"))
        tokens = self.budget.counter.count(chunk) if self.budget.counter is not None else 0
        return size, tokens

    def render(self, chosen: list[tuple[Piece, Variant]]) -> tuple[str, dict[str, Any] | None]:
        """The text of a selection, and its JSON form (None in text format: see `document`).

        In text format the JSON form is built only for the selection that fits, since
        the selection loop may render several times.
        """
        ordered = sorted(chosen, key=lambda pv: (pv[0].section, pv[0].order))
        if self.format == "json":
            doc = self.document(ordered)
            text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")) if doc else ""
            return text, doc
        return "\n".join(line for _, variant in ordered for line in variant.lines), None

    def document(self, chosen: list[tuple[Piece, Variant]]) -> dict[str, Any]:
        """The JSON form of a selection."""
        doc: dict[str, Any] = {}
        for _, variant in sorted(chosen, key=lambda pv: (pv[0].section, pv[0].order)):
            for path, value in variant.fields:
                _apply(doc, path, value)
        return doc

    def measure(self, text: str) -> tuple[int, int | None]:
        size = len(text.encode("utf-8"))
        tokens = self.budget.counter.count(text) if self.budget.counter is not None else None
        return size, tokens

    def fits(self, size: int, tokens: int | None) -> bool:
        if size > self.budget.bytes:
            return False
        return self.budget.tokens is None or tokens is None or tokens <= self.budget.tokens


def _apply(doc: dict[str, Any], path: JsonPath, value: Any) -> None:
    """Set (or append, for a final "[]") one field of the JSON form; values are copied."""
    value = _copy_json(value)
    if path[-1] == "[]":
        _walk(doc, path[:-2]).setdefault(path[-2], []).append(value)
        return
    parent = _walk(doc, path[:-1])
    existing = parent.get(path[-1])
    if isinstance(existing, dict) and isinstance(value, dict):
        existing.update(value)
    else:
        parent[path[-1]] = value


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value, as copy.deepcopy makes it at a tenth of the cost
    (deepcopy's generality was a third of a context's assembly time)."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_copy_json(item) for item in value)
    return value


def _walk(doc: dict[str, Any], keys: JsonPath) -> dict[str, Any]:
    node = doc
    for key in keys:
        node = node.setdefault(key, {})
    return node


def _dynamic_pieces(
    source: ContextSource, chosen: dict[str, tuple[Piece, Variant]], pieces: list[Piece]
) -> tuple[list[tuple[Piece, Variant]], list[Spill]]:
    """Pointers whose wording depends on what was chosen: earlier events, more threads."""
    extra: list[tuple[Piece, Variant]] = []
    spills: list[Spill] = []
    thread = source.thread
    if thread is not None:
        shown = [e.seq for e in source.events if f"event:{e.seq}" in chosen]
        first_shown = min(shown) if shown else None
        hidden = source.earlier_events + sum(
            1 for e in source.events if first_shown is None or e.seq < first_shown
        )
        if hidden:
            pointer = _events_pointer(thread.id, hidden)
            spill = Spill(pointer, plural(hidden, "event"), "left out",
                          f"earlier events of {thread.id}")  # fmt: skip
            spills.append(spill)
            if "thread" in chosen:
                piece = Piece("earlier", _SECTION_THREAD, 2, 0)
                extra.append((piece, Variant((f"earlier: {spill}",),
                                             ((("thread", "earlier"), str(spill)),))))  # fmt: skip
    left_out = [p for p in pieces if p.key.startswith("index:") and p.key not in chosen]
    if left_out or source.more_threads:
        count = f"{len(left_out)}+" if source.more_threads else str(len(left_out))
        spill = Spill(f"GET /threads?limit={MAX_EVENTS_PAGE}", f"{count} threads", "left out",
                      "threads not in the index")  # fmt: skip
        spills.append(spill)
        if "index" in chosen:
            piece = Piece("more", _SECTION_INDEX, 10**9, 0)
            extra.append((piece, Variant((f"… {spill}",), ((("threads_more",), str(spill)),))))
    return extra, spills


def assemble(source: ContextSource, budget: Budget, fmt: Format = "text") -> Context:
    """The context for `source` within `budget`: pieces by priority while they fit."""
    if budget.bytes < 0 or (budget.tokens is not None and budget.tokens < 0):
        raise ValueError("a budget cannot be negative")
    if budget.tokens is not None and budget.counter is None:
        raise ValueError("a token budget needs a tokenizer")
    pieces = [
        _header_piece(), *_index_pieces(source), *_thread_pieces(source),
        *_trigger_pieces(source),
    ]  # fmt: skip
    renderer = _Renderer(fmt, budget)
    chosen: dict[str, tuple[Piece, Variant]] = {}
    used_bytes, used_tokens = 0, 0
    broken_chains: set[str] = set()
    for piece in sorted(pieces, key=lambda p: p.priority):
        if piece.chain in broken_chains:
            continue
        if piece.requires is not None and piece.requires not in chosen:
            continue  # what it belongs to did not fit (parents have lower priority numbers)
        avail_bytes = budget.bytes - used_bytes
        avail_tokens = None if budget.tokens is None else budget.tokens - used_tokens
        candidates = list(piece.variants)
        if piece.shrink is not None:
            shrunk = piece.shrink(avail_bytes, avail_tokens, budget)
            candidates = [shrunk] if shrunk is not None else []
        for variant in candidates:
            size, tokens = renderer.estimate(variant)
            if size <= avail_bytes and (avail_tokens is None or tokens <= avail_tokens):
                chosen[piece.key] = (piece, variant)
                used_bytes += size
                used_tokens += tokens
                break
        else:
            if piece.chain is not None:
                broken_chains.add(piece.chain)
    # The estimates are close, not exact (JSON punctuation, tokens across line ends):
    # render, measure exactly, and drop the least important piece until it fits.
    while True:
        extra, dynamic_spills = _dynamic_pieces(source, chosen, pieces)
        final = [*chosen.values(), *extra]
        text, doc = renderer.render(final)
        size, counted = renderer.measure(text)
        if renderer.fits(size, counted):
            if doc is None:
                doc = renderer.document(final)
            break
        needed = {p.requires for p, _ in chosen.values() if p.requires is not None}
        droppable = [p for p, _ in chosen.values() if p.key not in needed]
        victim = max(droppable, key=lambda p: p.priority)
        del chosen[victim.key]
    spilled = list(dynamic_spills)
    for piece in pieces:
        if piece.key in chosen:
            spilled.extend(chosen[piece.key][1].spills)
        elif piece.left_out is not None:
            spilled.append(piece.left_out)
    if source.trigger is not None and "trigger" not in chosen:
        spilled.append(Spill(f"GET /triggers/{source.trigger.id}", "trigger", "left out",
                             f"the trigger at hand, {source.trigger.id}"))  # fmt: skip
    if source.thread is not None and "thread" not in chosen:
        spilled.append(Spill(f"GET /threads/{source.thread.id}", "thread", "left out",
                             f"the thread at hand, {source.thread.id}"))  # fmt: skip
    items: list[str] = []
    for _, variant in sorted(chosen.values(), key=lambda pv: (pv[0].section, pv[0].order)):
        for object_id in variant.ids:
            if object_id not in items:
                items.append(object_id)
    return Context(
        text=text, json=doc, format=fmt, bytes=size, tokens=counted,
        tokenizer=budget.counter.name if budget.counter is not None else None,
        budget_bytes=budget.bytes, budget_tokens=budget.tokens,
        spilled=_unique(spilled), items=items,
    )  # fmt: skip


def _unique(spills: list[Spill]) -> list[Spill]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for spill in spills:
        mark = (spill.pointer, spill.what, spill.reason)
        if mark not in seen:
            seen.add(mark)
            out.append(spill)
    return out

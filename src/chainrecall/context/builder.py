"""`build_context`: read what a context needs from a `Memory`, then assemble it (pure).

The reads are bounded whatever the size of the history: the most recently
active threads (index_limit of them), the thread at hand, its last few workers,
the `events_limit` events before the trigger (by position, through the primary
key), the trigger and the start of its payload. So assembly time does not grow
with the number of stored triggers.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

from chainrecall.context.assemble import (
    FORMATS,
    Budget,
    Context,
    ContextSource,
    Format,
    LaterEvents,
    PayloadView,
    assemble,
)
from chainrecall.context.tokens import TokenCounter, load_tokenizer
from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.model import Event, Trigger, Worker
from chainrecall.paging import encode_cursor

if TYPE_CHECKING:
    from chainrecall.service import Memory

DEFAULT_INDEX_LIMIT = 50
MAX_INDEX_LIMIT = 500
DEFAULT_EVENTS_LIMIT = 12
MAX_EVENTS_LIMIT = 200
WORKERS_SHOWN = 3
MAX_BUDGET_BYTES = 16 * 1024 * 1024
MAX_BUDGET_TOKENS = 4_000_000
PAYLOAD_HEAD_BYTES = 4096  # read this much of a payload for its preview; the rest stays put


def check_budget(value: int, field: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidInput(
            f"{field} must be an integer from 1 to {maximum}; got {str(value)[:40]!r}",
            field=field,
        )
    return value


def build_context(
    memory: Memory,
    *,
    trigger_id: str | None = None,
    thread_id: str | None = None,
    budget_bytes: int,
    budget_tokens: int | None = None,
    tokenizer: str | TokenCounter | None = None,
    index_limit: int = DEFAULT_INDEX_LIMIT,
    events_limit: int = DEFAULT_EVENTS_LIMIT,
    fmt: Format = "text",
) -> Context:
    """The context an agent receives for a trigger (or a thread) within a budget.

    Raises NotFound for an unknown trigger or thread, InvalidInput for a bad
    budget or option, NotConfigured when `tokenizer` needs the `tokens` extra.
    """
    check_budget(budget_bytes, "budget_bytes", MAX_BUDGET_BYTES)
    if budget_tokens is not None:
        check_budget(budget_tokens, "budget_tokens", MAX_BUDGET_TOKENS)
        if tokenizer is None:
            raise InvalidInput(
                "budget_tokens needs a tokenizer to count with: deepseek, o200k or cl100k",
                field="tokenizer",
            )
    if not 0 <= index_limit <= MAX_INDEX_LIMIT:
        raise InvalidInput(
            f"index_limit must be from 0 to {MAX_INDEX_LIMIT}; got {index_limit}",
            field="index_limit",
        )
    if not 0 <= events_limit <= MAX_EVENTS_LIMIT:
        raise InvalidInput(
            f"events must be from 0 to {MAX_EVENTS_LIMIT}; got {events_limit}", field="events"
        )
    if fmt not in FORMATS:
        raise InvalidInput(f"format must be text or json; got {str(fmt)[:20]!r}", field="format")
    if trigger_id is None and thread_id is None:
        raise InvalidInput(
            "give trigger_id (the trigger at hand) or thread_id (the thread at hand)",
            field="trigger_id",
        )
    counter = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer

    trigger = memory.get_trigger(trigger_id) if trigger_id is not None else None
    if trigger is not None and thread_id is not None and thread_id != trigger.thread_id:
        raise InvalidInput(
            f"trigger {trigger.id} belongs to thread {trigger.thread_id}, not {thread_id}; "
            "give only trigger_id, or the trigger's own thread",
            field="thread_id",
        )
    thread = memory.get_thread(trigger.thread_id if trigger is not None else str(thread_id))
    store, ns = memory.store, memory.namespace

    threads = store.list_threads(ns, index_limit + 1) if index_limit else []
    more_threads = len(threads) > index_limit
    threads = threads[:index_limit]

    workers = _workers(memory, thread.owner_workers[-WORKERS_SHOWN:])
    upto = trigger.seq - 1 if trigger is not None else thread.event_count
    after = _window_start(upto, events_limit)
    events: list[Event] = []
    if upto > after:
        events, _ = store.list_events(ns, thread.id, after, upto - after)
        events = [e for e in events if e.seq <= upto]
    later = None
    if trigger is not None and thread.event_count > trigger.seq:
        cursor = encode_cursor(store.cursor_secret(), thread.id, trigger.seq)
        later = LaterEvents(count=thread.event_count - trigger.seq, cursor=cursor)

    source = ContextSource(
        threads=threads, more_threads=more_threads, thread=thread, workers=workers,
        events=events, earlier_events=events[0].seq - 1 if events else max(0, upto),
        later=later, trigger=trigger,
        payload=_payload_view(memory, trigger) if trigger is not None else None,
    )  # fmt: skip
    budget = Budget(bytes=budget_bytes, tokens=budget_tokens, counter=counter)
    return assemble(source, budget, fmt)


def _window_start(upto: int, events_limit: int) -> int:
    """The position after which the shown events start: the last `events_limit` at most.

    The start moves in steps of half a window, not one event at a time, so that
    consecutive contexts on one thread show the same older events and only
    append the newest (a longer shared prefix for the provider's cache).
    """
    first = upto - events_limit
    if first <= 0:
        return 0
    step = max(1, events_limit // 2)
    return -(-first // step) * step


def _workers(memory: Memory, worker_ids: list[str]) -> list[Worker]:
    workers = []
    for worker_id in worker_ids:
        try:
            workers.append(memory.get_worker(worker_id))
        except ChainRecallError:
            continue  # a deleted worker (410) has nothing to show; its ID stays in the thread
    return workers


def is_text_type(content_type: str) -> bool:
    ctype = content_type.lower()
    return ctype.startswith("text/") or "json" in ctype or "xml" in ctype


def _payload_view(memory: Memory, trigger: Trigger) -> PayloadView:
    ref = trigger.payload
    head = tail = None
    complete = False
    if is_text_type(ref.content_type):
        data = memory.get_payload(trigger.id).data
        complete = len(data) <= PAYLOAD_HEAD_BYTES
        # An incremental decoder drops a character cut in half at the end of the head.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        head = decoder.decode(data[:PAYLOAD_HEAD_BYTES], final=complete)
        if not complete and "json" not in ref.content_type.lower():
            # errors="ignore" drops a character cut in half at the start of the tail.
            tail = data[-PAYLOAD_HEAD_BYTES:].decode("utf-8", errors="ignore")
    return PayloadView(
        trigger_id=trigger.id, content_type=ref.content_type, size=ref.bytes, head=head,
        complete=complete, tail=tail,
    )  # fmt: skip

"""The application layer: every shell (HTTP, CLI, MCP, the embedded library) calls this.

`Memory` is the recall memory of one namespace over one store. It validates
input, derives one-line summaries and search text, encodes payloads, and turns
cursors into positions; the store does the transactional work. An ID that is
malformed or of the wrong kind is answered exactly like an unknown one (404):
a fetch by ID never searches and never answers a different object.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from chainrecall import ids
from chainrecall.errors import InvalidInput, NotFound, UnknownReference
from chainrecall.model import (
    Deletion,
    Event,
    EventPage,
    NewTrigger,
    Payload,
    SearchResults,
    Thread,
    Trigger,
    Worker,
    normalize_timestamp,
)
from chainrecall.paging import decode_cursor, encode_cursor, parse_limit
from chainrecall.store.base import DEFAULT_NAMESPACE, Appended, Store, one_line

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"

SUMMARY_LIMIT = 200
MAX_SUMMARY_INPUT = 2000
MAX_LABEL = 100
MAX_KEY = 512
MAX_QUERY = 1000
MAX_SEARCH_LIMIT = 100
_STATUS = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SUMMARY_FIELDS = ("summary", "title", "subject", "text", "message", "body", "description")


class Memory:
    """The recall memory of one namespace: record, fetch, page, search."""

    def __init__(self, store: Store, namespace: str = DEFAULT_NAMESPACE) -> None:
        self.store = store
        self.namespace = namespace

    def in_namespace(self, namespace: str) -> Memory:
        return Memory(self.store, namespace)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes --------------------------------------------------------------
    def record_trigger(
        self,
        *,
        source: str,
        kind: str,
        payload: Any = None,
        thread_key: str | None = None,
        thread_id: str | None = None,
        summary: str | None = None,
        occurred_at: str | None = None,
        dedupe_key: str | None = None,
        author: str | None = None,
        in_reply_to: str | None = None,
        refs: Sequence[str] = (),
        thread_title: str | None = None,
        thread_status: str | None = None,
        raw: bytes | None = None,
        content_type: str | None = None,
        search_text: str | None = None,
        aliases: Sequence[str] = (),
        thread_aliases: Sequence[str] = (),
    ) -> Appended:
        """Record one inbound event; a repeated `dedupe_key` answers the first record."""
        item = self.new_trigger(
            source=source, kind=kind, payload=payload, thread_key=thread_key,
            thread_id=thread_id, summary=summary, occurred_at=occurred_at,
            dedupe_key=dedupe_key, author=author, in_reply_to=in_reply_to, refs=refs,
            thread_title=thread_title, thread_status=thread_status, raw=raw,
            content_type=content_type, search_text=search_text, aliases=aliases,
            thread_aliases=thread_aliases,
        )  # fmt: skip
        return self.store.append_trigger(self.namespace, item)

    def record_triggers(self, items: Sequence[NewTrigger]) -> list[Appended]:
        """Record many triggers in one transaction (all or none); build items with new_trigger."""
        return self.store.append_triggers(self.namespace, items)

    @staticmethod
    def new_trigger(
        *,
        source: str,
        kind: str,
        payload: Any = None,
        thread_key: str | None = None,
        thread_id: str | None = None,
        summary: str | None = None,
        occurred_at: str | None = None,
        dedupe_key: str | None = None,
        author: str | None = None,
        in_reply_to: str | None = None,
        refs: Sequence[str] = (),
        thread_title: str | None = None,
        thread_status: str | None = None,
        raw: bytes | None = None,
        content_type: str | None = None,
        search_text: str | None = None,
        aliases: Sequence[str] = (),
        thread_aliases: Sequence[str] = (),
    ) -> NewTrigger:
        """Validate one trigger's fields and encode its payload, without storing it."""
        source = _label(source, "source")
        kind = _label(kind, "kind")
        if (thread_key is None) == (thread_id is None):
            raise InvalidInput(
                "give exactly one of thread_key (a natural key such as "
                "'github:acme/payments#412'; the thread is created on first use) or thread_id",
                field="thread_key",
            )
        if thread_key is not None:
            thread_key = _text(thread_key, "thread_key", MAX_KEY)
        if thread_id is not None and not ids.is_valid(thread_id, "thread"):
            raise UnknownReference(thread_id[:60], "thread_id")
        # A caller's own search text replaces the payload's: skip extracting it (for a
        # 20 KB GitHub delivery, a second JSON parse and walk: half of its planning time).
        data, ctype, text = encode_payload(payload, raw, content_type, index=search_text is None)
        if search_text is not None:
            text = search_text
        line = (
            one_line(_text(summary, "summary", MAX_SUMMARY_INPUT), SUMMARY_LIMIT) if summary else ""
        )
        if not line:
            line = derive_summary(kind, payload, text)
        return NewTrigger(
            source=source, kind=kind, summary=line, payload=data, content_type=ctype,
            search_text=text, thread_key=thread_key, thread_id=thread_id,
            thread_title=one_line(_text(thread_title, "thread_title", MAX_SUMMARY_INPUT), SUMMARY_LIMIT)
            if thread_title else None,
            thread_status=_status(thread_status, "thread_status") if thread_status else None,
            author=_text(author, "author", MAX_LABEL) if author else None,
            occurred_at=normalize_timestamp(occurred_at) if occurred_at else None,
            dedupe_key=_text(dedupe_key, "dedupe_key", MAX_KEY) if dedupe_key is not None else None,
            in_reply_to=in_reply_to, refs=tuple(refs), aliases=tuple(aliases),
            thread_aliases=tuple(thread_aliases),
        )  # fmt: skip

    def start_worker(self, thread_id: str | Sequence[str], task: str) -> Worker:
        """Start a worker on a thread (or several); the threads list it as an owner."""
        thread_ids = [thread_id] if isinstance(thread_id, str) else list(thread_id)
        if not thread_ids:
            raise InvalidInput("a worker needs at least one thread_id", field="thread_id")
        for tid in thread_ids:
            if not ids.is_valid(tid, "thread"):
                raise UnknownReference(tid[:60], "thread_id")
        task = _no_nul(_text(task, "task", 20_000), "task")
        if not task.strip():
            raise InvalidInput("task must say what the worker is to do", field="task")
        return self.store.start_worker(self.namespace, thread_ids, task)

    def report(
        self,
        worker_id: str,
        *,
        summary: str,
        body: str = "",
        refs: Sequence[str] = (),
        status: str = "ready",
    ) -> Worker:
        """File a worker's report; the worker's record shows it and keeps the earlier ones."""
        self._require_id(worker_id, "worker")
        summary = _text(summary, "summary", MAX_SUMMARY_INPUT)
        body = _text(body, "body", 10 * 1024 * 1024)
        if not summary.strip():
            raise InvalidInput("summary must not be empty", field="summary")
        return self.store.add_report(
            self.namespace, worker_id, summary=one_line(summary, MAX_SUMMARY_INPUT),
            body=_no_nul(body, "body"), refs=list(refs), status=_status(status, "status"),
        )  # fmt: skip

    # -- reads ---------------------------------------------------------------
    def get_trigger(self, trigger_id: str) -> Trigger:
        self._require_id(trigger_id, "trigger")
        return self.store.get_trigger(self.namespace, trigger_id)

    def cited_by(self, trigger_id: str) -> list[str]:
        """What links back to a trigger: the triggers replying to or citing it, the workers
        whose reports cite it ("what is linked to this?")."""
        self._require_id(trigger_id, "trigger")
        return self.store.cited_by(self.namespace, trigger_id)

    def get_payload(self, trigger_id: str) -> Payload:
        self._require_id(trigger_id, "trigger")
        return self.store.get_payload(self.namespace, trigger_id)

    def get_thread(self, thread_id: str) -> Thread:
        self._require_id(thread_id, "thread")
        return self.store.get_thread(self.namespace, thread_id)

    def resolve_alias(self, alias: str) -> str | None:
        """The ID an ingest alias names, or None (see NewTrigger.aliases)."""
        return self.store.resolve_alias(self.namespace, alias)

    def find_thread(self, key: str) -> Thread:
        return self.store.find_thread(self.namespace, key)

    def get_worker(self, worker_id: str) -> Worker:
        self._require_id(worker_id, "worker")
        return self.store.get_worker(self.namespace, worker_id)

    def list_threads(self, limit: int | str | None = None) -> list[Thread]:
        return self.store.list_threads(self.namespace, parse_limit(limit))

    def list_events(
        self, thread_id: str, cursor: str | None = None, limit: int | str | None = None
    ) -> EventPage:
        """One page of a thread's events, oldest first, with a cursor that stays valid."""
        page_size = parse_limit(limit)
        self.get_thread(thread_id)  # 404 / 410 before any cursor question
        secret = self.store.cursor_secret()
        after = decode_cursor(secret, cursor, thread_id) if cursor is not None else 0
        events, has_more = self.store.list_events(self.namespace, thread_id, after, page_size)
        last = events[-1].seq if events else after
        return EventPage(
            items=events, next_cursor=encode_cursor(secret, thread_id, last), has_more=has_more
        )

    def walk_events(self, thread_id: str, cursor: str | None = None) -> Iterator[Event]:
        """Every event of a thread from `cursor` on, following next_cursor to the end."""
        while True:
            page = self.list_events(thread_id, cursor, None)
            yield from page.items
            cursor = page.next_cursor
            if not page.has_more:
                return

    def search(self, query: str, limit: int | str | None = 10) -> SearchResults:
        """Entry points for recall: IDs with one-line summaries, best match first (BM25)."""
        if not query or not query.strip():
            raise InvalidInput("q must be a non-empty search query", field="q")
        if len(query) > MAX_QUERY:
            raise InvalidInput(f"q is longer than {MAX_QUERY} characters", field="q")
        size = parse_limit(limit)
        size = min(size, MAX_SEARCH_LIMIT)
        return SearchResults(query=query, items=self.store.search(self.namespace, query, size))

    # -- deletion ------------------------------------------------------------
    def delete_trigger(self, trigger_id: str, *, actor: str, reason: str = "") -> Deletion:
        """Erase a trigger's content; its ID answers 410 from now on and is never reused."""
        self._require_id(trigger_id, "trigger")
        return self.store.delete_trigger(self.namespace, trigger_id, actor=actor, reason=reason)

    def delete_thread(self, thread_id: str, *, actor: str, reason: str = "") -> Deletion:
        """Erase a thread and its triggers' content; tombstones keep the IDs retired."""
        self._require_id(thread_id, "thread")
        return self.store.delete_thread(self.namespace, thread_id, actor=actor, reason=reason)

    def _require_id(self, value: str, kind: ids.Kind) -> None:
        if not ids.is_valid(value, kind):
            raise NotFound(value[:100], kind)


def encode_payload(
    payload: Any, raw: bytes | None, content_type: str | None, *, index: bool = True
) -> tuple[bytes, str, str]:
    """Bytes to store, their content type, and the text to index for search.

    A raw delivery is kept byte for byte with its own content type; a string is
    stored as UTF-8 text; any other JSON value as compact JSON. With `index`
    false the text is not extracted ("" is returned for it): the caller has its own.
    """
    if raw is not None:
        ctype = content_type or "application/octet-stream"
        text = ""
        if not index:
            return raw, ctype, text
        if ctype.startswith(("text/", JSON_TYPE)) or "json" in ctype or "xml" in ctype:
            text = raw[: 256 * 1024].decode("utf-8", errors="replace")
            if "json" in ctype:
                with contextlib.suppress(ValueError):
                    text = " ".join(_strings(json.loads(raw)))
        return raw, ctype, text
    try:
        if isinstance(payload, str):
            return payload.encode("utf-8"), TEXT_TYPE, payload
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            "payload is not valid Unicode (a lone surrogate)", field="payload"
        ) from None
    except (ValueError, RecursionError):
        raise InvalidInput(
            "payload is not a JSON value that can be stored", field="payload"
        ) from None
    return data, JSON_TYPE, " ".join(_strings(payload)) if index else ""


def _strings(value: Any, budget: int = 256 * 1024) -> list[str]:
    """String and number leaves of a JSON value, depth first, up to a size budget."""
    out: list[str] = []
    stack = [value]
    size = 0
    while stack and size < budget:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
            size += len(node)
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int | float):
            out.append(str(node))
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return out


def derive_summary(kind: str, payload: Any, text: str) -> str:
    """A one-line summary when the sender gave none: a telling field, else the text's start."""
    candidate = ""
    if isinstance(payload, dict):
        for name in _SUMMARY_FIELDS:
            value = payload.get(name)
            if isinstance(value, str) and value.strip():
                candidate = value
                break
    if not candidate:
        candidate = text
    line = one_line(candidate, SUMMARY_LIMIT)
    return line or kind


def _label(value: Any, field: str) -> str:
    text = _text(value, field, MAX_LABEL).strip()
    if not text:
        raise InvalidInput(f"{field} must not be empty", field=field)
    return text


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if len(value) > limit:
        raise InvalidInput(f"{field} is longer than {limit} characters", field=field)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                f"{field} is not valid Unicode (a lone surrogate)", field=field
            ) from None
    if field not in {"task", "body"} and _CONTROL.search(
        value.replace("\n", " ").replace("\t", " ")
    ):
        raise InvalidInput(f"{field} contains control characters", field=field)
    return value


def _no_nul(value: str, field: str) -> str:
    """Free text may hold control characters, but not NUL: PostgreSQL text cannot store it."""
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character (\\u0000); remove it", field=field)
    return value


def _status(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _STATUS.match(value):
        raise InvalidInput(
            f"{field} must be a short lowercase word such as running, waiting, blocked, "
            f"ready, done or failed; got {str(value)[:40]!r}",
            field=field,
        )
    return value

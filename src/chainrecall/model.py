"""Pure value types: Trigger, Thread, Worker, Report, Event and their inputs.

These are the records the recall API answers with, the same objects in the
embedded library, the HTTP client and every storage backend. They are frozen:
a record is a snapshot read from the store, never a handle that writes back.

Timestamps are strings in one canonical form, UTC with a `Z` (e.g.
`2026-11-03T09:12:44Z`), so that they compare as text, round-trip byte for
byte across backends, and cost few tokens.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chainrecall.errors import InvalidInput

EventKind = Literal["trigger", "worker", "report"]


def now_iso() -> str:
    """The current time in the canonical form, to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_timestamp(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_timestamp(value: str, field: str = "occurred_at") -> str:
    """Parse an RFC 3339 / ISO 8601 time and answer it in the canonical form.

    A time without an offset is taken as UTC (what most webhook senders mean).
    """
    text = value.strip()
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{field} {value!r} is not an ISO 8601 time; send e.g. 2026-11-03T09:12:44Z",
            field=field,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_timestamp(moment)


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class PayloadRef(Record):
    """Where a trigger's payload lives; the payload itself is fetched apart."""

    href: str = Field(description="GET this path for the payload, whole")
    content_type: str
    bytes: int = Field(description="size of the stored payload in bytes")


class Neighbours(Record):
    prev: str | None = Field(None, description="the previous trigger in the same thread")
    next: str | None = Field(None, description="the next trigger in the same thread")


class Trigger(Record):
    """One inbound event: a chat message, a webhook delivery, a CI callback, an e-mail."""

    id: str
    thread_id: str
    seq: int = Field(description="position of this trigger's event in its thread")
    source: str
    kind: str
    summary: str
    author: str | None = None
    occurred_at: str
    received_at: str
    dedupe_key: str | None = None
    payload: PayloadRef
    neighbours: Neighbours
    in_reply_to: str | None = None
    refs: list[str] = Field(default_factory=list, description="triggers this one cites")


class Thread(Record):
    """The chain of related events on one PR, chat topic, e-mail thread or ticket."""

    id: str
    key: str
    title: str
    summary: str
    status: str
    event_count: int
    owner_workers: list[str]
    created_at: str
    first_activity_at: str
    last_activity_at: str


class Report(Record):
    """One report filed by a worker; a worker may report more than once."""

    n: int = Field(description="1 for the first report, 2 for the next, ...")
    summary: str
    body: str
    refs: list[str]
    status: str
    at: str


class Worker(Record):
    """One agent session that took on a task on one or more threads."""

    id: str
    thread_ids: list[str]
    task: str
    status: str
    started_at: str
    updated_at: str
    report: Report | None = Field(None, description="the latest report, if any")
    earlier_reports: list[Report] = Field(
        default_factory=list, description="reports before the latest, oldest first"
    )


class Event(Record):
    """One entry of a thread's event log, as paging answers it."""

    seq: int
    id: str
    kind: EventKind
    at: str
    summary: str | None
    deleted: bool = False


class EventPage(Record):
    items: list[Event]
    next_cursor: str
    has_more: bool


class SearchHit(Record):
    id: str
    kind: Literal["trigger", "thread", "worker"]
    thread_id: str | None
    summary: str
    score: float


class SearchResults(Record):
    query: str
    items: list[SearchHit]


Scope = Literal["read", "write", "admin"]


class TokenInfo(Record):
    """An API token as stored: never the token itself, only its hash and what it may do."""

    id: str
    namespace: str
    scope: Scope
    name: str
    created_at: str
    revoked_at: str | None = None


class Deletion(Record):
    """The record of one erasure: who, when, what."""

    object_id: str
    kind: Literal["trigger", "thread"]
    namespace: str
    actor: str
    reason: str
    at: str
    erased_triggers: int = Field(description="triggers whose content was erased")


class Payload(BaseModel):
    """A stored payload, byte for byte, with the content type it arrived with."""

    model_config = ConfigDict(frozen=True)

    content_type: str
    data: bytes

    def json_value(self) -> Any:
        return json.loads(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class NewTrigger(BaseModel):
    """What a store needs to append one trigger (validated by the service)."""

    model_config = ConfigDict(frozen=True)

    source: str
    kind: str
    summary: str
    payload: bytes
    content_type: str
    search_text: str
    thread_key: str | None = None
    thread_id: str | None = None
    thread_title: str | None = None
    thread_status: str | None = None
    author: str | None = None
    occurred_at: str | None = None
    dedupe_key: str | None = None
    in_reply_to: str | None = None
    refs: tuple[str, ...] = ()
    # Extra names that ingest adapters resolve later (`Store.resolve_alias`): names for
    # this trigger (e.g. a GitHub comment id, an e-mail Message-ID) and for its thread
    # (e.g. a PR's head SHA or branch). The latest trigger to claim a name wins it.
    aliases: tuple[str, ...] = ()
    thread_aliases: tuple[str, ...] = ()

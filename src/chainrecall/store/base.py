"""The storage port: what the application needs from a database, written once.

Every backend (SQLite in `sqlite.py`, PostgreSQL in `postgres.py`) implements
this interface and passes the same contract suite (`tests/test_store_contract.py`,
run once per backend). The port owns the invariants that need a transaction:

- a trigger, its payload, its thread (created on first use of a natural key),
  its event, its links and its search text are written together or not at all;
- each thread's events get consecutive positions (`seq` 1, 2, 3, ...) assigned
  under a lock on that thread, so a reader paging "after seq N" never skips an
  event that commits later with a smaller position;
- a `dedupe_key` is unique within (namespace, source): a retry answers the
  first record, also when the retries race;
- every lookup is by exact ID within one namespace; an ID from another
  namespace is indistinguishable from an unknown one.

Reads raise `NotFound` / `Gone`, never return None. Driver errors are
translated into `chainrecall.errors` inside each backend, in one place.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import NamedTuple

from chainrecall.history import (
    AgentMessage,
    AgentSession,
    ModelRequest,
    NewMessage,
    NewModelRequest,
    SessionKind,
)
from chainrecall.model import (
    Deletion,
    Event,
    NewTrigger,
    Payload,
    Scope,
    SearchHit,
    Thread,
    TokenInfo,
    Trigger,
    Worker,
)

DEFAULT_NAMESPACE = "default"

# Statuses of a worker that still owns its threads (thread pass-through goes to it).
LIVE_WORKER_STATUSES = frozenset({"running", "waiting", "blocked"})

SEARCH_TEXT_LIMIT = 64 * 1024

_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
    ]
)
_WORD = re.compile(r"\w+", re.UNICODE)


class Appended(NamedTuple):
    """The outcome of an append: the stored record, and False when a dedupe key matched."""

    trigger: Trigger
    created: bool


def search_terms(query: str, max_terms: int = 32) -> list[str]:
    """The words of a free-text query worth matching, lowercased, stopwords dropped.

    Shared by the backends so that both search for the same terms.
    """
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in _STOPWORDS] or words
    seen: dict[str, None] = {}
    for word in kept:
        seen.setdefault(word, None)
    return list(seen)[:max_terms]


def worker_event_summary(task: str) -> str:
    return f"worker started: {one_line(task, 160)}"


def report_event_summary(status: str, summary: str) -> str:
    return f"report ({status}): {one_line(summary, 160)}"


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


class Store(ABC):
    """Abstract storage backend. All methods are thread-safe."""

    url: str

    # -- lifecycle -----------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def cursor_secret(self) -> bytes:
        """The key that signs paging cursors; kept in the database so it moves with it."""

    # -- writes --------------------------------------------------------------
    @abstractmethod
    def append_triggers(self, ns: str, items: Sequence[NewTrigger]) -> list[Appended]:
        """Append triggers in one transaction: all are stored, or none.

        Raises UnknownReference for a `thread_id`, `in_reply_to` or ref that does not
        resolve in `ns`.
        """

    def append_trigger(self, ns: str, item: NewTrigger) -> Appended:
        return self.append_triggers(ns, [item])[0]

    @abstractmethod
    def start_worker(self, ns: str, thread_ids: Sequence[str], task: str) -> Worker:
        """Create a worker owning `thread_ids`; each thread gets a `worker` event."""

    @abstractmethod
    def add_report(
        self, ns: str, worker_id: str, *, summary: str, body: str, refs: Sequence[str], status: str
    ) -> Worker:
        """File a report; each of the worker's threads gets a `report` event."""

    # -- reads ---------------------------------------------------------------
    @abstractmethod
    def resolve_alias(self, ns: str, alias: str) -> str | None:
        """The ID an alias names (see NewTrigger.aliases), or None when nothing claimed it.

        Aliases are ingest's lookup table, not an API lookup: an unknown alias is normal.
        """

    @abstractmethod
    def get_trigger(self, ns: str, trigger_id: str) -> Trigger: ...

    @abstractmethod
    def cited_by(self, ns: str, trigger_id: str) -> list[str]:
        """The IDs of the triggers (replies, refs) and workers (reports) that cite a trigger."""

    @abstractmethod
    def get_payload(self, ns: str, trigger_id: str) -> Payload: ...

    @abstractmethod
    def get_thread(self, ns: str, thread_id: str) -> Thread: ...

    @abstractmethod
    def find_thread(self, ns: str, key: str) -> Thread:
        """The live thread with natural key `key` (NotFound when there is none)."""

    @abstractmethod
    def get_worker(self, ns: str, worker_id: str) -> Worker: ...

    @abstractmethod
    def list_events(
        self, ns: str, thread_id: str, after_seq: int, limit: int
    ) -> tuple[list[Event], bool]:
        """Up to `limit` events with seq > after_seq, oldest first, and whether more follow."""

    @abstractmethod
    def list_threads(self, ns: str, limit: int) -> list[Thread]:
        """Live threads, most recently active first."""

    @abstractmethod
    def search(self, ns: str, query: str, limit: int) -> list[SearchHit]:
        """Full-text search over summaries, payload text and reports, best first (BM25)."""

    # -- access control --------------------------------------------------------
    @abstractmethod
    def create_token(self, ns: str, scope: Scope, name: str, token_hash: str) -> TokenInfo:
        """Store a token's hash (the token itself is never stored)."""

    @abstractmethod
    def find_token(self, token_hash: str) -> TokenInfo | None:
        """The active (not revoked) token with this hash, or None."""

    @abstractmethod
    def has_tokens(self) -> bool:
        """True when at least one active token exists: then every request needs one."""

    @abstractmethod
    def list_tokens(self) -> list[TokenInfo]: ...

    @abstractmethod
    def revoke_token(self, token_id: str) -> TokenInfo:
        """Revoke a token by its public id (NotFound when there is none)."""

    @abstractmethod
    def set_webhook_secret(self, ns: str, source: str, secret: str) -> None:
        """The signing secret of a webhook source (github, slack) for one namespace."""

    @abstractmethod
    def webhook_secrets(self, source: str) -> list[tuple[str, str]]:
        """Every (namespace, secret) configured for a webhook source."""

    # -- deletion and retention ------------------------------------------------
    @abstractmethod
    def delete_trigger(self, ns: str, trigger_id: str, *, actor: str, reason: str) -> Deletion:
        """Erase a trigger's content (payload, summary, search text) and keep a tombstone."""

    @abstractmethod
    def delete_thread(self, ns: str, thread_id: str, *, actor: str, reason: str) -> Deletion:
        """Erase a thread and all its triggers' content; keep tombstones."""

    @abstractmethod
    def triggers_received_before(
        self, ns: str | None, cutoff: str, limit: int
    ) -> list[tuple[str, str]]:
        """(namespace, trigger id) of live triggers received before `cutoff`, oldest first."""

    @abstractmethod
    def list_deletions(self, ns: str | None, limit: int) -> list[Deletion]:
        """The deletion log, newest first."""

    # -- agent history (the harness) -----------------------------------------
    # Sessions, their append-only messages and the model-request log live in the
    # same database as the memory, so one backup holds both.
    @abstractmethod
    def create_session(
        self, ns: str, *, kind: SessionKind, model: str,
        worker_id: str | None = None, thread_id: str | None = None,
    ) -> AgentSession:  # fmt: skip
        """Create an open session with a fresh `ses_` ID and no messages."""

    @abstractmethod
    def get_session(self, ns: str, session_id: str) -> AgentSession:
        """The session (NotFound when unknown in `ns`)."""

    @abstractmethod
    def list_sessions(
        self,
        ns: str,
        *,
        kind: SessionKind | None = None,
        worker_id: str | None = None,
        limit: int = 100,
    ) -> list[AgentSession]:
        """Sessions, newest first; only those of `kind` / of `worker_id` when given."""

    @abstractmethod
    def set_session_status(self, ns: str, session_id: str, status: str) -> AgentSession:
        """Mark a session open, done, error or incomplete (NotFound when unknown)."""

    @abstractmethod
    def append_messages(
        self, ns: str, session_id: str, messages: Sequence[NewMessage]
    ) -> list[AgentMessage]:
        """Append messages at the next positions, in one transaction; never rewrites one."""

    @abstractmethod
    def list_messages(self, ns: str, session_id: str) -> list[AgentMessage]:
        """A session's messages in position order (NotFound when the session is unknown)."""

    @abstractmethod
    def log_model_request(self, ns: str, request: NewModelRequest) -> ModelRequest:
        """Log one model request of a session (NotFound when the session is unknown)."""

    @abstractmethod
    def list_model_requests(
        self, ns: str, session_id: str | None = None, limit: int = 1000
    ) -> list[ModelRequest]:
        """Logged requests, oldest first; one session's when `session_id` is given."""

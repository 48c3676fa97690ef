"""chainrecall: Chain of Recall memory for long-running LLM agents.

Every inbound event (Trigger), chain of related events (Thread) and agent
session (Worker) has a stable ID; an agent recalls exact facts by following
ID links a hop at a time. This package is the store, the recall API (HTTP and
in-process), and the tools around it.

    >>> import chainrecall
    >>> memory = chainrecall.open("memory.db")          # embedded, no server
    >>> client = chainrecall.Client("http://127.0.0.1:8077")  # the same calls over HTTP
"""

from __future__ import annotations

__version__ = "0.1.0"

from chainrecall.errors import (
    ChainRecallError,
    Forbidden,
    Gone,
    InvalidCursor,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    UnknownReference,
)
from chainrecall.model import (
    Event,
    EventPage,
    Payload,
    Report,
    SearchHit,
    SearchResults,
    Thread,
    Trigger,
    Worker,
)
from chainrecall.service import Memory


def open(db: str, namespace: str = "default") -> Memory:
    """Open the memory in `db` (an SQLite file path or a postgresql:// URL) in-process."""
    from chainrecall.store import open_store

    return Memory(open_store(db), namespace)


def __getattr__(name: str) -> object:
    if name == "Client":  # imported lazily: the client pulls in httpx
        from chainrecall.client import Client

        return Client
    raise AttributeError(name)


__all__ = [
    "ChainRecallError",
    "Client",
    "Event",
    "EventPage",
    "Forbidden",
    "Gone",
    "InvalidCursor",
    "InvalidInput",
    "Memory",
    "NotFound",
    "Payload",
    "PayloadTooLarge",
    "Report",
    "SearchHit",
    "SearchResults",
    "Thread",
    "Trigger",
    "Unauthorized",
    "UnknownReference",
    "Worker",
    "__version__",
    "open",
]

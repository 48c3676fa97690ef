"""A session's history, owned by the harness and written to the store before it is used.

`Conversation` is the one copy of what a session has said: messages go to the
store first (write-ahead), then into the in-memory list of their encodings that
every request is built from. Nothing is ever rewritten: a large tool result is
spilled (cut, with a pointer saying where the rest is) when it is first added,
so the prefix the provider cached stays byte for byte the same. A session that
was interrupted (the process died mid-call) is resumed from the store as it was.
"""

from __future__ import annotations

from chainrecall.history import AgentMessage, AgentSession, NewMessage, SessionKind
from chainrecall.store.base import Store
from chainrecall.tools import clip_utf8, human_size

# A tool result larger than this is spilled when first added (RecallTools already clips
# each field to 2 KB; this bounds what any other tool could add).
SPILL_LIMIT = 8 * 1024


def spill(text: str, limit: int = SPILL_LIMIT, pointer: str = "") -> str:
    """`text` whole when it fits in `limit` bytes, else its start and a pointer to the rest."""
    size = len(text.encode("utf-8"))
    if size <= limit:
        return text
    where = pointer or "re-run the tool with a narrower request"
    return clip_utf8(text, limit) + f"… [spilled: {human_size(size)} in all; {where}]"


class Conversation:
    """One session's append-only history, persisted before each use."""

    def __init__(
        self, store: Store, namespace: str, session: AgentSession, messages: list[AgentMessage]
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.session = session
        self.messages = messages
        self._encoded = [m.encoded() for m in messages]

    @classmethod
    def start(
        cls,
        store: Store,
        namespace: str,
        *,
        kind: SessionKind,
        model: str,
        system: str,
        worker_id: str | None = None,
        thread_id: str | None = None,
    ) -> Conversation:
        session = store.create_session(
            namespace, kind=kind, model=model, worker_id=worker_id, thread_id=thread_id
        )
        conversation = cls(store, namespace, session, [])
        conversation.append(NewMessage(role="system", content=system))
        return conversation

    @classmethod
    def resume(cls, store: Store, namespace: str, session_id: str) -> Conversation:
        """The session as stored (NotFound when unknown)."""
        session = store.get_session(namespace, session_id)
        return cls(store, namespace, session, store.list_messages(namespace, session_id))

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def encoded(self) -> list[str]:
        """Each message's encoding, exactly as first stored and sent."""
        return list(self._encoded)

    @property
    def size(self) -> int:
        return sum(m.bytes for m in self.messages)

    def append(self, *messages: NewMessage) -> list[AgentMessage]:
        """Store `messages` (one transaction), then add them to the history."""
        stored = self.store.append_messages(self.namespace, self.session.id, list(messages))
        self.messages.extend(stored)
        self._encoded.extend(m.encoded() for m in stored)
        return stored

    def set_status(self, status: str) -> None:
        self.session = self.store.set_session_status(self.namespace, self.session.id, status)

    def last(self) -> AgentMessage | None:
        return self.messages[-1] if self.messages else None

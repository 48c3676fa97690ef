"""Agent history as data: sessions, their append-only messages, and every model request.

These frozen records are what the store keeps for the harness (`chainrecall.harness`):
a session is one conversation with a model (the Router, or a Worker on one thread);
its messages are appended, never rewritten, so that a message once sent is sent
again byte for byte and the provider's prefix cache can reuse it; each request
to the model is logged with its size, its token usage (and the provider's cache
fields when present) and its outcome. The user's message is stored before the
model is called, so a crash mid-call leaves a record of what was asked.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SessionKind = Literal["router", "worker"]
MessageRole = Literal["system", "user", "assistant", "tool"]
RequestOutcome = Literal["ok", "error", "timeout"]

SESSION_PREFIX = "ses"
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_session_id() -> str:
    """A fresh random session ID (`ses_` + 8 base-36 characters); the store checks uniqueness."""
    return f"{SESSION_PREFIX}_" + "".join(secrets.choice(_ALPHABET) for _ in range(8))


def is_session_id(value: str) -> bool:
    return (
        isinstance(value, str)
        and value.startswith(SESSION_PREFIX + "_")
        and 4 < len(value) <= 44
        and all(c in _ALPHABET for c in value[4:])
    )


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class AgentSession(_Frozen):
    """One conversation with a model: the Router's, or a Worker's on one thread."""

    id: str
    kind: SessionKind
    worker_id: str | None = None
    thread_id: str | None = None
    model: str
    status: str = Field(description="open, done, error or incomplete")
    created_at: str
    updated_at: str


class NewMessage(_Frozen):
    """A message to append to a session (the store assigns its position)."""

    role: MessageRole
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @field_validator("content")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        # PostgreSQL text cannot hold NUL: both backends keep U+FFFD in its place, so a
        # session's history is the same, and is re-sent the same, on either.
        return value.replace("\x00", "\ufffd") if value and "\x00" in value else value

    def wire(self) -> dict[str, Any]:
        """The message as an OpenAI-compatible chat message, keys in a fixed order."""
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role != "tool":
            out["name"] = self.name
        return out

    def encoded(self) -> str:
        """The exact bytes (as text) this message is sent as, every time it is sent."""
        return json.dumps(self.wire(), ensure_ascii=False, separators=(",", ":"))


class AgentMessage(NewMessage):
    """A stored message: its session, its position (0, 1, 2, ...) and its encoded size."""

    session_id: str
    position: int
    bytes: int
    created_at: str


class NewModelRequest(_Frozen):
    """One request to the model, as logged (the store adds created_at)."""

    session_id: str
    model: str
    message_count: int
    bytes_sent: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_hit_tokens: int | None = None
    cache_miss_tokens: int | None = None
    latency_ms: int
    outcome: RequestOutcome
    error: str | None = None


class ModelRequest(NewModelRequest):
    id: int
    created_at: str

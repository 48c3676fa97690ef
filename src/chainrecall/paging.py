"""Opaque keyset cursors over a thread's event log.

A cursor names a thread and a position in it (the `seq` of the last event the
client has seen) and carries an HMAC made with a secret kept in the database,
so it survives restarts and a move to another backend (the secret moves too).
A cursor that was not issued by us, was altered, or names another thread is
refused: the caller gets a clear 400, never a silent restart from the start.

Positions are per thread and assigned under the thread's lock, so "after seq
N" never skips an event that commits later with a smaller position.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from chainrecall.errors import InvalidCursor, InvalidInput

_MAC_BYTES = 10
_VERSION = "c1"

DEFAULT_PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 500


def _mac(secret: bytes, body: bytes) -> bytes:
    return hmac.new(secret, body, hashlib.sha256).digest()[:_MAC_BYTES]


def encode_cursor(secret: bytes, thread_id: str, after_seq: int) -> str:
    body = f"{_VERSION}:{thread_id}:{after_seq}".encode()
    return base64.urlsafe_b64encode(body + _mac(secret, body)).decode().rstrip("=")


def decode_cursor(secret: bytes, cursor: str, thread_id: str) -> int:
    """The position a cursor stands at; InvalidCursor unless we issued it for `thread_id`."""
    bad = InvalidCursor(
        f"cursor {cursor[:80]!r} was not issued by this service for thread {thread_id!r}; "
        "start without a cursor, or pass next_cursor exactly as it was returned",
        cursor=cursor[:80],
    )
    if not cursor or len(cursor) > 200:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except ValueError:
        raise bad from None
    body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
    if len(raw) <= _MAC_BYTES or not hmac.compare_digest(mac, _mac(secret, body)):
        raise bad
    try:
        version, cursor_thread, seq_text = body.decode().split(":")
        seq = int(seq_text)
    except ValueError:
        raise bad from None
    if version != _VERSION or cursor_thread != thread_id or seq < 0:
        raise bad
    return seq


def parse_limit(raw: str | int | None) -> int:
    """The page size asked for; InvalidInput for anything but an integer in 1..MAX."""
    if raw is None or raw == "":
        return DEFAULT_PAGE_LIMIT
    text = str(raw).strip()
    limit = int(text) if re.fullmatch(r"[0-9]{1,6}", text) else 0
    if not 1 <= limit <= MAX_PAGE_LIMIT:
        raise InvalidInput(
            f"limit must be an integer from 1 to {MAX_PAGE_LIMIT} "
            f"(default {DEFAULT_PAGE_LIMIT}); got {str(raw)[:40]!r}",
            field="limit",
        )
    return limit

"""API tokens, scopes and the per-token rate limit.

A token is a random secret shown once at creation; the store keeps only its
SHA-256, so a stolen database does not hand out working tokens. A token
belongs to one namespace and has one scope; scopes nest (`admin` may do what
`write` may, `write` what `read` may). With no active token in the database
the server serves the default namespace to anyone who can reach it, which
`chainrecall serve` allows on loopback only.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta

from chainrecall.errors import Forbidden, InvalidInput, RateLimited, Unauthorized
from chainrecall.model import Scope, TokenInfo
from chainrecall.store.base import Store

SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
_RANK = {scope: rank for rank, scope in enumerate(SCOPES)}
TOKEN_PREFIX = "crt_"
_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_namespace(name: str) -> str:
    if not _NAMESPACE.match(name):
        raise InvalidInput(
            f"namespace {name!r} must be 1-63 lowercase letters, digits, '_', '.' or '-'",
            field="namespace",
        )
    return name


def issue_token(
    store: Store, namespace: str, scope: Scope, name: str = ""
) -> tuple[TokenInfo, str]:
    """Create a token; answers its stored record and the secret, which is never shown again."""
    if scope not in SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}", field="scope")
    token = new_token()
    info = store.create_token(check_namespace(namespace), scope, name, hash_token(token))
    return info, token


def authenticate(store: Store, authorization: str | None) -> TokenInfo | None:
    """The token a request presents; None when the server runs open (no token exists).

    Whether any token exists is read on every request without one (one indexed read):
    a first token created by another process is enforced from the next request on.
    """
    if authorization is None:
        if store.has_tokens():
            raise Unauthorized(
                "this server requires a token: send 'Authorization: Bearer <token>' "
                "(an admin creates one with `chainrecall token create`)"
            )
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <token>'")
    info = store.find_token(hash_token(token.strip()))
    if info is None:
        raise Unauthorized("the token is not valid: unknown or revoked")
    return info


def require_scope(info: TokenInfo | None, needed: Scope) -> None:
    if info is not None and _RANK[info.scope] < _RANK[needed]:
        raise Forbidden(
            f"this token has scope {info.scope!r}; this call needs {needed!r}",
            needed=needed,
        )


class RateLimiter:
    """A token bucket per API token: `rate` requests a second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> None:
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[key] = (tokens, now)
                wait = math.ceil((1.0 - tokens) / self.rate)
                raise RateLimited(
                    f"too many requests for this token (limit {self.rate:g}/s, burst "
                    f"{self.burst}); retry after {wait} s",
                    retry_after=wait,
                )
            self._buckets[key] = (tokens - 1.0, now)


def parse_age(text: str) -> timedelta:
    """'90d', '12h', '30m', '45s', '2w' as a duration."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text)
    if not match:
        raise InvalidInput(f"age {text!r} must look like 90d, 12h, 30m, 45s or 2w")
    number, unit = int(match.group(1)), match.group(2)
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    return timedelta(seconds=number * seconds)


def cutoff_for(age: timedelta) -> str:
    return (datetime.now(UTC) - age).strftime("%Y-%m-%dT%H:%M:%SZ")

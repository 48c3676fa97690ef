"""The checker's view of a deployment: HTTP calls that are recorded, and the verdicts on them.

A `Session` makes every request of a check run through httpx and keeps each
request and its answer as an `Exchange`, so that a failed check can show the
exact call that broke a rule. Checks end with `CheckFailed` (a rule broken,
with the exchange that shows it) or `CheckSkipped` (the check cannot run
here). The assertions shared by many checks (a problem+json body, an ID's
shape) live here too. Nothing in this package imports the server: it knows
the service only through HTTP and API.md.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from chainrecall.check.rules import Rule

ID_PATTERN = re.compile(r"^(trg|thr|wkr)_[0-9a-z_]{1,40}$")
RESOURCE_OF_PREFIX = {"trg": "triggers", "thr": "threads", "wkr": "workers"}
PROBLEM_MEDIA_TYPE = "application/problem+json"
_SHOWN_BODY_CHARS = 2000
RATE_LIMIT_RETRIES = 8
MAX_RETRY_WAIT_S = 10.0


@dataclass(frozen=True)
class Exchange:
    """One request the checker made and what came back (bodies cut to a readable length)."""

    method: str
    url: str
    request_body: str | None
    status: int | None
    content_type: str | None
    response_body: str | None
    location: str | None = None
    transport_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "request": {"method": self.method, "url": self.url, "body": self.request_body},
            "response": {
                "status": self.status,
                "content_type": self.content_type,
                "location": self.location,
                "body": self.response_body,
                "transport_error": self.transport_error,
            },
        }

    def request_line(self) -> str:
        return f"{self.method} {self.url}"

    def answer_line(self) -> str:
        if self.transport_error:
            return f"no answer: {self.transport_error}"
        return f"{self.status} {self.content_type or '(no content type)'}"


class CheckFailed(Exception):
    """A rule of API.md was broken; `exchange` is the call that shows it.

    `rule` names the rule when it is not the one the check is about (a walk
    that finds a page without next_cursor breaks Paging rule 3, whatever the
    walk was for).
    """

    def __init__(
        self, message: str, exchange: Exchange | None = None, rule: Rule | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exchange = exchange
        self.rule = rule


class CheckSkipped(Exception):
    """The check cannot run against this deployment or in this mode; the message says why."""


def _shown(body: bytes | str | None) -> str | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        if len(body) > 10 * _SHOWN_BODY_CHARS:
            return f"<{len(body)} bytes>"
        text = body.decode("utf-8", errors="replace")
    else:
        text = body
    if len(text) > _SHOWN_BODY_CHARS:
        return text[:_SHOWN_BODY_CHARS] + f"... <{len(text)} characters in all>"
    return text


def retry_after_s(header: str | None, attempt: int) -> float:
    """Seconds to wait after a 429: the server's Retry-After, else a growing pause; capped."""
    try:
        wait = float(header) if header is not None else 0.25 * attempt
    except ValueError:
        wait = 0.25 * attempt
    return min(max(wait, 0.05), MAX_RETRY_WAIT_S)


def media_type(content_type: str | None) -> str:
    """`text/plain; charset=utf-8` -> `text/plain`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def content_type_params(content_type: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in (content_type or "").split(";")[1:]:
        name, _, value = part.partition("=")
        params[name.strip().lower()] = value.strip().strip('"').lower()
    return params


def find_ids(value: Any) -> Iterator[str]:
    """Every string anywhere in a JSON value that is an ID of the API (`trg_`, `thr_`, `wkr_`)."""
    if isinstance(value, str):
        if ID_PATTERN.match(value):
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from find_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from find_ids(item)


DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024  # API.md: the default body size limit


@dataclass(frozen=True)
class CheckOptions:
    """What a check run may do: write (into its own threads) or only read a given thread."""

    read_only: bool = False
    thread: str | None = None  # the thread to read in --read-only mode
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # the deployment's limit; the check sends one more
    skip_size: bool = False
    select: tuple[str, ...] = ()  # name prefixes to run (the setup checks always run)


@dataclass
class Session:
    """HTTP access to one deployment for one check run, recording every exchange."""

    base_url: str
    token: str | None = None
    timeout_s: float = 30.0
    options: CheckOptions = field(default_factory=CheckOptions)
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))
    # Results of earlier checks that later ones build on (the checker's own thread, ...).
    state: dict[str, Any] = field(default_factory=dict)
    exchanges: int = 0
    rate_limited: int = 0  # 429 answers waited out
    # Remarks of the running check that are not failures (e.g. a sub-check skipped).
    notes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _client: httpx.Client | None = None

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self._client = self.new_client()

    def new_client(self, *, token: str | bool | None = True) -> httpx.Client:
        """An httpx client for this deployment; `token=False` sends no Authorization header."""
        bearer = self.token if token is True else (token or None)
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        headers["User-Agent"] = "chainrecall-check"
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=self.timeout_s)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def thread_key(self) -> str:
        """The natural key of the thread this run writes into (and only into)."""
        return f"chainrecall-check:{self.run_id}"

    def fresh_key(self, purpose: str) -> str:
        """A thread key of this run that nothing should ever create (for bad-input checks)."""
        return f"{self.thread_key}:{purpose}:{secrets.token_hex(3)}"

    def request(
        self,
        method: str,
        path: str,
        *,
        client: httpx.Client | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> tuple[httpx.Response | None, Exchange]:
        """Make one call; a transport error is answered as (None, exchange) rather than raised."""
        http = client or self._client
        assert http is not None
        body: bytes | None = content
        send_headers = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body, ensure_ascii=False).encode()
            send_headers.setdefault("Content-Type", "application/json")
        request = http.build_request(
            method, path, content=body, headers=send_headers, params=params
        )
        for attempt in range(1, RATE_LIMIT_RETRIES + 2):
            with self._lock:
                self.exchanges += 1
            try:
                response = http.send(request)
            except httpx.HTTPError as exc:
                return None, Exchange(
                    method, str(request.url), _shown(body), None, None, None,
                    transport_error=f"{type(exc).__name__}: {exc}",
                )  # fmt: skip
            if response.status_code != 429 or attempt > RATE_LIMIT_RETRIES:
                break
            # Rate limits are the deployment's to set, not a breach of the contract:
            # wait as told (within bounds) and ask again.
            with self._lock:
                self.rate_limited += 1
            time.sleep(retry_after_s(response.headers.get("retry-after"), attempt))
        return response, Exchange(
            method, str(request.url), _shown(body), response.status_code,
            response.headers.get("content-type"), _shown(response.content),
            location=response.headers.get("location"),
        )  # fmt: skip

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[httpx.Response, Exchange]:
        """`request`, where no answer at all fails the check."""
        response, exchange = self.request(method, path, **kwargs)
        if response is None:
            raise CheckFailed(f"the server gave no answer to {method} {path}", exchange)
        return response, exchange

    def get_json(self, path: str, **kwargs: Any) -> tuple[Any, Exchange]:
        """GET a record that must exist: a 200 with a JSON body."""
        response, exchange = self.call("GET", path, **kwargs)
        if response.status_code != 200:
            raise CheckFailed(f"GET {path} answered {response.status_code}, not 200", exchange)
        return json_of(response, exchange), exchange


def json_of(response: httpx.Response, exchange: Exchange) -> Any:
    try:
        return response.json()
    except ValueError:
        raise CheckFailed("the answer is not JSON", exchange) from None


def expect_status(
    response: httpx.Response,
    exchange: Exchange,
    expected: int | Iterable[int],
    what: str,
    rule: Rule | None = None,
) -> None:
    allowed = {expected} if isinstance(expected, int) else set(expected)
    if response.status_code not in allowed:
        if isinstance(expected, range):
            wanted = f"{expected.start}-{expected.stop - 1}"
        else:
            wanted = " or ".join(str(s) for s in sorted(allowed))
        raise CheckFailed(
            f"{what}: answered {response.status_code}, expected {wanted}", exchange, rule
        )


def expect_problem(
    response: httpx.Response | None,
    exchange: Exchange,
    status: int | Iterable[int],
    what: str,
    *,
    names: str | None = None,
) -> dict[str, Any]:
    """The answer is an RFC 9457 problem with `status` whose detail names `names`, if given."""
    if response is None:
        raise CheckFailed(f"{what}: the server gave no answer", exchange)
    expect_status(response, exchange, status, what)
    if media_type(exchange.content_type) != PROBLEM_MEDIA_TYPE:
        raise CheckFailed(
            f"{what}: the error body is {exchange.content_type or 'untyped'}, "
            f"not {PROBLEM_MEDIA_TYPE}",
            exchange,
        )
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise CheckFailed(f"{what}: the problem body is not a JSON object", exchange)
    for member, kind in (
        ("type", str), ("title", str), ("status", int), ("detail", str), ("instance", str),
    ):  # fmt: skip
        if not isinstance(body.get(member), kind) or isinstance(body.get(member), bool):
            raise CheckFailed(
                f"{what}: the problem body lacks `{member}` ({kind.__name__})", exchange
            )
    if body["status"] != response.status_code:
        raise CheckFailed(
            f"{what}: the problem says status {body['status']} but the answer is "
            f"{response.status_code}",
            exchange,
        )
    if names is not None and names not in body["detail"]:
        raise CheckFailed(f"{what}: the problem detail does not name {names!r}", exchange)
    return body


def expect_id(value: Any, prefix: str, what: str, exchange: Exchange) -> str:
    """`value` is a well-formed ID with `prefix` (`trg`, `thr`, `wkr`)."""
    if not isinstance(value, str) or not ID_PATTERN.match(value) or not value.startswith(prefix):
        raise CheckFailed(
            f"{what} is {value!r}, not an ID of the form {prefix}_[0-9a-z_]{{1,40}}", exchange
        )
    return value

"""The HTTP client: the same calls as the embedded `Memory`, over the recall API.

An agent written in Python never hand-writes a URL: `Client(base_url)` answers
the same records (`Trigger`, `Thread`, `Worker`, `EventPage`, ...) and raises
the same exceptions (`NotFound`, `Gone`, `InvalidCursor`, ...) as
`chainrecall.open(path)`, translated from the server's problem+json bodies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from chainrecall import errors
from chainrecall.model import (
    Event,
    EventPage,
    Payload,
    SearchResults,
    Thread,
    Trigger,
    Worker,
)
from chainrecall.store.base import Appended

_BY_SLUG: dict[str, type[errors.ChainRecallError]] = {
    cls.type_slug: cls
    for cls in (
        errors.NotFound, errors.Gone, errors.InvalidCursor, errors.UnknownReference,
        errors.PayloadTooLarge, errors.Unauthorized, errors.Forbidden, errors.RateLimited,
        errors.NotConfigured, errors.StoreUnavailable,
    )
}  # fmt: skip
_BY_STATUS: dict[int, type[errors.ChainRecallError]] = {
    400: errors.InvalidInput, 404: errors.NotFound, 410: errors.Gone, 413: errors.PayloadTooLarge,
    401: errors.Unauthorized, 403: errors.Forbidden, 429: errors.RateLimited,
    422: errors.InvalidInput,
}  # fmt: skip


def error_from_response(response: httpx.Response) -> errors.ChainRecallError:
    """The exception a problem+json answer stands for."""
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text[:500]}
    slug = str(body.get("type", "")).rsplit(":", 1)[-1]
    cls = _BY_SLUG.get(slug) or _BY_STATUS.get(response.status_code, errors.ChainRecallError)
    exc = cls.__new__(cls)
    extensions = {
        k: v for k, v in body.items() if k not in {"type", "title", "status", "detail", "instance"}
    }
    errors.ChainRecallError.__init__(
        exc, str(body.get("detail", response.reason_phrase)), **extensions
    )
    exc.status = response.status_code
    if "id" in extensions:
        exc.object_id = extensions["id"]  # type: ignore[attr-defined]
    return exc


class Client:
    """The recall API over HTTP; use as a context manager or call close()."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise error_from_response(response)
        return response

    @staticmethod
    def _id(value: str) -> str:
        return quote(value, safe="")

    # -- writes --------------------------------------------------------------
    def record_trigger(self, **fields: Any) -> Appended:
        """POST /triggers; same keywords as Memory.record_trigger (JSON payloads)."""
        body = {k: (list(v) if k == "refs" else v) for k, v in fields.items() if v is not None}
        body.setdefault("payload", None)
        response = self._call("POST", "/triggers", json=body)
        return Appended(Trigger.model_validate_json(response.content), response.status_code == 201)

    def start_worker(self, thread_id: str | Sequence[str], task: str) -> Worker:
        key = "thread_id" if isinstance(thread_id, str) else "thread_ids"
        value = thread_id if isinstance(thread_id, str) else list(thread_id)
        response = self._call("POST", "/workers", json={key: value, "task": task})
        return Worker.model_validate_json(response.content)

    def report(
        self,
        worker_id: str,
        *,
        summary: str,
        body: str = "",
        refs: Sequence[str] = (),
        status: str = "ready",
    ) -> Worker:
        response = self._call(
            "POST",
            f"/workers/{self._id(worker_id)}/report",
            json={"summary": summary, "body": body, "refs": list(refs), "status": status},
        )
        return Worker.model_validate_json(response.content)

    # -- reads ---------------------------------------------------------------
    def get_trigger(self, trigger_id: str) -> Trigger:
        return Trigger.model_validate_json(
            self._call("GET", f"/triggers/{self._id(trigger_id)}").content
        )

    def get_payload(self, trigger_id: str) -> Payload:
        response = self._call("GET", f"/triggers/{self._id(trigger_id)}/payload")
        ctype = response.headers.get("content-type", "application/octet-stream")
        return Payload(content_type=ctype, data=response.content)

    def get_thread(self, thread_id: str) -> Thread:
        return Thread.model_validate_json(
            self._call("GET", f"/threads/{self._id(thread_id)}").content
        )

    def find_thread(self, key: str) -> Thread:
        items = self._call("GET", "/threads", params={"key": key}).json()
        return Thread.model_validate(items[0])

    def list_threads(self, limit: int | None = None) -> list[Thread]:
        params = {"limit": limit} if limit else {}
        return [
            Thread.model_validate(t) for t in self._call("GET", "/threads", params=params).json()
        ]

    def get_worker(self, worker_id: str) -> Worker:
        return Worker.model_validate_json(
            self._call("GET", f"/workers/{self._id(worker_id)}").content
        )

    def list_events(
        self, thread_id: str, cursor: str | None = None, limit: int | None = None
    ) -> EventPage:
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = limit
        response = self._call("GET", f"/threads/{self._id(thread_id)}/events", params=params)
        return EventPage.model_validate_json(response.content)

    def walk_events(self, thread_id: str, cursor: str | None = None) -> Iterator[Event]:
        while True:
            page = self.list_events(thread_id, cursor)
            yield from page.items
            cursor = page.next_cursor
            if not page.has_more:
                return

    def search(self, query: str, limit: int = 10) -> SearchResults:
        response = self._call("GET", "/search", params={"q": query, "limit": limit})
        return SearchResults.model_validate_json(response.content)

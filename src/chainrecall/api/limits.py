"""Request-size limit as a pure ASGI middleware, in front of every route.

A body larger than the limit answers 413 before any of it is parsed or stored:
checked on `Content-Length` up front, and counted while streaming for chunked
bodies that do not announce a length.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chainrecall.api.problems import problem
from chainrecall.errors import PayloadTooLarge

DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub's own cap for a webhook delivery


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the request body is larger than {limit} bytes; send a smaller body, or raise the "
        "limit with chainrecall serve --max-body-bytes",
        max_bytes=limit,
    )


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    exc = too_large(self.max_bytes)
                    response = problem(
                        413, exc.detail, instance=scope.get("path", ""), slug=exc.type_slug,
                        max_bytes=self.max_bytes,
                    )  # fmt: skip
                    await response(scope, receive, send)
                    return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message: dict[str, Any] = dict(await receive())
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise too_large(self.max_bytes)
            return message  # type: ignore[return-value,unused-ignore]

        await self.app(scope, counting_receive, send)

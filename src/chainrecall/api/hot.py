"""The hot read, answered in front of the framework: `GET /triggers/{id}`.

Fetch by ID is what an agent does most. Served through FastAPI, a lookup that
takes tens of microseconds pays as much again for the middleware stack,
routing and dependency solving (benchmarks/fetch_http.py, docs/benchmarks.md).
`HotReads` wraps the app's middleware stack and answers exactly this one
request shape itself, with the same authorization (`authorize`), the same
record and the same problem+json errors; everything else, including other
methods on the same path and the OpenAPI entry, goes to FastAPI unchanged.
"""

from __future__ import annotations

import logging
import re

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from chainrecall.api.problems import error_response, problem
from chainrecall.errors import ChainRecallError

log = logging.getLogger("chainrecall.api")

_TRIGGER_PATH = re.compile(r"^/triggers/([^/]+)$")


class HotReads:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = (
            _TRIGGER_PATH.match(scope["path"])
            if scope["type"] == "http" and scope["method"] == "GET"
            else None
        )
        if match is None:
            await self.app(scope, receive, send)
            return
        # imported here: app.py builds the app around this class
        from chainrecall.api.app import authorize, memory, record_response

        request = Request(scope, receive)
        try:
            await authorize(request)
            response = record_response(memory(request).get_trigger(match.group(1)))
        except ChainRecallError as exc:
            response = error_response(exc, scope["path"])
        except Exception:
            log.exception("unhandled error on GET %s", scope["path"])
            response = problem(
                500,
                "the server failed to answer this request; it has been logged. Retry, and "
                "report it if it persists",
                instance=scope["path"],
            )
        await response(scope, receive, send)

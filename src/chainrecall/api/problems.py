"""problem+json (RFC 9457): the one shape of every error the server answers.

`install_problem_handlers` maps our exception tree, the framework's own errors
(unknown route, wrong method, validation) and anything unexpected onto
problem bodies, so a client never has to parse two error formats.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from chainrecall.errors import ChainRecallError

PROBLEM_TYPE = "application/problem+json"
TYPE_BASE = "urn:chainrecall:problem:"

log = logging.getLogger("chainrecall.api")

_TITLES = {
    400: ("invalid-input", "Bad Request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not Found"),
    405: ("method-not-allowed", "Method Not Allowed"),
    406: ("not-acceptable", "Not Acceptable"),
    413: ("too-large", "Content Too Large"),
    415: ("unsupported-media-type", "Unsupported Media Type"),
    422: ("invalid-input", "Unprocessable Content"),
    429: ("rate-limited", "Too Many Requests"),
    500: ("internal", "Internal Server Error"),
}


def problem(
    status: int,
    detail: str,
    *,
    instance: str,
    slug: str | None = None,
    title: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> Response:
    default_slug, default_title = _TITLES.get(status, ("error", "Error"))
    body = {
        "type": TYPE_BASE + (slug or default_slug),
        "title": title or default_title,
        "status": status,
        "detail": detail,
        "instance": instance,
        **extensions,
    }
    return Response(
        content=json.dumps(body, ensure_ascii=False),
        status_code=status,
        media_type=PROBLEM_TYPE,
        headers=headers,
    )


def error_response(exc: ChainRecallError, instance: str) -> Response:
    headers = None
    retry_after = exc.extensions.get("retry_after")
    if retry_after is not None:
        headers = {"Retry-After": str(retry_after)}
    if exc.status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": 'Bearer realm="chainrecall"'}
    return problem(
        exc.status, exc.detail, instance=instance, slug=exc.type_slug, title=exc.title,
        headers=headers, **exc.extensions,
    )  # fmt: skip


def _instance(request: Request) -> str:
    return request.url.path


def allowed_methods(request: Request) -> str:
    """Every method the API documents at this path (Starlette reports only the first route's).

    Read from the OpenAPI document, so `Allow` and `/openapi.json` always agree. A literal
    path (`/triggers/batch`) wins over a templated one (`/triggers/{trigger_id}`), as it
    does when routing.
    """
    table = getattr(request.app.state, "allow_table", None)
    if table is None:
        table = []
        for template, operations in request.app.openapi().get("paths", {}).items():
            pattern = re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)) + "$")
            methods = {m.upper() for m in operations if m in _HTTP_METHODS}
            table.append((pattern, "{" in template, methods))
        request.app.state.allow_table = table
    path = request.url.path
    literal = [m for pattern, templated, m in table if not templated and pattern.match(path)]
    matches = literal or [m for pattern, templated, m in table if templated and pattern.match(path)]
    return ", ".join(sorted(set().union(*matches))) if matches else ""


_HTTP_METHODS = {"get", "put", "post", "delete", "patch", "options", "head"}


def install_problem_handlers(app: FastAPI) -> None:
    async def on_ours(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ChainRecallError)
        return error_response(exc, _instance(request))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if isinstance(exc.__cause__, ChainRecallError):
            # FastAPI wraps errors raised while reading the body (such as the size limit,
            # enforced in `limits.py` as the body streams in) in a generic 400.
            return error_response(exc.__cause__, _instance(request))
        path = _instance(request)
        if exc.status_code == 404:
            detail = (
                f"no resource at {path}; see /openapi.json for the routes "
                "(/triggers/{id}, /threads/{id}, /threads/{id}/events, /workers/{id}, /search)"
            )
        elif exc.status_code == 405:
            allow = allowed_methods(request)
            headers = {**(exc.headers or {}), "Allow": allow}
            return problem(
                405, f"{request.method} is not allowed on {path}; allowed: {allow}",
                instance=path, headers=headers,
            )  # fmt: skip
        else:
            detail = str(exc.detail)
        return problem(exc.status_code, detail, instance=path, headers=exc.headers)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = []
        whole_body = [e for e in exc.errors() if tuple(e.get("loc", ())) == ("body",)]
        if whole_body:
            ctype = request.headers.get("content-type", "")
            if "json" not in ctype:
                return problem(
                    415,
                    f"the body must be JSON sent with Content-Type: application/json (got "
                    f"{ctype or 'no Content-Type'!r}); with curl, add -H 'content-type: "
                    "application/json'",
                    instance=_instance(request),
                )
            if whole_body[0].get("type") == "missing":
                return problem(
                    400, "the request body is empty; send a JSON object",
                    instance=_instance(request), slug="malformed-json",
                )  # fmt: skip
        for err in exc.errors():
            loc = [str(p) for p in err.get("loc", ()) if p != "body"]
            if err.get("type") == "json_invalid":
                return problem(
                    400,
                    "the body is not valid JSON: "
                    + str(err.get("ctx", {}).get("error", err.get("msg"))),
                    instance=_instance(request),
                    slug="malformed-json",
                )
            errors.append({"field": ".".join(loc) or "body", "message": err.get("msg", "")})
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
        return problem(422, detail, instance=_instance(request), errors=errors)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(
            500,
            "the server failed to answer this request; it has been logged. Retry, and "
            "report it if it persists",
            instance=_instance(request),
        )

    app.add_exception_handler(ChainRecallError, on_ours)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_unexpected)

"""The OpenAPI document, made to tell the truth about errors.

FastAPI documents validation errors as its own `HTTPValidationError` JSON; we
answer every error as RFC 9457 problem+json. This module rewrites every error
response of every operation to the `Problem` schema under
`application/problem+json`, and adds the answers every route can give (bad
parameters, authentication, rate limits, body limits), so that a client
generated from `/openapi.json` (or a fuzzer checking conformance) sees what
the server really sends.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from chainrecall.api.schemas import Problem

_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
_DESCRIPTIONS = {
    "400": "Bad request: a parameter or body is malformed",
    "401": "Missing or invalid token",
    "403": "The token lacks the needed scope",
    "404": "No such ID here (unknown, malformed, wrong kind, or another namespace)",
    "405": "Method not allowed",
    "410": "The object was deleted; its ID stays retired",
    "413": "The body is over the size limit",
    "415": "Unsupported media type",
    "422": "The body names something that does not resolve, or fails validation",
    "429": "Rate limited; see Retry-After",
    "503": "A needed part is not configured or the store is unavailable",
}


def problem_response(code: str) -> dict[str, Any]:
    return {
        "description": _DESCRIPTIONS.get(code, "Error"),
        "content": {"application/problem+json": {"schema": _PROBLEM_REF}},
    }


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components["Problem"] = Problem.model_json_schema()
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                responses = operation.setdefault("responses", {})
                codes = {"400", "404", "405"} if "{" in path else {"400", "405"}
                if not path.startswith(("/healthz", "/webhooks")) and path != "/":
                    codes |= {"401", "403", "429", "503"}
                if method in {"post", "put", "patch"}:
                    codes |= {"413", "415", "422"}
                for code in list(responses):
                    if code.isdigit() and int(code) >= 400:
                        codes.add(code)
                for code in codes:
                    responses[code] = problem_response(code)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

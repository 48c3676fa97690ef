"""`GET /context`: the prompt context for a trigger or a thread, within a budget.

A thin shell over `chainrecall.context.build_context`. Query parameters arrive
as text and are checked here, so a missing or malformed budget is a 400 that
says what to send, and an unknown ID is the service's own 404 naming it. The
handler is a plain `def` (run in the thread pool): counting tokens can take
milliseconds, and loading a tokenizer the first time about a second.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from chainrecall.api.schemas import Problem
from chainrecall.context import build_context
from chainrecall.context.builder import (
    DEFAULT_EVENTS_LIMIT,
    DEFAULT_INDEX_LIMIT,
    MAX_BUDGET_BYTES,
    MAX_BUDGET_TOKENS,
    MAX_EVENTS_LIMIT,
    MAX_INDEX_LIMIT,
)
from chainrecall.context.tokens import check_tokenizer_name
from chainrecall.errors import InvalidInput
from chainrecall.service import Memory
from chainrecall.store import DEFAULT_NAMESPACE, Store

router = APIRouter()

_PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {"application/problem+json": {}}}
    for code in (400, 404, 410, 503)
}


def _memory(request: Request) -> Memory:
    store: Store = request.app.state.store
    return Memory(store, getattr(request.state, "namespace", DEFAULT_NAMESPACE))


def parse_count(
    raw: str | None, field: str, low: int, high: int, default: int | None
) -> int | None:
    """An integer query parameter in low..high; InvalidInput saying what to send otherwise."""
    if raw is None or raw == "":
        return default
    text = raw.strip()
    value = int(text) if re.fullmatch(r"[0-9]{1,9}", text) else None
    if value is None or not low <= value <= high:
        raise InvalidInput(
            f"{field} must be an integer from {low} to {high}; got {raw[:40]!r}", field=field
        )
    return value


@router.get(
    "/context", tags=["read"], response_class=Response,
    responses={200: {"content": {"application/json": {}}}, **_PROBLEMS},
)  # fmt: skip
def get_context(
    request: Request,
    trigger_id: str | None = Query(None, max_length=100, description="the trigger at hand"),
    thread_id: str | None = Query(None, max_length=100, description="the thread at hand"),
    budget_bytes: str | None = Query(None, description=f"1..{MAX_BUDGET_BYTES} (required)"),
    budget_tokens: str | None = Query(None, description="also a token budget; needs tokenizer"),
    tokenizer: str | None = Query(None, description="deepseek, o200k or cl100k"),
    format: str | None = Query(None, description="text (default) or json: what `text` holds"),
    index_limit: str | None = Query(None, description=f"0..{MAX_INDEX_LIMIT} index lines"),
    events: str | None = Query(None, description=f"0..{MAX_EVENTS_LIMIT} recent events"),
) -> Response:
    """The context an agent receives: thread index, thread at hand, current trigger,
    pointers for what was spilled; `bytes` (and `tokens`) never exceed the budget."""
    if budget_bytes is None or budget_bytes == "":
        raise InvalidInput(
            "budget_bytes is required: the most UTF-8 bytes the context may take, "
            "e.g. budget_bytes=4096",
            field="budget_bytes",
        )
    fmt = format or "text"
    if fmt not in ("text", "json"):
        raise InvalidInput(f"format must be text or json; got {fmt[:20]!r}", field="format")
    context = build_context(
        _memory(request),
        trigger_id=trigger_id,
        thread_id=thread_id,
        budget_bytes=parse_count(budget_bytes, "budget_bytes", 1, MAX_BUDGET_BYTES, None) or 0,
        budget_tokens=parse_count(budget_tokens, "budget_tokens", 1, MAX_BUDGET_TOKENS, None),
        tokenizer=check_tokenizer_name(tokenizer) if tokenizer else None,
        index_limit=parse_count(index_limit, "index_limit", 0, MAX_INDEX_LIMIT,
                                DEFAULT_INDEX_LIMIT) or 0,
        events_limit=parse_count(events, "events", 0, MAX_EVENTS_LIMIT,
                                 DEFAULT_EVENTS_LIMIT) or 0,
        fmt="json" if fmt == "json" else "text",
    )  # fmt: skip
    body = json.dumps(context.to_json(), ensure_ascii=False, separators=(",", ":"))
    return Response(body, media_type="application/json")

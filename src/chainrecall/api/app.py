"""The recall API of `shared/API.md` as an ASGI app (FastAPI over Starlette).

Reads are `async def` and call the store inline: a lookup by primary key takes
microseconds, less than a hop to the thread pool would. Writes are plain `def`
and run in the thread pool, since a durable commit waits for the disk.
Every response body is a record of `chainrecall.model` serialised once by
pydantic; every error is problem+json (see `problems.py`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from starlette.responses import Response

from chainrecall import __version__
from chainrecall.api.context import router as context_router
from chainrecall.api.hot import HotReads
from chainrecall.api.ingest import router as ingest_router
from chainrecall.api.limits import BodySizeLimit
from chainrecall.api.mcp import mount_mcp
from chainrecall.api.openapi import install_openapi
from chainrecall.api.problems import install_problem_handlers
from chainrecall.api.schemas import BatchOut, Problem, ReportIn, TriggerBatchIn, TriggerIn, WorkerIn
from chainrecall.auth import RateLimiter, authenticate, require_scope
from chainrecall.config import ServerConfig
from chainrecall.model import (
    Deletion,
    EventPage,
    Record,
    Scope,
    SearchResults,
    Thread,
    Trigger,
    Worker,
)
from chainrecall.paging import parse_limit
from chainrecall.service import Memory
from chainrecall.store import DEFAULT_NAMESPACE, Store, open_store

JSON = "application/json"


def _problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": Problem, "content": {"application/problem+json": {}}} for code in codes}


def record_response(
    record: Record, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(record.model_dump_json(), status_code=status, media_type=JSON, headers=headers)


def memory(request: Request) -> Memory:
    """The memory of the namespace this request may see."""
    store: Store = request.app.state.store
    namespace: str = getattr(request.state, "namespace", DEFAULT_NAMESPACE)
    return Memory(store, namespace)


_SCOPE_BY_METHOD: dict[str, Scope] = {
    "GET": "read", "HEAD": "read", "POST": "write", "PUT": "write", "PATCH": "write",
    "DELETE": "admin",
}  # fmt: skip


async def authorize(request: Request) -> None:
    """Bearer-token check for every recall route: namespace, scope, rate limit.

    Runs inline (not in the thread pool): a token lookup is one indexed read.
    """
    state = request.app.state
    info = authenticate(state.store, request.headers.get("authorization"))
    require_scope(info, _SCOPE_BY_METHOD.get(request.method, "admin"))
    request.state.token = info
    if info is None:
        request.state.actor = "anonymous"
        return
    limiter: RateLimiter = request.app.state.rate_limiter
    limiter.take(info.id)
    request.state.namespace = info.namespace
    request.state.actor = info.id


meta = APIRouter()
router = APIRouter(dependencies=[Depends(authorize)], responses=_problems(401, 403, 429))


@meta.get("/healthz", tags=["meta"])
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@meta.get("/", tags=["meta"])
async def index() -> dict[str, Any]:
    return {
        "name": "chainrecall",
        "version": __version__,
        "openapi": "/openapi.json",
        "routes": [
            "GET /triggers/{id}",
            "GET /triggers/{id}/payload",
            "GET /triggers/{id}/cited_by",
            "GET /threads?key=",
            "GET /threads/{id}",
            "GET /threads/{id}/events?cursor=&limit=",
            "GET /workers/{id}",
            "GET /search?q=",
            "GET /recall?q=&budget_bytes=",
            "GET /context?trigger_id=|thread_id=&budget_bytes=",
            "POST /triggers",
            "POST /triggers/batch",
            "POST /workers",
            "POST /workers/{id}/report",
            "POST /webhooks/github, /webhooks/slack",
            "POST /ingest/chat, /ingest/email, /ingest/ci",
            "DELETE /triggers/{id}, /threads/{id}; GET /deletions (admin)",
            "POST /mcp (MCP over streamable HTTP)",
        ],
    }


# -- reading ---------------------------------------------------------------------


@router.get(
    "/triggers/{trigger_id}", tags=["read"], response_model=Trigger,
    responses=_problems(404, 410), response_class=Response,
)  # fmt: skip
async def get_trigger(trigger_id: str, request: Request) -> Response:
    """The trigger record: its thread, summary, neighbours and a pointer to its payload."""
    return record_response(memory(request).get_trigger(trigger_id))


@router.get(
    "/triggers/{trigger_id}/payload", tags=["read"], response_class=Response,
    responses={200: {"content": {JSON: {}, "text/plain": {}, "application/octet-stream": {}}},
               **_problems(404, 410)},
)  # fmt: skip
async def get_trigger_payload(trigger_id: str, request: Request) -> Response:
    """The original payload, whole, with the content type it was stored with."""
    payload = memory(request).get_payload(trigger_id)
    return Response(payload.data, media_type=payload.content_type)


@router.get("/triggers/{trigger_id}/cited_by", tags=["read"], responses=_problems(404, 410))
async def get_cited_by(trigger_id: str, request: Request) -> dict[str, Any]:
    """What links back to a trigger: replies and citing triggers, workers whose reports cite it."""
    return {"id": trigger_id, "cited_by": memory(request).cited_by(trigger_id)}


@router.get(
    "/threads", tags=["read"], response_model=list[Thread], response_class=Response,
    responses=_problems(400, 404),
)  # fmt: skip
async def list_threads(
    request: Request,
    key: str | None = Query(None, max_length=512, description="exact natural key"),
    limit: str | None = Query(None, description="1..500, default 50"),
) -> Response:
    """Live threads, most recently active first; or the one thread with `key`."""
    mem = memory(request)
    threads = [mem.find_thread(key)] if key is not None else mem.list_threads(limit)
    body = "[" + ",".join(t.model_dump_json() for t in threads) + "]"
    return Response(body, media_type=JSON)


@router.get(
    "/threads/{thread_id}", tags=["read"], response_model=Thread, response_class=Response,
    responses=_problems(404, 410),
)  # fmt: skip
async def get_thread(thread_id: str, request: Request) -> Response:
    """The thread record: key, title, summary, status, event_count, owner_workers."""
    return record_response(memory(request).get_thread(thread_id))


@router.get(
    "/threads/{thread_id}/events", tags=["read"], response_model=EventPage,
    response_class=Response, responses=_problems(400, 404, 410),
)  # fmt: skip
async def list_thread_events(
    thread_id: str,
    request: Request,
    cursor: str | None = Query(None, description="next_cursor of the previous page"),
    limit: str | None = Query(None, description="1..500, default 50"),
) -> Response:
    """One page of the thread's events, oldest first; follow next_cursor until has_more is false."""
    return record_response(memory(request).list_events(thread_id, cursor, limit))


@router.get(
    "/workers/{worker_id}", tags=["read"], response_model=Worker, response_class=Response,
    responses=_problems(404, 410),
)  # fmt: skip
async def get_worker(worker_id: str, request: Request) -> Response:
    """The worker record: threads, task, status, latest report and the earlier ones."""
    return record_response(memory(request).get_worker(worker_id))


@router.get(
    "/search", tags=["read"], response_model=SearchResults, response_class=Response,
    responses=_problems(400),
)  # fmt: skip
async def search(
    request: Request,
    q: str | None = Query(None, description="free text; words are matched with BM25 ranking"),
    limit: str | None = Query(None, description="1..100, default 10"),
) -> Response:
    """Entry points for recall: trigger, thread and worker IDs with one-line summaries."""
    return record_response(memory(request).search(q or "", limit or 10))


@router.get("/recall", tags=["read"], responses=_problems(400))
async def recall_endpoint(
    request: Request,
    q: str | None = Query(None, description="the question to find evidence for"),
    budget_bytes: str | None = Query(None, description="largest context in UTF-8 bytes"),
) -> dict[str, Any]:
    """Chain of Recall in one call: search for entry points, follow links, pack the evidence.

    Answers `text` (at most budget_bytes of UTF-8), `items` (the IDs included, in order),
    `bytes`, `hops`, `calls` and `spilled`.
    """
    from chainrecall.recall import recall

    if not budget_bytes or not budget_bytes.strip().isdigit():
        from chainrecall.errors import InvalidInput

        raise InvalidInput(
            "budget_bytes must be a positive integer, e.g. 8192", field="budget_bytes"
        )
    return recall(memory(request), q or "", int(budget_bytes)).to_json()


# -- writing ---------------------------------------------------------------------


@router.post(
    "/triggers", tags=["write"], status_code=201, response_model=Trigger,
    response_class=Response, responses={200: {"model": Trigger}, **_problems(400, 413, 422)},
)  # fmt: skip
def post_trigger(body: TriggerIn, request: Request) -> Response:
    """Record one inbound event. A repeated dedupe_key answers 200 with the first record."""
    trigger, created = memory(request).record_trigger(**body.model_dump())
    return record_response(
        trigger, 201 if created else 200, headers={"Location": f"/triggers/{trigger.id}"}
    )


@router.post(
    "/triggers/batch", tags=["write"], response_model=BatchOut, response_class=Response,
    responses=_problems(400, 413, 422),
)  # fmt: skip
def post_trigger_batch(body: TriggerBatchIn, request: Request) -> Response:
    """Record many triggers in one transaction: all are stored, or none (bulk ingest)."""
    mem = memory(request)
    items = [mem.new_trigger(**item.model_dump()) for item in body.items]
    results = mem.record_triggers(items)
    out = ",".join(
        f'{{"status":{201 if created else 200},"trigger":{trigger.model_dump_json()}}}'
        for trigger, created in results
    )
    return Response('{"items":[' + out + "]}", media_type=JSON)


@router.post(
    "/workers", tags=["write"], status_code=201, response_model=Worker, response_class=Response,
    responses=_problems(400, 413, 422),
)  # fmt: skip
def post_worker(body: WorkerIn, request: Request) -> Response:
    """Start a worker on a thread; the thread's owner_workers now lists it."""
    threads = body.thread_ids if body.thread_ids is not None else body.thread_id
    assert threads is not None
    worker = memory(request).start_worker(threads, body.task)
    return record_response(worker, 201, headers={"Location": f"/workers/{worker.id}"})


@router.post(
    "/workers/{worker_id}/report", tags=["write"], status_code=201, response_model=Worker,
    response_class=Response, responses=_problems(400, 404, 410, 413, 422),
)  # fmt: skip
def post_report(worker_id: str, body: ReportIn, request: Request) -> Response:
    """File the worker's report; its record shows the latest and keeps the earlier ones."""
    worker = memory(request).report(
        worker_id, summary=body.summary, body=body.body, refs=body.refs, status=body.status
    )
    return record_response(worker, 201, headers={"Location": f"/workers/{worker.id}"})


# -- deletion --------------------------------------------------------------------


def _actor(request: Request) -> str:
    return str(getattr(request.state, "actor", "anonymous"))


@router.delete(
    "/triggers/{trigger_id}", tags=["admin"], response_model=Deletion, response_class=Response,
    responses=_problems(404, 410),
)  # fmt: skip
def delete_trigger(
    trigger_id: str,
    request: Request,
    reason: str = Query("", max_length=500, description="why, for the deletion log"),
) -> Response:
    """Erase a trigger's payload, summary and search text; its ID answers 410 from now on."""
    deletion = memory(request).delete_trigger(trigger_id, actor=_actor(request), reason=reason)
    return record_response(deletion)


@router.delete(
    "/threads/{thread_id}", tags=["admin"], response_model=Deletion, response_class=Response,
    responses=_problems(404, 410),
)  # fmt: skip
def delete_thread(
    thread_id: str,
    request: Request,
    reason: str = Query("", max_length=500, description="why, for the deletion log"),
) -> Response:
    """Erase a thread and all its triggers' content; tombstones keep every ID retired."""
    deletion = memory(request).delete_thread(thread_id, actor=_actor(request), reason=reason)
    return record_response(deletion)


@router.get(
    "/deletions", tags=["admin"], response_model=list[Deletion], response_class=Response,
    responses=_problems(400),
)  # fmt: skip
async def list_deletions(request: Request, limit: str | None = Query(None)) -> Response:
    """The deletion log of this namespace, newest first: who erased what, when, why (admin)."""
    require_scope(request.state.token, "admin")
    store: Store = request.app.state.store
    namespace = getattr(request.state, "namespace", DEFAULT_NAMESPACE)
    rows = store.list_deletions(namespace, parse_limit(limit))
    return Response("[" + ",".join(d.model_dump_json() for d in rows) + "]", media_type=JSON)


def create_app(store: Store | str, config: ServerConfig | None = None) -> FastAPI:
    """The ASGI app over `store` (a Store, or a --db value to open)."""
    if isinstance(store, str):
        config = config or ServerConfig(db=store)
        store = open_store(store)
    config = config or ServerConfig(db=store.url)
    app = FastAPI(
        title="chainrecall",
        version=__version__,
        description="Chain of Recall: stable IDs, one-line summaries and links as agent memory.",
        # FastAPI's OpenTelemetry hooks look up the global providers on every request
        # (about a sixth of a fetch by ID); we export no traces, so they stay off.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.store = store
    app.state.config = config
    app.state.rate_limiter = RateLimiter(config.rate_limit, config.rate_burst)
    install_problem_handlers(app)
    app.include_router(meta)
    app.include_router(router)
    install_openapi(app)
    mount_mcp(app, store, host=config.host, max_body_bytes=config.max_body_bytes)
    app.include_router(context_router)
    app.include_router(ingest_router)
    build_stack = app.build_middleware_stack
    app.build_middleware_stack = lambda: HotReads(build_stack())  # type: ignore[method-assign]
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes)
    return app


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` and multi-process serving: configuration from env."""
    from chainrecall.config import server_config_from_env

    config = server_config_from_env()
    return create_app(open_store(config.db), config)

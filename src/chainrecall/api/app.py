"""The recall API of `shared/API.md` as an ASGI app (FastAPI over Starlette).

Reads are `async def` and call the store inline: a lookup by primary key takes
microseconds, less than a hop to the thread pool would. Writes are plain `def`
and run in the thread pool, since a durable commit waits for the disk.
Every response body is a record of `chainrecall.model` serialised once by
pydantic; every error is problem+json (see `problems.py`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from starlette.responses import Response
from starlette.routing import Route

from chainrecall import __version__
from chainrecall.api.limits import BodySizeLimit
from chainrecall.api.problems import install_problem_handlers
from chainrecall.api.schemas import BatchOut, Problem, ReportIn, TriggerBatchIn, TriggerIn, WorkerIn
from chainrecall.config import ServerConfig
from chainrecall.model import EventPage, Record, SearchResults, Thread, Trigger, Worker
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


router = APIRouter()


@router.get("/healthz", tags=["meta"])
async def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/", tags=["meta"])
async def index() -> dict[str, Any]:
    return {
        "name": "chainrecall",
        "version": __version__,
        "openapi": "/openapi.json",
        "routes": [
            "GET /triggers/{id}",
            "GET /triggers/{id}/payload",
            "GET /threads/{id}",
            "GET /threads/{id}/events?cursor=&limit=",
            "GET /workers/{id}",
            "GET /search?q=",
            "POST /triggers",
            "POST /workers",
            "POST /workers/{id}/report",
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


def fast_routes() -> list[Route]:
    """Plain Starlette routes for the hottest read, matched ahead of FastAPI's own routes.

    Fetch by ID is what an agent does most. FastAPI's per-request routing and
    dependency solving cost about as much again as the lookup and the JSON
    (benchmarks/fetch_http.py, docs/benchmarks.md); this route does the same
    work as `get_trigger` above, through the same middleware and error handlers.
    The FastAPI route stays: it documents the operation in OpenAPI, and a
    method other than GET still answers 405 exactly as before.
    """

    async def get_trigger_fast(request: Request) -> Response:
        return record_response(memory(request).get_trigger(request.path_params["trigger_id"]))

    route = Route("/triggers/{trigger_id}", get_trigger_fast, methods=["GET"])
    route.methods = {"GET"}  # Starlette adds HEAD for GET; the API answers HEAD with 405
    return [route]


# -- writing ---------------------------------------------------------------------


def _trigger_kwargs(body: TriggerIn) -> dict[str, Any]:
    return body.model_dump()


@router.post(
    "/triggers", tags=["write"], status_code=201, response_model=Trigger,
    response_class=Response, responses={200: {"model": Trigger}, **_problems(400, 413, 422)},
)  # fmt: skip
def post_trigger(body: TriggerIn, request: Request) -> Response:
    """Record one inbound event. A repeated dedupe_key answers 200 with the first record."""
    trigger, created = memory(request).record_trigger(**_trigger_kwargs(body))
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
    items = [mem.new_trigger(**_trigger_kwargs(item)) for item in body.items]
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
    )
    app.state.store = store
    app.state.config = config
    install_problem_handlers(app)
    app.include_router(router)
    app.router.routes[:0] = fast_routes()
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes)
    return app


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` and multi-process serving: configuration from env."""
    from chainrecall.config import server_config_from_env

    config = server_config_from_env()
    return create_app(open_store(config.db), config)

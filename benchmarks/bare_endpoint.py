"""The floor for Python on one process: plain Starlette and sqlite3, one primary-key lookup.

`GET /triggers/{id}` reads the row of the same database file's `triggers`
table and answers it as JSON; no validation, no models, no middleware. It is
served with the same uvicorn settings as `chainrecall serve`, so the HTTP
benchmark (benchmarks/fetch_http.py) can report our throughput as a share of
this one's. Run it alone: `python -m benchmarks.bare_endpoint DB PORT`.
"""

from __future__ import annotations

import json
import sqlite3
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def bare_app(path: str) -> Starlette:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.row_factory = sqlite3.Row

    async def get_trigger(request: Request) -> Response:
        row = conn.execute(
            "SELECT * FROM triggers WHERE id = ?", (request.path_params["trigger_id"],)
        ).fetchone()
        if row is None:
            return Response('{"detail":"not found"}', 404, media_type="application/json")
        return Response(json.dumps(dict(row)), media_type="application/json")

    async def healthz(request: Request) -> Response:
        return Response('{"status":"ok"}', media_type="application/json")

    return Starlette(
        routes=[Route("/triggers/{trigger_id}", get_trigger), Route("/healthz", healthz)]
    )


if __name__ == "__main__":
    db, port = sys.argv[1], int(sys.argv[2])
    uvicorn.run(bare_app(db), host="127.0.0.1", port=port, log_level="warning")

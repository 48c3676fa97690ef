"""The MCP server over streamable HTTP: the `/mcp` endpoint of `chainrecall serve`.

The SDK's session manager needs a running task group, so the endpoint lives
for one ASGI lifespan: `mount_mcp` adds the route and wraps the app's lifespan
to start and stop it. A fresh manager is made for each lifespan (the SDK's may
run only once), so an app served again still answers. Served without a
lifespan (`uvicorn --lifespan off`), the endpoint answers 503 saying so.

The endpoint is stateless and answers plain JSON: every POST carries a whole
exchange, so it works behind several `serve --workers` processes and across
restarts, and the tools never call back to the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from chainrecall.api.problems import error_response, problem
from chainrecall.auth import authenticate, require_scope
from chainrecall.config import DEFAULT_HOST, DEFAULT_MAX_BODY_BYTES
from chainrecall.errors import ChainRecallError
from chainrecall.mcp_server import MemoryMCPServer
from chainrecall.store import Store

MCP_PATH = "/mcp"


class StreamableHTTPEndpoint:
    """An ASGI app serving one MemoryMCPServer over streamable HTTP while `running()`."""

    def __init__(
        self,
        server: MemoryMCPServer,
        *,
        host: str = DEFAULT_HOST,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.server = server
        self.host = host
        self.max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # streamable_http_app() makes a new session manager (and, on a loopback host,
        # turns on the SDK's DNS-rebinding protection); its Starlette app is not used:
        # requests reach the manager through __call__ at our own route.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            host=self.host,
            max_request_body_size=self.max_body_bytes,
        )
        manager = self.server.session_manager
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:
            response = problem(
                503,
                "the MCP endpoint is not running: this server was started without its ASGI "
                "lifespan; start it with `chainrecall serve` (or uvicorn --lifespan on)",
                instance=scope.get("path", MCP_PATH),
                slug="not-configured",
                title="Not configured",
            )
            await response(scope, receive, send)
            return
        # The same bearer tokens as the REST API: a token's namespace is the memory this
        # session sees; writing tools need the write scope (checked per tool call).
        try:
            token = authenticate(self.server.store, _header(scope, b"authorization"))
            require_scope(token, "read")
        except ChainRecallError as exc:
            await error_response(exc, scope.get("path", MCP_PATH))(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["token"] = token
        if token is not None:
            state["namespace"] = token.namespace
        await manager.handle_request(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def mount_mcp(
    app: Starlette,
    store: Store,
    *,
    host: str = DEFAULT_HOST,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    path: str = MCP_PATH,
) -> StreamableHTTPEndpoint:
    """Serve the MCP server at `path` of `app`, started and stopped with the app's lifespan."""
    endpoint = StreamableHTTPEndpoint(
        MemoryMCPServer(store), host=host, max_body_bytes=max_body_bytes
    )
    app.router.routes.append(Route(path, endpoint=endpoint))
    app.router.lifespan_context = _with_endpoint(app.router.lifespan_context, endpoint)
    return endpoint


def _with_endpoint(
    inner: Callable[[Any], AbstractAsyncContextManager[Any]], endpoint: StreamableHTTPEndpoint
) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with endpoint.running(), inner(app) as state:
            yield state

    return lifespan


def mcp_http_app(store: Store, *, host: str = DEFAULT_HOST) -> Starlette:
    """An app serving only the MCP endpoint (`chainrecall mcp --http`)."""
    app = Starlette()
    mount_mcp(app, store, host=host)
    return app

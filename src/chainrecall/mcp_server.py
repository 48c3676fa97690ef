"""The memory as an MCP server: the recall tools, three writes and resources by URI.

Built on the official `mcp` SDK (2.x, `MCPServer`). The six read tools are the
harness's recall tools (`chainrecall.tools.RecallTools`), with the same names,
arguments, lean JSON and spill pointers; the writes an agent needs are
`record_trigger`, `start_worker` and `file_report`. Every result is returned
twice, as compact JSON text for the model and as structured content for the
client. Anything a caller can get wrong (an unknown ID, a bad or unknown
argument) is a tool error (`isError`) whose text names the problem, never an
empty success. Resources expose threads, triggers, payloads and workers as
`chainrecall://threads/{id}` and the like; an unknown ID is a protocol error.

This module owns the server object and the stdio transport; the streamable HTTP
endpoint that `chainrecall serve` mounts at `/mcp` lives in `api/mcp.py`.
Writes go through the store's transactions, so concurrent clients lose nothing.
"""

import json
import re
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic.networks import AnyUrl

from chainrecall import __version__
from chainrecall.auth import require_scope
from chainrecall.errors import ChainRecallError, Forbidden, Gone, NotFound, UnknownReference
from chainrecall.model import Payload, TokenInfo
from chainrecall.service import Memory
from chainrecall.store import DEFAULT_NAMESPACE, Store
from chainrecall.tools import (
    DEFAULT_INLINE_LIMIT,
    DEFAULT_PAGE_SIZE,
    TOOL_NAMES,
    TOOL_SPECS,
    RecallTools,
    ToolResult,
)

SERVER_NAME = "chainrecall"
WRITE_TOOL_NAMES = ("record_trigger", "start_worker", "file_report")

INSTRUCTIONS = (
    "Chain of Recall memory. Recall: search(query) for entry points, then follow IDs "
    "(thr_ threads, wkr_ workers, trg_ triggers) with get_thread, get_worker, get_trigger, "
    "get_trigger_payload and list_thread_events. Write: record_trigger for an inbound event, "
    "start_worker when you take on a thread, file_report when you finish."
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# The result a tool returns: structured content validated as a JSON object, plus text.
ToolOutput = Annotated[CallToolResult, dict[str, Any]]

_ID = {"type": "string", "description": "an ID exactly as seen (trg_..., thr_..., wkr_...)"}


def _params(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


WRITE_TOOL_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "record_trigger": (
        "Record one inbound event (chat message, webhook, CI result, e-mail) on a thread: "
        "give thread_key (created on first use) or thread_id. A repeated dedupe_key "
        "answers the first record with created false.",
        _params(
            {
                "source": {"type": "string", "description": "where it came from: github, slack"},
                "kind": {"type": "string", "description": "what it is: pr_comment, message"},
                "payload": {"description": "the event's content: text or a JSON value"},
                "thread_key": {
                    "type": "string",
                    "description": "natural key of the thread, e.g. github:acme/pay#412",
                },
                "thread_id": _ID,
                "summary": {"type": "string", "description": "one line; derived when absent"},
                "dedupe_key": {"type": "string", "description": "the sender's delivery id"},
                "occurred_at": {"type": "string", "description": "ISO 8601 time; default now"},
            },
            ["source", "kind", "payload"],
        ),
    ),
    "start_worker": (
        "Start a worker (you, an agent session) on a thread; the thread lists it as an owner.",
        _params(
            {"thread_id": _ID, "task": {"type": "string", "description": "what you will do"}},
            ["thread_id", "task"],
        ),
    ),
    "file_report": (
        "File a worker's report: a one-line summary, an optional body, the trg_ ids it "
        "cites (refs) and a status (default ready).",
        _params(
            {
                "worker_id": _ID,
                "summary": {"type": "string", "description": "one line"},
                "body": {"type": "string", "description": "details (optional)"},
                "refs": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "trg_ ids the report relies on",
                },
                "status": {
                    "type": "string",
                    "description": "running, waiting, blocked, ready, done or failed",
                },
            },
            ["worker_id", "summary"],
        ),
    ),
}

THREAD_URI = "chainrecall://threads/{id}"
TRIGGER_URI = "chainrecall://triggers/{id}"
PAYLOAD_URI = "chainrecall://triggers/{id}/payload"
WORKER_URI = "chainrecall://workers/{id}"
_PAYLOAD_URI = re.compile(r"chainrecall://triggers/(?P<id>[^/?#]+)/payload")


def error_data(exc: ChainRecallError) -> dict[str, Any]:
    """The error result of a failed write, in the shape RecallTools answers for reads."""
    if isinstance(exc, NotFound):
        return {"error": "not_found", "message": exc.detail, "id": exc.object_id}
    if isinstance(exc, Gone):
        return {"error": "gone", "message": exc.detail, "id": exc.object_id}
    if isinstance(exc, UnknownReference):
        return {"error": "unknown_reference", "message": exc.detail, "id": exc.object_id}
    if isinstance(exc, Forbidden):
        return {"error": "forbidden", "message": exc.detail}
    out: dict[str, Any] = {"error": "invalid_argument", "message": exc.detail}
    field = exc.extensions.get("field")
    if field:
        out["field"] = field
    return out


def call_result(result: ToolResult) -> CallToolResult:
    """A ToolResult as MCP answers it: JSON text always, structured content on success."""
    text = [TextContent(type="text", text=result.to_text())]
    if result.ok:
        return CallToolResult(content=text, structured_content=result.data)
    return CallToolResult(content=text, is_error=True)


class MemoryMCPServer(MCPServer[Any]):
    """An MCP server over one store; each request sees its namespace's memory."""

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        page_size: int = DEFAULT_PAGE_SIZE,
        log_level: LogLevel = "WARNING",
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.inline_limit = inline_limit
        self.page_size = page_size
        self._arguments: dict[str, set[str]] = {}
        super().__init__(
            SERVER_NAME,
            version=__version__,
            instructions=INSTRUCTIONS,
            tools=self._tools(),
            log_level=log_level,
        )
        self._add_resources()

    # -- per request ---------------------------------------------------------
    def memory(self, ctx: Context | None) -> Memory:
        """The memory of the namespace the request may see (set by HTTP auth, if any)."""
        namespace = self.namespace
        if ctx is not None:
            try:
                request = ctx.request_context.request
            except ValueError:  # no request: an in-process call
                request = None
            chosen = getattr(getattr(request, "state", None), "namespace", None)
            if isinstance(chosen, str):
                namespace = chosen
        return Memory(self.store, namespace)

    @staticmethod
    def _token(ctx: Context | None) -> TokenInfo | None:
        """The API token of an HTTP request (set by the endpoint's authentication), if any."""
        if ctx is None:
            return None
        try:
            request = ctx.request_context.request
        except ValueError:
            return None
        token = getattr(getattr(request, "state", None), "token", None)
        return token if isinstance(token, TokenInfo) else None

    def recall_tools(self, ctx: Context | None) -> RecallTools:
        return RecallTools(
            self.memory(ctx), inline_limit=self.inline_limit, page_size=self.page_size
        )

    def _unknown_arguments(self, ctx: Context, name: str) -> ToolResult | None:
        """An error for arguments the tool does not take: nothing a caller sends is ignored."""
        try:
            params = ctx.request_context.params or {}
        except ValueError:  # called in-process without a request: the arguments are Python's
            return None
        sent = params.get("arguments") or {}
        unknown = sorted(set(sent) - self._arguments[name])
        if not unknown:
            return None
        takes = ", ".join(sorted(self._arguments[name]))
        return ToolResult(
            False,
            {
                "error": "invalid_arguments",
                "message": f"{name} takes {takes}; unknown argument(s): {', '.join(unknown)}",
            },
        )

    def _read(self, ctx: Context, name: str, **arguments: Any) -> CallToolResult:
        refused = self._unknown_arguments(ctx, name)
        if refused is not None:
            return call_result(refused)
        given = {key: value for key, value in arguments.items() if value is not None}
        return call_result(self.recall_tools(ctx).call(name, given))

    def _write(
        self, ctx: Context, name: str, action: Callable[[Memory, RecallTools], dict[str, Any]]
    ) -> CallToolResult:
        refused = self._unknown_arguments(ctx, name)
        if refused is not None:
            return call_result(refused)
        tools = self.recall_tools(ctx)
        try:
            require_scope(self._token(ctx), "write")
            data = action(tools.memory, tools)
        except ChainRecallError as exc:
            return call_result(ToolResult(False, error_data(exc)))
        return call_result(ToolResult(True, data))

    # -- tools ---------------------------------------------------------------
    def _tools(self) -> list[Tool]:
        # Sync functions: the SDK runs them in a worker thread, so a durable commit
        # (which waits for the disk) never blocks the event loop.
        def search(ctx: Context, query: str) -> ToolOutput:
            return self._read(ctx, "search", query=query)

        def get_thread(ctx: Context, id: str) -> ToolOutput:
            return self._read(ctx, "get_thread", id=id)

        def get_worker(ctx: Context, id: str) -> ToolOutput:
            return self._read(ctx, "get_worker", id=id)

        def get_trigger(ctx: Context, id: str) -> ToolOutput:
            return self._read(ctx, "get_trigger", id=id)

        def get_trigger_payload(
            ctx: Context, id: str, offset: int | None = None, length: int | None = None
        ) -> ToolOutput:
            return self._read(ctx, "get_trigger_payload", id=id, offset=offset, length=length)

        def list_thread_events(
            ctx: Context, thread_id: str, cursor: str | None = None
        ) -> ToolOutput:
            return self._read(ctx, "list_thread_events", thread_id=thread_id, cursor=cursor)

        def record_trigger(
            ctx: Context,
            source: str,
            kind: str,
            payload: Any,
            thread_key: str | None = None,
            thread_id: str | None = None,
            summary: str | None = None,
            dedupe_key: str | None = None,
            occurred_at: str | None = None,
        ) -> ToolOutput:
            def action(memory: Memory, tools: RecallTools) -> dict[str, Any]:
                trigger, created = memory.record_trigger(
                    source=source, kind=kind, payload=payload, thread_key=thread_key,
                    thread_id=thread_id, summary=summary, dedupe_key=dedupe_key,
                    occurred_at=occurred_at,
                )  # fmt: skip
                return {**tools.lean_trigger(trigger), "created": created}

            return self._write(ctx, "record_trigger", action)

        def start_worker(ctx: Context, thread_id: str, task: str) -> ToolOutput:
            def action(memory: Memory, tools: RecallTools) -> dict[str, Any]:
                return tools.lean_worker(memory.start_worker(thread_id, task))

            return self._write(ctx, "start_worker", action)

        def file_report(
            ctx: Context,
            worker_id: str,
            summary: str,
            body: str = "",
            refs: list[str] | None = None,
            status: str = "ready",
        ) -> ToolOutput:
            def action(memory: Memory, tools: RecallTools) -> dict[str, Any]:
                worker = memory.report(
                    worker_id, summary=summary, body=body, refs=refs or [], status=status
                )
                return tools.lean_worker(worker)

            return self._write(ctx, "file_report", action)

        functions: dict[str, Callable[..., CallToolResult]] = {
            "search": search,
            "get_thread": get_thread,
            "get_worker": get_worker,
            "get_trigger": get_trigger,
            "get_trigger_payload": get_trigger_payload,
            "list_thread_events": list_thread_events,
            "record_trigger": record_trigger,
            "start_worker": start_worker,
            "file_report": file_report,
        }
        specs: dict[str, tuple[str, dict[str, Any]]] = {
            spec["function"]["name"]: (
                spec["function"]["description"],
                spec["function"]["parameters"],
            )
            for spec in TOOL_SPECS
        }
        specs.update(WRITE_TOOL_SPECS)
        tools = []
        for name, fn in functions.items():
            description, parameters = specs[name]
            read_only = name in TOOL_NAMES
            tool = Tool.from_function(
                fn,
                name=name,
                description=description,
                annotations=ToolAnnotations(
                    read_only_hint=read_only, destructive_hint=False, open_world_hint=False
                ),
            )
            # Advertise the harness's own JSON schema (compact, additionalProperties false)
            # rather than pydantic's; the function's signature validates the same fields.
            tools.append(tool.model_copy(update={"parameters": parameters}))
            self._arguments[name] = set(parameters["properties"])
        return tools

    # -- resources -----------------------------------------------------------
    def _resource_json(self, ctx: Context, read: Callable[[RecallTools], dict[str, Any]]) -> str:
        try:
            data = read(self.recall_tools(ctx))
        except (NotFound, Gone) as exc:
            raise ResourceNotFoundError(exc.detail) from None
        except ChainRecallError as exc:
            raise ResourceError(exc.detail) from None
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def payload(self, ctx: Context | None, trigger_id: str) -> Payload:
        try:
            return self.memory(ctx).get_payload(trigger_id)
        except (NotFound, Gone) as exc:
            raise ResourceNotFoundError(exc.detail) from None

    def _add_resources(self) -> None:
        json_type = "application/json"

        @self.resource(THREAD_URI, name="thread", mime_type=json_type,
                       description="A thread's record: title, summary, status, owner_workers.")  # fmt: skip
        def thread(ctx: Context, id: str) -> str:
            return self._resource_json(ctx, lambda tools: tools.get_thread(id))

        @self.resource(TRIGGER_URI, name="trigger", mime_type=json_type,
                       description="A trigger's record: source, kind, summary, neighbours.")  # fmt: skip
        def trigger(ctx: Context, id: str) -> str:
            return self._resource_json(ctx, lambda tools: tools.get_trigger(id))

        @self.resource(WORKER_URI, name="worker", mime_type=json_type,
                       description="A worker's record: task, status, latest report.")  # fmt: skip
        def worker(ctx: Context, id: str) -> str:
            return self._resource_json(ctx, lambda tools: tools.get_worker(id))

        @self.resource(PAYLOAD_URI, name="trigger_payload", mime_type="application/octet-stream",
                       description="A trigger's original payload, whole, with its stored "
                       "content type.")  # fmt: skip
        def trigger_payload(ctx: Context, id: str) -> str | bytes:
            return payload_content(self.payload(ctx, id))

    async def read_resource(
        self, uri: AnyUrl | str, context: Context | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """Resources by URI; a payload is answered with the content type it was stored with."""
        match = _PAYLOAD_URI.fullmatch(str(uri))
        if match is None:
            return await super().read_resource(uri, context)
        stored = await anyio.to_thread.run_sync(self.payload, context, match["id"])
        return [ReadResourceContents(payload_content(stored), mime_type=stored.content_type)]


def payload_content(payload: Payload) -> str | bytes:
    """Text for a textual payload (JSON, text/*), else the bytes (sent base64 as a blob)."""
    ctype = payload.content_type.split(";")[0].strip().lower()
    if ctype.startswith("text/") or "json" in ctype or "xml" in ctype:
        try:
            return payload.data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return payload.data


def run_stdio(store: Store, *, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Serve the memory over stdio until the client closes the pipe (`chainrecall mcp`)."""
    server = MemoryMCPServer(store, namespace=namespace)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        store.close()

"""The MCP server through the SDK's own client: over stdio and over streamable HTTP.

One stdio server process and one HTTP server serve every test of the module
(a process start costs seconds), on one database; each test works on threads of
its own. `client` runs each test over stdio (the initialize handshake that
desktop and coding agents speak), and over HTTP with both the handshake and the
2026 protocol's discovery.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextResourceContents
from starlette.types import ASGIApp, Receive, Scope, Send
from typer.testing import CliRunner

from chainrecall import cli
from chainrecall.api.app import create_app
from chainrecall.errors import NotFound
from chainrecall.mcp_server import WRITE_TOOL_NAMES
from chainrecall.service import Memory
from chainrecall.store import open_store
from chainrecall.tools import TOOL_NAMES, TOOL_SPECS
from tests.servers import ThreadServer, cli_env, free_port

# One worker runs the module under `pytest -n N --dist loadgroup`: its servers start once.
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("mcp")]

TIMEOUT = 30  # seconds any one MCP request may take before the test fails


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("mcp") / "memory.db")


@pytest.fixture(scope="module")
def memory(db: str) -> Iterator[Memory]:
    """The same database, embedded: to seed data and to check what the servers stored."""
    with Memory(open_store(db)) as opened:
        yield opened


@pytest.fixture(scope="module")
def http_server(memory: Memory) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(memory.store)) as running:
        yield running


def stdio_params(db: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "chainrecall", "mcp", "--db", db], env=cli_env()
    )


@asynccontextmanager
async def connect(target: Any, mode: str = "auto") -> AsyncIterator[Client]:
    async with Client(target, mode=mode, read_timeout_seconds=TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module", params=["stdio", "http", "http-legacy"])
async def client(
    request: pytest.FixtureRequest, db: str, http_server: ThreadServer, anyio_backend: str
) -> AsyncIterator[Client]:
    if request.param == "stdio":
        target: Any = stdio_params(db)
        mode = "legacy"
    else:
        target = http_server.url + "/mcp"
        mode = "legacy" if request.param == "http-legacy" else "auto"
    async with connect(target, mode) as connected:
        yield connected


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured content (which equals its JSON text)."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, f"{name}({arguments}) failed: {text_of(result)}"
    data: dict[str, Any] = json.loads(text_of(result))
    assert result.structured_content == data
    return data


async def call_error(client: Client, name: str, **arguments: Any) -> str:
    """A tool call that must fail as a tool error (isError); its text."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name}({arguments}) succeeded: {text_of(result)}"
    return text_of(result)


def tag(request: pytest.FixtureRequest) -> str:
    """A word naming the transport a test runs over, for keys no other test uses."""
    return str(request.node.callspec.params["client"]).replace("-", "")


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


# -- the tool list -----------------------------------------------------------


async def test_tools_have_the_harness_names_arguments_and_a_structured_output(
    client: Client,
) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == set(TOOL_NAMES) | set(WRITE_TOOL_NAMES)
    for spec in TOOL_SPECS:
        tool = listed[spec["function"]["name"]]
        assert tool.input_schema == spec["function"]["parameters"]
        assert tool.description == spec["function"]["description"]
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
    for name in WRITE_TOOL_NAMES:
        annotations = listed[name].annotations
        assert annotations is not None and annotations.read_only_hint is False
    for tool in listed.values():
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    record = listed["record_trigger"].input_schema
    assert record["required"] == ["source", "kind", "payload"]
    assert {"thread_key", "thread_id", "summary", "dedupe_key", "occurred_at"} <= set(
        record["properties"]
    )


# -- every tool, and its error -----------------------------------------------


async def test_a_recall_walks_from_search_to_payload_through_every_tool(
    client: Client, request: pytest.FixtureRequest
) -> None:
    word = "idempotency" + tag(request)
    big = {"body": f"Add retries with an {word} key to the payment client. " + "x" * 3000}
    recorded = await call(
        client, "record_trigger", source="github", kind="pr_comment", payload=big,
        thread_key=f"github:acme/payments#{word}", summary=f"reviewer asks for {word} retries",
        dedupe_key=f"delivery-{word}", occurred_at="2026-11-03T09:12:44+01:00",
    )  # fmt: skip
    trigger_id, thread_id = recorded["id"], recorded["thread_id"]
    assert trigger_id.startswith("trg_") and thread_id.startswith("thr_")
    assert recorded["created"] is True
    assert recorded["occurred_at"] == "2026-11-03T08:12:44Z"
    assert recorded["payload"].startswith(f"get_trigger_payload({trigger_id}): ")

    again = await call(
        client, "record_trigger", source="github", kind="pr_comment", payload=big,
        thread_key=f"github:acme/payments#{word}", dedupe_key=f"delivery-{word}",
    )  # fmt: skip
    assert (again["id"], again["created"]) == (trigger_id, False)

    worker = await call(client, "start_worker", thread_id=thread_id, task=f"add {word} retries")
    worker_id = worker["id"]
    assert worker["status"] == "running" and worker["thread_ids"] == [thread_id]
    reported = await call(
        client, "file_report", worker_id=worker_id, summary=f"retries with {word} keys added",
        body="details " * 600, refs=[trigger_id], status="done",
    )  # fmt: skip
    assert reported["report"]["refs"] == [trigger_id]
    assert reported["report"]["body_more"].startswith(f"GET /workers/{worker_id} (")

    hits = (await call(client, "search", query=word))["hits"]
    assert trigger_id in {hit["id"] for hit in hits}

    thread = await call(client, "get_thread", id=thread_id)
    assert thread["owner_workers"] == [worker_id]
    assert thread["event_count"] == 3  # the trigger, the worker's start, its report

    got_worker = await call(client, "get_worker", id=worker_id)
    assert got_worker["status"] == "done" and got_worker["report"]["summary"].endswith("added")

    trigger = await call(client, "get_trigger", id=trigger_id)
    assert trigger["summary"] == f"reviewer asks for {word} retries"

    first = await call(client, "get_trigger_payload", id=trigger_id)
    assert first["content_type"] == "application/json" and first["offset"] == 0
    assert word in first["text"] and f"offset={len(first['text'])}" in first["more"]
    end = len(first["text"].encode())
    rest = await call(client, "get_trigger_payload", id=trigger_id, offset=end, length=10_000)
    assert rest["offset"] == end and "more" not in rest
    assert first["text"] + rest["text"] == json.dumps(big, separators=(",", ":"))

    events = await call(client, "list_thread_events", thread_id=thread_id)
    assert [e["kind"] for e in events["items"]] == ["trigger", "worker", "report"]
    assert events["has_more"] is False


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_thread", {"id": "thr_zzzzzzzz"}),
        ("get_worker", {"id": "wkr_zzzzzzzz"}),
        ("get_trigger", {"id": "trg_zzzzzzzz"}),
        ("get_trigger_payload", {"id": "trg_zzzzzzzz"}),
        ("list_thread_events", {"thread_id": "thr_zzzzzzzz"}),
        ("get_thread", {"id": "wkr_zzzzzzzz"}),  # an ID of the wrong kind is unknown too
        ("start_worker", {"thread_id": "thr_zzzzzzzz", "task": "review"}),
        ("file_report", {"worker_id": "wkr_zzzzzzzz", "summary": "done"}),
        (
            "record_trigger",
            {"source": "s", "kind": "k", "payload": "p", "thread_id": "thr_zzzzzzzz"},
        ),
    ],
)
async def test_an_unknown_id_is_a_tool_error_that_names_it(
    client: Client, tool: str, arguments: dict[str, Any]
) -> None:
    unknown = next(v for v in arguments.values() if str(v).endswith("_zzzzzzzz"))
    error = json.loads(await call_error(client, tool, **arguments))
    assert error["error"] in {"not_found", "unknown_reference"}
    assert unknown in error["message"] and error["id"] == unknown


async def test_search_with_no_match_is_an_empty_list_not_an_error(client: Client) -> None:
    assert (await call(client, "search", query="zebracornucopia"))["hits"] == []


WRITE = {"source": "s", "kind": "k", "payload": "p", "thread_key": "t"}


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("get_thread", {}, "id"),  # a required argument missing
        ("get_thread", {"id": 42}, "id"),  # of the wrong type
        ("get_thread", {"id": "thr_zzzzzzzz", "depth": 2}, "depth"),  # not an argument at all
        ("search", {"query": "  "}, "non-empty"),
        ("get_trigger_payload", {"id": "trg_zzzzzzzz", "offset": -1}, "offset"),
        ("record_trigger", {**WRITE, "source": ""}, "source"),
        ("record_trigger", {"source": "s", "kind": "k", "payload": "p"}, "thread_key"),
        ("record_trigger", {**WRITE, "occurred_at": "yesterday"}, "occurred_at"),
        ("start_worker", {"thread_id": "thr_zzzzzzzz", "task": " "}, "task"),
        ("file_report", {"worker_id": "wkr_zzzzzzzz"}, "summary"),
    ],
)
async def test_bad_arguments_are_a_tool_error_that_says_what_was_wrong(
    client: Client, tool: str, arguments: dict[str, Any], says: str
) -> None:
    assert says in await call_error(client, tool, **arguments)


async def test_a_bad_write_stores_nothing(
    client: Client, memory: Memory, request: pytest.FixtureRequest
) -> None:
    key = f"rejected-{tag(request)}"
    await call_error(
        client, "record_trigger", source="s", kind="k", payload="p", thread_key=key,
        occurred_at="not a time",
    )  # fmt: skip
    with pytest.raises(NotFound):
        memory.find_thread(key)


# -- paging ------------------------------------------------------------------


async def test_paging_a_long_thread_with_the_cursor_visits_every_event_once_in_order(
    client: Client, memory: Memory, request: pytest.FixtureRequest
) -> None:
    key = f"chat:long-{tag(request)}"
    items = [
        memory.new_trigger(source="chat", kind="message", payload=f"message {n}", thread_key=key)
        for n in range(60)
    ]
    thread_id = memory.record_triggers(items)[0].trigger.thread_id

    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        arguments: dict[str, Any] = {"thread_id": thread_id}
        if cursor is not None:
            arguments["cursor"] = cursor
        page = await call(client, "list_thread_events", **arguments)
        pages += 1
        assert len(page["items"]) == 20
        seen.extend(page["items"])
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
        assert pages < 10, "paging did not end"
    assert pages == 3
    assert [e["seq"] for e in seen] == list(range(1, 61))
    assert [e["summary"] for e in seen] == [f"message {n}" for n in range(60)]
    assert len({e["id"] for e in seen}) == 60

    # The last cursor stays valid: once more events arrive, it reads exactly those.
    memory.record_trigger(source="chat", kind="message", payload="message 60", thread_key=key)
    tail = await call(client, "list_thread_events", thread_id=thread_id, cursor=cursor)
    assert [e["summary"] for e in tail["items"]] == ["message 60"]

    # A cursor belongs to its thread.
    other = memory.record_trigger(
        source="chat", kind="message", payload="elsewhere", thread_key=key + "-other"
    ).trigger.thread_id
    error = await call_error(client, "list_thread_events", thread_id=other, cursor=cursor)
    assert "cursor" in error
    forged = await call_error(client, "list_thread_events", thread_id=thread_id, cursor="forged")
    assert "cursor" in forged


# -- resources ---------------------------------------------------------------


async def test_threads_triggers_payloads_and_workers_are_resources_by_uri(
    client: Client, memory: Memory, request: pytest.FixtureRequest
) -> None:
    appended = memory.record_trigger(
        source="ci", kind="build_failed", payload={"job": "unit", "log": "timeout in pay()"},
        thread_key=f"ci:resources-{tag(request)}",
    )  # fmt: skip
    trigger = appended.trigger
    worker = memory.start_worker(trigger.thread_id, "fix the build")
    binary = memory.record_trigger(
        source="mail", kind="attachment", raw=b"\x89PNG\x00\xff", content_type="image/png",
        thread_id=trigger.thread_id,
    ).trigger  # fmt: skip

    templates = {
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    }
    assert {
        "chainrecall://threads/{id}",
        "chainrecall://triggers/{id}",
        "chainrecall://triggers/{id}/payload",
        "chainrecall://workers/{id}",
    } <= templates

    async def read(uri: str) -> TextResourceContents:
        contents = (await client.read_resource(uri)).contents
        assert len(contents) == 1 and isinstance(contents[0], TextResourceContents)
        return contents[0]

    thread = await read(f"chainrecall://threads/{trigger.thread_id}")
    assert thread.mime_type == "application/json"
    assert json.loads(thread.text)["owner_workers"] == [worker.id]
    got = json.loads((await read(f"chainrecall://triggers/{trigger.id}")).text)
    assert (got["id"], got["kind"]) == (trigger.id, "build_failed")
    payload = await read(f"chainrecall://triggers/{trigger.id}/payload")
    assert payload.mime_type == "application/json"
    assert json.loads(payload.text) == {"job": "unit", "log": "timeout in pay()"}
    assert json.loads((await read(f"chainrecall://workers/{worker.id}")).text)["task"] == (
        "fix the build"
    )
    blob = (await client.read_resource(f"chainrecall://triggers/{binary.id}/payload")).contents[0]
    assert blob.mime_type == "image/png" and getattr(blob, "blob", None) == "iVBORwD/"


@pytest.mark.parametrize(
    "uri",
    [
        "chainrecall://threads/thr_zzzzzzzz",
        "chainrecall://triggers/trg_zzzzzzzz",
        "chainrecall://triggers/trg_zzzzzzzz/payload",
        "chainrecall://workers/wkr_zzzzzzzz",
    ],
)
async def test_an_unknown_resource_is_an_error_that_names_the_id(client: Client, uri: str) -> None:
    with pytest.raises(MCPError) as raised:
        await client.read_resource(uri)
    assert "zzzzzzzz" in raised.value.error.message


# -- concurrency -------------------------------------------------------------


@pytest.mark.slow
async def test_concurrent_writes_from_several_clients_lose_nothing(
    db: str, http_server: ThreadServer, memory: Memory, anyio_backend: str
) -> None:
    """Two stdio server processes and two HTTP sessions write one thread at once."""
    thread_id = memory.record_trigger(
        source="chat", kind="message", payload="start", thread_key="chat:race"
    ).trigger.thread_id
    per_client = 12
    recorded: dict[str, list[str]] = {}
    workers: list[str] = []

    async def write_from(name: str, target: Any, mode: str) -> None:
        async with connect(target, mode) as writer:

            async def one(n: int) -> None:
                out = await call(
                    writer, "record_trigger", source="chat", kind="message",
                    payload=f"{name} says {n}", thread_id=thread_id, summary=f"{name}-{n}",
                )  # fmt: skip
                recorded.setdefault(name, []).append(out["id"])

            async with anyio.create_task_group() as overlapping:
                for n in range(per_client):
                    overlapping.start_soon(one, n)
                worker = await call(writer, "start_worker", thread_id=thread_id, task=name)
                workers.append(worker["id"])

    url = http_server.url + "/mcp"
    with anyio.fail_after(120):
        async with anyio.create_task_group() as clients:
            clients.start_soon(write_from, "stdio-a", stdio_params(db), "legacy")
            clients.start_soon(write_from, "stdio-b", stdio_params(db), "auto")
            clients.start_soon(write_from, "http-a", url, "auto")
            clients.start_soon(write_from, "http-b", url, "legacy")

    written = [tid for ids in recorded.values() for tid in ids]
    assert len(written) == len(set(written)) == 4 * per_client
    events = list(memory.walk_events(thread_id))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # gap-free, in order
    assert len(events) == 1 + 4 * per_client + 4
    assert {e.id for e in events if e.kind == "trigger"} >= set(written)
    summaries = {e.summary for e in events if e.kind == "trigger"}
    for name in recorded:
        assert {f"{name}-{n}" for n in range(per_client)} <= summaries
    assert sorted(memory.get_thread(thread_id).owner_workers) == sorted(workers)


# -- HTTP specifics ----------------------------------------------------------


class NamespaceFromHeader:
    """Stands in for token auth: puts the request's namespace where the app reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if b"x-namespace" in headers:
                scope.setdefault("state", {})["namespace"] = headers[b"x-namespace"].decode()
        await self.app(scope, receive, send)


async def test_over_http_each_request_sees_the_namespace_its_credentials_give(
    memory: Memory, anyio_backend: str
) -> None:
    app = create_app(memory.store)
    app.add_middleware(NamespaceFromHeader)
    team_b = memory.in_namespace("team-b")
    secret = team_b.record_trigger(
        source="chat", kind="message", payload="team b plans", thread_key="chat:b"
    ).trigger
    with ThreadServer(app) as server:
        url = server.url + "/mcp"
        http = httpx2.AsyncClient(headers={"x-namespace": "team-b"})
        async with http, connect(streamable_http_client(url, http_client=http)) as as_b:
            assert (await call(as_b, "get_trigger", id=secret.id))["id"] == secret.id
        async with connect(url) as as_default:
            error = json.loads(await call_error(as_default, "get_trigger", id=secret.id))
            assert error["error"] == "not_found" and error["id"] == secret.id


def test_the_mounted_endpoint_without_a_lifespan_says_how_to_start_it(memory: Memory) -> None:
    with ThreadServer(create_app(memory.store), lifespan="off") as server:
        response = httpx.post(server.url + "/mcp", json={}, timeout=10)
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert "lifespan" in response.json()["detail"]


def test_the_endpoint_refuses_a_foreign_host_header(http_server: ThreadServer) -> None:
    """DNS-rebinding protection: a page on evil.example must not reach a loopback server."""
    response = httpx.post(
        http_server.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Host": "evil.example", "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert response.status_code in {400, 403, 421}


@pytest.mark.slow
async def test_chainrecall_mcp_http_serves_on_its_own_port(
    db: str, memory: Memory, anyio_backend: str
) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "chainrecall", "mcp", "--db", db, "--http", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=cli_env(), stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_until_listening(proc, port)
        thread_id = memory.record_trigger(
            source="chat", kind="message", payload="own port", thread_key="chat:own-port"
        ).trigger.thread_id
        async with connect(url) as standalone:
            assert (await call(standalone, "get_thread", id=thread_id))["event_count"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        assert proc.stderr is not None
        proc.stderr.close()


def wait_until_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            assert proc.stderr is not None
            raise RuntimeError(f"chainrecall mcp --http exited: {proc.stderr.read().decode()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("chainrecall mcp --http did not listen within 30 s") from None
            time.sleep(0.05)


def test_chainrecall_mcp_http_refuses_a_public_address(db: str) -> None:
    result = CliRunner().invoke(cli.app, ["mcp", "--db", db, "--http", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to listen on 0.0.0.0" in result.stderr


async def test_over_http_the_api_tokens_decide_access_and_namespace(
    tmp_path: Any, anyio_backend: str
) -> None:
    from chainrecall.auth import issue_token

    store = open_store(str(tmp_path / "tokens.db"))
    reader = issue_token(store, "team-b", "read")[1]
    writer = issue_token(store, "team-b", "write")[1]
    other = issue_token(store, "default", "admin")[1]
    try:
        with ThreadServer(create_app(store)) as server:
            url = server.url + "/mcp"
            refused = httpx.post(url, json={}, timeout=10)
            assert refused.status_code == 401
            assert refused.headers["content-type"] == "application/problem+json"

            def as_token(token: str) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})

            async with (
                as_token(writer) as http,
                connect(streamable_http_client(url, http_client=http)) as team_b,
            ):
                made = await call(
                    team_b, "record_trigger", source="chat", kind="message",
                    thread_key="chat:b", payload="team b plans",
                )  # fmt: skip
            async with (
                as_token(reader) as http,
                connect(streamable_http_client(url, http_client=http)) as team_b_reader,
            ):
                assert (await call(team_b_reader, "get_trigger", id=made["id"]))["id"] == made["id"]
                denied = json.loads(
                    await call_error(
                        team_b_reader,
                        "record_trigger",
                        source="chat",
                        kind="m",
                        thread_key="chat:b",
                        payload="x",
                    )
                )
                assert denied["error"] == "forbidden" and "'write'" in denied["message"]
            async with (
                as_token(other) as http,
                connect(streamable_http_client(url, http_client=http)) as outsider,
            ):
                error = json.loads(await call_error(outsider, "get_trigger", id=made["id"]))
                assert error["error"] == "not_found"
    finally:
        store.close()

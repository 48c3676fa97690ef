"""A fake OpenAI-compatible chat-completions server for the harness tests, over real HTTP.

The only fake in the suite, standing in for an LLM provider. It is scripted turn
by turn: each POST to /v1/chat/completions takes the next `Turn` (a reply with
tool calls and a usage block carrying DeepSeek's cache fields, a streamed
reply, or a hang that holds the request until released), and it records every
request body byte for byte so tests can check what the harness sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

HOLD_LIMIT_S = 30.0


def tool_call(name: str, arguments: Any, call_id: str) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def usage(prompt: int, completion: int, hit: int) -> dict[str, int]:
    """A DeepSeek usage block: prompt_tokens = cache hit + cache miss."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": prompt - hit,
    }


@dataclass
class Turn:
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    stream: bool = False
    hang: bool = False


class FakeChatServer:
    """The scripted server; `app` is the ASGI app to run in a ThreadServer."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = list(turns)
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.arrived = threading.Event()  # set when a hanging turn holds a request
        self.release = threading.Event()
        self.app = Starlette(
            routes=[Route("/v1/chat/completions", self.complete, methods=["POST"])]
        )

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body in self.bodies]

    async def complete(self, request: Request) -> Response:
        body = await request.body()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        if not self.turns:
            return JSONResponse({"error": {"message": "script exhausted"}}, status_code=500)
        turn = self.turns.pop(0)
        if turn.hang:
            self.arrived.set()
            deadline = time.monotonic() + HOLD_LIMIT_S
            while not self.release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return JSONResponse({"error": {"message": "released"}}, status_code=503)
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.tool_calls:
            message["tool_calls"] = turn.tool_calls
        if turn.stream:
            return StreamingResponse(self._stream(turn), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.bodies)}",
                "object": "chat.completion",
                "model": json.loads(body)["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if turn.tool_calls else "stop",
                    }
                ],
                "usage": turn.usage,
            }
        )

    async def _stream(self, turn: Turn) -> AsyncIterator[bytes]:
        """SSE chunks: text in pieces, each tool call's arguments split across deltas."""

        def event(choice_delta: dict[str, Any], finish: str | None = None) -> bytes:
            chunk = {"choices": [{"index": 0, "delta": choice_delta, "finish_reason": finish}]}
            return f"data: {json.dumps(chunk)}\n\n".encode()

        yield event({"role": "assistant", "content": ""})
        text = turn.content or ""
        for start in range(0, len(text), 5):
            yield event({"content": text[start : start + 5]})
        for index, call in enumerate(turn.tool_calls):
            arguments = call["function"]["arguments"]
            yield event(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function",
                         "function": {"name": call["function"]["name"], "arguments": ""}}
                    ]
                }
            )  # fmt: skip
            for start in range(0, len(arguments), 4):
                piece = {"index": index, "function": {"arguments": arguments[start : start + 4]}}
                yield event({"tool_calls": [piece]})
        yield event({}, "tool_calls" if turn.tool_calls else "stop")
        if turn.usage:
            yield f"data: {json.dumps({'choices': [], 'usage': turn.usage})}\n\n".encode()
        yield b"data: [DONE]\n\n"

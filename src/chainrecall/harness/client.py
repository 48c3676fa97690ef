"""The model client: one OpenAI-compatible `/chat/completions` request at a time, over httpx.

A request is a pure function of the bytes sent: the harness hands over an
already-encoded body (`encode_request`), built from messages encoded once when
they were first stored, so a message is sent again byte for byte and the
provider's prefix cache can reuse it. Works with DeepSeek, OpenAI, vLLM and
Ollama (`/v1`) endpoints; plain JSON answers by default, Server-Sent Events
with `stream=True` (tool-call deltas are assembled here). Every wait is
bounded: a read timeout per chunk and an overall deadline per request.

Transport failures become `ModelError` / `ModelTimeout` here and nowhere else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from chainrecall.config import ModelConfig
from chainrecall.errors import ChainRecallError


class ModelError(ChainRecallError):
    """The model endpoint failed or answered something that is not a chat completion."""

    status = 502
    type_slug = "model-error"
    title = "Model error"


class ModelTimeout(ModelError):
    """The model endpoint did not answer within the configured timeout."""

    status = 504
    type_slug = "model-timeout"
    title = "Model timeout"


@dataclass(frozen=True)
class Usage:
    """Token counts as the provider reported them (None where it did not)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_hit_tokens: int | None = None
    cache_miss_tokens: int | None = None


@dataclass(frozen=True)
class ChatReply:
    """The assistant's turn: text and/or tool calls (normalised), and the usage block."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)


class ChatModel(Protocol):
    """Anything that turns an encoded chat request into a reply (HTTP, or a replay policy)."""

    model: str
    stream: bool

    def complete(self, body: bytes) -> ChatReply: ...


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_request(
    model: str,
    encoded_messages: Sequence[str],
    tools: Sequence[dict[str, Any]],
    *,
    stream: bool = False,
    tool_choice: str | None = None,
) -> bytes:
    """The request body, with the stored message encodings spliced in unchanged.

    `messages` comes right after `model`, so the bytes of every earlier message
    are a prefix of the next request's messages array.
    """
    parts = [_dumps({"model": model})[:-1], ',"messages":[', ",".join(encoded_messages), "]"]
    if tools:
        parts += [',"tools":', _dumps(list(tools))]
        if tool_choice is not None:
            parts += [',"tool_choice":', _dumps(tool_choice)]
    if stream:
        parts.append(',"stream":true,"stream_options":{"include_usage":true}')
    else:
        parts.append(',"stream":false')
    parts.append("}")
    return "".join(parts).encode("utf-8")


def completions_url(base_url: str) -> str:
    """`<base>/chat/completions` (a base that already ends with it is used as given)."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions"


def parse_usage(block: Any) -> Usage:
    """Usage from an OpenAI-style block; DeepSeek's and OpenAI's cache fields both read."""
    if not isinstance(block, dict):
        return Usage()

    def number(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    prompt = number(block.get("prompt_tokens"))
    hit = number(block.get("prompt_cache_hit_tokens"))
    miss = number(block.get("prompt_cache_miss_tokens"))
    details = block.get("prompt_tokens_details")
    if hit is None and isinstance(details, dict):  # OpenAI: cached_tokens of prompt_tokens
        hit = number(details.get("cached_tokens"))
        if hit is not None and prompt is not None:
            miss = prompt - hit
    return Usage(prompt, number(block.get("completion_tokens")), hit, miss)


def normalize_tool_calls(raw: Any) -> list[dict[str, Any]]:
    """Tool calls in one shape: {id, type: function, function: {name, arguments: str}}.

    Some servers send arguments as an object, or omit the id; what was sent is
    kept as text (an empty id is filled in by the tool loop) so that nothing a
    model said is dropped and the loop can answer it.
    """
    calls: list[dict[str, Any]] = []
    if not isinstance(raw, list):
        return calls
    for item in raw:
        if not isinstance(item, dict):
            continue
        raw_function = item.get("function")
        function: dict[str, Any] = raw_function if isinstance(raw_function, dict) else {}
        name = function.get("name")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = _dumps(arguments if arguments is not None else {})
        call_id = item.get("id")
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) else "",
                "type": "function",
                "function": {"name": name if isinstance(name, str) else "", "arguments": arguments},
            }
        )
    return calls


class ChatClient:
    """An OpenAI-compatible chat-completions endpoint (DeepSeek, OpenAI, vLLM, Ollama)."""

    def __init__(self, config: ModelConfig, *, transport: httpx.BaseTransport | None = None):
        self.config = config
        self.model = config.model
        self.stream = config.stream
        self.url = completions_url(config.base_url)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        timeout = httpx.Timeout(config.timeout_s, connect=min(config.timeout_s, 15.0))
        self._http = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, body: bytes) -> ChatReply:
        deadline = time.monotonic() + self.config.timeout_s
        try:
            if self.stream:
                return self._complete_stream(body, deadline)
            response = self._http.post(self.url, content=body)
            self._check(response)
            try:
                data = response.json()
            except ValueError as exc:
                raise ModelError(
                    f"{self.url} answered non-JSON ({exc}): {response.text[:200]!r}; "
                    "is --base-url an OpenAI-compatible endpoint?"
                ) from exc
            return parse_completion(data)
        except httpx.TimeoutException as exc:
            raise ModelTimeout(
                f"{self.url} did not answer within {self.config.timeout_s:g} s; "
                "retry, or raise --timeout"
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelError(
                f"could not reach {self.url} ({type(exc).__name__}: {exc}); "
                "check --base-url and that the server is running"
            ) from exc

    def _check(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        response.read()
        hint = ""
        if response.status_code in (401, 403):
            hint = "; set CHAINRECALL_API_KEY (or the provider's key variable) to a valid key"
        elif response.status_code == 404:
            hint = "; check --base-url (e.g. https://api.deepseek.com or http://localhost:11434/v1) and --model"
        elif response.status_code == 429:
            hint = "; the provider is rate-limiting: wait and retry"
        raise ModelError(
            f"{self.url} answered HTTP {response.status_code}: {response.text[:300]!r}{hint}"
        )

    def _complete_stream(self, body: bytes, deadline: float) -> ChatReply:
        with self._http.stream("POST", self.url, content=body) as response:
            self._check(response)
            return assemble_stream(_sse_data(response.iter_lines(), deadline, self.url))


def _sse_data(lines: Iterator[str], deadline: float, url: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of an SSE stream's `data:` lines, up to `[DONE]`, within a deadline."""
    for line in lines:
        if time.monotonic() > deadline:
            raise ModelTimeout(f"{url} kept streaming past the timeout; retry or raise --timeout")
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        if not data:
            continue
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ModelError(f"{url} streamed a chunk that is not JSON: {data[:200]!r}") from exc
        if isinstance(chunk, dict):
            if "error" in chunk:
                raise ModelError(f"{url} streamed an error: {_dumps(chunk['error'])[:300]}")
            yield chunk


def assemble_stream(chunks: Iterator[dict[str, Any]]) -> ChatReply:
    """One reply from streamed deltas: text pieces joined, tool calls assembled by index."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage = Usage()
    for chunk in chunks:
        if chunk.get("usage"):
            usage = parse_usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            continue
        choice = choices[0]
        finish = choice.get("finish_reason") or finish
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for piece in delta.get("tool_calls") or []:
            if not isinstance(piece, dict):
                continue
            index = piece.get("index", len(calls))
            call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
            if piece.get("id"):
                call["id"] = piece["id"]
            function = piece.get("function") or {}
            if function.get("name"):
                call["name"] += function["name"]
            if isinstance(function.get("arguments"), str):
                call["arguments"] += function["arguments"]
    tool_calls = normalize_tool_calls(
        [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    )
    content = "".join(text) if text else None
    return ChatReply(content, tool_calls, finish, usage)


def parse_completion(data: Any) -> ChatReply:
    """A non-streamed chat completion; anything else is a clear ModelError."""
    if isinstance(data, dict) and "error" in data:
        raise ModelError(f"the model endpoint answered an error: {_dumps(data['error'])[:300]}")
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelError(
            f"the answer has no choices[0].message ({_dumps(data)[:200]}); "
            "is --base-url an OpenAI-compatible chat-completions endpoint?"
        ) from exc
    content = message.get("content") if isinstance(message, dict) else None
    return ChatReply(
        content if isinstance(content, str) else None,
        normalize_tool_calls(message.get("tool_calls") if isinstance(message, dict) else None),
        choice.get("finish_reason") if isinstance(choice, dict) else None,
        parse_usage(data.get("usage")),
    )

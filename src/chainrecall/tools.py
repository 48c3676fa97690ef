"""Recall tools: the six calls an agent makes to walk its memory, answered as lean JSON.

The same tools, with the same names and arguments, are offered to a model as
function calls by the harness and as MCP tools by the MCP server:
`search`, `get_thread`, `get_worker`, `get_trigger`, `get_trigger_payload`,
`list_thread_events`. Results are read by a model on every turn, so they are
short: IDs, one-line summaries, and pointers instead of large fields (a long
payload or report body is cut at `inline_limit` bytes and the result says where
the rest is, e.g. `GET /triggers/trg_x/payload (41 KB, truncated)`).

`RecallTools.call` never raises for anything a model can get wrong (an unknown
tool, arguments that are not JSON, an unknown ID): it answers an error result
that names the problem, so the model can correct itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chainrecall.errors import ChainRecallError, Gone, InvalidInput, NotFound
from chainrecall.model import Trigger, Worker
from chainrecall.service import Memory

TOOL_NAMES = (
    "search",
    "get_thread",
    "get_worker",
    "get_trigger",
    "get_trigger_payload",
    "list_thread_events",
)

DEFAULT_INLINE_LIMIT = 2048
DEFAULT_PAGE_SIZE = 20
DEFAULT_SEARCH_HITS = 8


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def clip_utf8(text: str, limit: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding fits in `limit` bytes."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class ToolResult:
    """One tool's answer: `ok` False for an error result a model should read and act on."""

    ok: bool
    data: dict[str, Any]

    def to_text(self) -> str:
        return json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_ID = {"type": "string", "description": "an ID exactly as seen (trg_..., thr_..., wkr_...)"}

TOOL_SPECS: list[dict[str, Any]] = [
    _spec(
        "search",
        "Find entry points in memory: trigger, thread and worker IDs with one-line summaries, "
        "best match first. Then follow IDs with the get_* tools.",
        {"query": {"type": "string", "description": "words to look for"}},
        ["query"],
    ),
    _spec(
        "get_thread",
        "A thread (PR, chat topic, e-mail thread): title, summary, status, event_count and "
        "owner_workers (wkr_ ids).",
        {"id": _ID},
        ["id"],
    ),
    _spec(
        "get_worker",
        "A worker (agent session): its task, status and latest report with refs (trg_ ids).",
        {"id": _ID},
        ["id"],
    ),
    _spec(
        "get_trigger",
        "One inbound event: source, kind, summary, thread, neighbours, payload size, and "
        "cited_by: the triggers and workers that link back to it.",
        {"id": _ID},
        ["id"],
    ),
    _spec(
        "get_trigger_payload",
        "The original payload of a trigger, a byte range at a time (default: the start).",
        {
            "id": _ID,
            "offset": {"type": "integer", "minimum": 0, "description": "first byte (default 0)"},
            "length": {"type": "integer", "minimum": 1, "description": "bytes to read"},
        },
        ["id"],
    ),
    _spec(
        "list_thread_events",
        "A page of a thread's events, oldest first; pass next_cursor to read on.",
        {
            "thread_id": _ID,
            "cursor": {"type": "string", "description": "next_cursor from the previous page"},
        },
        ["thread_id"],
    ),
]


class RecallTools:
    """The recall tools over one `Memory` (embedded) or anything with the same methods."""

    def __init__(
        self,
        memory: Memory,
        *,
        inline_limit: int = DEFAULT_INLINE_LIMIT,
        page_size: int = DEFAULT_PAGE_SIZE,
        search_hits: int = DEFAULT_SEARCH_HITS,
    ) -> None:
        self.memory = memory
        self.inline_limit = inline_limit
        self.page_size = page_size
        self.search_hits = search_hits

    @staticmethod
    def specs() -> list[dict[str, Any]]:
        """OpenAI-style function specs for the six tools."""
        return TOOL_SPECS

    def call(self, name: str, arguments: dict[str, Any] | str | None) -> ToolResult:
        """Run one tool; every mistake a model can make comes back as an error result."""
        if name not in TOOL_NAMES:
            return _error(
                "unknown_tool", f"there is no tool {name!r}; the tools are {', '.join(TOOL_NAMES)}"
            )
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as exc:
                return _error("invalid_arguments", f"arguments of {name} are not JSON: {exc}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _error("invalid_arguments", f"arguments of {name} must be a JSON object")
        try:
            data = getattr(self, name)(**arguments)
        except TypeError as exc:
            return _error("invalid_arguments", f"bad arguments for {name}: {exc}")
        except NotFound as exc:
            return _error("not_found", exc.detail, id=exc.object_id)
        except Gone as exc:
            return _error("gone", exc.detail, id=exc.object_id)
        except ChainRecallError as exc:
            return _error("invalid_argument", exc.detail)
        return ToolResult(True, data)

    # -- the tools -----------------------------------------------------------
    def search(self, query: str) -> dict[str, Any]:
        results = self.memory.search(str(query), self.search_hits)
        return {
            "query": query,
            "hits": [
                {"id": h.id, "thread_id": h.thread_id, "summary": h.summary} for h in results.items
            ],
        }

    def get_thread(self, id: str) -> dict[str, Any]:
        thread = self.memory.get_thread(_as_id(id))
        return {
            "id": thread.id,
            "key": thread.key,
            "title": thread.title,
            "summary": thread.summary,
            "status": thread.status,
            "event_count": thread.event_count,
            "owner_workers": thread.owner_workers,
            "first_activity_at": thread.first_activity_at,
            "last_activity_at": thread.last_activity_at,
        }

    def get_worker(self, id: str) -> dict[str, Any]:
        return self.lean_worker(self.memory.get_worker(_as_id(id)))

    def lean_worker(self, worker: Worker) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": worker.id,
            "thread_ids": worker.thread_ids,
            "task": clip_utf8(worker.task, self.inline_limit),
            "status": worker.status,
            "started_at": worker.started_at,
        }
        if worker.report is not None:
            report = worker.report
            body = clip_utf8(report.body, self.inline_limit)
            out["report"] = {
                "summary": report.summary,
                "body": body,
                "refs": report.refs,
                "status": report.status,
                "at": report.at,
            }
            size = len(report.body.encode("utf-8"))
            if len(body.encode("utf-8")) < size:
                out["report"]["body_more"] = (
                    f"GET /workers/{worker.id} ({human_size(size)}, truncated)"
                )
        if worker.earlier_reports:
            out["earlier_reports"] = len(worker.earlier_reports)
        return out

    def get_trigger(self, id: str) -> dict[str, Any]:
        out = self.lean_trigger(self.memory.get_trigger(_as_id(id)))
        cited_by = self.memory.cited_by(out["id"])
        if cited_by:  # links back: replies, citing triggers, workers whose reports cite it
            out["cited_by"] = cited_by
        return out

    def lean_trigger(self, trigger: Trigger) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": trigger.id,
            "thread_id": trigger.thread_id,
            "source": trigger.source,
            "kind": trigger.kind,
            "summary": trigger.summary,
            "occurred_at": trigger.occurred_at,
        }
        if trigger.author:
            out["author"] = trigger.author
        neighbours = {k: v for k, v in trigger.neighbours.model_dump().items() if v}
        if neighbours:
            out["neighbours"] = neighbours
        if trigger.in_reply_to:
            out["in_reply_to"] = trigger.in_reply_to
        if trigger.refs:
            out["refs"] = trigger.refs
        out["payload"] = (
            f"get_trigger_payload({trigger.id}): {human_size(trigger.payload.bytes)} "
            f"{trigger.payload.content_type.split(';')[0]}"
        )
        return out

    def get_trigger_payload(
        self,
        id: str,
        offset: int = 0,
        length: int | None = None,
    ) -> dict[str, Any]:
        if not isinstance(offset, int) or offset < 0:
            raise InvalidInput("offset must be a non-negative integer")
        if length is not None and (not isinstance(length, int) or length < 1):
            raise InvalidInput("length must be a positive integer")
        payload = self.memory.get_payload(_as_id(id))
        size = len(payload.data)
        length = min(length or self.inline_limit, self.inline_limit)
        chunk = payload.data[offset : offset + length]
        out: dict[str, Any] = {
            "id": id,
            "content_type": payload.content_type,
            "bytes": size,
            "offset": offset,
            "text": chunk.decode("utf-8", errors="ignore"),
        }
        end = offset + len(chunk)
        if end < size:
            out["more"] = (
                f"GET /triggers/{id}/payload ({human_size(size)}, truncated); "
                f"get_trigger_payload(id={id}, offset={end}) reads on"
            )
        return out

    def list_thread_events(self, thread_id: str, cursor: str | None = None) -> dict[str, Any]:
        page = self.memory.list_events(_as_id(thread_id), cursor, self.page_size)
        return {
            "thread_id": thread_id,
            "items": [
                {"seq": e.seq, "id": e.id, "kind": e.kind, "at": e.at, "summary": e.summary}
                for e in page.items
            ],
            "next_cursor": page.next_cursor,
            "has_more": page.has_more,
        }


def _as_id(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"an id must be a string such as trg_8f21ab3c; got {value!r}")
    return value.strip()


def _error(code: str, message: str, **extra: Any) -> ToolResult:
    return ToolResult(False, {"error": code, "message": message, **extra})

"""What prompts cost: the measurements behind `chainrecall cost`.

Three reports. The resend table is arithmetic (N equal turns cost N(N+1)/2).
The text profile measures bytes per character of a text, and its tokens with
each installed tokenizer. The stream report replays a recorded stream of
triggers (a chainrecall database, or a JSONL file of `POST /triggers` bodies)
into a fresh scratch store, one trigger at a time, and measures per turn what
each strategy would send: the turn's message for keep-everything, last-k and
rolling summary, and the context `build_context` assembles for Chain of Recall
(as it would have been at that moment, since the scratch store holds only the
turns so far). Tables are Rich renderables; the chart needs matplotlib (the
`bench` extra).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.table import Table

from chainrecall.api.schemas import TriggerIn
from chainrecall.context import build_context
from chainrecall.context.prefix import shared_prefix_ratio
from chainrecall.context.strategies import (
    StrategyRun,
    compare_strategies,
    resend_table,
    text_profile,
)
from chainrecall.context.tokens import TokenCounter, available_tokenizers, load_tokenizer
from chainrecall.errors import InvalidInput
from chainrecall.model import Payload, Trigger
from chainrecall.service import Memory
from chainrecall.store import open_store

DEFAULT_BUDGET_BYTES = 4096
DEFAULT_WINDOW = 5
DEFAULT_SUMMARY_BYTES = 2048


# -- the resend table and the text profile ----------------------------------------------


def resend_renderable(turns: Sequence[int]) -> Table:
    table = Table(title="Resending the history: N equal turns send N(N+1)/2 units")
    for name in ("turns", "history at the last turn", "total sent", "multiple"):
        table.add_column(name, justify="right")
    for row in resend_table(turns):
        table.add_row(str(row.turns), str(row.history), str(row.total), row.multiple_text)
    return table


@dataclass(frozen=True)
class TokenCount:
    tokenizer: str
    tokens: int


def count_with(text: str, tokenizers: Iterable[str]) -> list[TokenCount]:
    return [TokenCount(name, load_tokenizer(name).count(text)) for name in tokenizers]


def text_renderable(label: str, text: str, tokenizers: Sequence[str]) -> Table:
    profile = text_profile(text)
    table = Table(title=f"Bytes per character: {label}")
    for name in ("characters", "UTF-8 bytes", "bytes/char"):
        table.add_column(name, justify="right")
    counts = count_with(text, tokenizers)
    for count in counts:
        table.add_column(f"tokens ({count.tokenizer})", justify="right")
    table.add_row(
        str(profile.chars), str(profile.bytes), f"{profile.bytes_per_char:.3f}",
        *[str(count.tokens) for count in counts],
    )  # fmt: skip
    return table


# -- streams ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamItem:
    """One trigger of a stream to replay: `POST /triggers` fields, and a local name."""

    fields: dict[str, Any]
    name: str | None = None  # lets later items cite it in in_reply_to / refs


def load_jsonl(path: Path) -> list[StreamItem]:
    """Triggers from a JSONL file: one `POST /triggers` body a line, with an optional "id"
    naming it for later lines' in_reply_to and refs. Blank lines are skipped."""
    items = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                body = json.loads(line)
            except ValueError as exc:
                raise InvalidInput(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(body, dict):
                raise InvalidInput(f"{path}:{number}: each line must be a JSON object")
            name = body.pop("id", None)
            try:
                checked = TriggerIn.model_validate(body)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
                )
                raise InvalidInput(f"{path}:{number}: {problems}") from None
            items.append(StreamItem(checked.model_dump(), str(name) if name else None))
    if not items:
        raise InvalidInput(f"{path} holds no triggers")
    return items


def load_database(db: str) -> list[StreamItem]:
    """Every trigger of a database's default namespace, oldest first, as a stream."""
    memory = Memory(open_store(db))
    try:
        found: list[tuple[tuple[str, str, int], Trigger, Payload, str, str, str]] = []
        for thread in memory.store.list_threads(memory.namespace, 1_000_000):
            for event in memory.walk_events(thread.id):
                if event.kind != "trigger" or event.deleted:
                    continue
                trigger = memory.get_trigger(event.id)
                order = (trigger.received_at, thread.created_at, trigger.seq)
                found.append((order, trigger, memory.get_payload(trigger.id), thread.key,
                              thread.title, thread.status))  # fmt: skip
    finally:
        memory.close()
    found.sort(key=lambda row: row[0])
    items = []
    for _, trigger, payload, key, title, status in found:
        fields: dict[str, Any] = {
            "source": trigger.source, "kind": trigger.kind, "thread_key": key,
            "summary": trigger.summary, "occurred_at": trigger.occurred_at,
            "author": trigger.author, "in_reply_to": trigger.in_reply_to,
            "refs": list(trigger.refs), "thread_title": title, "thread_status": status,
            "raw": payload.data, "content_type": payload.content_type,
        }  # fmt: skip
        items.append(StreamItem(fields, trigger.id))
    if not items:
        raise InvalidInput(f"{db} holds no triggers")
    return items


def turn_message(trigger: Trigger, payload: Payload) -> str:
    """A turn as the whole-history strategies send it: a header line and the payload."""
    return f"{trigger.source}/{trigger.kind} {trigger.summary}\n{payload.text()}"


def summary_line(trigger: Trigger) -> str:
    """A turn as a rolling summary keeps it: its one-line summary."""
    return f"- {trigger.summary}\n"


@dataclass(frozen=True)
class Turn:
    trigger_id: str
    message_bytes: int
    summary_bytes: int
    context_bytes: int
    prefix_ratio: float | None  # shared prefix with the previous turn's context
    message_tokens: int | None = None
    summary_tokens: int | None = None
    context_tokens: int | None = None


@dataclass(frozen=True)
class StreamReport:
    turns: list[Turn]
    bytes: list[StrategyRun]
    tokens: list[StrategyRun] | None
    tokenizer: str | None
    budget_bytes: int
    window: int
    summary_bytes: int
    spilled_payload_bytes: int  # payload bytes Chain of Recall left behind pointers


def replay(
    items: Sequence[StreamItem],
    *,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    window: int = DEFAULT_WINDOW,
    summary_bytes: int = DEFAULT_SUMMARY_BYTES,
    tokenizer: str | TokenCounter | None = None,
    index_limit: int = 50,
) -> StreamReport:
    """Replay `items` into a scratch store and measure what each strategy sends per turn."""
    counter = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    turns: list[Turn] = []
    spilled = 0
    with tempfile.TemporaryDirectory(prefix="chainrecall-cost-") as scratch:
        memory = Memory(open_store(os.path.join(scratch, "replay.db")))
        try:
            names: dict[str, str] = {}
            previous: str | None = None
            for number, item in enumerate(items, 1):
                fields = dict(item.fields)
                if fields.get("in_reply_to"):
                    fields["in_reply_to"] = _local(names, fields["in_reply_to"], number)
                fields["refs"] = [_local(names, ref, number) for ref in fields.get("refs") or []]
                trigger = memory.record_trigger(**fields).trigger
                if item.name:
                    names[item.name] = trigger.id
                payload = memory.get_payload(trigger.id)
                message, line = turn_message(trigger, payload), summary_line(trigger)
                context = build_context(
                    memory, trigger_id=trigger.id, budget_bytes=budget_bytes,
                    index_limit=index_limit,
                )  # fmt: skip
                if any(s.pointer.endswith(f"{trigger.id}/payload") for s in context.spilled):
                    spilled += trigger.payload.bytes
                turns.append(Turn(
                    trigger_id=trigger.id,
                    message_bytes=len(message.encode("utf-8")),
                    summary_bytes=len(line.encode("utf-8")),
                    context_bytes=context.bytes,
                    prefix_ratio=None if previous is None
                    else shared_prefix_ratio(previous, context.text),
                    message_tokens=counter.count(message) if counter else None,
                    summary_tokens=counter.count(line) if counter else None,
                    context_tokens=counter.count(context.text) if counter else None,
                ))  # fmt: skip
                previous = context.text
        finally:
            memory.close()
    by_bytes = compare_strategies(
        [t.message_bytes for t in turns], [t.summary_bytes for t in turns],
        [t.context_bytes for t in turns], window=window, summary_cap=summary_bytes,
    )  # fmt: skip
    by_tokens = None
    if counter is not None:
        # The summary cap is in bytes; in tokens it is the same cut, counted in tokens.
        token_cap = _cap_in_tokens(turns, summary_bytes)
        by_tokens = compare_strategies(
            [t.message_tokens or 0 for t in turns], [t.summary_tokens or 0 for t in turns],
            [t.context_tokens or 0 for t in turns], window=window, summary_cap=token_cap,
        )  # fmt: skip
    return StreamReport(
        turns=turns, bytes=by_bytes, tokens=by_tokens,
        tokenizer=counter.name if counter else None, budget_bytes=budget_bytes,
        window=window, summary_bytes=summary_bytes, spilled_payload_bytes=spilled,
    )  # fmt: skip


def _local(names: dict[str, str], name: str, number: int) -> str:
    if name not in names:
        raise InvalidInput(
            f"trigger {number} of the stream cites {name!r}, which no earlier trigger of "
            'the stream is named (give each cited line an "id")'
        )
    return names[name]


def _cap_in_tokens(turns: Sequence[Turn], cap_bytes: int) -> int:
    """The token size of a summary capped at `cap_bytes`: the summary lines' own ratio."""
    total_bytes = sum(t.summary_bytes for t in turns)
    total_tokens = sum(t.summary_tokens or 0 for t in turns)
    if total_bytes == 0:
        return 0
    return round(cap_bytes * total_tokens / total_bytes)


def stream_renderable(report: StreamReport, max_rows: int = 24) -> Table:
    table = Table(
        title=f"Bytes sent per turn ({len(report.turns)} turns; Chain of Recall budget "
        f"{report.budget_bytes} B; rolling summary capped at {report.summary_bytes} B)"
    )
    table.add_column("turn", justify="right")
    table.add_column("trigger")
    for run in report.bytes:
        table.add_column(run.name, justify="right")
    table.add_column("prefix reused", justify="right")
    count = len(report.turns)
    shown = list(range(count))
    if count > max_rows:
        half = max_rows // 2
        shown = [*range(half), -1, *range(count - half, count)]
    for i in shown:
        if i < 0:
            table.add_row("…", "", *["" for _ in report.bytes], "")
            continue
        turn = report.turns[i]
        ratio = "" if turn.prefix_ratio is None else f"{turn.prefix_ratio:.0%}"
        table.add_row(str(i + 1), turn.trigger_id, *[str(run.per_turn[i]) for run in report.bytes],
                      ratio)  # fmt: skip
    table.add_section()
    table.add_row("total", "bytes", *[str(run.total) for run in report.bytes], "")
    if report.tokens is not None:
        table.add_row("total", f"tokens ({report.tokenizer})",
                      *[str(run.total) for run in report.tokens], "")  # fmt: skip
    return table


def write_chart(report: StreamReport, path: Path) -> None:
    """A PNG: bytes per turn and cumulative bytes for each strategy (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = list(range(1, len(report.turns) + 1))
    figure, (per_turn, cumulative) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in report.bytes:
        per_turn.plot(turns, run.per_turn, label=run.name)
        running, sums = 0, []
        for value in run.per_turn:
            running += value
            sums.append(running)
        cumulative.plot(turns, sums, label=run.name)
    per_turn.set_title("bytes sent per turn")
    cumulative.set_title("bytes sent in total")
    for axes in (per_turn, cumulative):
        axes.set_xlabel("turn")
        axes.set_ylabel("bytes")
        axes.grid(alpha=0.3)
    per_turn.legend()
    figure.suptitle(f"Context strategies over {len(turns)} recorded triggers")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def chart_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def tokenizers_for(name: str | None) -> list[str]:
    """The tokenizers to count with: the one named, else every installed one."""
    return [name] if name else available_tokenizers()

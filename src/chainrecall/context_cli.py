"""The `chainrecall context` and `chainrecall cost` commands: thin shells.

`context` prints what `GET /context` answers, from a database file, without
a server. `cost` prints the resend table, the bytes per character of a text,
and what each context strategy sends over a recorded stream (with a PNG
chart). The work is in `chainrecall.context` and `chainrecall.cost`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from chainrecall.errors import ChainRecallError, InvalidInput


def _fail(exc: ChainRecallError) -> typer.Exit:
    typer.echo(f"error: {exc.detail}", err=True)
    return typer.Exit(2 if isinstance(exc, InvalidInput) else 1)


def _require_database(db: str) -> None:
    if "://" not in db and not os.path.exists(db):
        typer.echo(f"error: no database at {db}; give the --db a server was run with", err=True)
        raise typer.Exit(2)


def context_command(
    db: Annotated[
        str, typer.Option("--db", envvar="CHAINRECALL_DB", help="SQLite file or postgresql:// URL")
    ],
    budget_bytes: Annotated[int, typer.Option("--budget-bytes", help="most UTF-8 bytes to use")],
    trigger: Annotated[str | None, typer.Option("--trigger", help="the trigger at hand")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="the thread at hand")] = None,
    budget_tokens: Annotated[
        int | None, typer.Option("--budget-tokens", help="most tokens (needs --tokenizer)")
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option("--tokenizer", help="deepseek, o200k or cl100k")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="print GET /context's JSON answer instead of the text")
    ] = False,
    fmt: Annotated[str, typer.Option("--format", help="render the context as text or json")] = (
        "text"
    ),
    index_limit: Annotated[int, typer.Option(help="threads in the index (0..500)")] = 50,
    events: Annotated[int, typer.Option(help="recent events of the thread (0..200)")] = 12,
) -> None:
    """Print the prompt context for a trigger (or thread) within a byte/token budget."""
    from chainrecall.context import build_context
    from chainrecall.context.tokens import check_tokenizer_name
    from chainrecall.service import Memory
    from chainrecall.store import open_store

    _require_database(db)
    memory = Memory(open_store(db))
    try:
        if fmt not in ("text", "json"):
            raise InvalidInput(f"--format must be text or json; got {fmt[:20]!r}")
        context = build_context(
            memory, trigger_id=trigger, thread_id=thread, budget_bytes=budget_bytes,
            budget_tokens=budget_tokens,
            tokenizer=check_tokenizer_name(tokenizer) if tokenizer else None,
            index_limit=index_limit, events_limit=events,
            fmt="json" if fmt == "json" else "text",
        )  # fmt: skip
    except ChainRecallError as exc:
        raise _fail(exc) from None
    finally:
        memory.close()
    if as_json:
        typer.echo(json.dumps(context.to_json(), ensure_ascii=False, indent=2))
    else:
        typer.echo(context.text)


def cost_command(
    turns: Annotated[
        str | None,
        typer.Option("--turns", help="resend table for these turn counts, e.g. 3,6,10,20"),
    ] = None,
    text: Annotated[
        list[str] | None, typer.Option("--text", help="a text to measure (repeatable)")
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", help="a UTF-8 file to measure")] = None,
    db: Annotated[str | None, typer.Option("--db", help="replay this database's triggers")] = None,
    stream: Annotated[
        Path | None, typer.Option("--stream", help="replay a JSONL file of POST /triggers bodies")
    ] = None,
    budget_bytes: Annotated[int, typer.Option(help="Chain of Recall context budget")] = 4096,
    window: Annotated[int, typer.Option(min=1, help="turns kept by the last-k window")] = 5,
    summary_bytes: Annotated[int, typer.Option(min=0, help="cap of the rolling summary")] = 2048,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer",
            help="count tokens with deepseek, o200k or cl100k "
            "(default: every installed one for texts, none for streams)",
        ),
    ] = None,
    chart: Annotated[Path, typer.Option("--chart", help="PNG chart of a stream replay")] = Path(
        "chainrecall-cost.png"
    ),
    no_chart: Annotated[bool, typer.Option("--no-chart", help="skip the PNG chart")] = False,
) -> None:
    """Measure what prompts cost: resending history, bytes per character, strategies."""
    from rich.console import Console

    from chainrecall import cost
    from chainrecall.context.strategies import SEED_TURNS
    from chainrecall.context.tokens import INSTALL_HINT, check_tokenizer_name

    console = Console()
    try:
        if tokenizer:
            check_tokenizer_name(tokenizer)
        measured = False
        if text or file is not None:
            measured = True
            names = cost.tokenizers_for(tokenizer)
            for number, sample in enumerate(text or [], 1):
                console.print(cost.text_renderable(f"--text {number}", sample, names))
            if file is not None:
                try:
                    content = file.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise InvalidInput(f"cannot read {file} as UTF-8 text: {exc}") from None
                console.print(cost.text_renderable(str(file), content, names))
            if not names:
                console.print(f"tokens not counted: no tokenizer installed ({INSTALL_HINT})")
        if db is not None or stream is not None:
            measured = True
            if db is not None and stream is not None:
                raise InvalidInput("give --db or --stream, not both")
            if db is not None:
                _require_database(db)
                items = cost.load_database(db)
            else:
                assert stream is not None
                if not stream.exists():
                    raise InvalidInput(f"no stream file at {stream}")
                items = cost.load_jsonl(stream)
            report = cost.replay(
                items, budget_bytes=budget_bytes, window=window, summary_bytes=summary_bytes,
                tokenizer=tokenizer,
            )  # fmt: skip
            console.print(cost.stream_renderable(report))
            if report.spilled_payload_bytes:
                console.print(
                    f"Chain of Recall left {report.spilled_payload_bytes} payload bytes behind "
                    "pointers; an agent pays for them only when it fetches one."
                )
            if not no_chart:
                if cost.chart_available():
                    cost.write_chart(report, chart)
                    console.print(f"chart: {chart}")
                else:
                    console.print(
                        "chart skipped: matplotlib is not installed (pip install "
                        "'chainrecall[bench]')"
                    )
        if turns is not None or not measured:
            console.print(cost.resend_renderable(_turns(turns) if turns else SEED_TURNS))
    except ChainRecallError as exc:
        raise _fail(exc) from None


def _turns(raw: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in raw.split(",") if part.strip())
    except ValueError:
        values = ()
    if not values or any(v < 1 for v in values):
        raise InvalidInput(f"--turns must be positive integers separated by commas; got {raw!r}")
    return values

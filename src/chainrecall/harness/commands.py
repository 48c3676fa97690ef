"""The harness's commands: `chainrecall demo`, `ask`, `handle` and `log`.

Thin shells: the work is in `chainrecall.demo`, `harness.recall` and the store;
this module parses flags, opens the memory and prints with Rich. Hops are
printed the same way whether the planner or a model made them: the call, the
bytes read, and what it showed.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chainrecall.config import model_config_from_env
from chainrecall.errors import ChainRecallError
from chainrecall.harness.client import ChatClient, ModelError
from chainrecall.harness.conversation import Conversation
from chainrecall.harness.loop import DEFAULT_MAX_HOPS, Hop
from chainrecall.harness.recall import ask_model, plan_recall, start_ask
from chainrecall.history import AgentMessage, AgentSession, ModelRequest
from chainrecall.service import Memory
from chainrecall.store import open_store
from chainrecall.tools import human_size

DbOption = Annotated[
    str,
    typer.Option(
        "--db", envvar="CHAINRECALL_DB",
        help="SQLite file (created when missing) or postgresql:// URL",
    ),
]  # fmt: skip
NamespaceOption = Annotated[str, typer.Option(help="memory namespace")]


def _console() -> Console:
    # soft_wrap: a hop's line stays one line when piped, so it can be grepped
    return Console(soft_wrap=True, highlight=False)


def print_hop(console: Console, label: str, call: str, size: int, evidence: list[str]) -> None:
    console.print(f"[bold cyan]{label:>6}[/]  {escape(call)}  [dim]{human_size(size)} read[/]")
    for line in evidence:
        console.print(f"        [green]->[/] {escape(line)}")


def demo(
    db: Annotated[
        str,
        typer.Option("--db", envvar="CHAINRECALL_DB", help="SQLite file or postgresql:// URL"),
    ] = "chainrecall.db",
    namespace: NamespaceOption = "default",
) -> None:
    """Load a sample week of a team (chat, GitHub, CI) into DB and recall from it, offline."""
    from chainrecall.demo import QUESTION, load_week

    console = _console()
    memory = Memory(open_store(db), namespace)
    try:
        loaded = load_week(memory)
        console.print(
            f"Loaded a team's week into {escape(db)}: {loaded.triggers} triggers "
            f"({loaded.triggers_created} new) on {loaded.threads} threads, "
            f"{loaded.workers} workers ({loaded.workers_created} new), "
            f"{loaded.reports_created} new reports."
        )
        console.print(f"\n[bold]Q: {escape(QUESTION)}[/]\n")
        result = plan_recall(
            memory,
            QUESTION,
            on_step=lambda s: print_hop(console, s.label, s.call, s.bytes, s.evidence),
        )
        console.print("\n[bold]Answer[/] (no model; every fact below was read by ID):")
        console.print(escape(result.answer or "nothing in memory answers this"))
        console.print(
            f"\nNext: [bold]chainrecall serve --db {escape(db)}[/] serves this memory over HTTP; "
            f'[bold]chainrecall ask "..." --db {escape(db)}[/] asks your own question.'
        )
    finally:
        memory.close()


def ask(
    question: Annotated[str, typer.Argument(help="the question to answer from memory")] = "",
    db: DbOption = "chainrecall.db",
    model: Annotated[str | None, typer.Option(help="chat model, e.g. deepseek-chat")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible API, e.g. https://api.deepseek.com")
    ] = None,
    stream: Annotated[bool, typer.Option(help="stream the answer (SSE)")] = False,
    timeout: Annotated[float | None, typer.Option(help="seconds to wait for the model")] = None,
    max_hops: Annotated[int, typer.Option(min=1, help="most tool calls")] = DEFAULT_MAX_HOPS,
    resume: Annotated[
        str | None, typer.Option(help="resume an interrupted ask session (ses_...)")
    ] = None,
    namespace: NamespaceOption = "default",
) -> None:
    """Answer QUESTION from memory by hops; with --model and --base-url a model drives the tools."""
    console = _console()
    try:
        config = model_config_from_env(base_url, model, timeout_s=timeout, stream=stream)
    except ChainRecallError as exc:
        console.print(f"[red]error:[/] {escape(exc.detail)}")
        raise typer.Exit(2) from exc
    if not question and resume is None:
        console.print(
            "[red]error:[/] give a QUESTION, or --resume ses_... to finish an earlier one"
        )
        raise typer.Exit(2)
    memory = Memory(open_store(db), namespace)
    try:
        if config is None:
            if resume is not None:
                console.print("[red]error:[/] --resume needs --model and --base-url")
                raise typer.Exit(2)
            result = plan_recall(
                memory, question,
                on_step=lambda s: print_hop(console, s.label, s.call, s.bytes, s.evidence),
            )  # fmt: skip
            console.print("\n[bold]Answer[/] (recall planner, no model):")
            console.print(escape(result.answer or "nothing in memory answers this"))
            return
        if resume is not None:
            conversation = Conversation.resume(memory.store, namespace, resume)
        else:
            conversation = start_ask(memory, config.model, question)
        console.print(f"[dim]session {conversation.id} · {escape(config.model)}[/]")
        sys.stdout.flush()

        def on_hop(hop: Hop) -> None:
            print_hop(
                console, f"hop {hop.n}", f"{hop.tool}({hop.arguments})", hop.bytes, [hop.evidence]
            )

        with ChatClient(config) as client:
            try:
                outcome = ask_model(memory, client, conversation, max_hops=max_hops, on_hop=on_hop)
            except ModelError as exc:
                console.print(f"[red]model error:[/] {escape(exc.detail)}")
                console.print(
                    f"The question is recorded in session {conversation.id}; finish it with "
                    f"chainrecall ask --resume {conversation.id} --db {escape(db)} --model ... --base-url ..."
                )
                raise typer.Exit(1) from exc
        console.print("\n[bold]Answer[/]:")
        console.print(escape(outcome.answer or "(the model gave no answer)"))
    except ChainRecallError as exc:
        console.print(f"[red]error:[/] {escape(exc.detail)}")
        raise typer.Exit(1) from exc
    finally:
        memory.close()


def handle(
    trigger_ids: Annotated[list[str], typer.Argument(help="trg_ ids to dispatch, in order")],
    db: DbOption,
    model: Annotated[str | None, typer.Option(help="chat model, e.g. deepseek-chat")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible API, e.g. https://api.deepseek.com")
    ] = None,
    pass_through: Annotated[
        bool,
        typer.Option(
            "--pass-through/--no-pass-through",
            help="send a trigger on a thread a live worker owns straight to that worker",
        ),
    ] = True,
    timeout: Annotated[float | None, typer.Option(help="seconds to wait for the model")] = None,
    max_hops: Annotated[int, typer.Option(min=1, help="most tool calls a turn")] = DEFAULT_MAX_HOPS,
    namespace: NamespaceOption = "default",
) -> None:
    """Run stored triggers through the Router and Workers (the agent loop), one by one."""
    from chainrecall.harness.agents import Harness

    console = _console()
    try:
        config = model_config_from_env(base_url, model, timeout_s=timeout)
    except ChainRecallError as exc:
        console.print(f"[red]error:[/] {escape(exc.detail)}")
        raise typer.Exit(2) from exc
    if config is None:
        console.print("[red]error:[/] handle needs a model: give --model and --base-url")
        raise typer.Exit(2)
    memory = Memory(open_store(db), namespace)
    try:
        with ChatClient(config) as client:
            harness = Harness(memory, client, pass_through=pass_through, max_hops=max_hops)
            for trigger_id in trigger_ids:
                try:
                    dispatch = harness.handle(trigger_id)
                except ModelError as exc:
                    console.print(
                        f"[red]model error on {escape(trigger_id)}:[/] {escape(exc.detail)}"
                    )
                    raise typer.Exit(1) from exc
                route = (
                    f"worker {dispatch.worker_id} (pass-through)"
                    if dispatch.handled_by == "worker"
                    else f"router: {dispatch.action or 'no decision'}"
                    + (f" -> {dispatch.worker_id}" if dispatch.worker_id else "")
                )
                console.print(
                    f"{dispatch.trigger_id} on {dispatch.thread_id}: {escape(route)} "
                    f"[dim]({dispatch.router_requests} router, {dispatch.worker_requests} worker "
                    "requests)[/]"
                )
                if dispatch.answer:
                    console.print(f"  answer: {escape(dispatch.answer)}")
    except ChainRecallError as exc:
        console.print(f"[red]error:[/] {escape(exc.detail)}")
        raise typer.Exit(1) from exc
    finally:
        memory.close()


def log(
    db: DbOption = "chainrecall.db",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of text")] = False,
    session: Annotated[str | None, typer.Option(help="only this session (ses_...)")] = None,
    limit: Annotated[int, typer.Option(min=1, help="most recent sessions to show")] = 20,
    namespace: NamespaceOption = "default",
) -> None:
    """Show the agent's sessions, messages and model requests as a readable prompt log."""
    console = _console()
    store = open_store(db)
    try:
        try:
            sessions = (
                [store.get_session(namespace, session)]
                if session
                else store.list_sessions(namespace, limit=limit)
            )
        except ChainRecallError as exc:
            console.print(f"[red]error:[/] {escape(exc.detail)}")
            raise typer.Exit(1) from exc
        entries = [
            (s, store.list_messages(namespace, s.id), store.list_model_requests(namespace, s.id))
            for s in reversed(sessions)
        ]
        if as_json:
            out = {
                "sessions": [
                    {
                        **s.to_json(),
                        "messages": [m.to_json() for m in messages],
                        "requests": [r.to_json() for r in requests],
                    }
                    for s, messages, requests in entries
                ]
            }
            sys.stdout.write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
            return
        if not entries:
            console.print(
                "no sessions yet: `chainrecall ask --model ...` or the harness writes them"
            )
        for s, messages, requests in entries:
            _print_session(console, s, messages, requests)
    finally:
        store.close()


def _print_session(
    console: Console,
    session: AgentSession,
    messages: list[AgentMessage],
    requests: list[ModelRequest],
) -> None:
    owner = f" {session.worker_id} on {session.thread_id}" if session.worker_id else ""
    console.rule(
        f"[bold]{session.id}[/] {session.kind}{owner} · {escape(session.model)} · "
        f"{session.status} · {session.created_at}"
    )
    for message in messages:
        text = message.content or ""
        if message.tool_calls:
            calls = "; ".join(
                f"{c['function']['name']}({c['function']['arguments']})" for c in message.tool_calls
            )
            text = (text + " " if text else "") + f"-> {calls}"
        if message.role == "tool":
            text = f"[{message.name}] {text}"
        flat = " ".join(text.split())
        if len(flat) > 300:
            flat = flat[:299] + "…"
        console.print(
            f"  #{message.position:<3} [bold]{message.role:<9}[/] [dim]{human_size(message.bytes):>7}[/]  "
            f"{escape(flat)}"
        )
    if not requests:
        console.print("  [dim]no model requests[/]")
        return
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in (
        "#",
        "model",
        "msgs",
        "sent",
        "prompt",
        "cache hit",
        "cache miss",
        "completion",
        "ms",
        "outcome",
    ):
        table.add_column(column, justify="right" if column not in ("model", "outcome") else "left")
    for r in requests:
        table.add_row(
            str(r.id), r.model, str(r.message_count), human_size(r.bytes_sent), _n(r.prompt_tokens),
            _n(r.cache_hit_tokens), _n(r.cache_miss_tokens), _n(r.completion_tokens),
            str(r.latency_ms), r.outcome + (f": {escape(r.error[:80])}" if r.error else ""),
        )  # fmt: skip
    console.print(table)
    totals = usage_totals(requests)
    console.print(
        f"  [dim]{len(requests)} requests · {human_size(totals['bytes_sent'])} sent · prompt "
        f"{_n(totals['prompt_tokens'])} (cache hit {_n(totals['cache_hit_tokens'])}, miss "
        f"{_n(totals['cache_miss_tokens'])}) · completion {_n(totals['completion_tokens'])}[/]"
    )


def usage_totals(requests: list[ModelRequest]) -> dict[str, Any]:
    """Sums over requests; a token field is None when no request reported it."""
    out: dict[str, Any] = {"bytes_sent": sum(r.bytes_sent for r in requests)}
    for name in ("prompt_tokens", "completion_tokens", "cache_hit_tokens", "cache_miss_tokens"):
        values = [getattr(r, name) for r in requests if getattr(r, name) is not None]
        out[name] = sum(values) if values else None
    return out


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"

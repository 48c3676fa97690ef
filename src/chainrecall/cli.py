"""The `chainrecall` command line (Typer, with Rich for tables and progress bars).

Each subcommand is a thin shell over `service.Memory` or the HTTP app; the
work itself lives in the library so that it is tested there.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from chainrecall import __version__
from chainrecall.check import command as check_command
from chainrecall.config import DEFAULT_HOST, DEFAULT_PORT, server_config_from_env
from chainrecall.context_cli import context_command, cost_command
from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.harness import commands as harness_commands

DEFAULT_MCP_PORT = 8078

if TYPE_CHECKING:
    from rich.progress import TaskID

app = typer.Typer(
    name="chainrecall",
    help="Chain of Recall: memory for long-running LLM agents, by stable IDs and links.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOption = Annotated[
    str,
    typer.Option(
        "--db", envvar="CHAINRECALL_DB",
        help="SQLite file (created when missing) or postgresql:// URL",
    ),
]  # fmt: skip


def is_loopback(host: str) -> bool:
    if host in {"localhost", ""}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit")] = False,
) -> None:
    if version:
        typer.echo(__version__)
        raise typer.Exit()


@app.command()
def serve(
    db: DbOption,
    host: Annotated[str, typer.Option(help="address to bind")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = DEFAULT_PORT,
    workers: Annotated[int, typer.Option(min=1, help="server processes")] = 1,
    max_body_bytes: Annotated[
        int | None, typer.Option(help="largest request body accepted (default 25 MiB)")
    ] = None,
    github_secret: Annotated[
        str | None,
        typer.Option(help="secret of GitHub webhook deliveries (or CHAINRECALL_GITHUB_SECRET)"),
    ] = None,
    slack_signing_secret: Annotated[
        str | None,
        typer.Option(help="Slack app signing secret (or CHAINRECALL_SLACK_SIGNING_SECRET)"),
    ] = None,
    insecure: Annotated[
        bool, typer.Option(help="allow a non-loopback address without API tokens")
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Serve the recall API over HTTP from DB."""
    import uvicorn

    from chainrecall.api.app import create_app
    from chainrecall.store import open_store

    config = server_config_from_env(db).with_overrides(
        host=host, port=port, workers=workers, max_body_bytes=max_body_bytes,
        github_secret=github_secret, slack_signing_secret=slack_signing_secret,
        insecure=insecure,
    )  # fmt: skip
    store = open_store(config.db)  # creates the file and applies migrations once, up front
    if not is_loopback(host) and not insecure and not store.has_tokens():
        typer.echo(
            f"refusing to listen on {host}: the database holds no API token, so anyone who "
            "can reach it could read and write this memory. Listen on 127.0.0.1, create a "
            "token with `chainrecall token create`, or pass --insecure to accept the risk.",
            err=True,
        )
        store.close()
        raise typer.Exit(2)
    if not is_loopback(host) and not store.has_tokens():
        typer.secho(
            f"WARNING: serving {host} without authentication (--insecure)", err=True, fg="red"
        )
    if workers > 1:
        store.close()
        os.environ.update(config.to_env())
        uvicorn.run(
            "chainrecall.api.app:app_from_env", factory=True, host=host, port=port,
            workers=workers, log_level=log_level,
        )  # fmt: skip
        return
    uvicorn.run(create_app(store, config), host=host, port=port, log_level=log_level)


@app.command()
def migrate(
    source: Annotated[str, typer.Option("--from", help="SQLite file or postgresql:// URL to copy")],
    target: Annotated[str, typer.Option("--to", help="SQLite file or postgresql:// URL to fill")],
    verify: Annotated[
        bool, typer.Option("--verify", help="only compare the two (a copy always ends with it)")
    ] = False,
    batch_size: Annotated[int, typer.Option(min=1, help="rows per committed batch")] = 500,
) -> None:
    """Copy a memory between SQLite and PostgreSQL, then verify every ID on the target.

    Resumable: run it again after an interruption and it continues. Exits 1 when the
    target differs from the source, listing what differs.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from chainrecall.errors import ChainRecallError
    from chainrecall.migrate import copy_database, verify_database

    console = Console(stderr=True)
    columns = (TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn())
    try:
        with Progress(*columns, console=console) as bar:
            tasks: dict[str, TaskID] = {}

            def show(table: str, done: int, total: int) -> None:
                if table not in tasks:
                    tasks[table] = bar.add_task(table, total=total)
                bar.update(tasks[table], completed=done, total=total)

            if not verify:
                copied = copy_database(source, target, batch_size=batch_size, progress=show)
                console.print(f"copied {sum(copied.values())} rows")
            differences = verify_database(source, target, progress=show)
    except ChainRecallError as exc:
        console.print(f"[red]migrate failed:[/] {exc.detail}")
        raise typer.Exit(2) from exc
    if differences:
        for line in differences[:200]:
            typer.echo(f"DIFFERS {line}")
        if len(differences) > 200:
            typer.echo(f"... and {len(differences) - 200} more differences")
        typer.echo(f"verify: {len(differences)} difference(s) between source and target", err=True)
        raise typer.Exit(1)
    typer.echo("verify: every ID resolves on the target to the same record")


@app.command("recall")
def recall_command(
    db: DbOption,
    question: Annotated[str, typer.Argument(help="what to find evidence for")],
    budget_bytes: Annotated[int, typer.Option(help="largest context, in UTF-8 bytes")] = 8192,
    namespace: Annotated[str, typer.Option(help="namespace to search")] = "default",
    as_json: Annotated[bool, typer.Option("--json", help="print the JSON answer")] = False,
) -> None:
    """Assemble the evidence for a question within a byte budget (what GET /recall answers)."""
    import json

    from chainrecall.recall import recall
    from chainrecall.service import Memory
    from chainrecall.store import open_store

    memory = Memory(open_store(db), namespace)
    try:
        result = recall(memory, question, budget_bytes)
    except ChainRecallError as exc:
        _fail(exc)
    finally:
        memory.close()
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        typer.echo(result.text, nl=False)
        typer.echo(
            f"-- {result.bytes} of {result.budget_bytes} bytes, {len(result.items)} items, "
            f"{result.calls} calls, {result.hops} hops",
            err=True,
        )


token_app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)
app.add_typer(token_app, name="token")


@token_app.command("create")
def token_create(
    db: DbOption,
    namespace: Annotated[str, typer.Option(help="the namespace the token sees")] = "default",
    scope: Annotated[str, typer.Option(help="read, write or admin")] = "read",
    name: Annotated[str, typer.Option(help="a label for `token list`")] = "",
) -> None:
    """Create a token; it is printed once, as the last line, and stored only as a hash."""
    from chainrecall.auth import issue_token
    from chainrecall.store import open_store

    store = open_store(db)
    try:
        info, token = issue_token(store, namespace, scope, name)  # type: ignore[arg-type]
    except ChainRecallError as exc:
        _fail(exc)
    finally:
        store.close()
    typer.echo(f"created {info.id} (namespace {info.namespace}, scope {info.scope}); "
               "the token is shown only now:", err=True)  # fmt: skip
    typer.echo(token)


@token_app.command("list")
def token_list(db: DbOption) -> None:
    """List tokens (ids, namespaces, scopes; never the tokens themselves)."""
    from rich.console import Console
    from rich.table import Table

    from chainrecall.store import open_store

    store = open_store(db)
    tokens = store.list_tokens()
    store.close()
    table = Table("id", "namespace", "scope", "name", "created", "revoked")
    for t in tokens:
        table.add_row(t.id, t.namespace, t.scope, t.name, t.created_at, t.revoked_at or "")
    Console().print(table)


@token_app.command("revoke")
def token_revoke(db: DbOption, token_id: Annotated[str, typer.Argument(help="tok_... id")]) -> None:
    """Revoke a token by its id; requests with it answer 401 from now on."""
    from chainrecall.store import open_store

    store = open_store(db)
    try:
        info = store.revoke_token(token_id)
    except ChainRecallError as exc:
        _fail(exc)
    finally:
        store.close()
    typer.echo(f"revoked {info.id} at {info.revoked_at}")


@app.command("webhook-secret")
def webhook_secret(
    db: DbOption,
    source: Annotated[str, typer.Option(help="github or slack")],
    namespace: Annotated[str, typer.Option(help="deliveries signed with it land here")] = "default",
    secret: Annotated[
        str | None, typer.Option(help="the secret (default: read from standard input)")
    ] = None,
) -> None:
    """Set the signing secret of a webhook source for one namespace."""
    from chainrecall.auth import check_namespace
    from chainrecall.store import open_store

    value = secret if secret is not None else sys.stdin.readline().strip()
    if not value:
        _fail(InvalidInput("the secret must not be empty"))
    store = open_store(db)
    try:
        store.set_webhook_secret(check_namespace(namespace), source, value)
    except ChainRecallError as exc:
        _fail(exc)
    finally:
        store.close()
    typer.echo(f"{source} deliveries signed with this secret now land in namespace {namespace}")


@app.command()
def prune(
    db: DbOption,
    older_than: Annotated[str, typer.Option(help="age such as 90d, 12h, 2w")],
    namespace: Annotated[str | None, typer.Option(help="only this namespace")] = None,
    dry_run: Annotated[bool, typer.Option(help="count, erase nothing")] = False,
) -> None:
    """Erase triggers received longer ago than --older-than (tombstones stay; logged)."""
    from rich.progress import Progress

    from chainrecall.auth import cutoff_for, parse_age
    from chainrecall.store import open_store

    try:
        cutoff = cutoff_for(parse_age(older_than))
    except ChainRecallError as exc:
        _fail(exc)
    store = open_store(db)
    try:
        if dry_run:
            count = len(store.triggers_received_before(namespace, cutoff, 10**9))
            typer.echo(f"dry run: {count} triggers received before {cutoff} would be erased")
            return
        erased = 0
        with Progress(transient=True) as progress:
            task = progress.add_task("pruning", total=None)
            while batch := store.triggers_received_before(namespace, cutoff, 500):
                for ns, trigger_id in batch:
                    store.delete_trigger(ns, trigger_id, actor="cli:prune",
                                         reason=f"older than {older_than}")  # fmt: skip
                    erased += 1
                progress.update(task, completed=erased)
        typer.echo(f"erased {erased} triggers received before {cutoff}")
    finally:
        store.close()


def _fail(exc: ChainRecallError) -> NoReturn:
    typer.echo(f"error: {exc.detail}", err=True)
    raise typer.Exit(2)


# The harness's commands (src/chainrecall/harness/commands.py); `demo` is the main one.
app.command()(harness_commands.demo)
app.command()(harness_commands.ask)
app.command()(harness_commands.handle)
app.command()(harness_commands.log)
app.command()(check_command.check)  # chainrecall check: src/chainrecall/check/command.py


@app.command()
def mcp(
    db: DbOption,
    http: Annotated[
        bool, typer.Option("--http", help="serve streamable HTTP at /mcp instead of stdio")
    ] = False,
    host: Annotated[str, typer.Option(help="address to bind (with --http)")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="port to listen on (with --http)")] = DEFAULT_MCP_PORT,
    log_level: Annotated[str, typer.Option(help="uvicorn log level (with --http)")] = "warning",
) -> None:
    """Serve the memory as an MCP server: over stdio (default), or streamable HTTP."""
    from chainrecall.store import open_store

    store = open_store(server_config_from_env(db).db)
    if not http:
        from chainrecall.mcp_server import run_stdio

        run_stdio(store)  # stdout is the protocol's: nothing else may print there
        return
    if not is_loopback(host):
        typer.echo(
            f"refusing to listen on {host}: the MCP endpoint has no authentication of its "
            "own; listen on 127.0.0.1, or mount it behind tokens with `chainrecall serve`.",
            err=True,
        )
        store.close()
        raise typer.Exit(2)
    import uvicorn

    from chainrecall.api.mcp import mcp_http_app

    typer.echo(f"MCP over streamable HTTP at http://{host}:{port}/mcp", err=True)
    uvicorn.run(mcp_http_app(store, host=host), host=host, port=port, log_level=log_level)


app.command("context")(context_command)
app.command("cost")(cost_command)


@app.command("import")
def import_command(
    path: Annotated[
        Path, typer.Argument(help="a .jsonl file of triggers, an mbox, or a folder of deliveries")
    ],
    db: DbOption,
    format: Annotated[
        str | None,
        typer.Option("--format", help="jsonl, mbox or github-dir (default: told by the path)"),
    ] = None,
    namespace: Annotated[str, typer.Option(help="the namespace to import into")] = "default",
    batch_size: Annotated[int, typer.Option(min=1, help="triggers per transaction")] = 500,
) -> None:
    """Import triggers in bulk; re-running it (also after an interruption) adds nothing twice."""
    from rich.progress import Progress

    from chainrecall.auth import check_namespace
    from chainrecall.errors import ChainRecallError
    from chainrecall.ingest import bulk
    from chainrecall.service import Memory
    from chainrecall.store import open_store

    try:
        check_namespace(namespace)
        fmt = bulk.resolve_format(path, format)
        total = bulk.check_input(path, fmt)
        with Memory(open_store(db), namespace) as memory, Progress(transient=True) as progress:
            task = progress.add_task(f"importing {path.name}", total=total)
            stats = bulk.import_path(
                memory, path, fmt, batch_size=batch_size, checked=True,
                on_item=lambda n: progress.advance(task, n),
            )  # fmt: skip
    except (ChainRecallError, OSError) as exc:
        typer.echo(getattr(exc, "detail", None) or str(exc), err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"{stats.items} items read from {path}: {stats.added} stored, "
        f"{stats.already_present} already present"
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""The `chainrecall` command line (Typer, with Rich for tables and progress bars).

Each subcommand is a thin shell over `service.Memory` or the HTTP app; the
work itself lives in the library so that it is tested there.
"""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING, Annotated

import typer

from chainrecall import __version__
from chainrecall.config import DEFAULT_HOST, DEFAULT_PORT, server_config_from_env

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
        github_secret=github_secret, insecure=insecure,
    )  # fmt: skip
    store = open_store(config.db)  # creates the file and applies migrations once, up front
    if not is_loopback(host) and not insecure:
        typer.echo(
            f"refusing to listen on {host}: the database holds no API token, so anyone who "
            "can reach it could read and write this memory. Listen on 127.0.0.1, create a "
            "token with `chainrecall token create`, or pass --insecure to accept the risk.",
            err=True,
        )
        store.close()
        raise typer.Exit(2)
    if not is_loopback(host):
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()

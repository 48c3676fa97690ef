"""The `chainrecall` command line (Typer, with Rich for tables and progress bars).

Each subcommand is a thin shell over `service.Memory` or the HTTP app; the
work itself lives in the library so that it is tested there.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated

import typer

from chainrecall import __version__
from chainrecall.config import DEFAULT_HOST, DEFAULT_PORT, server_config_from_env
from chainrecall.context_cli import context_command, cost_command

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


app.command("context")(context_command)
app.command("cost")(cost_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

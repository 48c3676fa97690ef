"""The `chainrecall check` command: a thin Typer shell over `reporters.run_and_report`.

Registered on the main command line in `chainrecall.cli` with one line; the
options are parsed and checked here, the work is done in the library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from chainrecall.check.session import DEFAULT_MAX_BODY_BYTES


def check(
    base_url: Annotated[
        str, typer.Argument(help="root URL of the deployment, e.g. http://127.0.0.1:8077")
    ],
    read_only: Annotated[
        bool, typer.Option(help="write nothing; with --thread, read that thread")
    ] = False,
    thread: Annotated[
        str | None, typer.Option(help="thr_ ID of a thread to read (with --read-only)")
    ] = None,
    json_file: Annotated[
        Path | None, typer.Option("--json", help="also write the results as JSON to this file")
    ] = None,
    junit: Annotated[
        Path | None, typer.Option(help="also write the results as JUnit XML to this file")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="CHAINRECALL_TOKEN", help="API token, sent as Authorization: Bearer"),
    ] = None,
    max_body_bytes: Annotated[
        int,
        typer.Option(min=1, help="the deployment's body size limit; the check sends one byte more"),
    ] = DEFAULT_MAX_BODY_BYTES,
    skip_size: Annotated[bool, typer.Option(help="skip the body size limit check")] = False,
    only: Annotated[
        list[str] | None, typer.Option(help="run only checks whose name starts with this")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for each answer")] = 30.0,
) -> None:
    """Check a running deployment against the API contract (API.md); exit 0 when all pass.

    Writes only into threads of its own (thread_key chainrecall-check:<run>);
    --read-only writes nothing.
    """
    from chainrecall.check import CheckOptions
    from chainrecall.check.reporters import run_and_report

    if thread is not None and not read_only:
        typer.echo(
            "--thread is for --read-only runs; without --read-only the check writes and "
            "reads a thread of its own",
            err=True,
        )
        raise typer.Exit(2)
    if thread is not None and not re.fullmatch(r"thr_[0-9a-z_]{1,40}", thread):
        typer.echo(f"--thread {thread!r} is not a thread ID (thr_...)", err=True)
        raise typer.Exit(2)
    options = CheckOptions(
        read_only=read_only, thread=thread, max_body_bytes=max_body_bytes, skip_size=skip_size,
        select=tuple(only or ()),
    )  # fmt: skip
    status = run_and_report(
        base_url, options, token=token, timeout_s=timeout, json_path=json_file, junit_path=junit
    )
    raise typer.Exit(status)

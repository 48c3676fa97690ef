"""The one command that runs the benchmarks and writes their report.

    python -m benchmarks.run --full     # 1k, 100k, 1M triggers -> docs/benchmarks.md
    python -m benchmarks.run --quick    # 1k, 5k, short runs -> bench-out/benchmarks-quick.md (CI)
    python -m benchmarks.run --full --only fetch_http     # one benchmark; its section is replaced

It builds (or reuses, from bench-out/data/) one store per size, runs each
benchmark module over them, and renders one Markdown report. Any error in a
benchmark stops the run with a non-zero exit: the quick run is CI's smoke test
of the benchmarks themselves. Missed targets are reported, not failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from benchmarks import (
    bulk_import,
    context_assembly,
    context_strategies,
    deep_page,
    fetch_embedded,
    fetch_http,
    ingest,
    scale,
    webhooks,
)
from benchmarks.common import FULL, QUICK, REPO, Mode, Section, Table, size_label, wrk_available
from benchmarks.dataset import OUT_DIR, Dataset, cpu_count, postgres_datasets, sqlite_datasets

MODULES: list[ModuleType] = [
    fetch_http,
    fetch_embedded,
    ingest,
    deep_page,
    scale,
    webhooks,
    bulk_import,
    context_assembly,
    context_strategies,
]
DOCS_REPORT = REPO / "docs" / "benchmarks.md"
QUICK_REPORT = OUT_DIR / "benchmarks-quick.md"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = f", load average {os.getloadavg()[0]:.1f} at start"
    return (
        f"{cpu}, {cpu_count()} cores{load}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; "
        f"load generator: {'wrk' if wrk_available() else 'asyncio httpx'}"
    )


def backend_line(datasets: list[Dataset]) -> str:
    """Which database the stores are in (PostgreSQL: its server version, the URL redacted)."""
    postgres = [d for d in datasets if d.is_postgres]
    if not postgres:
        return f"SQLite {sqlite3.sqlite_version}, one file per size under bench-out/data/"
    import psycopg

    from chainrecall.store.postgres import redact_url, split_pool_size

    url = postgres[0].url
    with psycopg.connect(split_pool_size(url)[0], connect_timeout=15) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    version = row[0] if row else "?"
    return (
        f"PostgreSQL {version} at {redact_url(url)} (one database, grown from one size to the "
        "next; the server runs on the same machine)"
    )


def datasets_table(datasets: list[Dataset]) -> Table:
    table = Table(["triggers", "deep thread events", "file MB", "fill s (from empty)", "fill /s"])
    for dataset in datasets:
        size = "n/a"
        if not dataset.is_postgres:
            size = f"{Path(dataset.url).stat().st_size / 1e6:,.0f}"
        table.rows.append(
            [
                size_label(dataset.triggers), f"{dataset.deep_thread_events:,}", size,
                f"{dataset.fill_seconds:,.1f}", f"{dataset.triggers / dataset.fill_seconds:,.0f}",
            ]
        )  # fmt: skip
    return table


def header(mode: Mode, datasets: list[Dataset], command: str) -> str:
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            "# Benchmarks",
            "",
            f"Written by `{command}` (`make bench{'' if mode.name == 'full' else '-quick'}`); "
            "do not edit by hand. Every ratio compares "
            "numbers measured side by side in the same run: machines are noisy, ratios less so.",
            "",
            f"- Measured: {today}",
            f"- Machine: {machine_line()}",
            f"- Mode: {mode.name} (sizes {', '.join(size_label(s) for s in mode.sizes)})",
            f"- Store: {backend_line(datasets)}",
            "",
            "Stores: every tenth trigger goes to one deep thread, the rest to threads of 20; "
            "filled with `Memory.record_triggers`, 1000 per call (benchmarks/dataset.py).",
            "",
            datasets_table(datasets).markdown(),
            "",
        ]
    )


def wrapped(section: Section) -> str:
    return (
        f"<!-- section:{section.name} -->\n{section.markdown()}<!-- /section:{section.name} -->\n"
    )


def write_report(path: Path, head: str, sections: list[Section], replace_only: bool) -> None:
    """Write the report; with replace_only, swap the given sections into the existing file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if replace_only and path.exists():
        text = path.read_text()
        for section in sections:
            pattern = re.compile(
                rf"<!-- section:{section.name} -->.*?<!-- /section:{section.name} -->\n", re.S
            )
            if pattern.search(text):
                text = pattern.sub(lambda _m, s=section: wrapped(s), text)  # type: ignore[misc]
            else:
                text += "\n" + wrapped(section)
        path.write_text(text)
        return
    path.write_text(head + "\n" + "\n".join(wrapped(s) for s in sections))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.split("\n")[0]
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--quick", action="store_true", help="tiny sizes, short runs (CI smoke run)")
    which.add_argument("--full", action="store_true", help="1k, 100k and 1M triggers")
    names = [m.NAME for m in MODULES]
    parser.add_argument("--only", choices=names, action="append", help="run only this benchmark")
    parser.add_argument("--db-url", help="an EMPTY postgresql:// database to benchmark instead")
    parser.add_argument("--sizes", help="comma-separated store sizes instead of the mode's")
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached stores")
    parser.add_argument("--out", type=Path, help="report file (default by mode)")
    args = parser.parse_args(argv)

    mode = QUICK if args.quick else FULL
    if args.sizes:
        sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(","))
        mode = Mode(**{**mode.__dict__, "sizes": sizes})
    selected = [m for m in MODULES if not args.only or m.NAME in args.only]
    command = "python -m benchmarks.run " + " ".join(argv if argv is not None else sys.argv[1:])
    began = time.perf_counter()

    if args.db_url:
        steps = postgres_datasets(args.db_url, list(mode.sizes), progress=log)
        datasets: list[Dataset] = []
        sections_by_size: list[list[Section]] = []
        # A benchmark with USES_STORE = False measures its own scratch store: run it once.
        per_size = [m for m in selected if getattr(m, "USES_STORE", True)]
        for step in steps:  # one database grows, so measure each size before growing it
            dataset = step()
            datasets.append(dataset)
            sections_by_size.append([_run(m, [dataset], mode) for m in per_size])
        sections = [_merge(parts) for parts in zip(*sections_by_size, strict=True)]
        sections += [_run(m, datasets, mode) for m in selected if m not in per_size]
    else:
        datasets = sqlite_datasets(list(mode.sizes), fresh=args.fresh, progress=log)
        sections = [_run(m, datasets, mode) for m in selected]

    out = args.out or (QUICK_REPORT if mode.name == "quick" else DOCS_REPORT)
    write_report(out, header(mode, datasets, command), sections, replace_only=bool(args.only))
    log(f"wrote {out} in {time.perf_counter() - began:.0f} s")
    for section in sections:
        for target in section.targets:
            log(f"  {'met   ' if target.met else 'MISSED'} {target.name}: {target.value:.2f}")
    return 0


def _run(module: ModuleType, datasets: list[Dataset], mode: Mode) -> Section:
    log(f"running {module.NAME} on {', '.join(size_label(d.triggers) for d in datasets)}")
    began = time.perf_counter()
    benchmark: Callable[[list[Dataset], Mode], Section] = module.run
    section = benchmark(datasets, mode)
    log(f"  {module.NAME} took {time.perf_counter() - began:.1f} s")
    return section


def _merge(parts: tuple[Section, ...]) -> Section:
    """One section from the same benchmark run on one size at a time (PostgreSQL)."""
    merged = parts[0]
    for part in parts[1:]:
        for table, more in zip(merged.tables, part.tables, strict=True):
            table.rows += more.rows
        merged.targets += part.targets
        merged.numbers.update(part.numbers)
        merged.notes += [n for n in part.notes if n not in merged.notes]
    return merged


if __name__ == "__main__":
    sys.exit(main())

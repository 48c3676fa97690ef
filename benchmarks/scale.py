"""Throughput with 1, 2 and 4 server processes on one database (`serve --workers N`).

For each store size, `python -m chainrecall serve --workers N` runs for N in
1, 2, 4 on the same store, all at once; each gets a discarded warm-up load run
(every process imports and opens its pool), then they take turns, in rounds
that rotate which goes first, at two loads over 16 connections: GET /triggers/{id} on random existing IDs,
and POST /triggers (small triggers spread over 500 threads). Reported: the
median round's requests/s and its p50 latency under load, and each rate as a
multiple of the one-process rate measured in the same run. On SQLite the
writes go to a scratch copy; on PostgreSQL to the benchmark database itself.
More processes only help while there are idle cores: the table says how many
the machine has, and the load generator and the database share them.

Rerun: `python -m benchmarks.run --full --only scale` (SQLite) or
`python -m benchmarks.run --full --db-url postgresql://.../EMPTY_DB --out docs/benchmarks-postgres.md`
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import ExitStack

from benchmarks.common import (
    Mode,
    Section,
    Table,
    chainrecall_server,
    load,
    median,
    ms,
    rate,
    size_label,
)
from benchmarks.dataset import Dataset, cpu_count, random_ids, remove_sqlite, scratch_copy

NAME = "scale"
CONNECTIONS = 16


PROCESSES = (1, 2, 4)


def run(datasets: list[Dataset], mode: Mode, processes: Sequence[int] | None = None) -> Section:
    """Measure each dataset with each process count (default 1, 2, 4; the smoke test's
    tiny mode: 1 only, as every process start costs seconds on a small machine)."""
    counts = tuple(processes or ((1,) if mode.name == "tiny" else PROCESSES))
    section = Section(
        name=NAME,
        title=f"Throughput with {', '.join(map(str, counts))} server processes",
        intro=(
            f"`chainrecall serve --workers N` on one store, N = {', '.join(map(str, counts))}, "
            f"all started at once and taking turns (idle servers use no CPU), on a machine with {cpu_count()} cores shared with the load "
            f"generator{' and the database server' if any(d.is_postgres for d in datasets) else ''}. "
            f"*fetch*: GET /triggers/{{id}} on random existing IDs, {CONNECTIONS} connections; "
            f"*ingest*: POST /triggers of small triggers over 500 threads, {CONNECTIONS} "
            f"connections. {mode.load_seconds:g} s per load, {mode.rounds} rounds "
            "(each starting with the next N) after a discarded warm-up; the median round is reported, and *x 1* is the rate "
            "as a multiple of the one-process rate of the same run."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}"
        + (
            " --db-url postgresql://.../EMPTY_DB --out docs/benchmarks-postgres.md"
            if any(d.is_postgres for d in datasets)
            else ""
        ),
    )
    table = Table(
        [
            "triggers", "backend", "processes", "fetch req/s", "fetch x 1",
            "fetch p50 under load ms", "ingest /s", "ingest x 1", "ingest p50 under load ms",
        ]
    )  # fmt: skip
    tool = ""
    for dataset in datasets:
        backend = "PostgreSQL" if dataset.is_postgres else "SQLite"
        url = dataset.url if dataset.is_postgres else scratch_copy(dataset, NAME)
        load_ids = random_ids(dataset, 10_000, seed=dataset.triggers + 2)
        label = size_label(dataset.triggers)
        rates: dict[tuple[int, str], list[float]] = {}
        p50s: dict[tuple[int, str], list[float]] = {}
        try:
            with ExitStack() as stack:
                # Every server is up at once and they take turns, so that the machine's
                # drift over minutes touches each process count alike; idle ones cost no CPU.
                servers = {
                    n: stack.enter_context(chainrecall_server(url, workers=n)) for n in counts
                }
                for server in servers.values():
                    # Warm-up: /healthz answered by one process says nothing of the others.
                    load(server.url, "get_ids", seconds=mode.load_seconds,
                         connections=CONNECTIONS, ids=load_ids)  # fmt: skip
                for round_no in range(mode.rounds):
                    shift = round_no % len(counts)
                    for count in counts[shift:] + counts[:shift]:
                        for workload in ("get_ids", "post_triggers"):
                            result = load(
                                servers[count].url, workload, seconds=mode.load_seconds,
                                connections=CONNECTIONS, ids=load_ids,
                                run=f"{uuid.uuid4().hex[:8]}",
                            )  # fmt: skip
                            tool = result.tool
                            rates.setdefault((count, workload), []).append(result.per_second)
                            p50s.setdefault((count, workload), []).append(result.p50)
        finally:
            if not dataset.is_postgres:
                remove_sqlite(url)
        fetch_1, ingest_1 = (
            median(rates[counts[0], "get_ids"]),
            median(rates[counts[0], "post_triggers"]),
        )
        for count in counts:
            fetch, ingest = median(rates[count, "get_ids"]), median(rates[count, "post_triggers"])
            table.rows.append(
                [
                    label, backend, str(count), rate(fetch), f"{fetch / fetch_1:.2f}",
                    ms(median(p50s[count, "get_ids"])), rate(ingest), f"{ingest / ingest_1:.2f}",
                    ms(median(p50s[count, "post_triggers"])),
                ]
            )  # fmt: skip
            key = f"{backend.lower()}@{label}x{count}"
            section.numbers[f"fetch_rps_{key}"] = fetch
            section.numbers[f"ingest_per_s_{key}"] = ingest
    section.tables.append(table)
    section.notes.append(f"load generator: {tool}")
    return section

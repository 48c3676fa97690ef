"""Throughput with 1, 2 and 4 server processes on one database (`serve --workers N`).

For each store size, `python -m chainrecall serve --workers N` runs for N in
1, 2, 4 on the same store, one after another; each gets a discarded warm-up
load run (every process imports and opens its pool), then alternating rounds
of two loads over 16 connections: GET /triggers/{id} on random existing IDs,
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
            f"one after another, on a machine with {cpu_count()} cores shared with the load "
            f"generator{' and the database server' if any(d.is_postgres for d in datasets) else ''}. "
            f"*fetch*: GET /triggers/{{id}} on random existing IDs, {CONNECTIONS} connections; "
            f"*ingest*: POST /triggers of small triggers over 500 threads, {CONNECTIONS} "
            f"connections. {mode.load_seconds:g} s per load, {mode.rounds} alternating rounds "
            "after a discarded warm-up; the median round is reported, and *x 1* is the rate "
            "as a multiple of the one-process rate of the same run."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
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
        single: dict[str, float] = {}
        try:
            for count in counts:
                fetch_rps: list[float] = []
                fetch_p50: list[float] = []
                ingest_rps: list[float] = []
                ingest_p50: list[float] = []
                run_id = uuid.uuid4().hex[:8]
                with chainrecall_server(url, workers=count) as server:
                    # Warm-up: /healthz answered by one process says nothing of the others.
                    load(server.url, "get_ids", seconds=mode.load_seconds,
                         connections=CONNECTIONS, ids=load_ids)  # fmt: skip
                    for round_no in range(mode.rounds):
                        order = ["fetch", "ingest"] if round_no % 2 == 0 else ["ingest", "fetch"]
                        for workload in order:
                            if workload == "fetch":
                                result = load(
                                    server.url, "get_ids", seconds=mode.load_seconds,
                                    connections=CONNECTIONS, ids=load_ids,
                                )  # fmt: skip
                                fetch_rps.append(result.per_second)
                                fetch_p50.append(result.p50)
                            else:
                                result = load(
                                    server.url, "post_triggers", seconds=mode.load_seconds,
                                    connections=CONNECTIONS, run=f"{run_id}-{round_no}",
                                )  # fmt: skip
                                ingest_rps.append(result.per_second)
                                ingest_p50.append(result.p50)
                            tool = result.tool
                fetch, ingest = median(fetch_rps), median(ingest_rps)
                single.setdefault("fetch", fetch)
                single.setdefault("ingest", ingest)
                table.rows.append(
                    [
                        label, backend, str(count), rate(fetch),
                        f"{fetch / single['fetch']:.2f}", ms(median(fetch_p50)), rate(ingest),
                        f"{ingest / single['ingest']:.2f}", ms(median(ingest_p50)),
                    ]
                )  # fmt: skip
                key = f"{backend.lower()}@{label}x{count}"
                section.numbers[f"fetch_rps_{key}"] = fetch
                section.numbers[f"ingest_per_s_{key}"] = ingest
        finally:
            if not dataset.is_postgres:
                remove_sqlite(url)
    section.tables.append(table)
    section.notes.append(f"load generator: {tool}")
    return section

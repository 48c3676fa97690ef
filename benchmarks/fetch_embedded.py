"""Fetch by ID in-process: the embedded Python API, `chainrecall.open(path).get_trigger(id)`.

For each store size, random existing IDs are fetched one after another with
no server in between; beside it, the same primary-key row read with bare
`sqlite3` on the same file, the floor for Python. Reported: p50 and p99 per
call, calls per second, and our share of the bare rate.

Rerun: `python -m benchmarks.run --full --only fetch_embedded`
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from functools import partial

import chainrecall
from benchmarks.common import Mode, Section, Table, median, percentile, rate, size_label
from benchmarks.dataset import Dataset, random_ids

NAME = "fetch_embedded"


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="Fetch by ID in-process (embedded API)",
        intro=(
            "`chainrecall.open(db).get_trigger(id)` for random existing IDs, sequentially, "
            "in one thread; *bare* is `SELECT * FROM triggers WHERE id = ?` with sqlite3 on "
            "the same file (no model, no validation). Three alternating rounds; rates are the "
            "median round."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    table = Table(["triggers", "p50 µs", "p99 µs", "calls/s", "bare calls/s", "ours / bare"])
    for dataset in datasets:
        ids = random_ids(dataset, mode.embedded_lookups, seed=dataset.triggers + 2)
        memory = chainrecall.open(dataset.url)
        ours: list[float] = []
        ours_rates: list[float] = []
        bare_rates: list[float] = []
        try:
            if memory.get_trigger(ids[0]).id != ids[0]:
                raise RuntimeError("the embedded API answered another trigger")
            bare = None if dataset.is_postgres else sqlite3.connect(dataset.url)
            for _ in range(3):
                latencies = _timed_each(memory.get_trigger, ids)
                ours += latencies
                ours_rates.append(len(ids) / sum(latencies))
                if bare is not None:
                    bare_latencies = _timed_each(partial(_bare_fetch, bare), ids)
                    bare_rates.append(len(ids) / sum(bare_latencies))
            if bare is not None:
                bare.close()
        finally:
            memory.close()
        ours_rate = median(ours_rates)
        bare_rate = median(bare_rates) if bare_rates else float("nan")
        label = size_label(dataset.triggers)
        table.rows.append(
            [
                label, f"{percentile(ours, 50) * 1e6:.1f}", f"{percentile(ours, 99) * 1e6:.1f}",
                rate(ours_rate), rate(bare_rate) if bare_rates else "n/a",
                f"{ours_rate / bare_rate:.2f}" if bare_rates else "n/a",
            ]
        )  # fmt: skip
        section.numbers[f"p50_us@{label}"] = percentile(ours, 50) * 1e6
        section.numbers[f"calls_per_s@{label}"] = ours_rate
    section.tables.append(table)
    return section


def _bare_fetch(conn: sqlite3.Connection, trigger_id: str) -> object:
    return conn.execute("SELECT * FROM triggers WHERE id = ?", (trigger_id,)).fetchone()


def _timed_each(fetch: Callable[[str], object], ids: list[str]) -> list[float]:
    """Seconds each fetch took."""
    out = []
    clock = time.perf_counter
    for trigger_id in ids:
        began = clock()
        fetch(trigger_id)
        out.append(clock() - began)
    return out

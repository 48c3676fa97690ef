"""Ingest rate: single POST /triggers (sequential and concurrent) and bulk writes.

For each store size, on a scratch copy of the store (the cached datasets stay
as they are): sequential POST /triggers on one keep-alive connection (p50,
p99, triggers/s), POST /triggers with 16 concurrent connections (wrk or the
async fallback), POST /triggers/batch with 1000 triggers per request, and the
embedded `Memory.record_triggers` with batches of 1000. Every acknowledged
write is durable (`synchronous=FULL`): a single POST waits for its own fsync,
a batch shares one.

Rerun: `python -m benchmarks.run --full --only ingest`
"""

from __future__ import annotations

import time
import uuid

import chainrecall
from benchmarks.common import (
    Mode,
    Section,
    Table,
    chainrecall_server,
    ingest_body,
    keepalive,
    load,
    ms,
    percentile,
    rate,
    size_label,
)
from benchmarks.dataset import BATCH_SIZE, Dataset, remove_sqlite, scratch_copy
from chainrecall.service import Memory

NAME = "ingest"
CONNECTIONS = 16


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="Ingest rate",
        intro=(
            "Triggers of about 100 bytes of JSON payload, each to one of 500 threads. "
            "*single*: POST /triggers, one keep-alive connection, one after another; "
            f"*concurrent*: POST /triggers over {CONNECTIONS} connections for "
            f"{mode.load_seconds:g} s; *HTTP batch*: POST /triggers/batch with {BATCH_SIZE} "
            f"items; *record_triggers*: the embedded bulk call, {BATCH_SIZE} per call. "
            "Each store size is written on a scratch copy; every acknowledged write is durable "
            "(synchronous=FULL, one fsync per transaction)."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    table = Table(
        [
            "triggers in store", "single p50 ms", "single p99 ms", "single /s",
            f"concurrent ({CONNECTIONS}) /s", "HTTP batch /s", "record_triggers /s",
        ]
    )  # fmt: skip
    tool = ""
    for dataset in datasets:
        url = dataset.url if dataset.is_postgres else scratch_copy(dataset, "ingest")
        run_id = uuid.uuid4().hex[:8]
        try:
            with chainrecall_server(url) as server:
                with keepalive(server.url) as client:
                    single: list[float] = []
                    for n in range(mode.ingest_single):
                        began = time.perf_counter()
                        response = client.post("/triggers", json=ingest_body(run_id, n))
                        single.append(time.perf_counter() - began)
                        if response.status_code != 201:
                            raise RuntimeError(f"POST /triggers answered {response.status_code}")
                    batch_seconds = 0.0
                    for b in range(mode.ingest_batches):
                        start = (b + 1) * 1_000_000
                        items = [ingest_body(run_id, start + i) for i in range(BATCH_SIZE)]
                        began = time.perf_counter()
                        response = client.post("/triggers/batch", json={"items": items})
                        batch_seconds += time.perf_counter() - began
                        if (
                            response.status_code != 200
                            or len(response.json()["items"]) != BATCH_SIZE
                        ):
                            raise RuntimeError(
                                f"POST /triggers/batch answered {response.status_code}"
                            )
                concurrent = load(
                    server.url, "post_triggers", seconds=mode.load_seconds,
                    connections=CONNECTIONS, run=run_id,
                )  # fmt: skip
                tool = concurrent.tool
            embedded_seconds = _record_triggers_seconds(url, run_id, mode.ingest_batches)
        finally:
            if not dataset.is_postgres:
                remove_sqlite(url)
        label = size_label(dataset.triggers)
        bulk_count = mode.ingest_batches * BATCH_SIZE
        single_rate = len(single) / sum(single)
        table.rows.append(
            [
                label, ms(percentile(single, 50)), ms(percentile(single, 99)), rate(single_rate),
                rate(concurrent.per_second), rate(bulk_count / batch_seconds),
                rate(bulk_count / embedded_seconds),
            ]
        )  # fmt: skip
        section.numbers.update(
            {
                f"single_per_s@{label}": single_rate,
                f"concurrent_per_s@{label}": concurrent.per_second,
                f"http_batch_per_s@{label}": bulk_count / batch_seconds,
                f"record_triggers_per_s@{label}": bulk_count / embedded_seconds,
            }
        )
    section.tables.append(table)
    section.notes.append(f"concurrent load generator: {tool}")
    section.notes.append(
        "record_triggers counts the call only; building the items with Memory.new_trigger "
        "(validation, payload encoding) is outside the timing"
    )
    return section


def _record_triggers_seconds(url: str, run_id: str, batches: int) -> float:
    """Seconds `batches` calls of Memory.record_triggers with BATCH_SIZE items took."""
    spent = 0.0
    with chainrecall.open(url) as memory:
        for b in range(batches):
            start = (b + 1) * 10_000_000
            items = [
                Memory.new_trigger(**ingest_body(run_id, start + i)) for i in range(BATCH_SIZE)
            ]
            began = time.perf_counter()
            appended = memory.record_triggers(items)
            spent += time.perf_counter() - began
            if len(appended) != BATCH_SIZE:
                raise RuntimeError("record_triggers stored fewer triggers than it was given")
    return spent

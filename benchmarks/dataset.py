"""Benchmark datasets: stores filled with N triggers, built fast and cached between runs.

A dataset of N triggers is written through the public bulk API
(`Memory.record_triggers`, batches of 1000, one transaction each), the same
path a bulk import takes. Every tenth trigger goes to one deep thread (so the
1M store holds a 100k-event thread for the deep-page benchmark); the others
go to many threads of 20 triggers each. A store of N is grown from the cached
store of the next smaller size, and each size is kept as its own SQLite file
under `bench-out/data/`, so a rerun measures without refilling. Against
PostgreSQL (`--db-url`) there is one database: it is grown in place from one
size to the next, and must start empty.

The ID sample used by the fetch benchmarks is drawn uniformly (reservoir
sampling) while filling and kept in a JSON file beside the database.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import chainrecall
from chainrecall.model import NewTrigger
from chainrecall.service import Memory
from chainrecall.store import is_postgres_url

# Bump when the shape of the generated data changes: cached stores of an older shape are rebuilt.
DATASET_VERSION = 1
BATCH_SIZE = 1000
DEEP_EVERY = 10  # every tenth trigger goes to the deep thread
THREAD_SIZE = 20  # the other triggers go to threads of this many
SAMPLE_SIZE = 10_000
DEEP_THREAD_KEY = "bench:deep"
OUT_DIR = Path(__file__).resolve().parent.parent / "bench-out"
DATA_DIR = OUT_DIR / "data"

_WORDS = [
    "deploy", "build", "review", "merge", "payment", "invoice", "retry", "timeout", "cache",
    "index", "schema", "migration", "webhook", "alert", "latency", "queue", "worker", "thread",
    "cursor", "summary", "release",
]  # fmt: skip

Progress = Callable[[str], None]


@dataclass
class Dataset:
    """A filled store: where it is, how big, and what to look up in it."""

    url: str
    triggers: int
    deep_thread_id: str
    deep_thread_events: int
    sample_ids: list[str] = field(repr=False)
    fill_seconds: float  # time spent filling it, from empty, summed over the sizes it grew from
    version: int = DATASET_VERSION

    @property
    def is_postgres(self) -> bool:
        return is_postgres_url(self.url)


def make_trigger(index: int) -> NewTrigger:
    """The index-th generated trigger: a short message with a JSON payload."""
    words = " ".join(_WORDS[(index * 7 + j) % len(_WORDS)] for j in range(6))
    thread_key = DEEP_THREAD_KEY if index % DEEP_EVERY == 0 else f"bench:t{index // THREAD_SIZE}"
    return Memory.new_trigger(
        source="bench",
        kind="message",
        thread_key=thread_key,
        summary=f"message {index}: {words}",
        author=f"user{index % 50}",
        payload={"text": f"message {index}: {words}", "n": index},
    )


def fill(
    memory: Memory, start: int, stop: int, sample: list[str], rng: random.Random,
    progress: Progress | None = None,
) -> None:  # fmt: skip
    """Append generated triggers start..stop-1, keeping `sample` a uniform sample of all IDs."""
    began = time.perf_counter()
    for batch_start in range(start, stop, BATCH_SIZE):
        batch_stop = min(stop, batch_start + BATCH_SIZE)
        appended = memory.record_triggers([make_trigger(i) for i in range(batch_start, batch_stop)])
        for offset, (trigger, _created) in enumerate(appended):
            seen = batch_start + offset  # IDs seen before this one
            if len(sample) < SAMPLE_SIZE:
                sample.append(trigger.id)
            else:
                slot = rng.randrange(seen + 1)
                if slot < SAMPLE_SIZE:
                    sample[slot] = trigger.id
        done = batch_stop - start
        if progress is not None and (done % 50_000 == 0 or batch_stop == stop):
            rate = done / (time.perf_counter() - began)
            progress(f"  filled {batch_stop:,}/{stop:,} triggers ({rate:,.0f}/s)")


def _sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _meta_path(db: Path) -> Path:
    return db.with_suffix(".json")


def _load_cached(db: Path) -> Dataset | None:
    meta = _meta_path(db)
    if not db.exists() or not meta.exists():
        return None
    data = json.loads(meta.read_text())
    if data.get("version") != DATASET_VERSION:
        return None
    return Dataset(**data)


def _save(dataset: Dataset, db: Path) -> None:
    _meta_path(db).write_text(json.dumps(asdict(dataset)))


def sqlite_datasets(
    sizes: list[int], fresh: bool = False, progress: Progress | None = None
) -> list[Dataset]:
    """One cached SQLite store per size, each grown from the next smaller one."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    previous: Dataset | None = None
    previous_db: Path | None = None
    out: list[Dataset] = []
    for size in sorted(sizes):
        db = DATA_DIR / f"triggers-{size}.db"
        cached = None if fresh else _load_cached(db)
        if cached is not None and cached.triggers == size:
            out.append(cached)
            previous, previous_db = cached, db
            continue
        for part in [*_sqlite_files(db), _meta_path(db)]:
            part.unlink(missing_ok=True)
        start, sample, spent = 0, [], 0.0
        if previous is not None and previous_db is not None:
            checkpoint(str(previous_db))
            shutil.copyfile(previous_db, db)
            start, sample, spent = (
                previous.triggers,
                list(previous.sample_ids),
                previous.fill_seconds,
            )
        if progress is not None:
            progress(f"building the {size:,}-trigger store in {db} (from {start:,})")
        dataset = _grow(str(db), start, size, sample, spent, progress)
        _save(dataset, db)
        out.append(dataset)
        previous, previous_db = dataset, db
    return out


def postgres_datasets(
    url: str, sizes: list[int], progress: Progress | None = None
) -> list[Callable[[], Dataset]]:
    """Steps that grow one PostgreSQL database to each size in turn (it must start empty)."""
    state: dict[str, Dataset | None] = {"last": None}

    def step(size: int) -> Callable[[], Dataset]:
        def grow() -> Dataset:
            last = state["last"]
            if last is None:
                with chainrecall.open(url) as memory:
                    if memory.list_threads(1):
                        raise SystemExit(
                            f"the database at {url} is not empty; the benchmark fills it with "
                            "generated triggers, so give it an empty database (createdb ...)"
                        )
            start = last.triggers if last else 0
            sample = list(last.sample_ids) if last else []
            spent = last.fill_seconds if last else 0.0
            dataset = _grow(url, start, size, sample, spent, progress)
            state["last"] = dataset
            return dataset

        return grow

    return [step(size) for size in sorted(sizes)]


def _grow(
    url: str, start: int, stop: int, sample: list[str], spent: float, progress: Progress | None
) -> Dataset:
    rng = random.Random(stop)
    began = time.perf_counter()
    with chainrecall.open(url) as memory:
        fill(memory, start, stop, sample, rng, progress)
        deep = memory.find_thread(DEEP_THREAD_KEY)
    return Dataset(
        url=url, triggers=stop, deep_thread_id=deep.id, deep_thread_events=deep.event_count,
        sample_ids=sample, fill_seconds=spent + time.perf_counter() - began,
    )  # fmt: skip


def scratch_copy(dataset: Dataset, name: str) -> str:
    """A throw-away copy of an SQLite dataset's file, for benchmarks that write."""
    source = Path(dataset.url)
    target = OUT_DIR / "scratch" / f"{name}-{dataset.triggers}.db"
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_sqlite(str(target))
    checkpoint(str(source))
    shutil.copyfile(source, target)
    return str(target)


def checkpoint(path: str) -> None:
    """Fold the WAL into the main file, so that copying the main file copies everything."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def remove_sqlite(path: str) -> None:
    for part in _sqlite_files(Path(path)):
        part.unlink(missing_ok=True)


def fresh_sqlite(name: str) -> str:
    """The path of an empty scratch SQLite file (removed first if left over)."""
    target = OUT_DIR / "scratch" / f"{name}.db"
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_sqlite(str(target))
    return str(target)


def random_ids(dataset: Dataset, count: int, seed: int = 1) -> list[str]:
    """`count` IDs drawn (with repeats) from the dataset's uniform sample."""
    rng = random.Random(seed)
    return [rng.choice(dataset.sample_ids) for _ in range(count)]


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

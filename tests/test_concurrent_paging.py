"""Exactly-once paging and race-free dedupe with writers in separate PROCESSES, every backend.

Threads inside one process share a connection pool (or SQLite's per-thread
connections) and one GIL; separate processes are what several API servers on
one database look like. Writers append to one thread while the test walks it
with cursors; every event must be seen once, in order, without gaps. Racing
appends with one dedupe key must make exactly one record.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.pool import Pool
from multiprocessing.synchronize import Barrier

import pytest

from chainrecall.service import Memory
from chainrecall.store import open_store

WRITERS = 3
APPENDS_PER_WRITER = 25
DEDUPE_RACERS = 4
DEADLINE_S = 90

pytestmark = pytest.mark.slow

# forkserver, not fork: the test process has threads (pytest-xdist's, the drivers'), and a
# child forked from it can inherit a lock held by one of them and hang at the barrier. The
# fork server is a fresh single-threaded process; each child opens its own store.
_fork = multiprocessing.get_context("forkserver")
_start: Barrier | None = None


def _keep_start_barrier(barrier: Barrier) -> None:
    global _start
    _start = barrier


def process_pool(size: int, *, with_parent: bool) -> tuple[Pool, Barrier]:
    """`size` processes that meet at a barrier (with the test process too, if asked)."""
    barrier = _fork.Barrier(size + (1 if with_parent else 0))
    return _fork.Pool(size, initializer=_keep_start_barrier, initargs=(barrier,)), barrier


def _wait_for_start() -> None:
    assert _start is not None
    _start.wait(timeout=60)


def append_many(db_url: str, thread_id: str, writer: int) -> list[str]:
    """One writer process: append to the shared thread, answer the IDs in append order."""
    with Memory(open_store(db_url)) as memory:
        _wait_for_start()
        return [
            memory.record_trigger(
                source="test", kind="message", thread_id=thread_id, payload=f"w{writer} n{n}"
            ).trigger.id
            for n in range(APPENDS_PER_WRITER)
        ]


def append_with_dedupe_key(db_url: str, racer: int) -> tuple[str, bool]:
    with Memory(open_store(db_url)) as memory:
        _wait_for_start()
        appended = memory.record_trigger(
            source="webhook", kind="delivery", thread_key="race:dedupe",
            payload=f"attempt {racer}", dedupe_key="delivery-42",
        )  # fmt: skip
        return appended.trigger.id, appended.created


def test_a_pager_sees_every_event_once_in_order_while_processes_append(db_url: str) -> None:
    pool, start = process_pool(WRITERS, with_parent=True)
    with pool, Memory(open_store(db_url)) as memory:
        first = memory.record_trigger(
            source="test", kind="message", thread_key="race:paging", payload="opening"
        ).trigger
        total = 1 + WRITERS * APPENDS_PER_WRITER
        pending = [
            pool.apply_async(append_many, (db_url, first.thread_id, n)) for n in range(WRITERS)
        ]
        start.wait(timeout=60)
        seen = []
        cursor = None
        deadline = time.monotonic() + DEADLINE_S
        # Page with a small limit while the writers run, until every event has come by.
        while len(seen) < total:
            assert time.monotonic() < deadline, f"saw {len(seen)} of {total} events"
            page = memory.list_events(first.thread_id, cursor, 4)
            seen.extend(page.items)
            cursor = page.next_cursor
        written = [result.get(timeout=DEADLINE_S) for result in pending]
        tail = memory.list_events(first.thread_id, cursor, 500)

    assert tail.items == [] and not tail.has_more
    assert [event.seq for event in seen] == list(range(1, total + 1))
    ids_seen = [event.id for event in seen]
    assert len(set(ids_seen)) == total
    assert sorted(ids_seen[1:]) == sorted(i for ids in written for i in ids)
    for ids in written:  # each writer's own appends keep its order
        assert sorted(ids, key=ids_seen.index) == ids


def test_racing_appends_with_one_dedupe_key_make_exactly_one_trigger(db_url: str) -> None:
    pool, _ = process_pool(DEDUPE_RACERS, with_parent=False)
    with pool:
        pending = [
            pool.apply_async(append_with_dedupe_key, (db_url, n)) for n in range(DEDUPE_RACERS)
        ]
        outcomes = [result.get(timeout=DEADLINE_S) for result in pending]

    assert len({trigger_id for trigger_id, _ in outcomes}) == 1
    assert sorted(created for _, created in outcomes) == [False] * (DEDUPE_RACERS - 1) + [True]
    with Memory(open_store(db_url)) as memory:
        thread = memory.find_thread("race:dedupe")
        assert thread.event_count == 1
        assert [e.id for e in memory.walk_events(thread.id)] == [outcomes[0][0]]

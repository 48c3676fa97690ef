"""A page deep in a long thread against its first page: keyset cursors cost the same anywhere.

Every store has one deep thread holding a tenth of its triggers (100k events
in the 1M store). We walk it once to get a real cursor near its end (about
50 to 100 events from the last), then time, in alternating repeats, the first
page (no cursor) and the deep page (that cursor), 50 events each: over HTTP
(GET /threads/{id}/events, one keep-alive connection) and in-process
(`Memory.list_events`). Goal: the deep page no slower than the first.

Rerun: `python -m benchmarks.run --full --only deep_page`
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

import chainrecall
from benchmarks.common import (
    Mode,
    Section,
    Table,
    Target,
    chainrecall_server,
    keepalive,
    median,
    ms,
    size_label,
)
from benchmarks.dataset import Dataset
from chainrecall.service import Memory

NAME = "deep_page"
PAGE = 50


def deep_cursor(memory: Memory, thread_id: str, events: int) -> tuple[str | None, int]:
    """A cursor issued by the API at 50..99 events before the end, and its position."""
    cursor: str | None = None
    position = 0
    for step in (500, PAGE):
        while events - position - step >= PAGE:
            page = memory.list_events(thread_id, cursor, step)
            cursor, position = page.next_cursor, page.items[-1].seq
    return cursor, position


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="A deep page against the first page",
        intro=(
            f"Pages of {PAGE} events of the store's deep thread (a tenth of its triggers): "
            "the first page against one 50 to 100 events before the end, reached with a real "
            f"cursor. Median of {mode.page_repeats} alternating requests each."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    table = Table(
        [
            "triggers", "thread events", "deep position", "HTTP first ms", "HTTP deep ms",
            "HTTP first / deep", "embedded first ms", "embedded deep ms", "embedded first / deep",
        ]
    )  # fmt: skip
    for dataset in datasets:
        events = dataset.deep_thread_events
        position, embedded, http = _measure(dataset, mode.page_repeats)
        label = size_label(dataset.triggers)
        http_ratio = http[0] / http[1]
        embedded_ratio = embedded[0] / embedded[1]
        table.rows.append(
            [
                label, f"{events:,}", f"{position:,}", ms(http[0]), ms(http[1]), f"{http_ratio:.2f}",
                ms(embedded[0]), ms(embedded[1]), f"{embedded_ratio:.2f}",
            ]
        )  # fmt: skip
        section.numbers.update(
            {
                f"http_first_ms@{label}": http[0] * 1000,
                f"http_deep_ms@{label}": http[1] * 1000,
                f"embedded_first_ms@{label}": embedded[0] * 1000,
                f"embedded_deep_ms@{label}": embedded[1] * 1000,
            }
        )
        section.targets.append(
            Target(
                f"deep no slower than first over HTTP at {label} (first / deep)", http_ratio, 0.90
            )
        )
    section.tables.append(table)
    section.notes.append(
        "first / deep >= 0.90 counts as met: equal costs measure within about 10% of each "
        "other on a shared machine"
    )
    return section


def _measure(
    dataset: Dataset, repeats: int
) -> tuple[int, tuple[float, float], tuple[float, float]]:
    """The deep cursor's position, and median (first, deep) seconds: embedded, then HTTP."""
    thread_id, events = dataset.deep_thread_id, dataset.deep_thread_events
    with chainrecall.open(dataset.url) as memory:
        cursor, position = deep_cursor(memory, thread_id, events)
        deep = memory.list_events(thread_id, cursor, PAGE)
        if [e.seq for e in deep.items] != list(
            range(position + 1, min(events, position + PAGE) + 1)
        ):
            raise RuntimeError(
                f"the deep page after position {position} held {[e.seq for e in deep.items]}"
            )
        embedded = _alternate(
            lambda: memory.list_events(thread_id, None, PAGE),
            lambda: memory.list_events(thread_id, cursor, PAGE),
            repeats,
        )
    with chainrecall_server(dataset.url) as server, keepalive(server.url) as client:
        path = f"/threads/{thread_id}/events"
        deep_params: dict[str, str | int] = {"limit": PAGE}
        if cursor is not None:
            deep_params["cursor"] = cursor

        def first_page() -> None:
            _ok(client.get(path, params={"limit": PAGE}))

        def deep_page() -> None:
            _ok(client.get(path, params=deep_params))

        first_page()  # warm-up
        deep_page()
        http = _alternate(first_page, deep_page, repeats)
    return position, embedded, http


def _ok(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"GET {response.url} answered {response.status_code}")


def _alternate(
    first: Callable[[], object], second: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Median seconds of `first` and of `second`, called alternately `repeats` times each."""
    times: tuple[list[float], list[float]] = ([], [])
    clock = time.perf_counter
    for repeat in range(repeats):
        order = ((0, first), (1, second)) if repeat % 2 == 0 else ((1, second), (0, first))
        for slot, call in order:
            began = clock()
            call()
            times[slot].append(clock() - began)
    return median(times[0]), median(times[1])

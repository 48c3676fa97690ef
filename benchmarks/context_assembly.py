"""Context assembly time against store size: `build_context` and GET /context must not grow.

For each store size, the context of random existing triggers (budget 4 KB,
the default index of 50 threads and 12 recent events) is built in-process
with `build_context` and fetched over HTTP with GET /context on one keep-alive
connection; and the context of the store's deep thread (a tenth of all
triggers: 100k events at 1M) by `thread_id`. The builder's reads are bounded
(the most recently active threads, a window of events by position, the head
of one payload), so the medians should not move with the number of stored
triggers. Sizes are measured in alternating rounds, so that the machine's
load drifts over all of them alike.

Rerun: `python -m benchmarks.run --full --only context_assembly`
"""

from __future__ import annotations

import time
from contextlib import ExitStack

import httpx

import chainrecall
from benchmarks.common import (
    Mode,
    Section,
    Table,
    Target,
    chainrecall_server,
    keepalive,
    load_note,
    median,
    ms,
    percentile,
    size_label,
)
from benchmarks.dataset import Dataset, random_ids
from chainrecall.context import build_context
from chainrecall.service import Memory

NAME = "context_assembly"
BUDGET = 4096
ROUNDS = 3


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="Context assembly time against store size",
        intro=(
            f"`build_context(trigger_id=..., budget_bytes={BUDGET})` for random existing "
            "triggers, in-process, and GET /context with the same query on one keep-alive "
            "connection to `chainrecall serve`; *deep thread*: `thread_id=` the store's deep "
            "thread (a tenth of its triggers). Default index (50 threads) and event window "
            f"(12). {mode.context_repeats} contexts per size and kind, over {ROUNDS} "
            "alternating rounds across sizes; medians and p99 over all of them."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    section.notes.append(load_note())
    served = datasets if mode.every_size else datasets[-1:]
    per_round = max(1, mode.context_repeats // ROUNDS)
    embedded: dict[int, list[float]] = {d.triggers: [] for d in datasets}
    deep: dict[int, list[float]] = {d.triggers: [] for d in datasets}
    http: dict[int, list[float]] = {d.triggers: [] for d in served}
    context_bytes: dict[int, list[int]] = {d.triggers: [] for d in datasets}
    with ExitStack() as stack:
        memories = {d.triggers: stack.enter_context(chainrecall.open(d.url)) for d in datasets}
        clients = {
            d.triggers: stack.enter_context(
                keepalive(stack.enter_context(chainrecall_server(d.url)).url)
            )
            for d in served
        }
        for round_number in range(ROUNDS):
            for dataset in datasets:
                size = dataset.triggers
                ids = random_ids(dataset, per_round, seed=size * 10 + round_number)
                memory = memories[size]
                _build(memory, None, ids[0])  # warm this store's caches
                for trigger_id in ids:
                    seconds, built = _build(memory, None, trigger_id)
                    embedded[size].append(seconds)
                    context_bytes[size].append(built)
                for _ in range(max(1, per_round // 4)):
                    deep[size].append(_build(memory, dataset.deep_thread_id, None)[0])
                if size in clients:
                    _fetch(clients[size], ids[:1])  # warm-up
                    http[size] += _fetch(clients[size], ids)
    table = Table(
        [
            "triggers", "build_context p50 ms", "build_context p99 ms", "deep thread p50 ms",
            "GET /context p50 ms", "GET /context p99 ms", "context bytes (median)",
        ]
    )  # fmt: skip
    for dataset in datasets:
        size, label = dataset.triggers, size_label(dataset.triggers)
        got = http.get(size)
        table.rows.append(
            [
                label, ms(median(embedded[size])), ms(percentile(embedded[size], 99)),
                ms(median(deep[size])), ms(median(got)) if got else "not run",
                ms(percentile(got, 99)) if got else "not run",
                f"{median(context_bytes[size]):,.0f}",
            ]
        )  # fmt: skip
        section.numbers[f"build_ms@{label}"] = median(embedded[size]) * 1000
        section.numbers[f"deep_thread_ms@{label}"] = median(deep[size]) * 1000
        if got:
            section.numbers[f"http_ms@{label}"] = median(got) * 1000
    section.tables.append(table)
    small, large = datasets[0].triggers, datasets[-1].triggers
    if large != small:
        pair = f"{size_label(large)} / {size_label(small)}"
        for name, times in (("build_context", embedded), ("deep thread", deep)):
            ratio = median(times[large]) / median(times[small])
            section.numbers[f"{name.replace(' ', '_')}_ratio"] = ratio
            section.targets.append(
                Target(f"{name} flat with history: median at {pair}", ratio, 1.25, at_most=True)
            )
        if small in http and large in http:
            ratio = median(http[large]) / median(http[small])
            section.numbers["http_ratio"] = ratio
            section.targets.append(
                Target(f"GET /context flat with history: median at {pair}", ratio, 1.25, True)
            )
    if len(served) < len(datasets):
        section.notes.append(
            f"GET /context measured on the {size_label(served[0].triggers)} store only in "
            f"{mode.name} mode (one server start); `--full` measures every size"
        )
    section.notes.append(
        "assembly got cheaper here: `assemble` copies JSON values with a plain recursive copy "
        "instead of `copy.deepcopy` (a third of its time), and builds a text context's JSON "
        "form once, not on every fitting pass. CPU per 4 KB context, after / before, both "
        "versions alternating in one process on the same 100 records of the 100k store, "
        "three runs: text 0.69-0.77x (about 1.3 -> 0.9 ms), JSON 0.63-0.97x; output identical"
    )
    section.notes.append(
        "a ratio <= 1.25 counts as flat: equal costs measure within about a quarter of each "
        "other on a shared machine"
    )
    return section


def _build(memory: Memory, thread_id: str | None, trigger_id: str | None) -> tuple[float, int]:
    """Seconds one build_context took, and the context's bytes (checked against the budget)."""
    began = time.perf_counter()
    context = build_context(memory, trigger_id=trigger_id, thread_id=thread_id, budget_bytes=BUDGET)
    elapsed = time.perf_counter() - began
    if context.bytes > BUDGET or (trigger_id is not None and trigger_id not in context.items):
        raise RuntimeError(f"the context of {trigger_id or thread_id} broke its budget or lost it")
    return elapsed, context.bytes


def _fetch(client: httpx.Client, ids: list[str]) -> list[float]:
    """Seconds each GET /context for the triggers `ids` took; any non-200 is a failure."""
    out = []
    clock = time.perf_counter
    for trigger_id in ids:
        began = clock()
        response = client.get("/context", params={"trigger_id": trigger_id, "budget_bytes": BUDGET})
        elapsed = clock() - began
        if response.status_code != 200 or response.json()["bytes"] > BUDGET:
            raise RuntimeError(f"GET /context?trigger_id={trigger_id} answered {response.text}")
        out.append(elapsed)
    return out

"""GitHub webhook ingest: signed deliveries per second through POST /webhooks/github.

For each store size, on a scratch copy of the store, a server started as a
user starts it with `--github-secret` takes generated deliveries shaped like
GitHub's (benchmarks/github_payloads.py: 8 to 26 KB bodies, pull request life
cycles whose CI events are routed by head SHA and branch, review replies
linked by `in_reply_to_id`), each signed with HMAC-SHA256 and checked by the
server: one after another on one keep-alive connection, then over 16
connections (wrk, or the async fallback), with plain POST /triggers over the
same connections beside it for scale. A second table takes the server out:
the CPU time per delivery of the signature check and of parsing and planning
(routing, summary, search text) in-process.

Rerun: `python -m benchmarks.run --full --only webhooks`
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import httpx

from benchmarks.common import (
    Mode,
    Section,
    Table,
    chainrecall_server,
    keepalive,
    load,
    load_note,
    median,
    ms,
    percentile,
    rate,
    size_label,
)
from benchmarks.dataset import Dataset, remove_sqlite, scratch_copy
from benchmarks.github_payloads import SECRET, Delivery, deliveries, pr_cycle
from chainrecall.ingest import github
from chainrecall.ingest.common import Lookup

NAME = "webhooks"
CONNECTIONS = 16
POOL_PRS = 40  # the concurrent load cycles through the deliveries of this many PRs


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="GitHub webhook ingest (signed deliveries)",
        intro=(
            "POST /webhooks/github to `chainrecall serve --github-secret ...`: every delivery "
            "carries X-Hub-Signature-256 and the server checks it before parsing. Bodies are "
            "generated in GitHub's shape (8 to 26 KB: PR opened, CI on its head SHA, a review "
            "comment and its reply, a push, a job found by branch, a PR comment, the merge). "
            f"*sequential*: {mode.webhook_sequential} deliveries on one keep-alive connection; "
            f"*concurrent*: {CONNECTIONS} connections for {mode.load_seconds:g} s, each "
            "request a fresh X-GitHub-Delivery; *plain POST /triggers*: the ingest benchmark's "
            "small trigger on the same server right after, for scale. Each store size is "
            "written on a scratch copy; every acknowledged delivery is durable."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    section.notes.append(load_note())
    table = Table(
        [
            "triggers in store", "sequential p50 ms", "sequential p99 ms", "sequential /s",
            f"concurrent ({CONNECTIONS}) /s", "concurrent p50 ms",
            f"plain POST /triggers ({CONNECTIONS}) /s", "webhook / plain",
        ]
    )  # fmt: skip
    tool = ""
    for dataset in datasets if mode.every_size else datasets[-1:]:
        url = dataset.url if dataset.is_postgres else scratch_copy(dataset, NAME)
        run_id = uuid.uuid4().hex[:8]
        try:
            with chainrecall_server(url, "--github-secret", SECRET) as server:
                sequential = _sequential(server.url, mode.webhook_sequential, run_id)
                pool = deliveries(8 * POOL_PRS, first_pr=1_000_000, salt=run_id)
                lines = [
                    f"{d.event}\t{github.sign(SECRET, d.body)}\t{d.body.decode()}" for d in pool
                ]
                concurrent = load(
                    server.url, "github_deliveries", seconds=mode.load_seconds,
                    connections=CONNECTIONS, ids=lines, run=run_id,
                )  # fmt: skip
                plain = load(
                    server.url, "post_triggers", seconds=mode.load_seconds,
                    connections=CONNECTIONS, run=run_id,
                )  # fmt: skip
                tool = concurrent.tool
        finally:
            if not dataset.is_postgres:
                remove_sqlite(url)
        label = size_label(dataset.triggers)
        sequential_rate = len(sequential) / sum(sequential)
        ratio = concurrent.per_second / plain.per_second
        table.rows.append(
            [
                label, ms(percentile(sequential, 50)), ms(percentile(sequential, 99)),
                rate(sequential_rate), rate(concurrent.per_second), ms(concurrent.p50),
                rate(plain.per_second), f"{ratio:.2f}",
            ]
        )  # fmt: skip
        section.numbers.update(
            {
                f"sequential_per_s@{label}": sequential_rate,
                f"concurrent_per_s@{label}": concurrent.per_second,
                f"plain_concurrent_per_s@{label}": plain.per_second,
            }
        )
    section.tables.append(table)
    section.tables.append(_in_process(section, max(3, mode.webhook_sequential // 4)))
    section.notes.append(f"concurrent load generator: {tool}")
    section.notes.append(
        "planning got cheaper here: `Memory.new_trigger` no longer parses and walks a raw "
        "JSON body again for search text when the adapter gives its own (`encode_payload("
        "index=False)`). Parse + plan CPU per delivery, this branch / main, measured in one "
        "run (the two src trees in alternating processes, 3 rounds): pull_request "
        "0.53-0.58x, review comment 0.48-0.59x, check_run 0.62-0.68x, push 0.54-0.64x; the "
        "planned triggers of all 136 octokit example deliveries are identical"
    )
    section.notes.append(
        "in-process: median CPU time per delivery, no server and no store (planning asks an "
        "empty store, so every alias lookup misses); the rest of a delivery's time is HTTP, "
        "the store's lookups, the durable commit and the FTS index of its search text"
    )
    return section


def _sequential(base_url: str, count: int, run_id: str) -> list[float]:
    """Seconds each of `count` signed deliveries took; checks status and routing."""
    items = deliveries(count + 8, salt=run_id)
    latencies: list[float] = []
    threads: dict[str, str] = {}
    with keepalive(base_url) as client:
        for n, item in enumerate(items):
            began = time.perf_counter()
            response = client.post("/webhooks/github", content=item.body, headers=item.headers())
            elapsed = time.perf_counter() - began
            _check(response, item)
            if n >= 8:  # the first PR's cycle warms the server up
                latencies.append(elapsed)
            threads.setdefault(item.event, response.json()["thread_id"])
            if len(latencies) == count:
                break
    # The first cycle's CI events carry no pull_requests[]: they must have found the PR by
    # head SHA (check_run) and by branch (workflow_job), or the routing under test is broken.
    for event in ("check_run", "workflow_job", "pull_request_review_comment"):
        if event in threads and threads[event] != threads["pull_request"]:
            raise RuntimeError(f"the {event} delivery did not land on its PR's thread")
    return latencies


def _check(response: httpx.Response, item: Delivery) -> None:
    if response.status_code != 201:
        raise RuntimeError(
            f"POST /webhooks/github ({item.event}) answered {response.status_code}: "
            f"{response.text[:300]}"
        )


class _EmptyStore(Lookup):
    """Planning without a store: every alias is unknown (the first delivery of its kind)."""

    def __init__(self) -> None:
        pass

    def resolve(self, alias: str) -> str | None:
        return None

    def thread_of(self, trigger_id: str) -> str | None:
        return None

    def thread_key(self, thread_id: str) -> str | None:
        return None


def _in_process(section: Section, repeats: int) -> Table:
    """Median µs per delivery of each event type: signature check, and parse + plan."""
    table = Table(["event", "body KB", "verify signature µs", "parse + plan µs"])
    lookup = _EmptyStore()
    samples: dict[str, list[Delivery]] = defaultdict(list)
    for number in range(1, 17):
        for item in pr_cycle(number, salt="in-process"):
            samples[item.event].append(item)
    secrets = [("default", SECRET)]
    clock = time.perf_counter
    for event, items in samples.items():
        verify: list[float] = []
        plan: list[float] = []
        for n in range(repeats):
            item = items[n % len(items)]
            header = github.sign(SECRET, item.body)
            began = clock()
            github.match_signature(secrets, item.body, header)
            verify.append(clock() - began)
            began = clock()
            payload = github.parse_body(item.body, "application/json")
            github.plan_delivery(
                event=item.event, delivery_id=item.delivery_id, body=item.body,
                content_type="application/json", lookup=lookup, payload=payload,
            )  # fmt: skip
            plan.append(clock() - began)
        size = median([len(i.body) for i in items]) / 1024
        table.rows.append(
            [event, f"{size:.1f}", f"{median(verify) * 1e6:.1f}", f"{median(plan) * 1e6:.0f}"]
        )
        section.numbers[f"verify_us@{event}"] = median(verify) * 1e6
        section.numbers[f"plan_us@{event}"] = median(plan) * 1e6
    return table

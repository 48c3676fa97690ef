"""A super-agent replay: a seeded team's week, gold questions of 1-4 hops, and a day of Router turns.

This module owns the synthetic workload of issue 7, part 2. `generate(seed,
days, per_day)` makes a team's days: chat, pull requests with reviews, CI
runs with logs of 1 KB to 200 KB, e-mail, and Workers with reports, over many
threads, with the links a real ingest keeps (`refs`, `in_reply_to`). Each
feature story leaves gold questions with their evidence:

- 1 hop: "Which test failed in CI run N on main?" (the failing run);
- 2 hops: "Why did we add X to Y?" (the PR, and the chat message it cites);
- 3 hops: "Which CI failure led to PR #N?" (the PR, the report it cites, the run);
- 4 hops: "What happened after PR #N was merged?" (the merge, and the e-mail after).

Everything is replayed through `POST /triggers/batch`, `POST /workers` and
`POST /workers/{id}/report` on a `chainrecall serve` child. Questions are
scored like LoCoMo, except that an evidence trigger counts when its line holds
its ID and the first 80 bytes of its text (a 200 KB log fits no budget whole;
a pointer to the rest is what an agent needs). Then one day of Router turns
(one per trigger) is measured: the bytes each strategy sends per turn and in
total (`chainrecall.context.strategies`), and the shared-prefix ratio between
consecutive prompts (`chainrecall.context.prefix`), with Chain of Recall's
prompt taken from `GET /context?trigger_id=` exactly as the Router reads it.

Run: `python -m benchmarks.replay [--quick]`; writes docs/benchmarks-replay.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks-replay.md"
BUDGETS = (2048, 8192)
PEOPLE = ("dana", "eli", "fay", "gus", "hana", "ivo")
COMPONENTS = ("payments client", "search API", "billing job", "auth service", "image resizer",
              "email sender", "ledger export", "webhook relay", "rate limiter", "cache layer")  # fmt: skip
CHANGES = ("retry with exponential backoff", "a circuit breaker", "request hedging",
           "idempotency keys", "a bounded queue", "connection pooling", "a read-through cache",
           "jittered timeouts")  # fmt: skip
REASONS = ("PSP timeouts during the evening peak", "a 429 storm from the CDN",
           "duplicate charges after client retries", "p99 latency above 2 s on Mondays",
           "workers running out of file descriptors", "a thundering herd after deploys")  # fmt: skip
CHATTER = ("lunch at noon?", "standup moved to 10:15", "who has the on-call pager this week",
           "new coffee machine on floor 3", "reminder: fill in the offsite survey",
           "the staging VPN is flaky again", "can someone review my doc", "happy friday all")  # fmt: skip
PREFIX_BYTES = 80


@dataclass
class Item:
    key: str  # local name, resolved to a trg_ ID at replay
    day: int
    source: str
    kind: str
    thread_key: str
    author: str
    text: str
    refs: list[str] = field(default_factory=list)
    in_reply_to: str | None = None
    trigger_id: str = ""
    thread_id: str = ""


@dataclass
class WorkerPlan:
    after: str  # the item key after which the worker starts and reports
    thread_key: str
    task: str
    summary: str
    refs: list[str]


@dataclass
class GoldQuestion:
    text: str
    hops: int
    evidence: list[str]  # item keys


@dataclass
class Workload:
    items: list[Item]
    workers: list[WorkerPlan]
    questions: list[GoldQuestion]


def ci_log(rng: random.Random, size: int, failure: str | None) -> str:
    """A CI log of about `size` bytes: passing test lines, and the failure near the top."""
    lines = [f"ci runner {rng.randrange(100)}: collected {rng.randrange(200, 900)} items"]
    total = len(lines[0]) + 1
    while total < size:
        component = rng.choice(COMPONENTS).replace(" ", "_")
        lines.append(f"tests/test_{component}.py::test_{rng.randrange(10_000)} PASSED")
        total += len(lines[-1]) + 1
    if failure:
        lines.insert(1, failure)
    return "\n".join(lines)


def generate(seed: int, days: int, per_day: int) -> Workload:
    """A team's `days` with about `per_day` triggers a day; the same seed gives the same week."""
    rng = random.Random(seed)
    items: list[Item] = []
    workers: list[WorkerPlan] = []
    questions: list[GoldQuestion] = []
    counter = iter(range(1_000_000))
    pr_numbers = iter(range(400, 10_000))
    run_numbers = iter(range(9000, 100_000))

    def add(day: int, **fields: object) -> Item:
        item = Item(key=f"i{next(counter)}", day=day, **fields)  # type: ignore[arg-type]
        items.append(item)
        return item

    features = max(2, days * per_day // 60)
    plans: dict[int, list[tuple[int, int]]] = defaultdict(list)  # day -> (feature, step)
    for feature in range(features):
        start = rng.randrange(max(1, days - 1))
        for step in range(5):
            plans[min(days - 1, start + step // 3)].append((feature, step))
    stories: dict[int, dict[str, object]] = {}
    for day in range(days):
        story_steps = sorted(plans[day], key=lambda p: p[1])
        noise = max(0, per_day - len(story_steps) * 3)
        for _ in range(noise):
            roll = rng.random()
            if roll < 0.55:
                add(day, source="slack", kind="message", thread_key=f"slack:#{rng.choice(('random', 'general', 'ops'))}",
                    author=rng.choice(PEOPLE), text=rng.choice(CHATTER))  # fmt: skip
            elif roll < 0.8:
                run = next(run_numbers)
                add(day, source="ci", kind="check_run.completed", thread_key="ci:main",
                    author="ci", text=f"CI run {run} on main passed\n"
                    + ci_log(rng, rng.randrange(1024, 200 * 1024), None))  # fmt: skip
            else:
                add(day, source="email", kind="message", thread_key=f"email:newsletter-{day}",
                    author="news@vendor.example", text=f"Vendor newsletter day {day}: {rng.choice(CHATTER)}")  # fmt: skip
        for feature, step in story_steps:
            story = stories.setdefault(feature, {
                "component": rng.choice(COMPONENTS), "change": rng.choice(CHANGES),
                "reason": rng.choice(REASONS), "pr": next(pr_numbers), "run": next(run_numbers),
                "who": rng.choice(PEOPLE), "test": f"test_{feature}_{rng.randrange(1000)}",
            })  # fmt: skip
            comp, change, reason = story["component"], story["change"], story["reason"]
            if step == 0:
                chat = add(day, source="slack", kind="message", thread_key=f"slack:#team-{feature}",
                           author=str(story["who"]),
                           text=f"We keep seeing {reason} in the {comp}; I think we need {change}.")  # fmt: skip
                fail = add(day, source="ci", kind="check_run.completed", thread_key="ci:main", author="ci",
                           text=f"CI run {story['run']} on main failed: {story['test']} in the {comp}\n"
                           + ci_log(rng, rng.randrange(1024, 200 * 1024),
                                    f"FAILED {story['test']}: {reason}"))  # fmt: skip
                story.update(chat=chat.key, fail=fail.key)
                questions.append(GoldQuestion(
                    f"Which test failed in CI run {story['run']} on main?", 1, [fail.key]))  # fmt: skip
            elif step == 1:
                thread = f"github:acme/app#{story['pr']}"
                pr = add(day, source="github", kind="pull_request.opened", thread_key=thread,
                         author=str(story["who"]),
                         text=f"PR #{story['pr']}: add {change} to the {comp}. See the discussion in chat.",
                         refs=[str(story["chat"])])  # fmt: skip
                story.update(pr_key=pr.key, thread=thread)
                workers.append(WorkerPlan(
                    pr.key, thread, f"make the {comp} survive {reason}",
                    f"added {change}; the failure came from CI run {story['run']}",
                    [str(story["fail"])]))  # fmt: skip
                questions.append(GoldQuestion(
                    f"Why did we add {change} to the {comp}?", 2, [pr.key, str(story["chat"])]))  # fmt: skip
                questions.append(GoldQuestion(
                    f"Which CI failure led to PR #{story['pr']}?", 3, [pr.key, str(story["fail"])]))  # fmt: skip
            elif step == 2:
                add(day, source="github", kind="pull_request_review.submitted", thread_key=str(story["thread"]),
                    author=rng.choice(PEOPLE), text=f"Looks good, but add a test for {change}.",
                    in_reply_to=str(story["pr_key"]))  # fmt: skip
            elif step == 3:
                merge = add(day, source="github", kind="pull_request.closed", thread_key=str(story["thread"]),
                            author=str(story["who"]), text=f"PR #{story['pr']} merged into main",
                            in_reply_to=str(story["pr_key"]))  # fmt: skip
                story.update(merge=merge.key)
            elif step == 4 and "merge" in story:
                mail = add(day, source="email", kind="message", thread_key=f"email:customer-{feature}",
                           author="ops@customer.example",
                           text=f"Since your last release the {comp} has been stable for us, no more {reason}.",
                           refs=[str(story["merge"])])  # fmt: skip
                questions.append(GoldQuestion(
                    f"What happened after PR #{story['pr']} was merged?", 4, [str(story["merge"]), mail.key]))  # fmt: skip
    return Workload(items, workers, questions)


def replay(work: Workload, client: httpx.Client) -> None:
    """Ingest in order, one batch per run of items without links to the same batch."""
    ids: dict[str, str] = {}
    batch: list[Item] = []
    worker_after = {w.after: w for w in work.workers}

    def flush() -> None:
        if not batch:
            return
        body = {"items": [{
            "source": i.source, "kind": i.kind, "thread_key": i.thread_key, "author": i.author,
            "payload": i.text, "refs": [ids[r] for r in i.refs],
            "in_reply_to": ids[i.in_reply_to] if i.in_reply_to else None,
            "occurred_at": (datetime(2026, 11, 2) + timedelta(days=i.day)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        } for i in batch]}  # fmt: skip
        response = client.post("/triggers/batch", json=body)
        response.raise_for_status()
        for item, answer in zip(batch, response.json()["items"], strict=True):
            item.trigger_id = ids[item.key] = answer["trigger"]["id"]
            item.thread_id = answer["trigger"]["thread_id"]
        batch.clear()

    for item in work.items:
        if (
            any(r not in ids for r in [*item.refs, item.in_reply_to or ""] if r)
            or len(batch) >= 500
        ):
            flush()
        batch.append(item)
        if item.key in worker_after:
            flush()
            plan = worker_after[item.key]
            worker = client.post("/workers", json={"thread_id": item.thread_id, "task": plan.task})
            worker.raise_for_status()
            report = client.post(f"/workers/{worker.json()['id']}/report", json={
                "summary": plan.summary, "refs": [ids[r] for r in plan.refs]})  # fmt: skip
            report.raise_for_status()
    flush()


def line_of(item: Item, cap: int) -> str:
    head = f"{item.trigger_id} {item.thread_key} d{item.day} {item.author}: "
    text = " ".join(item.text.split())
    room = max(0, cap - len(head.encode()) - 1)
    if len(text.encode()) > room:
        text = text.encode()[: max(0, room - 12)].decode("utf-8", "ignore") + " [truncated]"
    return head + text + "\n"


def found(context: str, items: Sequence[Item]) -> float:
    """Share of `items` whose ID is followed (within its line's head) by the start of its text.

    Whitespace is flattened first: a CI log's first lines are one line in one strategy's
    format and several in another's.
    """
    flat = " ".join(context.split())
    hits = 0
    for item in items:
        start = " ".join(item.text.split())[:PREFIX_BYTES]
        at = flat.find(item.trigger_id)
        while at >= 0 and start not in flat[at : at + 160 + len(start)]:
            at = flat.find(item.trigger_id, at + 1)
        hits += at >= 0
    return hits / len(items) if items else 0.0


def pack_items(order: Sequence[Item], budget: int) -> str:
    used, lines = 0, []
    for item in order:
        line = line_of(item, budget // 2)
        if used + len(line.encode()) <= budget:
            lines.append(line)
            used += len(line.encode())
    return "".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 days of 120 triggers")
    parser.add_argument("--full", action="store_true", help="5 days of 300 triggers (default)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    days, per_day = (2, 120) if args.quick else (5, 300)
    markdown = run(
        args.seed, days, per_day, "python -m benchmarks.replay " + " ".join(argv or sys.argv[1:])
    )
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(markdown, encoding="utf-8")
    print(f"wrote {args.doc}")
    return 0


def run(seed: int, days: int, per_day: int, command: str) -> str:
    from benchmarks.common import chainrecall_server
    from benchmarks.locomo import BM25Index, Conversation, Turn  # the same BM25 as LoCoMo
    from chainrecall.context import prefix_ratios, shared_prefix_ratio
    from chainrecall.context.strategies import compare_strategies

    work = generate(seed, days, per_day)
    by_key = {i.key: i for i in work.items}
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp, chainrecall_server(str(Path(tmp) / "r.db")) as server, \
            httpx.Client(base_url=server.url, timeout=120) as client:  # fmt: skip
        replay(work, client)
        turns = [Turn(n, 0, i.key, i.author, i.text, None, "") for n, i in enumerate(work.items)]
        bm25 = BM25Index(Conversation("replay", turns, [], {}))
        thread_order: dict[str, list[int]] = defaultdict(list)
        position: dict[str, int] = {}
        for n, item in enumerate(work.items):
            position[item.key] = len(thread_order[item.thread_key])
            thread_order[item.thread_key].append(n)
        results: dict[tuple[str, int, int], list[float]] = defaultdict(list)
        for q in work.questions:
            gold = [by_key[k] for k in q.evidence]
            for budget in BUDGETS:
                ranked = [work.items[i] for i in bm25.rank(q.text)]
                near: list[Item] = []
                for item in ranked:
                    order = thread_order[item.thread_key]
                    at = position[item.key]
                    near += [
                        work.items[order[j]] for j in (at, at - 1, at + 1) if 0 <= j < len(order)
                    ]
                contexts = {
                    "keep-last": pack_items(list(reversed(work.items)), budget),
                    "bm25": pack_items(ranked, budget),
                    "bm25+neighbours": pack_items(near, budget),
                    "chain-of-recall": client.get("/recall", params={"q": q.text, "budget_bytes": budget}).json()["text"],
                    "gold-threads": pack_items([i for i in ranked if i.thread_key in {g.thread_key for g in gold}], budget),
                }  # fmt: skip
                for name, text in contexts.items():
                    results[(name, q.hops, budget)].append(found(text, gold))
        # One day of Router turns: the last day, one turn per trigger.
        day = [i for i in work.items if i.day == days - 1]
        sizes = [len(line_of(i, 10**9).encode()) for i in day]
        summaries = [len(line_of(i, 120).encode()) for i in day]
        router_contexts = [client.get("/context", params={"trigger_id": i.trigger_id, "budget_bytes": 8192}).json()["text"] for i in day]  # fmt: skip
        runs = compare_strategies(
            sizes,
            summaries,
            [len(c.encode()) for c in router_contexts],
            window=20,
            summary_cap=4096,
        )
        # Keep-everything's prompt n+1 starts with prompt n whole: its ratio is size_n / size_n+1
        # (computed, not built: the day's prompts add up to gigabytes).
        running = [sum(sizes[: n + 1]) for n in range(len(sizes))]
        lines = [line_of(i, 10**9) for i in day]
        window_ratios = []
        previous = ""
        for n in range(len(day)):
            current = "".join(lines[max(0, n - 19) : n + 1])
            if n:
                window_ratios.append(shared_prefix_ratio(previous, current))
            previous = current
        ratios = {"keep everything": [running[n - 1] / running[n] for n in range(1, len(running))],
                  "last 20 turns": window_ratios, "Chain of Recall": prefix_ratios(router_contexts)}  # fmt: skip
    names = ["keep-last", "bm25", "bm25+neighbours", "chain-of-recall", "gold-threads"]
    hops = sorted({q.hops for q in work.questions})
    out = ["## Super-agent replay: a seeded team week", "", f"Rerun: `{command.strip()}`", "",
           f"Seed {seed}: {days} days, {len(work.items)} triggers over "
           f"{len({i.thread_key for i in work.items})} threads, {len(work.workers)} workers with reports, "
           f"{len(work.questions)} gold questions. Evidence counts when its line holds its ID and "
           f"the first {PREFIX_BYTES} bytes of its text. `gold-threads` reads the gold evidence: BM25 inside the evidence's threads only (no bound where a gold thread is as big as ci:main).", ""]  # fmt: skip
    for budget in BUDGETS:
        out += [f"### Evidence recall at {budget // 1024} KiB, by hops", "",
                "| strategy | " + " | ".join(f"{h} hop{'s' if h > 1 else ''}" for h in hops) + " | all |",
                "|---|" + "---|" * (len(hops) + 1)]  # fmt: skip
        for name in names:
            cells = [statistics.fmean(results[(name, h, budget)]) for h in hops]
            every = [v for h in hops for v in results[(name, h, budget)]]
            out.append(
                f"| {name} | "
                + " | ".join(f"{c:.3f}" for c in cells)
                + f" | {statistics.fmean(every):.3f} |"
            )
        out.append("")
    out += [f"### One day of Router turns ({len(day)} turns, day {days})", "",
            "| strategy | bytes sent over the day | last turn | mean shared-prefix ratio |", "|---|---|---|---|"]  # fmt: skip
    for r in runs:
        ratio = ratios.get(r.name)
        cell = f"{statistics.fmean(ratio):.2f}" if ratio else "n/a"
        out.append(f"| {r.name} | {r.total:,} | {r.last:,} | {cell} |")
    out += ["", "Chain of Recall per turn is `GET /context?trigger_id=&budget_bytes=8192`, as the Router reads it; "
            "keep everything grows as N(N+1)/2 and is fully cacheable by prefix; rolling summary uses each "
            "turn's first 120 bytes as its summary, capped at 4 KiB. Pass-through on/off is measured by "
            "`python -m benchmarks.passthrough`.", ""]  # fmt: skip
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())

"""Bytes per turn against stream length: what each context strategy sends as history grows.

A generated stream of an agent's inbox (chat messages, GitHub PR events with
JSON payloads, CI logs of up to 41 KB, e-mails, over 24 threads) is replayed
with `chainrecall.cost.replay`, the code behind `chainrecall cost`: one
trigger at a time into a fresh scratch store, measuring per turn what each
strategy of `chainrecall.context.strategies` sends: keep everything, the last
5 turns, a rolling summary capped at 2 KB plus the newest turn, and the Chain
of Recall context `build_context` assembles within 4 KB. The store sizes of
the other benchmarks do not apply: the stream is its own history. A PNG plot
goes beside the report (docs/img/ for `--full`).

Rerun: `python -m benchmarks.run --full --only context_strategies`
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, Mode, Section, Table, Target, load_note, median
from benchmarks.dataset import OUT_DIR, Dataset
from chainrecall.context.strategies import StrategyRun
from chainrecall.cost import StreamItem, StreamReport, replay

NAME = "context_strategies"
USES_STORE = False  # it replays its own stream into a scratch store
IMAGE = "context-strategies.png"
BUDGET = 4096
WINDOW = 5
SUMMARY_CAP = 2048
CHECKPOINTS = (10, 30, 100, 300, 1000, 3000)

_AREAS = ["payments", "invoices", "ledger", "api", "workers", "billing"]
_PEOPLE = ["ana", "bao", "chidi", "dana", "emil", "farah", "goro", "hana"]
_CHAT = [
    "can someone look at the settlement retries? EU batch failed again at 02:14",
    "the bank's sandbox is down, so the integration tests will be red for a while",
    "merged the idempotency key change, deploying to staging after lunch",
    "p99 on /payments went from 300 ms to 2.1 s after the last release",
    "who owns the invoice PDF renderer now? it times out on 40-page invoices",
    "rolling back 4.12.1, the retry storm is back",
]
_LOG_LINE = "{t} INFO  [{area}] settle batch={n} attempt={a} bank=eu-1 status=504 elapsed_ms={ms}"


def image_path(mode: Mode) -> Path:
    """Where the plot goes: docs/img/ for the full run, else beside the quick report."""
    return (REPO / "docs" / "img" if mode.name == "full" else OUT_DIR / "img") / IMAGE


def stream(turns: int, seed: int = 412) -> list[StreamItem]:
    """`turns` triggers of a busy agent's inbox, deterministic in `seed`."""
    rng = random.Random(seed)
    items: list[StreamItem] = []
    for n in range(turns):
        at = f"2026-11-{3 + n // 1440:02d}T{(n // 60) % 24:02d}:{n % 60:02d}:00Z"
        who = rng.choice(_PEOPLE)
        pick = rng.random()
        pr = 400 + rng.randrange(12)
        area = _AREAS[pr % len(_AREAS)]
        fields: dict[str, Any]
        if pick < 0.4:
            channel = rng.choice(["payments", "oncall", "releases", "random", "billing", "eng"])
            text = rng.choice(_CHAT) + f" ({n})"
            fields = {
                "source": "slack", "kind": "message", "thread_key": f"chat:#{channel}",
                "thread_title": f"#{channel}", "summary": f"{who} in #{channel}: {text[:90]}",
                "payload": {"channel": channel, "user": who, "text": text, "ts": f"{n}.000100"},
            }  # fmt: skip
        elif pick < 0.7:
            body = {
                "action": rng.choice(["synchronize", "review_requested", "labeled", "edited"]),
                "number": pr, "sender": {"login": who},
                "pull_request": {
                    "number": pr, "title": f"{area}: retry the settlement call ({pr})",
                    "body": "Retry with backoff and an idempotency key. " * rng.randint(10, 60),
                    "head": {"ref": f"{area}-fix-{pr}", "sha": f"{n:040x}"},
                    "labels": [{"name": area}], "user": {"login": _PEOPLE[pr % 8]},
                },
            }  # fmt: skip
            fields = {
                "source": "github", "kind": f"pull_request.{body['action']}",
                "thread_key": f"github:acme/ledger#{pr}", "thread_title": f"PR #{pr}",
                "summary": f"{who} {body['action']} PR #{pr}: {area} retry", "payload": body,
            }  # fmt: skip
        elif pick < 0.85:
            lines = rng.choice([40, 120, 400])
            log = "\n".join(
                _LOG_LINE.format(t=at, area=area, n=n, a=i % 5, ms=30000 + i) for i in range(lines)
            )
            failed = rng.randrange(4)
            log += f"\n==== {failed} failed, {118 - failed} passed in 41.20s ===="
            fields = {
                "source": "ci", "kind": "ci.finished", "thread_key": f"github:acme/ledger#{pr}",
                "summary": f"CI {'failed' if failed else 'passed'} on PR #{pr}: "
                f"{failed} of 118 tests red in {area}/",
                "raw": log.encode(), "content_type": "text/plain",
            }  # fmt: skip
        else:
            ticket = f"OPS-{17 + rng.randrange(6)}"
            text = (
                f"Hi team,\n\n{rng.choice(_CHAT)}.\n\nThe customer asks for an update by "
                "end of day; can we give them a time?\n\n" + "> earlier message quoted\n" * 30
            )
            fields = {
                "source": "email", "kind": "email.received", "thread_key": f"mail:{ticket}",
                "thread_title": f"{ticket}: settlement failures", "author": f"{who}@example.com",
                "summary": f"{who}: re {ticket} settlement failures", "payload": text,
            }  # fmt: skip
        fields["occurred_at"] = at
        items.append(StreamItem(fields))
    return items


def run(datasets: list[Dataset], mode: Mode) -> Section:
    del datasets  # the replayed stream is its own history
    turns = mode.stream_turns
    section = Section(
        name=NAME,
        title="Bytes per turn against stream length, by context strategy",
        intro=(
            f"A generated stream of {turns} triggers (40% chat, 30% GitHub PR events with JSON "
            "payloads, 15% CI logs of 4 to 41 KB, 15% e-mails; 24 threads) replayed with "
            "`chainrecall.cost.replay` (what `chainrecall cost` runs): per turn, the bytes each "
            f"strategy sends. *keep everything*: every turn so far, whole; *last {WINDOW} "
            f"turns*; *rolling summary*: one-line summaries of the earlier turns capped at "
            f"{SUMMARY_CAP} B, plus the newest turn whole; *Chain of Recall*: the context "
            f"`build_context` assembles within {BUDGET} B (large payloads spilled behind "
            f"pointers).\n\n![bytes per turn by strategy](img/{IMAGE})"
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    section.notes.append(load_note())
    began = time.perf_counter()
    report = replay(stream(turns), budget_bytes=BUDGET, window=WINDOW, summary_bytes=SUMMARY_CAP)
    replay_seconds = time.perf_counter() - began
    runs = report.bytes
    for run_ in runs:
        if len(run_.per_turn) != turns:
            raise RuntimeError(f"{run_.name} measured {len(run_.per_turn)} of {turns} turns")
    coral = runs[-1]
    if max(coral.per_turn) > BUDGET:
        raise RuntimeError("a Chain of Recall context exceeded its budget")
    points = [c for c in CHECKPOINTS if c < turns] + [turns]
    per_turn = Table(["turn (stream length)", *(f"{r.name} B" for r in runs)])
    for point in points:
        per_turn.rows.append([f"{point:,}", *(f"{r.per_turn[point - 1]:,}" for r in runs)])
    section.tables.append(per_turn)
    # Growth compares medians over two windows of a tenth of the stream each (turns
    # after the first tenth, and the last tenth): one turn's size depends on its payload.
    tenth = max(1, turns // 10)
    early_window, late_window = (tenth, 2 * tenth), (turns - tenth, turns)
    early_label = f"{early_window[0] + 1:,}-{early_window[1]:,}"
    late_label = f"{late_window[0] + 1:,}-{late_window[1]:,}"
    growth = Table(
        [
            "strategy", f"median B/turn, turns {early_label}", f"median B/turn, turns {late_label}",
            "growth", f"total B over {turns:,} turns", "total / Chain of Recall",
        ]
    )  # fmt: skip
    for run_ in runs:
        early = median(run_.per_turn[early_window[0] : early_window[1]])
        late = median(run_.per_turn[late_window[0] : late_window[1]])
        ratio = late / max(1.0, early)
        growth.rows.append(
            [
                run_.name, f"{early:,.0f}", f"{late:,.0f}", f"{ratio:.2f}x", f"{run_.total:,}",
                f"{run_.total / coral.total:.1f}",
            ]
        )  # fmt: skip
        key = run_.name.split()[0].lower()
        section.numbers[f"last_turn_bytes@{key}"] = float(run_.last)
        section.numbers[f"total_bytes@{key}"] = float(run_.total)
        section.numbers[f"growth@{key}"] = ratio
    section.tables.append(growth)
    everything = runs[0]
    linear = (late_window[0] + late_window[1] + 1) / (early_window[0] + early_window[1] + 1)
    section.targets.append(
        Target(
            f"Chain of Recall flat: median bytes per turn, turns {late_label} / {early_label}",
            section.numbers["growth@chain"], 1.25, at_most=True,
        )
    )  # fmt: skip
    section.targets.append(
        Target(
            f"keep everything grows linearly: the same ratio (about {linear:.1f} if linear)",
            section.numbers["growth@keep"], 0.5 * linear,
        )
    )  # fmt: skip
    prefix = [t.prefix_ratio for t in report.turns if t.prefix_ratio is not None]
    section.numbers["prefix_reused_median"] = median(prefix) if prefix else 1.0
    section.numbers["replay_ms_per_turn"] = replay_seconds / turns * 1000
    path = image_path(mode)
    write_plot(report, path, turns)
    section.notes += [
        f"keep everything sends {everything.total / coral.total:.0f}x the bytes of Chain of "
        f"Recall over {turns:,} turns; payload bytes Chain of Recall left behind pointers: "
        f"{report.spilled_payload_bytes:,}",
        f"shared prefix between consecutive Chain of Recall contexts (what a provider's prefix "
        f"cache can reuse): median {section.numbers['prefix_reused_median']:.0%}",
        f"replay: {section.numbers['replay_ms_per_turn']:.1f} ms per turn (a durable write and "
        "a context build each); plot: "
        + (f"docs/img/{IMAGE}" if mode.name == "full" else str(path)),
    ]
    return section


def write_plot(report: StreamReport, path: Path, turns: int) -> None:
    """Bytes per turn (linear, then log scale) and in total for each strategy (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    xs = list(range(1, turns + 1))
    figure, (linear, per_turn, cumulative) = plt.subplots(1, 3, figsize=(16, 4.6))
    for run_ in report.bytes:
        linear.plot(xs, run_.per_turn, label=run_.name, linewidth=1.0)
        per_turn.plot(xs, run_.per_turn, label=run_.name, linewidth=1.0)
        cumulative.plot(xs, _running(run_), label=run_.name, linewidth=1.2)
    for axes in (linear, per_turn):
        axes.axhline(BUDGET, color="grey", linestyle="--", linewidth=0.8)
    linear.set_title("bytes sent per turn: keep everything grows linearly")
    per_turn.set_title("the same, log scale: Chain of Recall stays under its budget (dashed)")
    cumulative.set_title("bytes sent in total (log scale)")
    for axes in (linear, per_turn, cumulative):
        axes.set_xlabel("turn (stream length)")
        axes.set_ylabel("bytes")
        axes.grid(alpha=0.3, which="both")
    per_turn.set_yscale("log")
    cumulative.set_yscale("log")
    linear.legend(loc="upper left")
    figure.suptitle(
        f"Context strategies over a stream of {turns:,} triggers "
        f"(Chain of Recall budget {BUDGET} B)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _running(run_: StrategyRun) -> list[int]:
    out, total = [], 0
    for value in run_.per_turn:
        total += value
        out.append(total)
    return out

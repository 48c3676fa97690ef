"""The arithmetic of resending: what each context strategy sends per turn, and in total.

A chat-completions API is stateless, so each request carries everything the
model should know. Given the size of each turn of a stream (bytes, or tokens
from a real tokenizer) this module says what four strategies send:

- keep everything: turn i sends turns 1..i whole (total N(N+1)/2 for N equal turns);
- last-k window: turn i sends the last k turns whole;
- rolling summary: a running summary of the earlier turns, capped, plus the
  newest `keep_last` turns whole;
- Chain of Recall: the context the builder assembled for that turn (its size is
  measured, not computed here).

The functions are pure and take plain sizes, so benchmarks and `chainrecall
cost` share them, and their results can be checked by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

SEED_TURNS = (3, 6, 10, 20)


def resend_total(turns: int) -> int:
    """Units sent over `turns` equal turns when every request resends the history."""
    if turns < 0:
        raise ValueError(f"turns must be 0 or more, got {turns}")
    return turns * (turns + 1) // 2


@dataclass(frozen=True)
class ResendRow:
    turns: int
    history: int  # units the last request carries: the whole history
    total: int  # units sent over all requests
    multiple: Fraction  # total / history: what resending costs over sending once

    @property
    def multiple_text(self) -> str:
        value = float(self.multiple)
        return f"{value:g}x"


def resend_table(turns: Sequence[int] = SEED_TURNS) -> list[ResendRow]:
    """The seed's table: 3, 6, 10, 20 turns -> 6, 21, 55, 210 units (2x, 3.5x, 5.5x, 10.5x)."""
    rows = []
    for n in turns:
        if n < 1:
            raise ValueError(f"turns must be 1 or more, got {n}")
        total = resend_total(n)
        rows.append(ResendRow(turns=n, history=n, total=total, multiple=Fraction(total, n)))
    return rows


@dataclass(frozen=True)
class TextProfile:
    """Characters, UTF-8 bytes and bytes per character of one text."""

    chars: int
    bytes: int

    @property
    def bytes_per_char(self) -> float:
        return self.bytes / self.chars if self.chars else 0.0


def text_profile(text: str) -> TextProfile:
    return TextProfile(chars=len(text), bytes=len(text.encode("utf-8")))


def keep_everything(sizes: Sequence[int]) -> list[int]:
    """Per turn: every turn so far, whole (a running sum)."""
    out: list[int] = []
    running = 0
    for size in sizes:
        running += size
        out.append(running)
    return out


def last_k_window(sizes: Sequence[int], k: int) -> list[int]:
    """Per turn: the newest `k` turns, whole."""
    if k < 1:
        raise ValueError(f"the window must hold at least 1 turn, got {k}")
    out: list[int] = []
    window = 0
    for i, size in enumerate(sizes):
        window += size
        if i >= k:
            window -= sizes[i - k]
        out.append(window)
    return out


def rolling_summary(
    sizes: Sequence[int], summary_sizes: Sequence[int], cap: int, keep_last: int = 1
) -> list[int]:
    """Per turn: a summary of the turns before the newest `keep_last` (capped at `cap`),
    plus those newest turns whole.

    The summary of a turn is its one-line summary (`summary_sizes[i]`); the running
    summary keeps the newest lines that fit in `cap`, so its size is
    min(cap, sum of the summarised lines). What the cap cuts is what this strategy loses.
    """
    if len(summary_sizes) != len(sizes):
        raise ValueError("give one summary size per turn")
    if cap < 0 or keep_last < 1:
        raise ValueError("cap must be 0 or more and keep_last at least 1")
    window = last_k_window(sizes, keep_last)
    out: list[int] = []
    summarised = 0
    for i in range(len(sizes)):
        if i >= keep_last:
            summarised += summary_sizes[i - keep_last]
        out.append(min(cap, summarised) + window[i])
    return out


@dataclass(frozen=True)
class StrategyRun:
    """What one strategy sends on each turn of a stream."""

    name: str
    per_turn: list[int]

    @property
    def total(self) -> int:
        return sum(self.per_turn)

    @property
    def last(self) -> int:
        return self.per_turn[-1] if self.per_turn else 0


def compare_strategies(
    sizes: Sequence[int],
    summary_sizes: Sequence[int],
    context_sizes: Sequence[int],
    *,
    window: int,
    summary_cap: int,
) -> list[StrategyRun]:
    """The four strategies over one stream, in the order the report shows them."""
    if len(context_sizes) != len(sizes):
        raise ValueError("give one Chain of Recall context size per turn")
    return [
        StrategyRun("keep everything", keep_everything(sizes)),
        StrategyRun(f"last {window} turns", last_k_window(sizes, window)),
        StrategyRun("rolling summary", rolling_summary(sizes, summary_sizes, summary_cap)),
        StrategyRun("Chain of Recall", list(context_sizes)),
    ]

"""The arithmetic of resending history, checked against the seed and by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from chainrecall.context.strategies import (
    compare_strategies,
    keep_everything,
    last_k_window,
    resend_table,
    resend_total,
    rolling_summary,
    text_profile,
)
from tests.conftest import shared_path


def test_the_seeds_resend_table_is_reproduced_exactly() -> None:
    rows = [(r.turns, r.history, r.total, r.multiple, r.multiple_text) for r in resend_table()]
    assert rows == [
        (3, 3, 6, Fraction(2), "2x"),
        (6, 6, 21, Fraction(7, 2), "3.5x"),
        (10, 10, 55, Fraction(11, 2), "5.5x"),
        (20, 20, 210, Fraction(21, 2), "10.5x"),
    ]


def test_keeping_everything_over_equal_turns_sends_n_n_plus_1_over_2() -> None:
    for n in range(1, 40):
        assert sum(keep_everything([1] * n)) == resend_total(n) == n * (n + 1) // 2
    with pytest.raises(ValueError):
        resend_total(-1)


def test_strategies_match_hand_computed_sizes() -> None:
    sizes, summaries = [10, 20, 30, 40], [3, 4, 5, 6]
    assert keep_everything(sizes) == [10, 30, 60, 100]
    assert last_k_window(sizes, 2) == [10, 30, 50, 70]
    assert last_k_window(sizes, 1) == sizes
    # Turn 3: summary of turns 1-2 is 3+4=7 (under the cap 8), plus turn 3 whole (30).
    # Turn 4: summary of turns 1-3 is 12, capped at 8, plus 40.
    assert rolling_summary(sizes, summaries, cap=8) == [10, 23, 37, 48]
    assert rolling_summary(sizes, summaries, cap=100, keep_last=2) == [10, 30, 53, 77]
    runs = compare_strategies(sizes, summaries, [7, 7, 8, 8], window=2, summary_cap=8)
    assert [(r.name, r.total, r.last) for r in runs] == [
        ("keep everything", 200, 100),
        ("last 2 turns", 160, 70),
        ("rolling summary", 118, 48),
        ("Chain of Recall", 30, 8),
    ]
    with pytest.raises(ValueError):
        last_k_window(sizes, 0)


def test_vietnamese_takes_more_bytes_a_character_than_ascii_english() -> None:
    assert text_profile("Tiếng Việt").bytes == 14 and text_profile("Tiếng Việt").chars == 10
    assert text_profile("plain ASCII English").bytes_per_char == 1.0
    seed = shared_path("seeds", "001_69ccfb35315e53c7.txt").read_text(encoding="utf-8")
    prose = "\n".join(line for line in seed.splitlines()
                      if line and not line.startswith(("```", "|", "-", "#", "$")))  # fmt: skip
    ratio = text_profile(prose).bytes_per_char
    assert 1.25 < ratio < 1.5, ratio  # the seed measures 1.36 on its sample sentence

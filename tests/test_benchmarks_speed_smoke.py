"""The ingest and context benchmarks run end to end at a tiny size (no timing is asserted).

Webhook deliveries, bulk import, context assembly against store size and the
context strategies over a stream: each module's `run` is called on one small
store at the TINY sizes and must answer finite, positive numbers. What the
benchmarks check as they go (every delivery accepted and routed to its PR,
re-imports storing nothing, contexts within budget) fails the run when broken.
The generated GitHub deliveries are checked here against the routing rules
too, since the speed measured is only worth as much as the traffic is real.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import chainrecall
from benchmarks import bulk_import, context_assembly, context_strategies, dataset, webhooks
from benchmarks.common import TINY, Section, Target
from benchmarks.dataset import Dataset
from benchmarks.github_payloads import SECRET, deliveries, write_github_dir
from chainrecall.ingest import bulk, github
from chainrecall.ingest.common import Lookup

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    path = str(tmp_path_factory.mktemp("bench-speed") / "tiny.db")
    return dataset._grow(path, 0, TINY.sizes[0], [], 0.0, None)


@pytest.mark.parametrize("module", [webhooks, bulk_import, context_assembly])
def test_each_speed_benchmark_produces_finite_positive_numbers(
    tiny_store: Dataset, module: object
) -> None:
    section: Section = module.run([tiny_store], TINY)  # type: ignore[attr-defined]
    assert section.name == module.NAME  # type: ignore[attr-defined]
    _finite_positive(section)


def test_the_strategies_benchmark_measures_every_strategy_and_plots_them(
    tiny_store: Dataset,
) -> None:
    path = context_strategies.image_path(TINY)
    path.unlink(missing_ok=True)
    section = context_strategies.run([tiny_store], TINY)
    _finite_positive(section)
    for strategy in ("keep", "last", "rolling", "chain"):
        assert section.numbers[f"total_bytes@{strategy}"] > 0
    # keep everything resends every turn: it sends the most, over any stream
    assert section.numbers["total_bytes@keep"] == max(
        section.numbers[f"total_bytes@{s}"] for s in ("keep", "last", "rolling", "chain")
    )
    assert section.numbers["last_turn_bytes@chain"] <= context_strategies.BUDGET
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _finite_positive(section: Section) -> None:
    assert section.numbers, "the benchmark reported no numbers"
    for name, value in section.numbers.items():
        assert math.isfinite(value) and value > 0, f"{name} = {value}"
    assert "|" in section.markdown()


def test_generated_deliveries_are_signed_accepted_and_routed_to_their_pr(
    tmp_path: Path,
) -> None:
    items = deliveries(9)  # one whole PR cycle (8), and the next PR's opening
    assert len({item.delivery_id for item in items}) == len(items)
    with chainrecall.open(str(tmp_path / "gh.db")) as memory:
        stored = []
        for item in items:
            header = item.headers()["X-Hub-Signature-256"]
            assert github.match_signature([("default", SECRET)], item.body, header) == "default"
            planned = github.plan_delivery(
                event=item.event, delivery_id=item.delivery_id, body=item.body,
                content_type="application/json", lookup=Lookup(memory),
            )  # fmt: skip
            trigger, created = memory.record_triggers([planned])[0]
            assert created
            stored.append(trigger)
        keys = [memory.get_thread(t.thread_id).key for t in stored]
    # CI without pull_requests[] finds the PR by head SHA (check_run) and branch (workflow_job)
    assert keys[:8] == ["github:acme-payments/ledger#1"] * 8
    assert keys[8] == "github:acme-payments/ledger#2"
    assert [item.event for item in items[:2]] == ["pull_request", "check_run"]
    assert stored[0].id in stored[1].refs  # CI cites the PR update it ran on
    assert stored[3].in_reply_to == stored[2].id  # the review reply names its comment
    assert "3 of 119 tests red" in stored[1].summary


def test_a_generated_github_dir_imports_once(tmp_path: Path) -> None:
    folder = tmp_path / "deliveries"
    write_github_dir(folder, deliveries(10, salt="t"))
    with chainrecall.open(str(tmp_path / "import.db")) as memory:
        first = bulk.import_path(memory, folder)
        again = bulk.import_path(memory, folder)
    assert (first.items, first.added, first.already_present) == (10, 10, 0)
    assert (again.items, again.added, again.already_present) == (10, 0, 10)


def test_a_target_can_be_a_ceiling() -> None:
    assert Target("t", 1.1, 1.25, at_most=True).met
    assert not Target("t", 1.3, 1.25, at_most=True).met
    section = Section("s", "S", "i", "c", targets=[Target("flat", 1.3, 1.25, at_most=True)])
    assert "flat: 1.30 (goal <= 1.25): **missed**" in section.markdown()

"""The benchmarks run end to end at a tiny size and produce numbers (no timing is asserted).

Each benchmark module's `run` is called on one small store, built here in a
temporary directory through the same dataset code the real runs use; the
test checks that every benchmark answers a section whose numbers are finite
and positive, and that the report renders. Speed itself is measured by
`python -m benchmarks.run`, never asserted in a test.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from benchmarks import dataset, deep_page, fetch_embedded, fetch_http, ingest, run, scale
from benchmarks.common import TINY, Section
from benchmarks.dataset import Dataset
from tests.conftest import postgres_schema_url

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """A 1000-trigger store: 100 in the deep thread, the rest in threads of 20."""
    path = str(tmp_path_factory.mktemp("bench") / "tiny.db")
    return dataset._grow(path, 0, TINY.sizes[0], [], 0.0, None)


def test_a_generated_store_holds_the_deep_thread_and_a_sample_of_real_ids(
    tiny_store: Dataset,
) -> None:
    import chainrecall

    assert tiny_store.deep_thread_events == TINY.sizes[0] // dataset.DEEP_EVERY
    assert len(tiny_store.sample_ids) == TINY.sizes[0]  # under SAMPLE_SIZE: every ID is kept
    with chainrecall.open(tiny_store.url) as memory:
        for trigger_id in random.Random(0).sample(tiny_store.sample_ids, 5):
            assert memory.get_trigger(trigger_id).id == trigger_id


@pytest.mark.parametrize("module", [fetch_http, fetch_embedded, ingest, deep_page, scale])
def test_each_benchmark_produces_finite_positive_numbers(
    tiny_store: Dataset, module: object
) -> None:
    section: Section = module.run([tiny_store], TINY)  # type: ignore[attr-defined]
    assert section.name == module.NAME  # type: ignore[attr-defined]
    assert section.numbers, "the benchmark reported no numbers"
    for name, value in section.numbers.items():
        assert math.isfinite(value) and value > 0, f"{name} = {value}"
    assert "|" in section.markdown()


def test_on_postgresql_fetch_and_the_process_scaling_run_and_report_rows() -> None:
    """The PostgreSQL path: one database grown in place, our server alone, 1 and 2 processes."""
    for url in postgres_schema_url():
        (grow,) = dataset.postgres_datasets(url, [TINY.sizes[0]])
        store = grow()
        assert store.is_postgres and store.triggers == TINY.sizes[0]
        fetched = fetch_http.run([store], TINY)
        assert "PostgreSQL" in fetched.tables[0].rows[0][0]
        scaled = scale.run([store], TINY, processes=(1, 2))
        assert [row[1:3] for row in scaled.tables[0].rows] == [
            ["PostgreSQL", "1"],
            ["PostgreSQL", "2"],
        ]
        for section in (fetched, scaled):
            assert section.numbers
            for name, value in section.numbers.items():
                assert math.isfinite(value) and value > 0, f"{name} = {value}"


def test_the_report_replaces_only_the_sections_it_ran(tmp_path: Path) -> None:
    report = tmp_path / "benchmarks.md"
    first = Section(name="a", title="A", intro="one", command="x")
    second = Section(name="b", title="B", intro="two", command="y")
    run.write_report(report, "# head\n", [first, second], replace_only=False)
    rerun = Section(name="a", title="A", intro="one again", command="x")
    run.write_report(report, "# ignored\n", [rerun], replace_only=True)
    text = report.read_text()
    assert "one again" in text and "two" in text and "# head" in text
    assert "one\n" not in text and "# ignored" not in text

"""`chainrecall demo`: the bundled week loads (idempotently) and the three-hop recall prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from chainrecall.demo.week import (
    STORY_THREAD_KEY,
    ReportSpec,
    TriggerSpec,
    WorkerSpec,
    generate_week,
)
from chainrecall.service import Memory
from chainrecall.store import open_store
from tests.servers import cli_env


def test_the_generated_week_is_a_team_week_with_the_payments_story() -> None:
    week = generate_week()
    assert week == generate_week()  # seeded: the same every run
    triggers = [a for a in week if isinstance(a, TriggerSpec)]
    assert len(triggers) >= 300
    assert len({t.thread_key for t in triggers}) >= 20
    assert {t.source for t in triggers} == {"chat", "github", "ci"}
    assert len([a for a in week if isinstance(a, WorkerSpec)]) >= 3
    assert len([a for a in week if isinstance(a, ReportSpec)]) >= 3
    ci_failed = next(t for t in triggers if t.name == "ci_failed")
    assert ci_failed.thread_key == STORY_THREAD_KEY
    assert 40 * 1024 <= len(str(ci_failed.payload).encode()) <= 48 * 1024
    assert str(ci_failed.payload).count("PaymentTimeout") >= 3


def test_demo_prints_the_three_hop_recall_and_a_rerun_stores_nothing_new(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    command = [sys.executable, "-m", "chainrecall", "demo", "--db", db]
    first = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr

    memory = Memory(open_store(db))
    thread = memory.find_thread(STORY_THREAD_KEY)
    [worker_id] = thread.owner_workers
    report = memory.get_worker(worker_id).report
    assert report is not None
    [ci_id] = report.refs
    assert memory.get_trigger(ci_id).kind == "run.failed"
    out = first.stdout
    assert 'search(query="why did we add retry logic to the payment client?")' in out
    assert f'hop 1  get_thread(id="{thread.id}")' in out
    assert f'hop 2  get_worker(id="{worker_id}")' in out
    assert f'hop 3  get_trigger_payload(id="{ci_id}")  41 KB read' in out
    assert "hop 4" not in out
    assert "3 failed, 412 passed" in out
    assert out.count("PaymentTimeout: POST https://sandbox.gateway.example/v1/charges") >= 3
    assert "We added retry logic to the payment client because CI #8812 failed" in out
    triggers_before = memory.store.list_events("default", thread.id, 0, 500)[0]
    memory.close()

    second = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "(0 new)" in second.stdout and "0 new reports" in second.stdout
    assert f'hop 3  get_trigger_payload(id="{ci_id}")' in second.stdout
    memory = Memory(open_store(db))
    assert memory.store.list_events("default", thread.id, 0, 500)[0] == triggers_before
    memory.close()

"""Bulk import rate: `chainrecall import` of a JSONL file and of a folder of GitHub deliveries.

For each store size, on a scratch copy of the store, the `chainrecall import`
command (run in-process through its Typer app, so the rate is the command's
and not Python's start-up) reads a generated JSONL file of triggers, then a
generated github-dir folder of saved deliveries (benchmarks/github_payloads.py,
routed and linked like live ones). Each import is run twice: the second run
must store nothing (every item has a dedupe key), and its rate is what
resuming an interrupted import costs. The rate counts everything the command
does: reading and checking the whole input first, planning each item, and
storing batches of 500 in one durable transaction each.

Rerun: `python -m benchmarks.run --full --only bulk_import`
"""

from __future__ import annotations

import importlib
import json
import random
import re
import shutil
import time
import uuid
from pathlib import Path

from typer.testing import CliRunner

from benchmarks.common import Mode, Section, Table, load_note, rate, size_label
from benchmarks.dataset import OUT_DIR, Dataset, remove_sqlite, scratch_copy
from benchmarks.github_payloads import deliveries, write_github_dir
from chainrecall.cli import app

NAME = "bulk_import"
_REPORT = re.compile(r"(\d+) items read from .*: (\d+) stored, (\d+) already present")
_SOURCES = [
    ("slack", "message", "chat:#payments"), ("ticket", "ticket.comment", "ticket:OPS-"),
    ("ci", "ci.finished", "ci:ledger:run-"), ("email", "email.received", "mail:thread-"),
]  # fmt: skip
_TEXT = (
    "The settlement batch for the EU region failed again at 02:14 UTC; the bank answered 504 "
    "after 30 s and the retry booked the same transfer twice. Rolling back the duplicate now."
)


def write_jsonl(path: Path, count: int, salt: str) -> None:
    """`count` triggers as `chainrecall import` reads them: one POST /triggers body a line.

    Three lines in four carry their own dedupe key; the rest are deduplicated by
    content (the importer derives a key), as a hand-written export would be.
    """
    rng = random.Random(count)
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            source, kind, key = _SOURCES[n % len(_SOURCES)]
            words = _TEXT.split()
            start = rng.randrange(len(words) - 12)
            text = " ".join(words[start : start + 12 + rng.randrange(12)])
            line: dict[str, object] = {
                "source": source, "kind": kind, "thread_key": f"{key}{salt}-{n % 300}",
                "summary": f"{source} {n}: {text[:80]}", "author": f"user{n % 40}",
                "occurred_at": f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z",
                "payload": {"text": f"{text} ({salt} {n})", "n": n, "tags": [source, kind]},
            }  # fmt: skip
            if n % 4:
                line["dedupe_key"] = f"{source}:{salt}:{n}"
            out.write(json.dumps(line) + "\n")


def run(datasets: list[Dataset], mode: Mode) -> Section:
    section = Section(
        name=NAME,
        title="Bulk import (`chainrecall import`)",
        intro=(
            f"*JSONL*: a file of {mode.import_jsonl:,} triggers (chat, ticket, CI and e-mail "
            "lines of about 400 bytes, 300 threads; a quarter without a dedupe key); "
            f"*github-dir*: a folder of {mode.import_github:,} saved GitHub deliveries "
            "(8 to 26 KB each, whole PR life cycles). *re-run*: the same import again, "
            "which stores nothing: the cost of resuming. Rates are items per second of the "
            "whole command (check pass over the input, planning, batches of 500 per "
            "durable transaction), in-process; each store size on a scratch copy."
        ),
        command=f"python -m benchmarks.run --{mode.name} --only {NAME}",
    )
    section.notes.append(load_note())
    table = Table(
        ["triggers in store", "JSONL /s", "JSONL re-run /s", "github-dir /s",
         "github-dir re-run /s"]
    )  # fmt: skip
    work = OUT_DIR / "scratch" / f"import-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    runner = CliRunner()
    for module in ("rich.progress", "chainrecall.ingest.bulk", "chainrecall.auth"):
        importlib.import_module(module)  # what the command imports when run: not its rate
    try:
        for dataset in datasets if mode.every_size else datasets[-1:]:
            salt = uuid.uuid4().hex[:8]
            jsonl = work / f"triggers-{salt}.jsonl"
            write_jsonl(jsonl, mode.import_jsonl, salt)
            folder = work / f"github-{salt}"
            write_github_dir(folder, deliveries(mode.import_github, salt=salt))
            url = dataset.url if dataset.is_postgres else scratch_copy(dataset, NAME)
            try:
                rates = [
                    _import(runner, url, path, expected, again)
                    for path, expected in ((jsonl, mode.import_jsonl), (folder, mode.import_github))
                    for again in (False, True)
                ]
            finally:
                if not dataset.is_postgres:
                    remove_sqlite(url)
            label = size_label(dataset.triggers)
            table.rows.append([label, *(rate(r) for r in rates)])
            for name, value in zip(
                ("jsonl", "jsonl_rerun", "github_dir", "github_dir_rerun"), rates, strict=True
            ):
                section.numbers[f"{name}_per_s@{label}"] = value
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section.tables.append(table)
    section.notes.append(
        "run in-process (`typer.testing.CliRunner` over `chainrecall.cli.app`); the command "
        "as a process adds Python's start-up, about a second on this machine, once per import"
    )
    return section


def _import(runner: CliRunner, url: str, path: Path, expected: int, again: bool) -> float:
    """Items per second of one `chainrecall import`; checks what it stored."""
    began = time.perf_counter()
    result = runner.invoke(app, ["import", str(path), "--db", url])
    elapsed = time.perf_counter() - began
    found = _REPORT.search(result.output)
    if result.exit_code != 0 or found is None:
        raise RuntimeError(
            f"chainrecall import {path} failed ({result.exit_code}): {result.output}"
        )
    items, stored, present = (int(g) for g in found.groups())
    want = (expected, 0, expected) if again else (expected, expected, 0)
    if (items, stored, present) != want:
        raise RuntimeError(
            f"chainrecall import {path}{' again' if again else ''} read {items}, stored "
            f"{stored}, found {present} present; expected {want}"
        )
    return items / elapsed

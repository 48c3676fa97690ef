"""Bulk import: a JSONL file of triggers, an mbox, or a folder of saved GitHub deliveries.

The whole input is checked first, so a malformed line or file stops the
import before anything is stored. Triggers are then written in batches, one
transaction each, through the same adapters as the HTTP routes. An adapter
that asks about an alias a still-unwritten trigger of the batch claims (a
reply to an e-mail two lines up) flushes the batch first, so batching never
changes where anything lands. Every item has a dedupe key (its own, or one
derived from its content), so re-running an import, also after it was
interrupted, adds nothing twice.
"""

from __future__ import annotations

import json
import mailbox
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.ingest import email as email_ingest
from chainrecall.ingest import github
from chainrecall.ingest.common import Lookup, content_digest
from chainrecall.model import NewTrigger
from chainrecall.service import Memory

Format = Literal["jsonl", "mbox", "github-dir"]
FORMATS: tuple[Format, ...] = ("jsonl", "mbox", "github-dir")
DEFAULT_BATCH = 500
MAX_REPORTED_ERRORS = 10

JSONL_FIELDS = frozenset(
    {
        "source", "kind", "thread_key", "thread_id", "summary", "payload", "occurred_at",
        "dedupe_key", "author", "in_reply_to", "refs", "thread_title", "thread_status",
    }
)  # fmt: skip
_GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


@dataclass
class ImportStats:
    """What an import did: items read, triggers stored now, and those already present."""

    items: int = 0
    added: int = 0
    already_present: int = 0


class BatchWriter:
    """Collects triggers and stores them `size` at a time, each batch in one transaction."""

    def __init__(self, memory: Memory, size: int, stats: ImportStats) -> None:
        self.memory = memory
        self.size = max(1, size)
        self.stats = stats
        self.pending: list[NewTrigger] = []
        self.pending_aliases: set[str] = set()

    def add(self, item: NewTrigger) -> None:
        self.pending.append(item)
        self.pending_aliases.update(item.aliases)
        self.pending_aliases.update(item.thread_aliases)
        if len(self.pending) >= self.size:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        for _trigger, created in self.memory.record_triggers(self.pending):
            if created:
                self.stats.added += 1
            else:
                self.stats.already_present += 1
        self.pending.clear()
        self.pending_aliases.clear()


class BatchLookup(Lookup):
    """A Lookup that first writes the batch when it is asked about a name the batch claims."""

    def __init__(self, memory: Memory, writer: BatchWriter) -> None:
        super().__init__(memory)
        self.writer = writer

    def resolve(self, alias: str) -> str | None:
        if alias in self.writer.pending_aliases:
            self.writer.flush()
        return super().resolve(alias)


def detect_format(path: Path) -> Format:
    """The format of `path` when it is obvious; InvalidInput asking for --format otherwise."""
    if path.is_dir():
        return "github-dir"
    suffix = path.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        return "jsonl"
    if suffix in {".mbox", ".mbx"}:
        return "mbox"
    with path.open("rb") as handle:
        head = handle.read(5)
    if head == b"From ":
        return "mbox"
    if head.lstrip()[:1] == b"{":
        return "jsonl"
    raise InvalidInput(
        f"cannot tell the format of {path}; pass --format jsonl, mbox or github-dir",
        field="format",
    )


def resolve_format(path: Path, fmt: str | None) -> Format:
    """The format to read `path` with: `fmt` when given and fitting, else detected."""
    if not path.exists():
        raise InvalidInput(f"{path} does not exist", field="path")
    if fmt is None:
        return detect_format(path)
    for known in FORMATS:
        if fmt == known:
            if known == "github-dir" and not path.is_dir():
                raise InvalidInput(f"{path} is not a folder of GitHub deliveries", field="path")
            if known != "github-dir" and path.is_dir():
                raise InvalidInput(f"{path} is a folder; a {known} import reads one file")
            return known
    raise InvalidInput(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}", field="format")


# -- reading each format --------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    where: str  # file and line / message number, for error messages
    plan: Callable[[Lookup], NewTrigger]


def _jsonl_items(path: Path) -> Iterator[_Item]:
    seen: dict[str, int] = {}
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                fields = _jsonl_fields(line)
            except InvalidInput as exc:
                yield _Item(where, _refuse(exc))  # reported with the others, in order
                continue
            if fields.get("dedupe_key") is None:
                # content-derived, counted among identical lines: stable across re-runs
                digest = content_digest(line.strip())
                seen[digest] = seen.get(digest, 0) + 1
                fields["dedupe_key"] = f"import:{digest}:{seen[digest]}"
            yield _Item(where, _static(fields))


def _jsonl_fields(line: bytes) -> dict[str, Any]:
    try:
        fields = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"not a JSON object ({exc})") from None
    if not isinstance(fields, dict):
        raise InvalidInput("each line must be one JSON object (a trigger)")
    unknown = sorted(set(fields) - JSONL_FIELDS)
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {', '.join(unknown)}; a line has the fields of POST "
            "/triggers: " + ", ".join(sorted(JSONL_FIELDS))
        )
    if "payload" not in fields:
        raise InvalidInput("`payload` is required (any JSON value or a string)")
    return fields


def _refuse(exc: InvalidInput) -> Callable[[Lookup], NewTrigger]:
    def plan(_lookup: Lookup) -> NewTrigger:
        raise exc

    return plan


def _static(fields: dict[str, Any]) -> Callable[[Lookup], NewTrigger]:
    def plan(_lookup: Lookup) -> NewTrigger:
        return Memory.new_trigger(**fields)

    return plan


def _mbox_items(path: Path) -> Iterator[_Item]:
    box = mailbox.mbox(str(path), create=False)
    try:
        for number, key in enumerate(box.keys(), start=1):
            raw = box.get_bytes(key)
            yield _Item(f"{path} message {number}", _email(raw))
    finally:
        box.close()


def _email(raw: bytes) -> Callable[[Lookup], NewTrigger]:
    def plan(lookup: Lookup) -> NewTrigger:
        return email_ingest.plan_email(raw, lookup)

    return plan


def github_delivery_files(root: Path) -> list[tuple[str, Path]]:
    """(event, file) for each saved delivery under `root`, in the order to replay them.

    The event is the name of the folder under `root` (`root/pull_request/x.json`);
    files directly in `root` take `root`'s own name, so one event's folder imports too.
    Deliveries replay in the order of their file names across folders (name them by
    time or sequence number), since routing a check run to its PR needs the PR first.
    """
    found = []
    for path in sorted(root.rglob("*.json"), key=lambda p: (p.name, str(p))):
        parts = path.relative_to(root).parts
        event = parts[0] if len(parts) > 1 else root.name
        found.append((event, path))
    return found


def _github_items(root: Path) -> Iterator[_Item]:
    for event, path in github_delivery_files(root):
        body = path.read_bytes()
        stem = path.name.split(".")[0]
        # a saved file named by its X-GitHub-Delivery GUID dedupes against the live delivery
        delivery = stem if _GUID.match(stem) else f"import:{content_digest(event.encode(), body)}"
        yield _Item(str(path), _github(event, delivery, body))


def _github(event: str, delivery: str, body: bytes) -> Callable[[Lookup], NewTrigger]:
    try:
        github.check_event_name(event)
        payload = github.parse_body(body, "application/json")
    except InvalidInput as exc:
        return _refuse(exc)

    def plan(lookup: Lookup) -> NewTrigger:
        return github.plan_delivery(
            event=event, delivery_id=delivery, body=body, content_type="application/json",
            lookup=lookup, payload=payload,
        )  # fmt: skip

    return plan


def _items(path: Path, fmt: Format) -> Iterator[_Item]:
    if fmt == "jsonl":
        return _jsonl_items(path)
    if fmt == "mbox":
        return _mbox_items(path)
    return _github_items(path)


# -- running an import ------------------------------------------------------------------------


def check_input(path: Path, fmt: Format) -> int:
    """Read and check every item without storing; the item count, or InvalidInput listing errors.

    Checks what can be checked without the store: JSON syntax and fields, e-mail
    headers, GitHub event names and bodies. Items are planned against an empty
    view of the store, which catches malformed payloads of every source.
    """
    errors: list[str] = []
    count = 0
    blind = _NoLookup()
    iterator = _items(path, fmt)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            break
        except ChainRecallError as exc:
            errors.append(exc.detail)
            break  # a reader that failed cannot go on past the bad item
        count += 1
        try:
            item.plan(blind)
        except ChainRecallError as exc:
            errors.append(f"{item.where}: {exc.detail}")
        if len(errors) >= MAX_REPORTED_ERRORS:
            break
    if errors:
        raise InvalidInput(
            f"nothing was imported: {len(errors)} bad item(s) in {path}"
            + (" (the first ones)" if len(errors) >= MAX_REPORTED_ERRORS else "")
            + ":\n  "
            + "\n  ".join(errors)
        )
    return count


class _NoLookup(Lookup):
    def __init__(self) -> None:
        pass

    def resolve(self, alias: str) -> str | None:
        return None

    def thread_of(self, trigger_id: str) -> str | None:
        return None

    def thread_key(self, thread_id: str) -> str | None:
        return None


def import_path(
    memory: Memory,
    path: Path,
    fmt: Format | None = None,
    *,
    batch_size: int = DEFAULT_BATCH,
    on_item: Callable[[int], None] | None = None,
    checked: bool = False,
) -> ImportStats:
    """Import `path` into `memory`; re-running adds nothing twice.

    `on_item(n)` is called as items are read (for a progress bar). Unless
    `checked`, the whole input is checked first (`check_input`).
    """
    fmt = resolve_format(path, fmt)
    if not checked:
        check_input(path, fmt)
    stats = ImportStats()
    writer = BatchWriter(memory, batch_size, stats)
    lookup = BatchLookup(memory, writer)
    for item in _items(path, fmt):
        try:
            planned = item.plan(lookup)
        except ChainRecallError as exc:
            writer.flush()  # what came before is good: a re-run resumes after it
            exc.detail = f"{item.where}: {exc.detail}"
            raise
        try:
            writer.add(planned)
        except ChainRecallError as exc:
            exc.detail = f"in the batch ending at {item.where}: {exc.detail}"
            raise
        stats.items += 1
        if on_item is not None:
            on_item(1)
    writer.flush()
    return stats

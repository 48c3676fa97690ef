"""What every ingest adapter shares: store lookups, body parsing, HMAC, and log facts.

`Lookup` is the one way an adapter asks the store about earlier deliveries
(an alias such as a PR's head SHA, the thread of a trigger); the bulk importer
subclasses it to batch writes without losing those answers. The log helpers
pull the facts people search for (failed and total test counts, the directory
the failures are in) out of CI output without a model.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.model import normalize_timestamp
from chainrecall.service import Memory
from chainrecall.store.base import one_line


class Lookup:
    """Answers the cross-event questions of ingest from one namespace's store."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def resolve(self, alias: str) -> str | None:
        """The trigger or thread ID an earlier delivery claimed `alias` for, or None."""
        return self.memory.resolve_alias(alias)

    def thread_of(self, trigger_id: str) -> str | None:
        """The thread a stored trigger is on (None when it is gone)."""
        try:
            return self.memory.get_trigger(trigger_id).thread_id
        except ChainRecallError:
            return None

    def thread_key(self, thread_id: str) -> str | None:
        """The natural key of a thread (None when it is gone)."""
        try:
            return self.memory.get_thread(thread_id).key
        except ChainRecallError:
            return None


def parse_json_object(body: bytes, what: str) -> dict[str, Any]:
    """A request body that must be one JSON object, or InvalidInput saying why not."""
    if not body.strip():
        raise InvalidInput(f"the {what} body is empty; send one JSON object", field="body")
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the {what} body is not valid JSON: {exc}", field="body") from None
    if not isinstance(value, dict):
        raise InvalidInput(
            f"the {what} body must be a JSON object, not {type(value).__name__}", field="body"
        )
    return value


def hmac_sha256_hex(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()


def content_digest(*parts: bytes) -> str:
    """A stable short digest of some bytes: the dedupe key of a delivery without an ID."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:32]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def clip(text: Any, limit: int = 80) -> str:
    """One printable line of at most `limit` characters from any value ("" for None).

    Control characters are dropped: a comment with a stray escape code is still a
    comment worth storing, and summaries must be plain text.
    """
    if text is None:
        return ""
    return one_line(_CONTROL.sub(" ", str(text)), limit)


def timestamp_or_none(value: Any) -> str | None:
    """A payload's time in the canonical form, or None when it has none or an odd one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return normalize_timestamp(value)
    except InvalidInput:
        return None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# -- facts from CI output ----------------------------------------------------------


@dataclass(frozen=True)
class RunCounts:
    failed: int
    total: int | None


_PYTEST_SUMMARY = re.compile(
    r"=+ .*?\b(\d+) (?:failed|passed|errors?|skipped|xfailed|xpassed)\b.* in [\d.]+s.*=+"
)
_PYTEST_PART = re.compile(r"\b(\d+) (failed|passed|errors?)\b")
_JEST_SUMMARY = re.compile(r"^Tests:\s+(.*\btotal)\s*$", re.MULTILINE)
_JEST_PART = re.compile(r"\b(\d+) (failed|passed|total)\b")
_JUNIT_SUMMARY = re.compile(r"Tests run:\s*(\d+),\s*Failures:\s*(\d+),\s*Errors:\s*(\d+)")
_PLAIN_SUMMARY = re.compile(r"\b(\d+) (?:of|/) (\d+) tests? (?:failed|red)\b", re.IGNORECASE)
_FAILED_PATHS = (
    re.compile(r"^(?:FAILED|ERROR) ([\w./-]+?\.\w+)::", re.MULTILINE),  # pytest
    re.compile(r"^\s*FAIL ([\w./-]+\.\w+)\b", re.MULTILINE),  # jest
)


def count_tests(text: str) -> RunCounts | None:
    """Failed and total test counts from a test run's output (pytest, jest, JUnit), if any.

    The last summary line wins: a log may hold several runs, and the final one is
    the verdict.
    """
    found: list[tuple[int, RunCounts]] = []
    for match in _PYTEST_SUMMARY.finditer(text):
        counts = {kind.rstrip("s"): int(n) for n, kind in _PYTEST_PART.findall(match.group(0))}
        failed = counts.get("failed", 0) + counts.get("error", 0)
        found.append((match.start(), RunCounts(failed, failed + counts.get("passed", 0))))
    for match in _JEST_SUMMARY.finditer(text):
        parts = {kind: int(n) for n, kind in _JEST_PART.findall(match.group(1))}
        found.append((match.start(), RunCounts(parts.get("failed", 0), parts.get("total"))))
    for match in _JUNIT_SUMMARY.finditer(text):
        total, failures, errors = (int(g) for g in match.groups())
        found.append((match.start(), RunCounts(failures + errors, total)))
    for match in _PLAIN_SUMMARY.finditer(text):
        found.append((match.start(), RunCounts(int(match.group(1)), int(match.group(2)))))
    if not found:
        return None
    return max(found, key=lambda item: item[0])[1]


def failing_area(text: str, names: list[str] | None = None) -> str | None:
    """The directory all failing test files share (e.g. `payments/`), when there is one."""
    paths = list(names or [])
    for pattern in _FAILED_PATHS:
        paths.extend(pattern.findall(text))
    dirs = {posixpath.dirname(p.split("::")[0]) for p in paths if "/" in p.split("::")[0]}
    if not dirs or len(paths) == 0:
        return None
    try:
        common = posixpath.commonpath(sorted(dirs))
    except ValueError:
        return None
    return common + "/" if common and common not in {".", "/"} else None


def describe_counts(counts: RunCounts | None, area: str | None) -> str:
    """`3 of 118 tests red in payments/`, or "" when nothing is known."""
    if counts is None or (counts.failed == 0 and counts.total is None):
        return ""
    if counts.failed == 0:
        text = f"all {counts.total} tests green"
    elif counts.total:
        text = f"{counts.failed} of {counts.total} tests red"
    else:
        text = f"{counts.failed} tests red"
    if area and counts.failed:
        text += f" in {area}"
    return text

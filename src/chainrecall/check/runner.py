"""Running the checks against one deployment and collecting one result per check.

`run_checks` decides which checks run (all; or, with `--read-only`, those that
write nothing), runs them one after another against a `Session`, and turns
each outcome into a `CheckResult`: passed, failed (with the rule, the request
and the answer), or skipped (with the reason). A check that crashes counts as
failed, with the error, so a bug in the checker never reads as a pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from chainrecall.check.checks import CHECKS, Check
from chainrecall.check.session import CheckFailed, CheckOptions, CheckSkipped, Exchange, Session

Outcome = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class CheckResult:
    name: str
    title: str
    rule: str
    outcome: Outcome
    message: str = ""
    exchange: Exchange | None = None
    notes: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "rule": self.rule,
            "outcome": self.outcome,
            "message": self.message,
            "exchange": self.exchange.to_json() if self.exchange else None,
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
        }


@dataclass
class RunReport:
    """Everything one `chainrecall check` run found."""

    base_url: str
    read_only: bool
    thread_keys: list[str]
    thread_ids: list[str]
    results: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    requests: int = 0
    rate_limited: int = 0  # 429 answers the checker waited out and retried

    def count(self, outcome: Outcome) -> int:
        return sum(1 for result in self.results if result.outcome == outcome)

    @property
    def passed(self) -> bool:
        """True when no check failed (skips are reported, and do not fail the run)."""
        return self.count("fail") == 0

    def result(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no check named {name!r} ran; see chainrecall.check.CHECKS")

    def writes_note(self) -> str:
        if self.read_only:
            return "read-only: this run wrote nothing"
        keys = ", ".join(self.thread_keys)
        ids = ", ".join(self.thread_ids) or "none created"
        return f"this run wrote only into threads of its own: thread_key {keys} ({ids})"

    def to_json(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "read_only": self.read_only,
            "writes": self.writes_note(),
            "thread_keys": self.thread_keys,
            "thread_ids": self.thread_ids,
            "summary": {
                "passed": self.count("pass"),
                "failed": self.count("fail"),
                "skipped": self.count("skip"),
                "ok": self.passed,
            },
            "seconds": round(self.seconds, 3),
            "requests": self.requests,
            "rate_limited": self.rate_limited,
            "checks": [result.to_json() for result in self.results],
        }


def selected(check: Check, options: CheckOptions) -> bool:
    if check.setup and not options.read_only:
        return True
    return not options.select or any(check.name.startswith(p) for p in options.select)


def run_one(check: Check, session: Session) -> CheckResult:
    session.notes = []
    started = time.monotonic()
    rule = str(check.rule)
    try:
        if check.writes and session.options.read_only:
            raise CheckSkipped("writes, and this run is --read-only")
        check.run(session)
    except CheckFailed as exc:
        return CheckResult(
            check.name, check.title, str(exc.rule or check.rule), "fail", exc.message,
            exc.exchange, tuple(session.notes), time.monotonic() - started,
        )  # fmt: skip
    except CheckSkipped as exc:
        return CheckResult(
            check.name, check.title, rule, "skip", str(exc), None, tuple(session.notes),
            time.monotonic() - started,
        )  # fmt: skip
    except Exception as exc:  # a crash of the checker on an odd answer is a failure, not a pass
        return CheckResult(
            check.name, check.title, rule, "fail",
            f"the check could not complete: {type(exc).__name__}: {exc}", None,
            tuple(session.notes), time.monotonic() - started,
        )  # fmt: skip
    return CheckResult(
        check.name, check.title, rule, "pass", "", None, tuple(session.notes),
        time.monotonic() - started,
    )  # fmt: skip


def run_checks(
    base_url: str,
    options: CheckOptions | None = None,
    *,
    token: str | None = None,
    timeout_s: float = 30.0,
    run_id: str | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> RunReport:
    """Run the contract checks against the deployment at `base_url`.

    `run_id` names the run's own threads (`chainrecall-check:<run_id>`); random by default.
    """
    options = options or CheckOptions()
    session = Session(base_url, token=token, timeout_s=timeout_s, options=options)
    if run_id is not None:
        session.run_id = run_id
    if options.read_only and options.thread:
        session.state["thread"] = options.thread
    report = RunReport(
        base_url=session.base_url,
        read_only=options.read_only,
        thread_keys=[]
        if options.read_only
        else [session.thread_key, session.thread_key + ":other"],
        thread_ids=[],
    )
    started = time.monotonic()
    try:
        for check in CHECKS:
            if not selected(check, options):
                continue
            result = run_one(check, session)
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        session.close()
    if not options.read_only:
        report.thread_ids = [
            str(session.state[key]) for key in ("thread", "other_thread") if key in session.state
        ]
    report.seconds = time.monotonic() - started
    report.requests = session.exchanges
    report.rate_limited = session.rate_limited
    return report


def reachable(base_url: str, token: str | None = None, timeout_s: float = 10.0) -> str | None:
    """None when the deployment answers HTTP at all; else why it cannot be reached."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        httpx.get(base_url.rstrip("/") + "/", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None

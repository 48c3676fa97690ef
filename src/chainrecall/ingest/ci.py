"""CI callbacks from any CI system: one small JSON shape, documented in docs/ingest.md.

A callback says which run (`run_id`), how it stands (`status`), what it ran on
(a PR, a commit, a branch) and, optionally, its log. The body is stored whole,
so a 40 MB log stays retrievable byte for byte; the record and its one-line
summary stay small (`CI failed on PR #412: 3 of 118 tests red in payments/`),
and only the telling lines of the log (failures, errors, the tail) are indexed.

Routing: an explicit `thread_key` wins; with `repository` the run joins the
GitHub threads (`github:{repo}#{pr}`, or the PR / branch / commit its commit
or branch leads to, as for GitHub's own check runs); without one it gets a
thread of its own CI (`ci:{provider}:pr:{n}`, `:branch:{name}`, `:commit:{sha}`,
`:run:{id}`). A callback cites the push or PR update that produced its commit
and the run's previous callback.
"""

from __future__ import annotations

import re
from typing import Any

from chainrecall.errors import InvalidInput
from chainrecall.ingest import github
from chainrecall.ingest.common import (
    Lookup,
    RunCounts,
    clip,
    count_tests,
    describe_counts,
    failing_area,
    parse_json_object,
)
from chainrecall.model import NewTrigger
from chainrecall.service import Memory

SOURCE = "ci"
JSON_TYPE = "application/json"

CI_FIELDS = {
    "run_id": "the run's id in its CI (required; string or integer)",
    "status": "queued, running, passed, failed, cancelled, errored, ... (required)",
    "name": "the job or pipeline name, e.g. tests",
    "provider": "the CI system, e.g. buildkite (default: ci)",
    "attempt": "the attempt number when a run is retried",
    "repository": "owner/name on GitHub, to join the repository's threads",
    "pr": "the pull request number",
    "commit": "the commit SHA that ran",
    "branch": "the branch that ran",
    "thread_key": "put the run on this thread instead",
    "url": "the run's page",
    "log": "the log text (stored whole; only its telling lines are indexed)",
    "log_url": "where the full log lives, when it is not sent",
    "tests": "{total, failed, failed_tests: [names]} when the CI counted them",
    "occurred_at": "when the status was reached, RFC 3339",
}
_STATUS = re.compile(r"^[a-z][a-z_]{0,31}$")
_TELLING_LINE = re.compile(
    r"FAIL|ERROR|Error|error:|Traceback|Exception|panic:|assert|\btimed? ?out\b", re.IGNORECASE
)
_VERDICTS = {
    "success": "passed",
    "succeeded": "passed",
    "passed": "passed",
    "failure": "failed",
    "failed": "failed",
    "error": "errored",
    "errored": "errored",
    "canceled": "cancelled",
    "cancelled": "cancelled",
    "running": "running",
    "in_progress": "running",
    "started": "running",
    "queued": "queued",
    "pending": "queued",
}
MAX_LOG_INDEX_LINES = 200
LOG_TAIL_CHARS = 4096


def run_alias(provider: str, run_id: str) -> str:
    return f"ci:{provider}:run:{run_id}"


def plan_ci(body: bytes, lookup: Lookup) -> NewTrigger:
    """The trigger for one CI callback (validated, not stored); InvalidInput if malformed."""
    data = parse_json_object(body, "CI callback")
    unknown = sorted(set(data) - set(CI_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {', '.join(unknown)}; a CI callback has: " + ", ".join(CI_FIELDS),
            field=unknown[0],
        )
    run_id = data.get("run_id")
    if isinstance(run_id, int) and not isinstance(run_id, bool):
        run_id = str(run_id)
    if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 200:
        raise InvalidInput(f"`run_id` is required: {CI_FIELDS['run_id']}", field="run_id")
    status = data.get("status")
    if not isinstance(status, str) or not _STATUS.match(status.lower()):
        raise InvalidInput(
            f"`status` is required as one lowercase word: {CI_FIELDS['status']}", field="status"
        )
    status = status.lower()
    provider = _opt_str(data, "provider", 60) or "ci"
    name = _opt_str(data, "name", 120)
    repo = _opt_str(data, "repository", 140)
    if repo is not None and repo.count("/") != 1:
        raise InvalidInput(
            "`repository` must be owner/name, e.g. acme/payments", field="repository"
        )
    pr = data.get("pr")
    if pr is not None and (not isinstance(pr, int) or isinstance(pr, bool) or pr < 0):
        raise InvalidInput("`pr` must be a pull request number (an integer)", field="pr")
    commit = _opt_str(data, "commit", 64)
    branch = _opt_str(data, "branch", 250)
    explicit_key = _opt_str(data, "thread_key", 512)
    log = data.get("log")
    if log is not None and not isinstance(log, str):
        raise InvalidInput("`log` must be the log text, a string", field="log")
    log = log or ""
    tests = data.get("tests")
    if tests is not None and not isinstance(tests, dict):
        raise InvalidInput(f"`tests` must be an object: {CI_FIELDS['tests']}", field="tests")
    if tests is not None and not isinstance(tests.get("failed_tests", []), list):
        raise InvalidInput("`tests.failed_tests` must be a list of test names", field="tests")
    attempt = data.get("attempt")
    if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool)):
        raise InvalidInput("`attempt` must be an integer", field="attempt")
    for name_of_url in ("url", "log_url", "occurred_at"):
        _opt_str(data, name_of_url, 2000)

    route = _route(lookup, provider, run_id, repo, pr, commit, branch, explicit_key)
    failed_names = [str(n) for n in (tests or {}).get("failed_tests", []) or [] if n]
    counts = _counts(tests, log)
    facts = describe_counts(counts, failing_area(log, failed_names))
    verdict = _VERDICTS.get(status, status.replace("_", " "))
    summary = f"CI {verdict} on {route.label}" + (f": {facts}" if facts else "")
    summary += f" ({clip(name, 40) + ', ' if name else ''}run {clip(run_id, 30)})"
    refs = []
    if repo and commit:
        cause = lookup.resolve(github.update_alias(repo, commit))
        if cause:
            refs.append(cause)
    previous = lookup.resolve(run_alias(provider, run_id))
    if previous:
        refs.append(previous)
    dedupe = f"{provider}:{run_id}:{status}" + (f":{attempt}" if attempt is not None else "")
    return Memory.new_trigger(
        source=SOURCE,
        kind=f"ci.{status}",
        raw=body,
        content_type=JSON_TYPE,
        search_text=_search_text(summary, data, failed_names, log),
        thread_key=route.thread_key,
        thread_id=route.thread_id,
        thread_title=route.title,
        summary=summary,
        author=provider,
        occurred_at=data.get("occurred_at"),
        dedupe_key=dedupe,
        refs=refs,
        aliases=[run_alias(provider, run_id)],
        thread_aliases=route.thread_aliases,
    )


def _opt_str(data: dict[str, Any], name: str, limit: int) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidInput(
            f"`{name}` must be a non-empty string of at most {limit} characters", field=name
        )
    return value.strip()


def _route(
    lookup: Lookup,
    provider: str,
    run_id: str,
    repo: str | None,
    pr: int | None,
    commit: str | None,
    branch: str | None,
    explicit_key: str | None,
) -> github.Route:
    if explicit_key:
        label = f"PR #{pr}" if pr is not None else github.label_for_key(explicit_key)
        return github.Route(thread_key=explicit_key, label=label or explicit_key)
    if repo:
        route = github.route_commit(
            lookup, repo, sha=commit, branch=branch, pr_numbers=[pr] if pr is not None else []
        )
        if route.label == repo:
            route.label = f"{repo} run {run_id}"
        return route
    scope = f"ci:{provider}"
    if pr is not None:
        return github.Route(thread_key=f"{scope}:pr:{pr}", label=f"PR #{pr}")
    if branch:
        return github.Route(thread_key=f"{scope}:branch:{branch}", label=f"branch {branch}")
    if commit:
        return github.Route(thread_key=f"{scope}:commit:{commit}", label=f"commit {commit[:7]}")
    return github.Route(thread_key=f"{scope}:run:{run_id}", label=f"run {run_id}")


def _counts(tests: dict[str, Any] | None, log: str) -> RunCounts | None:
    if tests:
        failed = tests.get("failed")
        total = tests.get("total")
        names = tests.get("failed_tests")
        if not isinstance(failed, int) and isinstance(names, list):
            failed = len(names)
        if isinstance(failed, int) and not isinstance(failed, bool):
            return RunCounts(failed, total if isinstance(total, int) else None)
    return count_tests(log) if log else None


def _search_text(summary: str, data: dict[str, Any], failed_names: list[str], log: str) -> str:
    """Names, the failing tests, the telling lines of the log and its tail; never all of it."""
    parts = [summary]
    parts += [
        str(data[k]) for k in ("name", "repository", "branch", "commit", "url") if data.get(k)
    ]
    parts += failed_names[:200]
    telling = [line for line in log.splitlines() if _TELLING_LINE.search(line)]
    parts += [line[:300] for line in telling[:MAX_LOG_INDEX_LINES]]
    parts.append(log[-LOG_TAIL_CHARS:])
    return "\n".join(parts)

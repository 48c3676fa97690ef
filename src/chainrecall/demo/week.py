"""A team's week, generated from a seed: chat, GitHub and CI triggers, workers and reports.

`generate_week()` answers the same timeline on every run (seeded `random.Random`):
334 triggers over 26 threads from Monday 2026-11-02 to Friday, with workers
that took threads on and the reports they filed. Among them is the story the
design uses: PR #412 in acme/payments, whose CI run failed with three payment
timeouts (a 41 KB log), and the worker whose report cites that run and says why
retry logic was added to the payment client. Other threads mention retries too
(a flaky e2e test, webhook deliveries), so finding the right one takes recall,
not luck.

`load_week(memory)` records it; every trigger has a dedupe key and workers and
reports are matched to what is already stored, so loading twice stores nothing new.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from chainrecall.model import NewTrigger
from chainrecall.service import Memory

SEED = 20261102
WEEK_START = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)  # Monday
DEMO_SOURCE_PREFIX = "demo"
STORY_THREAD_KEY = "github:acme/payments#412"
QUESTION = "why did we add retry logic to the payment client?"

PEOPLE = ["dana", "li", "omar", "priya", "sam", "tomas", "ana", "kofi"]


@dataclass(frozen=True)
class TriggerSpec:
    at: datetime
    source: str
    kind: str
    thread_key: str
    summary: str
    payload: Any
    author: str | None = None
    thread_title: str | None = None
    thread_status: str | None = None
    name: str | None = None  # a handle for reports that cite this trigger
    content_type: str | None = None


@dataclass(frozen=True)
class WorkerSpec:
    at: datetime
    name: str
    thread_key: str
    task: str


@dataclass(frozen=True)
class ReportSpec:
    at: datetime
    worker: str
    summary: str
    body: str
    refs: tuple[str, ...]
    status: str


Action = TriggerSpec | WorkerSpec | ReportSpec


@dataclass
class LoadedWeek:
    """What `load_week` found or stored: counts, and the IDs of the named objects."""

    triggers: int = 0
    triggers_created: int = 0
    threads: int = 0
    workers: int = 0
    workers_created: int = 0
    reports_created: int = 0
    trigger_ids: dict[str, str] = field(default_factory=dict)
    worker_ids: dict[str, str] = field(default_factory=dict)


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(n: int, hour: int, minute: int = 0) -> datetime:
    return WEEK_START.replace(hour=hour, minute=minute) + timedelta(days=n)


# -- CI logs ----------------------------------------------------------------------
_MODULES = ["charge", "refund", "capture", "webhook", "ledger", "currency", "card", "payout"]
_CASES = ["eu_card", "us_card", "3ds", "declined", "partial", "zero_amount", "retry_safe", "jpy"]


def pytest_log(
    rng: random.Random, repo: str, run: int, passed: int, failures: list[tuple[str, str, str]]
) -> str:
    """A pytest CI log: one line per test, failure tracebacks, the short summary."""
    lines = [
        f"##[group]Run {repo} CI #{run}",
        "python -m pytest -v --durations=0 tests",
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0",
        f"collected {passed + len(failures)} items",
        "",
    ]
    total = passed + len(failures)
    fail_at = dict(zip(rng.sample(range(total), len(failures)), failures, strict=True))
    for i in range(total):
        pct = (i + 1) * 100 // total
        if i in fail_at:
            path, test, _ = fail_at[i]
            lines.append(f"{path}::{test} FAILED{' ' * 24}[{pct:3d}%]")
        else:
            module = _MODULES[i % len(_MODULES)]
            case = _CASES[(i // len(_MODULES)) % len(_CASES)]
            lines.append(
                f"tests/unit/test_{module}.py::test_{module}_{case}_{i:03d} PASSED"
                f"{' ' * 22}({rng.uniform(0.01, 0.9):.2f}s) [{pct:3d}%]"
            )
    if failures:
        lines += [
            "",
            "=================================== FAILURES ===================================",
        ]
        for path, test, error in failures:
            lines += [
                f"__________________________________ {test} __________________________________",
                "",
                f"    def {test}(gateway, order):",
                ">       result = client.charge(order, amount=order.total)",
                "",
                f"{path.rsplit('/', 1)[0]}/conftest.py:88: in charge",
                "    response = self._http.post(self.url + '/v1/charges', json=body, timeout=10.0)",
                f"E       {error}",
            ]
        lines += [
            "",
            "=========================== short test summary info ============================",
        ]
        lines += [f"FAILED {path}::{test} - {error}" for path, test, error in failures]
    seconds = rng.uniform(90, 200)
    outcome = f"{len(failures)} failed, {passed} passed" if failures else f"{passed} passed"
    lines.append(f"======================= {outcome} in {seconds:.2f}s =======================")
    lines.append(f"##[error]Process completed with exit code {1 if failures else 0}.")
    return "\n".join(lines) + "\n"


# -- the week ---------------------------------------------------------------------
def _story(rng: random.Random) -> list[Action]:
    """PR #412 in acme/payments: three payment timeouts in CI, retry logic, merged Wednesday."""
    key = STORY_THREAD_KEY
    repo = "acme/payments"
    title = "Retry timed-out gateway calls in the payment client"

    def pr(
        at: datetime, kind: str, summary: str, author: str, body: dict[str, Any], **kw: Any
    ) -> TriggerSpec:
        payload = {"action": kind.split(".")[-1], "repository": repo, "number": 412, **body}
        return TriggerSpec(at, "github", kind, key, summary, payload, author, title, **kw)

    failures = [
        ("tests/integration/test_charge.py", f"test_charge_{case}",
         f"payments.client.PaymentTimeout: POST https://sandbox.gateway.example/v1/charges "
         f"timed out after 10.0 s (order {order}, no retry)")
        for case, order in (("eu_card", "ord_7731"), ("3ds_challenge", "ord_7740"), ("jpy", "ord_7752"))
    ]  # fmt: skip
    ci_fail_log = pytest_log(rng, repo, 8812, 412, failures)
    ci_pass_log = pytest_log(rng, repo, 8830, 418, [])
    return [
        TriggerSpec(
            _day(0, 9, 12), "chat", "message", "chat:#payments:checkout-timeouts",
            "omar in #payments: checkout shows 'payment failed' for ~2% of orders since the gateway move",
            {"channel": "#payments", "user": "omar",
             "text": "checkout shows 'payment failed' for ~2% of orders since the gateway move; "
                     "logs say PaymentTimeout from the payment client"},
            "omar", "checkout: 'payment failed' on ~2% of orders",
        ),
        TriggerSpec(
            _day(0, 9, 20), "chat", "message", "chat:#payments:checkout-timeouts",
            "dana in #payments: I'll reproduce it in CI on a PR against the sandbox gateway",
            {"channel": "#payments", "user": "dana",
             "text": "I'll reproduce it in CI on a PR against the sandbox gateway"},
            "dana", "checkout: 'payment failed' on ~2% of orders",
        ),
        TriggerSpec(
            _day(2, 11, 30), "chat", "message", "chat:#payments:checkout-timeouts",
            "dana in #payments: #412 is merged, payment failures back to 0.1%",
            {"channel": "#payments", "user": "dana",
             "text": "#412 is merged (retries with backoff), payment failures back to 0.1%"},
            "dana", "checkout: 'payment failed' on ~2% of orders",
        ),
        pr(_day(0, 10, 5), "pull_request.opened",
           f"PR #412 opened by dana: {title}", "dana",
           {"pull_request": {"title": title, "user": "dana", "head": "dana/payment-timeouts",
                             "body": "Gateway calls time out under load; first step: reproduce in CI "
                                     "against the sandbox gateway."}},
           thread_status="open", name="pr_opened"),
        TriggerSpec(
            _day(0, 10, 41), "ci", "run.failed", key,
            "CI #8812 failed on acme/payments#412: 3 failed (PaymentTimeout), 412 passed",
            ci_fail_log, "github-actions", title, name="ci_failed",
            content_type="text/plain; charset=utf-8",
        ),
        pr(_day(0, 11, 20), "pull_request_review_comment.created",
           "li on #412: the sandbox p99 is 11 s, our timeout is 10 s; retry, don't raise the timeout", "li",
           {"comment": {"user": "li", "path": "payments/client.py", "line": 88,
                        "body": "the sandbox p99 is 11 s, our timeout is 10 s; retry with backoff "
                                "instead of raising the timeout, and send an idempotency key"}}),
        pr(_day(1, 9, 30), "pull_request.synchronize",
           "dana pushed to #412: retry charge/capture 3x with exponential backoff + idempotency key", "dana",
           {"commits": [{"sha": "4be1c0d", "message": "PaymentClient: retry gateway timeouts 3x "
                         "with exponential backoff (0.5 s, 1 s, 2 s) and an Idempotency-Key"}]}),
        TriggerSpec(
            _day(1, 10, 2), "ci", "run.passed", key,
            "CI #8830 passed on acme/payments#412: 418 passed", ci_pass_log, "github-actions",
            title, name="ci_passed", content_type="text/plain; charset=utf-8",
        ),
        pr(_day(1, 15, 45), "pull_request_review.submitted",
           "li approved #412", "li", {"review": {"user": "li", "state": "approved"}}),
        pr(_day(2, 11, 3), "pull_request.closed",
           "PR #412 merged by dana into main", "dana",
           {"pull_request": {"merged": True, "merged_by": "dana"}},
           thread_status="merged", name="merged"),
        WorkerSpec(_day(0, 10, 45), "payments_worker", key,
                   "Get PR #412 green: CI #8812 fails with payment timeouts"),
        ReportSpec(
            _day(0, 11, 40), "payments_worker",
            "CI #8812 failed: three PaymentTimeouts against the sandbox gateway; waiting on a retry fix",
            "Three charge tests timed out after 10.0 s (orders ord_7731, ord_7740, ord_7752). "
            "The sandbox gateway's p99 is 11 s and the payment client made a single attempt. "
            "li suggests retrying with backoff rather than raising the timeout.",
            ("ci_failed",), "waiting",
        ),
        ReportSpec(
            _day(2, 11, 10), "payments_worker",
            "We added retry logic to the payment client because CI #8812 failed with three payment timeouts",
            "CI run #8812 on PR #412 failed with three PaymentTimeouts (POST /v1/charges timed out "
            "after 10.0 s, single attempt) while the sandbox gateway's p99 was 11 s, the same "
            "timeouts customers saw as 'payment failed' on ~2% of orders. The fix retries gateway "
            "calls 3 times with exponential backoff (0.5 s, 1 s, 2 s) and sends an Idempotency-Key "
            "so a retried charge is never taken twice. CI #8830 passed; merged Wednesday.",
            ("ci_failed",), "ready",
        ),
    ]  # fmt: skip


_PRS: list[tuple[str, int, str, str]] = [
    ("acme/web", 1031, "Fix flaky e2e checkout test (retry the click, wait for the iframe)", "sam"),
    ("acme/notifications", 88, "Retry webhook deliveries with a dead-letter queue", "priya"),
    ("acme/api", 530, "Paginate /v2/orders with keyset cursors", "tomas"),
    ("acme/api", 533, "Bump pydantic to 2.9", "kofi"),
    ("acme/infra", 204, "Move Redis to the managed cluster", "omar"),
    ("acme/web", 1035, "Dark mode toggle in settings", "ana"),
    ("acme/mobile", 77, "Fix crash on iOS 18 login screen", "li"),
    ("acme/payments", 409, "Idempotency keys for refunds", "dana"),
    ("acme/infra", 207, "Node 22 in CI images", "kofi"),
    ("acme/web", 1040, "Upgrade React to 19", "sam"),
    ("acme/api", 540, "Orders export times out for large merchants", "priya"),
]

_CHATS: list[tuple[str, str, list[str]]] = [
    (
        "#general",
        "standup",
        [
            "yesterday: {x}; today: {y}",
            "blocked on review for {x}",
            "on {y} today",
            "ooo this afternoon",
            "pairing with {p} on {x}",
        ],
    ),
    (
        "#deploys",
        "deploys this week",
        [
            "deploying {r} to prod",
            "{r} deployed, all green",
            "rollback of {r}: error rate up",
            "canary for {r} at 10%",
        ],
    ),
    (
        "#incidents",
        "INC-231: elevated 5xx on the orders API",
        [
            "5xx on /v2/orders at 4%",
            "db connection pool exhausted on api-3",
            "mitigated: pool size 40",
            "postmortem draft in the doc",
            "root cause: export job holds connections",
        ],
    ),
    (
        "#random",
        "lunch and other things",
        [
            "tacos at noon?",
            "the coffee machine is fixed",
            "who has the projector adapter",
            "friday demo at 4",
        ],
    ),
    (
        "#design",
        "new onboarding flow review",
        [
            "mockups for step 2 are up",
            "copy on step 3 is long",
            "can we drop the phone field",
            "usability test notes",
        ],
    ),
    (
        "#oncall",
        "on-call handoff",
        [
            "handoff: quiet night, one page for disk on ci-runner-2",
            "ack'd the {r} alert",
            "silenced flapping alert on {r}",
        ],
    ),
    (
        "#mobile",
        "iOS 18 release prep",
        ["testflight build 5.2.0 is out", "login crash repro on 18.1", "store review submitted"],
    ),
    (
        "#support",
        "escalations",
        [
            "customer {p}-co can't download invoices",
            "refund stuck for ord_{n}",
            "escalated ticket {n} to {p}",
            "closing ticket {n}: fixed by deploy",
        ],
    ),
    (
        "#security",
        "dependency alerts",
        [
            "dependabot: bump in {r}",
            "CVE triage for {r}: not affected",
            "rotated the staging keys",
            "secret scanner flagged a test token",
        ],
    ),
    (
        "#data",
        "weekly metrics",
        ["conversion down 0.3pt", "dashboard refresh is slow", "new funnel chart for {r}"],
    ),
]

_REVIEW_LINES = [
    "nit: rename {w}",
    "can we add a test for {w}?",
    "LGTM once CI is green",
    "this changes {w}, is that intended?",
    "please split {w} into its own PR",
    "+1",
    "docs for {w}?",
    "I think {w} needs a migration",
]
_WORDS = ["the handler", "the cursor", "the config flag", "the error path", "the fixture",
          "the cache key", "the schema", "the retry budget", "the timeout", "the env var"]  # fmt: skip


def _pr_thread(rng: random.Random, repo: str, number: int, title: str, author: str) -> list[Action]:
    key = f"github:{repo}#{number}"
    day = rng.randrange(0, 4)
    at = _day(day, rng.randrange(8, 16), rng.randrange(60))
    out: list[Action] = []

    def add(
        kind: str, summary: str, who: str, body: dict[str, Any], status: str | None = None
    ) -> None:
        nonlocal at
        payload = {"action": kind.split(".")[-1], "repository": repo, "number": number, **body}
        out.append(TriggerSpec(at, "github", kind, key, summary, payload, who, title, status))
        at += timedelta(minutes=rng.randrange(7, 300))

    add("pull_request.opened", f"PR #{number} opened by {author}: {title}", author,
        {"pull_request": {"title": title, "user": author}}, "open")  # fmt: skip
    plan = _WORKER_PLANS.get((repo, number))
    if plan is not None:
        name, task, reports = plan
        started = at - timedelta(minutes=5)
        out.append(WorkerSpec(started, name, key, task))
        for i, (summary, body, status) in enumerate(reports, start=1):
            out.append(ReportSpec(min(started + timedelta(hours=20 * i), _day(4, 16)), name,
                                  summary, body, (), status))  # fmt: skip
    for run in range(rng.randrange(2, 5)):
        reviewer = rng.choice([p for p in PEOPLE if p != author])
        line = rng.choice(_REVIEW_LINES).format(w=rng.choice(_WORDS))
        add("pull_request_review_comment.created", f"{reviewer} on #{number}: {line}", reviewer,
            {"comment": {"user": reviewer, "body": line}})  # fmt: skip
        ci_run = 8000 + number * 3 + run
        failed = rng.random() < 0.3
        fails = (
            [(f"tests/e2e/test_{repo.split('/')[1]}.py", "test_smoke",
              rng.choice(["AssertionError: expected 200, got 500",
                          "TimeoutError: locator.click: Timeout 30000ms exceeded (retry 2 of 2)",
                          "KeyError: 'currency'"]))]
            if failed else []
        )  # fmt: skip
        log = pytest_log(rng, repo, ci_run, rng.randrange(20, 60), fails)
        state = "failed" if failed else "passed"
        outcome = f"1 failed ({fails[0][2].split(':')[0]})" if failed else "all passed"
        out.append(
            TriggerSpec(at, "ci", f"run.{state}", key, f"CI #{ci_run} {state} on {repo}#{number}: {outcome}",
                        log, "github-actions", title, content_type="text/plain; charset=utf-8")
        )  # fmt: skip
        at += timedelta(minutes=rng.randrange(5, 90))
        add("pull_request.synchronize", f"{author} pushed to #{number}: address review",
            author, {"commits": [{"message": "address review"}]})  # fmt: skip
    if rng.random() < 0.7:
        add("pull_request.closed", f"PR #{number} merged by {author}", author,
            {"pull_request": {"merged": True}}, "merged")  # fmt: skip
    return out


def _chat_thread(
    rng: random.Random, channel: str, topic: str, templates: list[str]
) -> list[Action]:
    key = f"chat:{channel}:{topic.split(':')[0].lower().replace(' ', '-')}"
    out: list[Action] = []
    at = _day(rng.randrange(0, 2), 8, rng.randrange(60))
    end = _day(4, 17)
    repos = sorted({r for r, _, _, _ in _PRS})
    for _ in range(rng.randrange(14, 24)):
        who = rng.choice(PEOPLE)
        text = rng.choice(templates).format(
            x=rng.choice(_WORDS),
            y=rng.choice(_WORDS),
            p=rng.choice(PEOPLE),
            r=rng.choice(repos),
            n=rng.randrange(1000, 9999),
        )
        out.append(
            TriggerSpec(at, "chat", "message", key, f"{who} in {channel}: {text}",
                        {"channel": channel, "user": who, "text": text}, who, f"{channel}: {topic}")
        )  # fmt: skip
        at += timedelta(minutes=rng.randrange(20, 300))
        if at > end:
            break
    return out


def _main_ci(rng: random.Random, repo: str) -> list[Action]:
    key = f"ci:{repo}@main"
    out: list[Action] = []
    for day in range(5):
        for hour in (2, 14):
            run = 9000 + day * 10 + hour
            failed = rng.random() < 0.15
            fails = [("tests/test_nightly.py", "test_migrations", "OperationalError: database is locked")] if failed else []  # fmt: skip
            log = pytest_log(rng, repo, run, rng.randrange(30, 80), fails)
            state = "failed" if failed else "passed"
            out.append(
                TriggerSpec(_day(day, hour, 5), "ci", f"run.{state}", key,
                            f"CI #{run} {state} on {repo}@main", log, "github-actions",
                            f"{repo} main builds", content_type="text/plain; charset=utf-8")
            )  # fmt: skip
    return out


# Workers on other threads: (repo, number) -> (name, task, [(summary, body, status)]).
_WORKER_PLANS: dict[tuple[str, int], tuple[str, str, list[tuple[str, str, str]]]] = {
    ("acme/api", 540): (
        "export_worker", "Find why the orders export times out for large merchants",
        [("Export holds a DB connection per page; switched to a server-side cursor",
          "The export job opened a connection per page and held them all; large merchants "
          "exhausted the pool (INC-231). A server-side cursor streams it on one connection.",
          "ready")],
    ),
    ("acme/mobile", 77): (
        "mobile_worker", "Reproduce and fix the iOS 18 login crash",
        [("Crash reproduced on 18.1 (keychain read before first unlock); waiting on review",
          "The login screen reads the keychain before first unlock; fix in review.", "waiting")],
    ),
    ("acme/notifications", 88): (
        "webhook_worker", "Land webhook delivery retries with a dead-letter queue",
        [("Blocked: the dead-letter queue needs the managed Redis from acme/infra#204",
          "Delivery retries are done; the DLQ needs the managed Redis cluster first.", "blocked")],
    ),
    ("acme/infra", 204): (
        "redis_worker", "Plan the Redis move to the managed cluster",
        [("Cut-over plan written; waiting for the Thursday window", "Plan in the PR body.",
          "waiting"),
         ("Redis moved; failover tested", "Cut over at 09:40 Friday; failover drill passed.",
          "ready")],
    ),
}  # fmt: skip


def generate_week(seed: int = SEED) -> list[Action]:
    """The whole week in time order (the same list for the same seed)."""
    rng = random.Random(seed)
    actions: list[Action] = list(_story(rng))
    for repo, number, title, author in _PRS:
        actions += _pr_thread(rng, repo, number, title, author)
    for channel, topic, templates in _CHATS:
        actions += _chat_thread(rng, channel, topic, templates)
    for repo in ("acme/api", "acme/web", "acme/payments"):
        actions += _main_ci(rng, repo)
    order = {TriggerSpec: 0, WorkerSpec: 1, ReportSpec: 2}
    return sorted(actions, key=lambda a: (a.at, order[type(a)]))


def _dedupe_key(spec: TriggerSpec, n: int) -> str:
    return f"{DEMO_SOURCE_PREFIX}:{spec.thread_key}:{spec.kind}:{_ts(spec.at)}:{n}"


def load_week(memory: Memory, actions: list[Action] | None = None) -> LoadedWeek:
    """Record the week; what is already there (by dedupe key, task, report count) is kept."""
    actions = actions if actions is not None else generate_week()
    loaded = LoadedWeek()
    batch: list[tuple[TriggerSpec, NewTrigger]] = []
    reports_seen: dict[str, int] = {}

    def flush() -> None:
        if not batch:
            return
        appended = memory.record_triggers([item for _, item in batch])
        for (spec, _), result in zip(batch, appended, strict=True):
            loaded.triggers += 1
            loaded.triggers_created += int(result.created)
            if spec.name:
                loaded.trigger_ids[spec.name] = result.trigger.id
        batch.clear()

    for n, action in enumerate(actions):
        if isinstance(action, TriggerSpec):
            batch.append((action, trigger_item(action, n)))
            continue
        flush()
        if isinstance(action, WorkerSpec):
            thread = memory.find_thread(action.thread_key)
            existing = [
                w
                for w in (memory.get_worker(i) for i in thread.owner_workers)
                if w.task == action.task
            ]
            if existing:
                worker = existing[0]
            else:
                worker = memory.start_worker(thread.id, action.task)
                loaded.workers_created += 1
            loaded.workers += 1
            loaded.worker_ids[action.name] = worker.id
            reports_seen[action.name] = 0
        else:
            worker_id = loaded.worker_ids[action.worker]
            reports_seen[action.worker] += 1
            stored = memory.get_worker(worker_id)
            count = (1 + len(stored.earlier_reports)) if stored.report else 0
            if count < reports_seen[action.worker]:
                memory.report(
                    worker_id, summary=action.summary, body=action.body,
                    refs=[loaded.trigger_ids[r] for r in action.refs], status=action.status,
                )  # fmt: skip
                loaded.reports_created += 1
    flush()
    loaded.threads = len({a.thread_key for a in actions if isinstance(a, TriggerSpec)})
    return loaded


def trigger_item(spec: TriggerSpec, n: int) -> NewTrigger:
    raw = spec.payload.encode("utf-8") if isinstance(spec.payload, str) else None
    return Memory.new_trigger(
        source=spec.source, kind=spec.kind, payload=None if raw is not None else spec.payload,
        raw=raw, content_type=spec.content_type if raw is not None else None,
        thread_key=spec.thread_key, summary=spec.summary, occurred_at=_ts(spec.at),
        dedupe_key=_dedupe_key(spec, n), author=spec.author, thread_title=spec.thread_title,
        thread_status=spec.thread_status,
    )  # fmt: skip

"""A small recorded story for the harness tests: a PR, its failed CI run, a worker's report."""

from __future__ import annotations

from dataclasses import dataclass

from chainrecall.service import Memory

CI_LOG = (
    "collected 3 items\n"
    + "".join(f"tests/test_unit.py::test_ok_{i} PASSED\n" for i in range(200))
    + "FAILED tests/test_charge.py::test_charge_eu - PaymentTimeout: POST /v1/charges timed out after 10.0 s\n"
    + "FAILED tests/test_charge.py::test_charge_jpy - PaymentTimeout: POST /v1/charges timed out after 10.0 s\n"
    + "FAILED tests/test_charge.py::test_charge_3ds - PaymentTimeout: POST /v1/charges timed out after 10.0 s\n"
    + "=== 3 failed, 200 passed ===\n"
)


@dataclass(frozen=True)
class Story:
    thread_id: str
    pr_id: str
    ci_id: str
    worker_id: str


def record_story(memory: Memory, *, worker_status: str = "ready") -> Story:
    pr = memory.record_trigger(
        source="github", kind="pull_request.opened", thread_key="github:acme/payments#412",
        summary="PR #412 opened by dana: Retry timed-out gateway calls in the payment client",
        thread_title="Retry timed-out gateway calls in the payment client",
        payload={"number": 412, "title": "Retry timed-out gateway calls"}, author="dana",
    ).trigger  # fmt: skip
    ci = memory.record_trigger(
        source="ci", kind="run.failed", thread_key="github:acme/payments#412",
        summary="CI #8812 failed on #412: 3 failed (PaymentTimeout)",
        raw=CI_LOG.encode(), content_type="text/plain; charset=utf-8",
    ).trigger  # fmt: skip
    memory.record_trigger(
        source="chat", kind="message", thread_key="chat:#web:flaky",
        summary="sam in #web: retry the flaky e2e click test", payload={"text": "retry it"},
    )  # fmt: skip
    worker = memory.start_worker(pr.thread_id, "Get PR #412 green")
    memory.report(
        worker.id,
        summary="We added retry logic to the payment client because CI #8812 had 3 payment timeouts",
        body="Three charge tests timed out after 10.0 s; the client made one attempt.",
        refs=[ci.id],
        status=worker_status,
    )
    return Story(pr.thread_id, pr.id, ci.id, worker.id)

"""The worked recall of docs/mcp.md, run through the real server with the SDK's client.

    python docs/mcp_example.py /tmp/example.db

Starts `chainrecall mcp --db DB` over stdio, records a pull request's history
with the write tools, then answers "why did we add retry logic to the payment
client?" with the read tools, printing every call and its JSON result.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


async def call(client: Client, name: str, show: bool = True, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    text = result.content[0].text if result.content else ""
    if show:
        args = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        print(f"\n>>> {name}({args})" + ("   # isError" if result.is_error else ""))
        print(json.dumps(json.loads(text), indent=2, ensure_ascii=False))
    return dict(json.loads(text))


async def main(db: str) -> None:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "chainrecall", "mcp", "--db", db], env=env
    )
    async with Client(params, mode="legacy") as client:
        key = "github:acme/payments#412"
        ci = await call(
            client, "record_trigger", show=False, source="github", kind="check_failed",
            thread_key=key, occurred_at="2026-11-03T09:12:44Z",
            summary="CI: test_charge_card failed: gateway timed out after 30 s (HTTP 504)",
            payload={"check": "unit", "conclusion": "failure", "log": "tests/test_client.py::"
                     "test_charge_card FAILED\nPaymentGatewayTimeout: POST /v1/charges timed out "
                     "after 30.0 s (HTTP 504)\nThe gateway answered 504 three times in 5 minutes."},
        )  # fmt: skip
        oncall = await call(
            client, "record_trigger", show=False, source="slack", kind="message",
            thread_key=key, occurred_at="2026-11-03T09:40:02Z", dedupe_key="slack:C042:1730626802",
            summary="on-call: gateway 504s are transient, the provider says retry with backoff",
            payload={"channel": "#payments-oncall", "user": "dana", "text": "Gateway 504s are "
                     "transient on their side; the provider says retry with exponential backoff, "
                     "and send an Idempotency-Key so a retried charge is never applied twice."},
        )  # fmt: skip
        worker = await call(
            client, "start_worker", show=False, thread_id=ci["thread_id"],
            task="make PaymentClient.charge survive transient gateway timeouts",
        )  # fmt: skip
        await call(
            client, "file_report", show=False, worker_id=worker["id"], status="done",
            summary="Added retry with backoff and an idempotency key to PaymentClient.charge",
            body="PaymentClient.charge now retries 504/timeout up to 3 times with exponential "
                 "backoff (0.5 s, 1 s, 2 s) and sends one Idempotency-Key per charge, so a "
                 "retry after a lost response cannot charge twice. Why: CI failed on gateway "
                 "504s and the provider advised retrying with idempotency keys.",
            refs=[ci["id"], oncall["id"]],
        )  # fmt: skip

        print("# Why did we add retry logic to the payment client?")
        hits = await call(client, "search", query="retry logic payment client")
        thread = await call(client, "get_thread", id=hits["hits"][0]["thread_id"])
        report = await call(client, "get_worker", id=thread["owner_workers"][0])
        trigger = await call(client, "get_trigger", id=report["report"]["refs"][1])
        await call(client, "get_trigger_payload", id=trigger["id"])
        await call(client, "get_thread", id="thr_00000000")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "example.db")

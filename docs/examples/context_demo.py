"""Build the example of docs/context.md: a small memory, one context, one cost replay.

    python docs/examples/context_demo.py OUT_DIR

writes OUT_DIR/demo.db (a chainrecall database), OUT_DIR/stream.jsonl (the same
triggers as a stream for `chainrecall cost --stream`), prints the context for
the CI failure at a 2 KB budget, and the commands to reproduce the rest.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import chainrecall
from chainrecall.context import build_context


def ci_log(failures: int) -> str:
    lines = [f"payments/test_client.py::test_case_{i:04d} PASSED" for i in range(900)]
    lines += [f"payments/test_client.py::test_retry_{i} FAILED: TimeoutError after 30s"
              for i in range(failures)]  # fmt: skip
    return "\n".join(lines)[-41 * 1024 :]


STREAM: list[dict[str, object]] = [
    {"id": "pr", "source": "github", "kind": "pull_request.opened",
     "thread_key": "github:acme/payments#412", "thread_title": "payments retry PR",
     "summary": "PR #412 opened by lan: add retry to the payment client",
     "payload": {"number": 412, "title": "Add retry to the payment client", "user": "lan"}},
    {"source": "chat", "kind": "message", "thread_key": "chat:deploys",
     "thread_title": "deploy window this week", "payload": "Deploy freeze starts Thursday 18:00"},
    {"source": "github", "kind": "issues.opened", "thread_key": "github:acme/payments#409",
     "thread_title": "refund webhook drops events", "payload": {"title": "Refund webhook drops events"}},
    {"id": "ci", "source": "ci", "kind": "check_run.completed",
     "thread_key": "github:acme/payments#412", "author": "ci-bot",
     "summary": "CI failed on PR #412: 3 of 118 tests red in payments/",
     "payload": ci_log(3), "refs": ["pr"]},
    {"source": "chat", "kind": "message", "thread_key": "chat:deploys",
     "payload": "Can #412 make it before the freeze?"},
    {"source": "github", "kind": "issue_comment.created", "thread_key": "github:acme/payments#412",
     "author": "lan", "payload": "Timeouts come from the sandbox; raising the client timeout",
     "in_reply_to": "ci"},
    {"source": "ci", "kind": "check_run.completed", "thread_key": "github:acme/payments#412",
     "author": "ci-bot", "summary": "CI passed on PR #412: 118 of 118 green",
     "payload": ci_log(0)},
    {"source": "github", "kind": "pull_request.closed", "thread_key": "github:acme/payments#412",
     "thread_status": "merged", "summary": "PR #412 merged by hoa",
     "payload": {"number": 412, "merged": True}},
]  # fmt: skip


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    db = out / "demo.db"
    db.unlink(missing_ok=True)
    names: dict[str, str] = {}
    with chainrecall.open(str(db)) as memory:
        for item in STREAM:
            fields = {k: v for k, v in item.items() if k != "id"}
            if "refs" in fields:
                fields["refs"] = [names[str(r)] for r in fields["refs"]]  # type: ignore[attr-defined]
            if "in_reply_to" in fields:
                fields["in_reply_to"] = names[str(fields["in_reply_to"])]
            trigger = memory.record_trigger(**fields).trigger  # type: ignore[arg-type]
            if "id" in item:
                names[str(item["id"])] = trigger.id
            if item.get("id") == "pr":
                memory.start_worker(trigger.thread_id, "review PR #412 and get CI green")
        context = build_context(memory, trigger_id=names["ci"], budget_bytes=2048)
    (out / "stream.jsonl").write_text(
        "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in STREAM), encoding="utf-8"
    )
    print(context.text)
    print(f"\n{context.bytes} bytes; spilled:", *[f"  {s}" for s in context.spilled], sep="\n")
    print(f"\nchainrecall context --db {db} --trigger {names['ci']} --budget-bytes 2048")
    print(f"chainrecall cost --stream {out / 'stream.jsonl'} --budget-bytes 2048")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "demo-out"))

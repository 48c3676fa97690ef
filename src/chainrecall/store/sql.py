"""The read side shared by the SQL backends, written once: queries, columns, row mapping.

SQLite and PostgreSQL keep the same tables and columns, so a read is the same
SQL on both. `SQLStore` holds those reads; each backend supplies `_read()` (a
connection for one read), `_exec` maps the `?` placeholders to its driver's
style, and `BINARY` names its byte-order collation (SQLite's default;
PostgreSQL's `"C"`), so that lists come back in the same order on both.
Writes differ (SQLite takes the database write lock, PostgreSQL row locks)
and stay in each backend's module.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from chainrecall.errors import Gone, NotFound
from chainrecall.history import AgentMessage, AgentSession, ModelRequest
from chainrecall.model import (
    Deletion,
    Event,
    Neighbours,
    Payload,
    PayloadRef,
    Report,
    Thread,
    TokenInfo,
    Trigger,
    Worker,
)
from chainrecall.store.base import Store, report_event_summary, worker_event_summary


class SQLStore(Store):
    """Reads over the shared schema; subclasses add connections and writes."""

    BINARY = "COLLATE BINARY"

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]:
        """A connection for one read, with driver errors translated."""

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement written with `?` placeholders; answers the cursor."""
        return conn.execute(sql, params)

    def _cite(
        self, conn: Any, ns: str, src_id: str, cited: Sequence[tuple[str | None, str]]
    ) -> None:
        """Record back-links from `src_id` to the triggers it cites, in the caller's transaction."""
        for dst_id, rel in cited:
            if dst_id:
                self._exec(
                    conn,
                    "INSERT INTO citations (ns, dst_id, src_id, rel) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (ns, dst_id, src_id, rel),
                )

    def _uncite(self, conn: Any, src_id: str) -> None:
        self._exec(conn, "DELETE FROM citations WHERE src_id = ?", (src_id,))

    # -- reads -----------------------------------------------------------------
    def cited_by(self, ns: str, trigger_id: str) -> list[str]:
        with self._read() as conn:
            exists = self._exec(
                conn, "SELECT deleted_at FROM triggers WHERE id = ? AND ns = ?", (trigger_id, ns)
            ).fetchone()
            if exists is None:
                raise NotFound(trigger_id, "trigger")
            if exists[0] is not None:
                raise Gone(trigger_id, exists[0])
            rows = self._exec(
                conn,
                f"SELECT src_id FROM citations WHERE dst_id = ? AND ns = ? "
                f"GROUP BY src_id ORDER BY src_id {self.BINARY}",
                (trigger_id, ns),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def resolve_alias(self, ns: str, alias: str) -> str | None:
        with self._read() as conn:
            row = self._exec(
                conn, "SELECT object_id FROM aliases WHERE ns = ? AND alias = ?", (ns, alias)
            ).fetchone()
        return None if row is None else str(row[0])

    def get_trigger(self, ns: str, trigger_id: str) -> Trigger:
        with self._read() as conn:
            return self._trigger(conn, ns, trigger_id)

    def _trigger(self, conn: Any, ns: str, trigger_id: str) -> Trigger:
        row = self._exec(
            conn,
            f"SELECT {TRIGGER_COLUMNS} FROM triggers t WHERE t.id = ? AND t.ns = ?",
            (trigger_id, ns),
        ).fetchone()
        if row is None:
            raise NotFound(trigger_id, "trigger")
        return trigger_from_row(row)

    def get_payload(self, ns: str, trigger_id: str) -> Payload:
        with self._read() as conn:
            row = self._exec(
                conn,
                "SELECT t.content_type, t.deleted_at, p.data FROM triggers t "
                "LEFT JOIN payloads p ON p.trigger_id = t.id WHERE t.id = ? AND t.ns = ?",
                (trigger_id, ns),
            ).fetchone()
        if row is None:
            raise NotFound(trigger_id, "trigger")
        if row[1] is not None or row[2] is None:
            raise Gone(trigger_id, row[1])
        return Payload(content_type=row[0], data=bytes(row[2]))

    def get_thread(self, ns: str, thread_id: str) -> Thread:
        with self._read() as conn:
            row = self._exec(
                conn,
                f"SELECT {THREAD_COLUMNS} FROM threads WHERE id = ? AND ns = ?",
                (thread_id, ns),
            ).fetchone()
            if row is None:
                raise NotFound(thread_id, "thread")
            return self._thread_record(conn, row)

    def find_thread(self, ns: str, key: str) -> Thread:
        with self._read() as conn:
            row = self._exec(
                conn, f"SELECT {THREAD_COLUMNS} FROM threads WHERE ns = ? AND key = ?", (ns, key)
            ).fetchone()
            if row is None:
                raise NotFound(key, "thread with key")
            return self._thread_record(conn, row)

    def _thread_record(self, conn: Any, row: Sequence[Any]) -> Thread:
        if row[10] is not None:
            raise Gone(row[0], row[10])
        owners = [
            r[0]
            for r in self._exec(
                conn,
                "SELECT worker_id FROM worker_threads WHERE thread_id = ? ORDER BY rowid",
                (row[0],),
            )
        ]
        return thread_from_row(row, owners)

    def list_threads(self, ns: str, limit: int) -> list[Thread]:
        with self._read() as conn:
            rows = self._exec(
                conn,
                f"SELECT {THREAD_COLUMNS} FROM threads WHERE ns = ? AND deleted_at IS NULL "
                "ORDER BY last_activity_at DESC, rowid DESC LIMIT ?",
                (ns, limit),
            ).fetchall()
            return [self._thread_record(conn, row) for row in rows]

    def get_worker(self, ns: str, worker_id: str) -> Worker:
        with self._read() as conn:
            row = self._exec(
                conn,
                "SELECT id, task, status, started_at, updated_at, deleted_at FROM workers "
                "WHERE id = ? AND ns = ?",
                (worker_id, ns),
            ).fetchone()
            if row is None:
                raise NotFound(worker_id, "worker")
            if row[5] is not None:
                raise Gone(worker_id, row[5])
            thread_ids = [
                r[0]
                for r in self._exec(
                    conn,
                    "SELECT thread_id FROM worker_threads WHERE worker_id = ? ORDER BY pos",
                    (worker_id,),
                )
            ]
            reports = [
                Report(n=r[0], summary=r[1], body=r[2], status=r[3], refs=json.loads(r[4]), at=r[5])
                for r in self._exec(
                    conn,
                    "SELECT n, summary, body, status, refs_json, at FROM reports "
                    "WHERE worker_id = ? ORDER BY n",
                    (worker_id,),
                )
            ]
        return Worker(
            id=row[0], thread_ids=thread_ids, task=row[1], status=row[2], started_at=row[3],
            updated_at=row[4], report=reports[-1] if reports else None,
            earlier_reports=reports[:-1],
        )  # fmt: skip

    def list_events(
        self, ns: str, thread_id: str, after_seq: int, limit: int
    ) -> tuple[list[Event], bool]:
        with self._read() as conn:
            rows = self._exec(
                conn,
                "SELECT e.seq, e.object_id, e.kind, e.at, tr.summary, tr.deleted_at, "
                "w.task, r.status, r.summary "
                "FROM events e "
                "LEFT JOIN triggers tr ON e.kind = 'trigger' AND tr.id = e.object_id "
                "LEFT JOIN workers w ON e.kind = 'worker' AND w.id = e.object_id "
                "LEFT JOIN reports r ON e.kind = 'report' AND r.worker_id = e.object_id "
                "AND r.n = e.report_n "
                "WHERE e.thread_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?",
                (thread_id, after_seq, limit + 1),
            ).fetchall()
        events = [event_from_row(row) for row in rows[:limit]]
        return events, len(rows) > limit

    def find_token(self, token_hash: str) -> TokenInfo | None:
        with self._read() as conn:
            row = self._exec(
                conn,
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_hash = ? AND revoked_at IS NULL",
                (token_hash,),
            ).fetchone()
        return None if row is None else token_from_row(row)

    def has_tokens(self) -> bool:
        with self._read() as conn:
            row = self._exec(
                conn, "SELECT 1 FROM tokens WHERE revoked_at IS NULL LIMIT 1"
            ).fetchone()
        return row is not None

    def list_tokens(self) -> list[TokenInfo]:
        with self._read() as conn:
            rows = self._exec(
                conn, f"SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at, id {self.BINARY}"
            )
            return [token_from_row(row) for row in rows]

    def webhook_secrets(self, source: str) -> list[tuple[str, str]]:
        with self._read() as conn:
            rows = self._exec(
                conn,
                f"SELECT ns, secret FROM webhook_secrets WHERE source = ? ORDER BY ns {self.BINARY}",
                (source,),
            )
            return [(str(r[0]), str(r[1])) for r in rows]

    def triggers_received_before(
        self, ns: str | None, cutoff: str, limit: int
    ) -> list[tuple[str, str]]:
        with self._read() as conn:
            rows = self._exec(
                conn,
                "SELECT ns, id FROM triggers WHERE received_at < ? AND deleted_at IS NULL "
                f"AND (CAST(? AS TEXT) IS NULL OR ns = ?) ORDER BY received_at, id {self.BINARY} LIMIT ?",
                (cutoff, ns, ns, limit),
            ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def list_deletions(self, ns: str | None, limit: int) -> list[Deletion]:
        with self._read() as conn:
            rows = self._exec(
                conn,
                "SELECT object_id, kind, ns, actor, reason, at, erased_triggers FROM deletions "
                "WHERE (CAST(? AS TEXT) IS NULL OR ns = ?) ORDER BY seq DESC LIMIT ?",
                (ns, ns, limit),
            ).fetchall()
        return [
            Deletion(object_id=r[0], kind=r[1], namespace=r[2], actor=r[3], reason=r[4], at=r[5],
                     erased_triggers=r[6])
            for r in rows
        ]  # fmt: skip


TRIGGER_COLUMNS = (
    "t.id, t.thread_id, t.seq, t.source, t.kind, t.summary, t.author, t.occurred_at, "
    "t.received_at, t.dedupe_key, t.content_type, t.payload_bytes, t.prev_id, t.in_reply_to, "
    "t.refs_json, t.deleted_at, (SELECT n.id FROM triggers n WHERE n.prev_id = t.id) AS next_id"
)

TOKEN_COLUMNS = "id, ns, scope, name, created_at, revoked_at"


def token_from_row(row: Sequence[Any]) -> TokenInfo:
    return TokenInfo(
        id=row[0], namespace=row[1], scope=row[2], name=row[3], created_at=row[4],
        revoked_at=row[5],
    )  # fmt: skip


THREAD_COLUMNS = (
    "id, key, title, summary, status, event_count, created_at, first_activity_at, "
    "last_activity_at, last_trigger_id, deleted_at"
)


def thread_from_row(row: Sequence[Any], owners: list[str]) -> Thread:
    return Thread(
        id=row[0], key=row[1], title=row[2], summary=row[3], status=row[4], event_count=row[5],
        owner_workers=owners, created_at=row[6], first_activity_at=row[7],
        last_activity_at=row[8],
    )  # fmt: skip


def trigger_from_row(row: Sequence[Any]) -> Trigger:
    (tid, thread_id, seq, source, kind, summary, author, occurred_at, received_at, dedupe_key,
     content_type, payload_bytes, prev_id, in_reply_to, refs_json, deleted_at, next_id) = row  # fmt: skip
    if deleted_at is not None:
        raise Gone(tid, deleted_at)
    return Trigger(
        id=tid, thread_id=thread_id, seq=seq, source=source, kind=kind, summary=summary,
        author=author, occurred_at=occurred_at, received_at=received_at, dedupe_key=dedupe_key,
        payload=PayloadRef(href=f"/triggers/{tid}/payload", content_type=content_type,
                           bytes=payload_bytes),
        neighbours=Neighbours(prev=prev_id, next=next_id), in_reply_to=in_reply_to,
        refs=json.loads(refs_json),
    )  # fmt: skip


def event_from_row(row: Sequence[Any]) -> Event:
    seq, object_id, kind, at, trg_summary, trg_deleted, task, rep_status, rep_summary = row
    if kind == "trigger":
        deleted = trg_deleted is not None
        summary = None if deleted else trg_summary
    elif kind == "worker":
        deleted, summary = task is None, (worker_event_summary(task) if task is not None else None)
    else:
        deleted = rep_summary is None
        summary = None if deleted else report_event_summary(rep_status, rep_summary)
    return Event(seq=seq, id=object_id, kind=kind, at=at, summary=summary, deleted=deleted)


SESSION_COLUMNS = "id, kind, worker_id, thread_id, model, status, created_at, updated_at"
REQUEST_COLUMNS = (
    "r.id, r.session_id, r.model, r.message_count, r.bytes_sent, r.prompt_tokens, "
    "r.completion_tokens, r.cache_hit_tokens, r.cache_miss_tokens, r.latency_ms, r.outcome, "
    "r.error, r.created_at"
)


def session_from_row(row: Sequence[Any]) -> AgentSession:
    sid, kind, worker_id, thread_id, model, status, created_at, updated_at = row
    return AgentSession(
        id=sid, kind=kind, worker_id=worker_id, thread_id=thread_id, model=model,
        status=status, created_at=created_at, updated_at=updated_at,
    )  # fmt: skip


def message_from_row(row: Sequence[Any]) -> AgentMessage:
    session_id, position, role, content, tool_calls, tool_call_id, name, size, created_at = row
    return AgentMessage(
        session_id=session_id, position=position, role=role, content=content,
        tool_calls=json.loads(tool_calls) if tool_calls else None, tool_call_id=tool_call_id,
        name=name, bytes=size, created_at=created_at,
    )  # fmt: skip


def request_from_row(row: Sequence[Any]) -> ModelRequest:
    (rid, session_id, model, message_count, bytes_sent, prompt_tokens, completion_tokens,
     cache_hit, cache_miss, latency_ms, outcome, error, created_at) = row  # fmt: skip
    return ModelRequest(
        id=rid, session_id=session_id, model=model, message_count=message_count,
        bytes_sent=bytes_sent, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        cache_hit_tokens=cache_hit, cache_miss_tokens=cache_miss, latency_ms=latency_ms,
        outcome=outcome, error=error, created_at=created_at,
    )  # fmt: skip

"""The SQLite backend: one embedded file, zero set-up, the default.

WAL mode lets readers run beside the single writer; `synchronous=FULL` makes
every acknowledged commit survive a crash or power loss. Each thread gets its
own connection. Writes take the database write lock up front (`BEGIN
IMMEDIATE`), which is what makes a thread's event positions gap-free and
dedupe keys race-free, also across processes sharing the file.

sqlite3 errors are translated into `chainrecall.errors` in `_translated`, and
nowhere else.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from chainrecall import ids
from chainrecall.errors import ChainRecallError, Gone, NotFound, StoreUnavailable, UnknownReference
from chainrecall.history import (
    AgentMessage,
    AgentSession,
    ModelRequest,
    NewMessage,
    NewModelRequest,
    SessionKind,
    new_session_id,
)
from chainrecall.model import (
    Deletion,
    NewTrigger,
    Scope,
    SearchHit,
    TokenInfo,
    Worker,
    now_iso,
)
from chainrecall.store.base import (
    SEARCH_TEXT_LIMIT,
    Appended,
    one_line,
    search_terms,
    worker_event_summary,
)
from chainrecall.store.migrations import apply_sqlite_migrations
from chainrecall.store.sql import (
    REQUEST_COLUMNS,
    SESSION_COLUMNS,
    TOKEN_COLUMNS,
    SQLStore,
    message_from_row,
    request_from_row,
    session_from_row,
    token_from_row,
)


@contextmanager
def _translated() -> Iterator[None]:
    """The one place where sqlite3's errors become ours."""
    try:
        yield
    except ChainRecallError:
        raise
    except sqlite3.OperationalError as exc:
        raise StoreUnavailable(
            f"the SQLite database could not be used ({exc}); check the file's path, "
            "permissions and free disk space"
        ) from exc


class SQLiteStore(SQLStore):
    def __init__(self, path: str, *, synchronous: str = "FULL") -> None:
        self.url = path
        self.path = path
        self._synchronous = synchronous
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        with _translated():
            conn = self._conn()
            apply_sqlite_migrations(conn)
            self._secret = self._load_secret(conn)

    # -- connections ---------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA busy_timeout = 30000")
            # 64 MiB of page cache per connection (the default is 2 MiB): random-ID primary
            # keys spread inserts and lookups over the whole index of a large store.
            conn.execute("PRAGMA cache_size = -65536")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with _translated():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with _translated():
            yield self._conn()

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                # closed already, or owned by a thread that is gone
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()

    def _load_secret(self, conn: sqlite3.Connection) -> bytes:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()
            if row is None:
                value = secrets.token_hex(32)
                conn.execute("INSERT INTO meta (key, value) VALUES ('cursor_secret', ?)", (value,))
            else:
                value = row[0]
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return bytes.fromhex(value)

    def cursor_secret(self) -> bytes:
        return self._secret

    # -- writes --------------------------------------------------------------
    def append_triggers(self, ns: str, items: Sequence[NewTrigger]) -> list[Appended]:
        results: list[tuple[str, bool]] = []
        with self._write() as conn:
            for item in items:
                results.append(self._append_one(conn, ns, item))
        with self._read() as conn:
            return [Appended(self._trigger(conn, ns, tid), created) for tid, created in results]

    def _append_one(self, conn: sqlite3.Connection, ns: str, item: NewTrigger) -> tuple[str, bool]:
        if item.dedupe_key is not None:
            row = conn.execute(
                "SELECT id FROM triggers WHERE ns = ? AND source = ? AND dedupe_key = ?",
                (ns, item.source, item.dedupe_key),
            ).fetchone()
            if row is not None:
                return row[0], False
        now = now_iso()
        occurred_at = item.occurred_at or now
        thread = self._thread_for_append(conn, ns, item, now)
        for ref, field in [(item.in_reply_to, "in_reply_to")] + [(r, "refs") for r in item.refs]:
            if ref is not None and not self._trigger_exists(conn, ns, ref):
                raise UnknownReference(ref, field)
        trigger_id = self._fresh_id(conn, "trigger", "triggers")
        seq = thread["event_count"] + 1
        conn.execute(
            "INSERT INTO triggers (id, ns, thread_id, seq, source, kind, summary, author, "
            "occurred_at, received_at, dedupe_key, content_type, payload_bytes, prev_id, "
            "in_reply_to, refs_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                trigger_id, ns, thread["id"], seq, item.source, item.kind, item.summary,
                item.author, occurred_at, now, item.dedupe_key, item.content_type,
                len(item.payload), thread["last_trigger_id"], item.in_reply_to,
                json.dumps(list(item.refs)),
            ),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO payloads (trigger_id, data) VALUES (?, ?)", (trigger_id, item.payload)
        )
        self._cite(
            conn, ns, trigger_id, [(item.in_reply_to, "reply")] + [(r, "ref") for r in item.refs]
        )
        conn.execute(
            "INSERT INTO events (thread_id, seq, kind, object_id, at) VALUES (?, ?, 'trigger', ?, ?)",
            (thread["id"], seq, trigger_id, now),
        )
        conn.execute(
            "UPDATE threads SET event_count = ?, last_trigger_id = ?, summary = ?, "
            "status = COALESCE(?, status), last_activity_at = ? WHERE id = ?",
            (seq, trigger_id, item.summary, item.thread_status, now, thread["id"]),
        )
        body = "\n".join(
            part
            for part in (item.summary, item.author, item.search_text[:SEARCH_TEXT_LIMIT])
            if part
        )
        self._index(conn, ns, trigger_id, "trigger", thread["id"], item.summary, body)
        for alias, object_id in [(a, trigger_id) for a in item.aliases] + [
            (a, thread["id"]) for a in item.thread_aliases
        ]:
            conn.execute(
                "INSERT INTO aliases (ns, alias, object_id) VALUES (?, ?, ?) "
                "ON CONFLICT (ns, alias) DO UPDATE SET object_id = excluded.object_id",
                (ns, alias, object_id),
            )
        return trigger_id, True

    def _thread_for_append(
        self, conn: sqlite3.Connection, ns: str, item: NewTrigger, now: str
    ) -> dict[str, Any]:
        """The thread a new trigger goes to, created on first use of its key."""
        columns = "id, event_count, last_trigger_id, deleted_at"
        if item.thread_id is not None:
            row = conn.execute(
                f"SELECT {columns} FROM threads WHERE id = ? AND ns = ?", (item.thread_id, ns)
            ).fetchone()
            if row is None or row[3] is not None:
                raise UnknownReference(item.thread_id, "thread_id")
        else:
            assert item.thread_key is not None
            row = conn.execute(
                f"SELECT {columns} FROM threads WHERE ns = ? AND key = ?", (ns, item.thread_key)
            ).fetchone()
        if row is not None:
            return {"id": row[0], "event_count": row[1], "last_trigger_id": row[2]}
        thread_id = self._fresh_id(conn, "thread", "threads")
        title = item.thread_title or item.summary
        conn.execute(
            "INSERT INTO threads (id, ns, key, title, summary, status, created_at, "
            "first_activity_at, last_activity_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (thread_id, ns, item.thread_key, title, item.summary,
             item.thread_status or "open", now, now, now),
        )  # fmt: skip
        self._index(conn, ns, thread_id, "thread", thread_id, title, f"{item.thread_key}\n{title}")
        return {"id": thread_id, "event_count": 0, "last_trigger_id": None}

    def _fresh_id(self, conn: sqlite3.Connection, kind: ids.Kind, table: str) -> str:
        # We hold the write lock, so nothing can take the ID between check and insert.
        while True:
            candidate = ids.new_id(kind)
            if conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (candidate,)).fetchone() is None:
                return candidate

    def _trigger_exists(self, conn: sqlite3.Connection, ns: str, trigger_id: str) -> bool:
        if not ids.is_valid(trigger_id, "trigger"):
            return False
        row = conn.execute(
            "SELECT 1 FROM triggers WHERE id = ? AND ns = ?", (trigger_id, ns)
        ).fetchone()
        return row is not None

    def _index(
        self, conn: sqlite3.Connection, ns: str, doc_id: str, kind: str,
        thread_id: str | None, summary: str, body: str,
    ) -> None:  # fmt: skip
        cur = conn.execute(
            "INSERT INTO search_docs (ns, doc_id, doc_kind, thread_id, summary) VALUES (?, ?, ?, ?, ?)",
            (ns, doc_id, kind, thread_id, summary),
        )
        conn.execute("INSERT INTO search_fts (rowid, body) VALUES (?, ?)", (cur.lastrowid, body))

    def _append_event(
        self, conn: sqlite3.Connection, thread_id: str, kind: str, object_id: str,
        report_n: int | None, now: str,
    ) -> None:  # fmt: skip
        row = conn.execute("SELECT event_count FROM threads WHERE id = ?", (thread_id,)).fetchone()
        seq = row[0] + 1
        conn.execute(
            "INSERT INTO events (thread_id, seq, kind, object_id, report_n, at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (thread_id, seq, kind, object_id, report_n, now),
        )
        conn.execute(
            "UPDATE threads SET event_count = ?, last_activity_at = ? WHERE id = ?",
            (seq, now, thread_id),
        )

    def start_worker(self, ns: str, thread_ids: Sequence[str], task: str) -> Worker:
        with self._write() as conn:
            for thread_id in thread_ids:
                row = conn.execute(
                    "SELECT deleted_at FROM threads WHERE id = ? AND ns = ?", (thread_id, ns)
                ).fetchone()
                if row is None or row[0] is not None:
                    raise UnknownReference(thread_id, "thread_id")
            worker_id = self._fresh_id(conn, "worker", "workers")
            now = now_iso()
            conn.execute(
                "INSERT INTO workers (id, ns, task, status, started_at, updated_at) "
                "VALUES (?, ?, ?, 'running', ?, ?)",
                (worker_id, ns, task, now, now),
            )
            for pos, thread_id in enumerate(thread_ids):
                conn.execute(
                    "INSERT INTO worker_threads (worker_id, thread_id, pos) VALUES (?, ?, ?)",
                    (worker_id, thread_id, pos),
                )
                self._append_event(conn, thread_id, "worker", worker_id, None, now)
            self._index(
                conn, ns, worker_id, "worker", thread_ids[0] if thread_ids else None,
                worker_event_summary(task), task,
            )  # fmt: skip
        return self.get_worker(ns, worker_id)

    def add_report(
        self, ns: str, worker_id: str, *, summary: str, body: str, refs: Sequence[str], status: str
    ) -> Worker:
        with self._write() as conn:
            row = conn.execute(
                "SELECT report_count, deleted_at FROM workers WHERE id = ? AND ns = ?",
                (worker_id, ns),
            ).fetchone()
            if row is None:
                raise NotFound(worker_id, "worker")
            if row[1] is not None:
                raise Gone(worker_id, row[1])
            for ref in refs:
                if not self._trigger_exists(conn, ns, ref):
                    raise UnknownReference(ref, "refs")
            n = row[0] + 1
            now = now_iso()
            conn.execute(
                "INSERT INTO reports (worker_id, n, summary, body, status, refs_json, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (worker_id, n, summary, body, status, json.dumps(list(refs)), now),
            )
            self._cite(conn, ns, worker_id, [(r, "report") for r in refs])
            conn.execute(
                "UPDATE workers SET report_count = ?, status = ?, updated_at = ? WHERE id = ?",
                (n, status, now, worker_id),
            )
            thread_ids = [
                r[0]
                for r in conn.execute(
                    "SELECT thread_id FROM worker_threads WHERE worker_id = ? ORDER BY pos",
                    (worker_id,),
                )
            ]
            for thread_id in thread_ids:
                self._append_event(conn, thread_id, "report", worker_id, n, now)
            self._index(
                conn, ns, worker_id, "worker", thread_ids[0] if thread_ids else None,
                one_line(summary, 200), f"{summary}\n{body[:SEARCH_TEXT_LIMIT]}",
            )  # fmt: skip
        return self.get_worker(ns, worker_id)

    # -- reads ---------------------------------------------------------------
    def search(self, ns: str, query: str, limit: int) -> list[SearchHit]:
        terms = search_terms(query)
        if not terms:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        with self._read() as conn:
            rows = conn.execute(
                "SELECT d.doc_id, d.doc_kind, d.thread_id, d.summary, bm25(search_fts) AS score "
                "FROM search_fts JOIN search_docs d ON d.rowid = search_fts.rowid "
                "WHERE search_fts MATCH ? AND d.ns = ? ORDER BY score LIMIT ?",
                (match, ns, limit * 3),
            ).fetchall()
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for doc_id, kind, thread_id, summary, score in rows:
            if doc_id in seen:  # a worker with several reports is one hit
                continue
            seen.add(doc_id)
            hits.append(
                SearchHit(id=doc_id, kind=kind, thread_id=thread_id, summary=summary,
                          score=round(-score, 6))
            )  # fmt: skip
            if len(hits) == limit:
                break
        return hits

    # -- access control --------------------------------------------------------
    def create_token(self, ns: str, scope: Scope, name: str, token_hash: str) -> TokenInfo:
        with self._write() as conn:
            while True:
                token_id = "tok_" + ids.new_id("trigger").split("_", 1)[1]
                if (
                    conn.execute("SELECT 1 FROM tokens WHERE id = ?", (token_id,)).fetchone()
                    is None
                ):
                    break
            conn.execute(
                "INSERT INTO tokens (id, ns, scope, name, token_hash, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (token_id, ns, scope, name, token_hash, now_iso()),
            )
            row = conn.execute(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = ?", (token_id,)
            ).fetchone()
        return token_from_row(row)

    def revoke_token(self, token_id: str) -> TokenInfo:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?",
                (now_iso(), token_id),
            )
            if cur.rowcount == 0:
                raise NotFound(token_id, "token")
            row = conn.execute(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = ?", (token_id,)
            ).fetchone()
        return token_from_row(row)

    def set_webhook_secret(self, ns: str, source: str, secret: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO webhook_secrets (ns, source, secret, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (ns, source) DO UPDATE SET secret = excluded.secret",
                (ns, source, secret, now_iso()),
            )

    # -- deletion and retention ------------------------------------------------
    def delete_trigger(self, ns: str, trigger_id: str, *, actor: str, reason: str) -> Deletion:
        with self._write() as conn:
            row = conn.execute(
                "SELECT deleted_at FROM triggers WHERE id = ? AND ns = ?", (trigger_id, ns)
            ).fetchone()
            if row is None:
                raise NotFound(trigger_id, "trigger")
            if row[0] is not None:
                raise Gone(trigger_id, row[0])
            now = now_iso()
            self._erase_trigger(conn, trigger_id, now)
            return self._log_deletion(conn, ns, trigger_id, "trigger", actor, reason, 1, now)

    def delete_thread(self, ns: str, thread_id: str, *, actor: str, reason: str) -> Deletion:
        with self._write() as conn:
            row = conn.execute(
                "SELECT deleted_at FROM threads WHERE id = ? AND ns = ?", (thread_id, ns)
            ).fetchone()
            if row is None:
                raise NotFound(thread_id, "thread")
            if row[0] is not None:
                raise Gone(thread_id, row[0])
            now = now_iso()
            live = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM triggers WHERE thread_id = ? AND deleted_at IS NULL",
                    (thread_id,),
                )
            ]
            for trigger_id in live:
                self._erase_trigger(conn, trigger_id, now)
            conn.execute(
                "UPDATE threads SET key = NULL, title = '', summary = '', deleted_at = ? WHERE id = ?",
                (now, thread_id),
            )
            self._unindex(conn, thread_id)
            conn.execute("DELETE FROM aliases WHERE ns = ? AND object_id = ?", (ns, thread_id))
            return self._log_deletion(conn, ns, thread_id, "thread", actor, reason, len(live), now)

    def _erase_trigger(self, conn: sqlite3.Connection, trigger_id: str, now: str) -> None:
        """Erase one trigger's content in the caller's transaction; its row stays as a tombstone."""
        thread_id, summary = conn.execute(
            "SELECT thread_id, summary FROM triggers WHERE id = ?", (trigger_id,)
        ).fetchone()
        conn.execute(
            "UPDATE triggers SET summary = '', author = NULL, payload_bytes = 0, refs_json = '[]', "
            "deleted_at = ? WHERE id = ?",
            (now, trigger_id),
        )
        conn.execute("DELETE FROM payloads WHERE trigger_id = ?", (trigger_id,))
        conn.execute("DELETE FROM aliases WHERE object_id = ?", (trigger_id,))
        self._uncite(conn, trigger_id)
        self._unindex(conn, trigger_id)
        # The thread's title and summary may be copies of this trigger's summary.
        key, title, thread_summary = conn.execute(
            "SELECT key, title, summary FROM threads WHERE id = ?", (thread_id,)
        ).fetchone()
        if summary and thread_summary == summary:
            latest = conn.execute(
                "SELECT summary FROM triggers WHERE thread_id = ? AND deleted_at IS NULL "
                "ORDER BY seq DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
            conn.execute(
                "UPDATE threads SET summary = ? WHERE id = ?",
                (latest[0] if latest else "", thread_id),
            )
        if summary and title == summary:
            conn.execute("UPDATE threads SET title = ? WHERE id = ?", (key or "", thread_id))
            self._unindex(conn, thread_id)
            if key:
                self._index(conn, self._ns_of_thread(conn, thread_id), thread_id, "thread",
                            thread_id, key, key)  # fmt: skip

    @staticmethod
    def _ns_of_thread(conn: sqlite3.Connection, thread_id: str) -> str:
        return str(conn.execute("SELECT ns FROM threads WHERE id = ?", (thread_id,)).fetchone()[0])

    @staticmethod
    def _unindex(conn: sqlite3.Connection, doc_id: str) -> None:
        rowids = [
            r[0] for r in conn.execute("SELECT rowid FROM search_docs WHERE doc_id = ?", (doc_id,))
        ]
        for rowid in rowids:
            conn.execute("DELETE FROM search_fts WHERE rowid = ?", (rowid,))
        conn.execute("DELETE FROM search_docs WHERE doc_id = ?", (doc_id,))

    @staticmethod
    def _log_deletion(
        conn: sqlite3.Connection, ns: str, object_id: str, kind: Literal["trigger", "thread"],
        actor: str, reason: str,
        erased: int, now: str,
    ) -> Deletion:  # fmt: skip
        conn.execute(
            "INSERT INTO deletions (ns, object_id, kind, actor, reason, erased_triggers, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (ns, object_id, kind, actor, reason, erased, now),
        )
        return Deletion(
            object_id=object_id, kind=kind, namespace=ns, actor=actor, reason=reason, at=now,
            erased_triggers=erased,
        )  # fmt: skip

    # -- agent history -------------------------------------------------------
    def create_session(
        self, ns: str, *, kind: SessionKind, model: str,
        worker_id: str | None = None, thread_id: str | None = None,
    ) -> AgentSession:  # fmt: skip
        now = now_iso()
        with self._write() as conn:
            while True:
                session_id = new_session_id()
                taken = conn.execute(
                    "SELECT 1 FROM agent_sessions WHERE id = ?", (session_id,)
                ).fetchone()
                if taken is None:
                    break
            conn.execute(
                "INSERT INTO agent_sessions (id, ns, kind, worker_id, thread_id, model, status, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?)",
                (session_id, ns, kind, worker_id, thread_id, model, now, now),
            )
        return self.get_session(ns, session_id)

    def get_session(self, ns: str, session_id: str) -> AgentSession:
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM agent_sessions WHERE id = ? AND ns = ?",
                (session_id, ns),
            ).fetchone()
        if row is None:
            raise NotFound(str(session_id)[:100], "session")
        return session_from_row(row)

    def list_sessions(
        self,
        ns: str,
        *,
        kind: SessionKind | None = None,
        worker_id: str | None = None,
        limit: int = 100,
    ) -> list[AgentSession]:
        query = f"SELECT {SESSION_COLUMNS} FROM agent_sessions WHERE ns = ?"
        params: list[Any] = [ns]
        if kind is not None:
            query += " AND kind = ?"
            params.append(kind)
        if worker_id is not None:
            query += " AND worker_id = ?"
            params.append(worker_id)
        query += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        params.append(limit)
        with self._read() as conn:
            rows = conn.execute(query, params).fetchall()
        return [session_from_row(row) for row in rows]

    def set_session_status(self, ns: str, session_id: str, status: str) -> AgentSession:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE agent_sessions SET status = ?, updated_at = ? WHERE id = ? AND ns = ?",
                (status, now_iso(), session_id, ns),
            )
            if cur.rowcount == 0:
                raise NotFound(str(session_id)[:100], "session")
        return self.get_session(ns, session_id)

    def append_messages(
        self, ns: str, session_id: str, messages: Sequence[NewMessage]
    ) -> list[AgentMessage]:
        now = now_iso()
        stored: list[AgentMessage] = []
        with self._write() as conn:
            self._require_session(conn, ns, session_id)
            row = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM agent_messages WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            position = int(row[0])
            for message in messages:
                encoded = message.encoded()
                size = len(encoded.encode("utf-8"))
                tool_calls = (
                    json.dumps(message.tool_calls, ensure_ascii=False, separators=(",", ":"))
                    if message.tool_calls
                    else None
                )
                conn.execute(
                    "INSERT INTO agent_messages (session_id, position, role, content, "
                    "tool_calls_json, tool_call_id, name, bytes, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (session_id, position, message.role, message.content, tool_calls,
                     message.tool_call_id, message.name, size, now),
                )  # fmt: skip
                stored.append(
                    AgentMessage(
                        **message.model_dump(),
                        session_id=session_id,
                        position=position,
                        bytes=size,
                        created_at=now,
                    )
                )
                position += 1
            conn.execute("UPDATE agent_sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        return stored

    def list_messages(self, ns: str, session_id: str) -> list[AgentMessage]:
        with self._read() as conn:
            self._require_session(conn, ns, session_id)
            rows = conn.execute(
                "SELECT session_id, position, role, content, tool_calls_json, tool_call_id, "
                "name, bytes, created_at FROM agent_messages WHERE session_id = ? "
                "ORDER BY position",
                (session_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]

    def log_model_request(self, ns: str, request: NewModelRequest) -> ModelRequest:
        now = now_iso()
        with self._write() as conn:
            self._require_session(conn, ns, request.session_id)
            cur = conn.execute(
                "INSERT INTO model_requests (session_id, model, message_count, bytes_sent, "
                "prompt_tokens, completion_tokens, cache_hit_tokens, cache_miss_tokens, "
                "latency_ms, outcome, error, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (request.session_id, request.model, request.message_count, request.bytes_sent,
                 request.prompt_tokens, request.completion_tokens, request.cache_hit_tokens,
                 request.cache_miss_tokens, request.latency_ms, request.outcome, request.error,
                 now),
            )  # fmt: skip
            request_id = int(cur.lastrowid or 0)
        return ModelRequest(**request.model_dump(), id=request_id, created_at=now)

    def list_model_requests(
        self, ns: str, session_id: str | None = None, limit: int = 1000
    ) -> list[ModelRequest]:
        query = (
            f"SELECT {REQUEST_COLUMNS} FROM model_requests r "
            "JOIN agent_sessions s ON s.id = r.session_id WHERE s.ns = ?"
        )
        params: list[Any] = [ns]
        if session_id is not None:
            query += " AND r.session_id = ?"
            params.append(session_id)
        query += " ORDER BY r.id LIMIT ?"
        params.append(limit)
        with self._read() as conn:
            rows = conn.execute(query, params).fetchall()
        return [request_from_row(row) for row in rows]

    def _require_session(self, conn: sqlite3.Connection, ns: str, session_id: str) -> None:
        row = conn.execute(
            "SELECT 1 FROM agent_sessions WHERE id = ? AND ns = ?", (session_id, ns)
        ).fetchone()
        if row is None:
            raise NotFound(str(session_id)[:100], "session")

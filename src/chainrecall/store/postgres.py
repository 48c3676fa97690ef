"""The PostgreSQL backend: the same contract as SQLite, for several processes and hosts.

Connections come from a `psycopg_pool.ConnectionPool` (autocommit; writes open
an explicit transaction). What SQLite gets from its single write lock, this
backend gets from row locks: a thread's row is locked (`SELECT ... FOR
UPDATE`) before its next event position is read and written, so positions are
consecutive per thread and become visible in order, which is what keeps
cursor paging exactly-once while other processes append. A dedupe key is
serialised by a transaction-scoped advisory lock on its hash, so racing
retries answer the first record. Deadlocks between multi-thread transactions
are retried whole. Search is a generated `tsvector` column with a GIN index,
ranked by `ts_rank_cd`. The harness's agent history follows the same rule: a
session's row is locked before its next message position is read and written.

psycopg's errors are translated into `chainrecall.errors` in `_translated`,
and nowhere else. A `pool_size=N` query parameter in the URL sizes the pool
(default 10); every other parameter goes to libpq unchanged.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from chainrecall import ids
from chainrecall.errors import (
    ChainRecallError,
    Gone,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    UnknownReference,
)
from chainrecall.history import (
    AgentMessage,
    AgentSession,
    ModelRequest,
    NewMessage,
    NewModelRequest,
    SessionKind,
    is_session_id,
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
from chainrecall.store.migrations import apply_postgres_migrations
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

Conn = psycopg.Connection[Any]
T = TypeVar("T")

DEFAULT_POOL_SIZE = 10
# A transaction that lost a deadlock or serialisation race is run again from the start.
_RETRIES = 8


@functools.lru_cache(maxsize=256)
def _pg_placeholders(sql: str) -> str:
    """`?` placeholders as psycopg's `%s` (the shared SQL has no literal `?` or `%`)."""
    return sql.replace("?", "%s")


@contextmanager
def translated(url: str = "") -> Iterator[None]:
    """The one place where psycopg's errors become ours."""
    where = redact_url(url) if url else "the PostgreSQL server"
    try:
        yield
    except ChainRecallError:
        raise
    except psycopg.DataError as exc:
        # e.g. a NUL character, which PostgreSQL text cannot hold
        raise InvalidInput(f"a value could not be stored: {exc}; remove it and retry") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
        raise StoreUnavailable(
            f"PostgreSQL at {where} could not be used ({str(exc).strip()}); check that the "
            "server is up, and the URL's host, port, database, user and sslmode"
        ) from exc


def redact_url(url: str) -> str:
    """A connection URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def split_pool_size(url: str) -> tuple[str, int]:
    """The libpq URL and the pool size: `pool_size` is ours, libpq would refuse it."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    size = DEFAULT_POOL_SIZE
    kept: list[tuple[str, str]] = []
    for name, value in query:
        if name != "pool_size":
            kept.append((name, value))
            continue
        if not value.isdigit() or int(value) < 1:
            raise InvalidInput(
                f"pool_size in the database URL must be a positive integer, not {value!r}"
            )
        size = int(value)
    return urlunsplit(parts._replace(query=urlencode(kept))), size


class PostgresStore(SQLStore):
    BINARY = 'COLLATE "C"'

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return conn.execute(_pg_placeholders(sql), params)

    def __init__(self, url: str, *, pool_size: int | None = None) -> None:
        self.url = url
        conninfo, size = split_pool_size(url)
        self._conninfo = conninfo
        with translated(url):
            # A direct connection first: a wrong URL fails here with libpq's own words.
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=15) as conn:
                apply_postgres_migrations(conn)
                self._secret = self._load_secret(conn)
            self._pool = ConnectionPool(
                conninfo, min_size=1, max_size=pool_size or size, timeout=30,
                kwargs={"autocommit": True}, open=True, name="chainrecall",
            )  # fmt: skip

    # -- connections ---------------------------------------------------------
    def _transact(self, work: Callable[[Conn], T]) -> T:
        """Run `work` in one transaction, again from the start if it lost a deadlock."""
        with translated(self.url):
            for attempt in range(_RETRIES):
                try:
                    with self._pool.connection() as conn, conn.transaction():
                        return work(conn)
                except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                    if attempt == _RETRIES - 1:
                        raise
            raise AssertionError("unreachable")

    @contextmanager
    def _read(self) -> Iterator[Conn]:
        with translated(self.url), self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self._pool.close()

    def _load_secret(self, conn: Conn) -> bytes:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('cursor_secret', %s) ON CONFLICT DO NOTHING",
            (secrets.token_hex(32),),
        )
        row = conn.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()
        assert row is not None
        return bytes.fromhex(row[0])

    def cursor_secret(self) -> bytes:
        return self._secret

    # -- writes --------------------------------------------------------------
    def append_triggers(self, ns: str, items: Sequence[NewTrigger]) -> list[Appended]:
        def work(conn: Conn) -> list[tuple[str, bool]]:
            return [self._append_one(conn, ns, item) for item in items]

        results = self._transact(work)
        with self._read() as conn:
            return [Appended(self._trigger(conn, ns, tid), created) for tid, created in results]

    def _append_one(self, conn: Conn, ns: str, item: NewTrigger) -> tuple[str, bool]:
        if item.dedupe_key is not None:
            # Racing retries queue here; the second sees the first's committed row.
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{ns}\x1f{item.source}\x1f{item.dedupe_key}",),
            )
            row = conn.execute(
                "SELECT id FROM triggers WHERE ns = %s AND source = %s AND dedupe_key = %s",
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
        seq = thread["event_count"] + 1
        while True:
            trigger_id = ids.new_id("trigger")
            inserted = conn.execute(
                "INSERT INTO triggers (id, ns, thread_id, seq, source, kind, summary, author, "
                "occurred_at, received_at, dedupe_key, content_type, payload_bytes, prev_id, "
                "in_reply_to, refs_json) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING RETURNING id",
                (
                    trigger_id, ns, thread["id"], seq, item.source, item.kind, item.summary,
                    item.author, occurred_at, now, item.dedupe_key, item.content_type,
                    len(item.payload), thread["last_trigger_id"], item.in_reply_to,
                    json.dumps(list(item.refs)),
                ),
            ).fetchone()  # fmt: skip
            if inserted is not None:
                break  # else the random ID was taken: draw another
        conn.execute(
            "INSERT INTO payloads (trigger_id, data) VALUES (%s, %s)", (trigger_id, item.payload)
        )
        self._cite(
            conn, ns, trigger_id, [(item.in_reply_to, "reply")] + [(r, "ref") for r in item.refs]
        )
        conn.execute(
            "INSERT INTO events (thread_id, seq, kind, object_id, at) "
            "VALUES (%s, %s, 'trigger', %s, %s)",
            (thread["id"], seq, trigger_id, now),
        )
        conn.execute(
            "UPDATE threads SET event_count = %s, last_trigger_id = %s, summary = %s, "
            "status = COALESCE(%s, status), last_activity_at = %s WHERE id = %s",
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
                "INSERT INTO aliases (ns, alias, object_id) VALUES (%s, %s, %s) "
                "ON CONFLICT (ns, alias) DO UPDATE SET object_id = excluded.object_id",
                (ns, alias, object_id),
            )
        return trigger_id, True

    def _thread_for_append(self, conn: Conn, ns: str, item: NewTrigger, now: str) -> dict[str, Any]:
        """The thread a new trigger goes to, locked, created on first use of its key."""
        columns = "id, event_count, last_trigger_id, deleted_at"
        if item.thread_id is not None:
            row = conn.execute(
                f"SELECT {columns} FROM threads WHERE id = %s AND ns = %s FOR UPDATE",
                (item.thread_id, ns),
            ).fetchone()
            if row is None or row[3] is not None:
                raise UnknownReference(item.thread_id, "thread_id")
            return {"id": row[0], "event_count": row[1], "last_trigger_id": row[2]}
        assert item.thread_key is not None
        by_key = f"SELECT {columns} FROM threads WHERE ns = %s AND key = %s FOR UPDATE"
        title = item.thread_title or item.summary
        while True:
            row = conn.execute(by_key, (ns, item.thread_key)).fetchone()
            if row is not None:
                return {"id": row[0], "event_count": row[1], "last_trigger_id": row[2]}
            # ON CONFLICT waits for a racing creator of the same key; if it committed we
            # insert nothing and lock its row on the next turn. A taken ID also lands here.
            thread_id = ids.new_id("thread")
            inserted = conn.execute(
                "INSERT INTO threads (id, ns, key, title, summary, status, created_at, "
                "first_activity_at, last_activity_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING id",
                (thread_id, ns, item.thread_key, title, item.summary,
                 item.thread_status or "open", now, now, now),
            ).fetchone()  # fmt: skip
            if inserted is not None:
                self._index(
                    conn, ns, thread_id, "thread", thread_id, title, f"{item.thread_key}\n{title}"
                )
                return {"id": thread_id, "event_count": 0, "last_trigger_id": None}

    def _trigger_exists(self, conn: Conn, ns: str, trigger_id: str) -> bool:
        if not ids.is_valid(trigger_id, "trigger"):
            return False
        row = conn.execute(
            "SELECT 1 FROM triggers WHERE id = %s AND ns = %s", (trigger_id, ns)
        ).fetchone()
        return row is not None

    def _index(
        self, conn: Conn, ns: str, doc_id: str, kind: str,
        thread_id: str | None, summary: str, body: str,
    ) -> None:  # fmt: skip
        conn.execute(
            "INSERT INTO search_docs (ns, doc_id, doc_kind, thread_id, summary, body) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            # PostgreSQL text cannot hold NUL; in the index it is only a word break.
            (ns, doc_id, kind, thread_id, summary, body.replace("\x00", " ")),
        )

    def _append_event(
        self, conn: Conn, thread_id: str, kind: str, object_id: str,
        report_n: int | None, now: str,
    ) -> None:  # fmt: skip
        row = conn.execute(
            "SELECT event_count FROM threads WHERE id = %s FOR UPDATE", (thread_id,)
        ).fetchone()
        assert row is not None
        seq = row[0] + 1
        conn.execute(
            "INSERT INTO events (thread_id, seq, kind, object_id, report_n, at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (thread_id, seq, kind, object_id, report_n, now),
        )
        conn.execute(
            "UPDATE threads SET event_count = %s, last_activity_at = %s WHERE id = %s",
            (seq, now, thread_id),
        )

    @staticmethod
    def _lock_threads(conn: Conn, ns: str, thread_ids: Sequence[str]) -> dict[str, str | None]:
        """Lock threads in ID order (so two such transactions cannot deadlock): id -> deleted_at."""
        rows = conn.execute(
            "SELECT id, deleted_at FROM threads WHERE id = ANY(%s) AND ns = %s "
            "ORDER BY id FOR UPDATE",
            (sorted(set(thread_ids)), ns),
        ).fetchall()
        return {row[0]: row[1] for row in rows}

    def start_worker(self, ns: str, thread_ids: Sequence[str], task: str) -> Worker:
        def work(conn: Conn) -> str:
            found = self._lock_threads(conn, ns, thread_ids)
            for thread_id in thread_ids:
                if thread_id not in found or found[thread_id] is not None:
                    raise UnknownReference(thread_id, "thread_id")
            now = now_iso()
            while True:
                worker_id = ids.new_id("worker")
                inserted = conn.execute(
                    "INSERT INTO workers (id, ns, task, status, started_at, updated_at) "
                    "VALUES (%s, %s, %s, 'running', %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
                    (worker_id, ns, task, now, now),
                ).fetchone()
                if inserted is not None:
                    break
            for pos, thread_id in enumerate(thread_ids):
                conn.execute(
                    "INSERT INTO worker_threads (worker_id, thread_id, pos) VALUES (%s, %s, %s)",
                    (worker_id, thread_id, pos),
                )
                self._append_event(conn, thread_id, "worker", worker_id, None, now)
            self._index(
                conn, ns, worker_id, "worker", thread_ids[0] if thread_ids else None,
                worker_event_summary(task), task,
            )  # fmt: skip
            return worker_id

        return self.get_worker(ns, self._transact(work))

    def add_report(
        self, ns: str, worker_id: str, *, summary: str, body: str, refs: Sequence[str], status: str
    ) -> Worker:
        def work(conn: Conn) -> None:
            row = conn.execute(
                "SELECT report_count, deleted_at FROM workers WHERE id = %s AND ns = %s FOR UPDATE",
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
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (worker_id, n, summary, body, status, json.dumps(list(refs)), now),
            )
            self._cite(conn, ns, worker_id, [(r, "report") for r in refs])
            conn.execute(
                "UPDATE workers SET report_count = %s, status = %s, updated_at = %s WHERE id = %s",
                (n, status, now, worker_id),
            )
            thread_ids = [
                r[0]
                for r in conn.execute(
                    "SELECT thread_id FROM worker_threads WHERE worker_id = %s ORDER BY pos",
                    (worker_id,),
                )
            ]
            self._lock_threads(conn, ns, thread_ids)
            for thread_id in thread_ids:
                self._append_event(conn, thread_id, "report", worker_id, n, now)
            self._index(
                conn, ns, worker_id, "worker", thread_ids[0] if thread_ids else None,
                one_line(summary, 200), f"{summary}\n{body[:SEARCH_TEXT_LIMIT]}",
            )  # fmt: skip

        self._transact(work)
        return self.get_worker(ns, worker_id)

    # -- reads ---------------------------------------------------------------
    def search(self, ns: str, query: str, limit: int) -> list[SearchHit]:
        terms = search_terms(query)
        if not terms:
            return []
        # Each term quoted (a phrase of one word), joined by websearch's OR: any term matches.
        match = " or ".join(f'"{term}"' for term in terms)
        with self._read() as conn:
            rows = conn.execute(
                "SELECT d.doc_id, d.doc_kind, d.thread_id, d.summary, "
                "ts_rank_cd(d.tsv, q, 1) AS score "
                "FROM search_docs d, websearch_to_tsquery('chainrecall_english', %s) q "
                "WHERE d.tsv @@ q AND d.ns = %s ORDER BY score DESC, d.rowid LIMIT %s",
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
                          score=round(float(score), 6))
            )  # fmt: skip
            if len(hits) == limit:
                break
        return hits

    # -- access control --------------------------------------------------------
    def create_token(self, ns: str, scope: Scope, name: str, token_hash: str) -> TokenInfo:
        def work(conn: Conn) -> Sequence[Any]:
            while True:
                token_id = "tok_" + ids.new_id("trigger").split("_", 1)[1]
                row = conn.execute(
                    "INSERT INTO tokens (id, ns, scope, name, token_hash, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING "
                    f"RETURNING {TOKEN_COLUMNS}",
                    (token_id, ns, scope, name, token_hash, now_iso()),
                ).fetchone()
                if row is not None:
                    return tuple(row)

        return token_from_row(self._transact(work))

    def revoke_token(self, token_id: str) -> TokenInfo:
        def work(conn: Conn) -> Sequence[Any]:
            row = conn.execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, %s) WHERE id = %s "
                f"RETURNING {TOKEN_COLUMNS}",
                (now_iso(), token_id),
            ).fetchone()
            if row is None:
                raise NotFound(token_id, "token")
            return tuple(row)

        return token_from_row(self._transact(work))

    def set_webhook_secret(self, ns: str, source: str, secret: str) -> None:
        self._transact(
            lambda conn: conn.execute(
                "INSERT INTO webhook_secrets (ns, source, secret, created_at) "
                "VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (ns, source) DO UPDATE SET secret = excluded.secret",
                (ns, source, secret, now_iso()),
            )
        )

    # -- deletion and retention ------------------------------------------------
    def delete_trigger(self, ns: str, trigger_id: str, *, actor: str, reason: str) -> Deletion:
        def work(conn: Conn) -> Deletion:
            row = conn.execute(
                "SELECT deleted_at, thread_id FROM triggers WHERE id = %s AND ns = %s",
                (trigger_id, ns),
            ).fetchone()
            if row is None:
                raise NotFound(trigger_id, "trigger")
            # The thread's lock first, as appends take it: its title/summary may change.
            conn.execute("SELECT 1 FROM threads WHERE id = %s FOR UPDATE", (row[1],))
            row = conn.execute(
                "SELECT deleted_at FROM triggers WHERE id = %s FOR UPDATE", (trigger_id,)
            ).fetchone()
            assert row is not None
            if row[0] is not None:
                raise Gone(trigger_id, row[0])
            now = now_iso()
            self._erase_trigger(conn, trigger_id, now)
            return self._log_deletion(conn, ns, trigger_id, "trigger", actor, reason, 1, now)

        return self._transact(work)

    def delete_thread(self, ns: str, thread_id: str, *, actor: str, reason: str) -> Deletion:
        def work(conn: Conn) -> Deletion:
            row = conn.execute(
                "SELECT deleted_at FROM threads WHERE id = %s AND ns = %s FOR UPDATE",
                (thread_id, ns),
            ).fetchone()
            if row is None:
                raise NotFound(thread_id, "thread")
            if row[0] is not None:
                raise Gone(thread_id, row[0])
            now = now_iso()
            live = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM triggers WHERE thread_id = %s AND deleted_at IS NULL "
                    "ORDER BY seq",
                    (thread_id,),
                ).fetchall()
            ]
            for trigger_id in live:
                self._erase_trigger(conn, trigger_id, now)
            conn.execute(
                "UPDATE threads SET key = NULL, title = '', summary = '', deleted_at = %s "
                "WHERE id = %s",
                (now, thread_id),
            )
            self._unindex(conn, thread_id)
            conn.execute("DELETE FROM aliases WHERE ns = %s AND object_id = %s", (ns, thread_id))
            return self._log_deletion(conn, ns, thread_id, "thread", actor, reason, len(live), now)

        return self._transact(work)

    def _erase_trigger(self, conn: Conn, trigger_id: str, now: str) -> None:
        """Erase one trigger's content in the caller's transaction; its row stays as a tombstone."""
        row = conn.execute(
            "SELECT thread_id, summary FROM triggers WHERE id = %s", (trigger_id,)
        ).fetchone()
        assert row is not None
        thread_id, summary = row
        conn.execute(
            "UPDATE triggers SET summary = '', author = NULL, payload_bytes = 0, refs_json = '[]', "
            "deleted_at = %s WHERE id = %s",
            (now, trigger_id),
        )
        conn.execute("DELETE FROM payloads WHERE trigger_id = %s", (trigger_id,))
        conn.execute("DELETE FROM aliases WHERE object_id = %s", (trigger_id,))
        self._uncite(conn, trigger_id)
        self._unindex(conn, trigger_id)
        # The thread's title and summary may be copies of this trigger's summary.
        thread = conn.execute(
            "SELECT key, title, summary, ns FROM threads WHERE id = %s", (thread_id,)
        ).fetchone()
        assert thread is not None
        key, title, thread_summary, ns = thread
        if summary and thread_summary == summary:
            latest = conn.execute(
                "SELECT summary FROM triggers WHERE thread_id = %s AND deleted_at IS NULL "
                "ORDER BY seq DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
            conn.execute(
                "UPDATE threads SET summary = %s WHERE id = %s",
                (latest[0] if latest else "", thread_id),
            )
        if summary and title == summary:
            conn.execute("UPDATE threads SET title = %s WHERE id = %s", (key or "", thread_id))
            self._unindex(conn, thread_id)
            if key:
                self._index(conn, ns, thread_id, "thread", thread_id, key, key)

    @staticmethod
    def _unindex(conn: Conn, doc_id: str) -> None:
        conn.execute("DELETE FROM search_docs WHERE doc_id = %s", (doc_id,))

    @staticmethod
    def _log_deletion(
        conn: Conn, ns: str, object_id: str, kind: Literal["trigger", "thread"],
        actor: str, reason: str, erased: int, now: str,
    ) -> Deletion:  # fmt: skip
        conn.execute(
            "INSERT INTO deletions (ns, object_id, kind, actor, reason, erased_triggers, at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
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
        def work(conn: Conn) -> Sequence[Any]:
            now = now_iso()
            while True:
                row = conn.execute(
                    "INSERT INTO agent_sessions (id, ns, kind, worker_id, thread_id, model, "
                    "status, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, 'open', %s, %s) "
                    f"ON CONFLICT (id) DO NOTHING RETURNING {SESSION_COLUMNS}",
                    (new_session_id(), ns, kind, worker_id, thread_id, model, now, now),
                ).fetchone()
                if row is not None:
                    return tuple(row)  # else the random ID was taken: draw another

        return session_from_row(self._transact(work))

    def get_session(self, ns: str, session_id: str) -> AgentSession:
        _require_session_id(session_id)
        with self._read() as conn:
            row = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM agent_sessions WHERE id = %s AND ns = %s",
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
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM agent_sessions WHERE ns = %s "
                "AND (%s::text IS NULL OR kind = %s) AND (%s::text IS NULL OR worker_id = %s) "
                "ORDER BY created_at DESC, rowid DESC LIMIT %s",
                (ns, kind, kind, worker_id, worker_id, limit),
            ).fetchall()
        return [session_from_row(row) for row in rows]

    def set_session_status(self, ns: str, session_id: str, status: str) -> AgentSession:
        _require_session_id(session_id)

        def work(conn: Conn) -> Sequence[Any]:
            row = conn.execute(
                "UPDATE agent_sessions SET status = %s, updated_at = %s WHERE id = %s AND ns = %s "
                f"RETURNING {SESSION_COLUMNS}",
                (status, now_iso(), session_id, ns),
            ).fetchone()
            if row is None:
                raise NotFound(str(session_id)[:100], "session")
            return tuple(row)

        return session_from_row(self._transact(work))

    def append_messages(
        self, ns: str, session_id: str, messages: Sequence[NewMessage]
    ) -> list[AgentMessage]:
        _require_session_id(session_id)

        def work(conn: Conn) -> list[AgentMessage]:
            # The session's row lock orders appenders: positions stay consecutive.
            self._require_session(conn, ns, session_id, lock=True)
            now = now_iso()
            row = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM agent_messages WHERE session_id = %s",
                (session_id,),
            ).fetchone()
            assert row is not None
            position = int(row[0])
            stored: list[AgentMessage] = []
            for message in messages:
                size = len(message.encoded().encode("utf-8"))
                tool_calls = (
                    json.dumps(message.tool_calls, ensure_ascii=False, separators=(",", ":"))
                    if message.tool_calls
                    else None
                )
                conn.execute(
                    "INSERT INTO agent_messages (session_id, position, role, content, "
                    "tool_calls_json, tool_call_id, name, bytes, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
            conn.execute(
                "UPDATE agent_sessions SET updated_at = %s WHERE id = %s", (now, session_id)
            )
            return stored

        return self._transact(work)

    def list_messages(self, ns: str, session_id: str) -> list[AgentMessage]:
        _require_session_id(session_id)
        with self._read() as conn:
            self._require_session(conn, ns, session_id)
            rows = conn.execute(
                "SELECT session_id, position, role, content, tool_calls_json, tool_call_id, "
                "name, bytes, created_at FROM agent_messages WHERE session_id = %s "
                "ORDER BY position",
                (session_id,),
            ).fetchall()
        return [message_from_row(row) for row in rows]

    def log_model_request(self, ns: str, request: NewModelRequest) -> ModelRequest:
        _require_session_id(request.session_id)

        def work(conn: Conn) -> ModelRequest:
            self._require_session(conn, ns, request.session_id)
            now = now_iso()
            row = conn.execute(
                "INSERT INTO model_requests (session_id, model, message_count, bytes_sent, "
                "prompt_tokens, completion_tokens, cache_hit_tokens, cache_miss_tokens, "
                "latency_ms, outcome, error, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (request.session_id, request.model, request.message_count, request.bytes_sent,
                 request.prompt_tokens, request.completion_tokens, request.cache_hit_tokens,
                 request.cache_miss_tokens, request.latency_ms, request.outcome, request.error,
                 now),
            ).fetchone()  # fmt: skip
            assert row is not None
            return ModelRequest(**request.model_dump(), id=int(row[0]), created_at=now)

        return self._transact(work)

    def list_model_requests(
        self, ns: str, session_id: str | None = None, limit: int = 1000
    ) -> list[ModelRequest]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {REQUEST_COLUMNS} FROM model_requests r "
                "JOIN agent_sessions s ON s.id = r.session_id WHERE s.ns = %s "
                "AND (%s::text IS NULL OR r.session_id = %s) ORDER BY r.id LIMIT %s",
                (ns, session_id, session_id, limit),
            ).fetchall()
        return [request_from_row(row) for row in rows]

    @staticmethod
    def _require_session(conn: Conn, ns: str, session_id: str, *, lock: bool = False) -> None:
        row = conn.execute(
            "SELECT 1 FROM agent_sessions WHERE id = %s AND ns = %s"
            + (" FOR UPDATE" if lock else ""),
            (session_id, ns),
        ).fetchone()
        if row is None:
            raise NotFound(str(session_id)[:100], "session")


def _require_session_id(session_id: str) -> None:
    """NotFound for what no session is called, as SQLite answers (and before PostgreSQL
    would refuse a NUL in it as bad input)."""
    if not is_session_id(session_id):
        raise NotFound(str(session_id)[:100], "session")

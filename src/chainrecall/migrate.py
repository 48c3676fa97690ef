"""`chainrecall migrate`: copy a whole memory between SQLite and PostgreSQL, and verify it.

Every table is copied row for row with its primary key, in primary-key order,
in batches, each batch committed together with a progress mark in the
target's `meta` table; an interrupted run started again continues after the
last committed batch, and a repeated run rewrites rows in place (upsert), so
it is safe to re-run. IDs, per-thread positions (`seq`), the cursor secret,
tombstones, aliases and search documents move unchanged, so IDs resolve and
cursors issued before the move keep working after it. Payloads are bytes and
stay byte for byte.

`verify` then resolves every ID on the target through the store API and
compares each record, each payload's SHA-256, each thread's event log and
each alias with the source, likewise each agent session with its messages
and model requests, and every table's row count. Copy from a source that no
one writes to meanwhile; verify says what differs if someone did.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import psycopg

from chainrecall.errors import ChainRecallError, InvalidInput
from chainrecall.model import Payload
from chainrecall.store import PostgresStore, SQLiteStore, Store, is_postgres_url, open_store
from chainrecall.store.postgres import split_pool_size, translated

DEFAULT_BATCH_SIZE = 500
_PROGRESS_PREFIX = "migrate:"  # meta keys of a run in progress; never copied


@dataclass(frozen=True)
class Table:
    """One table as both backends have it: the columns to copy and the primary key."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]


# In dependency order: a row's foreign keys point at tables copied before it.
TABLES: tuple[Table, ...] = (
    Table("meta", ("key", "value"), ("key",)),
    Table(
        "threads",
        (
            "id",
            "rowid",
            "ns",
            "key",
            "title",
            "summary",
            "status",
            "event_count",
            "last_trigger_id",
            "created_at",
            "first_activity_at",
            "last_activity_at",
            "deleted_at",
        ),
        ("id",),
    ),
    Table(
        "triggers",
        (
            "id",
            "ns",
            "thread_id",
            "seq",
            "source",
            "kind",
            "summary",
            "author",
            "occurred_at",
            "received_at",
            "dedupe_key",
            "content_type",
            "payload_bytes",
            "prev_id",
            "in_reply_to",
            "refs_json",
            "deleted_at",
        ),
        ("id",),
    ),
    Table("payloads", ("trigger_id", "data"), ("trigger_id",)),
    Table(
        "events", ("thread_id", "seq", "kind", "object_id", "report_n", "at"), ("thread_id", "seq")
    ),
    Table(
        "workers",
        ("id", "ns", "task", "status", "started_at", "updated_at", "report_count", "deleted_at"),
        ("id",),
    ),
    Table("worker_threads", ("worker_id", "thread_id", "pos", "rowid"), ("worker_id", "thread_id")),
    Table(
        "reports",
        ("worker_id", "n", "summary", "body", "status", "refs_json", "at"),
        ("worker_id", "n"),
    ),
    Table(
        "search_docs",
        ("rowid", "ns", "doc_id", "doc_kind", "thread_id", "summary", "body"),
        ("rowid",),
    ),
    Table("aliases", ("ns", "alias", "object_id"), ("ns", "alias")),
    Table("citations", ("ns", "dst_id", "src_id", "rel"), ("dst_id", "src_id", "rel")),
    Table(
        "tokens",
        ("id", "ns", "scope", "name", "token_hash", "created_at", "revoked_at"),
        ("id",),
    ),
    Table("webhook_secrets", ("ns", "source", "secret", "created_at"), ("ns", "source")),
    Table(
        "deletions",
        ("seq", "ns", "object_id", "kind", "actor", "reason", "erased_triggers", "at"),
        ("seq",),
    ),
    # Agent history (the harness): sessions, their messages, the model-request log.
    Table(
        "agent_sessions",
        (
            "id",
            "rowid",
            "ns",
            "kind",
            "worker_id",
            "thread_id",
            "model",
            "status",
            "created_at",
            "updated_at",
        ),
        ("id",),
    ),
    Table(
        "agent_messages",
        (
            "session_id",
            "position",
            "role",
            "content",
            "tool_calls_json",
            "tool_call_id",
            "name",
            "bytes",
            "created_at",
        ),
        ("session_id", "position"),
    ),
    Table(
        "model_requests",
        (
            "id",
            "session_id",
            "model",
            "message_count",
            "bytes_sent",
            "prompt_tokens",
            "completion_tokens",
            "cache_hit_tokens",
            "cache_miss_tokens",
            "latency_ms",
            "outcome",
            "error",
            "created_at",
        ),
        ("id",),
    ),
)

Row = tuple[Any, ...]

# PostgreSQL identity columns standing in for SQLite's INTEGER PRIMARY KEY / rowid.
_IDENTITY_COLUMNS = {
    "threads": "rowid",
    "worker_threads": "rowid",
    "search_docs": "rowid",
    "deletions": "seq",
    "agent_sessions": "rowid",
    "model_requests": "id",
}


class Side:
    """Raw, ordered access to one database's tables (the store API has no bulk copy)."""

    url: str

    def count(self, table: Table) -> int:
        raise NotImplementedError

    def read_batch(self, table: Table, after: Sequence[Any] | None, limit: int) -> list[Row]:
        """Up to `limit` rows with a primary key after `after`, in primary-key order."""
        raise NotImplementedError

    def write_batch(self, table: Table, rows: Sequence[Row], progress: tuple[str, str]) -> None:
        """Upsert `rows` and set the progress mark, in one transaction."""
        raise NotImplementedError

    def meta(self) -> dict[str, str]:
        raise NotImplementedError

    def clear_progress(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def _placeholders(n: int, mark: str) -> str:
    return ", ".join([mark] * n)


def _upsert_sql(table: Table, mark: str, columns: Sequence[str] | None = None) -> str:
    columns = columns or table.columns
    updates = [c for c in columns if c not in table.key]
    action = (
        "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in updates)
        if updates
        else "DO NOTHING"
    )
    return (
        f"INSERT INTO {table.name} ({', '.join(columns)}) "
        f"VALUES ({_placeholders(len(columns), mark)}) "
        f"ON CONFLICT ({', '.join(table.key)}) {action}"
    )


def _select_sql(table: Table, after: bool, mark: str, source: str) -> str:
    key = ", ".join(f"d.{c}" for c in table.key)
    where = f"WHERE ({key}) > ({_placeholders(len(table.key), mark)}) " if after else ""
    if table.name == "meta":
        # (no LIKE: a literal percent sign would read as a placeholder to psycopg)
        where = (where + "AND " if where else "WHERE ") + (
            f"substr(d.key, 1, {len(_PROGRESS_PREFIX)}) <> '{_PROGRESS_PREFIX}' "
        )
    columns = ", ".join(f"d.{c}" for c in table.columns)
    return f"SELECT {columns} FROM {source} {where}ORDER BY {key} LIMIT {mark}"


class SQLiteSide(Side):
    def __init__(self, path: str) -> None:
        SQLiteStore(path).close()  # creates the file and applies the migrations
        self.url = path
        self._conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        self._conn.execute("PRAGMA busy_timeout = 30000")

    def count(self, table: Table) -> int:
        return int(self._conn.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0])

    def read_batch(self, table: Table, after: Sequence[Any] | None, limit: int) -> list[Row]:
        source = f"{table.name} d"
        if table.name == "search_docs":
            # SQLite keeps the indexed text in the FTS table, under the same rowid.
            source = (
                "(SELECT s.*, f.body FROM search_docs s JOIN search_fts f ON f.rowid = s.rowid) d"
            )
        sql = _select_sql(table, after is not None, "?", source)
        return [tuple(r) for r in self._conn.execute(sql, (*(after or ()), limit))]

    def write_batch(self, table: Table, rows: Sequence[Row], progress: tuple[str, str]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if table.name == "search_docs":
                for row in rows:
                    conn.execute(_upsert_sql(table, "?", table.columns[:-1]), row[:-1])
                    conn.execute("DELETE FROM search_fts WHERE rowid = ?", (row[0],))
                    conn.execute(
                        "INSERT INTO search_fts (rowid, body) VALUES (?, ?)", (row[0], row[-1])
                    )
            else:
                conn.executemany(_upsert_sql(table, "?"), rows)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                progress,
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def meta(self) -> dict[str, str]:
        return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def clear_progress(self) -> None:
        self._conn.execute("DELETE FROM meta WHERE key LIKE ?", (_PROGRESS_PREFIX + "%",))

    def close(self) -> None:
        self._conn.close()


class PostgresSide(Side):
    def __init__(self, url: str) -> None:
        PostgresStore(url).close()  # applies the migrations
        self.url = url
        with translated(url):
            self._conn = psycopg.connect(split_pool_size(url)[0], autocommit=True)

    def count(self, table: Table) -> int:
        row = self._conn.execute(f"SELECT count(*) FROM {table.name}").fetchone()
        return int(row[0]) if row else 0

    def read_batch(self, table: Table, after: Sequence[Any] | None, limit: int) -> list[Row]:
        sql = _select_sql(table, after is not None, "%s", f"{table.name} d")
        return [tuple(r) for r in self._conn.execute(sql, (*(after or ()), limit))]

    def write_batch(self, table: Table, rows: Sequence[Row], progress: tuple[str, str]) -> None:
        with self._conn.transaction(), self._conn.cursor() as cur:
            if rows:
                cur.executemany(_upsert_sql(table, "%s"), rows)
            cur.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                progress,
            )
            counter = _IDENTITY_COLUMNS.get(table.name)
            if counter is not None:
                # Rows came with their numbers; new rows must number after them.
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table.name}', '{counter}'), "
                    f"COALESCE((SELECT MAX({counter}) FROM {table.name}), 0) + 1, false)"
                )

    def meta(self) -> dict[str, str]:
        return {k: v for k, v in self._conn.execute("SELECT key, value FROM meta").fetchall()}

    def clear_progress(self) -> None:
        self._conn.execute("DELETE FROM meta WHERE key LIKE %s", (_PROGRESS_PREFIX + "%",))

    def close(self) -> None:
        self._conn.close()


def open_side(url: str) -> Side:
    return PostgresSide(url) if is_postgres_url(url) else SQLiteSide(url.removeprefix("sqlite:///"))


# A progress callback: (table name, rows done in it, rows in it at the source).
Progress = Callable[[str, int, int], None]


def copy_database(
    source_url: str,
    target_url: str,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Copy every table from source to target; answer the rows copied per table."""
    if batch_size < 1:
        raise InvalidInput("batch size must be at least 1")
    if source_url == target_url:
        raise InvalidInput("--from and --to name the same database; name two different ones")
    with _sides(source_url, target_url) as (source, target):
        _refuse_foreign_target(source, target)
        copied: dict[str, int] = {}
        for table in TABLES:
            total = source.count(table)
            mark = target.meta().get(_PROGRESS_PREFIX + table.name)
            after: list[Any] | None = json.loads(mark) if mark else None
            done = 0 if after is None else min(total, target.count(table))
            if progress:
                progress(table.name, done, total)
            copied[table.name] = 0
            while True:
                rows = source.read_batch(table, after, batch_size)
                if not rows:
                    break
                after = _key_of(table, rows[-1])
                target.write_batch(table, rows, (_PROGRESS_PREFIX + table.name, json.dumps(after)))
                copied[table.name] += len(rows)
                done += len(rows)
                if progress:
                    progress(table.name, min(done, total), total)
        target.clear_progress()  # done: a later run copies everything again (upsert)
        return copied


def _key_of(table: Table, row: Row) -> list[Any]:
    return [row[table.columns.index(k)] for k in table.key]


def _refuse_foreign_target(source: Side, target: Side) -> None:
    """Refuse to mix two memories: the target must be empty, or a copy of this source."""
    holders = ("threads", "workers", "agent_sessions")
    if all(target.count(table) == 0 for table in TABLES if table.name in holders):
        return
    if target.meta().get("cursor_secret") != source.meta().get("cursor_secret"):
        raise InvalidInput(
            f"{_shown(target.url)} already holds a memory that was not copied from "
            f"{_shown(source.url)}; migrate into an empty database"
        )


def _shown(url: str) -> str:
    from chainrecall.store.postgres import redact_url

    return redact_url(url)


class _sides:
    def __init__(self, source_url: str, target_url: str) -> None:
        self.source_url, self.target_url = source_url, target_url
        self.opened: list[Side] = []

    def __enter__(self) -> tuple[Side, Side]:
        try:
            self.opened.append(open_side(self.source_url))
            self.opened.append(open_side(self.target_url))
        except BaseException:
            self.__exit__()
            raise
        return self.opened[0], self.opened[1]

    def __exit__(self, *exc: object) -> None:
        for side in self.opened:
            side.close()


# -- verify -------------------------------------------------------------------------


def _outcome(read: Callable[[Store], Any], store: Store) -> str:
    """What a read answers, as text to compare: the record's JSON, or the error."""
    try:
        value = read(store)
    except ChainRecallError as exc:
        return f"{type(exc).__name__}: {exc.detail}"
    if value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, Payload):  # compare its type and a hash of its bytes
        return f"{value.content_type} sha256:{hashlib.sha256(value.data).hexdigest()}"
    return str(value.model_dump_json())


def _events(store: Store, ns: str, thread_id: str) -> Iterator[str]:
    after = 0
    while True:
        events, more = store.list_events(ns, thread_id, after, 500)
        yield from (event.model_dump_json() for event in events)
        if not events or not more:
            return
        after = events[-1].seq


def verify_database(
    source_url: str, target_url: str, *, progress: Progress | None = None
) -> list[str]:
    """Resolve every ID of the source on the target and compare; answer what differs."""
    differences: list[str] = []
    with _sides(source_url, target_url) as (source_side, target_side):
        for table in TABLES:
            if table.name == "meta":
                continue
            theirs, ours = source_side.count(table), target_side.count(table)
            if theirs != ours:
                differences.append(f"table {table.name}: {theirs} rows in source, {ours} in target")
        source_meta, target_meta = source_side.meta(), target_side.meta()
        if source_meta.get("cursor_secret") != target_meta.get("cursor_secret"):
            differences.append("meta cursor_secret differs: cursors issued before will be refused")
        checks = list(_checks(source_side))
    with closing(open_store(source_url)) as source, closing(open_store(target_url)) as target:
        for done, (label, read) in enumerate(checks, start=1):
            before, after = _outcome(read, source), _outcome(read, target)
            if before != after:
                differences.append(f"{label}: source {before[:300]} | target {after[:300]}")
            if progress and (done % 200 == 0 or done == len(checks)):
                progress("verify", done, len(checks))
    return differences


Check = tuple[str, Callable[[Store], Any]]
# A limit that lists everything: the session and request lists have no paging.
_EVERY = 2**62


def _checks(side: Side) -> Iterator[Check]:
    """One read per ID (and per thread log, payload and alias) of the source."""
    session_namespaces: set[str] = set()
    for table in TABLES:
        if table.name not in ("threads", "triggers", "workers", "aliases", "agent_sessions"):
            continue
        after: Sequence[Any] | None = None
        while True:
            rows = side.read_batch(table, after, 1000)
            for row in rows:
                yield from _row_checks(table, row)
                if table.name == "agent_sessions":
                    session_namespaces.add(row[table.columns.index("ns")])
            if len(rows) < 1000:
                break
            after = _key_of(table, rows[-1])
    for ns in sorted(session_namespaces):
        # The order sessions list in (newest first; ties by row order) moves unchanged.
        yield f"sessions of {ns!r}", _session_order(ns)


def _row_checks(table: Table, row: Row) -> Iterator[Check]:
    values = dict(zip(table.columns, row, strict=True))
    ns = values["ns"]
    if table.name == "aliases":
        alias = values["alias"]
        yield f"alias {alias!r} ({ns})", lambda s: s.resolve_alias(ns, alias)
        return
    if table.name == "agent_sessions":
        yield from _session_checks(ns, values["id"])
        return
    object_id = values["id"]
    if table.name == "threads":
        yield object_id, lambda s: s.get_thread(ns, object_id)
        yield f"{object_id} events", lambda s: "\n".join(_events(s, ns, object_id))
    elif table.name == "triggers":
        yield object_id, lambda s: s.get_trigger(ns, object_id)
        yield f"{object_id} payload", lambda s: s.get_payload(ns, object_id)
    else:
        yield object_id, lambda s: s.get_worker(ns, object_id)


def _session_order(ns: str) -> Callable[[Store], str]:
    return lambda s: " ".join(session.id for session in s.list_sessions(ns, limit=_EVERY))


def _session_checks(ns: str, session_id: str) -> Iterator[Check]:
    """A session, its messages (byte for byte as they would be sent) and its request log."""
    yield session_id, lambda s: s.get_session(ns, session_id)
    yield (
        f"{session_id} messages",
        lambda s: "\n".join(m.model_dump_json() for m in s.list_messages(ns, session_id)),
    )
    yield (
        f"{session_id} model requests",
        lambda s: "\n".join(
            r.model_dump_json() for r in s.list_model_requests(ns, session_id, limit=_EVERY)
        ),
    )

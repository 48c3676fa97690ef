"""Numbered, transactional schema migrations for every backend.

Each backend has an ordered list of migrations; migration N is applied once,
inside one transaction with the bump of `schema_version`, so a crash leaves
the schema at N-1 or N, never half-way. New migrations are appended, never
edited: a database in the field may already have applied the old text.
Several processes may start at once; the runner takes the write lock first
(SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction-scoped advisory lock),
so only one of them applies a migration and the others see it done.

Both schemas keep the same tables, column names and meanings, timestamps as
the same canonical TEXT, so that `chainrecall migrate` copies rows unchanged
and the records read back are byte-identical on either backend.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from chainrecall.model import now_iso

if TYPE_CHECKING:
    import psycopg

SQLITE_MIGRATIONS: list[str] = [
    # 1: the recall store
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    CREATE TABLE threads (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        key TEXT,                       -- NULL once deleted, so the key can start afresh
        title TEXT NOT NULL,
        summary TEXT NOT NULL,
        status TEXT NOT NULL,
        event_count INTEGER NOT NULL DEFAULT 0,
        last_trigger_id TEXT,
        created_at TEXT NOT NULL,
        first_activity_at TEXT NOT NULL,
        last_activity_at TEXT NOT NULL,
        deleted_at TEXT
    );
    CREATE UNIQUE INDEX threads_ns_key ON threads (ns, key);
    CREATE INDEX threads_ns_activity ON threads (ns, last_activity_at);

    CREATE TABLE triggers (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        thread_id TEXT NOT NULL REFERENCES threads (id),
        seq INTEGER NOT NULL,
        source TEXT NOT NULL,
        kind TEXT NOT NULL,
        summary TEXT NOT NULL,
        author TEXT,
        occurred_at TEXT NOT NULL,
        received_at TEXT NOT NULL,
        dedupe_key TEXT,
        content_type TEXT NOT NULL,
        payload_bytes INTEGER NOT NULL,
        prev_id TEXT,
        in_reply_to TEXT,
        refs_json TEXT NOT NULL DEFAULT '[]',
        deleted_at TEXT
    );
    CREATE UNIQUE INDEX triggers_dedupe ON triggers (ns, source, dedupe_key)
        WHERE dedupe_key IS NOT NULL;
    CREATE INDEX triggers_prev ON triggers (prev_id);
    CREATE INDEX triggers_ns_received ON triggers (ns, received_at);

    -- Payloads live apart from records: a record fetch never reads a 41 KB log.
    CREATE TABLE payloads (
        trigger_id TEXT PRIMARY KEY REFERENCES triggers (id),
        data BLOB NOT NULL
    );

    -- A thread's event log; seq is assigned under the write lock (BEGIN IMMEDIATE).
    CREATE TABLE events (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        object_id TEXT NOT NULL,
        report_n INTEGER,
        at TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID;

    CREATE TABLE workers (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        task TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        report_count INTEGER NOT NULL DEFAULT 0,
        deleted_at TEXT
    );

    CREATE TABLE worker_threads (
        worker_id TEXT NOT NULL REFERENCES workers (id),
        thread_id TEXT NOT NULL REFERENCES threads (id),
        pos INTEGER NOT NULL,
        PRIMARY KEY (worker_id, thread_id)
    );
    CREATE INDEX worker_threads_thread ON worker_threads (thread_id);

    CREATE TABLE reports (
        worker_id TEXT NOT NULL REFERENCES workers (id),
        n INTEGER NOT NULL,
        summary TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL,
        refs_json TEXT NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (worker_id, n)
    );

    -- Search: one row per searchable document (trigger, thread, worker report).
    CREATE TABLE search_docs (
        rowid INTEGER PRIMARY KEY,
        ns TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        doc_kind TEXT NOT NULL,
        thread_id TEXT,
        summary TEXT NOT NULL
    );
    CREATE INDEX search_docs_doc ON search_docs (doc_id);
    CREATE VIRTUAL TABLE search_fts USING fts5 (
        body, tokenize = 'porter unicode61 remove_diacritics 2'
    );

    -- Names that ingest resolves later: a PR's head SHA -> its thread, a comment id or
    -- an e-mail Message-ID -> its trigger. The latest claim wins.
    CREATE TABLE aliases (
        ns TEXT NOT NULL,
        alias TEXT NOT NULL,
        object_id TEXT NOT NULL,
        PRIMARY KEY (ns, alias)
    ) WITHOUT ROWID;
    """,
    # 2: access control, webhook secrets per namespace, the deletion log
    """
    CREATE TABLE tokens (
        id TEXT PRIMARY KEY,            -- public id, shown by `token list`
        ns TEXT NOT NULL,
        scope TEXT NOT NULL,
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE, -- SHA-256 of the secret token; the token is never stored
        created_at TEXT NOT NULL,
        revoked_at TEXT
    );

    CREATE TABLE webhook_secrets (
        ns TEXT NOT NULL,
        source TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (ns, source)
    );

    CREATE TABLE deletions (
        seq INTEGER PRIMARY KEY,
        ns TEXT NOT NULL,
        object_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT NOT NULL,
        erased_triggers INTEGER NOT NULL,
        at TEXT NOT NULL
    );
    CREATE INDEX triggers_thread ON triggers (thread_id);
    """,
    # 3: agent history (the harness): sessions, append-only messages, model requests
    """
    CREATE TABLE agent_sessions (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('router', 'worker')),
        worker_id TEXT,
        thread_id TEXT,
        model TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX agent_sessions_ns_created ON agent_sessions (ns, created_at);
    CREATE INDEX agent_sessions_worker ON agent_sessions (worker_id);

    -- Append-only: a message once sent is sent again byte for byte (prefix cache).
    CREATE TABLE agent_messages (
        session_id TEXT NOT NULL REFERENCES agent_sessions (id),
        position INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT,
        tool_calls_json TEXT,
        tool_call_id TEXT,
        name TEXT,
        bytes INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, position)
    ) WITHOUT ROWID;

    CREATE TABLE model_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES agent_sessions (id),
        model TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        bytes_sent INTEGER NOT NULL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cache_hit_tokens INTEGER,
        cache_miss_tokens INTEGER,
        latency_ms INTEGER NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'timeout')),
        error TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX model_requests_session ON model_requests (session_id, id);
    """,
    # 4: back-links: which triggers and workers cite a trigger ("what is linked to this?")
    """
    CREATE TABLE citations (
        ns TEXT NOT NULL,
        dst_id TEXT NOT NULL,           -- the trigger cited
        src_id TEXT NOT NULL,           -- the trigger or worker citing it
        rel TEXT NOT NULL,              -- reply, ref (a trigger's refs) or report
        PRIMARY KEY (dst_id, src_id, rel)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO citations (ns, dst_id, src_id, rel)
        SELECT ns, in_reply_to, id, 'reply' FROM triggers
        WHERE in_reply_to IS NOT NULL AND deleted_at IS NULL;
    INSERT OR IGNORE INTO citations (ns, dst_id, src_id, rel)
        SELECT t.ns, j.value, t.id, 'ref' FROM triggers t, json_each(t.refs_json) j
        WHERE t.deleted_at IS NULL;
    INSERT OR IGNORE INTO citations (ns, dst_id, src_id, rel)
        SELECT w.ns, j.value, r.worker_id, 'report'
        FROM reports r JOIN workers w ON w.id = r.worker_id, json_each(r.refs_json) j;
    """,
]


def apply_sqlite_migrations(conn: sqlite3.Connection) -> int:
    """Bring an SQLite database (autocommit connection) up to date; answer its version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(SQLITE_MIGRATIONS, start=1):
            if number <= version:
                continue
            for statement in _split(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            version = number
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return int(version)


def _split(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return [s for s in statements if s.strip(" ;\n")]


# The advisory lock the PostgreSQL runner takes; the two-int key space never meets the
# one-bigint keys the store takes for dedupe keys.
_PG_MIGRATION_LOCK = (0x43524543, 1)  # "CREC", migrations

POSTGRES_MIGRATIONS: list[str] = [
    # 1: the recall store; the same tables and columns as SQLITE_MIGRATIONS[0]
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    -- rowid: SQLite's implicit row order, made explicit (list order ties, migrate keeps it).
    -- Timestamps are canonical TEXT compared byte-wise, hence COLLATE "C".
    CREATE TABLE threads (
        id TEXT PRIMARY KEY,
        rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE,
        ns TEXT NOT NULL,
        key TEXT,
        title TEXT NOT NULL,
        summary TEXT NOT NULL,
        status TEXT NOT NULL,
        event_count BIGINT NOT NULL DEFAULT 0,
        last_trigger_id TEXT,
        created_at TEXT NOT NULL,
        first_activity_at TEXT NOT NULL,
        last_activity_at TEXT COLLATE "C" NOT NULL,
        deleted_at TEXT
    );
    CREATE UNIQUE INDEX threads_ns_key ON threads (ns, key);
    CREATE INDEX threads_ns_activity ON threads (ns, last_activity_at DESC, rowid DESC);

    CREATE TABLE triggers (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        thread_id TEXT NOT NULL REFERENCES threads (id),
        seq BIGINT NOT NULL,
        source TEXT NOT NULL,
        kind TEXT NOT NULL,
        summary TEXT NOT NULL,
        author TEXT,
        occurred_at TEXT NOT NULL,
        received_at TEXT COLLATE "C" NOT NULL,
        dedupe_key TEXT,
        content_type TEXT NOT NULL,
        payload_bytes BIGINT NOT NULL,
        prev_id TEXT,
        in_reply_to TEXT,
        refs_json TEXT NOT NULL DEFAULT '[]',
        deleted_at TEXT
    );
    CREATE UNIQUE INDEX triggers_dedupe ON triggers (ns, source, dedupe_key)
        WHERE dedupe_key IS NOT NULL;
    CREATE INDEX triggers_prev ON triggers (prev_id);
    CREATE INDEX triggers_ns_received ON triggers (ns, received_at);

    CREATE TABLE payloads (
        trigger_id TEXT PRIMARY KEY REFERENCES triggers (id),
        data BYTEA NOT NULL
    );

    -- A thread's event log; seq is assigned under the thread's row lock (FOR UPDATE).
    CREATE TABLE events (
        thread_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL,
        object_id TEXT NOT NULL,
        report_n BIGINT,
        at TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );

    CREATE TABLE workers (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        task TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        report_count BIGINT NOT NULL DEFAULT 0,
        deleted_at TEXT
    );

    CREATE TABLE worker_threads (
        worker_id TEXT NOT NULL REFERENCES workers (id),
        thread_id TEXT NOT NULL REFERENCES threads (id),
        pos BIGINT NOT NULL,
        rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE,
        PRIMARY KEY (worker_id, thread_id)
    );
    CREATE INDEX worker_threads_thread ON worker_threads (thread_id, rowid);

    CREATE TABLE reports (
        worker_id TEXT NOT NULL REFERENCES workers (id),
        n BIGINT NOT NULL,
        summary TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL,
        refs_json TEXT NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (worker_id, n)
    );

    -- Search: English stemming like SQLite's porter tokenizer, but no stopword list, so a
    -- query of only common words ("not all") still matches as it does on SQLite;
    -- search_terms() drops the stopwords that matter, the same on both backends.
    CREATE TEXT SEARCH DICTIONARY chainrecall_english_stem (
        TEMPLATE = snowball, Language = english
    );
    CREATE TEXT SEARCH CONFIGURATION chainrecall_english (COPY = pg_catalog.english);
    ALTER TEXT SEARCH CONFIGURATION chainrecall_english
        ALTER MAPPING REPLACE english_stem WITH chainrecall_english_stem;

    -- One row per searchable document; `body` is what SQLite keeps in search_fts.
    CREATE TABLE search_docs (
        rowid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        ns TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        doc_kind TEXT NOT NULL,
        thread_id TEXT,
        summary TEXT NOT NULL,
        body TEXT NOT NULL,
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('chainrecall_english', body)) STORED
    );
    CREATE INDEX search_docs_doc ON search_docs (doc_id);
    CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv);

    CREATE TABLE aliases (
        ns TEXT NOT NULL,
        alias TEXT NOT NULL,
        object_id TEXT NOT NULL,
        PRIMARY KEY (ns, alias)
    );
    """,
    # 2: access control, webhook secrets per namespace, the deletion log (as SQLite's 2)
    """
    CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        ns TEXT NOT NULL,
        scope TEXT NOT NULL,
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_at TEXT COLLATE "C" NOT NULL,
        revoked_at TEXT
    );

    CREATE TABLE webhook_secrets (
        ns TEXT NOT NULL,
        source TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (ns, source)
    );

    CREATE TABLE deletions (
        seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        ns TEXT NOT NULL,
        object_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT NOT NULL,
        erased_triggers BIGINT NOT NULL,
        at TEXT NOT NULL
    );
    CREATE INDEX triggers_thread ON triggers (thread_id);
    """,
    # 3: agent history (the harness), as SQLite's 3; rowid and id keep SQLite's row order
    """
    CREATE TABLE agent_sessions (
        id TEXT PRIMARY KEY,
        rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE,
        ns TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('router', 'worker')),
        worker_id TEXT,
        thread_id TEXT,
        model TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT COLLATE "C" NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX agent_sessions_ns_created ON agent_sessions (ns, created_at DESC, rowid DESC);
    CREATE INDEX agent_sessions_worker ON agent_sessions (worker_id);

    -- Append-only: a message once sent is sent again byte for byte (prefix cache).
    -- Positions are assigned under the session row's lock (FOR UPDATE).
    CREATE TABLE agent_messages (
        session_id TEXT NOT NULL REFERENCES agent_sessions (id),
        position BIGINT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT,
        tool_calls_json TEXT,
        tool_call_id TEXT,
        name TEXT,
        bytes BIGINT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, position)
    );

    CREATE TABLE model_requests (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES agent_sessions (id),
        model TEXT NOT NULL,
        message_count BIGINT NOT NULL,
        bytes_sent BIGINT NOT NULL,
        prompt_tokens BIGINT,
        completion_tokens BIGINT,
        cache_hit_tokens BIGINT,
        cache_miss_tokens BIGINT,
        latency_ms BIGINT NOT NULL,
        outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'timeout')),
        error TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX model_requests_session ON model_requests (session_id, id);
    """,
    # 4: back-links, as SQLite's 4
    """
    CREATE TABLE citations (
        ns TEXT NOT NULL,
        dst_id TEXT NOT NULL,
        src_id TEXT NOT NULL,
        rel TEXT NOT NULL,
        PRIMARY KEY (dst_id, src_id, rel)
    );
    INSERT INTO citations (ns, dst_id, src_id, rel)
        SELECT ns, in_reply_to, id, 'reply' FROM triggers
        WHERE in_reply_to IS NOT NULL AND deleted_at IS NULL
        ON CONFLICT DO NOTHING;
    INSERT INTO citations (ns, dst_id, src_id, rel)
        SELECT t.ns, j.value, t.id, 'ref'
        FROM triggers t, jsonb_array_elements_text(t.refs_json::jsonb) AS j (value)
        WHERE t.deleted_at IS NULL
        ON CONFLICT DO NOTHING;
    INSERT INTO citations (ns, dst_id, src_id, rel)
        SELECT w.ns, j.value, r.worker_id, 'report'
        FROM reports r JOIN workers w ON w.id = r.worker_id,
             jsonb_array_elements_text(r.refs_json::jsonb) AS j (value)
        ON CONFLICT DO NOTHING;
    """,
]


def apply_postgres_migrations(conn: psycopg.Connection[Any]) -> int:
    """Bring a PostgreSQL database up to date (a psycopg connection); answer its version.

    All pending migrations run in one transaction after a transaction-scoped advisory
    lock, so processes that start together apply each migration exactly once.
    Objects go to the first schema of the connection's search_path.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s::int, %s::int)", _PG_MIGRATION_LOCK)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        version = int(row[0]) if row is not None else 0
        for number, script in enumerate(POSTGRES_MIGRATIONS, start=1):
            if number <= version:
                continue
            conn.execute(script)  # no parameters: psycopg sends the whole script at once
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                (number, now_iso()),
            )
            version = number
    return version

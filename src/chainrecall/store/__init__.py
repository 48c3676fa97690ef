"""Storage: the port (`base.Store`) and the one factory that names the backends."""

from __future__ import annotations

from chainrecall.store.base import DEFAULT_NAMESPACE, Appended, Store
from chainrecall.store.postgres import PostgresStore
from chainrecall.store.sqlite import SQLiteStore

__all__ = ["DEFAULT_NAMESPACE", "Appended", "PostgresStore", "SQLiteStore", "Store", "open_store"]


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def open_store(url: str) -> Store:
    """Open the backend a `--db` value names: a PostgreSQL URL, else an SQLite file path."""
    if is_postgres_url(url):
        return PostgresStore(url)
    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    return SQLiteStore(path)

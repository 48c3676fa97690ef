"""Shared fixtures: one store per test on every backend, and a real HTTP server over it.

`db_url` is parametrised over the backends, so every test that takes it (or
`memory`, `store`, `api`) runs once per backend: one suite, every backend.

PostgreSQL tests use the server named by CHAINRECALL_TEST_PG (default
postgresql://postgres@127.0.0.1:5432/postgres; `.ci/run` creates a fresh
database and sets it). Each test gets a fresh schema there (about 1 ms to
create, against some 400 ms for CREATE + DROP DATABASE), dropped at teardown.
When no server answers, the PostgreSQL tests skip, unless CI is set: there
they fail, so CI never passes by skipping a backend.
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chainrecall.api.app import create_app
from chainrecall.service import Memory
from chainrecall.store import Store, open_store
from tests.servers import ThreadServer

BACKENDS = ["sqlite", "postgres"]

PG_BASE_URL = os.environ.get("CHAINRECALL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "memory.db")
        return
    if request.param == "postgres":
        yield from postgres_schema_url()
        return
    raise AssertionError(f"unknown backend {request.param}")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


@pytest.fixture
def memory(store: Store) -> Memory:
    return Memory(store)


@pytest.fixture
def server(store: Store) -> Iterator[ThreadServer]:
    with ThreadServer(create_app(store)) as running:
        yield running


@pytest.fixture
def api(server: ThreadServer) -> Iterator[httpx.Client]:
    """An HTTP client for a live server on a loopback port."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@functools.cache
def _postgres_unreachable() -> str | None:
    """Why the test server cannot be used, or None when it can (asked once per session)."""
    import psycopg

    try:
        with psycopg.connect(PG_BASE_URL, connect_timeout=5):
            return None
    except psycopg.Error as exc:
        return f"{exc}".strip()


def postgres_schema_url() -> Iterator[str]:
    """A URL of a fresh, empty schema on the test server; the schema is dropped afterwards."""
    import psycopg

    problem = _postgres_unreachable()
    if problem is not None:
        reason = f"no PostgreSQL server at {PG_BASE_URL} ({problem}); set CHAINRECALL_TEST_PG"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}. CI must run the PostgreSQL tests, not skip them")
        pytest.skip(reason)
    schema = f"cr_{secrets.token_hex(6)}"
    with psycopg.connect(PG_BASE_URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in PG_BASE_URL else "?"
    try:
        yield f"{PG_BASE_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_BASE_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def shared_path(*parts: str) -> Path:
    """A path in ../shared; the test is skipped when it is absent (a user's machine)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (tests that read ../shared skip outside the workspace)")
    return path

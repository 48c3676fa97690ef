"""Shared fixtures: one store per test on every backend, and a real HTTP server over it.

`db_url` is parametrised over the backends, so every test that takes it (or
`memory`, `store`, `api`) runs once per backend: one suite, every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chainrecall.api.app import create_app
from chainrecall.service import Memory
from chainrecall.store import Store, open_store
from tests.servers import ThreadServer

BACKENDS = ["sqlite"]

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "memory.db")
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


def shared_path(*parts: str) -> Path:
    """A path in ../shared; the test is skipped when it is absent (a user's machine)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (tests that read ../shared skip outside the workspace)")
    return path

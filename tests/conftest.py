from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from harness import pgcluster
from sessiontree import JsonlStorage, MemoryStorage, PostgresStorage, Session, SqliteStorage
from sessiontree.storage.base import SessionStorage

PG_URL_ENV = "SESSIONTREE_TEST_PG_URL"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores. Most tests wait on an app's timers, a child
    process or Chromium part of the time, and a third worker fills those waits: the TUI tests
    took 87 s on 2 cores against 99 s with two (`pyproject.toml` caps them at 8)."""
    return (os.cpu_count() or 1) + 1


@dataclass
class Backend:
    """How to make a fresh storage of one kind and how to reopen it from what it persisted."""

    name: str
    create: Callable[[], SessionStorage]
    reopen: Callable[[SessionStorage], SessionStorage]
    path: Path | None = None
    # a second, read-only storage of the same session beside the writer (None: memory has one)
    reader: Callable[[SessionStorage], SessionStorage] | None = None

    def session(self) -> Session:
        return Session(self.create())

    def reopened(self, session: Session) -> Session:
        return Session(self.reopen(session.storage))


def _memory(tmp_path: Path) -> Backend:
    # "reopen" = a new Session over the same storage, as Pi's tests do for in-memory storage
    return Backend("memory", lambda: MemoryStorage(cwd="/p"), lambda s: s)


def _jsonl(tmp_path: Path) -> Backend:
    path = tmp_path / "session.jsonl"

    def reopen(storage: SessionStorage) -> SessionStorage:
        storage.close()
        return JsonlStorage.open(path)

    return Backend(
        "jsonl",
        lambda: JsonlStorage.create(path, cwd="/p"),
        reopen,
        path,
        lambda _: JsonlStorage.open(path, read_only=True),
    )


def _sqlite(tmp_path: Path) -> Backend:
    path = tmp_path / "sessions.sqlite"

    def reopen(storage: SessionStorage) -> SessionStorage:
        assert isinstance(storage, SqliteStorage)
        sid = storage.session_id
        storage.close()
        return SqliteStorage.open(path, sid)

    def reader(storage: SessionStorage) -> SessionStorage:
        assert isinstance(storage, SqliteStorage)
        return SqliteStorage.open(path, storage.session_id, read_only=True)

    return Backend("sqlite", lambda: SqliteStorage.create(path, cwd="/p"), reopen, path, reader)


def _postgres(url: str) -> Backend:
    def reopen(storage: SessionStorage) -> SessionStorage:
        assert isinstance(storage, PostgresStorage)
        sid = storage.session_id
        storage.close()
        return PostgresStorage.open(url, sid)

    def reader(storage: SessionStorage) -> SessionStorage:
        assert isinstance(storage, PostgresStorage)
        return PostgresStorage.open(url, storage.session_id, read_only=True)

    return Backend("postgres", lambda: PostgresStorage.create(url, cwd="/p"), reopen, reader=reader)


BACKENDS: dict[str, Callable[[Path], Backend]] = {"memory": _memory, "jsonl": _jsonl, "sqlite": _sqlite}


@pytest.fixture(params=[*BACKENDS, "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "postgres":
        made = _postgres(request.getfixturevalue("pg_url"))
    else:
        made = BACKENDS[request.param](tmp_path)
    yield made


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A real PostgreSQL server for the whole run: the one `.ci/run` started (its URL in
    SESSIONTREE_TEST_PG_URL), else a throwaway cluster made here and removed at the end.
    Skipped only when no server binaries are installed; a server that fails to start fails."""
    given = os.environ.get(PG_URL_ENV)
    if given:
        yield given
        return
    if pgcluster.server_bin() is None:
        pytest.skip(
            f"PostgreSQL server binaries not found under {pgcluster.VERSIONS_DIR}"
            f" (apt-get install postgresql, or set {PG_URL_ENV})"
        )
    cluster = pgcluster.start(fast=True)
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[str]:
    """The URL of a fresh, empty database on the test server, dropped afterwards (for tests
    that list a database's sessions)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    base, _, _db = pg_url.rpartition("/")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(autouse=True)
def _private_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """The index cache of every test goes to a directory of the test run, never the user's; so
    do the key bindings read and the settings the app remembers (a user's `keys.toml` changed
    the keys the tests press)."""
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "xdg-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "xdg-state"))


@pytest.fixture
def utc(monkeypatch):
    """Local time = UTC, so rows that show times are the same on every machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def demo(tmp_path) -> Path:
    """A private copy of the bundled demo session."""
    target = tmp_path / "demo.jsonl"
    with resources.as_file(resources.files("sessiontree.demo") / "demo.jsonl") as src:
        shutil.copyfile(src, target)
    return target

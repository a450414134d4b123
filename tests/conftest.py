from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from sessiontree import JsonlStorage, MemoryStorage, Session, SqliteStorage
from sessiontree.storage.base import SessionStorage


@dataclass
class Backend:
    """How to make a fresh storage of one kind and how to reopen it from what it persisted."""

    name: str
    create: Callable[[], SessionStorage]
    reopen: Callable[[SessionStorage], SessionStorage]
    path: Path | None = None

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

    return Backend("jsonl", lambda: JsonlStorage.create(path, cwd="/p"), reopen, path)


def _sqlite(tmp_path: Path) -> Backend:
    path = tmp_path / "sessions.sqlite"

    def reopen(storage: SessionStorage) -> SessionStorage:
        assert isinstance(storage, SqliteStorage)
        sid = storage.session_id
        storage.close()
        return SqliteStorage.open(path, sid)

    return Backend("sqlite", lambda: SqliteStorage.create(path, cwd="/p"), reopen, path)


BACKENDS = {"memory": _memory, "jsonl": _jsonl, "sqlite": _sqlite}


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](tmp_path)


@pytest.fixture(autouse=True)
def _private_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


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

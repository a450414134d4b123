"""SQLite against damaged files, tampered rows, other programs' databases and other writers.
Each test is one way the database can differ from what the storage last wrote."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import A, U
from sessiontree import Session, SqliteStorage, open_session


def build(db: Path, sid: str = "s1", n: int = 200) -> dict[str, str]:
    """A session of `n` messages (plus a label, a name and a compaction), closed cleanly."""
    s = Session(SqliteStorage.create(db, cwd="/p", session_id=sid))
    ids = {}
    for k in range(n):
        ids[f"m{k}"] = s.append_message(U(f"message {k} " + "x" * 300) if k % 2 else A(f"reply {k}"))
    s.append_label(ids["m1"], "start")
    s.append_session_name("named")
    s.append_compaction("summary", ids[f"m{n - 4}"], 1000)
    ids["last"] = s.append_message(U("after the compaction"))
    s.close()
    return ids


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True)


# --- a read-only open never writes --------------------------------------------------------------


def _snapshot(db: Path) -> tuple[bytes, int, list[str]]:
    return db.read_bytes(), db.stat().st_mtime_ns, sorted(os.listdir(db.parent))


def test_read_only_open_of_a_rollback_journal_database_writes_nothing(tmp_path):
    db = tmp_path / "db.sqlite"
    ids = build(db, n=20)
    with sqlite3.connect(db) as conn:  # another program keeps its database in rollback mode
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    before = _snapshot(db)

    storage = SqliteStorage.open(db, "s1", read_only=True)
    with Session(storage) as session:
        assert session.leaf_id == ids["last"]
        session.build_context()
        assert len(session.tree) == 24
        assert session.check(decode=True) == []
        assert storage._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert SqliteStorage.list_sessions(db)[0]["id"] == "s1"
    for command in ("check", "tree", "context"):
        assert run_cli(command, f"{db}#s1").returncode == 0
    assert run_cli("tree", str(db)).returncode == 0  # picks the newest session: list_sessions

    assert _snapshot(db) == before
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_read_only_open_of_a_read_only_file(tmp_path):
    db = tmp_path / "db.sqlite"
    ids = build(db, n=5)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
    db.chmod(0o444)
    try:
        with open_session(f"{db}#s1", read_only=True) as session:
            assert session.leaf_id == ids["last"]
    finally:
        db.chmod(0o600)


def test_read_only_open_of_a_path_a_uri_would_misread(tmp_path):
    folder = tmp_path / "a?b=c%20d #e"
    folder.mkdir()
    db = folder / "db.sqlite"
    ids = build(db, n=5)
    with SqliteStorage.open(db, "s1", read_only=True) as storage:
        assert storage.leaf_id == ids["last"]
    assert [s["id"] for s in SqliteStorage.list_sessions(db)] == ["s1"]

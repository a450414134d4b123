"""A session's writer lock in a SQLite database: a byte range of the file (`lock.RangeLock`),
and the `writers` table that names the process holding it."""

from __future__ import annotations

import os
import sqlite3

from ...model.ids import iso_now
from ..lock import RangeLock


def writer_pid(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The pid the session's last writer recorded (`take_lock`), to name it in a refusal."""
    try:
        row = conn.execute("SELECT pid FROM writers WHERE session_id = ?", (session_id,)).fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else int(row[0])


def take_lock(lock: RangeLock, conn: sqlite3.Connection, db_path: str, session_id: str) -> None:
    """Lock the session's byte of the database file (see `lock.RangeLock`), then record our pid
    in the `writers` table, which is how a refused writer learns who holds the lock."""

    lock.acquire(db_path, f"session {session_id} in {db_path}", lambda: writer_pid(conn, session_id))
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS writers"
            " (session_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, since TEXT NOT NULL)"
        )
        conn.execute(
            "INSERT OR REPLACE INTO writers (session_id, pid, since) VALUES (?, ?, ?)",
            (session_id, os.getpid(), iso_now()),
        )
    except sqlite3.Error:  # only the message of a refused writer depends on it
        return

"""The write-ahead log of a SQLite database replaced or deleted while open, set aside.

SQLite finds a database's `-wal` and `-shm` files by name, not by the file they belong to. When
the database file is replaced under an open connection (a backup moved over it, `mv new db`), the
log left at `DB-wal` still holds the old database's last commits, and the next program to open
`DB` reads them into the new database: the old entries on top of the backup, or a "malformed"
database (https://www.sqlite.org/howtocorrupt.html, section 2.4). SQLite itself leaves the log
in place then: a connection whose file has moved neither checkpoints nor deletes it at close.

So a storage that notices its database gone from its path moves the two files away from the
name, if they are still the ones its connection opened: next to the old database where it
was moved (its commits follow it), else aside as `DB-wal.replaced` (its bytes kept). The
connection keeps its own descriptors of them, so it goes on reading the old database as it was.
Where the old database went is asked of Linux's `/proc/self/fd`; elsewhere it counts as gone.
"""

from __future__ import annotations

import contextlib
import os

from ..dbfiles import Key
from ..procfs import PROC, descriptors

LOG_SUFFIXES = ("-wal", "-shm")


def log_keys(db_path: str) -> dict[str, Key]:
    """The identity of each log file next to `db_path` now (those that exist)."""
    keys: dict[str, Key] = {}
    for suffix in LOG_SUFFIXES:
        with contextlib.suppress(OSError):
            st = os.stat(db_path + suffix)
            keys[suffix] = (st.st_dev, st.st_ino)
    return keys


def set_aside(db_path: str, database: Key, opened: dict[str, Key]) -> list[str]:
    """Move the log files still at `db_path`'s names that are the ones in `opened` (the files
    of the database `database`, which is no longer at `db_path`). Returns where each went."""
    moved_to = _current_path(database)
    went: list[str] = []
    for suffix, key in opened.items():
        name = db_path + suffix
        try:
            st = os.stat(name)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) != key:
            continue  # the new database's own, or made since
        target = _free(moved_to + suffix if moved_to else f"{name}.replaced")
        try:
            os.rename(name, target)
        except OSError:
            continue
        went.append(target)
    return went


def _current_path(database: Key) -> str | None:
    """Where the file `database` now is, from a descriptor of it this process holds; None when
    it was deleted or cannot be told."""
    for fd in descriptors("self", database):
        try:
            path = os.readlink(f"{PROC}/self/fd/{fd}")
        except OSError:
            continue
        if path.endswith(" (deleted)") or not os.path.isabs(path):
            return None
        return path
    return None


def _free(name: str) -> str:
    """`name`, or with a number after it when that is taken (a log is never moved over one)."""
    candidate, n = name, 1
    while os.path.lexists(candidate):
        n += 1
        candidate = f"{name}.{n}"
    return candidate

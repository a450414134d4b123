"""Descriptors of SQLite database files that sessiontree opens itself, beside SQLite's own
connections: the writer locks' (`lock.RangeLock`), the look at whether a writer has quit, the
look at a file's first bytes.

Closing a descriptor drops every POSIX lock the process holds on the file, SQLite's own among
them (https://www.sqlite.org/howtocorrupt.html, section 2.2). Another process then took itself
for the database's last user, checkpointed and removed the write-ahead log, and this process's
connections went on committing into a log no longer there: appends acknowledged and lost. So
while a SQLite storage of this process has the file open (`using` … `done_using`), a descriptor
given back is parked, not closed, and lent again; the last storage to close the file closes them.
Parked descriptors hold no lock of their own: they are given back unlocked."""

from __future__ import annotations

import os
import threading

Key = tuple[int, int]  # a file's (device, inode): its identity, whatever path reaches it

_mutex = threading.Lock()
_users: dict[Key, int] = {}  # SQLite storages of this process with the file open
_parked: dict[tuple[Key, int], list[int]] = {}  # (file, open flags) -> descriptors to lend


def file_key(path: str) -> Key:
    """Raises OSError (a missing file, ...)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def using(key: Key) -> None:
    """A SQLite storage of this process has opened the file."""
    with _mutex:
        _users[key] = _users.get(key, 0) + 1


def done_using(key: Key) -> None:
    """A SQLite storage of this process has closed the file; after the last one, nothing of
    SQLite's is left to lose, and the parked descriptors are closed."""
    with _mutex:
        left = _users.get(key, 0) - 1
        if left > 0:
            _users[key] = left
            return
        _users.pop(key, None)
        closing = [fd for (k, _), fds in _parked.items() if k == key for fd in fds]
        for parked in [p for p in _parked if p[0] == key]:
            del _parked[parked]
    for fd in closing:
        os.close(fd)


def borrow(path: str, flags: int) -> tuple[Key, int]:
    """A descriptor of the file at `path` opened with `flags`: a parked one, or a new one.
    Raises OSError. Give it back with `give_back`, never `os.close`."""
    key = file_key(path)
    with _mutex:
        fds = _parked.get((key, flags))
        if fds:
            return key, fds.pop()
    fd = os.open(path, flags | os.O_CLOEXEC)
    return file_key_of(fd), fd  # the file it reached (one replaced since the look is another)


def give_back(key: Key, flags: int, fd: int) -> None:
    """Parked while a SQLite storage of this process has the file open, else closed."""
    with _mutex:
        if _users.get(key):
            _parked.setdefault((key, flags), []).append(fd)
            return
    os.close(fd)


def file_key_of(fd: int) -> Key:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def is_sqlite(path: str) -> bool:
    """Whether the file at `path` starts as a SQLite database does; False for what cannot be
    read (a missing file, a directory) and without opening what is not a regular file (a pipe
    would wait for a writer)."""
    if not os.path.isfile(path):
        return False
    try:
        key, fd = borrow(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return os.pread(fd, len(SQLITE_MAGIC), 0) == SQLITE_MAGIC
    except OSError:
        return False
    finally:
        give_back(key, os.O_RDONLY, fd)

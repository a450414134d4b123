"""Connections to a SQLite database: opened and checked, read-only or not, transactions, and
what SQLite raises said as a SessionError naming the database."""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.request import pathname2url

import msgspec

from ...model.errors import SessionError
from ..scan import full_decode
from .schema import SCHEMA, SCHEMA_VERSION

# How long a statement waits for another connection's lock before SQLite says "locked".
BUSY_MS = 5000


class Snapshot(sqlite3.Connection):
    """A read-only connection opened `immutable=1`: to a WAL database whose shared-memory file
    (-shm) this user can neither open nor create (a database one may only read, in a directory
    one may not write), which SQLite otherwise refuses even to read ("attempt to write a
    readonly database"). It reads the database file alone, without locks."""


def readable_as_is(conn: sqlite3.Connection) -> bool:
    """Whether a `mode=ro` connection can read: False when SQLite needs a -shm it may not make."""
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:  # other problems are the schema check's to report
        return "readonly database" not in str(exc) and "unable to open database file" not in str(exc)
    return True


def connect(db_path: str, *, create: bool, durable: bool, read_only: bool) -> sqlite3.Connection:
    """A connection that has checked the schema version. A read-only one is opened with
    `mode=ro` and changes nothing: not the journal mode (switching a rollback-journal
    database to WAL rewrites its header and leaves -wal/-shm files next to another program's
    database), not the schema."""
    if not create and not os.path.exists(db_path):
        raise SessionError("not_found", "no such database", path=db_path)
    if os.path.isdir(db_path):  # SQLite says "disk I/O error" of a directory
        raise SessionError("storage", "is a directory, not a database", path=db_path)
    if create and not os.path.exists(db_path):
        try:
            os.makedirs(os.path.dirname(os.path.abspath(db_path)), mode=0o700, exist_ok=True)
            os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            raise SessionError(
                "storage", f"cannot create the database: {exc.strerror or exc}", path=db_path
            ) from None
    try:
        if read_only:
            # pathname2url escapes what a URI would misread in a path (?, #, %)
            uri = f"file:{pathname2url(os.path.abspath(db_path))}?mode=ro"
            conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_MS / 1000
            )
            if not readable_as_is(conn):
                conn.close()
                conn = sqlite3.connect(
                    uri + "&immutable=1",
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                    factory=Snapshot,
                )
        else:
            conn = sqlite3.connect(
                db_path, isolation_level=None, check_same_thread=False, timeout=BUSY_MS / 1000
            )
    except sqlite3.Error as exc:
        raise SessionError("storage", f"cannot open the database: {exc}", path=db_path) from None
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        if not read_only:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        if create:  # one transaction: a creator killed midway leaves no tables, not some
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{SCHEMA}\nINSERT INTO schema_version SELECT {SCHEMA_VERSION}"
                " WHERE NOT EXISTS (SELECT 1 FROM schema_version);\nCOMMIT;"
            )
        # No tables at all: a creator killed before its schema (the file exists from the
        # moment it starts). Not a foreign database, which has tables of its own.
        empty = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        row = None if empty else conn.execute("SELECT version FROM schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "no such table" in str(exc):  # said "no such table: schema_version" (QA)
            raise SessionError(
                "storage",
                "a SQLite database, but not one of sessiontree's (it has no schema_version table)",
                path=db_path,
            ) from None
        name = getattr(exc, "sqlite_errorname", "")
        if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):  # "not a usable database" of a whole one (QA)
            raise SessionError(
                "storage",
                f"the database is locked by another program ({exc}); try again once it lets go",
                path=db_path,
                transient=True,
            ) from None
        damaged = name in ("SQLITE_CORRUPT", "SQLITE_NOTADB")
        raise SessionError(
            "storage",
            # what to do, for damage only: a locked or unwritable database is whole (QA)
            f"not a usable sessiontree database: {exc}{what_it_is(db_path) if damaged else ''}",
            path=db_path,
            damaged=damaged,
        ) from None
    if row is None:  # a creator killed before its schema or its version: no session yet
        conn.close()
        raise SessionError("not_found", "the database holds no sessions yet", path=db_path)
    if row[0] != SCHEMA_VERSION:
        conn.close()
        raise SessionError("storage", f"unsupported database schema version {row and row[0]}", path=db_path)
    return conn


def on_read_only_fs(path: str) -> bool:
    """Whether `path` is on a file system mounted read-only (a reason of its own, QA)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def what_it_is(db_path: str) -> str:
    """What a file SQLite cannot open holds, when that says what to do: a Pi session file named
    like a database was "not a database" and no more (QA); else how damage is looked into."""
    try:
        with open(db_path, "rb") as f:
            head = f.read(64)
    except OSError:
        return ""
    if re.match(rb'(\xef\xbb\xbf)?\{\s*"type"\s*:\s*"session"', head):
        return "; it is a Pi session file (JSONL): named .jsonl, it opens as one"
    if head.startswith(b"SQLite format 3\x00"):
        return f"; {recover(db_path)}"
    return ""


def recover(db_path: str) -> str:
    """What to do with a damaged database, said with the damage."""
    return f"`sqlite3 {shlex.quote(db_path)} .recover | sqlite3 NEW.sqlite` copies what is readable"


def storage_error(exc: sqlite3.Error, db_path: str) -> SessionError:
    """A SessionError for what SQLite raised while reading: damage (a malformed page, not a
    database) is said to be damage; the rest (I/O, locking) keeps SQLite's words."""
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return SessionError(
            "storage", f"the database is damaged ({exc}); {recover(db_path)}", path=db_path, damaged=True
        )
    return SessionError("storage", f"cannot read the database ({exc})", path=db_path)


def stored_json(text: str | bytes, what: str, location: str | None) -> Any:
    """Stored JSON (a header, the labels), as `encode_line` wrote it: lone surrogates (a cwd
    from a file name that is not UTF-8) are escapes there, which orjson does not read."""
    try:
        return full_decode(text.encode() if isinstance(text, str) else text)
    except (msgspec.DecodeError, ValueError):
        raise SessionError("invalid_session", f"the stored {what} is not valid JSON", path=location) from None


@contextmanager
def transaction(conn: sqlite3.Connection, path: str) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error so that a failed write leaves nothing.
    IMMEDIATE takes the database's write lock before the first read, so what the transaction
    reads cannot change under it."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as err:
        raise SessionError("storage", f"cannot start a write, nothing was added: {err}", path=path) from None
    try:
        yield conn
    except BaseException as exc:
        rollback(conn)
        if isinstance(exc, sqlite3.Error):
            raise SessionError("storage", f"write failed, nothing was added: {exc}", path=path) from exc
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as err:
        rollback(conn)
        raise SessionError("storage", f"commit failed, nothing was added: {err}", path=path) from None


def rollback(conn: sqlite3.Connection) -> None:
    # SQLite rolls some failures back by itself (a full disk, I/O errors); a second ROLLBACK
    # would then raise and hide the error that matters
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")

"""SQLite storage: one database file holds many sessions.

Every entry is a row (`data` = the exact wire JSON, plus the denormalised columns the tree needs,
`_Row`). Each append is one transaction that also updates a materialised projection — leaf, name,
labels, latest compaction, the derived-state entries and the active branch (the
compaction-bounded leaf path, one row per entry) — and memory is updated only after that
transaction commits.

The projection is what `open` reads: the leaf, name, labels and the context of a session come
from it without reading the rest of the log. It is computed by `project`, a pure fold that
applies the same rules as `TreeIndex` (`index.fold_entry`). The full `TreeIndex` (every entry)
is loaded the first time something needs the whole tree (the browser, `get_children`, a move).
`verify_state()` (what `check` reports) compares every stored column, the log position and the
projection with a fresh fold of the entries' data.

A read-only open uses a `mode=ro` connection and writes nothing, and every error SQLite raises
leaves this module as a SessionError naming the database.
"""

from __future__ import annotations

import os
import re
import shlex
import sqlite3
import threading
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.request import pathname2url

import msgspec

from ..model.entries import Entry, entry_from_dict
from ..model.errors import Diagnostic, SessionError
from ..model.header import CURRENT_VERSION, SessionHeader
from ..model.ids import iso_now, session_id_or_new
from . import dbfiles, sqlitelog
from .base import SessionStorage, last_active_first
from .index import (
    COMPACTION,
    LEAF,
    NO_ROLE,
    OTHER_ROLE,
    ROLE_CODES,
    TYPE_CODES,
    UNKNOWN,
    Boundary,
    TreeIndex,
    fold_entry,
    state_slot,
)
from .lock import RangeLock, locked_refusal, range_held_elsewhere, session_slot
from .projection import path_via_active
from .scan import (
    LONE_SURROGATE,
    LineError,
    add_dict,
    decode_entry_dict,
    encode_line,
    full_decode,
    message_words,
    tool_only_line,
)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    cwd TEXT NOT NULL,
    parent_session TEXT,
    header TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_created ON sessions (created_at DESC);
CREATE INDEX IF NOT EXISTS sessions_cwd ON sessions (cwd);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    id TEXT NOT NULL,
    parent_id TEXT,
    type TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    role TEXT,
    target_id TEXT,
    label TEXT,
    name TEXT,
    first_kept TEXT,
    has_tail INTEGER NOT NULL DEFAULT 0,
    data BLOB NOT NULL,
    UNIQUE (session_id, id)
);
CREATE INDEX IF NOT EXISTS entries_by_session ON entries (session_id, seq);
CREATE INDEX IF NOT EXISTS entries_by_parent ON entries (session_id, parent_id);
CREATE TABLE IF NOT EXISTS session_state (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id),
    leaf_id TEXT,
    session_name TEXT,
    labels TEXT NOT NULL DEFAULT '{}',
    latest_compaction_id TEXT,
    thinking_entry_id TEXT,
    model_entry_id TEXT,
    tools_entry_id TEXT,
    entry_count INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS active_branch (
    session_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    entry_id TEXT NOT NULL,
    PRIMARY KEY (session_id, pos)
) WITHOUT ROWID;
"""

# How long a statement waits for another connection's lock before SQLite says "locked".
BUSY_MS = 5000

_COLUMNS = "id, parent_id, type, timestamp, role, target_id, label, name, first_kept, has_tail"
_INSERT = f"INSERT INTO entries (session_id, {_COLUMNS}, data) VALUES ({', '.join('?' * 12)})"


class _Row(NamedTuple):
    """The columns stored next to an entry's JSON: exactly what the tree and the projection need,
    so neither has to decode payloads. `of` is the only place they are derived from the data."""

    id: str
    parent_id: str | None
    type: str
    timestamp: str
    role: str | None
    target_id: str | None
    label: str | None
    name: str | None
    first_kept: str | None
    has_tail: int

    @classmethod
    def of(cls, data: dict[str, Any]) -> _Row:
        etype = data["type"]
        return cls(
            data["id"],
            data["parentId"],
            etype,
            data["timestamp"],
            data["message"]["role"] if etype == "message" else None,
            data.get("targetId") if etype in ("label", "leaf") else None,
            data.get("label") if etype == "label" else None,
            data.get("name") if etype == "session_info" else None,
            data.get("firstKeptEntryId") if etype == "compaction" else None,
            int(etype == "compaction" and data.get("retainedTail") is not None),
        )

    def index_into(self, index: TreeIndex, data: bytes | None) -> int:
        """`data`: the entry's JSON where it is an assistant message (whether Pi's /tree hides
        it is judged from it), else None."""
        return index.add(
            self.id,
            self.parent_id,
            self.type,
            self.role,
            target_id=self.target_id,
            label=self.label,
            name=self.name,
            first_kept=self.first_kept,
            has_tail=bool(self.has_tail),
            tool_only=data is not None and tool_only_line(data),
        )


@dataclass(slots=True)
class Projection:
    """What `session_state` and `active_branch` hold for one session: the fold of its log that
    `open` reads instead of the log. `leaf`, `labels`, `session_name` and `compactions` follow
    `index.fold_entry`, like a `TreeIndex` but with entries named by id."""

    leaf: str | None = None
    session_name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # every compaction of the log, oldest first; None is never a key (the type is `Folded`'s)
    compactions: dict[str | None, Boundary] = field(default_factory=dict)
    state_ids: tuple[str | None, str | None, str | None] = (None, None, None)
    active: list[str] = field(default_factory=list)
    count: int = 0

    @property
    def latest_compaction(self) -> str | None:
        return next(reversed(self.compactions), None)

    def copy(self) -> Projection:
        return Projection(
            self.leaf,
            self.session_name,
            dict(self.labels),
            dict(self.compactions),
            self.state_ids,
            list(self.active),
            self.count,
        )


class _Log:
    """What `project` may ask about entries already committed: their bounded paths, derived-state
    entries and parents. The full tree is loaded only for the first question that needs it."""

    def __init__(self, storage: SqliteStorage) -> None:
        self._storage = storage

    def bounded_path(self, target: str | None, marker: str | None = None) -> list[str]:
        if target is None:
            return []
        index = self._storage.index
        return [index.ids[k] for k in index.bounded_path(self._pos(target), marker)]

    def state_ids(self, target: str | None) -> tuple[str | None, str | None, str | None]:
        if target is None:
            return (None, None, None)
        index = self._storage.index
        t, m, a = index.state_entries(self._pos(target))
        return tuple(None if k < 0 else index.ids[k] for k in (t, m, a))  # type: ignore[return-value]

    def parent(self, entry_id: str) -> str | None:
        return self._storage._parent_of(entry_id)

    def _pos(self, entry_id: str) -> int:
        i = self._storage.index.pos.get(entry_id)
        if i is None:
            raise SessionError("not_found", f"Entry {entry_id} not found", path=self._storage.location)
        return i


class _Pending:
    """The log as it will be once the rows of a batch folded so far are in: `_Log` for what is
    committed, the rows themselves for the rest (a batch may move to, or build on, its own
    entries)."""

    def __init__(self, log: _Log) -> None:
        self.log = log
        self.rows: dict[str, _Row] = {}

    def parent(self, entry_id: str) -> str | None:
        row = self.rows.get(entry_id)
        return self.log.parent(entry_id) if row is None else row.parent_id

    def bounded_path(
        self, start: str | None, marker: str | None, compactions: dict[str | None, Boundary]
    ) -> list[str]:
        """`TreeIndex.bounded_path`, by ids."""
        out: list[str] = []
        eid = start
        while eid is not None and eid in self.rows:
            out.append(eid)
            if marker is not None and eid == marker:
                out.reverse()
                return out
            boundary = compactions.get(eid)
            if boundary is not None:
                if boundary[1]:
                    out.reverse()
                    return out
                marker = boundary[0]
            eid = self.rows[eid].parent_id
        out.reverse()
        return self.log.bounded_path(eid, marker) + out

    def path_via_active(
        self, active: list[str], start: str | None, compactions: dict[str | None, Boundary]
    ) -> list[str]:
        """`bounded_path(start)`, cut from `active` when `start` lies on it (`projection`)."""
        if start is None:
            return []
        return path_via_active(active, start, compactions, lambda e: self.bounded_path(e, None, compactions))

    def state_ids(self, start: str | None) -> tuple[str | None, str | None, str | None]:
        """`TreeIndex.state_entries`, by ids."""
        found: list[str | None] = [None, None, None]
        eid = start
        while eid is not None and eid in self.rows:
            row = self.rows[eid]
            slot = _slot(row)
            if slot >= 0 and found[slot] is None:
                found[slot] = eid
            eid = row.parent_id
        rest = self.log.state_ids(eid)
        return (found[0] or rest[0], found[1] or rest[1], found[2] or rest[2])


def _slot(row: _Row) -> int:
    role = NO_ROLE if row.role is None else ROLE_CODES.get(row.role, OTHER_ROLE)
    return state_slot(TYPE_CODES.get(row.type, UNKNOWN), role)


def project(state: Projection, rows: Sequence[_Row], log: _Log) -> Projection:
    """The projection once `rows` are appended to the log that `state` is the projection of.

    Pure: `state` is not changed and `log` is only read. Entries are folded with the rules of
    `index.fold_entry`; on top of those, the active branch and the derived-state entries are
    kept incrementally — an entry appended at the leaf extends both, so the usual append does
    not walk the tree. A `leaf` entry, a compaction, or an entry appended away from the leaf
    recompute what they change, with `TreeIndex`'s walks."""
    s = state.copy()
    pending = _Pending(log)
    for row in rows:
        code = TYPE_CODES.get(row.type, UNKNOWN)
        previous_leaf = s.leaf
        fold_entry(
            s,
            code,
            row.id,
            leaf_target=row.target_id,
            target_id=row.target_id,
            label=row.label,
            name=row.name,
            first_kept=row.first_kept,
            has_tail=bool(row.has_tail),
        )
        s.count += 1
        pending.rows[row.id] = row
        if code == LEAF:
            s.active = pending.path_via_active(s.active, row.target_id, s.compactions)
            s.state_ids = pending.state_ids(row.target_id)
            continue
        if row.parent_id != previous_leaf:  # not appended at the leaf: continue its parent's path
            s.active = pending.path_via_active(s.active, row.parent_id, s.compactions)
            s.state_ids = pending.state_ids(row.parent_id)
        if code == COMPACTION:
            s.active = _active_after_compaction(s.active, row.id, s.compactions, pending)
            continue
        s.active.append(row.id)
        slot = _slot(row)
        if slot >= 0:
            ids = list(s.state_ids)
            ids[slot] = row.id
            s.state_ids = (ids[0], ids[1], ids[2])
    return s


def _active_after_compaction(
    active: list[str], compaction: str, compactions: dict[str | None, Boundary], pending: _Pending
) -> list[str]:
    """The active branch once `compaction`, appended below the end of `active`, is the leaf:
    `TreeIndex.bounded_path` walked along `active` (the boundary usually lies inside it), and
    on up the tree only when `active` itself began at an older boundary."""
    first_kept, has_tail = compactions[compaction]
    if has_tail:
        return [compaction]
    marker = first_kept
    out = [compaction]
    for eid in reversed(active):
        out.append(eid)
        if marker is not None and eid == marker:
            break
        older = compactions.get(eid)
        if older is not None:
            if older[1]:
                break
            marker = older[0]
    else:
        above = pending.parent(active[0]) if active else None
        if above is not None:
            out.extend(reversed(pending.bounded_path(above, marker, compactions)))
    out.reverse()
    return out


def _shared_prefix(old: Sequence[str], new: Sequence[str]) -> int:
    """How many leading entries two root paths share, by bisection: both are paths from the
    same root (or compaction barrier) down, so one entry at the same depth in both means the
    same entries above it. After a move up a deep tree the whole branch was written again,
    which made importing a deep tree quadratic (a 50k-entry one took minutes)."""
    lo, hi = 0, min(len(old), len(new))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[mid - 1] == new[mid - 1]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Snapshot(sqlite3.Connection):
    """A read-only connection opened `immutable=1`: to a WAL database whose shared-memory file
    (-shm) this user can neither open nor create (a database one may only read, in a directory
    one may not write), which SQLite otherwise refuses even to read ("attempt to write a
    readonly database"). It reads the database file alone, without locks."""


def _readable_as_is(conn: sqlite3.Connection) -> bool:
    """Whether a `mode=ro` connection can read: False when SQLite needs a -shm it may not make."""
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:  # other problems are the schema check's to report
        return "readonly database" not in str(exc) and "unable to open database file" not in str(exc)
    return True


class SqliteStorage(SessionStorage):
    """Use `SqliteStorage.create`, `SqliteStorage.open` or `SqliteStorage.list_sessions`."""

    holds_resources = True

    def __init__(
        self, db_path: str, conn: sqlite3.Connection, session_id: str, lock: RangeLock | None
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.location = f"{db_path}#{session_id}"
        self.files = tuple(db_path + suffix for suffix in ("", "-wal", "-shm", "-journal"))
        self.session_id = session_id
        self._conn: sqlite3.Connection | None = conn
        self._lock = lock
        self._per_write = False  # the lock is taken for each write only (`open(lock_at="write")`)
        self._mutex = threading.RLock()
        self._index: TreeIndex | None = None
        self._seqs = array("q")  # index position -> row seq
        self._state = Projection()
        self._last_seq = 0  # the newest row this object has folded
        st = os.stat(db_path)
        self._file = (st.st_dev, st.st_ino)  # the database this connection has open (`_same_file`)
        dbfiles.using(self._file)  # no descriptor of ours on it is closed while it is open
        self._logs = sqlitelog.log_keys(db_path)  # its -wal and -shm, while they are at their names
        self._logs_went: list[str] | None = None  # where they went, once set aside (`_gone`)
        if lock is None:
            self.read_only_reason = "opened read-only"

    # --- construction -------------------------------------------------------------------------

    @staticmethod
    def _connect(db_path: str, *, create: bool, durable: bool, read_only: bool) -> sqlite3.Connection:
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
                if not _readable_as_is(conn):
                    conn.close()
                    conn = sqlite3.connect(
                        uri + "&immutable=1",
                        uri=True,
                        isolation_level=None,
                        check_same_thread=False,
                        factory=_Snapshot,
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
                    f"BEGIN IMMEDIATE;\n{_SCHEMA}\nINSERT INTO schema_version SELECT {SCHEMA_VERSION}"
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
                f"not a usable sessiontree database: {exc}{_what_it_is(db_path) if damaged else ''}",
                path=db_path,
                damaged=damaged,
            ) from None
        if row is None:  # a creator killed before its schema or its version: no session yet
            conn.close()
            raise SessionError("not_found", "the database holds no sessions yet", path=db_path)
        if row[0] != SCHEMA_VERSION:
            conn.close()
            raise SessionError(
                "storage", f"unsupported database schema version {row and row[0]}", path=db_path
            )
        return conn

    @classmethod
    def create(
        cls,
        db_path: str | os.PathLike[str],
        *,
        cwd: str = "",
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        durable: bool = False,
        header: SessionHeader | None = None,
    ) -> SqliteStorage:
        """A new session in the database at `db_path` (created with its tables if missing).
        `header` keeps an existing session's header as it is (an import: the imported session
        was dated by the import and listed in import order); otherwise one is made from `cwd`,
        `session_id`, ... like every backend's `create`."""
        db_path = os.fspath(db_path)
        if header is None:
            header = SessionHeader.new(
                session_id_or_new(session_id),
                iso_now(),
                cwd,
                parent_session=parent_session,
                metadata=metadata,
            )
        elif header.version != CURRENT_VERSION:
            raise SessionError("invalid_argument", "only version 3 headers are stored; upgrade first")
        sid, cwd, parent_session = header.id, header.cwd, header.parent_session
        conn = cls._connect(db_path, create=True, durable=durable, read_only=False)
        lock = RangeLock(session_slot(sid))
        try:
            _take_lock(lock, conn, db_path, sid)
            with _transaction(conn, db_path):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
                    raise SessionError("invalid_argument", f"session {sid} already exists", path=db_path)
                conn.execute(
                    "INSERT INTO sessions (id, created_at, cwd, parent_session, header) VALUES (?,?,?,?,?)",
                    (
                        sid,
                        header.timestamp,
                        _storable(cwd),  # listed and filtered by; the header keeps it exactly
                        parent_session if parent_session is None else _storable(parent_session),
                        encode_line(header.to_dict()).decode(),
                    ),
                )
                conn.execute(
                    "INSERT INTO session_state (session_id, updated_at) VALUES (?, ?)",
                    (sid, iso_now()),
                )
        except BaseException:
            lock.release()
            conn.close()
            raise
        storage = cls(db_path, conn, sid, lock)
        storage.header = header
        storage._index = TreeIndex()
        return storage

    @classmethod
    def open(
        cls,
        db_path: str | os.PathLike[str],
        session_id: str,
        *,
        read_only: bool = False,
        durable: bool = False,
        lock_at: str = "open",
    ) -> SqliteStorage:
        """`lock_at="write"`: refused as any writer is when another process holds the writer
        lock (asked without taking it), which is then taken for each write only
        (`begin_write`, `end_write`)."""
        db_path = os.fspath(db_path)
        reason = None
        if not read_only and os.path.isfile(db_path) and not os.access(db_path, os.W_OK):
            # as a session file one may only read opens read-only (a traceback from the lock)
            read_only, reason = True, "the database is not writable by you, so it is open read-only"
        elif not read_only and os.path.isfile(db_path) and not os.stat(db_path).st_mode & 0o222:
            # No write bit for anyone, writable all the same: root's privilege. As a JSONL file
            # (`JsonlStorage.open`), the mode is taken as the owner's wish (QA: written as root).
            read_only = True
            reason = (
                "the database's permissions make it read-only (chmod u+w allows writing),"
                " so it is open read-only"
            )
        conn = cls._connect(db_path, create=False, durable=durable, read_only=read_only)
        if isinstance(conn, _Snapshot):
            why = (
                "it is on a read-only file system, where SQLite cannot create the file it shares"
                if _on_read_only_fs(db_path)
                else "this user cannot create the file SQLite shares"
            )
            reason = (
                f"the database is open read-only as a snapshot: {why} with its writers (its -shm),"
                " so their later changes are not followed"
            )
        lock = None
        storage = None
        try:
            row = conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionError("not_found", f"no session {session_id!r} in the database", path=db_path)
            if not read_only:
                lock = RangeLock(session_slot(session_id))
                if lock_at == "open":
                    _take_lock(lock, conn, db_path, session_id)
            storage = cls(db_path, conn, session_id, lock)
            storage._per_write = lock is not None and lock_at == "write"
            # Asked only now that `cls` has the file in use (`dbfiles`): a descriptor of ours on
            # it closed before dropped every lock SQLite held on it in this process, and the next
            # writer to quit took itself for the last user and removed the log under this
            # connection: its entries were lost and the indexes damaged (QA).
            if storage._per_write and storage.writer_elsewhere():
                raise locked_refusal(f"session {session_id} in {db_path}", _writer_pid(conn, session_id))
            if reason is not None:
                storage.read_only_reason = reason
            storage.header = SessionHeader.from_dict(_json(row[0], "header", storage.location), path=db_path)
            storage._state, storage._last_seq = storage._stored_projection()
        except BaseException as exc:
            if storage is not None:
                storage.close()  # its lock, its connection and its use of the file (`dbfiles`)
            else:
                if lock is not None:
                    lock.release()
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise _storage_error(exc, db_path) from None
            raise
        return storage

    @staticmethod
    def list_sessions(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """Sessions in the database, the last active first: id, created_at, last_active (the
        timestamp of its last entry, else created_at), cwd, name, entry_count and first_message
        (the start of its first user message)."""
        conn = SqliteStorage._connect(os.fspath(db_path), create=False, durable=False, read_only=True)
        try:
            rows = conn.execute(
                "SELECT s.id, s.created_at, s.cwd, st.session_name, st.entry_count,"
                " (SELECT e.data FROM entries e WHERE e.session_id = s.id AND e.role = 'user'"
                "  ORDER BY e.seq LIMIT 1),"
                " COALESCE((SELECT e.timestamp FROM entries e WHERE e.seq = st.last_seq), s.created_at)"
                " AS last_active"
                " FROM sessions s LEFT JOIN session_state st ON st.session_id = s.id"
                " ORDER BY last_active DESC, s.id"
            ).fetchall()
        except sqlite3.Error as exc:
            raise _storage_error(exc, os.fspath(db_path)) from None
        finally:
            conn.close()
        listed = [
            {
                "id": r[0],
                "created_at": r[1],
                "last_active": r[6],
                "cwd": r[2],
                "name": r[3],
                "entry_count": r[4] or 0,
                "first_message": message_words(r[5]),
            }
            for r in rows
        ]
        return last_active_first(listed)

    def _stored_projection(self) -> tuple[Projection, int]:
        """The stored projection and the log position it is of (what `open` and `refresh`
        show), read in one read transaction so that its parts are of one commit."""
        with self._snapshot() as conn:
            row = conn.execute(
                "SELECT leaf_id, session_name, labels, entry_count, last_seq,"
                " thinking_entry_id, model_entry_id, tools_entry_id"
                " FROM session_state WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
            if row is None:
                raise SessionError("invalid_session", "session has no state row", path=self.location)
            leaf, name, labels, count, last_seq, thinking, model, tools = row
            active = [
                r[0]
                for r in conn.execute(
                    "SELECT entry_id FROM active_branch WHERE session_id = ? ORDER BY pos",
                    (self.session_id,),
                )
            ]
            # compactions come from the log (oldest first): a compaction met while walking the
            # active branch back needs its boundary (see `_active_after_compaction`)
            compactions: dict[str | None, Boundary] = {
                r[0]: (r[1], bool(r[2]))
                for r in conn.execute(
                    "SELECT id, first_kept, has_tail FROM entries"
                    " WHERE session_id = ? AND type = 'compaction' AND seq <= ? ORDER BY seq",
                    (self.session_id, last_seq),
                )
            }
        state = Projection(
            leaf=leaf,
            session_name=name,
            labels=_json(labels, "labels", self.location) if labels else {},
            compactions=compactions,
            state_ids=(thinking, model, tools),
            active=active,
            count=count,
        )
        return state, last_seq

    # --- reading ------------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one read (one thread at a time: writes share the connection).
        Every query of the storage runs inside one of these (or `_transaction`), so what
        SQLite raises — a damaged page, an I/O error — leaves the storage as a SessionError."""
        with self._mutex:
            conn = self._db()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise _storage_error(exc, self.db_path) from None

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """`_reading` inside one read transaction: every query sees the same commit."""
        with self._reading() as conn:
            if conn.in_transaction:  # inside a write transaction: that is one commit already
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                _rollback(conn)  # ends the read transaction; it wrote nothing

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SessionError("storage", "the session is closed", path=self.location)
        return self._conn

    @property
    def index_loaded(self) -> bool:
        return self._index is not None

    @property
    def index(self) -> TreeIndex:
        if self._index is None:
            with self._mutex:
                if self._index is None:
                    self._index = self._build_index(0, self._last_seq)
        return self._index

    def _build_index(self, after_seq: int, upto_seq: int, index: TreeIndex | None = None) -> TreeIndex:
        """Index rows in (after_seq, upto_seq]: only committed rows this object knows about, even
        when called inside one of its own transactions."""
        fresh = index is None
        index = TreeIndex() if index is None else index
        seqs = array("q")
        with self._reading() as conn:
            # an assistant message's data too: the default filter hides the turns that only
            # call tools, and sessions kept here showed them all (QA)
            cursor = conn.execute(
                f"SELECT seq, {_COLUMNS}, CASE WHEN role = 'assistant' THEN data END FROM entries"
                " WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                (self.session_id, after_seq, upto_seq),
            )
            # a live index must not keep half of the rows when a read fails halfway; a fresh
            # one is dropped on failure, so it can be filled as rows arrive
            for seq, *columns, data in cursor if fresh else cursor.fetchall():
                _Row(*columns).index_into(index, data)
                seqs.append(seq)
        self._seqs.extend(seqs)
        if after_seq == 0:
            index.finish_load()
        return index

    def _decode(self, blob: bytes, where: str) -> Entry:
        try:
            return entry_from_dict(decode_entry_dict(blob))
        except LineError as exc:
            raise SessionError("invalid_entry", f"{where} {exc.reason}", path=self.location) from None

    def _load(self, i: int) -> Entry:
        if not 0 <= i < len(self.index):  # positions exist only once the index is loaded
            # the stored count can disagree with the rows (`verify_state` says so)
            raise SessionError("invalid_session", f"there is no entry #{i + 1}", path=self.location)
        with self._reading() as conn:
            row = conn.execute("SELECT data FROM entries WHERE seq = ?", (self._seqs[i],)).fetchone()
        if row is None:
            raise SessionError(
                "invalid_session", f"entry #{i + 1} has gone from the database", path=self.location
            )
        return self._decode(row[0], f"entry #{i + 1}")

    def get_entry(self, entry_id: str) -> Entry | None:
        # Up to the snapshot, as the index and `iter_entries`: an entry another writer added
        # since is not one of this session's until `refresh` (its position was `not_found`).
        with self._reading() as conn:
            row = conn.execute(
                "SELECT data FROM entries WHERE session_id = ? AND id = ? AND seq <= ?",
                (self.session_id, entry_id, self._last_seq),
            ).fetchone()
        return None if row is None else self._decode(row[0], f"entry {entry_id!r}")

    def iter_entries(self) -> Iterator[Entry]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT data FROM entries WHERE session_id = ? AND seq <= ? ORDER BY seq",
                (self.session_id, self._last_seq),
            ).fetchall()
        for n, (blob,) in enumerate(rows, 1):
            yield self._decode(blob, f"entry #{n}")

    def has_id(self, entry_id: str) -> bool:
        if self._index is not None:
            return entry_id in self._index.pos
        with self._reading() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM entries WHERE session_id = ? AND id = ? AND seq <= ?",
                    (self.session_id, entry_id, self._last_seq),
                ).fetchone()
                is not None
            )

    @property
    def leaf_id(self) -> str | None:
        return self._state.leaf

    @property
    def session_name(self) -> str | None:
        return self._state.session_name

    def get_label(self, entry_id: str) -> str | None:
        return self._state.labels.get(entry_id)

    def labels(self) -> dict[str, str]:
        return dict(self._state.labels)

    def entry_count(self) -> int:
        return self._state.count

    def state_entries(self, at: str | None = None) -> tuple[Entry | None, Entry | None, Entry | None]:
        if at is not None and at != self._state.leaf:
            return super().state_entries(at)
        return tuple(None if eid is None else self.get_entry(eid) for eid in self._state.state_ids)  # type: ignore[return-value]

    def active_branch(self) -> list[Entry]:
        """The branch of this storage's snapshot (the projection read at open or `refresh`).
        The stored `active_branch` table is the writer's, which may have moved on since: it is
        read when it still names the snapshot's ids, else the entries are read by the
        snapshot's ids (a reader built the other branch's context, or saw missing entries, when
        another writer moved the leaf between its refresh and this read)."""
        want = self._state.active
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT a.entry_id, e.data FROM active_branch a JOIN entries e"
                " ON e.session_id = a.session_id AND e.id = a.entry_id"
                " WHERE a.session_id = ? ORDER BY a.pos",
                (self.session_id,),
            ).fetchall()
            if len(rows) != len(want) or any(r[0] != eid for r, eid in zip(rows, want, strict=True)):
                found: dict[str, bytes] = {}
                for k in range(0, len(want), IDS_PER_QUERY):
                    chunk = want[k : k + IDS_PER_QUERY]
                    marks = ",".join("?" * len(chunk))
                    found.update(
                        conn.execute(
                            f"SELECT id, data FROM entries WHERE session_id = ? AND id IN ({marks})",
                            (self.session_id, *chunk),
                        ).fetchall()
                    )
                if any(eid not in found for eid in want):
                    raise SessionError(
                        "invalid_session", "active branch names missing entries", path=self.location
                    )
                rows = [(eid, found[eid]) for eid in want]
        return [self._decode(r[1], "active branch entry") for r in rows]

    def refresh(self) -> int:
        """Pick up entries another process appended (the reader side of live follow). Raises
        `SessionError` when the database file was deleted or replaced."""
        self._same_file()
        with self._reading() as conn:
            row = conn.execute(
                "SELECT last_seq FROM session_state WHERE session_id = ?", (self.session_id,)
            ).fetchone()
            if row is None or row[0] == self._last_seq:
                return 0
            before = self._state.count
            # the tree is extended up to the position of the projection read, not of the query
            # above: a commit in between would otherwise leave rows out of the tree for good
            state, last_seq = self._stored_projection()
            if self._index is not None:
                self._build_index(self._last_seq, last_seq, self._index)
            self._state, self._last_seq = state, last_seq
            return state.count - before

    def _parent_of(self, entry_id: str) -> str | None:
        if self._index is not None:
            i = self._index.pos.get(entry_id)
            if i is not None:
                p = self._index.parent[i]
                return self._index.ids[p] if p >= 0 else None
        with self._reading() as conn:
            row = conn.execute(
                "SELECT parent_id FROM entries WHERE session_id = ? AND id = ?",
                (self.session_id, entry_id),
            ).fetchone()
        return None if row is None else row[0]

    # --- writing ------------------------------------------------------------------------------

    def refusal(self, data: dict[str, Any]) -> str | None:
        """Lone surrogates in a text column (a label, a session name, an id): SQLite's text is
        UTF-8, which has no such characters (the entry's JSON holds them as escapes)."""
        row = _Row.of(data)
        for field_name, value in zip(_Row._fields, row, strict=True):
            if isinstance(value, str) and not value.isascii() and LONE_SURROGATE.search(value):
                what = field_name.replace("_", " ")
                return f"has a {what} with a lone surrogate, which SQLite cannot store"
        return None

    def _same_file(self) -> None:
        """Refuse to go on when the path no longer names the database this connection has
        open: a write would go to a deleted file (lost at exit) or, through the connection's
        own -wal file, over a database moved into its place (its commits lost, and `check`
        would find nothing wrong). The JSONL storage refuses the same way."""
        gone = self._gone()
        kept = f" (its write-ahead log is now {self._logs_went[0]})" if self._logs_went else ""
        if gone == "deleted":
            self.mark_read_only(f"the database file was deleted{kept}")
            raise SessionError(
                "storage", "the database file was deleted; nothing was written", path=self.location
            )
        if gone:
            self.mark_read_only(f"the database file was replaced on disk{kept}; reopen it to see it")
            raise SessionError(
                "storage",
                "the database file was replaced on disk; nothing was written (reopen it to see it)",
                path=self.location,
            )

    def _gone(self) -> str:
        """ "deleted" or "replaced" when the path no longer names this connection's database,
        else "". The first time, the old database's -wal and -shm are moved away from the
        path's names (`sqlitelog`): the next program to open the path would read them into
        whatever database is there now."""
        try:
            st = os.stat(self.db_path)
        except FileNotFoundError:
            gone = "deleted"
        else:
            if (st.st_dev, st.st_ino) == self._file:
                if len(self._logs) < len(sqlitelog.LOG_SUFFIXES):  # made after the open
                    self._logs = sqlitelog.log_keys(self.db_path)
                return ""
            gone = "replaced"
        if self._logs_went is None:
            went = self._logs_went = sqlitelog.set_aside(self.db_path, self._file, self._logs)
            if went:
                self._diagnostics.append(
                    Diagnostic(
                        "warning",
                        "log_set_aside",
                        f"the database file was {gone} while open: its write-ahead log, which the"
                        " next program to open the path would have read into what is there now,"
                        f" was moved to {' and '.join(went)}",
                    )
                )
        return gone

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        self._same_file()
        rows = [_Row.of(entry.to_dict()) for entry in entries]
        with self._mutex:
            conn = self._db()
            old = self._state
            new = project(old, rows, _Log(self))
            try:
                seqs = self._write(conn, rows, encoded, old, new)
            except _StaleLog:
                # catch up, so that the caller's next attempt (Session refreshes before building
                # entries) parents its entries on what the other writer added
                self.refresh()
                raise SessionError(
                    "storage",
                    "another writer appended to the session after it was read, so nothing was"
                    " written; the session now shows those entries: try again",
                    path=self.location,
                ) from None
            # committed: only now does memory change
            if self._index is not None:
                for row, seq, line in zip(rows, seqs, encoded, strict=True):
                    row.index_into(self._index, line if row.role == "assistant" else None)
                    self._seqs.append(seq)
            self._state = new
            self._last_seq = seqs[-1]

    def _write(
        self,
        conn: sqlite3.Connection,
        rows: list[_Row],
        encoded: list[bytes],
        old: Projection,
        new: Projection,
    ) -> list[int]:
        """Insert the rows and store `new` over `old`, in one transaction; returns their seqs.
        `new` was folded from what this object last read, so the write is refused (`_StaleLog`)
        when the log has moved since: the single-writer lock keeps other sessiontree writers
        out, but not a writer that does not take it (another program, or one on a network file
        system where the lock does not hold). The check is inside the transaction: BEGIN
        IMMEDIATE holds the database's write lock, so the log cannot move between the check and
        the write."""
        with _transaction(conn, self.db_path):
            position = conn.execute(
                "SELECT last_seq FROM session_state WHERE session_id = ?", (self.session_id,)
            ).fetchone()
            if position is None or position[0] != self._last_seq:
                raise _StaleLog
            seqs = [
                conn.execute(_INSERT, (self.session_id, *row, blob)).lastrowid or 0
                for row, blob in zip(rows, encoded, strict=True)
            ]
            self._write_projection(conn, old, new, seqs[-1])
        return seqs

    def _write_projection(
        self, conn: sqlite3.Connection, old: Projection, new: Projection, last_seq: int
    ) -> None:
        """Store `new` over `old`. The active branch is only appended to when it grew (the usual
        append), else cut back to what the two share and refilled."""
        keep = _shared_prefix(old.active, new.active)
        if keep < len(old.active):
            conn.execute(
                "DELETE FROM active_branch WHERE session_id = ? AND pos >= ?", (self.session_id, keep)
            )
        conn.executemany(
            "INSERT INTO active_branch (session_id, pos, entry_id) VALUES (?,?,?)",
            [(self.session_id, pos, new.active[pos]) for pos in range(keep, len(new.active))],
        )
        thinking, model, tools = new.state_ids
        conn.execute(
            "UPDATE session_state SET leaf_id = ?, session_name = ?, labels = ?,"
            " latest_compaction_id = ?, thinking_entry_id = ?, model_entry_id = ?,"
            " tools_entry_id = ?, entry_count = ?, last_seq = ?, updated_at = ?"
            " WHERE session_id = ?",
            (
                new.leaf,
                new.session_name,
                encode_line(new.labels).decode(),
                new.latest_compaction,
                thinking,
                model,
                tools,
                new.count,
                last_seq,
                iso_now(),
                self.session_id,
            ),
        )

    # --- checking -----------------------------------------------------------------------------

    def _file_damage(self) -> list[str]:
        """SQLite's `integrity_check` of the whole database file (up to 5 findings; ["ok"]).
        Not `quick_check`, which does not compare an index with its table: a database whose
        indexes had lost entries checked ok, and every import after it failed (QA). It takes
        some 0.5 s per 100k entries, so it is done once per state of the file (its size and
        time, and its log's) in this process, not once for each of a database's sessions."""
        state: list[tuple[int, int, int] | None] = []
        for path in (self.db_path, self.db_path + "-wal"):
            try:
                st = os.stat(path)
                state.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                state.append(None)
        key = (self.db_path, tuple(state))
        with _FILE_CHECKS_MUTEX:
            known = _FILE_CHECKS.get(key)
        if known is not None:
            return known
        with self._reading() as conn:
            damage = [r[0] for r in conn.execute("PRAGMA integrity_check(5)")]
        with _FILE_CHECKS_MUTEX:
            _FILE_CHECKS.clear()  # one file's latest only: a check runs over one database at a time
            _FILE_CHECKS[key] = damage
        return damage

    def verify_state(self) -> list[str]:
        """Differences between what the database stores and a fold of the entries' data (empty
        = consistent): the columns kept next to each entry's JSON (the tree is built from them),
        the log position and count, and the projection `open` reads. All of it is read in one
        read transaction, so a writer committing meanwhile cannot show up as a difference.

        Damage to the database file itself, even in pages no read of this session touches (an
        index, another session), is a SessionError, as it is when a read meets it."""
        damage = self._file_damage()
        if damage != ["ok"]:
            what = "; ".join(" ".join(line.split()) for line in damage)  # one line
            raise SessionError(
                "storage", f"the database is damaged ({what})", path=self.db_path, damaged=True
            )
        with self._snapshot() as conn:
            stored = conn.execute(
                "SELECT leaf_id, session_name, labels, latest_compaction_id, thinking_entry_id,"
                " model_entry_id, tools_entry_id, entry_count, last_seq"
                " FROM session_state WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
            active = [
                r[0]
                for r in conn.execute(
                    "SELECT entry_id FROM active_branch WHERE session_id = ? ORDER BY pos",
                    (self.session_id,),
                )
            ]
            rows = conn.execute(
                f"SELECT seq, {_COLUMNS}, data FROM entries WHERE session_id = ? ORDER BY seq",
                (self.session_id,),
            ).fetchall()
        if stored is None:
            return ["the session has no state row"]
        fresh = TreeIndex()
        problems = _check_columns(rows, fresh)
        leaf, name, labels_json, latest, thinking, model, tools, count, last_seq = stored
        log_end = rows[-1][0] if rows else 0
        if last_seq != log_end:
            problems.append(f"log position: stored last_seq {last_seq}, the log ends at seq {log_end}")
        if count != len(rows):
            problems.append(f"entry count: stored {count}, log has {len(rows)}")
        expected_leaf = fresh.leaf_id()
        if expected_leaf != leaf:
            problems.append(f"leaf: stored {leaf!r}, log says {expected_leaf!r}")
        if fresh.session_name != name:
            problems.append(f"name: stored {name!r}, log says {fresh.session_name!r}")
        try:
            labels = _json(labels_json, "labels", self.location) if labels_json else {}
        except SessionError:
            labels = labels_json
        if fresh.labels != labels:
            problems.append(f"labels: stored {labels!r}, log says {fresh.labels!r}")
        expected_active = [fresh.ids[i] for i in fresh.bounded_path(fresh.leaf)]
        if expected_active != active:
            problems.append(
                f"active branch: stored {len(active)} ids, log says {len(expected_active)}"
                + ("" if len(active) != len(expected_active) else " (different ones)")
            )
        newest = max(fresh.compactions, default=None)
        expected_latest = None if newest is None else fresh.ids[newest]
        if expected_latest != latest:
            problems.append(f"latest compaction: stored {latest!r}, log says {expected_latest!r}")
        expected_state = tuple(None if k < 0 else fresh.ids[k] for k in fresh.state_entries(fresh.leaf))
        if expected_state != (thinking, model, tools):
            problems.append(f"state entries: stored {(thinking, model, tools)}, log says {expected_state}")
        return problems

    def writer_elsewhere(self) -> bool:
        if self._lock is not None and self._lock.held:
            return False  # the writer is this storage
        return range_held_elsewhere(self.db_path, session_slot(self.session_id))

    def begin_write(self) -> None:
        lock = self._lock
        if lock is None or lock.held or self.read_only:
            return  # read-only, or the writer since the open
        with self._mutex:
            try:
                _take_lock(lock, self._db(), self.db_path, self.session_id)
            except SessionError as exc:
                if exc.code != "locked":
                    raise
                self._lock = None
                raise self.refused_at_write(exc) from None

    def end_write(self) -> None:
        lock = self._lock
        if not (self._per_write and lock is not None and lock.held):
            return
        # Our pid out of `writers` first: left there, it was read as the holder's by a refusal
        # between another writer's lock and its own record, which named this process (QA).
        with suppress(sqlite3.Error, SessionError), self._mutex:
            self._db().execute(
                "DELETE FROM writers WHERE session_id = ? AND pid = ?", (self.session_id, os.getpid())
            )
        lock.release()  # parked, not closed: the file is in use (`dbfiles`)

    def close(self) -> None:
        super().close()
        with self._mutex:
            opened = self._conn is not None
            if opened:
                with suppress(OSError):
                    self._gone()  # replaced since the last look: its log is not left at the name
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            if opened:
                dbfiles.done_using(self._file)


_MAX_COLUMN_REPORTS = 20
# `SqliteStorage._file_damage`'s last finding, by the database's path and the state of its files
_FILE_CHECKS: dict[tuple[str, tuple[tuple[int, int, int] | None, ...]], list[str]] = {}
_FILE_CHECKS_MUTEX = threading.Lock()
IDS_PER_QUERY = 500  # ids bound in one `IN (...)`: under SQLite's oldest limit of 999 variables


def _check_columns(rows: list[tuple[Any, ...]], fresh: TreeIndex) -> list[str]:
    """Compare each entry's stored columns with what its data says (`_Row.of`), and fold the
    data into `fresh` (with `scan.add_dict`, not `_Row`: a second derivation of the same
    fields). An entry whose data does not decode is folded from its columns, so that one
    damaged row is one problem, not also a different leaf, count and branch."""
    problems: list[str] = []
    differing = 0
    for n, (_seq, *columns, blob) in enumerate(rows, 1):
        stored = _Row(*columns)
        try:
            data = decode_entry_dict(blob)
        except LineError as exc:
            problems.append(f"entry #{n} ({stored.id!r}): its data {exc.reason}")
            stored.index_into(fresh, None)
            continue
        add_dict(fresh, data, None)
        expected = _Row.of(data)
        if stored == expected:
            continue
        for column, have, want in zip(_Row._fields, stored, expected, strict=True):
            if have != want:
                differing += 1
                if differing <= _MAX_COLUMN_REPORTS:
                    problems.append(
                        f"entry #{n} ({stored.id!r}): column {column} is {have!r}, its data says {want!r}"
                    )
    if differing > _MAX_COLUMN_REPORTS:
        problems.append(f"{differing - _MAX_COLUMN_REPORTS} more columns differ from their entries' data")
    return problems


class _StaleLog(Exception):
    """The session's log moved between our last read and our write transaction."""


def _storable(text: str) -> str:
    """`text` with any lone surrogate (which UTF-8 cannot encode) as U+FFFD."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def _on_read_only_fs(path: str) -> bool:
    """Whether `path` is on a file system mounted read-only (a reason of its own, QA)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _what_it_is(db_path: str) -> str:
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


def _storage_error(exc: sqlite3.Error, db_path: str) -> SessionError:
    """A SessionError for what SQLite raised while reading: damage (a malformed page, not a
    database) is said to be damage; the rest (I/O, locking) keeps SQLite's words."""
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return SessionError(
            "storage", f"the database is damaged ({exc}); {recover(db_path)}", path=db_path, damaged=True
        )
    return SessionError("storage", f"cannot read the database ({exc})", path=db_path)


def _json(text: str | bytes, what: str, location: str | None) -> Any:
    """Stored JSON (a header, the labels), as `encode_line` wrote it: lone surrogates (a cwd
    from a file name that is not UTF-8) are escapes there, which orjson does not read."""
    try:
        return full_decode(text.encode() if isinstance(text, str) else text)
    except (msgspec.DecodeError, ValueError):
        raise SessionError("invalid_session", f"the stored {what} is not valid JSON", path=location) from None


@contextmanager
def _transaction(conn: sqlite3.Connection, path: str) -> Iterator[sqlite3.Connection]:
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
        _rollback(conn)
        if isinstance(exc, sqlite3.Error):
            raise SessionError("storage", f"write failed, nothing was added: {exc}", path=path) from exc
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as err:
        _rollback(conn)
        raise SessionError("storage", f"commit failed, nothing was added: {err}", path=path) from None


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite rolls some failures back by itself (a full disk, I/O errors); a second ROLLBACK
    # would then raise and hide the error that matters
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _writer_pid(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The pid the session's last writer recorded (`_take_lock`), to name it in a refusal."""
    try:
        row = conn.execute("SELECT pid FROM writers WHERE session_id = ?", (session_id,)).fetchone()
    except sqlite3.Error:
        return None
    return None if row is None else int(row[0])


def _take_lock(lock: RangeLock, conn: sqlite3.Connection, db_path: str, session_id: str) -> None:
    """Lock the session's byte of the database file (see `lock.RangeLock`), then record our pid
    in the `writers` table, which is how a refused writer learns who holds the lock."""

    lock.acquire(db_path, f"session {session_id} in {db_path}", lambda: _writer_pid(conn, session_id))
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

"""SQLite storage: one database file holds many sessions.

Every entry is a row (`data` = the exact wire JSON, plus the denormalised columns the tree needs).
Each append is one transaction that also updates a materialised projection — leaf, name, labels,
latest compaction, and the active branch (the compaction-bounded leaf path, one row per entry) —
and memory is updated only after that transaction commits.

The projection is what `open` reads: the leaf, name, labels and the context of a session come
from it without reading the rest of the log. The full `TreeIndex` (every entry) is loaded the
first time something needs the whole tree (the browser, `get_children`, a move).
`verify_state()` recomputes the projection from the log and reports any difference.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import orjson

from ..model.entries import Entry, entry_from_dict, normalize_label
from ..model.errors import SessionError
from ..model.header import SessionHeader
from ..model.ids import iso_now, new_session_id
from .base import SessionStorage
from .index import TreeIndex
from .lock import RangeLock, session_slot
from .scan import LineError, add_dict, decode_entry_dict

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

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$")


class SqliteStorage(SessionStorage):
    """Use `SqliteStorage.create`, `SqliteStorage.open` or `SqliteStorage.list_sessions`."""

    def __init__(
        self, db_path: str, conn: sqlite3.Connection, session_id: str, lock: RangeLock | None
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.location = f"{db_path}#{session_id}"
        self.session_id = session_id
        self._conn: sqlite3.Connection | None = conn
        self._lock = lock
        self._mutex = threading.RLock()
        self._index: TreeIndex | None = None
        self._seqs = array("q")
        self._leaf: str | None = None
        self._name: str | None = None
        self._labels: dict[str, str] = {}
        self._latest_compaction: str | None = None
        self._state_ids: tuple[str | None, str | None, str | None] = (None, None, None)
        self._active: list[str] = []
        self._count = 0
        self._last_seq = 0
        self._compactions: dict[str, tuple[str | None, bool]] = {}
        if lock is None:
            self.read_only_reason = "opened read-only"

    # --- construction -------------------------------------------------------------------------

    @staticmethod
    def _connect(db_path: str, *, create: bool, durable: bool) -> sqlite3.Connection:
        if not create and not os.path.exists(db_path):
            raise SessionError("not_found", "no such database", path=db_path)
        if create and not os.path.exists(db_path):
            os.makedirs(os.path.dirname(os.path.abspath(db_path)), mode=0o700, exist_ok=True)
            os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        try:
            conn = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            conn.execute("PRAGMA busy_timeout=5000")
            if create:
                conn.executescript(_SCHEMA)
                if conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 0:
                    conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            row = conn.execute("SELECT version FROM schema_version").fetchone()
        except sqlite3.DatabaseError as exc:
            raise SessionError("storage", f"not a usable sessiontree database: {exc}", path=db_path) from None
        if row is None or row[0] != SCHEMA_VERSION:
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
        cwd: str,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        durable: bool = False,
    ) -> SqliteStorage:
        db_path = os.fspath(db_path)
        sid = session_id or new_session_id()
        header = SessionHeader.new(sid, iso_now(), cwd, parent_session=parent_session, metadata=metadata)
        conn = cls._connect(db_path, create=True, durable=durable)
        lock = RangeLock(session_slot(sid))
        try:
            _take_lock(lock, conn, db_path, sid)
            with _transaction(conn):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
                    raise SessionError("invalid_argument", f"session {sid} already exists", path=db_path)
                conn.execute(
                    "INSERT INTO sessions (id, created_at, cwd, parent_session, header) VALUES (?,?,?,?,?)",
                    (
                        sid,
                        header.timestamp,
                        cwd,
                        parent_session,
                        orjson.dumps(header.to_dict()).decode(),
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
    ) -> SqliteStorage:
        db_path = os.fspath(db_path)
        conn = cls._connect(db_path, create=False, durable=durable)
        lock = None
        try:
            row = conn.execute("SELECT header FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionError("not_found", f"Session not found: {session_id}", path=db_path)
            if not read_only:
                lock = RangeLock(session_slot(session_id))
                _take_lock(lock, conn, db_path, session_id)
            storage = cls(db_path, conn, session_id, lock)
            storage.header = SessionHeader.from_dict(orjson.loads(row[0]), path=db_path)
            storage._read_state()
        except BaseException:
            if lock is not None:
                lock.release()
            conn.close()
            raise
        return storage

    @staticmethod
    def list_sessions(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """Sessions in the database, newest first: id, created_at, cwd, name, entry_count."""
        conn = SqliteStorage._connect(os.fspath(db_path), create=False, durable=False)
        try:
            rows = conn.execute(
                "SELECT s.id, s.created_at, s.cwd, st.session_name, st.entry_count"
                " FROM sessions s LEFT JOIN session_state st ON st.session_id = s.id"
                " ORDER BY s.created_at DESC"
            ).fetchall()
        finally:
            conn.close()
        return [
            {"id": r[0], "created_at": r[1], "cwd": r[2], "name": r[3], "entry_count": r[4] or 0}
            for r in rows
        ]

    def _read_state(self) -> None:
        conn = self._db()
        row = conn.execute(
            "SELECT leaf_id, session_name, labels, latest_compaction_id, entry_count, last_seq,"
            " thinking_entry_id, model_entry_id, tools_entry_id"
            " FROM session_state WHERE session_id = ?",
            (self.session_id,),
        ).fetchone()
        if row is None:
            raise SessionError("invalid_session", "session has no state row", path=self.location)
        self._leaf, self._name, labels, self._latest_compaction, self._count, self._last_seq = row[:6]
        self._state_ids = (row[6], row[7], row[8])
        self._labels = orjson.loads(labels) if labels else {}
        self._active = [
            r[0]
            for r in conn.execute(
                "SELECT entry_id FROM active_branch WHERE session_id = ? ORDER BY pos",
                (self.session_id,),
            )
        ]
        self._compactions = {
            r[0]: (r[1], bool(r[2]))
            for r in conn.execute(
                "SELECT id, first_kept, has_tail FROM entries WHERE session_id = ? AND type = 'compaction'",
                (self.session_id,),
            )
        }

    # --- reading ------------------------------------------------------------------------------

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
        index = index or TreeIndex()
        rows = self._db().execute(
            "SELECT seq, id, parent_id, type, role, target_id, label, name, first_kept, has_tail"
            " FROM entries WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
            (self.session_id, after_seq, upto_seq),
        )
        seqs = self._seqs
        for seq, eid, parent, etype, role, target, label, name, first_kept, has_tail in rows:
            index.add(
                eid,
                parent,
                etype,
                role,
                target_id=target,
                label=label,
                name=name,
                first_kept=first_kept,
                has_tail=bool(has_tail),
            )
            seqs.append(seq)
        if after_seq == 0:
            index.finish_load()
        return index

    def _decode(self, blob: bytes, where: str) -> Entry:
        try:
            return entry_from_dict(decode_entry_dict(blob))
        except LineError as exc:
            raise SessionError("invalid_entry", f"{where} {exc.reason}", path=self.location) from None

    def _load(self, i: int) -> Entry:
        self.index  # noqa: B018 - positions exist only once the index is loaded
        with self._mutex:
            row = self._db().execute("SELECT data FROM entries WHERE seq = ?", (self._seqs[i],)).fetchone()
        return self._decode(row[0], f"entry #{i + 1}")

    def get_entry(self, entry_id: str) -> Entry | None:
        with self._mutex:
            row = (
                self._db()
                .execute(
                    "SELECT data FROM entries WHERE session_id = ? AND id = ?",
                    (self.session_id, entry_id),
                )
                .fetchone()
            )
        return None if row is None else self._decode(row[0], f"entry {entry_id!r}")

    def iter_entries(self) -> Iterator[Entry]:
        with self._mutex:
            rows = (
                self._db()
                .execute("SELECT data FROM entries WHERE session_id = ? ORDER BY seq", (self.session_id,))
                .fetchall()
            )
        for n, (blob,) in enumerate(rows, 1):
            yield self._decode(blob, f"entry #{n}")

    def has_id(self, entry_id: str) -> bool:
        if self._index is not None:
            return entry_id in self._index.pos
        with self._mutex:
            return (
                self._db()
                .execute(
                    "SELECT 1 FROM entries WHERE session_id = ? AND id = ?",
                    (self.session_id, entry_id),
                )
                .fetchone()
                is not None
            )

    @property
    def leaf_id(self) -> str | None:
        return self._leaf

    @property
    def session_name(self) -> str | None:
        return self._name

    def get_label(self, entry_id: str) -> str | None:
        return self._labels.get(entry_id)

    def labels(self) -> dict[str, str]:
        return dict(self._labels)

    def entry_count(self) -> int:
        return self._count

    def state_entries(self, at: str | None = None) -> tuple[Entry | None, Entry | None, Entry | None]:
        if at is not None and at != self._leaf:
            return super().state_entries(at)
        return tuple(None if eid is None else self.get_entry(eid) for eid in self._state_ids)  # type: ignore[return-value]

    def _state_ids_of(self, target: str | None) -> tuple[str | None, str | None, str | None]:
        if target is None:
            return (None, None, None)
        index = self.index
        found = index.state_entries(index.pos[target])
        return tuple(None if k < 0 else index.ids[k] for k in found)  # type: ignore[return-value]

    def active_branch(self) -> list[Entry]:
        with self._mutex:
            rows = (
                self._db()
                .execute(
                    "SELECT e.data FROM active_branch a JOIN entries e"
                    " ON e.session_id = a.session_id AND e.id = a.entry_id"
                    " WHERE a.session_id = ? ORDER BY a.pos",
                    (self.session_id,),
                )
                .fetchall()
            )
        if len(rows) != len(self._active):
            raise SessionError("invalid_session", "active branch names missing entries", path=self.location)
        return [self._decode(r[0], "active branch entry") for r in rows]

    def refresh(self) -> int:
        """Pick up entries another process appended (the reader side of live follow)."""
        with self._mutex:
            row = (
                self._db()
                .execute("SELECT last_seq FROM session_state WHERE session_id = ?", (self.session_id,))
                .fetchone()
            )
            if row is None or row[0] == self._last_seq:
                return 0
            before = self._count
            if self._index is not None:
                self._build_index(self._last_seq, row[0], self._index)
            self._read_state()
            return self._count - before

    # --- writing ------------------------------------------------------------------------------

    def _path_ids(self, target: str | None) -> list[str]:
        """The bounded path of an existing entry (needs the full tree)."""
        if target is None:
            return []
        index = self.index
        i = index.pos.get(target)
        if i is None:
            raise SessionError("not_found", f"Entry {target} not found", path=self.location)
        return [index.ids[i] for i in index.bounded_path(i)]

    def _active_after_compaction(
        self, active: list[str], compaction: str, compactions: dict[str, tuple[str | None, bool]]
    ) -> list[str]:
        """The active branch once `compaction` (appended to `active`) is the leaf: the same rule
        as `TreeIndex.bounded_path`, walked along the current active branch when the boundary
        lies inside it (the usual case), else on the full tree."""
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
            if active and self._parent_of(active[0]) is not None:
                # the active branch began at an older boundary: walk the full tree instead
                index = self.index
                path = index.bounded_path(index.pos[active[-1]], first_kept)
                return [*(index.ids[i] for i in path), compaction]
        out.reverse()
        return out

    def _parent_of(self, entry_id: str) -> str | None:
        row = (
            self._db()
            .execute(
                "SELECT parent_id FROM entries WHERE session_id = ? AND id = ?",
                (self.session_id, entry_id),
            )
            .fetchone()
        )
        return None if row is None else row[0]

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        conn = self._db()
        with self._mutex:
            leaf, name, latest = self._leaf, self._name, self._latest_compaction
            labels = dict(self._labels)
            active = list(self._active)
            compactions = dict(self._compactions)
            thinking_id, model_id, tools_id = self._state_ids
            rewrite_active = False
            last_seq = self._last_seq
            seqs: list[int] = []
            with _transaction(conn):
                for entry, blob in zip(entries, encoded, strict=True):
                    data = entry.to_dict()
                    etype = data["type"]
                    target = data.get("targetId") if etype in ("label", "leaf") else None
                    cur = conn.execute(
                        "INSERT INTO entries (session_id, id, parent_id, type, timestamp, role,"
                        " target_id, label, name, first_kept, has_tail, data)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (
                            self.session_id,
                            entry.id,
                            entry.parent_id,
                            etype,
                            entry.timestamp,
                            data["message"]["role"] if etype == "message" else None,
                            target,
                            data.get("label") if etype == "label" else None,
                            data.get("name") if etype == "session_info" else None,
                            data.get("firstKeptEntryId") if etype == "compaction" else None,
                            int(etype == "compaction" and data.get("retainedTail") is not None),
                            blob,
                        ),
                    )
                    last_seq = cur.lastrowid or last_seq
                    seqs.append(last_seq)
                    if etype == "leaf":
                        leaf = target
                        active = self._path_ids(target)
                        thinking_id, model_id, tools_id = self._state_ids_of(target)
                        rewrite_active = True
                        continue
                    leaf = entry.id
                    if etype == "thinking_level_change":
                        thinking_id = entry.id
                    elif etype == "model_change" or (
                        etype == "message" and data["message"]["role"] == "assistant"
                    ):
                        model_id = entry.id
                    elif etype == "active_tools_change":
                        tools_id = entry.id
                    if etype == "compaction":
                        latest = entry.id
                        compactions[entry.id] = (
                            data.get("firstKeptEntryId"),
                            data.get("retainedTail") is not None,
                        )
                        active = self._active_after_compaction(active, entry.id, compactions)
                        rewrite_active = True
                        continue
                    active.append(entry.id)
                    if etype == "label" and isinstance(target, str):
                        text = normalize_label(data.get("label"))
                        if text is None:
                            labels.pop(target, None)
                        else:
                            labels[target] = text
                    elif etype == "session_info":
                        value = data.get("name")
                        name = value.strip() or None if isinstance(value, str) else None
                start = 0 if rewrite_active else len(self._active)
                if rewrite_active:
                    conn.execute("DELETE FROM active_branch WHERE session_id = ?", (self.session_id,))
                conn.executemany(
                    "INSERT INTO active_branch (session_id, pos, entry_id) VALUES (?,?,?)",
                    [(self.session_id, n, active[n]) for n in range(start, len(active))],
                )
                conn.execute(
                    "UPDATE session_state SET leaf_id = ?, session_name = ?, labels = ?,"
                    " latest_compaction_id = ?, thinking_entry_id = ?, model_entry_id = ?,"
                    " tools_entry_id = ?, entry_count = ?, last_seq = ?, updated_at = ?"
                    " WHERE session_id = ?",
                    (
                        leaf,
                        name,
                        orjson.dumps(labels).decode(),
                        latest,
                        thinking_id,
                        model_id,
                        tools_id,
                        self._count + len(entries),
                        last_seq,
                        iso_now(),
                        self.session_id,
                    ),
                )
            # committed: only now does memory change
            if self._index is not None:
                for entry, seq in zip(entries, seqs, strict=True):
                    add_dict(self._index, entry.to_dict(), None)
                    self._seqs.append(seq)
            self._leaf, self._name, self._latest_compaction = leaf, name, latest
            self._labels, self._active, self._compactions = labels, active, compactions
            self._state_ids = (thinking_id, model_id, tools_id)
            self._count += len(entries)
            self._last_seq = last_seq

    # --- checking -----------------------------------------------------------------------------

    def verify_state(self) -> list[str]:
        """Differences between the materialised state and a fold of the log (empty = consistent)."""
        fresh = TreeIndex()
        with self._mutex:
            rows = (
                self._db()
                .execute("SELECT data FROM entries WHERE session_id = ? ORDER BY seq", (self.session_id,))
                .fetchall()
            )
        for (blob,) in rows:
            add_dict(fresh, msgspec.json.decode(blob), None)
        problems = []
        expected_leaf = fresh.leaf_id()
        if expected_leaf != self._leaf:
            problems.append(f"leaf: stored {self._leaf!r}, log says {expected_leaf!r}")
        if fresh.session_name != self._name:
            problems.append(f"name: stored {self._name!r}, log says {fresh.session_name!r}")
        if fresh.labels != self._labels:
            problems.append(f"labels: stored {self._labels!r}, log says {fresh.labels!r}")
        active = [fresh.ids[i] for i in fresh.bounded_path(fresh.leaf)]
        if active != self._active:
            problems.append(f"active branch: stored {len(self._active)} ids, log says {len(active)}")
        latest = max((i for i in fresh.compactions), default=None)
        expected_latest = None if latest is None else fresh.ids[latest]
        if expected_latest != self._latest_compaction:
            problems.append(
                f"latest compaction: stored {self._latest_compaction!r}, log says {expected_latest!r}"
            )
        found = fresh.state_entries(fresh.leaf)
        expected_state = tuple(None if k < 0 else fresh.ids[k] for k in found)
        if expected_state != self._state_ids:
            problems.append(f"state entries: stored {self._state_ids}, log says {expected_state}")
        if len(fresh) != self._count:
            problems.append(f"entry count: stored {self._count}, log has {len(fresh)}")
        return problems

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None


class _transaction:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as err:
                self.conn.execute("ROLLBACK")
                raise SessionError("storage", f"commit failed, nothing was added: {err}") from None
        else:
            self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise SessionError("storage", f"write failed, nothing was added: {exc}") from exc


def _take_lock(lock: RangeLock, conn: sqlite3.Connection, db_path: str, session_id: str) -> None:
    """Lock the session's byte of the database file (see `lock.RangeLock`), then record our pid
    in the `writers` table, which is how a refused writer learns who holds the lock."""

    def holder() -> int | None:
        try:
            row = conn.execute("SELECT pid FROM writers WHERE session_id = ?", (session_id,)).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else int(row[0])

    lock.acquire(db_path, f"session {session_id} in {db_path}", holder)
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

"""`SqliteStorage`: one session of a SQLite database, behind the storage contract."""

from __future__ import annotations

import os
import sqlite3
import threading
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any

from ...model.entries import Entry
from ...model.errors import Diagnostic, SessionError
from ...model.header import CURRENT_VERSION, SessionHeader
from ...model.ids import iso_now, session_id_or_new
from .. import dbfiles
from ..base import listed_sessions
from ..index import TreeIndex
from ..lock import RangeLock, locked_refusal, range_held_elsewhere, retry_while_locked, session_slot
from ..projection import ProjectedStorage, Projection, advance, differences, fold
from ..scan import LONE_SURROGATE, encode_line
from . import wal
from .connection import (
    Snapshot,
    connect,
    on_read_only_fs,
    rollback,
    storage_error,
    stored_json,
    transaction,
)
from .schema import COLUMNS, INSERT, Row, check_columns, storable
from .writers import take_lock, writer_pid


class SqliteStorage(ProjectedStorage):
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
        self._logs = wal.log_keys(db_path)  # its -wal and -shm, while they are at their names
        self._logs_went: list[str] | None = None  # where they went, once set aside (`_gone`)
        if lock is None:
            self.read_only_reason = "opened read-only"

    # --- construction -------------------------------------------------------------------------

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
        conn = connect(db_path, create=True, durable=durable, read_only=False)
        lock = RangeLock(session_slot(sid))
        try:
            take_lock(lock, conn, db_path, sid)
            with transaction(conn, db_path):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
                    raise SessionError("invalid_argument", f"session {sid} already exists", path=db_path)
                conn.execute(
                    "INSERT INTO sessions (id, created_at, cwd, parent_session, header) VALUES (?,?,?,?,?)",
                    (
                        sid,
                        header.timestamp,
                        storable(cwd),  # listed and filtered by; the header keeps it exactly
                        parent_session if parent_session is None else storable(parent_session),
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
        conn = connect(db_path, create=False, durable=durable, read_only=read_only)
        if isinstance(conn, Snapshot):
            why = (
                "it is on a read-only file system, where SQLite cannot create the file it shares"
                if on_read_only_fs(db_path)
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
                    retry_while_locked(lambda: take_lock(lock, conn, db_path, session_id))
            storage = cls(db_path, conn, session_id, lock)
            storage._per_write = lock is not None and lock_at == "write"
            # Asked only now that `cls` has the file in use (`dbfiles`): a descriptor of ours on
            # it closed before dropped every lock SQLite held on it in this process, and the next
            # writer to quit took itself for the last user and removed the log under this
            # connection: its entries were lost and the indexes damaged (QA).
            if storage._per_write:
                retry_while_locked(partial(_refuse_if_written, storage, conn))
            if reason is not None:
                storage.read_only_reason = reason
            storage.header = SessionHeader.from_dict(
                stored_json(row[0], "header", storage.location), path=db_path
            )
            storage._state, storage._last_seq = storage._stored_projection()
        except BaseException as exc:
            if storage is not None:
                storage.close()  # its lock, its connection and its use of the file (`dbfiles`)
            else:
                if lock is not None:
                    lock.release()
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise storage_error(exc, db_path) from None
            raise
        return storage

    @staticmethod
    def list_sessions(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """Sessions in the database, the last active first: id, created_at, last_active (the
        timestamp of its last user or assistant message, else created_at: Pi's session list's
        rule, as the file picker's), cwd, name, entry_count and first_message (the start of its
        first user message)."""
        conn = connect(os.fspath(db_path), create=False, durable=False, read_only=True)
        try:
            rows = conn.execute(
                "SELECT s.id, s.created_at, s.cwd, st.session_name, st.entry_count,"
                " (SELECT e.data FROM entries e WHERE e.session_id = s.id AND e.role = 'user'"
                "  ORDER BY e.seq LIMIT 1),"
                " COALESCE((SELECT e.timestamp FROM entries e WHERE e.session_id = s.id"
                "  AND e.role IN ('user', 'assistant') AND e.seq <= st.last_seq"
                "  ORDER BY e.seq DESC LIMIT 1), s.created_at) AS last_active"
                " FROM sessions s LEFT JOIN session_state st ON st.session_id = s.id"
                " ORDER BY last_active DESC, s.id"
            ).fetchall()
        except sqlite3.Error as exc:
            raise storage_error(exc, os.fspath(db_path)) from None
        finally:
            conn.close()
        return listed_sessions(rows)

    def _stored_projection(self, problems: list[str] | None = None) -> tuple[Projection, int]:
        """The stored projection and the log position it is of (what `open` and `refresh`
        show), read in one read transaction so that its parts are of one commit. Labels that
        are not JSON raise, unless `problems` is given (`verify_state`): said there, and read
        as none."""
        with self._snapshot() as conn:
            row = conn.execute(
                "SELECT leaf_id, session_name, labels, entry_count, last_seq,"
                " thinking_entry_id, model_entry_id, tools_entry_id, latest_compaction_id"
                " FROM session_state WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
            if row is None:
                raise SessionError("invalid_session", "the session has no state row", path=self.location)
            leaf, name, labels, count, last_seq, thinking, model, tools, latest = row
            active = [
                r[0]
                for r in conn.execute(
                    "SELECT entry_id FROM active_branch WHERE session_id = ? ORDER BY pos",
                    (self.session_id,),
                )
            ]
            # compactions come from the log: a compaction met while walking the active branch
            # back needs its boundary (`projection.advance`)
            compactions = {
                r[0]: (r[1], bool(r[2]))
                for r in conn.execute(
                    "SELECT id, first_kept, has_tail FROM entries"
                    " WHERE session_id = ? AND type = 'compaction' AND seq <= ? ORDER BY seq",
                    (self.session_id, last_seq),
                )
            }
        try:
            label_map = stored_json(labels, "labels", self.location) if labels else {}
        except SessionError as exc:
            if problems is None:
                raise
            problems.append(f"labels: {exc.detail}")
            label_map = {}
        state = Projection(
            leaf=leaf,
            session_name=name,
            labels=label_map,
            latest_compaction=latest,
            state_ids=(thinking, model, tools),
            active=active,
            compactions=compactions,
            count=count,
        )
        return state, last_seq

    # --- reading ------------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one read (one thread at a time: writes share the connection).
        Every query of the storage runs inside one of these (or `transaction`), so what
        SQLite raises — a damaged page, an I/O error — leaves the storage as a SessionError."""
        with self._mutex:
            conn = self._db()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise storage_error(exc, self.db_path) from None

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
                rollback(conn)  # ends the read transaction; it wrote nothing

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SessionError("storage", "the session is closed", path=self.location)
        return self._conn

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
                f"SELECT seq, {COLUMNS}, CASE WHEN role = 'assistant' THEN data END FROM entries"
                " WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                (self.session_id, after_seq, upto_seq),
            )
            # a live index must not keep half of the rows when a read fails halfway; a fresh
            # one is dropped on failure, so it can be filled as rows arrive
            for seq, *columns, data in cursor if fresh else cursor.fetchall():
                Row(*columns).index_into(index, data)
                seqs.append(seq)
        self._seqs.extend(seqs)
        if after_seq == 0:
            index.finish_load()
        return index

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
        row = Row.of(data)
        for field_name, value in zip(Row._fields, row, strict=True):
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
        path's names (`wal`): the next program to open the path would read them into
        whatever database is there now."""
        try:
            st = os.stat(self.db_path)
        except FileNotFoundError:
            gone = "deleted"
        else:
            if (st.st_dev, st.st_ino) == self._file:
                if len(self._logs) < len(wal.LOG_SUFFIXES):  # made after the open
                    self._logs = wal.log_keys(self.db_path)
                return ""
            gone = "replaced"
        if self._logs_went is None:
            went = self._logs_went = wal.set_aside(self.db_path, self._file, self._logs)
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
        datas = [entry.to_dict() for entry in entries]
        rows = [Row.of(data) for data in datas]
        with self._mutex:
            conn = self._db()
            old = self._state
            new, keep = advance(old, datas, lambda: self.index, self._parent_of, where=self.location)
            try:
                seqs = self._write(conn, rows, encoded, old, new, keep)
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
        rows: list[Row],
        encoded: list[bytes],
        old: Projection,
        new: Projection,
        keep: int,
    ) -> list[int]:
        """Insert the rows and store `new` over `old` (whose active branch's first `keep` ids it
        shares), in one transaction; returns their seqs.
        `new` was folded from what this object last read, so the write is refused (`_StaleLog`)
        when the log has moved since: the single-writer lock keeps other sessiontree writers
        out, but not a writer that does not take it (another program, or one on a network file
        system where the lock does not hold). The check is inside the transaction: BEGIN
        IMMEDIATE holds the database's write lock, so the log cannot move between the check and
        the write."""
        with transaction(conn, self.db_path):
            position = conn.execute(
                "SELECT last_seq FROM session_state WHERE session_id = ?", (self.session_id,)
            ).fetchone()
            if position is None or position[0] != self._last_seq:
                raise _StaleLog
            seqs = [
                conn.execute(INSERT, (self.session_id, *row, blob)).lastrowid or 0
                for row, blob in zip(rows, encoded, strict=True)
            ]
            self._write_projection(conn, old, new, keep, seqs[-1])
        return seqs

    def _write_projection(
        self, conn: sqlite3.Connection, old: Projection, new: Projection, keep: int, last_seq: int
    ) -> None:
        """Store `new` over `old`. The active branch is only appended to when it grew (the usual
        append), else cut back to the `keep` ids the two share and refilled."""
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
        problems: list[str] = []
        with self._snapshot() as conn:
            try:
                stored, last_seq = self._stored_projection(problems)  # in this read transaction
            except SessionError as exc:  # no state row
                stored, last_seq = None, -1
                problems.append(exc.detail)
            labels_unread = bool(problems)
            rows = conn.execute(
                f"SELECT seq, {COLUMNS}, data FROM entries WHERE session_id = ? ORDER BY seq",
                (self.session_id,),
            ).fetchall()
        fresh = TreeIndex()
        problems += check_columns(rows, fresh)
        if stored is None:
            return problems
        log_end = rows[-1][0] if rows else 0
        if last_seq != log_end:
            problems.append(f"log position: stored last_seq {last_seq}, the log ends at seq {log_end}")
        folded = fold(fresh)
        if labels_unread:  # not JSON: said already, not compared
            stored.labels = folded.labels
        return problems + differences(stored, folded)

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
                db = self._db()
                retry_while_locked(lambda: take_lock(lock, db, self.db_path, self.session_id))
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


# `SqliteStorage._file_damage`'s last finding, by the database's path and the state of its files
_FILE_CHECKS: dict[tuple[str, tuple[tuple[int, int, int] | None, ...]], list[str]] = {}
_FILE_CHECKS_MUTEX = threading.Lock()
IDS_PER_QUERY = 500  # ids bound in one `IN (...)`: under SQLite's oldest limit of 999 variables


class _StaleLog(Exception):
    """The session's log moved between our last read and our write transaction."""


def _refuse_if_written(storage: SqliteStorage, conn: sqlite3.Connection) -> None:
    """Raise `locked`, naming the holder, while another process holds `storage`'s writer lock."""
    if storage.writer_elsewhere():
        sid = storage.session_id
        raise locked_refusal(f"session {sid} in {storage.db_path}", writer_pid(conn, sid))

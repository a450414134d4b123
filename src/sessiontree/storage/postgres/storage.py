"""PostgreSQL storage: one database holds many sessions, written by many processes at once.

The design is SQLite's (`storage.sqlite`): each append is one transaction that inserts the
entries and rewrites the materialised state (leaf, name, labels, latest compaction, the entries
deciding thinking level / model / tools, the active branch as rows), and memory changes only
after the commit. `open` reads that state, not the log; the full `TreeIndex` is loaded the first
time something needs the whole tree (the browser, a move).

What differs is the server:
- one writer per session is a session-level advisory lock held by the writer's connection
  (`postgres.lock`), released by the server when that connection ends, however it ends;
- readers never lock and never block a writer (MVCC); each read of the state is taken from one
  snapshot, so a reader never sees the entries of one commit with the state of another;
- live follow polls `state.last_seq`, a primary-key lookup, and fetches the new rows by an index
  range scan on `(session_id, seq)`. LISTEN/NOTIFY would need a second, always-open connection
  and a listener thread inside every follower, still needs the poll to catch up after a dropped
  connection, and makes every committing writer in the database queue on the one lock NOTIFY
  takes at commit; the browser polls on a timer anyway (every half second), and a primary-key
  lookup per poll costs the server next to nothing;
- an append is sent as one pipeline (BEGIN, inserts, state update, COMMIT in one round trip).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from ...model.entries import Entry
from ...model.errors import SessionError
from ...model.header import CURRENT_VERSION, SessionHeader
from ...model.ids import iso_now, session_id_or_new
from ..base import listed_sessions
from ..index import TreeIndex
from ..lock import retry_while_locked
from ..projection import ProjectedStorage, Projection, advance, differences, fold
from ..scan import (
    add_dict,
    encode_line,
    full_decode,
    tool_only_line,
)
from . import schema
from .connection import connect, database_error, redact
from .lock import held, refuse_if_held, try_lock, unlock

S = schema.SCHEMA
CACHE_ENTRIES = 2048  # decoded on demand; a few MB of wire JSON at typical entry sizes
PREFETCH = 256  # ancestors fetched along with a missed entry (paths are read whole)
PAGE = 2000  # rows per query when walking a whole log
WRITER_LOOK_SECONDS = 1.0  # a writer's `refresh` asks the database at most this often

_ENTRY_COLUMNS = "id, parent_id, type, role, target_id, label, name, first_kept, has_tail"
_INSERT_ENTRIES = f"INSERT INTO {S}.entries (session_id, seq, timestamp, {_ENTRY_COLUMNS}) VALUES "
_INSERT_DATA = f"INSERT INTO {S}.entry_data (session_id, seq, data) VALUES "
_COPY_ENTRIES = f"COPY {S}.entries (session_id, seq, timestamp, {_ENTRY_COLUMNS}) FROM STDIN"
_COPY_DATA = f"COPY {S}.entry_data (session_id, seq, data) FROM STDIN"
_CUT_ACTIVE = f"DELETE FROM {S}.active_branch WHERE session_id = %s AND pos >= %s"
_COPY_ACTIVE = f"COPY {S}.active_branch (session_id, pos, entry_id) FROM STDIN"
_UPDATE_STATE = (
    f"UPDATE {S}.state SET leaf_id = %s, session_name = %s, labels = %s, latest_compaction_id = %s,"
    " thinking_entry_id = %s, model_entry_id = %s, tools_entry_id = %s, entry_count = %s,"
    " last_seq = %s, updated_at = %s WHERE session_id = %s"
)
COPY_ROWS = 64  # from this many rows on, an append uses COPY instead of INSERTs


def _listable(text: str) -> str:
    """`text` with NUL characters and lone surrogates, which PostgreSQL's text cannot hold, as
    U+FFFD."""
    return text if not _bad_text(text) else re.sub("[\x00\ud800-\udfff]", "\ufffd", text)


def _bad_text(value: object) -> bool:
    if not isinstance(value, str):
        return False
    if "\x00" in value:
        return True
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text_columns(data: dict[str, Any]) -> dict[str, Any]:
    """The wire fields that become text columns (the rest stays inside `data`)."""
    etype = data["type"]
    message = data.get("message") if etype == "message" else None
    return {
        "id": data["id"],
        "parentId": data["parentId"],
        "type": etype,
        "timestamp": data["timestamp"],
        "message role": message.get("role") if isinstance(message, dict) else None,
        "targetId": data.get("targetId") if etype in ("label", "leaf") else None,
        "firstKeptEntryId": data.get("firstKeptEntryId") if etype == "compaction" else None,
    }


def _pack(value: Any) -> bytes | None:
    """Free text (a label, a session name) for a bytea column: JSON, which escapes what
    PostgreSQL's text type cannot hold."""
    return None if value is None else encode_line(value)


def _unpack(blob: bytes | None) -> Any:
    return None if blob is None else full_decode(blob)


class PostgresStorage(ProjectedStorage):
    """Use `PostgresStorage.create`, `PostgresStorage.open` or `PostgresStorage.list_sessions`."""

    holds_resources = True

    def __init__(self, url: str, conn: Any, session_id: str, *, writer: bool) -> None:
        super().__init__()
        self.url = url
        self.location = f"{redact(url)}#{session_id}"
        self.session_id = session_id
        self._conn: Any = conn
        self._mutex = threading.RLock()
        self._index: TreeIndex | None = None
        self._state = Projection()
        self._last_seq = 0
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._ids: set[str] | None = None  # see has_id
        self._writer = writer
        self._locked = writer  # holds the writer lock (opened with lock_at="write": while writing)
        self._per_write = False  # the lock is taken for each write only (`open(lock_at="write")`)
        self._durable = False  # as opened: a new connection after a lost one is made the same
        self._last_load = -1  # the seq `_load` was last asked for (reading in order, or not)
        self._looked = 0.0  # when a writer's `refresh` last asked the database
        if not writer:
            self.read_only_reason = "opened read-only"

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        url: str,
        *,
        cwd: str = "",
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        durable: bool = False,
        header: SessionHeader | None = None,
    ) -> PostgresStorage:
        """A new session in the database at `url` (tables are created on first use). `header`
        keeps an existing session's header as it is (an import); otherwise one is made from
        `cwd`, `session_id`, ... like every backend's `create`."""
        if header is None:
            sid = session_id_or_new(session_id)
            header = SessionHeader.new(sid, iso_now(), cwd, parent_session=parent_session, metadata=metadata)
        elif header.version != CURRENT_VERSION:
            raise SessionError("invalid_argument", "only version 3 headers are stored; upgrade first")
        sid = header.id
        where = f"{redact(url)}#{sid}"
        if _bad_text(sid) or _bad_text(header.timestamp):
            raise SessionError(
                "invalid_argument",
                "the session id or timestamp has a NUL character or a lone surrogate, which"
                " PostgreSQL cannot store",
                path=where,
            )
        conn = connect(url, read_only=False, durable=durable)
        try:
            with _errors("could not create the session", where):
                schema.ensure(conn, where)
                try_lock(conn, sid, f"session {sid} in {redact(url)}")
                with conn.transaction():
                    exists = conn.execute(f"SELECT 1 FROM {S}.sessions WHERE id = %s", (sid,)).fetchone()
                    if exists:
                        raise SessionError(
                            "invalid_argument", f"session {sid} already exists", path=redact(url)
                        )
                    conn.execute(
                        f"INSERT INTO {S}.sessions (id, created_at, cwd, parent_session, header)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        (
                            sid,
                            header.timestamp,
                            # listed and filtered by; the header keeps them exactly (a
                            # directory whose name is not UTF-8 has lone surrogates)
                            _listable(header.cwd),
                            None if header.parent_session is None else _listable(header.parent_session),
                            encode_line(header.to_dict()),
                        ),
                    )
                    conn.execute(
                        f"INSERT INTO {S}.state (session_id, labels, updated_at) VALUES (%s, %s, %s)",
                        (sid, b"{}", iso_now()),
                    )
        except BaseException:
            conn.close()
            raise
        storage = cls(url, conn, sid, writer=True)
        storage._durable = durable
        storage.header = header
        storage._index = TreeIndex()
        return storage

    @classmethod
    def open(
        cls,
        url: str,
        session_id: str,
        *,
        read_only: bool = False,
        durable: bool = False,
        lock_at: str = "open",
    ) -> PostgresStorage:
        """`lock_at="write"`: refused as any writer is when another process holds the writer
        lock (asked without taking it), which is then taken for each write only
        (`begin_write`, `end_write`): a teammate who opens a session to look at it, or moves
        its leaf once, never keeps its owner's agent or import out."""
        where = f"{redact(url)}#{session_id}"
        conn = connect(url, read_only=read_only, durable=durable)
        try:
            with _errors("could not open the session", where):
                schema.check(conn, redact(url))
                row = conn.execute(f"SELECT header FROM {S}.sessions WHERE id = %s", (session_id,)).fetchone()
                if row is None:
                    raise SessionError(
                        "not_found", f"no session {session_id!r} in the database", path=redact(url)
                    )
                what = f"session {session_id} in {redact(url)}"
                if not read_only and lock_at == "write":
                    retry_while_locked(lambda: refuse_if_held(conn, session_id, what))
                elif not read_only:
                    retry_while_locked(lambda: try_lock(conn, session_id, what))
                storage = cls(url, conn, session_id, writer=not read_only)
                storage._per_write = not read_only and lock_at == "write"
                storage._locked = not read_only and lock_at == "open"
                storage._durable = durable
                storage.header = SessionHeader.from_dict(full_decode(row[0]), path=where)
                storage._read_state()
        except BaseException:
            conn.close()
            raise
        return storage

    @staticmethod
    def list_sessions(url: str) -> list[dict[str, Any]]:
        """Sessions in the database, the last active first: id, created_at, last_active (the
        timestamp of its last user or assistant message, else created_at: Pi's session list's
        rule, as the file picker's), cwd, name, entry_count and first_message (the start of its
        first user message). A database without sessiontree's tables holds none."""
        conn = connect(url, read_only=True, durable=False)
        try:
            with _errors("could not list the sessions", redact(url)):
                try:
                    schema.check(conn, redact(url))
                except SessionError as exc:
                    if exc.code == "not_found":
                        return []
                    raise
                rows = conn.execute(
                    f"SELECT s.id, s.created_at, s.cwd, st.session_name, st.entry_count,"
                    f" (SELECT d.data FROM {S}.entries e JOIN {S}.entry_data d"
                    "   ON d.session_id = e.session_id AND d.seq = e.seq"
                    "   WHERE e.session_id = s.id AND e.role = 'user' ORDER BY e.seq LIMIT 1),"
                    f" COALESCE((SELECT e.timestamp FROM {S}.entries e WHERE e.session_id = s.id"
                    "   AND e.role IN ('user', 'assistant') AND e.seq <= st.last_seq"
                    "   ORDER BY e.seq DESC LIMIT 1), s.created_at) AS last_active"
                    f" FROM {S}.sessions s LEFT JOIN {S}.state st ON st.session_id = s.id"
                    " ORDER BY last_active DESC, s.id"
                ).fetchall()
        finally:
            conn.close()
        return listed_sessions(rows, _unpack)

    @contextmanager
    def _snapshot(self) -> Iterator[Any]:
        """A read-only transaction in which every statement sees the same committed state."""
        conn = self._db()
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def _read_state(self) -> None:
        """Load the materialised state (not the log) from one snapshot."""
        with self._mutex, _errors("could not read the session", self.location), self._snapshot() as conn:
            state, last_seq = self._stored_state(conn)
        self._state, self._last_seq = state, last_seq

    def _stored_state(self, conn: Any) -> tuple[Projection, int]:
        row = conn.execute(
            "SELECT leaf_id, session_name, labels, latest_compaction_id, thinking_entry_id,"
            f" model_entry_id, tools_entry_id, entry_count, last_seq FROM {S}.state WHERE session_id = %s",
            (self.session_id,),
        ).fetchone()
        if row is None:
            raise SessionError("invalid_session", "session has no state row", path=self.location)
        active = [
            r[0]
            for r in conn.execute(
                f"SELECT entry_id FROM {S}.active_branch WHERE session_id = %s ORDER BY pos",
                (self.session_id,),
            )
        ]
        compactions = {
            r[0]: (r[1], bool(r[2]))
            for r in conn.execute(
                f"SELECT id, first_kept, has_tail FROM {S}.entries"
                " WHERE session_id = %s AND type = 'compaction' AND seq <= %s",
                (self.session_id, row[8]),
            )
        }
        labels = full_decode(row[2]) if row[2] else {}
        state = Projection(
            leaf=row[0],
            session_name=_unpack(row[1]),
            labels=labels if isinstance(labels, dict) else {},
            latest_compaction=row[3],
            state_ids=(row[4], row[5], row[6]),
            active=active,
            compactions=compactions,
            count=int(row[7]),
        )
        return state, int(row[8])

    # --- reading ------------------------------------------------------------------------------

    def _db(self) -> Any:
        conn = self._conn
        if conn is None:
            raise SessionError("storage", "the session is closed", path=self.location)
        if conn.closed or conn.broken:  # the server restarted, the network went away
            self._reconnect()
        return self._conn

    def _fetch(self, doing: str, sql: str, params: tuple[Any, ...], *, one: bool = False) -> Any:
        """The rows of a read (the first only, with `one`), tried once more on a new connection
        when it found the connection lost: after a server restart the first statement fails,
        and only then is the connection known to be broken (QA: the first fork after a restart
        failed, the second worked). Called with `_mutex` held."""
        for attempt in (0, 1):
            try:
                with _errors(doing, self.location):
                    cursor = self._db().execute(sql, params)
                    return cursor.fetchone() if one else cursor.fetchall()
            except SessionError:
                conn = self._conn
                if attempt or conn is None or not (conn.closed or conn.broken):
                    raise
        raise AssertionError("unreachable")  # the second attempt returns or raises

    def _reconnect(self) -> None:
        """A new connection in place of a lost one: a follower stopped for good, and a writer
        went on offering writes that all failed (QA). A writer's lock died with the old
        connection, so another writer may hold the session now: then this one turns
        read-only, saying so. What was appended meanwhile comes with the next `refresh`, and a
        write built on the state before it is refused by the log-position check."""
        conn = connect(self.url, read_only=not self._writer, durable=self._durable)
        if self._locked:
            try:
                with _errors("could not take the session again", self.location):
                    try_lock(conn, self.session_id, f"session {self.session_id} in {redact(self.url)}")
            except SessionError as exc:
                self._writer = self._locked = False
                self.mark_read_only(f"the connection to the server was lost, and now {exc.detail}")
                with suppress(Exception):
                    conn.execute("SET default_transaction_read_only = on")
        old, self._conn = self._conn, conn
        with suppress(Exception):
            old.close()

    @property
    def index(self) -> TreeIndex:
        if self._index is None:
            with self._mutex:
                if self._index is None:
                    index = TreeIndex()
                    self._index_rows(index, self._last_seq)
                    index.finish_load()
                    self._index = index
        return self._index

    def _index_rows(self, index: TreeIndex, upto_seq: int) -> None:
        """Add the rows after the index's end up to `upto_seq` (committed rows this object
        knows of: position = seq - 1, so the index grows exactly in step with `seq`)."""
        with self._mutex, _errors("could not read the session", self.location):
            conn = self._db()
            after = len(index)
            while after < upto_seq:
                upto = min(upto_seq, after + 50 * PAGE)
                # an assistant message's data too: the default filter hides the turns that only
                # call tools, and sessions kept here showed them all (QA)
                rows = conn.execute(
                    f"SELECT {_ENTRY_COLUMNS}, CASE WHEN e.role = 'assistant' THEN"
                    f" (SELECT d.data FROM {S}.entry_data d WHERE d.session_id = e.session_id"
                    f" AND d.seq = e.seq) END FROM {S}.entries e"
                    " WHERE e.session_id = %s AND e.seq > %s AND e.seq <= %s ORDER BY e.seq",
                    (self.session_id, after, upto),
                ).fetchall()
                if len(rows) != upto - after:
                    raise SessionError(
                        "invalid_session", "the session's entries are not numbered 1..n", path=self.location
                    )
                add = index.add
                for eid, parent, etype, role, target, label, name, first_kept, has_tail, data in rows:
                    add(
                        eid,
                        parent,
                        etype,
                        role,
                        target_id=target,
                        label=_unpack(label),
                        name=_unpack(name),
                        first_kept=first_kept,
                        has_tail=has_tail,
                        tool_only=data is not None and tool_only_line(bytes(data)),
                    )
                after = upto

    def _load(self, i: int) -> Entry:
        index = self.index  # positions exist only once the index is loaded
        seq = i + 1
        with self._mutex:
            blob = self._cache.get(seq)
            sequential, self._last_load = self._last_load == seq - 1, seq
            if blob is None:
                # Whatever asked for one entry of a path (context building, a preview) asks for
                # the rest next, and whatever reads the log in order (`check`, `tree`, an
                # export: the entry before was the last asked for) the entries after it: fetch
                # them in the same round trip. Reading in order fetched one entry per round
                # trip, with up to 256 ancestors each time (`check` of a 10k-entry chain: 42 s).
                wanted: list[int] = []
                k = i
                while k >= 0 and len(wanted) < PREFETCH and k + 1 not in self._cache:
                    wanted.append(k + 1)
                    k = index.parent[k]
                if sequential:
                    last = min(len(index), i + 1 + PREFETCH)
                    wanted += [s for s in range(seq + 1, last + 1) if s not in self._cache]
                rows = self._fetch(
                    "could not read an entry",
                    f"SELECT seq, data FROM {S}.entry_data WHERE session_id = %s AND seq = ANY(%s)",
                    (self.session_id, wanted),
                )
                for s, data in rows:
                    self._remember(s, data)
                blob = self._cache.get(seq)
                if blob is None:
                    raise SessionError("invalid_session", f"entry #{seq} is missing", path=self.location)
            else:
                self._cache.move_to_end(seq)
        return self._decode(blob, f"entry #{seq}")

    def _remember(self, seq: int, blob: bytes) -> None:
        self._cache[seq] = blob
        if len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)

    def get_entry(self, entry_id: str) -> Entry | None:
        with self._mutex:
            row = self._fetch(
                "could not read an entry",
                f"SELECT d.data FROM {S}.entries e JOIN {S}.entry_data d"
                " ON d.session_id = e.session_id AND d.seq = e.seq"
                " WHERE e.session_id = %s AND e.id = %s AND e.seq <= %s",
                (self.session_id, entry_id, self._last_seq),
                one=True,
            )
        return None if row is None else self._decode(row[0], f"entry {entry_id!r}")

    def iter_entries(self) -> Iterator[Entry]:
        for seq, blob in self._rows():
            yield self._decode(blob, f"entry #{seq}")

    def _rows(self, upto: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(seq, data) of the whole log in order, a page at a time (bounded memory)."""
        end = self._last_seq if upto is None else upto
        after = 0
        while after < end:
            with self._mutex:
                rows = self._fetch(
                    "could not read the session",
                    f"SELECT seq, data FROM {S}.entry_data"
                    " WHERE session_id = %s AND seq > %s AND seq <= %s ORDER BY seq",
                    (self.session_id, after, min(end, after + PAGE)),
                )
            if not rows:
                return
            yield from rows
            after = rows[-1][0]

    def has_id(self, entry_id: str) -> bool:
        """Asked for every new id and every new entry's parent, so it must not cost a round
        trip each time: without the full index, the session's ids are fetched once (a few MB
        for a 100k-entry session) and kept up to date by this object's own appends."""
        if self._index is not None:
            return entry_id in self._index.pos
        with self._mutex:
            if self._ids is None:
                rows = self._fetch(
                    "could not read the session",
                    f"SELECT id FROM {S}.entries WHERE session_id = %s AND seq <= %s",
                    (self.session_id, self._last_seq),
                )
                self._ids = {r[0] for r in rows}
            return entry_id in self._ids

    def active_branch(self) -> list[Entry]:
        ids = list(self._state.active)
        with self._mutex:
            rows = self._fetch(
                "could not read the session",
                f"SELECT d.data FROM unnest(%s::text[]) WITH ORDINALITY AS a(id, n)"
                f" JOIN {S}.entries e ON e.session_id = %s AND e.id = a.id"
                f" JOIN {S}.entry_data d ON d.session_id = e.session_id AND d.seq = e.seq ORDER BY a.n",
                (ids, self.session_id),
            )
        if len(rows) != len(ids):
            raise SessionError("invalid_session", "active branch names missing entries", path=self.location)
        return [self._decode(r[0], "active branch entry") for r in rows]

    def refresh(self) -> int:
        """Pick up entries other processes appended (the reader side of live follow): one
        primary-key lookup when nothing is new. A writer asks too, at most once a second (it
        is asked before every append): its lock goes with a lost connection (a server
        restart), and another writer may have appended meanwhile. A connection found lost is
        made again at once (`_reconnect`)."""
        now = time.monotonic()
        conn = self._conn
        healthy = conn is not None and not (conn.closed or conn.broken)
        if self._locked and healthy and now - self._looked < WRITER_LOOK_SECONDS:
            return 0
        self._looked = now
        try:
            return self._refresh()
        except SessionError:
            conn = self._conn
            if conn is None or not (conn.closed or conn.broken):
                raise
            return self._refresh()  # `_db` connects again

    def _refresh(self) -> int:
        with self._mutex, _errors("could not refresh the session", self.location):
            row = (
                self._db()
                .execute(f"SELECT last_seq FROM {S}.state WHERE session_id = %s", (self.session_id,))
                .fetchone()
            )
            if row is None or row[0] == self._last_seq:
                return 0
            before = self._state.count
            with self._snapshot() as conn:
                state, last_seq = self._stored_state(conn)
                if self._index is not None:
                    self._index_rows(self._index, last_seq)
            self._state, self._last_seq = state, last_seq
            self._ids = None  # fetched again when next needed
            return state.count - before

    # --- writing ------------------------------------------------------------------------------

    def refusal(self, data: dict[str, Any]) -> str | None:
        columns = _text_columns(data)
        text = "".join(v for v in columns.values() if isinstance(v, str))
        if text.isascii() and "\x00" not in text:  # nearly every entry: one check for all
            return None
        for field, value in columns.items():
            if _bad_text(value):
                return (
                    f"has a {field} with a NUL character or a lone surrogate, which PostgreSQL cannot store"
                )
        return None

    def _parent_of(self, entry_id: str) -> str | None:
        with self._mutex:
            row = (
                self._db()
                .execute(
                    f"SELECT parent_id FROM {S}.entries WHERE session_id = %s AND id = %s",
                    (self.session_id, entry_id),
                )
                .fetchone()
            )
        return None if row is None else row[0]

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        with self._mutex:
            conn = self._db()
            datas = [entry.to_dict() for entry in entries]
            before = self._state
            with _errors("write failed, nothing was added", self.location):
                after, keep = advance(before, datas, lambda: self.index, self._parent_of, where=self.location)
            first = self._last_seq + 1
            rows = []
            blobs = []
            for k, (data, blob) in enumerate(zip(datas, encoded, strict=True)):
                cols = _text_columns(data)
                etype = cols["type"]
                rows.append(
                    (
                        self.session_id,
                        first + k,
                        cols["timestamp"],
                        cols["id"],
                        cols["parentId"],
                        etype,
                        cols["message role"],
                        cols["targetId"],
                        _pack(data.get("label") if etype == "label" else None),
                        _pack(data.get("name") if etype == "session_info" else None),
                        cols["firstKeptEntryId"],
                        etype == "compaction" and data.get("retainedTail") is not None,
                    )
                )
                blobs.append((self.session_id, first + k, blob))
            last_seq = first + len(rows) - 1
            active_rows = [(self.session_id, n, after.active[n]) for n in range(keep, len(after.active))]
            state_row = (
                after.leaf,
                _pack(after.session_name),
                encode_line(after.labels),
                after.latest_compaction,
                *after.state_ids,
                after.count,
                last_seq,
                iso_now(),
                self.session_id,
            )
            with _errors("write failed, nothing was added", self.location):
                if len(rows) + len(active_rows) >= COPY_ROWS:
                    self._write_bulk(
                        conn, rows, blobs, keep < len(before.active), keep, active_rows, state_row
                    )
                else:
                    self._write_small(
                        conn, rows, blobs, keep < len(before.active), keep, active_rows, state_row
                    )
            # committed: only now does memory change
            if self._index is not None:
                for data in datas:
                    add_dict(self._index, data, None)
            if self._ids is not None:
                self._ids.update(data["id"] for data in datas)
            for k, blob in enumerate(encoded):
                self._remember(first + k, blob)
            self._state = after
            self._last_seq = last_seq

    def _write_small(
        self,
        conn: Any,
        rows: list[tuple],
        blobs: list[tuple],
        cut: bool,
        keep: int,
        active_rows: list[tuple],
        state_row: tuple,
    ) -> None:
        """The whole append as one statement (data-modifying CTEs), so one round trip and, in
        autocommit, one transaction. The active-branch rows are upserted at their positions
        and only the rows past the new end are deleted: the two never touch the same row,
        which statements of one query must not."""
        params: list[Any] = []
        entry_values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
        data_values = ", ".join(["(%s, %s, %s)"] * len(blobs))
        ctes = [
            f"new_entries AS ({_INSERT_ENTRIES}{entry_values})",
            f"new_data AS ({_INSERT_DATA}{data_values})",
        ]
        for row in rows:
            params.extend(row)
        for blob_row in blobs:
            params.extend(blob_row)
        new_length = keep + len(active_rows)
        if cut:
            ctes.append(f"cut AS (DELETE FROM {S}.active_branch WHERE session_id = %s AND pos >= %s)")
            params.extend((self.session_id, new_length))
        if active_rows:
            values = ", ".join(["(%s, %s, %s)"] * len(active_rows))
            ctes.append(
                f"active AS (INSERT INTO {S}.active_branch (session_id, pos, entry_id) VALUES {values}"
                " ON CONFLICT (session_id, pos) DO UPDATE SET entry_id = EXCLUDED.entry_id)"
            )
            for row in active_rows:
                params.extend(row)
        params.extend(state_row)
        conn.execute("WITH " + ", ".join(ctes) + " " + _UPDATE_STATE, params)

    def _write_bulk(
        self,
        conn: Any,
        rows: list[tuple],
        blobs: list[tuple],
        cut: bool,
        keep: int,
        active_rows: list[tuple],
        state_row: tuple,
    ) -> None:
        """Big batches (an import): COPY moves rows several times faster than INSERTs; it
        cannot run in a pipeline, so this is a handful of round trips for the whole batch."""
        with conn.transaction():
            cur = conn.cursor()
            with cur.copy(_COPY_ENTRIES) as copy:
                for row in rows:
                    copy.write_row(row)
            with cur.copy(_COPY_DATA) as copy:
                for blob_row in blobs:
                    copy.write_row(blob_row)
            if cut:
                cur.execute(_CUT_ACTIVE, (self.session_id, keep))
            if active_rows:
                with cur.copy(_COPY_ACTIVE) as copy:
                    for row in active_rows:
                        copy.write_row(row)
            cur.execute(_UPDATE_STATE, state_row)

    # --- checking -----------------------------------------------------------------------------

    def verify_state(self) -> list[str]:
        """Differences between the stored state and a fold of the log, both read from one
        snapshot (empty = consistent)."""
        fresh = TreeIndex()
        with self._mutex, _errors("could not read the session", self.location), self._snapshot() as conn:
            stored, last_seq = self._stored_state(conn)
            after = 0
            while after < last_seq:
                rows = conn.execute(
                    f"SELECT seq, data FROM {S}.entry_data WHERE session_id = %s AND seq > %s AND seq <= %s"
                    " ORDER BY seq",
                    (self.session_id, after, min(last_seq, after + PAGE)),
                ).fetchall()
                if not rows:
                    break
                for _seq, blob in rows:
                    add_dict(fresh, full_decode(blob), None)
                after = rows[-1][0]
        problems = differences(stored, fold(fresh))
        if last_seq != stored.count:
            problems.append(f"sequence: last_seq {last_seq}, entry count {stored.count}")
        return problems

    def writer_elsewhere(self) -> bool:
        if self._locked:
            return False  # the writer is this storage
        try:
            with self._mutex, _errors("could not ask for the session's writer", self.location):
                return held(self._db(), self.session_id)
        except SessionError:  # the server is away: it cannot tell
            return True

    def begin_write(self) -> None:
        if self._locked or not self._writer or self.read_only:
            return  # read-only, or the writer since the open
        what = f"session {self.session_id} in {redact(self.url)}"
        with self._mutex:
            try:
                with _errors("could not take the session's writer lock", self.location):
                    db = self._db()
                    retry_while_locked(lambda: try_lock(db, self.session_id, what))
            except SessionError as exc:
                if exc.code != "locked":
                    raise
                self._writer = False
                with suppress(Exception):
                    self._db().execute("SET default_transaction_read_only = on")
                raise self.refused_at_write(exc) from None
            self._locked = True
            self._looked = 0.0  # the refresh that follows asks the database

    def end_write(self) -> None:
        if not (self._per_write and self._locked):
            return
        with self._mutex:
            self._locked = False
            conn = self._conn
            if conn is not None and not (conn.closed or conn.broken):
                with contextlib.suppress(Exception):  # a lost connection released it already
                    unlock(conn, self.session_id)

    def close(self) -> None:
        """Release the writer lock, then close the connection (which releases it too, but only
        once the server has ended the connection's backend: a reader asking right after the
        close still found the lock held)."""
        super().close()
        with self._mutex:
            if self._conn is not None:
                if self._locked and not (self._conn.closed or self._conn.broken):
                    with contextlib.suppress(Exception):  # a lost connection released it already
                        unlock(self._conn, self.session_id)
                self._conn.close()
                self._conn = None


@contextmanager
def _errors(doing: str, where: str | None) -> Iterator[None]:
    """psycopg's exceptions as one-line `SessionError`s."""
    import psycopg

    try:
        yield
    except psycopg.errors.UniqueViolation:
        raise SessionError(
            "storage",
            f"{doing}: another writer appended to this session at the same time",
            path=where,
        ) from None
    except psycopg.Error as exc:
        raise database_error(exc, doing, where) from None

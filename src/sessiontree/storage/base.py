"""The storage contract shared by the memory, JSONL, SQLite and PostgreSQL backends.

A storage persists entries in append order and keeps a `TreeIndex` of them. It validates what it
is asked to write (so nothing invalid ever reaches disk), updates its in-memory state only after
the write succeeded, and decodes entry payloads on demand. Everything about *meaning* (which
parent a new entry gets, what a move writes, what the model sees) lives in `Session`.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..model.entries import Entry, validate_entry
from ..model.errors import Diagnostic, SessionError
from ..model.header import SessionHeader
from ..model.ids import iso_to_ms, new_entry_id
from .index import TreeIndex
from .lock import ADVICE
from .scan import encode_line, message_words, non_finite

CONTAINS, ESCAPED = 1, 2  # what `SessionStorage.lines_containing` says of a line


def listed_sessions(
    rows: Sequence[Sequence[Any]], name: Callable[[Any], str | None] = lambda value: value
) -> list[dict[str, Any]]:
    """A database's `list_sessions`, from rows of (id, created_at, cwd, stored name, entry count,
    first user message's data, last active), with `name` reading the stored name: by the
    instant of their last message, the latest first, ties in the order given. By the instant,
    not the text: a "+05:00" time was sorted as if it were UTC (QA)."""
    listed = [
        {
            "id": r[0],
            "created_at": r[1],
            "last_active": r[6],
            "cwd": r[2],
            "name": name(r[3]),
            "entry_count": r[4] or 0,
            "first_message": message_words(r[5]),
        }
        for r in rows
    ]
    return sorted(listed, key=lambda s: iso_to_ms(str(s["last_active"] or "")), reverse=True)


class SessionStorage(ABC):
    """One session's append log. Subclasses implement `_load`, `_persist` (and may override the
    materialized-state readers, as SQLite does)."""

    header: SessionHeader
    read_only_reason: str | None = None
    holds_resources = False  # a lock or handles that `close` releases (files, databases)
    locked_out = False  # opened read-only because another writer held the lock (`open_or_read_only`)
    location: str | None = None  # file path / db path, for messages
    # The files holding the session, which nothing written from it may replace (an export with
    # `-o` naming its own source would swap the session for a copy of one path)
    files: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._diagnostics: list[Diagnostic] = []
        self.closed = False  # set by `close`: every later read or write says so

    # --- contract -----------------------------------------------------------------------------

    @property
    @abstractmethod
    def index(self) -> TreeIndex:
        """The tree of every entry in the log."""

    @abstractmethod
    def _load(self, i: int) -> Entry:
        """Decode the entry at position `i` of the index."""

    @abstractmethod
    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        """Write `entries` durably-as-configured, then index them; all or nothing."""

    def refresh(self) -> int:
        """Pick up entries appended by other processes; returns how many were added."""
        return 0

    def finish_verification(self, *, elsewhere: bool = False) -> None:  # noqa: B027 - optional hook
        """Complete any checks deferred at open (JSONL: the UTF-8 of message text);
        `elsewhere`: in a helper process where the storage can."""

    @property
    def unchecked(self) -> int:
        """How many entries the checks deferred at open have still to look at (0: none left).
        Read without waiting for a check under way, which counts them until it ends."""
        return 0

    def verify_state(self) -> list[str]:
        """Differences between what the storage keeps materialised (SQLite: leaf, labels, the
        active branch as rows, ...) and a fresh fold of its log; empty when consistent. Storages
        that materialise nothing have nothing to compare."""
        return []

    def refusal(self, data: dict[str, Any]) -> str | None:
        """Why this backend cannot store `data`, an otherwise valid entry, or None. Most store
        any valid entry; PostgreSQL's text columns refuse NUL characters and lone surrogates.
        Callers that must know in advance (an import that skips what cannot be stored) ask
        here; `append` asks too."""
        return None

    def line_number(self, entry_id: str) -> int | None:
        """The physical line of an entry in its file (header = line 1); None where the storage
        has no lines."""
        return None

    def lines_containing(
        self,
        needle: bytes,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        progress: Callable[[int, int], None] | None = None,
    ) -> bytearray | None:
        """One byte per entry: CONTAINS where the entry's stored bytes contain `needle`
        (lowercase ASCII) once their ASCII letters are lowercased, ESCAPED (or-ed in) where they
        spell an ASCII character as a JSON `\\u00XX` escape, which such a search cannot see
        through, or hold a letter that case-insensitive matching takes for an ASCII one (İ, ı,
        ſ, the Kelvin sign; raw or escaped). None where the storage has no bytes to scan, or
        when `cancelled()` said stop; callers decode every entry then."""
        return None

    def raw_line(self, i: int) -> bytes:
        """Entry `i` as a line of JSON: the stored bytes where the storage keeps them."""
        return encode_line(self._load(i).to_dict())

    @property
    def format_version(self) -> int:
        """The session format version as stored (JSONL files may be Pi's older v1/v2)."""
        return self.header.version

    def writer_elsewhere(self) -> bool:
        """Whether another process holds this session's writer lock now: what kept a session
        opened by `open_or_read_only` read-only (`locked_out`), asked again to learn that the
        writer has quit. A storage without locks has no writer elsewhere. Implementations must
        not take the lock for longer than the question, and answer True when they cannot tell."""
        return False

    def begin_write(self) -> None:  # noqa: B027 - optional hook
        """Called by `Session` before each write, before it refreshes and builds the entries;
        `end_write` after it, however it ended. A storage opened with `lock="write"`
        takes its writer lock here and lets go of it there, so that a viewer never keeps a
        writer out for longer than its own writes; when another process holds it, the storage
        turns read-only (`refused_at_write`) and `locked` is raised. Storages that lock at the
        open, or never, have nothing to do."""

    def end_write(self) -> None:  # noqa: B027 - optional hook
        """See `begin_write`. Must not raise: it runs after the write, whatever happened."""

    def refused_at_write(self, exc: SessionError) -> SessionError:
        """The writer lock, asked for at a write (`begin_write`), is held by another process:
        this storage turns read-only and `locked_out`, as `open_or_read_only` leaves a session
        it found locked, and the error to raise says that nothing was written."""
        detail = exc.detail.removesuffix(ADVICE)
        self.mark_read_only(
            f"{detail} (it began after this session was opened): read-only from now on; once"
            " that writer quits, opening it again opens it for writing"
        )
        self.locked_out = True
        return SessionError(
            "locked", f"{detail}: nothing was written, and the session is read-only here now", path=exc.path
        )

    def mark_read_only(self, reason: str) -> None:
        """Refuse every write from now on, saying `reason` (e.g. another writer holds the lock)."""
        self.read_only_reason = reason

    def close(self) -> None:
        """Release locks and file handles. Idempotent. Implementations call this one too: a
        closed storage refuses reads and writes with "the session is closed"."""
        self.closed = True

    def __del__(self) -> None:
        """A storage dropped without `close` (a notebook cell run again) lets go of its lock and
        handles, warning as an unclosed file does: its lock otherwise refused every later
        writer in the process until it exited."""
        if not self.holds_resources or getattr(self, "closed", True):
            return
        try:
            warnings.warn(f"{self.location} was not closed", ResourceWarning, stacklevel=1)
            self.close()
        except Exception:  # at interpreter exit the modules it needs may be gone
            pass

    def require_open(self) -> None:
        if self.closed:
            raise SessionError("storage", "the session is closed", path=self.location)

    # --- shared behaviour ---------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        return self.read_only_reason is not None

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self._diagnostics + self.index.diagnostics

    def load_entry(self, i: int) -> Entry:
        return self._load(i)

    def load_many(self, positions: Sequence[int]) -> list[Entry]:
        """The entries at `positions`, in that order: a path's worth at once. Storages that can
        read many entries faster than one by one (JSONL: one read per stretch of consecutive
        lines) override this; the result is what `load_entry` gives for each."""
        return [self._load(i) for i in positions]

    def get_entry(self, entry_id: str) -> Entry | None:
        i = self.index.pos.get(entry_id)
        return None if i is None else self._load(i)

    def has_id(self, entry_id: str) -> bool:
        return entry_id in self.index.pos

    def iter_entries(self) -> Iterator[Entry]:
        for i in range(len(self.index)):
            yield self._load(i)

    def new_entry_id(self) -> str:
        return new_entry_id(self.has_id)

    @property
    def leaf_id(self) -> str | None:
        return self.index.leaf_id()

    @property
    def session_name(self) -> str | None:
        return self.index.session_name

    def get_label(self, entry_id: str) -> str | None:
        return self.index.labels.get(entry_id)

    def labels(self) -> dict[str, str]:
        return dict(self.index.labels)

    def active_branch(self) -> list[Entry]:
        """The compaction-bounded path from the root to the leaf (what context is built from)."""
        return self.load_many(self.index.bounded_path(self.index.leaf))

    def state_entries(self, at: str | None = None) -> tuple[Entry | None, Entry | None, Entry | None]:
        """The nearest thinking-level change, model source and active-tools change on the full
        root path of `at` (default: the leaf) — the inputs of `context.derive_state`."""
        index = self.index
        i = index.leaf if at is None else index.pos[at]
        return tuple(None if k < 0 else self._load(k) for k in index.state_entries(i))  # type: ignore[return-value]

    def entry_count(self) -> int:
        return len(self.index)

    def append(self, entries: Sequence[Entry]) -> None:
        """Validate and persist `entries` (in one write where the backend allows), then index
        them. It does not first pick up what other writers appended: a caller that derives
        parents from the current leaf calls `refresh()` once before building the entries, as
        `Session` does for every write."""
        self.finish_verification()
        self.check_writable()
        seen: set[str] = set()
        encoded = []
        for entry in entries:
            data = entry.to_dict()
            reason = validate_entry(data)
            if reason is None:
                reason = self.refusal(data)
            if reason is not None:
                raise SessionError("invalid_entry", f"refusing to write an entry that {reason}")
            if entry.id in seen or self.has_id(entry.id):
                raise SessionError("invalid_entry", f"entry id {entry.id!r} already exists")
            parent = entry.parent_id
            if parent is not None and parent not in seen and not self.has_id(parent):
                raise SessionError("not_found", f"Entry {parent} not found (parent of the new entry)")
            seen.add(entry.id)
            try:
                line = encode_line(data)
            except (TypeError, ValueError) as exc:
                raise SessionError("invalid_entry", f"entry is not JSON-serialisable: {exc}") from None
            where = non_finite(data) if b"null" in line else None  # where orjson wrote one
            if where is not None:
                raise SessionError(
                    "invalid_entry",
                    f"refusing to write an entry whose {where} is NaN or infinite: JSON has no such"
                    " number (it would be written as null)",
                )
            encoded.append(line)
        self._persist(entries, encoded)

    def _mark_damaged(self) -> None:
        """Damage found while loading makes the session read-only: writing after a line we could
        not read would build on a tree we do not fully know (README, "Reliability")."""
        errors = [d for d in self.diagnostics if d.severity == "error"]
        if errors and self.read_only_reason is None:
            # "; and": after a message of its own, " and 1 more" read as part of it (QA)
            more = (
                f"; and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''}"
                if len(errors) > 1
                else ""
            )
            self.read_only_reason = (
                f"the session has damage ({errors[0].said()}{more}), so it is open read-only"
                " and nothing will be written; `sessiontree check` lists every problem"
            )

    def check_writable(self) -> None:
        self.require_open()
        if self.read_only_reason is not None:
            raise SessionError("read_only", self.read_only_reason, path=self.location)

    def __enter__(self) -> SessionStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""`JsonlStorage`: one Pi session file — its lifecycle, its lock, reading entries, appending.

Opening a v3 file is one pass that builds a `TreeIndex` plus the byte offset and length of every
line (`indexer`); entries are decoded from the file only when asked for, with a small cache.
Older v1/v2 files are read whole and migrated in memory (`legacy`).

Damage is never silent and never destroyed. A line that is not a valid entry is a diagnostic and
makes the session read-only. An incomplete *final* line (a write cut short by a crash) is a
warning; before our next append it is copied to a `.torn` sidecar and blanked in place, never cut
off (`repair` says why that is safe with another program appending at the same time). A write of
ours that fails half-way blanks exactly its own bytes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import mmap
import os
import threading
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ...model.entries import Entry, entry_from_dict
from ...model.errors import Diagnostic, SessionError
from ...model.header import SessionHeader
from ...model.ids import iso_now, session_id_or_new
from ..atomic import ChangedMeanwhile, atomic_rewrite, fsync_dir, private_temp, write_all
from ..base import CONTAINS, ESCAPED, SessionStorage
from ..gcpause import paused_gc
from ..index import TYPE_NAMES, TreeIndex
from ..lock import FileLock, flock_held_elsewhere, holder_named, retry_while_locked
from ..scan import (
    NOT_UTF8,
    LineError,
    copied,
    decode_all,
    decode_entry_dict,
    encode_line,
    feed_rows,
    index_line,
)
from . import cache, legacy, repair
from .files import open_regular, read_header, read_only_instead, reopen
from .indexer import MMAP_MIN, LineIndex, Progress, find_newline, index_range
from .tail import Tail, TailKind
from .verify import Halted, check_utf8, utf8_damage
from .writers import writer_elsewhere

# Decoded entries kept around. Small on purpose: decoding a line again costs microseconds, while
# every cached entry is a tree of Python objects the garbage collector walks in full collections.
CACHE_BYTES = 16 << 20
CACHE_ENTRIES = 128
QUIET_SECONDS = 0.25  # a torn tail is only blanked once the file has not changed for this long
PENDING_SECONDS = 2.0  # another writer's unfinished line is judged torn after this long unchanged
HELD_ASK_SECONDS = 1.0  # how long "another process has the file open for writing" is believed
REWRITE_PROBE = 4096  # bytes before the end hashed to notice a same-size rewrite
TRUNCATED = "the file was truncated by another program"


LOAD_MANY_MIN = 256  # fewer entries: one by one, through the entry cache
LOAD_MANY_LINES = 4096  # lines read at once by `load_many`
SCAN_BLOCK = 8 << 20  # bytes folded at a time by `lines_containing`
SCAN_NUMPY_MIN = 1 << 20  # from this size on the scan folds with numpy (not worth its import below)
# What the scan compares: every byte with its 0x20 bit set. An ASCII capital becomes its small
# letter, as `bytes.lower` makes it, so a line holding the needle in any case holds the folded
# needle; a few other bytes collide too (`[` and `{`), which only adds candidates, each checked
# with `bytes.lower`. One numpy pass does it at a tenth of `bytes.lower`'s cost.
_FOLD = bytes(b | 0x20 for b in range(256))


def _escape_finder(
    mapped: mmap.mmap, base: int, stop: int, starts: Sequence[int] | None = None
) -> Callable[[bytes, int], int]:
    """`bytes.find`'s shape over the file's bytes `base`..`stop` (positions relative to `base`),
    for a JSON escape that a search for ASCII letters ignoring case cannot see through, instead
    of a given needle: an ASCII character's (`\\u0000`…`\\u007f`) or that of a letter Python's
    case-insensitive matching takes for an ASCII one (`\\u0130` and `\\u0131` match i, `\\u017f`
    s, `\\u212a` k, in either case). `starts`, when given, are the only places (ascending,
    relative) where `\\u` may start (`_Folder.escape_starts`); else `find` looks for it. Either
    way the next bytes are then checked: one pass, several times faster than a regular
    expression over the block (and than a pass per escape)."""

    def escape_at(at: int) -> bool:
        digits = mapped[at + 2 : at + 6].lower()
        return (digits[:2] == b"00" and b"0" <= digits[2:3] <= b"7") or digits in _LOOKALIKE_ESCAPES

    def find(_needle: bytes, start: int) -> int:
        at = mapped.find(b"\\u", base + start, stop)
        while at >= 0 and not escape_at(at):
            at = mapped.find(b"\\u", at + 2, stop)
        return at - base if at >= 0 else -1

    def find_among(_needle: bytes, start: int) -> int:
        assert starts is not None
        for k in range(bisect_left(starts, start), len(starts)):
            at = base + starts[k]
            if mapped[at : at + 2] == b"\\u" and escape_at(at):
                return at - base
        return -1

    return find if starts is None else find_among


_LOOKALIKE_ESCAPES = (b"0130", b"0131", b"017f", b"212a")  # the digits after `\\u`, lowercased
# The same letters as UTF-8, each found by one of its bytes (a one-byte `find` is `memchr`, ten
# times faster than a longer needle's) and then the bytes around it checked: İ and ı by their
# lead byte, ſ too, the Kelvin sign by its last (its lead, E2, starts "—", "…" and "→").
_LOOKALIKE_BYTES = (
    (b"\xc4", (b"\xc4\xb0", b"\xc4\xb1"), 0),
    (b"\xc5", (b"\xc5\xbf",), 0),
    (b"\xaa", (b"\xe2\x84\xaa",), 2),
)


def _lookalike_finders(mapped: mmap.mmap, base: int, stop: int) -> list[Callable[[bytes, int], int]]:
    """Finders (`_escape_finder`'s shape) for the four letters it finds escaped, as UTF-8."""

    def by_byte(byte: bytes, letters: tuple[bytes, ...], back: int) -> Callable[[bytes, int], int]:
        """Where one of `letters` starts, found by `byte`, which is `back` bytes into each."""

        def find(_needle: bytes, start: int) -> int:
            at = mapped.find(byte, base + start + back, stop)
            while at >= 0 and not any(mapped[at - back : at - back + len(x)] == x for x in letters):
                at = mapped.find(byte, at + 1, stop)
            return at - back - base if at >= 0 else -1

        return find

    return [by_byte(byte, letters, back) for byte, letters, back in _LOOKALIKE_BYTES]


class _Folder:
    """Finders (`bytes.find`'s shape) in blocks of the mapped file with `_FOLD` applied, into
    one reused buffer: numpy for a big file, `bytes.translate` for a small one (numpy's import
    would cost more than the scan)."""

    def __init__(self, mapped: mmap.mmap, size: int) -> None:
        self._mapped = mapped
        self._buffer = bytearray()
        self._numpy = size >= SCAN_NUMPY_MIN
        self._size = 0

    def finder(self, base: int, stop: int) -> Callable[[bytes, int], int]:
        """A finder over the folded bytes `base`..`stop`, valid until the next call."""
        size = self._size = stop - base
        block: bytes | bytearray
        if self._numpy:
            import numpy as np

            if len(self._buffer) < size:
                self._buffer = bytearray(max(size, SCAN_BLOCK))
            block = self._buffer
            source = np.frombuffer(self._mapped, np.uint8, size, base)
            np.bitwise_or(source, 0x20, out=np.frombuffer(block, np.uint8, size))
            del source  # the map cannot close while an array points into it
        else:
            block = self._mapped[base:stop].translate(_FOLD)
        return lambda needle, start: block.find(needle, start, size)

    def escape_starts(self) -> list[int] | None:
        """Where `\\u` may start in the block just folded (a `|u` of the folded bytes, which a
        backslash's fold is): two numpy comparisons, where `find` for a needle of two bytes
        takes three times as long. None without numpy."""
        if not self._numpy:
            return None
        import numpy as np

        folded = np.frombuffer(self._buffer, np.uint8, self._size)
        pairs = folded[:-1] == ord("|")
        pairs &= folded[1:] == ord("u")
        return np.flatnonzero(pairs).tolist()


class JsonlStorage(SessionStorage):
    """Use `JsonlStorage.create` or `JsonlStorage.open`."""

    holds_resources = True

    def __init__(self, path: str, fd: int, lock: FileLock | None, durable: bool) -> None:
        super().__init__()
        self.path = path
        self.location = path
        self.files = (path,)
        self._fd: int | None = fd
        self._ino = os.fstat(fd).st_ino
        self._held_asked: tuple[float, int | None] = (
            -HELD_ASK_SECONDS,
            None,
        )  # `_writer_mid_line`'s last answer
        self._lock = lock
        self._per_write = False  # the lock is taken for each write only (`open(lock_at="write")`)
        self._write_fd: int | None = None  # opened for one write when `_fd` only reads (`begin_write`)
        self.durable = durable
        self._lines = LineIndex()
        self._legacy: list[Entry] | None = None  # v1/v2: migrated entries held in memory
        self._tail = Tail()
        self._header_end = 0
        self._torn: Diagnostic | None = None
        self._probe: tuple[int, int, bytes] = (0, 0, b"")  # size, mtime_ns, hash of the last bytes
        # Lines, not decoded entries: every read decodes its own copy, so what a caller changes
        # in an entry or a context it was given is never seen by the next one (SQLite's reads
        # behave the same).
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._cache_lock = threading.Lock()  # the browser decodes from worker threads too
        self._cache_index = True  # read and write the index cache (see `cache`) at open
        self.index_cached = 0  # bytes of the file the index cache covered at open (0: none)
        # lines spelling an ASCII letter as a JSON escape, and how many lines were looked at
        self._letter_escapes: tuple[set[int], int] = (set(), 0)
        self.repairs: list[str] = []  # sidecar files written by tail repairs
        self.leftovers_removed: list[str] = []
        self._verified = 0  # entries whose bytes finish_verification() has checked
        self._verify_later = False
        self._verify_lock = threading.Lock()
        self._halt = threading.Event()  # set by `close`: a check running stops (`finish_verification`)
        if lock is None:
            self.read_only_reason = "opened read-only"

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        cwd: str,
        session_id: str | None = None,
        parent_session: str | None = None,
        metadata: dict[str, Any] | None = None,
        durable: bool = False,
        timestamp: str | None = None,
    ) -> JsonlStorage:
        """A new v3 file with mode 0600. Refuses to overwrite an existing file. `timestamp`:
        the header's (default now), as Pi names the file after it.

        The header is written to a private temp file that is then hard-linked into place, so a
        crash leaves either no file or a file with its header, never an empty one; the temp
        file is locked from its creation, so the session appears already locked by us."""
        path = os.fspath(path)
        header = SessionHeader.new(
            session_id_or_new(session_id),
            timestamp or iso_now(),
            cwd,
            parent_session=parent_session,
            metadata=metadata,
        )
        line = encode_line(header.to_dict()) + b"\n"
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
            fd, tmp = private_temp(path, "new")
        except OSError as exc:
            raise SessionError("storage", f"cannot create the session file: {exc}", path=path) from None
        try:
            write_all(fd, line)
            if durable:
                os.fsync(fd)
            os.link(tmp, path)
            if durable:
                fsync_dir(path)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, FileExistsError):
                raise SessionError(
                    "invalid_argument", "a file already exists here; open it instead", path=path
                ) from None
            raise SessionError("storage", f"cannot create the session file: {exc}", path=path) from None
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        lock = FileLock()
        lock.acquire(fd, path)  # already ours since the temp file was made; now it is recorded
        storage = cls(path, fd, lock, durable)
        storage.header = header
        storage._header_end = len(line)
        storage._tail = Tail(TailKind.NONE, len(line), 0, 2)
        storage._probe = storage._take_probe(os.fstat(fd))
        storage.leftovers_removed = repair.remove_leftovers(path)
        return storage

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        durable: bool = False,
        progress: Progress | None = None,
        verify: str = "now",
        cache_index: bool = True,
        lock_at: str = "open",
    ) -> JsonlStorage:
        """Open an existing session. Writers take the single-writer lock first (`locked` if
        another process holds it); readers never lock. A file the user may not write opens
        read-only, saying why. `progress(done, total)` gets byte counts while a large file is
        indexed. `verify="later"` returns before the UTF-8 check of the message text
        (`finish_verification`), which a browser runs after its first paint; writes always wait
        for it. `lock_at="write"`: refused the same way when another process holds the lock now,
        which is then taken for each write only (`begin_write`, `end_write`), as a database's."""
        path = os.fspath(path)
        reason = None
        try:
            if read_only:
                fd = open_regular(path, os.O_RDONLY)
            else:
                try:
                    fd = open_regular(path, os.O_RDWR | os.O_APPEND)
                    if not os.fstat(fd).st_mode & 0o222:
                        # No write bit for anyone, opened all the same: root's privilege, which
                        # wrote to a file made read-only on purpose without a word (QA). As
                        # vim does, the mode is taken as the owner's wish.
                        os.close(fd)
                        fd = open_regular(path, os.O_RDONLY)
                        reason = (
                            "the file's permissions make it read-only (chmod u+w allows writing),"
                            " so it is open read-only"
                        )
                except OSError as exc:
                    if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                        raise
                    fd = open_regular(path, os.O_RDONLY)
                    why = (
                        "on a read-only file system"  # "(Read-only file system)" said it twice (QA)
                        if exc.errno == errno.EROFS
                        else f"not writable by you ({exc.strerror})"
                    )
                    reason = f"the file is {why}, so it is open read-only"
        except FileNotFoundError:
            raise SessionError("not_found", "no such session file", path=path) from None
        except IsADirectoryError:
            raise SessionError("invalid_argument", "is a directory, not a session file", path=path) from None
        except OSError as exc:
            raise SessionError(
                "storage", f"cannot read the session file: {exc.strerror}", path=path
            ) from None
        lock = None
        try:
            if not read_only and reason is None:
                lock = FileLock()
                # with "write", taken only to learn that nobody holds it, or who does
                retry_while_locked(lambda: lock.acquire(fd, path))
                if lock_at == "write":
                    lock.release()
                    fd = read_only_instead(fd)
            storage = cls(path, fd, lock, durable)
            storage._per_write = lock is not None and lock_at == "write"
        except BaseException:
            os.close(fd)
            raise
        storage._verify_later = verify == "later"
        storage._cache_index = cache_index
        try:
            storage._open_scan(progress)
        except OSError as exc:
            storage.close()
            raise SessionError("storage", f"cannot read the session file: {exc}", path=path) from None
        except BaseException:
            storage.close()
            raise
        if reason is not None:  # after the scan: over an old format's, which says to upgrade
            storage.read_only_reason = reason
        return storage

    def _open_scan(self, progress: Progress | None) -> None:
        """Read the header, then index the lines (from the index cache and what follows it,
        when there is a trustworthy cache: see `cache`)."""
        fd = self._fd
        assert fd is not None
        self.header, header_end, header_line = read_header(fd, self.path)
        self._header_end = header_end
        if self.header.version < 3:
            old = legacy.read_legacy(fd, self.header, header_end, header_line)
            self._legacy, self._lines = old.entries, old.lines
            self._tail = Tail(TailKind.NONE, old.end, 0, old.next_line)
            self.read_only_reason = legacy.read_only_reason(self.header, self.path)
        else:
            self._tail = Tail(TailKind.NONE, header_end, 0, header_line + 1)
            caching = self._cache_index and cache.enabled()
            cached = cache.load(self.path, fd, header_end) if caching else None
            if cached is not None:  # reopened: scan only what was appended since
                self._lines, end, next_line = cached
                self._tail = Tail(TailKind.NONE, end, 0, next_line)
                self.index_cached = end
            start = self._tail.offset
            self._scan(at_open=True, progress=progress)
            self._drop_superseded()
            tail = self._tail
            fresh = tail.offset - start  # bytes indexed by this scan
            if (
                caching
                and tail.kind is TailKind.NONE
                and tail.offset >= cache.MIN_BYTES
                and fresh >= cache.MIN_BYTES
            ):
                cache.save(self.path, fd, self._lines, tail.offset, tail.line, header_end)
        self._lines.index.finish_load(self.line_number)
        if self._lock is not None:  # each leftover is removed only once its own lock is free
            self.leftovers_removed = repair.remove_leftovers(self.path)
        self._mark_damaged()
        self._probe = self._take_probe(os.fstat(fd))
        if not self._verify_later:
            self.finish_verification()

    # --- scanning -----------------------------------------------------------------------------

    def _drop_superseded(self) -> None:
        """Index the file again without the earlier lines of an id used twice. Pi reads the
        later one: its `byId` map is filled in file order and a `parentId` is looked up in it
        when a path is walked (`SessionManager._buildIndex`, `buildSessionContext` in Pi's
        `core/session-manager.js`). So the entries written under the earlier hang under the
        later, as here once the later line adopts them, and the tree, the context and `check`
        all speak of one entry. Damaged files only: Pi never writes an id twice."""
        fd = self._fd
        old = self._lines
        index = old.index
        if fd is None or len(index.pos) == len(index.ids):
            return
        fresh = LineIndex()
        fresh.diagnostics = old.diagnostics
        for i, eid in enumerate(index.ids):
            offset, length, line = old.offsets[i], old.lengths[i], old.lines[i]
            later = index.pos[eid]
            if later != i:
                fresh.diagnostics.append(
                    Diagnostic(
                        "error",
                        "duplicate_id",
                        f"entry id {eid!r} is used again on line {old.lines[later]}, whose entry is"
                        " read (as Pi reads it); this line is not",
                        line,
                        eid,
                    )
                )
                continue
            raw = os.pread(fd, length, offset)
            rows = decode_all([raw])  # as the first pass read it (its UTF-8 is checked apart)
            if rows is not None:
                feed_rows(fresh.index, rows, line)
            else:
                index_line(fresh.index, raw, line)
            fresh.offsets.append(offset)
            fresh.lengths.append(length)
            fresh.lines.append(line)
        fresh.diagnostics.sort(key=lambda d: d.line or 0)
        self._lines = fresh

    def _scan(self, *, at_open: bool, progress: Progress | None = None) -> int:
        """Index complete lines from the end of the last complete line to EOF, then judge what
        follows the last newline (`tail`)."""
        fd = self._fd
        assert fd is not None
        size = os.fstat(fd).st_size
        before = len(self._lines)
        start = self._tail.offset
        mapped = at_open and size - start >= MMAP_MIN
        start, line_no = index_range(
            self._lines, fd, start, size, self._tail.line, mapped=mapped, progress=progress
        )
        carry = os.pread(fd, size - start, start) if start < size else b""
        tail = Tail(TailKind.NONE, start, len(carry), line_no)
        if carry and not carry.strip():
            tail.kind = TailKind.BLANK
        elif carry and not at_open:
            tail.kind = TailKind.PENDING  # its writer may still be writing it
        elif carry:
            try:
                index_line(self._lines.index, carry, line_no)
            except LineError as exc:
                tail.kind = TailKind.TORN
                said = (
                    "probably a write cut short by a crash. It is left out; before the next write"
                    " it is copied to a .torn file next to the session and blanked"
                )
                writer = self._writer_mid_line()
                if writer is not None:  # `check` gave the crash's advice while it wrote (QA)
                    said = (
                        f"{holder_named(writer)} has the file open for writing and may still end"
                        " it. It is left out, and writes wait for it"
                    )
                self._torn = Diagnostic(
                    "warning",
                    "torn_tail",
                    f"line {line_no} is incomplete ({len(carry)} bytes, {exc.reason}): {said}",
                    line_no,
                )
            else:
                self._lines.offsets.append(start)
                self._lines.lengths.append(len(carry))
                self._lines.lines.append(line_no)
                tail.kind = TailKind.ENTRY
        self._tail = tail
        return len(self._lines) - before

    def refresh(self) -> int:
        """Index lines other processes appended since the last look (live follow). Raises
        `SessionError` when the file was deleted, replaced, truncated or rewritten in place."""
        fd = self._fd
        if fd is None:
            return 0
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            gone = "the session file was deleted"
        else:
            gone = (
                "" if st.st_ino == self._ino else "the session file was replaced on disk; reopen it to see it"
            )
        if gone:
            self.mark_read_only(gone)  # nothing written there would be kept
            raise SessionError("storage", gone, path=self.path)
        if self._legacy is not None:
            return 0
        known = self._tail.end
        if st.st_size < known:
            self._damaged("truncated", TRUNCATED)
        if st.st_size == known:
            if st.st_mtime_ns != self._probe[1]:
                probe = self._take_probe(st)
                if probe[2] != self._probe[2]:
                    self._damaged(
                        "rewritten",
                        "the file was rewritten in place by another program (same size, other bytes)",
                    )
                self._probe = probe  # touched, not changed
            if self._tail.kind is not TailKind.PENDING:
                return 0
        return self._catch_up()  # with an unfinished line, to judge it once the file is quiet

    def _catch_up(self) -> int:
        """Index what was appended after the known end (by another writer, or by us)."""
        fd = self._fd
        assert fd is not None
        before = len(self._lines)
        tail = self._tail
        size = os.fstat(fd).st_size
        if tail.kind is TailKind.ENTRY:
            # a valid last line without "\n": a proper writer ends it before adding its own
            if os.pread(fd, 1, tail.end) == b"\n":
                self._tail = Tail(TailKind.NONE, tail.end + 1, 0, tail.line + 1)
            else:
                self._diagnostics.append(
                    Diagnostic(
                        "error",
                        "glued_line",
                        f"line {tail.line} was extended by another writer without a line break,"
                        " so two entries share one line",
                        tail.line,
                    )
                )
                skip = find_newline(fd, tail.end, size)
                if skip < 0:
                    self._mark_damaged()
                    return 0
                self._tail = Tail(TailKind.NONE, skip + 1, 0, tail.line + 1)
        elif tail.kind is TailKind.TORN and not self._continue_torn(size):
            return 0
        index = self._lines.index
        known, reused, said = len(index.ids), len(index.ids) - len(index.pos), len(index.diagnostics)
        self._scan(at_open=False)
        if len(index.ids) - len(index.pos) > reused:
            # said once, below, not also as the index words it (two problems for one, QA)
            index.diagnostics[said:] = [d for d in index.diagnostics[said:] if d.code != "duplicate_id"]
            # Read as Pi reads it, the later entry takes the earlier's place and children
            # (`_drop_superseded`), which the tree drawn so far cannot show: a reopen does.
            seen, eid = set(index.ids[:known]), "?"
            for eid in index.ids[known:]:
                if eid in seen:
                    break
                seen.add(eid)
            self._damaged(
                "duplicate_id",
                f"another writer used entry id {eid!r} again; reopen the session to read it as Pi does",
            )
        if self._tail.kind is TailKind.PENDING:
            self._judge_pending()
        if not self._verify_later:
            self.finish_verification()
        self._mark_damaged()
        self._probe = self._take_probe(os.fstat(fd))
        return len(self._lines) - before

    def _continue_torn(self, size: int) -> bool:
        """Another writer appended after a torn fragment found at open. If the fragment plus
        what followed now makes a valid line, it was a slow write, not a torn one; if what
        followed is a whole line of its own, `LineIndex.add_one` recovers that entry; blanks
        are the fragment set aside by another sessiontree writer (`_set_aside_torn_tail`). False
        while the line is still unfinished."""
        fd = self._fd
        assert fd is not None
        tail = self._tail
        nl = find_newline(fd, tail.offset, size)
        if nl < 0:
            return False
        self._torn = None
        line = os.pread(fd, nl - tail.offset, tail.offset)
        if line.strip():
            self._lines.add_one(line, tail.offset, tail.line)
        self._tail = Tail(TailKind.NONE, nl + 1, 0, tail.line + 1)
        return True

    def _take_probe(self, st: os.stat_result) -> tuple[int, int, bytes]:
        fd = self._fd
        assert fd is not None
        end = self._tail.end
        start = max(self._header_end, end - REWRITE_PROBE)
        digest = hashlib.blake2b(os.pread(fd, end - start, start), digest_size=16).digest()
        return (st.st_size, st.st_mtime_ns, digest)

    def _damaged(self, code: str, message: str) -> None:
        self._diagnostics.append(Diagnostic("error", code, message))
        self._mark_damaged()
        raise SessionError("storage", message, path=self.path)

    # --- the byte check -----------------------------------------------------------------------

    def finish_verification(self, *, elsewhere: bool = False) -> None:
        """Check the UTF-8 of every indexed line not checked yet (see `verify`). A line with
        invalid bytes is damage: a diagnostic, and the session becomes read-only. Idempotent and
        thread-safe; writes call it first, so they never happen before a file is fully checked.
        `elsewhere`: in a helper process (a browser's keys keep the interpreter lock)."""
        with self._verify_lock:
            fd = self._fd
            done, total = self._verified, len(self._lines.lengths)
            if fd is None or done >= total or self._legacy is not None:
                return
            lines = self._lines
            try:
                found = check_utf8(
                    fd,
                    lines.offsets,
                    lines.lengths,
                    lines.lines,
                    lines.index.ids,
                    done,
                    total,
                    elsewhere=elsewhere,
                    halt=self._halt,
                )
            except Halted:  # closed meanwhile: nothing more is read or written through it
                return
            said = {d.line for d in self._diagnostics if d.code == "invalid_utf8"}  # by `_decode`
            self._diagnostics += [d for d in found if d.line not in said]
            self._verified = total
            self._mark_damaged()

    @property
    def unchecked(self) -> int:
        if self._fd is None or self._legacy is not None:
            return 0
        return max(0, len(self._lines.lengths) - self._verified)

    # --- reading ------------------------------------------------------------------------------

    @property
    def index(self) -> TreeIndex:
        return self._lines.index

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = self._diagnostics + self._lines.diagnostics + self._lines.index.diagnostics
        if self._torn is not None:
            out.append(self._torn)
        return sorted(out, key=lambda d: d.line or 0)

    def torn_tail(self) -> bytes | None:
        """The bytes of an incomplete final line found at open (set aside before the next
        append), or None."""
        if self._tail.kind is not TailKind.TORN or self._fd is None:
            return None
        return os.pread(self._fd, self._tail.length, self._tail.offset)

    def line_number(self, entry_id: str) -> int | None:
        i = self._lines.index.pos.get(entry_id)
        return None if i is None else self.line_at(i)

    def line_at(self, i: int) -> int | None:
        """The physical line of the entry at position `i` (of two entries of one id, the id
        names the later: this is how the earlier is found)."""
        return self._lines.lines[i] if 0 <= i < len(self._lines.lines) else None

    def lines_containing(
        self,
        needle: bytes,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        progress: Callable[[int, int], None] | None = None,
    ) -> bytearray | None:
        """A scan of the mapped file in blocks of whole lines, each folded (`_FOLD`) and searched
        at C speed (`bytes.find`), a line found then checked with `bytes.lower`: under a second
        per gigabyte, where decoding every entry takes tens of seconds. Lines with letter
        escapes or letters that match an ASCII one ignoring case (see `_escape_finder`) are
        found on the first scan and remembered, so later scans skip those passes."""
        fd = self._fd
        n = len(self._lines)
        if self._legacy is not None or fd is None:
            return None
        found = bytearray(n)
        if not n:
            return found
        offsets, lengths = self._lines.offsets, self._lines.lengths
        end = offsets[n - 1] + lengths[n - 1]
        escapes, known = self._letter_escapes
        folded_needle = needle.translate(_FOLD)
        with mmap.mmap(fd, end, access=mmap.ACCESS_READ) as mapped:
            folder = _Folder(mapped, end)
            first = 0
            while first < n:
                if cancelled():
                    return None
                # whole lines only, so nothing is split between two blocks
                last = max(bisect_right(offsets, offsets[first] + SCAN_BLOCK, first, n) - 1, first)
                base = offsets[first]
                stop = offsets[last] + lengths[last]
                finders: list[tuple[Callable[[bytes, int], int], bool]] = [(folder.finder(base, stop), False)]
                if last >= known:  # escapes are looked for once per line, then remembered
                    finders.append((_escape_finder(mapped, base, stop, folder.escape_starts()), True))
                    finders += [(find, True) for find in _lookalike_finders(mapped, base, stop)]
                for search, escape in finders:
                    i = first
                    at = search(folded_needle, 0)
                    while at >= 0:
                        i = bisect_right(offsets, base + at, i, last + 1) - 1
                        line_end = offsets[i] + lengths[i] - base
                        if at < line_end:  # not in a blank or damaged stretch between lines
                            if escape:
                                escapes.add(i)
                            elif needle in mapped[offsets[i] : offsets[i] + lengths[i]].lower():
                                found[i] = CONTAINS  # not one of the folding's collisions
                        at = search(folded_needle, max(line_end, at + 1))  # skip the rest of a candidate line
                if progress is not None:
                    progress(stop, end)
                first = last + 1
        self._letter_escapes = (escapes, n)
        for i in escapes:
            found[i] |= ESCAPED
        return found

    def raw_line(self, i: int) -> bytes:
        """The exact bytes of entry `i`'s line (v3 files)."""
        if self._legacy is not None:
            return encode_line(self._legacy[i].to_dict())
        fd = self._fd
        if fd is None:
            raise SessionError("storage", "the session is closed", path=self.path)
        return os.pread(fd, self._lines.lengths[i], self._lines.offsets[i])

    def _load(self, i: int) -> Entry:
        if self._legacy is not None:
            self.require_open()
            return copied(self._legacy[i])
        with self._cache_lock:
            raw = self._cache.get(i)
            if raw is not None:
                self._cache.move_to_end(i)
        if raw is None:
            raw = self.raw_line(i)
            self._remember(i, raw)
        try:
            data = self._decode(i, raw)
        except LineError as exc:
            raise self._late_damage(i, exc.reason) from None
        index = self._lines.index
        if data["id"] != index.ids[i] or data["type"] != index.type_name(i):
            raise self._late_damage(i, "does not say what it said when the file was indexed")
        return entry_from_dict(data)

    def load_many(self, positions: Sequence[int]) -> list[Entry]:
        """One read per stretch of consecutive lines, decoded line by line with the checks of
        `_load`, without passing through the entry cache (a long path would only flush it).
        The cyclic garbage collector is paused meanwhile: a million decoded entries otherwise
        trigger its full passes over the growing heap again and again (twice the time)."""
        if self._legacy is not None or len(positions) < LOAD_MANY_MIN:
            return [self._load(i) for i in positions]
        fd = self._fd
        if fd is None:
            raise SessionError("storage", "the session is closed", path=self.path)
        offsets, lengths, index = self._lines.offsets, self._lines.lengths, self._lines.index
        ids, kind, type_name = index.ids, index.kind, index.type_name
        out: list[Entry] = []
        append = out.append
        with paused_gc():
            k, n = 0, len(positions)
            while k < n:
                first = end = k  # the stretch positions[k..end] of lines back to back in the file
                while (
                    end + 1 < n
                    and end - first < LOAD_MANY_LINES
                    and positions[end + 1] == positions[end] + 1
                    and offsets[positions[end + 1]] >= offsets[positions[end]] + lengths[positions[end]]
                ):
                    end += 1
                base = offsets[positions[first]]
                last = positions[end]
                # Views, not copies, of each line; names bound outside the loop: a deep context
                # decodes every line of its path here, and this loop's own work was a third of it.
                block = memoryview(os.pread(fd, offsets[last] + lengths[last] - base, base))
                for i in positions[first : end + 1]:
                    at = offsets[i] - base
                    try:
                        data = self._decode(i, block[at : at + lengths[i]])
                    except LineError as exc:
                        raise self._late_damage(i, exc.reason) from None
                    code = kind[i]
                    if data["id"] != ids[i] or data["type"] != (TYPE_NAMES[code] if code else type_name(i)):
                        raise self._late_damage(i, "does not say what it said when the file was indexed")
                    append(entry_from_dict(data))
                k = end + 1
        return out

    def _decode(self, i: int, raw: bytes | memoryview) -> dict[str, Any]:
        """Entry `i`'s line decoded in full. Bytes that are not UTF-8 are read as U+FFFD, as Pi
        reads its files (Node's `readFileSync(path, "utf8")`), so the entry's text is what Pi
        sends its model; the line is damage all the same (`verify`), said once."""
        try:
            return decode_entry_dict(raw)
        except LineError as exc:
            if exc.reason != NOT_UTF8:
                raise
        data = decode_entry_dict(bytes(raw).decode("utf-8", "replace").encode())
        line = self._lines.lines[i]
        with self._verify_lock:
            if not any(d.line == line and d.code == "invalid_utf8" for d in self._diagnostics):
                self._diagnostics.append(utf8_damage(line, self._lines.index.ids[i]))
        self._mark_damaged()
        return data

    def _late_damage(self, i: int, reason: str) -> SessionError:
        """A line that passed indexing but fails a full decode (bytes changed on disk since, a
        value nested too deeply for the full decoder). Reported like any damaged line
        (diagnostic, read-only from now on: no write follows a known problem); the caller gets a
        SessionError."""
        line = self._lines.lines[i]
        message = f"line {line} {reason}"
        changed = self._changed_under_us(i)
        if changed:  # the line's own complaint (not JSON) would send the reader to the wrong cause
            self._mark_damaged()
            said = f"line {line} cannot be read: {changed}"
            return SessionError("storage", said, path=self.path, line=line)
        # once a line: the byte check may have said it already ("not valid UTF-8 text")
        codes = ("unreadable_line", "invalid_utf8")
        if not any(d.line == line and d.code in codes for d in self._diagnostics):
            self._diagnostics.append(
                Diagnostic("error", "unreadable_line", message, line, self._lines.index.ids[i])
            )
            self._mark_damaged()
        return SessionError("invalid_entry", message, path=self.path, line=line)

    def _changed_under_us(self, i: int) -> str:
        """Why line `i` may no longer be what was indexed: the file truncated (seen now or by a
        refresh) or rewritten in place since the open; "" when nothing says so."""
        fd = self._fd
        if fd is not None and os.fstat(fd).st_size < self._lines.offsets[i] + self._lines.lengths[i]:
            if not any(d.code == "truncated" for d in self._diagnostics):
                self._diagnostics.append(Diagnostic("error", "truncated", TRUNCATED))
            return f"{TRUNCATED} after it was opened; open it again"
        for d in self._diagnostics:
            if d.code in ("truncated", "rewritten"):
                return f"{d.message} after it was opened; open it again"
        return ""

    def _remember(self, i: int, raw: bytes) -> None:
        with self._cache_lock:
            previous = self._cache.pop(i, None)
            if previous is not None:
                self._cache_bytes -= len(previous)
            self._cache[i] = raw
            self._cache_bytes += len(raw)
            while self._cache and (self._cache_bytes > CACHE_BYTES or len(self._cache) > CACHE_ENTRIES):
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= len(old)

    # --- writing ------------------------------------------------------------------------------

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        """Append the lines, then index them (with whatever another writer appended before them:
        the one scan of the write). A write that fails part-way blanks its own bytes."""
        fd = self._fd if self._write_fd is None else self._write_fd
        assert fd is not None
        if self._tail.kind is TailKind.TORN and self._writer_mid_line() is None:
            self._set_aside_torn_tail()
        # still unfinished: being written (pending, or a torn line whose writer holds the file
        # open, or one that grew while it was being set aside and is unfinished still)
        if self._tail.kind in (TailKind.PENDING, TailKind.TORN):
            writer = self._writer_mid_line()
            who = f" ({holder_named(writer)} has it open for writing)" if writer is not None else ""
            raise SessionError(
                "storage",
                f"another program is writing this file right now{who} (its last line is unfinished);"
                " nothing was written, try again",
                path=self.path,
            )
        payload = b"\n".join(encoded) + b"\n"
        # After a last line without its line break (an entry, blanks, the header itself), ours
        # starts with one: written straight after an unterminated header, the first entry made
        # the header line unreadable, and the file no longer opened (QA).
        size = os.fstat(fd).st_size
        unterminated = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        if self._tail.kind in (TailKind.ENTRY, TailKind.BLANK) or unterminated:
            payload = b"\n" + payload
        regions: list[tuple[int, int]] = []  # where our bytes landed: (offset, length)
        try:
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                end = os.lseek(fd, 0, os.SEEK_CUR)  # with O_APPEND: just after what was written
                regions.append((end - n, n))
                view = view[n:]
            if any(a + n != b for (a, n), (b, _) in itertools.pairwise(regions)):
                raise OSError(errno.EIO, "another program wrote into the middle of this write")
            if self.durable:
                os.fsync(fd)
        except OSError as exc:
            self._undo(regions, exc)
        first = len(self._lines)
        self._catch_up()
        for k, entry in enumerate(entries):
            i = self._lines.index.pos.get(entry.id, -1)
            if i >= first:
                self._remember(i, encoded[k])

    def _judge_pending(self) -> None:
        """Judge an unfinished last line found while following as if found at open (a torn
        line, or an entry without its newline) once the file has been quiet for
        `PENDING_SECONDS`: Pi writes a line in one call, so a line unfinished that long was cut
        short by a crash, and our appends would otherwise wait for it until the session was
        opened again. Called by `_catch_up`, which every write and every look of a follower
        makes first."""
        fd = self._fd
        assert fd is not None
        st = os.fstat(fd)
        if (
            st.st_size == self._tail.end
            and time.time() - st.st_mtime >= PENDING_SECONDS
            and self._writer_mid_line() is None
        ):
            self._scan(at_open=True)

    def _undo(self, regions: list[tuple[int, int]], exc: OSError) -> None:
        """A write failed after `regions` of it reached the file: blank exactly those bytes (not a
        truncate, which would also cut whatever another program appended after them)."""
        if regions:
            try:
                repair.blank_regions(self.path, self._ino, regions, durable=self.durable)
            except (OSError, SessionError) as failure:
                message = (
                    f"a write failed ({exc.strerror or exc}) and the {sum(n for _, n in regions)} bytes it"
                    f" left at offset {regions[0][0]} could not be blanked ({failure})"
                )
                self._diagnostics.append(Diagnostic("error", "partial_write", message))
                self._mark_damaged()
                raise SessionError("storage", message, path=self.path) from None
        raise SessionError(
            "storage", f"write failed, nothing was added: {exc.strerror or exc}", path=self.path
        ) from None

    def _writer_mid_line(self) -> int | None:
        """The pid of another process that holds the file open for writing (`writers`), so
        that an unfinished last line may still be ended: it is left as it is, and our writes
        wait, as for a pending line. Asked again at most once a second: a follower looks more
        often, and the answer walks every process's descriptors."""
        fd = self._fd
        if fd is None:
            return None
        now = time.monotonic()
        asked, pid = self._held_asked
        if now - asked >= HELD_ASK_SECONDS:
            st = os.fstat(fd)
            pid = writer_elsewhere(st.st_dev, st.st_ino)
            self._held_asked = (now, pid)
        return pid

    def _set_aside_torn_tail(self) -> None:
        """Copy the torn final fragment to a sidecar (exact bytes, fsynced), then blank it in
        place. Only once the file has been quiet for a moment: a writer in the middle of a
        `write()` call changes the file's mtime when it starts, so a file quiet for a quarter of a
        second has no write in progress that could still finish the fragment (copying even a
        multi-megabyte line into the page cache takes milliseconds)."""
        fd = self._fd
        assert fd is not None
        for _ in range(5):
            st = os.fstat(fd)
            if st.st_size != self._tail.end:
                self._catch_up()  # it grew: the fragment was finished or continued
                return
            quiet = time.time() - st.st_mtime
            if quiet >= QUIET_SECONDS:
                break
            time.sleep(QUIET_SECONDS - quiet + 0.01)
        else:
            raise SessionError(
                "storage", "the file keeps changing; nothing was written, try again", path=self.path
            )
        tail = self._tail
        fragment = os.pread(fd, tail.length, tail.offset)
        try:
            sidecar = repair.keep_copy(self.path, fragment)
            if os.pread(fd, tail.length + 1, tail.offset) != fragment:
                raise SessionError(
                    "storage", "the file changed while repairing its last line", path=self.path
                )
            repair.blank_regions(self.path, self._ino, [(tail.offset, tail.length)], durable=True)
        except OSError as exc:
            raise SessionError(
                "storage",
                f"could not set the incomplete last line aside ({exc.strerror or exc}); nothing was written",
                path=self.path,
            ) from None
        self.repairs.append(sidecar)
        self._diagnostics.append(
            Diagnostic(
                "info",
                "tail_set_aside",
                f"the incomplete last line ({len(fragment)} bytes) was copied to {sidecar} and blanked",
                tail.line,
            )
        )
        self._torn = None
        self._tail = Tail(TailKind.NONE, tail.end, 0, tail.line + 1)

    # --- upgrade ------------------------------------------------------------------------------

    @classmethod
    def upgrade(cls, path: str | os.PathLike[str], notes: list[str] | None = None) -> str | None:
        """Rewrite a v1/v2 file as v3, atomically, keeping the original as `<file>.bak`; through
        a symlink, the file it points to is upgraded and the link kept.

        Returns the backup path, or None when the file already is v3. Refuses damaged files
        (nothing may be lost) and files another writer holds. An incomplete last line (a write
        cut short) is left out of the new file, its bytes kept in the backup, and `notes` gets a
        line saying so: refused, such a file could never be written again, as an old format is
        read-only and the line is set aside only by a write (QA).
        """
        storage = cls.open(path, read_only=False)
        try:
            if storage._lock is None:
                raise SessionError("read_only", storage.read_only_reason or "read-only", path=storage.path)
            if storage.header.version >= 3:
                return None
            problems = [d for d in storage.diagnostics if d.severity == "error"]
            if problems:
                raise SessionError(
                    "invalid_session",
                    f"cannot upgrade a damaged file ({problems[0].said()}); nothing was changed",
                    path=storage.path,
                )
            try:
                chunks = [encode_line(storage.header.upgraded().to_dict()) + b"\n"]
                chunks.extend(encode_line(e.to_dict()) + b"\n" for e in storage.iter_entries())
            except (TypeError, ValueError) as exc:
                raise SessionError(
                    "invalid_session", f"an entry cannot be written back as JSON ({exc}); nothing changed"
                ) from None
            try:
                # the bytes read (a line appended before the probe was taken is past them)
                read = (storage._tail.end, storage._probe[1])
                backup = atomic_rewrite(storage.path, chunks, unchanged_since=read)
                torn = next((d for d in storage.diagnostics if d.code == "torn_tail"), None)
                if torn is not None and notes is not None:
                    notes.append(
                        f"the incomplete last line (line {torn.line}) was left out; {backup} keeps its bytes"
                    )
                return backup
            except ChangedMeanwhile:
                raise SessionError(
                    "storage",
                    "another program wrote to the file while it was being upgraded; nothing was"
                    " changed (upgrade it when the session is not in use)",
                    path=storage.path,
                ) from None
            except OSError as exc:  # a full disk, a directory nobody may write to
                raise SessionError(
                    "storage",
                    f"cannot write the upgraded file: {exc.strerror or exc}; nothing was changed",
                    path=storage.path,
                ) from None
        finally:
            storage.close()

    def writer_elsewhere(self) -> bool:
        if self._lock is not None and self._lock.held:
            return False  # the writer is this storage
        fd = self._fd
        return True if fd is None else flock_held_elsewhere(fd)

    def begin_write(self) -> None:
        lock, fd = self._lock, self._fd
        if lock is None or lock.held or self.read_only or fd is None:
            return  # read-only, closed, or the writer since the open
        wfd = fd
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:  # see `read_only_instead`
            try:
                wfd = reopen(fd, os.O_RDWR | os.O_APPEND)
            except OSError as exc:
                self.mark_read_only(
                    f"the file can no longer be opened for writing ({exc.strerror or exc}), so it is"
                    " read-only from now on"
                )
                raise SessionError(
                    "read_only", f"nothing was written: {self.read_only_reason}", path=self.path
                ) from None
        try:
            retry_while_locked(lambda: lock.acquire(wfd, self.path))
        except SessionError as exc:
            if wfd != fd:
                os.close(wfd)
            if exc.code != "locked":
                raise
            self._lock = None
            raise self.refused_at_write(exc) from None
        if wfd != fd:
            self._write_fd = wfd

    def end_write(self) -> None:
        lock = self._lock
        if self._per_write and lock is not None and lock.held:
            lock.release()
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def close(self) -> None:
        super().close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        # A check still running stops within a tenth of a second (its helper killed), before
        # the descriptor it reads goes: a browser quitting waited for its end (1.8 s at 1M).
        self._halt.set()
        with self._verify_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        self._cache.clear()

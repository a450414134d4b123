"""JSONL files as Pi writes them: one header line, then one entry per line, append-only.

Opening a v3 file is one pass that builds a `TreeIndex` plus the byte offset and length of every
line; entries are decoded from the file only when asked for (`load_entry`), with a bounded cache.
v1/v2 files (Pi's older coding agent) are small legacy files: they are read whole, migrated in
memory and opened read-only until `upgrade` rewrites them as v3 (atomically, keeping a backup).

Damage handling (Decision 4): a broken *final* line without a newline is a torn write — reported
as a warning and, before our next append, set aside byte-for-byte in a `<file>.torn` sidecar and
cut off (an in-place truncate: the file keeps its inode, so the writer lock and any process
appending to it stay valid). Any other damage is a diagnostic and makes the session read-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from operator import add, sub
from typing import Any

import msgspec
import orjson

from ..model.entries import Entry, entry_from_dict, validate_entry
from ..model.errors import Diagnostic, SessionError
from ..model.header import SessionHeader
from ..model.ids import iso_now, new_entry_id, new_session_id
from .atomic import atomic_rewrite, free_name, fsync_dir
from .base import SessionStorage
from .index import TreeIndex
from .lock import WriterLock
from .migrate import migrate_entries
from .scan import (
    LineError,
    RowType,
    add_dict,
    decode_all,
    decode_entry_dict,
    feed_rows,
    full_decode,
    index_line,
    utf8_ok,
)

CHUNK = 8 << 20
MMAP_MIN = 4 << 20  # files (or parts) at least this big are indexed through mmap at open
PARALLEL_MIN = 48 << 20  # ...and from this size on, with a forked helper for the second half
WINDOW = 64 << 20  # bytes mapped at a time
BATCH_LINES = 8192
# Decoded entries kept around. Small on purpose: decoding a line again costs microseconds, while
# every cached entry is a tree of Python objects the garbage collector walks in full collections.
CACHE_BYTES = 16 << 20
CACHE_ENTRIES = 128

Progress = Callable[[int, int], None]


class JsonlStorage(SessionStorage):
    """Use `JsonlStorage.create` or `JsonlStorage.open`."""

    def __init__(self, path: str, fd: int, lock: WriterLock | None, durable: bool) -> None:
        super().__init__()
        self.path = path
        self.location = path
        self._fd: int | None = fd
        self._ino = os.fstat(fd).st_ino
        self._lock = lock
        self.durable = durable
        self._index = TreeIndex()
        self._offsets = array("q")
        self._lengths = array("q")
        self._lines = array("l")
        self._eager: list[Entry] | None = None  # v1/v2: migrated entries held in memory
        self._end = 0  # offset after the last complete, consumed line
        self._tail_len = 0  # unterminated bytes after _end at the last scan, which are:
        self._tail_state: str | None = None  # "entry" (valid, indexed), "blank", "torn", "pending"
        self._next_line = 1
        self._torn: Diagnostic | None = None
        self._cache: OrderedDict[int, tuple[Entry, int]] = OrderedDict()
        self._cache_bytes = 0
        self._cache_lock = threading.Lock()  # the browser decodes from worker threads too
        self.repairs: list[str] = []  # sidecar files written by tail repairs
        self._verified = 0  # entries whose bytes finish_verification() has checked
        self._verify_later = False
        self._verify_lock = threading.Lock()
        self.version = 3
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
    ) -> JsonlStorage:
        """A new v3 file with mode 0600. Refuses to overwrite an existing file."""
        path = os.fspath(path)
        header = SessionHeader.new(
            session_id or new_session_id(),
            iso_now(),
            cwd,
            parent_session=parent_session,
            metadata=metadata,
        )
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        lock = WriterLock(path + ".lock")
        lock.acquire(path)
        # The header is written to a temp file that is then hard-linked into place: a crash at
        # any point leaves either no file or a file with its header, never an empty one.
        tmp = os.path.join(directory, f".{os.path.basename(path)}.new-{os.getpid()}")
        line = orjson.dumps(header.to_dict()) + b"\n"
        fd = -1
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            _write_all(fd, line)
            if durable:
                os.fsync(fd)
            os.link(tmp, path)
            if durable:
                fsync_dir(path)
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            lock.release()
            if isinstance(exc, FileExistsError):
                raise SessionError(
                    "invalid_argument", "a file already exists here; open it instead", path=path
                ) from None
            raise SessionError("storage", f"cannot create the session file: {exc}", path=path) from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        storage = cls(path, fd, lock, durable)
        storage.header = header
        storage._end = len(line)
        storage._next_line = 2
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
    ) -> JsonlStorage:
        """Open an existing session. Writers take the single-writer lock first (`locked` if
        another process holds it); readers never lock. `progress(done, total)` gets byte counts
        while a large file is indexed. `verify="later"` returns before the UTF-8 check of the
        message text (`finish_verification`), which a browser runs after its first paint;
        writes always wait for it."""
        path = os.fspath(path)
        if os.path.isdir(path):
            raise SessionError("invalid_argument", "is a directory, not a session file", path=path)
        if not os.path.exists(path):
            raise SessionError("not_found", "no such session file", path=path)
        lock = None
        if not read_only:
            lock = WriterLock(path + ".lock")
            lock.acquire(path)
        try:
            flags = (os.O_RDWR | os.O_APPEND) if lock else os.O_RDONLY
            try:
                fd = os.open(path, flags | os.O_CLOEXEC)
            except PermissionError:
                if lock is None:
                    raise
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                lock.release()
                lock = None
            storage = cls(path, fd, lock, durable)
            storage._verify_later = verify == "later"
            try:
                storage._open_scan(progress)
            except BaseException:
                storage.close()
                raise
        except OSError as exc:
            if lock is not None:
                lock.release()
            raise SessionError("storage", f"cannot read the session file: {exc}", path=path) from None
        except BaseException:
            if lock is not None and lock.held:
                lock.release()
            raise
        return storage

    def _open_scan(self, progress: Progress | None) -> None:
        header_end, header_line = self._read_header()
        if self.header.version < 3:
            self._load_legacy(header_end, header_line)
        else:
            self._end = header_end
            self._next_line = header_line + 1
            self._scan(at_open=True, progress=progress)
        self._index.finish_load(self.line_number)
        self._mark_damaged()
        if not self._verify_later:
            self.finish_verification()

    def _read_header(self) -> tuple[int, int]:
        """Parse the first non-blank line; returns (offset after it, its line number)."""
        fd = self._fd
        assert fd is not None
        offset = 0
        line_no = 1
        buf = b""
        while True:
            nl = buf.find(b"\n")
            while nl >= 0:
                line = buf[:nl]
                if line.strip():
                    self.header = self._parse_header(line, line_no)
                    return offset + nl + 1, line_no
                offset += nl + 1
                line_no += 1
                buf = buf[nl + 1 :]
                nl = buf.find(b"\n")
            chunk = os.pread(fd, 1 << 16, offset + len(buf))
            if not chunk:
                if buf.strip():
                    self.header = self._parse_header(buf, line_no)
                    return offset + len(buf), line_no
                raise SessionError(
                    "invalid_session",
                    "the file is empty (no session header); nothing to open",
                    path=self.path,
                )
            buf += chunk
            if len(buf) > 64 << 20:
                raise SessionError(
                    "invalid_session", "line 1 is not a session header (over 64 MB)", path=self.path
                )

    def _parse_header(self, raw: bytes, line_no: int) -> SessionHeader:
        try:
            data = full_decode(raw)
        except (msgspec.DecodeError, RecursionError):
            raise SessionError(
                "invalid_session",
                "the first line is not valid JSON, so this is not a readable session file",
                path=self.path,
                line=line_no,
            ) from None
        return SessionHeader.from_dict(data, path=self.path)

    # --- scanning -----------------------------------------------------------------------------

    def _scan(self, *, at_open: bool, progress: Progress | None = None) -> int:
        """Index complete lines from `_end` to EOF. At open, an unterminated final part is
        indexed if valid, else reported as a torn tail; later (follow mode) it is left for the
        next scan, as its writer may still be writing it."""
        fd = self._fd
        assert fd is not None
        size = os.fstat(fd).st_size
        before = len(self._index)
        if at_open and size - self._end >= MMAP_MIN:
            start, line_no = self._scan_mapped(size, progress)
        else:
            start, line_no = self._scan_read(size, progress)
        index = self._index
        offsets, lengths, lines = self._offsets, self._lengths, self._lines
        carry_off = start
        carry = os.pread(fd, size - start, start) if start < size else b""
        self._end = carry_off
        self._next_line = line_no
        self._tail_len = len(carry)
        self._tail_state = "pending" if carry else None
        if at_open:
            self._torn = None
            if carry and not carry.strip():
                self._tail_state = "blank"
            elif carry:
                try:
                    index_line(index, carry, line_no)
                except LineError as exc:
                    self._tail_state = "torn"
                    self._torn = Diagnostic(
                        "warning",
                        "torn_tail",
                        f"line {line_no} is incomplete ({len(carry)} bytes, {exc.reason}):"
                        " probably a write cut short by a crash. It is left out; before the next"
                        " write it is moved to a .torn file next to the session",
                        line_no,
                    )
                else:
                    offsets.append(carry_off)
                    lengths.append(len(carry))
                    lines.append(line_no)
                    self._tail_state = "entry"
        elif self._torn is not None and self._tail_state != "pending":
            self._torn = None  # the fragment was completed or overwritten; judged as a line now
        return len(self._index) - before

    def _scan_read(self, size: int, progress: Progress | None) -> tuple[int, int]:
        """Lines from `_end` by chunked reads (appends seen in follow mode, small files)."""
        fd = self._fd
        assert fd is not None
        start = self._end  # offset of the first byte not yet consumed
        want = CHUNK
        line_no = self._next_line
        while start < size:
            # read from the first unconsumed byte: a partial line is read again next time
            # instead of being glued to the next chunk (no extra copies of the data)
            chunk = os.pread(fd, min(want, size - start), start)
            if not chunk:
                break
            batch = chunk.split(b"\n")
            rest = batch.pop()  # after the last newline: part of a line, or b""
            if not batch:  # no newline: a line longer than the read, or the unterminated tail
                if start + len(chunk) >= size:
                    break
                want *= 2
                continue
            want = CHUNK
            sizes = list(map(len, batch))
            starts = list(accumulate(map(add, sizes, repeat(1)), initial=start))
            starts.pop()
            self._index_batch(batch, starts, sizes, line_no)
            line_no += len(batch)
            start += len(chunk) - len(rest)
            if progress is not None:
                progress(start, size)
        return start, line_no

    def _scan_mapped(self, size: int, progress: Progress | None) -> tuple[int, int]:
        """Lines from `_end` of a big file at open, through a sliding mmap window: the line
        breaks are found in place and memoryview slices are decoded, so the data is never
        copied. On Linux, with no other thread running, a forked helper decodes the tail of a
        large file on the other core meanwhile (`_HalfIndexer`). v3 files are append-only, so
        the mapped part cannot shrink under us."""
        fd = self._fd
        assert fd is not None
        start = self._end
        line_no = self._next_line
        helper = _HalfIndexer.start(fd, start, size)
        stop = helper.first_byte if helper else size
        for batch, starts, sizes in _line_batches(fd, start, stop):
            self._index_batch(batch, starts, sizes, line_no)
            line_no += len(starts)
            start = starts[-1] + sizes[-1] + 1
            del batch  # views into the window: they must be gone before it moves on
            if helper is not None:
                helper.drain()
            if progress is not None:
                progress(start, size)
        if helper is not None:
            start, line_no = helper.finish(self, start, line_no)
            if progress is not None:
                progress(start, size)
        return start, line_no

    def _index_batch(
        self, batch: Sequence[bytes | memoryview], starts: list[int], sizes: list[int], line_no: int
    ) -> None:
        """Index consecutive complete lines: in bulk when every line takes the fast path, else
        one by one (blank lines skipped, damaged ones reported)."""
        index = self._index
        rows = decode_all(batch)
        if rows is not None:
            self._feed_decoded(rows, starts, sizes, line_no)
            return
        for raw, off, n in zip(batch, starts, sizes, strict=True):
            raw = bytes(raw)
            if raw.startswith(b"{") or raw.strip():
                try:
                    index_line(index, raw, line_no)
                except LineError as exc:
                    self._diagnostics.append(
                        Diagnostic("error", "invalid_line", f"line {line_no} {exc.reason}", line_no)
                    )
                else:
                    self._offsets.append(off)
                    self._lengths.append(n)
                    self._lines.append(line_no)
            line_no += 1

    def _feed_decoded(self, rows: list, starts: Sequence[int], sizes: Sequence[int], line_no: int) -> None:
        feed_rows(self._index, rows, line_no)
        self._offsets.extend(starts)
        self._lengths.extend(sizes)
        self._lines.extend(range(line_no, line_no + len(rows)))

    # --- the byte check -----------------------------------------------------------------------

    def finish_verification(self) -> None:
        """Check the UTF-8 of every indexed line not checked yet (the fast scan skips over the
        text of messages without looking at its encoding). A line with invalid bytes is
        damage: a diagnostic, and the session becomes read-only. Idempotent and thread-safe;
        writes call it first, so they never happen before a file is fully checked."""
        with self._verify_lock:
            fd = self._fd
            done = self._verified
            total = len(self._lengths)
            if fd is None or done >= total or self._eager is not None:
                return
            offsets, lengths, lines = self._offsets, self._lengths, self._lines
            k = done
            while k < total:
                first = offsets[k]
                stop = min(total, k + BATCH_LINES)
                block = os.pread(fd, offsets[stop - 1] + lengths[stop - 1] - first, first)
                if not block.isascii():
                    for j in range(k, stop):
                        raw = block[offsets[j] - first : offsets[j] - first + lengths[j]]
                        if not utf8_ok(raw):
                            self._diagnostics.append(
                                Diagnostic(
                                    "error",
                                    "invalid_utf8",
                                    f"line {lines[j]} is not valid UTF-8 text",
                                    lines[j],
                                    self._index.ids[j],
                                )
                            )
                k = stop
            self._verified = total
            self._mark_damaged()

    def refresh(self) -> int:
        """Index lines other processes appended since the last scan (live follow)."""
        fd = self._fd
        if fd is None:
            return 0
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise SessionError("storage", "the session file was deleted", path=self.path) from None
        if st.st_ino != self._ino:
            raise SessionError(
                "storage",
                "the session file was replaced on disk; reopen it to see it",
                path=self.path,
            )
        if self._eager is not None:
            return 0
        size = st.st_size
        known = self._end + self._tail_len
        if size < known:
            self._diagnostics.append(
                Diagnostic("error", "truncated", "the file was truncated by another program")
            )
            self._mark_damaged()
            raise SessionError("storage", "the session file was truncated by another program", path=self.path)
        if size == known:
            return 0
        if self._tail_state == "entry":
            # a valid last line without "\n": a proper writer ends it before adding its own
            if os.pread(fd, 1, known) == b"\n":
                self._end = known + 1
                self._next_line += 1
            else:
                self._diagnostics.append(
                    Diagnostic(
                        "error",
                        "glued_line",
                        f"line {self._next_line} was extended by another writer without a line"
                        " break, so two entries share one line",
                        self._next_line,
                    )
                )
                skip = _find_newline(fd, known, size)
                if skip < 0:
                    self._mark_damaged()
                    return 0
                self._end = skip + 1
                self._next_line += 1
            self._tail_len = 0
            self._tail_state = None
        added = self._scan(at_open=False)
        if not self._verify_later:
            self.finish_verification()
        self._mark_damaged()
        return added

    # --- legacy v1/v2 -------------------------------------------------------------------------

    def _load_legacy(self, header_end: int, header_line: int) -> None:
        fd = self._fd
        assert fd is not None
        self.version = self.header.version
        size = os.fstat(fd).st_size
        data = os.pread(fd, size - header_end, header_end)
        objects: list[dict[str, Any]] = []
        line_of: list[int] = []
        line_no = header_line
        for raw in data.split(b"\n"):
            line_no += 1
            if not raw.strip():
                continue
            try:
                obj = full_decode(raw)
            except (msgspec.DecodeError, RecursionError) as exc:
                self._diagnostics.append(
                    Diagnostic(
                        "error",
                        "invalid_line",
                        f"line {line_no} is not valid JSON ({exc})",
                        line_no,
                    )
                )
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
                self._diagnostics.append(
                    Diagnostic("error", "invalid_line", f"line {line_no} is not a session entry", line_no)
                )
                continue
            objects.append(obj)
            line_of.append(line_no)
        migrated = migrate_entries(self.header.version, objects, lambda used: new_entry_id(used.__contains__))
        self._eager = []
        for obj, line in zip(migrated, line_of, strict=True):
            reason = validate_entry(obj)
            if reason is not None:
                self._diagnostics.append(Diagnostic("error", "invalid_line", f"line {line} {reason}", line))
                continue
            add_dict(self._index, obj, line)
            self._eager.append(entry_from_dict(obj))
            self._lines.append(line)
        self._end = size
        self._next_line = line_no + 1
        self.read_only_reason = (
            f"this is a version {self.header.version} session file (Pi's older format); it is shown"
            " migrated to v3 in memory, and the file is left untouched. Run `sessiontree upgrade"
            f" {self.path}` to convert it (a backup is kept) before writing to it"
        )

    @classmethod
    def upgrade(cls, path: str | os.PathLike[str]) -> str | None:
        """Rewrite a v1/v2 file as v3, atomically, keeping the original as `<file>.bak`.

        Returns the backup path, or None when the file already is v3. Refuses damaged files
        (nothing may be lost) and files another writer holds.
        """
        storage = cls.open(path, read_only=False)
        try:
            if storage.version >= 3:
                return None
            problems = [d for d in storage.diagnostics if d.severity == "error"]
            if problems:
                raise SessionError(
                    "invalid_session",
                    f"cannot upgrade a damaged file ({problems[0].format()}); nothing was changed",
                    path=storage.path,
                )
            header = storage.header.upgraded()
            try:
                chunks = [orjson.dumps(header.to_dict()) + b"\n"]
                chunks.extend(orjson.dumps(e.to_dict()) + b"\n" for e in storage.iter_entries())
            except (TypeError, orjson.JSONEncodeError) as exc:
                raise SessionError(
                    "invalid_session", f"an entry cannot be written back as JSON ({exc}); nothing changed"
                ) from None
            return atomic_rewrite(storage.path, chunks)
        finally:
            storage.close()

    # --- reading ------------------------------------------------------------------------------

    @property
    def index(self) -> TreeIndex:
        return self._index

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = self._diagnostics + self._index.diagnostics
        if self._torn is not None:
            out.append(self._torn)
        return sorted(out, key=lambda d: d.line or 0)

    def torn_tail(self) -> bytes | None:
        """The bytes of an incomplete final line found at open (set aside before the next
        append), or None."""
        if self._tail_state != "torn" or self._fd is None:
            return None
        return os.pread(self._fd, self._tail_len, self._end)

    def line_number(self, entry_id: str) -> int | None:
        i = self._index.pos.get(entry_id)
        return None if i is None or i >= len(self._lines) else self._lines[i]

    def raw_line(self, i: int) -> bytes:
        """The exact bytes of entry `i`'s line (v3 files)."""
        if self._eager is not None:
            return orjson.dumps(self._eager[i].to_dict())
        fd = self._fd
        if fd is None:
            raise SessionError("storage", "the session is closed", path=self.path)
        return os.pread(fd, self._lengths[i], self._offsets[i])

    def _load(self, i: int) -> Entry:
        if self._eager is not None:
            return self._eager[i]
        with self._cache_lock:
            hit = self._cache.get(i)
            if hit is not None:
                self._cache.move_to_end(i)
                return hit[0]
        raw = self.raw_line(i)
        try:
            data = decode_entry_dict(raw)
        except LineError as exc:
            raise self._late_damage(i, exc.reason) from None
        if data["id"] != self._index.ids[i] or data["type"] != self._index.type_name(i):
            raise self._late_damage(i, "does not say what it said when the file was indexed")
        entry = entry_from_dict(data)
        self._remember(i, entry, len(raw))
        return entry

    def _late_damage(self, i: int, reason: str) -> SessionError:
        """A line that passed indexing but fails a full decode: an integer too large to
        represent, a key given twice, or bytes changed on disk since. Reported like any damaged
        line (diagnostic, read-only from now on); the caller gets a SessionError."""
        line = self._lines[i]
        message = f"line {line} {reason}"
        if not any(d.line == line and d.code == "unreadable_line" for d in self._diagnostics):
            self._diagnostics.append(
                Diagnostic("error", "unreadable_line", message, line, self._index.ids[i])
            )
            self._mark_damaged()
        return SessionError("invalid_entry", message, path=self.path, line=line)

    def _remember(self, i: int, entry: Entry, size: int) -> None:
        with self._cache_lock:
            previous = self._cache.pop(i, None)
            if previous is not None:
                self._cache_bytes -= previous[1]
            self._cache[i] = (entry, size)
            self._cache_bytes += size
            while self._cache and (self._cache_bytes > CACHE_BYTES or len(self._cache) > CACHE_ENTRIES):
                _, (_, old) = self._cache.popitem(last=False)
                self._cache_bytes -= old

    # --- writing ------------------------------------------------------------------------------

    def _persist(self, entries: Sequence[Entry], encoded: list[bytes]) -> None:
        fd = self._fd
        assert fd is not None
        if self._tail_state == "pending":
            raise SessionError(
                "storage",
                "another program is writing this file right now (its last line is unfinished);"
                " nothing was written, try again",
                path=self.path,
            )
        if self._tail_state == "torn":
            try:
                self._set_aside_torn_tail()
            except OSError as exc:
                raise SessionError(
                    "storage",
                    f"could not set the incomplete last line aside ({exc}); nothing was written",
                    path=self.path,
                ) from None
        payload = b"\n".join(encoded) + b"\n"
        if self._tail_state in ("entry", "blank"):
            payload = b"\n" + payload
        start = self._end + self._tail_len
        try:
            _write_all(fd, payload)
            if self.durable:
                os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_size > start:
                    os.ftruncate(fd, start)
            raise SessionError("storage", f"write failed, nothing was added: {exc}", path=self.path) from None
        first = len(self._index)
        self.refresh()
        for k, entry in enumerate(entries):
            i = self._index.pos.get(entry.id, -1)
            if i >= first:
                self._remember(i, entry, len(encoded[k]))

    def _set_aside_torn_tail(self) -> None:
        """Move the torn final fragment to a sidecar (exact bytes), then cut it off."""
        fd = self._fd
        assert fd is not None
        size = os.fstat(fd).st_size
        if size != self._end + self._tail_len:
            raise SessionError("storage", "the file changed while repairing its last line", path=self.path)
        fragment = os.pread(fd, self._tail_len, self._end)
        sidecar = _existing_copy(self.path + ".torn", fragment)
        if sidecar is None:
            sidecar = free_name(self.path + ".torn")
            side = os.open(sidecar, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                _write_all(side, fragment)
                os.fsync(side)
            finally:
                os.close(side)
            fsync_dir(sidecar)
        os.ftruncate(fd, self._end)
        os.fsync(fd)
        self.repairs.append(sidecar)
        self._diagnostics.append(
            Diagnostic(
                "info",
                "tail_set_aside",
                f"the incomplete last line ({len(fragment)} bytes) was moved to {sidecar}",
                self._torn.line if self._torn else None,
            )
        )
        self._torn = None
        self._tail_len = 0
        self._tail_state = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self._cache.clear()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _find_newline(fd: int, start: int, end: int) -> int:
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(1 << 20, end - pos), pos)
        if not chunk:
            return -1
        k = chunk.find(b"\n")
        if k >= 0:
            return pos + k
        pos += len(chunk)
    return -1


def _existing_copy(base: str, fragment: bytes) -> str | None:
    """A sidecar from an earlier, interrupted repair that already holds exactly `fragment`."""
    candidates = [base] + [f"{base}.{n}" for n in range(1, 100)]
    for name in candidates:
        try:
            if os.path.getsize(name) != len(fragment):
                continue
            with open(name, "rb") as f:
                if f.read() == fragment:
                    return name
        except OSError:
            if not os.path.lexists(name):
                return None
    return None


def _line_batches(fd: int, start: int, stop: int):
    """(line views, starts, sizes) for the complete lines in [start, stop), BATCH_LINES at a
    time, read through an mmap window of WINDOW bytes that slides along the file, so only a
    window's worth of the file is ever mapped. The caller drops each batch's views before
    asking for the next batch."""
    granularity = mmap.ALLOCATIONGRANULARITY
    window = WINDOW
    while start < stop:
        base = start - start % granularity
        length = min(stop - base, window)
        mapped = mmap.mmap(fd, length, offset=base, access=mmap.ACCESS_READ)
        view = memoryview(mapped)
        find = mapped.find
        position = start - base
        end = find(b"\n", position, length)
        if end < 0:
            view.release()
            if base + length >= stop:
                return  # no complete line left
            window *= 2  # a single line longer than the window
            continue
        window = WINDOW
        while end >= 0:
            starts: list[int] = []
            ends: list[int] = []
            while end >= 0 and len(starts) < BATCH_LINES:
                starts.append(position)
                ends.append(end)
                position = end + 1
                end = find(b"\n", position, length)
            views = list(map(view.__getitem__, map(slice, starts, ends)))
            sizes = list(map(sub, ends, starts))
            if base:
                starts = [base + k for k in starts]
            yield views, starts, sizes
            del views
        view.release()
        del mapped  # unmapped once the last view of it is gone
        start = base + position


_BATCH = msgspec.msgpack.Decoder(tuple[bytes, bytes, list[RowType] | None])
_BATCH_ENCODE = msgspec.msgpack.Encoder()
_FRAME = struct.Struct("<I")
PARENT_SHARE = 0.4  # the parent also feeds every row into the index, so it takes less


class _HalfIndexer:
    """Decodes the tail part of a big file in a forked child while the parent indexes the head:
    the second core, for the part of opening that is pure CPU.

    The child streams the decoded rows of each batch through a pipe (length-prefixed msgpack
    frames, an empty frame at the end) and the parent drains the pipe between its own batches,
    then feeds the rows through the very same path as its own, in file order. A batch the fast
    path refused comes back without rows and is redone line by line by the parent; if the child
    fails in any way, the parent indexes whatever it did not deliver itself.
    """

    def __init__(self, pid: int, pipe: int, first_byte: int, stop: int, fd: int) -> None:
        self.pid, self.pipe, self.first_byte, self.stop, self.fd = pid, pipe, first_byte, stop, fd
        self.buffer = bytearray()
        self.eof = False

    @classmethod
    def start(cls, fd: int, start: int, size: int) -> _HalfIndexer | None:
        if size - start < PARALLEL_MIN or not _can_fork():
            return None
        split = _find_newline(fd, start + int((size - start) * PARENT_SHARE), size)
        last = _newline_before(fd, start, size)
        if split < 0 or last < 0 or split >= last:
            return None
        read_fd, write_fd = os.pipe()
        with contextlib.suppress(OSError):  # a bigger pipe buffer where Linux allows it
            fcntl.fcntl(write_fd, 1031, 1 << 20)  # F_SETPIPE_SZ
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            code = 1
            try:
                os.close(read_fd)
                for batch, starts, sizes in _line_batches(fd, split + 1, last + 1):
                    rows = decode_all(batch)
                    del batch
                    frame = _BATCH_ENCODE.encode(
                        (array("q", starts).tobytes(), array("q", sizes).tobytes(), rows)
                    )
                    _write_all(write_fd, _FRAME.pack(len(frame)) + frame)
                _write_all(write_fd, _FRAME.pack(0))
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        return cls(pid, read_fd, split + 1, last + 1, fd)

    def drain(self) -> None:
        """Take what the child has written so far, without waiting (keeps it from blocking)."""
        while not self.eof:
            try:
                chunk = os.read(self.pipe, 1 << 20)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
            self.buffer += chunk

    def _frames(self):
        """Complete frames in arrival order, waiting for the child as needed; stops at the end
        frame, or early if the child died without sending it."""
        os.set_blocking(self.pipe, True)
        position = 0
        while True:
            if len(self.buffer) - position >= 4:
                (length,) = _FRAME.unpack_from(self.buffer, position)
                if length == 0:
                    return
                if len(self.buffer) - position - 4 >= length:
                    yield bytes(self.buffer[position + 4 : position + 4 + length])
                    position += 4 + length
                    continue
            if self.eof:
                return  # the child stopped early: the caller indexes the rest itself
            chunk = os.read(self.pipe, 1 << 20)
            if not chunk:
                self.eof = True
            del self.buffer[:position]
            position = 0
            self.buffer += chunk

    def finish(self, storage: JsonlStorage, start: int, line_no: int) -> tuple[int, int]:
        """Index the child's part (after the parent's): its rows as they arrive, then anything
        it did not deliver."""
        try:
            if start == self.first_byte:
                for frame in self._frames():
                    try:
                        raw_starts, raw_sizes, rows = _BATCH.decode(frame)
                    except msgspec.DecodeError:
                        break
                    starts, sizes = array("q"), array("q")
                    starts.frombytes(raw_starts)
                    sizes.frombytes(raw_sizes)
                    if not starts or starts[0] != start:
                        break
                    if rows is None:  # the fast path refused a line here: redo it line by line
                        lines = [os.pread(self.fd, n, a) for a, n in zip(starts, sizes, strict=True)]
                        storage._index_batch(lines, list(starts), list(sizes), line_no)
                    else:
                        storage._feed_decoded(rows, starts, sizes, line_no)
                    line_no += len(starts)
                    start = starts[-1] + sizes[-1] + 1
        finally:
            os.close(self.pipe)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        for batch, starts, sizes in _line_batches(self.fd, start, self.stop):
            storage._index_batch(batch, starts, sizes, line_no)  # whatever the child left
            line_no += len(starts)
            del batch
        return self.stop, line_no


def _newline_before(fd: int, start: int, size: int) -> int:
    """Offset of the last newline in [start, size), or -1."""
    end = size
    while end > start:
        begin = max(start, end - (1 << 20))
        k = os.pread(fd, end - begin, begin).rfind(b"\n")
        if k >= 0:
            return begin + k
        end = begin
    return -1


def _can_fork() -> bool:
    """Forking is safe only in a single-threaded process, and memfd is Linux's."""
    return sys.platform.startswith("linux") and hasattr(os, "memfd_create") and threading.active_count() == 1

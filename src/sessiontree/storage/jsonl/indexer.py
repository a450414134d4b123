"""Indexing the complete lines of a session file: the `TreeIndex` plus where each entry's line is.

`LineIndex` owns what indexing produces — the tree, and per entry its byte offset, length and
physical line number — and accepts lines two ways: raw lines (`add_lines`: decoded here, in bulk
when every line takes the fast path) and rows another process already decoded (`add_rows`).

Reading the file is separate from indexing it. Small ranges (and follow mode) are read with
`pread`; big ranges at open go through `mapped_batches`, a sliding mmap window whose line breaks
are found in place and whose memoryview slices are decoded without copying. From 48 MB on, on
Linux in a single-threaded process, `HalfIndexer` forks a helper that decodes the tail of the file
on the other core and streams the decoded rows back through a pipe; the parent feeds them to
`add_rows` in file order after its own part. If the helper fails in any way, the parent indexes
whatever it did not deliver itself, so the result never depends on the helper.
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
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, repeat
from operator import add, sub

import msgspec

from ...model.errors import Diagnostic
from ..atomic import write_all
from ..index import TreeIndex
from ..scan import LineError, RowType, decode_all, feed_rows, index_line

CHUNK = 8 << 20
MMAP_MIN = 4 << 20  # ranges at least this big are indexed through mmap at open
PARALLEL_MIN = 48 << 20  # ...and from this size on, with a forked helper for the second half
WINDOW = 64 << 20  # bytes mapped at a time
BATCH_LINES = 8192
PARENT_SHARE = 0.4  # the parent also feeds every row into the index, so it decodes less

SALVAGE_TRIES = 32  # entry starts tried inside one damaged line (content blocks look alike)
ENTRY_START = b'{"type":'  # how every line Pi writes begins

Progress = Callable[[int, int], None]
Batch = tuple[Sequence[bytes | memoryview], list[int], list[int]]  # lines, starts, sizes


class LineIndex:
    """The tree of a file's entries and the location of each entry's line."""

    __slots__ = ("diagnostics", "index", "lengths", "lines", "offsets")

    def __init__(self) -> None:
        self.index = TreeIndex()
        self.offsets = array("q")
        self.lengths = array("q")
        self.lines = array("l")
        self.diagnostics: list[Diagnostic] = []  # lines that are not valid entries

    def __len__(self) -> int:
        return len(self.index)

    def add_rows(self, rows: list, starts: Sequence[int], sizes: Sequence[int], line_no: int) -> None:
        """Index rows decoded by `scan.decode_all` from consecutive lines starting at `line_no`."""
        feed_rows(self.index, rows, line_no)
        self.offsets.extend(starts)
        self.lengths.extend(sizes)
        self.lines.extend(range(line_no, line_no + len(rows)))

    def add_lines(
        self, batch: Sequence[bytes | memoryview], starts: Sequence[int], sizes: Sequence[int], line_no: int
    ) -> None:
        """Index consecutive complete lines: in bulk when every line takes the fast path, else
        one by one (blank lines skipped, damaged ones reported as diagnostics)."""
        rows = decode_all(batch)
        if rows is not None:
            self.add_rows(rows, starts, sizes, line_no)
            return
        for raw, off in zip(batch, starts, strict=True):
            line = bytes(raw)
            if line.strip():
                self.add_one(line, off, line_no)
            line_no += 1

    def index_quietly(self, line: bytes, offset: int, line_no: int) -> bool:
        """Index `line` if it is a valid entry; report nothing if not. True if indexed."""
        if not line.strip():
            return False
        try:
            index_line(self.index, line, line_no)
        except LineError:
            return False
        self.offsets.append(offset)
        self.lengths.append(len(line))
        self.lines.append(line_no)
        return True

    def add_one(self, line: bytes, offset: int, line_no: int) -> bool:
        """Index one non-blank line; a damaged line becomes a diagnostic. True if indexed.

        One kind of damage is mended on the way: a write cut short by a crash, onto which a
        writer that takes no lock (Pi) appended a whole line without first ending the fragment.
        The line then is a fragment followed by a valid entry; the entry is read (a warning
        says so) and the fragment skipped, instead of losing both."""
        try:
            index_line(self.index, line, line_no)
        except LineError as exc:
            if self._salvage(line, offset, line_no):
                return True
            self.diagnostics.append(
                Diagnostic("error", "invalid_line", f"line {line_no} {exc.reason}", line_no)
            )
            return False
        self.offsets.append(offset)
        self.lengths.append(len(line))
        self.lines.append(line_no)
        return True

    def _salvage(self, line: bytes, offset: int, line_no: int) -> bool:
        start = 1
        for _ in range(SALVAGE_TRIES):
            k = line.find(ENTRY_START, start)
            if k < 0:
                return False
            if self.index_quietly(line[k:], offset + k, line_no):
                self.diagnostics.append(
                    Diagnostic(
                        "warning",
                        "torn_continued",
                        f"line {line_no} begins with an incomplete write ({k} bytes) that another"
                        " writer continued without a line break; its entry was read and the"
                        " incomplete part is skipped",
                        line_no,
                    )
                )
                return True
            start = k + 1
        return False


def read_batches(fd: int, start: int, stop: int) -> Iterator[Batch]:
    """The complete lines in [start, stop) by chunked `pread`s (follow mode, small files). A
    partial line at the end of a chunk is read again with the next one rather than glued to it,
    and a line longer than a chunk doubles the read. What follows the last newline is left."""
    want = CHUNK
    while start < stop:
        chunk = os.pread(fd, min(want, stop - start), start)
        if not chunk:
            return
        batch = chunk.split(b"\n")
        rest = batch.pop()  # after the last newline: part of a line, or b""
        if not batch:  # no newline: a line longer than the read, or the unterminated tail
            if start + len(chunk) >= stop:
                return
            want *= 2
            continue
        want = CHUNK
        sizes = list(map(len, batch))
        starts = list(accumulate(map(add, sizes, repeat(1)), initial=start))
        starts.pop()
        yield batch, starts, sizes
        start += len(chunk) - len(rest)


def mapped_batches(fd: int, start: int, stop: int) -> Iterator[Batch]:
    """(line views, starts, sizes) for the complete lines in [start, stop), BATCH_LINES at a
    time, through an mmap window of WINDOW bytes that slides along the file, so only a window's
    worth of the file is ever mapped. The caller must drop each batch's views before asking for
    the next batch. Session files are append-only, so the mapped part cannot shrink under us."""
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


def index_range(
    target: LineIndex,
    fd: int,
    start: int,
    stop: int,
    line_no: int,
    *,
    mapped: bool,
    progress: Progress | None,
) -> tuple[int, int]:
    """Index the complete lines of [start, stop) into `target`. Returns (offset after the last
    complete line, next line number)."""
    helper = HalfIndexer.start(fd, start, stop) if mapped else None
    until = helper.first_byte if helper else stop
    batches = mapped_batches(fd, start, until) if mapped else read_batches(fd, start, until)
    for batch, starts, sizes in batches:
        target.add_lines(batch, starts, sizes, line_no)
        line_no += len(starts)
        start = starts[-1] + sizes[-1] + 1
        del batch  # views into the window: they must be gone before it moves on
        if helper is not None:
            helper.drain()
        if progress is not None:
            progress(start, stop)
    if helper is not None:
        start, line_no = helper.finish(target, start, line_no)
        if progress is not None:
            progress(start, stop)
    return start, line_no


_BATCH = msgspec.msgpack.Decoder(tuple[bytes, bytes, list[RowType] | None])
_BATCH_ENCODE = msgspec.msgpack.Encoder()
_FRAME = struct.Struct("<I")


class HalfIndexer:
    """Decodes the tail part of a big file in a forked child while the parent indexes the head:
    the second core, for the part of opening that is pure CPU.

    The child streams the decoded rows of each batch through a pipe (length-prefixed msgpack
    frames, an empty frame at the end) and the parent drains the pipe between its own batches,
    then feeds the rows to `LineIndex.add_rows`, in file order. A batch the fast path refused
    comes back without rows and is redone line by line by the parent; if the child fails in any
    way, the parent indexes whatever it did not deliver itself.
    """

    def __init__(self, pid: int, pipe: int, first_byte: int, stop: int, fd: int) -> None:
        self.pid, self.pipe, self.first_byte, self.stop, self.fd = pid, pipe, first_byte, stop, fd
        self.buffer = bytearray()
        self.eof = False

    @classmethod
    def start(cls, fd: int, start: int, size: int) -> HalfIndexer | None:
        if size - start < PARALLEL_MIN or not _can_fork():
            return None
        split = find_newline(fd, start + int((size - start) * PARENT_SHARE), size)
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
                for batch, starts, sizes in mapped_batches(fd, split + 1, last + 1):
                    rows = decode_all(batch)
                    del batch
                    frame = _BATCH_ENCODE.encode(
                        (array("q", starts).tobytes(), array("q", sizes).tobytes(), rows)
                    )
                    write_all(write_fd, _FRAME.pack(len(frame)) + frame)
                write_all(write_fd, _FRAME.pack(0))
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

    def _frames(self) -> Iterator[bytes]:
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

    def finish(self, target: LineIndex, start: int, line_no: int) -> tuple[int, int]:
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
                        target.add_lines(lines, starts, sizes, line_no)
                    else:
                        target.add_rows(rows, starts, sizes, line_no)
                    line_no += len(starts)
                    start = starts[-1] + sizes[-1] + 1
        finally:
            os.close(self.pipe)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        for rest, rest_starts, rest_sizes in mapped_batches(self.fd, start, self.stop):
            target.add_lines(rest, rest_starts, rest_sizes, line_no)  # whatever the child left
            line_no += len(rest_starts)
            del rest
        return self.stop, line_no


def find_newline(fd: int, start: int, end: int) -> int:
    """Offset of the first newline in [start, end), or -1."""
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

"""What commands print.

Session files hold whatever a model or a tool wrote, ids and timestamps included, so every line
of text output goes through `inert` (the same rendering the browser uses): an escape sequence in
an entry id is shown as `␛…`, never sent to the terminal. JSON output is exact JSON, in which
control characters are escaped by the encoder anyway.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from ..display import inert
from ..export.common import incomplete_lines
from ..opening import open_session
from ..session import Session


class OutputError(Exception):
    """Standard output could not be written (a full disk): `main` says so in one line, where
    any other OSError is a file's trouble or a bug, shown whole."""


class ClosedOutput(io.TextIOBase):
    """Standard output closed when the process started: every write fails as one to a closed
    descriptor does (EBADF, as `cat file >&-` reports), through `_guarded` to `main`."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    @property
    def buffer(self) -> ClosedOutput:  # bytes are refused alike
        return self


def _guarded(write: Callable[..., Any]) -> Callable[..., Any]:
    """`write` (of stdout) raising OutputError for what it fails with, but a broken pipe: the
    reader went away, which `main` takes as the end of the output."""

    def guarded(*data: Any) -> Any:
        try:
            return write(*data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from exc

    return guarded


def out(text: str = "") -> None:
    """One line of text on stdout, inert."""
    _guarded(sys.stdout.write)(inert(text) + "\n")


def out_bytes(data: bytes | bytearray | memoryview) -> None:
    """Bytes on stdout as they are (an export)."""
    _guarded(sys.stdout.buffer.write)(data)


def flush_out() -> None:
    _guarded(sys.stdout.flush)()


def err(text: str) -> None:
    """One line on stderr, inert (error messages echo ids and paths from the input)."""
    sys.stderr.write(inert(text) + "\n")


def json_out(value: Any) -> None:
    """`value` as indented JSON on stdout."""
    out_bytes(_dumps(value) + b"\n")


def json_out_streamed(
    fields: Iterable[tuple[str, Any]],
    key: str,
    items: Iterable[Any],
    after: Callable[[], Iterable[tuple[str, Any]]] = tuple,
) -> None:
    """An object of `fields`, then `key`: a list of `items`, then the fields `after()` gives
    once the items are written (what can only be known from all of them), written item by item,
    so a context of a million messages never exists as one string. The bytes are those
    `json_out` writes for the same object."""
    write = _guarded(sys.stdout.buffer.write)
    write(b"{")
    for name, value in fields:
        write(b"\n  " + _member(name, value) + b",")
    write(b"\n  " + _dumps(key) + b": ")
    _write_list(items, b"  ")
    for name, value in after():
        write(b",\n  " + _member(name, value))
    write(b"\n}\n")


def json_list_streamed(items: Iterable[Any]) -> None:
    """`json_out` of a list, written item by item."""
    _write_list(items, b"")
    out_bytes(b"\n")


def _write_list(items: Iterable[Any], indent: bytes) -> None:
    write = _guarded(sys.stdout.buffer.write)
    write(b"[")
    empty = True
    for item in items:
        write((b"\n" if empty else b",\n") + _indent(_dumps(item), indent + b"  ", first=True))
        empty = False
    write(b"]" if empty else b"\n" + indent + b"]")


def _member(name: str, value: Any) -> bytes:
    return _dumps(name) + b": " + _indent(_dumps(value), b"  ", first=False)


def _dumps(value: Any) -> bytes:
    """Indented JSON. What orjson refuses is written by the standard library's encoder:
    integers beyond 64 bits (JavaScript writes 1e20 as one), which it has no limit for, and half
    a character (a lone surrogate, as Pi's truncation can leave in a message), which
    `backslashreplace` spells as JSON escapes it (`\\ud83d`): it can only be in a string."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:
        import json

        return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8", "backslashreplace")


def _indent(data: bytes, prefix: bytes, *, first: bool) -> bytes:
    """Every line of `data` one level deeper (the first too if `first`)."""
    body = data.replace(b"\n", b"\n" + prefix)
    return prefix + body if first else body


def warn_damage(session: Session, problem: str | None) -> int:
    """Say on stderr what of a damaged session was left out (at once: the output may be long)
    and return the exit status, 1 as for `check`; an incomplete write is a note, status 0, as
    `check` has it: an incomplete last line is what a session being written looks like for a
    moment, and one continued by another writer left its entry read (it said "damaged",
    status 1, where `check` said ok: QA)."""
    for note in incomplete_lines(session):
        err(f"sessiontree: note: {note}")
    if problem is None:
        return 0
    err(f"sessiontree: warning: {problem}")
    return 1


SPINNER_AFTER = 0.4  # seconds of work before a command shows that it is working


@contextlib.contextmanager
def working(what: str) -> Iterator[None]:
    """A transient line on stderr, a spinner, `what` and the time taken, while a command works
    longer than `SPINNER_AFTER`, on a terminal only: `check` of a 300k-entry file worked for
    ten seconds with nothing on the screen. It is gone before the command prints its result."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    bar.add_task(escape(inert(what)), total=None)  # a file's name is not markup
    timer = threading.Timer(SPINNER_AFTER, bar.start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        bar.stop()  # erases its line; nothing when it never started


def opened(file: str) -> Session:
    """The session read-only, a spinner meanwhile on a terminal: a 100k-entry file took 3 s
    with nothing on the screen (QA)."""
    with working(f"opening {file}"):
        return open_session(file, read_only=True)

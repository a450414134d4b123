"""Opening session files and reading their first line.

A session path must name a regular file: a FIFO would block every reader forever, a device
(`/dev/zero`) would never end. Files are opened with `O_NONBLOCK` so that even opening a FIFO
returns at once, then refused by type. The header line is read with a bound and in linear time
(each chunk is searched once), and a UTF-8 byte-order mark before it is skipped, as Pi's
`JSON.parse` of the file's text does.
"""

from __future__ import annotations

import fcntl
import os
import stat

import msgspec

from ...model.errors import SessionError
from ...model.header import SessionHeader
from ..scan import full_decode

HEADER_MAX = 16 << 20  # a header is a few hundred bytes; this bounds a hostile first line
BOM = b"\xef\xbb\xbf"


def open_regular(path: str, flags: int) -> int:
    """Open `path` with `flags`, refusing anything but a regular file (without blocking)."""
    fd = os.open(path, flags | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, device or socket)"
            raise SessionError("invalid_argument", f"is {kind}; a session is a regular file", path=path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def reopen(fd: int, flags: int) -> int:
    """Another descriptor of the file behind `fd`, opened with `flags`: the same file whatever
    its path names now, through Linux's `/proc/self/fd` (OSError where there is none). The
    permissions are asked again, as for any open."""
    return os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC)


def read_only_instead(fd: int) -> int:
    """A read-only descriptor of the file behind `fd`, which is closed; `fd` itself where it
    cannot be reopened. A session that takes the writer lock for each write only holds one
    between its writes: a descriptor open for writing is how another writer tells that an
    unfinished last line may still be ended (`writers`), and it waited for a viewer's."""
    try:
        other = reopen(fd, os.O_RDONLY)
    except OSError:
        return fd
    os.close(fd)
    return other


def read_header(fd: int, path: str) -> tuple[SessionHeader, int, int]:
    """Parse the first non-blank line: (header, offset after it, its line number)."""
    offset = 0  # file offset of buf[0]
    line_no = 1
    buf = bytearray()
    searched = 0  # bytes of buf already searched for a newline
    while True:
        nl = buf.find(b"\n", searched)
        if nl < 0:
            searched = len(buf)
            if len(buf) > HEADER_MAX:
                raise SessionError(
                    "invalid_session",
                    f"line {line_no} is not a session header (over {HEADER_MAX >> 20} MB without a"
                    " line break)",
                    path=path,
                )
            chunk = os.pread(fd, 1 << 16, offset + len(buf))
            if chunk:
                buf += chunk
                continue
            if bytes(buf).strip():
                return _parse(bytes(buf), offset == 0, line_no, path), offset + len(buf), line_no
            raise SessionError(
                "invalid_session", "the file is empty (no session header); nothing to open", path=path
            )
        line = bytes(buf[:nl])
        if line.strip():
            return _parse(line, offset == 0, line_no, path), offset + nl + 1, line_no
        offset += nl + 1
        line_no += 1
        del buf[: nl + 1]
        searched = 0


def _parse(raw: bytes, at_start: bool, line_no: int, path: str) -> SessionHeader:
    if at_start and raw.startswith(BOM):
        raw = raw[len(BOM) :]
    try:
        data = full_decode(raw)
    except (msgspec.DecodeError, RecursionError, ValueError):
        raise SessionError(
            "invalid_session",
            "the first line is not valid JSON, so this is not a readable session file",
            path=path,
            line=line_no,
        ) from None
    return SessionHeader.from_dict(data, path=path)

"""Single-writer locks, keyed on the file's identity, never on its path.

A path string is a poor key: the same file reached through a symlink or a hard link has another
path, and a lock keyed on the path would admit a second writer. So the lock lives on the file
itself — the inode, whatever name it was opened by:

- `FileLock`: `flock` on the session file's own descriptor (JSONL). flock locks belong to the
  open file description, so closing some other descriptor of the file does not drop them, a
  second open of the same inode (any path, this process or another) is refused, and a process
  killed with SIGKILL loses the lock at once. Linux lists flock holders in `/proc/locks` with
  their pid, which is how a refused writer can name the holder without any sidecar file.
- `RangeLock`: an open-file-description byte-range lock (`F_OFD_SETLK`) on one byte of a database
  file far past anything SQLite locks (SQLite's own locks sit near the 1 GiB offset), one byte per
  session: a writer of one session never blocks another session's writer, and the lock is again
  on the inode. OFD locks show no pid, so the storage records the holder itself (SQLite keeps it
  in a table) and passes a `holder` callback.

No lock file is ever created: nothing with a predictable name can be swapped for a symlink, and a
directory the user cannot write does not stop a writer that may write the file itself.

Pi takes no lock; these only keep two sessiontree writers apart. Readers never lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import struct
import time
from collections.abc import Callable

from ..model.errors import SessionError
from . import dbfiles

RANGE_BASE = 1 << 40  # past any offset SQLite locks in its database file
RANGE_SLOTS = 1 << 40


def flock_holder(fd: int) -> int | None:
    """The pid holding a flock on the file behind `fd`, from `/proc/locks` (Linux), or None."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                # "1: FLOCK  ADVISORY  WRITE 9383 fe:00:2146332 0 EOF" (a "->" marks waiters)
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[2] != "->" and parts[5] == key:
                    return int(parts[4])
    except (OSError, ValueError):
        return None
    return None


HOLDER_COMMAND_MOST = 48  # characters of the holder's command line a refusal quotes
ADVICE = "; open it read-only, or wait until that writer closes it"  # for a command refused


LOCK_RECORD = "hhqqi"  # struct flock: l_type, l_whence, l_start, l_len, l_pid


def byte_lock(kind: int, offset: int) -> bytes:
    """The `struct flock` of one byte at `offset` (F_WRLCK, F_UNLCK) for fcntl's OFD locks."""
    return struct.pack(LOCK_RECORD, kind, os.SEEK_SET, offset, 1, 0)


def flock_held_elsewhere(fd: int) -> bool:
    """Whether another open file description holds a flock on the file behind `fd`, by taking
    the lock for an instant (flock has no query); True when it cannot tell."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held; anything else: it cannot tell
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def range_held_elsewhere(path: str, offset: int) -> bool:
    """Whether a `RangeLock` on byte `offset` of the file at `path` is held: asked with
    F_OFD_GETLK, which takes nothing, through a descriptor holding no lock (`dbfiles`). True
    when it cannot tell."""
    try:
        key, fd = dbfiles.borrow(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, byte_lock(fcntl.F_WRLCK, offset))
        kind = struct.unpack(LOCK_RECORD, answer)[0]
    except OSError:
        return True
    finally:
        dbfiles.give_back(key, os.O_RDONLY, fd)
    return kind != fcntl.F_UNLCK


def process_command(pid: int) -> str | None:
    """What process `pid` runs, from `/proc/PID/cmdline` (Linux): its program's name and its
    arguments, cut to `HOLDER_COMMAND_MOST` characters; None when it cannot be read. A pid
    alone did not say whether the writer was Pi, a served page's other tab or a script."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = [w.decode("utf-8", "replace") for w in f.read(4096).split(b"\0") if w]
    except OSError:
        return None
    if not words:
        return None
    if os.path.basename(words[0]).startswith("python") and len(words) > 1:
        # the module or script it runs says more than the interpreter's path
        if words[1] == "-m" and len(words) > 2:
            words = words[2:]
        elif not words[1].startswith("-"):
            words = words[1:]
    text = " ".join([os.path.basename(words[0]), *words[1:]])
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())  # one line
    return text if len(text) <= HOLDER_COMMAND_MOST else text[: HOLDER_COMMAND_MOST - 1] + "…"


def holder_named(pid: int | None) -> str:
    """How a refusal names a lock's (or a file's) holder: "pid 123: sessiontree label …", or
    "pid unknown"."""
    holder = f"pid {pid}" if pid is not None else "pid unknown"
    command = process_command(pid) if pid is not None else None
    return holder if command is None else f"{holder}: {command}"


def locked_refusal(what: str, pid: int | None) -> SessionError:
    """The `locked` error of a writer refused because process `pid` (None: unknown) writes
    `what`."""
    if pid == os.getpid():
        return SessionError("locked", f"{what} is already open for writing in this process (pid {pid})")
    return SessionError(
        "locked", f"{what} is open for writing in another process ({holder_named(pid)}){ADVICE}"
    )


WRITE_WAIT = 0.5  # seconds a write waits for the writer lock while another process holds it
WRITE_POLL = 0.005


def retry_while_locked(attempt: Callable[[], None], seconds: float = WRITE_WAIT) -> None:
    """`attempt()` (taking the lock, or asking that nobody holds it), which raises `locked`
    while another process holds it, tried again every few milliseconds for up to `seconds`.
    Writers meet each other's writes of a few milliseconds: the app, which takes the lock for
    each of its writes, turned read-only for good at one such meeting with an agent that opens
    the session for each turn (QA: one of 18 leaf moves written), and that agent was refused
    at its open when it met one of the app's."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            attempt()
            return
        except SessionError as exc:
            if exc.code != "locked" or time.monotonic() >= deadline:
                raise
        time.sleep(WRITE_POLL)


def flock_writer(path: str) -> str | None:
    """Who holds a writer's flock on the file at `path` (a JSONL session open for writing, in
    this process or another), named as a refusal names it; None when nobody does, or when the
    file cannot be opened to ask. Asked before a file is replaced: a writer keeps appending to
    its descriptor of the old file, and what it appends after is lost with it."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # a pipe put there would wait for a writer
    try:
        key, fd = dbfiles.borrow(path, flags)  # a database of ours keeps SQLite's locks (`dbfiles`)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:  # taken for an instant: flock has no query
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return holder_named(flock_holder(fd))
        except OSError:  # no flock on this file system: no sessiontree writer either
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        dbfiles.give_back(key, flags, fd)


class FileLock:
    """An exclusive flock on an open descriptor of the session file itself."""

    __slots__ = ("_fd",)

    def __init__(self) -> None:
        self._fd: int | None = None

    def acquire(self, fd: int, what: str) -> None:
        """Lock the file behind `fd` (which the caller keeps open) or raise `locked`."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise locked_refusal(what, flock_holder(fd)) from None
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP):
                # a file system without flock (some network mounts): a second sessiontree writer
                # cannot be kept out, so refuse to write rather than risk two writers
                raise SessionError(
                    "read_only", f"{what}: this file system has no file locks ({exc.strerror})"
                ) from None
            raise
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock (closing the descriptor also unlocks; this is for the explicit case)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):  # already closed: the lock went with it
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._fd = None


def session_slot(session_id: str) -> int:
    """The byte a session's writer locks: a stable hash of the id into a 2^40 range, so two
    sessions of one database practically never share a lock."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()
    return RANGE_BASE + int.from_bytes(digest[:8], "big") % RANGE_SLOTS


class RangeLock:
    """An exclusive OFD lock on one byte of a file, held through a descriptor of our own."""

    __slots__ = ("_fd", "_key", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self._fd: int | None = None
        self._key: dbfiles.Key = (0, 0)

    def acquire(self, path: str, what: str, holder: Callable[[], int | None] = lambda: None) -> None:
        """Lock byte `offset` of the file at `path`, through a descriptor of `dbfiles` (a
        database's: closing one would drop SQLite's own locks), kept while held."""
        try:
            key, fd = dbfiles.borrow(path, os.O_RDWR)
        except OSError as exc:  # a file one may only read (it ended `move` in a traceback)
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise SessionError(
                "read_only", f"{what} cannot be written ({exc.strerror}); open it read-only"
            ) from None
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, byte_lock(fcntl.F_WRLCK, self.offset))
        except OSError as exc:
            dbfiles.give_back(key, os.O_RDWR, fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise locked_refusal(what, holder()) from None
            raise
        self._fd, self._key = fd, key

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock, then give the descriptor back (parked, not closed, while SQLite has the file
        open in this process); a descriptor that cannot be unlocked is closed, which unlocks."""
        fd = self._fd
        if fd is None:
            return
        self._fd = None
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, byte_lock(fcntl.F_UNLCK, self.offset))
        except OSError:
            os.close(fd)
            return
        dbfiles.give_back(self._key, os.O_RDWR, fd)

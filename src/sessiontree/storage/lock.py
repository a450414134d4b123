"""Single-writer lock (Decision 7).

`flock` on a sidecar `<file>.lock` that holds the owner's pid, so a refused writer can say who
holds it. flock locks belong to the open file description: closing some other descriptor of the
same file (a reader, a test doing `open(path).read()`) does not drop it, unlike POSIX record
locks. The sidecar is unlinked on release; acquiring re-checks that the locked inode is still
the one at the path, so a release racing with an acquire cannot yield two owners. A process
killed with SIGKILL loses its flock at once; the stale sidecar is taken over by the next writer.

Pi takes no lock, so this only guards against other sessiontree writers. Readers never lock.
"""

from __future__ import annotations

import fcntl
import os
import threading

from ..model.errors import SessionError

_held_lock = threading.Lock()
_held: set[str] = set()  # lock paths held by this process (flock does not exclude ourselves
# across two descriptors of the same process reliably on every platform)


class WriterLock:
    __slots__ = ("_fd", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, what: str) -> None:
        real = os.path.realpath(self.path)
        with _held_lock:
            if real in _held:
                raise SessionError(
                    "locked",
                    f"{what} is already open for writing in this process (pid {os.getpid()})",
                )
            for _ in range(20):
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise SessionError(
                        "locked",
                        f"{what} is being written by another process ({holder}); open it"
                        " read-only, or wait until that writer closes it",
                    ) from None
                except OSError:
                    os.close(fd)
                    raise
                try:
                    same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
                except FileNotFoundError:
                    same = False
                if not same:  # released and unlinked while we waited: try the new file
                    os.close(fd)
                    continue
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                self._fd = fd
                _held.add(real)
                return
        raise SessionError("storage", f"could not acquire the writer lock {self.path}")

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        real = os.path.realpath(self.path)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(self._fd)
            self._fd = None
            with _held_lock:
                _held.discard(real)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"

"""Writing an export or a fork: the whole file or nothing, never over a file by accident.

The data goes to a private temp file in the target's directory (see `storage.atomic`), is
flushed to disk, and only then appears under its name: hard-linked into place when the name must
be new (so a file that appeared meanwhile is not clobbered either), renamed over the old file
when replacing was asked for. A failure at any step leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Collection, Iterable

from ..model.errors import SessionError
from ..opening import is_one_of
from ..storage.atomic import fsync_dir, private_temp, remove_abandoned, write_all
from ..storage.dbfiles import is_sqlite
from ..storage.lock import flock_writer

PURPOSE = "export"
# A piece of a file to write: the HTML page hands over its growing buffers and views of them
# rather than copies (`html_chunks`).
Chunk = bytes | bytearray | memoryview


# the command line's word for it (the library's is `force=True`, which its docstrings say)
EXISTS = "already exists; --force replaces it"


def write_file(
    target: str | os.PathLike[str],
    chunks: Chunk | Iterable[Chunk],
    *,
    force: bool = False,
    mode: int = 0o666,
    sources: Collection[str] = (),
) -> str:
    """Write `chunks` to `target` atomically; returns the path written. Without `force` an
    existing file (or symlink, or anything else) at `target` is refused; with it, still one of
    `sources` (the files of the session the data comes from) and anything but a regular file.
    `mode` is filtered by the umask like any new file's; a replaced file keeps its own
    permission bits."""
    path = os.fspath(target)
    if os.path.isdir(path):
        raise SessionError("invalid_argument", "is a directory; name a file to write", path=path)
    if is_one_of(path, sources):
        raise SessionError(
            "invalid_argument", "holds the session being read; name another file to write", path=path
        )
    if not force and os.path.lexists(path):
        raise SessionError("invalid_argument", EXISTS, path=path)
    if force:
        _replaceable(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        problem = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise SessionError("storage", f"cannot write: {directory} {problem}", path=path)
    remove_abandoned(path, PURPOSE)  # temp files of an earlier export that was killed
    try:
        fd, tmp = private_temp(path, PURPOSE, mode)
    except OSError as exc:
        raise SessionError("storage", f"cannot write here: {exc.strerror or exc}", path=path) from None
    try:
        try:
            for chunk in [chunks] if isinstance(chunks, (bytes, bytearray, memoryview)) else chunks:
                write_all(fd, chunk)
            os.fsync(fd)
            if force:
                with contextlib.suppress(OSError):
                    old = os.stat(path, follow_symlinks=False)
                    if not os.path.islink(path):
                        os.fchmod(fd, old.st_mode & 0o7777)
                os.replace(tmp, path)
            else:
                _link_new(tmp, path)
        finally:
            os.close(fd)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, FileExistsError):
            raise SessionError("invalid_argument", EXISTS, path=path) from None
        if isinstance(exc, OSError):
            raise SessionError("storage", f"cannot write: {exc.strerror or exc}", path=path) from None
        raise
    with contextlib.suppress(OSError):
        fsync_dir(path)
    return path


def _replaceable(path: str) -> None:
    """Refuse to replace anything but a regular file, a SQLite database, and a session file a
    sessiontree writer holds (`lock.flock_writer`: its next appends would go to the file replaced). The rename
    puts a new file in the place of whatever held the name: a symlink would stop pointing at
    its file, and `-o /dev/null` run as root replaced the system's null device with a file of
    the export."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return  # not there (or not readable): the write says what is wrong, if anything
    if stat.S_ISREG(mode):
        if is_sqlite(path):
            # a store of sessions, not an earlier export; its writers hold no flock, and SQLite's
            # -wal beside it would be read into whatever took its name (QA: the database and
            # an app's writes into it were gone, replaced by a one-session JSONL file)
            raise SessionError(
                "invalid_argument",
                "is a SQLite database; --force replaces an earlier export, never a database"
                " (remove it first to write there)",
                path=path,
            )
        writer = flock_writer(path)
        if writer is not None:
            raise SessionError(
                "locked",
                f"is a session open for writing ({writer}); it is not replaced while written",
                path=path,
            )
        return
    if stat.S_ISLNK(mode):
        what = f"a symbolic link (to {os.path.realpath(path)}); name the file itself to replace it"
    else:
        kind = "a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        what = f"{kind}, not a file; --force replaces files only"
    raise SessionError("invalid_argument", f"is {what}", path=path)


def _link_new(tmp: str, path: str) -> None:
    """Give the finished temp file the name `path`, which must not exist."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # a file system without hard links: the check and the rename are two steps here
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "File exists", path) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)

"""Files that appear whole or not at all, under names nobody can predict or hijack.

Every file sessiontree writes next to a user's session (a new session, an upgraded copy, a
`.torn` sidecar) is first written to a *private temp file* and then linked or renamed into place.
A private temp file is created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, under a random
name (`.<target>.sessiontree-<purpose>-<random>`): it cannot be a symlink planted in advance,
and it cannot be another file. Its creator holds a flock on it until it is in place, so a temp
file that nobody has locked is one whose creator died: `remove_abandoned` deletes exactly those
(after a kill at the wrong moment, the next writer cleans up).

`atomic_rewrite` replaces a file: temp file, fsync, hard-link the original to a backup name,
rename over the original, fsync the directory. A crash at any point leaves the old file or the
new one, never a mix. It works on the file a symlink points to, so the link survives.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
from collections.abc import Iterable

MARK = ".sessiontree-"


def fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def free_name(base: str) -> str:
    """`base`, or `base.1`, `base.2`, ... — the first that does not exist."""
    if not os.path.lexists(base):
        return base
    n = 1
    while os.path.lexists(f"{base}.{n}"):
        n += 1
    return f"{base}.{n}"


def temp_prefix(target: str, purpose: str) -> str:
    """The name prefix of private temp files made for `target` (a path) and `purpose`."""
    directory, name = os.path.split(os.path.abspath(target))
    return os.path.join(directory, f".{name}{MARK}{purpose}-")


def private_temp(target: str, purpose: str, mode: int = 0o600) -> tuple[int, str]:
    """A new, empty, locked file next to `target`: (descriptor, path). The caller writes it,
    links or renames it into place, and closes the descriptor (which drops the lock)."""
    prefix = temp_prefix(target, purpose)
    while True:
        path = prefix + secrets.token_hex(8)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except FileExistsError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd, path


def remove_abandoned(target: str, purpose: str) -> list[str]:
    """Delete private temp files for `target`/`purpose` whose creator is gone (nobody holds
    their lock). Returns the paths removed. Files we cannot open or lock are left alone."""
    prefix = temp_prefix(target, purpose)
    directory, stem = os.path.split(prefix)
    removed: list[str] = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    for name in names:
        if not name.startswith(stem):
            continue
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: its creator is still at work
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ChangedMeanwhile(Exception):
    """The file was written to while its replacement was being made (`atomic_rewrite`)."""


def atomic_rewrite(
    path: str,
    chunks: Iterable[bytes],
    *,
    backup_suffix: str = ".bak",
    unchanged_since: tuple[int, int] | None = None,
) -> str:
    """Replace the file at `path` (through any symlinks: the link is kept) with `chunks`,
    keeping the original as a backup next to the real file. Returns the backup path.

    `unchanged_since`: the (size, mtime_ns) the chunks were made from. A writer that takes no
    lock (Pi) may append meanwhile; its lines would be only in the backup, so the rewrite is
    given up (`ChangedMeanwhile`, nothing changed) if the file differs just before the swap."""
    real = os.path.realpath(path)
    mode = os.stat(real).st_mode & 0o777
    fd, tmp = private_temp(real, "rewrite", mode)
    backup = ""
    try:
        try:
            for chunk in chunks:
                write_all(fd, chunk)
            os.fsync(fd)
            backup = free_name(real + backup_suffix)
            try:
                os.link(real, backup)
            except OSError:  # file systems without hard links
                shutil.copy2(real, backup)
            if unchanged_since is not None:
                st = os.stat(real)
                if (st.st_size, st.st_mtime_ns) != unchanged_since:
                    raise ChangedMeanwhile(real)
            os.replace(tmp, real)
        finally:
            os.close(fd)
    except BaseException:
        if backup and os.path.lexists(tmp):  # not replaced: the backup would be a stray copy
            with contextlib.suppress(OSError):
                os.unlink(backup)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(real)
    return backup

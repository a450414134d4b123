"""Whole-file rewrites that cannot leave a half-written session behind.

Steps: write a temp file in the same directory, fsync it, hard-link the original to a backup
name, rename the temp file over the original, fsync the directory. A crash at any point leaves
either the old file (plus possibly a stray temp file or backup link) or the new one, never a
mix. Used by `JsonlStorage.upgrade`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable


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


def atomic_rewrite(path: str, chunks: Iterable[bytes], *, backup_suffix: str = ".bak") -> str:
    """Replace `path` with `chunks`, keeping the original as a backup. Returns the backup path."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o777
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        backup = free_name(path + backup_suffix)
        try:
            os.link(path, backup)
        except OSError:  # filesystems without hard links
            shutil.copy2(path, backup)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path)
    return backup

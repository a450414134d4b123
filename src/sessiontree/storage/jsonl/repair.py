"""Mending the end of a session file without ever cutting it.

Another program (Pi takes no lock) may append to the file at any moment, so nothing here ever
truncates: a truncate computed from a size read a moment earlier would cut off whatever that
program appended since. Instead, damage is *blanked in place*: the bytes of a torn fragment, or of
our own half-written append, are overwritten with spaces, keeping every newline and ending the
region with one, so the region reads as blank lines, which every reader skips (Pi's loaders, and
ours). This is safe by construction:

- appenders (O_APPEND) only ever write at the end of the file, past the region; blanking never
  touches their bytes, however the two interleave;
- a line another program glued onto the region (appended before the region was terminated) ends up
  on a line of its own, after the newline the blanking puts at the region's end; a JSON line with
  leading spaces is still the same JSON line, so that entry is rescued rather than lost;
- the bytes blanked are ours, or a torn fragment that is first copied, byte for byte and fsynced,
  into a `<file>.torn` sidecar — nothing leaves the disk without a copy.

Blanking writes through a descriptor of our own without O_APPEND (on Linux, `pwrite` on an
O_APPEND descriptor appends), after checking that it is the same file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ...model.errors import SessionError
from ..atomic import free_name, fsync_dir, private_temp, remove_abandoned, write_all

LEFTOVER_PURPOSES = ("new", "rewrite")  # temp files of `create` and of `upgrade`


def blank(region: bytes) -> bytes:
    """`region` with every byte but newlines turned into a space, ending with a newline."""
    if not region:
        return region
    out = bytearray(b" " * len(region))
    start = 0
    while (k := region.find(b"\n", start)) >= 0:
        out[k] = 0x0A
        start = k + 1
    out[-1] = 0x0A
    return bytes(out)


def blank_regions(path: str, inode: int, regions: Sequence[tuple[int, int]], *, durable: bool) -> None:
    """Overwrite each (offset, length) region of the file with `blank` of its bytes. Raises
    OSError when it cannot; `SessionError` when the path now names another file."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        if os.fstat(fd).st_ino != inode:
            raise SessionError("storage", "the session file was replaced on disk", path=path)
        for offset, length in regions:
            data = blank(os.pread(fd, length, offset))
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], offset + written)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def keep_copy(path: str, fragment: bytes) -> str:
    """Copy a torn fragment into `<file>.torn` (or `.torn.1`, ...), fsynced, and return the
    sidecar's path. A sidecar left by an interrupted earlier repair that already holds exactly
    these bytes is reused, so a repair that is redone never makes a second copy."""
    base = path + ".torn"
    existing = _existing_copy(base, fragment)
    if existing is not None:
        return existing
    fd, tmp = private_temp(base, "torn")
    try:
        write_all(fd, fragment)
        os.fsync(fd)
        while True:  # link, not rename: a name that exists is never replaced
            target = free_name(base)
            try:
                os.link(tmp, target)
                break
            except FileExistsError:
                continue
    finally:
        os.close(fd)
        os.unlink(tmp)
    fsync_dir(target)
    return target


def _existing_copy(base: str, fragment: bytes) -> str | None:
    for name in [base] + [f"{base}.{n}" for n in range(1, 100)]:
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


def remove_leftovers(path: str) -> list[str]:
    """Temp files that writers killed at the wrong moment left next to `path` (an unfinished
    create or upgrade, an unfinished `.torn` copy): exactly the ones nobody holds anymore."""
    removed = [p for purpose in LEFTOVER_PURPOSES for p in remove_abandoned(path, purpose)]
    removed += remove_abandoned(path + ".torn", "torn")
    return removed

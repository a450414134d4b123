"""Whether another process holds a file open for writing, asked of Linux's `/proc`.

A session file's unfinished last line is judged cut short by a crash when the file has been
quiet for a while (`storage.PENDING_SECONDS`), since Pi writes each line with one call. A writer
that keeps the file open and pauses in the middle of a line (stopped with Ctrl+Z, a slow disk)
is not finished, though: blanking its fragment then turns the rest of its line, when it comes,
into a line of garbage and loses its entry. While some process has the file open for writing,
the line is still being written.

Only processes whose `/proc/PID/fd` this user may read are seen (the user's own, or all of them
as root); elsewhere than Linux nothing is known and the answer is None, the quiet rule alone.
"""

from __future__ import annotations

import os

from ..procfs import PROC, descriptors

WRITE_MODES = 0o3  # O_WRONLY | O_RDWR in an fd's `flags:` line (octal, as fdinfo shows it)


def writer_elsewhere(dev: int, ino: int) -> int | None:
    """The pid of a process other than this one and its children that has the file (`dev`,
    `ino`) open for writing, or None. The children are left out: they inherit this process's
    own descriptors (the helper processes that index and check the file while the app draws)."""
    me = os.getpid()
    try:
        pids = [name for name in os.listdir(PROC) if name.isdigit() and int(name) != me]
    except OSError:
        return None
    for pid in pids:
        for fd in descriptors(pid, (dev, ino)):
            if _writes(pid, fd) and _parent(pid) != me:
                return int(pid)
    return None


def _writes(pid: str, fd: str) -> bool:
    try:
        with open(f"{PROC}/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            for line in info:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & WRITE_MODES != 0
    except (OSError, ValueError):
        pass
    return False


def _parent(pid: str) -> int:
    try:
        with open(f"{PROC}/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # "PID (name) STATE PPID ...": the name may hold spaces and parentheses
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1

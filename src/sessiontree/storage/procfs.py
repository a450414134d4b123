"""Which descriptors of a process are open on a file, asked of Linux's `/proc`.

Two questions need it: whether another program is still writing a session file
(`jsonl.writers`), and where a SQLite database this process has open went when its path was
given to another file (`sqlite.wal`). Elsewhere than Linux, or for another user's process,
nothing is found.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

PROC = "/proc"


def descriptors(pid: str, key: tuple[int, int]) -> Iterator[str]:
    """The descriptors (their names under `/proc/PID/fd`) of process `pid` ("self": this
    one) open on the file `key` (device, inode); none when they cannot be read."""
    fds = f"{PROC}/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:  # gone, not ours to read, or no /proc
        return
    for name in names:
        try:
            st = os.stat(f"{fds}/{name}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == key:
            yield name

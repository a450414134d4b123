"""The byte check that indexing leaves for later.

The fast index decodes only the fields the tree needs and skips over message text without
looking at its encoding, so invalid UTF-8 inside skipped text would go unnoticed. This pass reads
the indexed lines in blocks and checks every non-ASCII block line by line (about 4% of a real
file). A browser runs it after its first paint, in a helper process (`check_utf8_elsewhere`) so the
interpreter lock stays with the keys; the library and the CLI run it at open; writes always wait
for it.

    python -m sessiontree.storage.jsonl.verify FD START STOP   # the helper (arrays on stdin)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from array import array
from collections.abc import Sequence

from ...model.errors import Diagnostic
from ..scan import utf8_ok

BLOCK_LINES = 8192
# Bytes below which `elsewhere` checks here all the same: a few milliseconds of work, against a
# helper process that costs ~0.2 s of a core to start (it imports this package), for every small
# session a browser opens.
ELSEWHERE_BYTES = 4 << 20
HALT_POLL = 0.1  # seconds between looks at `halt` while the helper works
HELPER_SECONDS = 600  # a helper taking longer is given up on (the check runs here instead)


def check_utf8(
    fd: int,
    offsets: Sequence[int],
    lengths: Sequence[int],
    lines: Sequence[int],
    ids: Sequence[str],
    start: int,
    stop: int,
    *,
    elsewhere: bool = False,
    halt: threading.Event | None = None,
) -> list[Diagnostic]:
    """Diagnostics for the entries in positions [start, stop) whose line is not valid UTF-8.
    `elsewhere`: in a helper process, falling back to this one if it cannot run; here all the
    same for fewer than `ELSEWHERE_BYTES`. `halt` set: `Halted` is raised within a block or a
    tenth of a second, the helper stopped (a browser quitting does not wait for the check)."""
    bad = None
    if (
        elsewhere
        and start < stop
        and offsets[stop - 1] + lengths[stop - 1] - offsets[start] >= ELSEWHERE_BYTES
    ):
        bad = check_utf8_elsewhere(fd, offsets, lengths, start, stop, halt=halt)
    if bad is None:
        bad = invalid_lines(fd, offsets, lengths, start, stop, halt=halt)
    return [utf8_damage(lines[j], ids[j]) for j in bad]


class Halted(Exception):
    """The check stopped before its end (`check_utf8`'s `halt`)."""


def utf8_damage(line: int, entry_id: str | None) -> Diagnostic:
    """The diagnostic of a line that is not UTF-8 (read with U+FFFD: `JsonlStorage._decode`)."""
    return Diagnostic(
        "error",
        "invalid_utf8",
        f"line {line} is not valid UTF-8 text (read with U+FFFD in place of its bad bytes, as Pi reads it)",
        line,
        entry_id,
    )


def invalid_lines(
    fd: int,
    offsets: Sequence[int],
    lengths: Sequence[int],
    start: int,
    stop: int,
    *,
    halt: threading.Event | None = None,
) -> list[int]:
    """Positions in [start, stop) whose line is not valid UTF-8."""
    found = []
    k = start
    while k < stop:
        if halt is not None and halt.is_set():
            raise Halted
        first = offsets[k]
        end = min(stop, k + BLOCK_LINES)
        block = os.pread(fd, offsets[end - 1] + lengths[end - 1] - first, first)
        if not block.isascii():
            for j in range(k, end):
                if not utf8_ok(block[offsets[j] - first : offsets[j] - first + lengths[j]]):
                    found.append(j)
        k = end
    return found


def check_utf8_elsewhere(
    fd: int,
    offsets: Sequence[int],
    lengths: Sequence[int],
    start: int,
    stop: int,
    *,
    halt: threading.Event | None = None,
) -> list[int] | None:
    """`invalid_lines` in a child process reading the same open file (the descriptor is passed
    on, so a file renamed meanwhile is still the one checked). The line table goes over stdin
    as raw arrays; the answer comes back as positions, one per line. None if the child could
    not be run or did not answer as expected: the caller checks here then. `halt` set: the
    child is killed and `Halted` raised."""
    command = [sys.executable, "-m", __name__, str(fd), str(start), str(stop)]
    # The table goes in a file, not a pipe: waiting on the child a tenth of a second at a time
    # (`communicate` with a timeout, again and again) stops writing to its stdin after the first
    # wait, and a table over a pipe's 64 KiB left the child waiting for the rest (the browser's
    # first write then froze with it, QA).
    try:
        with tempfile.TemporaryFile() as table:
            table.write(array("q", offsets[start:stop]).tobytes())
            table.write(array("q", lengths[start:stop]).tobytes())
            table.seek(0)
            child = subprocess.Popen(
                command, stdin=table, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=(fd,)
            )
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        answer = _answer(child, halt)
    finally:
        if child.poll() is None:  # halted, or an error on the way: no child outlives the check
            child.kill()
            child.wait()
    if answer is None or child.returncode != 0:
        return None
    try:
        found = [int(word) for word in answer.split()]
    except ValueError:
        return None
    return found if all(start <= j < stop for j in found) else None


def _answer(child: subprocess.Popen[bytes], halt: threading.Event | None) -> bytes | None:
    """What the child writes, waited for a tenth of a second at a time while `halt` is clear
    (at most `HELPER_SECONDS`); None if it could not be talked to or took longer."""
    waited = 0.0
    while True:
        try:
            out, _ = child.communicate(timeout=HALT_POLL)
            return out
        except subprocess.TimeoutExpired:
            waited += HALT_POLL
        except (OSError, ValueError):
            return None
        if halt is not None and halt.is_set():
            raise Halted
        if waited >= HELPER_SECONDS:
            return None


def _main(argv: list[str]) -> int:
    fd, start, stop = (int(a) for a in argv)
    table = sys.stdin.buffer.read()
    count = stop - start
    offsets, lengths = array("q"), array("q")
    offsets.frombytes(table[: 8 * count])
    lengths.frombytes(table[8 * count :])
    if len(offsets) != count or len(lengths) != count:
        return 2
    shift = [0] * start  # positions are absolute: pad so offsets[j] works for j >= start
    bad = invalid_lines(fd, shift + offsets.tolist(), shift + lengths.tolist(), start, stop)
    sys.stdout.write("".join(f"{j}\n" for j in bad))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

"""The byte check that indexing leaves for later.

The fast index decodes only the fields the tree needs and skips over message text without
looking at its encoding, so invalid UTF-8 inside skipped text would go unnoticed. This pass reads
the indexed lines in blocks and checks every non-ASCII block line by line (about 4% of a real
file). A browser runs it after its first paint; the library and the CLI at open; writes always
wait for it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ...model.errors import Diagnostic
from ..scan import utf8_ok

BLOCK_LINES = 8192


def check_utf8(
    fd: int,
    offsets: Sequence[int],
    lengths: Sequence[int],
    lines: Sequence[int],
    ids: Sequence[str],
    start: int,
    stop: int,
) -> list[Diagnostic]:
    """Diagnostics for the entries in positions [start, stop) whose line is not valid UTF-8."""
    found = []
    k = start
    while k < stop:
        first = offsets[k]
        end = min(stop, k + BLOCK_LINES)
        block = os.pread(fd, offsets[end - 1] + lengths[end - 1] - first, first)
        if not block.isascii():
            for j in range(k, end):
                raw = block[offsets[j] - first : offsets[j] - first + lengths[j]]
                if not utf8_ok(raw):
                    found.append(
                        Diagnostic(
                            "error",
                            "invalid_utf8",
                            f"line {lines[j]} is not valid UTF-8 text",
                            lines[j],
                            ids[j],
                        )
                    )
        k = end
    return found

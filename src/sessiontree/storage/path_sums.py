"""`TreeIndex.path_facts` over a long path, with array operations.

A path through a session of many nested retries crosses tens of thousands of runs (90,909 on a
million-entry file of 300-deep retries), and summing them one by one in Python took 0.6 s of the
interpreter, which the keys wait for while the preview's worker holds it. Here each fact is a
lookup in a table of the whole log made once (the positions of each kind of entry, and a running
count of messages), vectorized over the path's runs: about 40 ms for that path.

Imported only for such paths (numpy's import is a tenth of a second).
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .index import Facts


class Tables:
    """What `facts_down` looks up, for the first `size` positions of a log: the positions of
    compactions, thinking-level changes, model sources (a model change or an assistant
    message) and active-tools changes, and `before[p]`: how many of the positions below `p`
    hold a message kind. The kinds of positions never change once indexed, so the tables hold
    for every path that stays below `size`."""

    __slots__ = ("before", "size", "slots")

    def __init__(
        self, kind: bytes, role: bytes, codes: tuple[int, int, int, int, int, int], messages: tuple[int, ...]
    ) -> None:
        compaction, thinking, model_change, tools, message, assistant = codes
        size = min(len(kind), len(role))  # another thread may be appending one after the other
        k = np.frombuffer(kind, np.uint8, size)
        r = np.frombuffer(role, np.uint8, size)
        self.size = size
        self.slots: list[NDArray[np.intp]] = [
            np.flatnonzero(k == compaction),
            np.flatnonzero(k == thinking),
            np.flatnonzero((k == model_change) | ((k == message) & (r == assistant))),
            np.flatnonzero(k == tools),
        ]
        before = np.zeros(size + 1, np.int32)
        np.cumsum(np.isin(k, messages), out=before[1:])
        self.before = before


def facts_down(
    tables: Tables, runs: list[tuple[int, int]], above: Facts, every: int
) -> tuple[Facts, dict[int, Facts]]:
    """The facts at the foot of the first of `runs` (nearest first, as `TreeIndex.ranges` gives
    them, over `above`: what holds at the last one's parent), and those at the foot of every
    `every`-th run after it, by its last position (what `TreeIndex.path_facts` keeps: one in
    `every` keeps a path's kept answers a few megabytes at a million entries, and a walk
    meeting the path goes at most `every` runs further)."""
    flat = np.fromiter(chain.from_iterable(reversed(runs)), np.int64, 2 * len(runs))
    down = flat.reshape(-1, 2)  # root-most first
    lo, hi = down[:, 0], down[:, 1]
    length = above[0] + np.cumsum(hi - lo + 1)
    before = tables.before
    messages = above[5] + np.cumsum(before[hi + 1] - before[lo])
    steps = np.arange(len(down))
    nearest = []
    for slot, positions in enumerate(tables.slots, 1):
        if not len(positions):
            nearest.append(np.full(len(down), above[slot], np.int64))
            continue
        j = np.searchsorted(positions, hi, side="right") - 1
        found = positions[np.maximum(j, 0)]
        inside = (j >= 0) & (found >= lo)
        # the nearest run to each one, going up from it (itself included), holding such an entry
        last = np.maximum.accumulate(np.where(inside, steps, -1))
        nearest.append(np.where(last >= 0, found[np.maximum(last, 0)], above[slot]))
    columns = [length, *nearest, messages]
    foot = len(down) - 1
    kept = steps[foot - every :: -every] if foot >= every else steps[:0]
    rows = zip(*(c[kept].tolist() for c in columns), strict=True)
    facts: Facts = tuple(int(c[foot]) for c in columns)  # type: ignore[assignment]
    return facts, dict(zip(hi[kept].tolist(), rows, strict=True))

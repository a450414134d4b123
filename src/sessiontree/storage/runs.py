"""The tree cut into runs, the unit that makes walks over a million-entry session cheap.

A run is a stretch of consecutive positions where each entry is the only child of the one before
it. An agent appends its turns one after another, so a session of a million entries is a few
thousand runs: the path from an entry to its root is a handful of position ranges (C-speed
`range`/`bytearray.rfind` work instead of a Python step per entry), and the outline lays out
whole runs at once.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .index import TreeIndex

NONE = -1


def children(first_child: Sequence[int], next_sibling: Sequence[int], i: int) -> list[int]:
    """The children of `i`, oldest first."""
    out: list[int] = []
    c = first_child[i]
    while c != NONE:
        out.append(c)
        c = next_sibling[c]
    return out


class Runs:
    """The tree cut into runs: `lo[r]..hi[r]-1` are consecutive positions, each the only child
    of the one before it; runs are in position order, and the children of a run's last entry
    all start runs. Updated in O(new entries) as the log grows."""

    __slots__ = ("_kids", "_lock", "_relinks", "_up", "derived", "hi", "index", "lo", "seen")

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self.lo: list[int] = []
        self.hi: list[int] = []
        # first position of a run -> where the children of its last entry are (they start runs)
        self._kids: dict[int, list[int]] = {}
        # first position of a run -> first position of the run holding its first entry's parent
        # (-1: a root), so a walk up a path takes a dict lookup per run, not a bisection
        self._up: dict[int, int] = {}
        self._relinks = index.relinks
        self._lock = threading.Lock()  # workers (preview, sizes) walk paths while keys rebuild
        self.seen = 0
        # What the layers above derive from the runs and keep with them (the outline's array
        # layout keeps its structure here and brings it up to date itself).
        self.derived: dict[str, object] = {}
        self.update()

    def update(self) -> None:
        """Take in the entries appended since the last call."""
        if self.seen == len(self.index) and self.index.relinks == self._relinks:
            return
        with self._lock:
            self._update()

    def _update(self) -> None:
        index = self.index
        parent, first_child = index.parent, index.first_child
        lo, hi, kids, up = self.lo, self.hi, self._kids, self._up
        next_sibling = index.next_sibling
        late: list[int] = []  # runs whose first entry's parent comes later in the file (adopted)
        for j in range(self.seen, len(index)):
            p = parent[j]
            if p == j - 1 and hi and hi[-1] == j and first_child[p] == j:
                hi[-1] = j + 1  # the common case: the next turn of the same conversation
                continue
            up[j] = NONE
            if 0 <= p < j:
                r = bisect_right(lo, p) - 1
                if hi[r] > p + 1:  # p's run went on past it: p now has a second child
                    lo.insert(r + 1, p + 1)
                    hi.insert(r + 1, hi[r])
                    hi[r] = p + 1
                    up[p + 1] = lo[r]
                    moved = kids.pop(lo[r], None)  # the old last entry now ends the new run
                    if moved is not None:
                        kids[p + 1] = moved
                    for head in children(first_child, next_sibling, hi[r + 1] - 1):
                        if head < j:  # runs already made below the old last entry
                            up[head] = p + 1
                else:
                    kids.pop(lo[r], None)
                up[j] = lo[r]
            elif p > j:  # a parent written after its child adopted it: j already starts a run
                late.append(j)
            lo.append(j)
            hi.append(j + 1)
        if index.relinks != self._relinks:  # an adoption may have added children to any run
            self._relinks = index.relinks
            kids.clear()
            late = lo
        for start in late:
            p = parent[start]
            up[start] = lo[bisect_right(lo, p) - 1] if p >= 0 else NONE
        self.seen = len(index)

    def __len__(self) -> int:
        return len(self.lo)

    def kids(self, r: int) -> list[int]:
        """The runs started by the children of run `r`'s last entry, oldest first."""
        lo = self.lo
        heads = self._kids.get(lo[r])
        if heads is None:
            index = self.index
            heads = self._kids[lo[r]] = children(index.first_child, index.next_sibling, self.hi[r] - 1)
        return [bisect_right(lo, h) - 1 for h in heads]

    def path(self, i: int) -> Iterator[tuple[int, int]]:
        """The path from `i` up to its root as `(lo, i)` position ranges, nearest first: each
        range is consecutive positions of one run, walked from `i` down to `lo`."""
        lo_of, up, parent = self.lo, self._up, self.index.parent
        if not 0 <= i < len(self.index) or i >= self.seen:
            return
        lo = lo_of[bisect_right(lo_of, i) - 1]
        while True:
            yield lo, i
            i = parent[lo]
            if i < 0:
                return
            lo = up[lo]  # the run whose last entry is i

    def of(self, i: int) -> int:
        """The run holding position `i`."""
        return bisect_right(self.lo, i) - 1

"""The outline's pieces computed with array operations, for trees of many runs.

`Outline` lays out a tree one run at a time in Python, a few microseconds per run: fine for an
agent's session (a million entries are a few thousand runs), too slow for a session of many
forks (a retry every ten turns makes a million entries 180,000 runs: 0.7 s per filter, fold or
leaf move). This module computes the same pieces from whole-tree arrays (numpy): a run's rows,
column and place in the drawing order each follow from its place in the tree's preorder, so
every key costs a fixed number of passes over the runs at C speed.

The drawing order is the preorder of the runs drawn (children oldest first), except that at a
fork the child toward the leaf is drawn after its siblings; those few forks are rotations of
contiguous stretches. A run nobody draws (nothing in it passes the filter) hands its children
to its nearest drawn ancestor; a folded run hides its whole subtree. The result must equal
`Outline`'s own loop, which the tests hold it to on random trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Collection

    from .storage.index import TreeIndex
    from .storage.runs import Runs

MAX_ROTATIONS = 64  # forks where the path takes an older child; past this the loop is cheaper
FIND_MAX = 4096  # runs starting with a hidden entry searched one by one; more: bisection


@dataclass(slots=True)
class Pieces:
    """What `Outline` keeps per build (see its attributes of the same names)."""

    p_lo: memoryview
    p_hi: memoryview
    p_row: memoryview
    p_count: memoryview
    p_first: memoryview
    p_rest: memoryview
    piece_of: memoryview  # run -> its piece, -1 for runs not drawn
    fork_rows: memoryview
    side_roots: memoryview
    cut: set[int]  # runs cut short by a fold
    rows: int
    deepest: int


class _Shape:
    """Arrays of the runs' structure that do not depend on filter, folds or leaf, kept with the
    runs (`Runs.derived`) and brought up to date as entries are appended: an appended turn
    lengthens the last run; a fork splits a run and adds one, which shifts preorder numbers by
    one at C speed instead of numbering every run again (a leaf move appends such an entry)."""

    __slots__ = ("hi", "lo", "par", "pre", "preorder", "relinks", "seen", "size")

    def __init__(self, index: TreeIndex, runs: Runs) -> None:
        count = len(runs)
        self.relinks = index.relinks
        self.seen = runs.seen
        self.lo = np.array(runs.lo, dtype=np.int64)
        self.hi = np.array(runs.hi, dtype=np.int64)
        parent = np.frombuffer(index.parent, dtype=np.int32)
        first_parent = parent[self.lo]
        par = np.searchsorted(self.lo, first_parent, side="right") - 1
        par[first_parent < 0] = -1
        self.par = par
        # Subtree sizes bottom-up, then preorder numbers top-down: a parent's run comes before its
        # children's (no adoptions: the caller checks), and siblings are in file order.
        parents = par.tolist()
        size = [1] * count
        for r in range(count - 1, 0, -1):
            p = parents[r]
            if p >= 0:
                size[p] += size[r]
        pre = [0] * count
        free = [0] * count  # the next preorder number inside each run's subtree
        top = 0
        for r in range(count):
            p = parents[r]
            if p < 0:
                at = top
                top += size[r]
            else:
                at = free[p]
                free[p] = at + size[r]
            pre[r] = at
            free[r] = at + 1
        self.size = np.array(size, dtype=np.int64)
        self.pre = np.array(pre, dtype=np.int64)
        self.preorder = np.empty(0, dtype=np.int64)
        self._number()

    def _number(self) -> None:
        self.preorder = np.empty(len(self.pre), dtype=np.int64)
        self.preorder[self.pre] = np.arange(len(self.pre), dtype=np.int64)

    def catch_up(self, index: TreeIndex, most: int) -> bool:
        """Take in the entries appended since, as `Runs.update` does; False (changing nothing
        that matters: the caller starts over) if more than `most` of them start runs."""
        parent, first_child = index.parent, index.first_child
        start, end = self.seen, len(index)
        starts = 0
        for j in range(start, end):  # after entry j, whatever it was, the last run ends at j + 1
            p = parent[j]
            if not (p == j - 1 and first_child[p] == j and (j > start or self.hi[-1] == j)):
                starts += 1
        if starts > most:
            return False
        for j in range(start, end):
            p = parent[j]
            if p == j - 1 and first_child[p] == j and self.hi[-1] == j:
                self.hi[-1] = j + 1  # the next turn of the same conversation
                continue
            q = -1
            if 0 <= p < j:
                q = int(np.searchsorted(self.lo, p, side="right")) - 1
                if self.hi[q] > p + 1:
                    self._split(q, p)
            self._add(j, q)
        self.seen = end
        self._number()
        return True

    def _within(self, r: int) -> Any:
        """Runs whose subtree holds run `r` (itself included)."""
        return (self.pre <= self.pre[r]) & (self.pre[r] < self.pre + self.size)

    def _split(self, r: int, p: int) -> None:
        """Run `r` ends at `p` now; the rest of it becomes run `r + 1`, holding its children."""
        new = r + 1
        self.size[self._within(r)] += 1  # one run more below r and its ancestors
        at = int(self.pre[r])
        pre = self.pre + (self.pre > at)
        par = self.par + (self.par > r)
        par[self.par == r] = new
        self.lo = np.insert(self.lo, new, p + 1)
        self.hi = np.insert(self.hi, new, self.hi[r])
        self.hi[r] = p + 1
        self.par = np.insert(par, new, r)
        self.pre = np.insert(pre, new, at + 1)
        self.size = np.insert(self.size, new, self.size[r] - 1)

    def _add(self, j: int, q: int) -> None:
        """A run starting at `j`, the newest child of run `q` (-1: a root)."""
        if q >= 0:
            at = int(self.pre[q] + self.size[q])
            self.size[self._within(q)] += 1
            self.pre[self.pre >= at] += 1
        else:
            at = len(self.pre)
        self.lo = np.append(self.lo, j)
        self.hi = np.append(self.hi, j + 1)
        self.par = np.append(self.par, q)
        self.pre = np.append(self.pre, at)
        self.size = np.append(self.size, 1)


CATCH_UP_MOST = 64  # new runs taken in one at a time; past this, number them all again


def _shape(index: TreeIndex, runs: Runs) -> _Shape:
    shape = runs.derived.get("layout")
    if (
        not isinstance(shape, _Shape)
        or shape.relinks != index.relinks
        or shape.seen > len(index)
        or not shape.catch_up(index, CATCH_UP_MOST)
        or len(shape.lo) != len(runs)
    ):
        shape = runs.derived["layout"] = _Shape(index, runs)
    return shape


def path_marks(index: TreeIndex, runs: Runs, leaf: int) -> bytes:
    """One byte per entry, 1 on the path from `leaf` up to its root (no adoptions)."""
    n = len(index)
    if leaf < 0:
        return bytes(n)
    shape = _shape(index, runs)
    r = int(np.searchsorted(shape.lo, leaf, side="right")) - 1
    pre, size = shape.pre, shape.size
    on = np.flatnonzero((pre <= pre[r]) & (pre[r] < pre + size))  # the leaf's run and its ancestors
    ends = shape.hi[on]
    ends[on == r] = leaf + 1
    steps = np.zeros(n + 1, dtype=np.int8)
    steps[shape.lo[on]] = 1
    steps[ends] -= 1
    return np.cumsum(steps[:-1], dtype=np.int8).astype(np.uint8).tobytes()


def _ints(values: Any) -> memoryview:
    """A view of an int64 array that Python indexes as plain ints (bisect, `a[k] += 1`), without
    copying it into a list."""
    data: Any = np.ascontiguousarray(values, dtype=np.int64)  # numpy arrays export the buffer protocol
    return memoryview(data).cast("B").cast("q")


def lay_out(
    index: TreeIndex,
    runs: Runs,
    vis: bytearray,
    marks: bytes | bytearray,
    folded: Collection[int],
) -> Pieces | None:
    """The pieces of the outline, or None when the loop should do it (adoptions, or a path
    through many older children)."""
    if index.relinks or not len(runs) or runs.hi[-1] != len(vis):
        return None
    shape = _shape(index, runs)
    lo, hi, par, pre, size = shape.lo, shape.hi, shape.par, shape.pre, shape.size
    count = len(lo)
    n = len(vis)
    mask = np.frombuffer(vis, dtype=np.uint8)
    shown_before = np.zeros(n + 1, dtype=np.int32)  # shown entries before each position
    np.cumsum(mask, dtype=np.int32, out=shown_before[1:])
    full = (shown_before[hi] - shown_before[lo]).astype(np.int64)
    shown = full > 0

    # Folds: the first folded visible entry of a run cuts it; nothing below is drawn.
    cut_runs, cut_at = _cuts(folded, mask, lo)
    end = hi.copy()
    rows_in = full.copy()
    hidden = np.zeros(count, dtype=bool)
    if len(cut_runs):
        end[cut_runs] = cut_at + 1
        rows_in[cut_runs] = shown_before[cut_at + 1] - shown_before[lo[cut_runs]]
        steps = np.zeros(count + 1, dtype=np.int64)
        np.add.at(steps, pre[cut_runs] + 1, 1)
        np.add.at(steps, pre[cut_runs] + size[cut_runs], -1)
        hidden = (np.cumsum(steps[:-1]) > 0)[pre]
    drawn = shown & ~hidden
    above = _nearest(drawn, par)  # runs nobody draws hand on their children

    order = shape.preorder[drawn[shape.preorder]]  # drawn runs in preorder
    group = above[order] + 1  # 0: the roots' group
    kids = np.bincount(group, minlength=count + 1)
    in_fork = kids[group] >= 2
    # First shown entries matter only for children of forks (the path's child, side roots).
    first_o = np.full(len(order), n, dtype=np.int64)
    fork_kids = order[in_fork]
    first_o[in_fork] = _first_shown(vis, mask, shown_before, lo[fork_kids], hi[fork_kids])
    mark_bytes = np.frombuffer(bytes(marks), dtype=np.uint8)
    marked = np.zeros(len(order), dtype=bool)
    inside = first_o < len(mark_bytes)
    marked[inside] = mark_bytes[first_o[inside]] == 1
    last_pre = np.full(count + 1, -1, dtype=np.int64)
    np.maximum.at(last_pre, group, pre[order])
    has_marked = np.zeros(count + 1, dtype=bool)
    has_marked[group[marked]] = True
    pre_o = pre[order]
    is_last = pre_o == last_pre[group]
    main = marked | (~has_marked[group] & is_last)
    side = in_fork & ~main

    # Columns: a side branch adds one to every run in its subtree.
    steps = np.zeros(count + 1, dtype=np.int64)
    sides = order[side]
    np.add.at(steps, pre[sides], 1)
    np.add.at(steps, pre[sides] + size[sides], -1)
    depth = np.cumsum(steps[:-1])[pre_o]

    # The path's child drawn after its siblings: rotate its stretch past theirs, top down.
    rotate = np.flatnonzero(marked & ~is_last & in_fork)
    if len(rotate) > MAX_ROTATIONS:
        return None
    seq = np.arange(len(order))
    if len(rotate):
        before = np.zeros(count + 1, dtype=np.int64)  # drawn runs before each preorder number
        before[1:] = np.cumsum(drawn[shape.preorder])
        shift = 0
        for j in rotate.tolist():
            c = int(order[j])
            s = int(above[c])
            a = int(before[pre[c]]) + shift
            b = int(before[pre[c] + size[c]]) + shift
            e = (int(before[pre[s] + size[s]]) if s >= 0 else len(order)) + shift
            seq[a:e] = np.concatenate((seq[b:e], seq[a:b]))
            shift += e - b
    runs_o = order[seq]
    count_o = rows_in[runs_o]
    row_o = np.zeros(len(runs_o), dtype=np.int64)
    np.cumsum(count_o[:-1], out=row_o[1:])
    depth_s = depth[seq]
    rest = 2 * depth_s
    first_pid = rest - side[seq]
    piece_of = np.full(count, -1, dtype=np.int64)
    piece_of[runs_o] = np.arange(len(runs_o))

    forks = kids[runs_o + 1] >= 2
    fork_rows = (row_o + count_o - 1)[forks]
    if len(cut_runs):  # a folded row is a fork's if nothing shown follows it in its run
        kids_unfolded = np.bincount(_nearest(shown, par)[shown] + 1, minlength=count + 1)
        k = piece_of[cut_runs]
        fork = (k >= 0) & (shown_before[hi[cut_runs]] == shown_before[cut_at + 1])
        fork &= kids_unfolded[cut_runs + 1] > 1
        folded_rows = (row_o + count_o - 1)[k[fork]]
        fork_rows = np.sort(np.concatenate((fork_rows, folded_rows)))

    # Side branches' first entries, in the order the loop finds them: fork by fork as drawn,
    # oldest first within a fork.
    side_j = np.flatnonzero(side)
    parent_piece = np.where(group[side_j] > 0, piece_of[np.maximum(group[side_j] - 1, 0)], -1)
    ranked = side_j[np.lexsort((pre_o[side_j], parent_piece))]
    side_roots = first_o[ranked]

    return Pieces(
        p_lo=_ints(lo[runs_o]),
        p_hi=_ints(end[runs_o]),
        p_row=_ints(row_o),
        p_count=_ints(count_o),
        p_first=_ints(first_pid),
        p_rest=_ints(rest),
        piece_of=_ints(piece_of),
        fork_rows=_ints(fork_rows),
        side_roots=_ints(side_roots),
        cut=set(cut_runs.tolist()),
        rows=int(count_o.sum()),
        deepest=int(depth.max()) if len(depth) else 0,
    )


def _first_shown(vis: bytearray, mask: Any, shown_before: Any, lo: Any, hi: Any) -> Any:
    """The first shown position in each range `lo[k]:hi[k]` (`len(vis)` if none): `lo[k]` for
    most, else found by `bytearray.find`, or when many, by bisection over `shown_before` (the
    first position past which one more entry is shown)."""
    n = len(vis)
    first = lo.copy()
    later = np.flatnonzero(mask[lo] == 0)
    if len(later) <= FIND_MAX:
        for k in later.tolist():
            f = vis.find(1, int(lo[k]), int(hi[k]))
            first[k] = f if f >= 0 else n
        return first
    later = later[np.argsort(lo[later], kind="stable")]  # sorted keys: numpy's search narrows
    found = np.searchsorted(shown_before, shown_before[lo[later]] + 1) - 1
    first[later] = np.where(found < hi[later], found, n)
    return first


def _cuts(folded: Collection[int], mask: Any, lo: Any) -> tuple[Any, Any]:
    """(runs, positions): for each run holding a folded entry that is shown, the first such."""
    if not folded:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    at = np.fromiter(folded, dtype=np.int64, count=len(folded))
    at = at[(at >= 0) & (at < len(mask))]
    at = np.sort(at[mask[at] == 1])
    runs = np.searchsorted(lo, at, side="right") - 1
    runs, first = np.unique(runs, return_index=True)  # sorted by position: the first per run
    return runs, at[first]


def _nearest(flags: Any, par: Any) -> Any:
    """For each run, its nearest proper ancestor whose flag is set (-1: none), by pointer
    doubling: a few passes over the runs however deep the tree."""
    count = len(flags)
    flagged = np.append(flags, True)  # index -1: above the roots
    up = np.where(flags, np.arange(count), par)
    while True:
        stuck = ~flagged[up]
        if not stuck.any():
            break
        up = np.where(stuck, up[up], up)
    return np.where(par >= 0, up[par], -1)

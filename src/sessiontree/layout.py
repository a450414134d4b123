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

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .folds import Folds

if TYPE_CHECKING:
    from collections.abc import Collection

    from .storage.index import TreeIndex
    from .storage.runs import Runs

T = TypeVar("T")  # a value `_recall` keeps

# Run and entry numbers are kept as numpy's index type: a gather by any other integer type
# converts the whole index array first (32-bit arrays measured ~40% slower per key). Gathers on
# the per-key path are `take` and selections `np.compress`: over 180,000 runs, `a[idx]` measured
# 0.15 ms against `take`'s 0.10, and `a[flags]` with half the flags set 0.46 ms against 0.14.
INT = np.intp
MAX_ROTATIONS = 64  # forks where the path takes an older child; past this the loop is cheaper
FIND_MAX = 4096  # runs starting with a hidden entry searched one by one; more: bisection
NEAR_STEPS = 2  # with more of them, entries this far past the start are looked at first
FEW_TOPS = 64  # folds hiding runs that `_refold` takes out of the last layout; more: anew
FEW_CHANGED = 16  # runs whose rows or end changed that `_repieced` patches; more: anew
WALK_MOST = 256  # runs nobody draws that a leaf move's layout walks up past, one by one
KEEP_MASKS = 5  # filter masks whose derived arrays are kept between builds: one per filter
KEEP_GROUPS = 2  # sets of runs drawn whose grouping is kept: a fold and its undo (~5 MB each at 1M)
KEEP_LAIDS = 4  # layouts of other sets of runs drawn kept beside the last: the other filters


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
    fork_rows: Callable[[], memoryview]  # computed when asked for (`[` and `]`)
    side_roots: Callable[[], memoryview]  # computed when asked for (only `z` needs them)
    ahead: Callable[[], None]  # derives what the next layout reads from this one (`_relay`)
    path_runs: bytes  # 1 per run holding part of the active path (all of it but the leaf's run)
    leaf_run: int  # the run holding the leaf (-1: no leaf)
    last_cut: bool  # the last run is cut short by a fold (`Outline.grow` cannot lengthen it)
    rows: int
    deepest: int


@dataclass(slots=True)
class _Groups:
    """The drawn runs in preorder, grouped by their nearest drawn ancestor: what a layout
    needs of the runs drawn before it looks at the leaf. Kept for the last sets of runs
    drawn: a fold's undo draws the runs drawn before it, and `z` folds side branches without
    hiding a run on a tree of retries left behind, so `z` and its undo draw the same runs
    (about 2.5 ms saved each on the deep 1M tree). A leaf move adds runs: grouping anew is
    cheaper than renumbering these (measured)."""

    every: bool  # every run is drawn
    pre_o: Any  # the drawn runs' preorder numbers, in order
    order: Any  # the drawn runs in preorder
    drawn_pre: Any  # per preorder number, whether that run is drawn (None: all are)
    group: Any  # per drawn run, one more than its nearest drawn ancestor (0: a root)
    kids: Any  # per group, its drawn runs
    in_fork: Any  # per drawn run, whether it has drawn siblings
    is_last: Any  # per drawn run, whether it is its group's last in preorder

    @classmethod
    def of(cls, shape: _Shape, drawn: Any, above: Any) -> _Groups:
        count = len(drawn)
        every = bool(drawn.all())  # the common case with no folds: nothing to select
        drawn_pre = None
        if every:
            pre_o, order = np.arange(count, dtype=INT), shape.preorder
        else:
            drawn_pre = drawn.take(shape.preorder)
            pre_o = np.flatnonzero(drawn_pre)
            order = shape.preorder.take(pre_o)
        group = above.take(order)
        kids = np.bincount(group, minlength=count + 1)
        last_pre = np.full(count + 1, -1, dtype=INT)
        np.maximum.at(last_pre, group, pre_o)
        return cls(
            every=every,
            pre_o=pre_o,
            order=order,
            drawn_pre=drawn_pre,
            group=group,
            kids=kids,
            in_fork=kids.take(group) >= 2,
            is_last=pre_o == last_pre.take(group),
        )


class _Shape:
    """Arrays of the runs' structure that do not depend on filter, folds or leaf, kept with the
    runs (`Runs.derived`) and brought up to date as entries are appended: an appended turn
    lengthens the last run; a fork splits a run and adds one, which shifts preorder numbers by
    one at C speed instead of numbering every run again (a leaf move appends such an entry)."""

    __slots__ = (
        "_above",
        "_groups",
        "_path",
        "cut_hint",
        "edits",
        "hi",
        "laid",
        "lo",
        "others",
        "par",
        "pre",
        "preorder",
        "relinks",
        "seen",
        "size",
    )

    def __init__(self, index: TreeIndex, runs: Runs) -> None:
        count = len(runs)
        self.relinks = index.relinks
        self.seen = runs.seen
        self.lo = np.array(runs.lo, dtype=INT)
        self.hi = np.array(runs.hi, dtype=INT)
        parent = np.frombuffer(index.parent, dtype=np.int32)
        first_parent = parent[self.lo]
        par = (np.searchsorted(self.lo, first_parent, side="right") - 1).astype(INT)
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
        self.size = np.array(size, dtype=INT)
        self.pre = np.array(pre, dtype=INT)
        self.preorder = np.empty(0, dtype=INT)
        self._above: list[tuple[Any, list[Any]]] = []  # (shown runs, [`above`, `kids`]), latest first
        self._groups: list[tuple[Any, _Groups]] = []  # (the runs drawn, their groups), latest first
        self._path: tuple[int, Any] | None = None  # (the leaf's run, `on_path` for it)
        # (side runs, their first shown entries) from the last `side_roots`: `z` folds exactly
        # those entries, whose runs `_cuts` then need not search for (2 ms on a deep 1M tree);
        # renumbered as runs split, so a leaf move after `z` need not search either
        self.cut_hint: tuple[Any, Any] | None = None
        self.laid: _Laid | None = None  # the last layout (see `_relay`)
        self.edits: list[int] = []  # runs split since (-1: a run added), for `_relay`
        self.others: list[_Laid] = []  # layouts of other runs drawn, latest first (see `start`)
        self._number()

    def _number(self) -> None:
        self.preorder = np.empty(len(self.pre), dtype=INT)
        self.preorder[self.pre] = np.arange(len(self.pre), dtype=INT)

    def catch_up(self, index: TreeIndex, most: int) -> bool:
        """Take in the entries appended since, as `Runs.update` does; False (changing nothing
        that matters: the caller starts over) if more than `most` of them start runs."""
        parent, first_child = index.parent, index.first_child
        start, end = self.seen, len(index)
        if start == end:
            return True
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
                if self.hi[q] > p + 1:  # a second child of an entry inside a run: a leaf move
                    self._split_and_add(q, p, j)
                    continue
            self._add(j, q)
        self.seen = end
        # `_groups` stays when only the last run grew: the runs are the same (one added drops it)
        self._above, self._path = [], None
        return True

    def above(self, shown: Any) -> Any:
        """For each run, one more than its nearest proper ancestor with something shown (0:
        none; the numbering `lay_out` groups siblings by), kept for the last masks (one per
        filter): folding and unfolding do not change it, and switching back to a filter finds
        it again."""
        return self._masked(shown)[0]

    def kids(self, shown: Any) -> Any:
        """Per group of `above(shown)`, how many shown runs it holds, kept with it: `z` asks for
        it on every press (1.3 ms at 180,000 runs), its undo never."""
        kept = self._masked(shown)
        if kept[1] is None:
            kept[1] = np.bincount(np.compress(shown, kept[0]), minlength=len(shown) + 1)
        return kept[1]

    def _masked(self, shown: Any) -> list[Any]:
        return _recall(self._above, shown, lambda: [_nearest(shown, self.par) + 1, None], KEEP_MASKS)

    def groups(self, drawn: Any, above: Any) -> _Groups:
        """`_Groups` of the runs `drawn` (`above` for them), kept for the last sets asked."""
        return _recall(self._groups, drawn, lambda: _Groups.of(self, drawn, above), KEEP_GROUPS)

    def run_of(self, i: int) -> int:
        """The run holding position `i`."""
        return int(np.searchsorted(self.lo, i, side="right")) - 1

    def on_path(self, r: int) -> Any:
        """Per run, whether it holds part of the path from run `r` up to its root (-1: none),
        kept for the last run asked: filters and folds do not move the leaf."""
        kept = self._path
        if kept is not None and kept[0] == r:
            return kept[1]
        on = self._within(r) if r >= 0 else np.zeros(len(self.pre), dtype=bool)
        self._path = (r, on)  # after `_within`, which forgets the last one
        return on

    def _within(self, r: int) -> Any:
        """Runs whose subtree holds run `r` (itself included). A leaf move appends its entry
        below the old leaf, whose runs up to the root the last layout has just found."""
        kept, self._path = self._path, None  # the caller renumbers the runs next
        if kept is not None and kept[0] == r:
            return kept[1]
        return self.holding(r)

    def holding(self, r: int) -> Any:
        """Per run, whether its subtree holds run `r` (itself included): one pass, nothing kept.
        `pre <= pre[r] < pre + size` as one unsigned comparison: a run after r in preorder makes
        `pre[r] - pre` negative, which wraps to a number larger than any size."""
        return np.less((self.pre[r] - self.pre).view(np.uintp), self.size.view(np.uintp))

    def start(self, drawn: Any, rows_in: Any, key: tuple[int, int, int]) -> _Laid | None:
        """The layout the next one starts from (`_relay`): the last, or when no run was split
        or added since, a layout kept of the runs `drawn`, made with the rows `rows_in` per
        run if one was (the same filter and folds: its pieces are taken whole). A filter laid
        out from its grouping costs ~10 ms on the deep 1M tree, its pieces made anew 3 ms;
        from its own last layout, only what the path changed since is made. `key` is
        `_key(drawn, rows_in)`: arrays are compared only where their keys agree."""
        last = self.laid
        if last is None or self.edits:
            return last
        fits = [laid for laid in (last, *self.others) if laid.key[:2] == key[:2] and _same(drawn, laid.drawn)]
        same = (
            laid
            for laid in fits
            if laid.key == key and laid.memo is not None and _same(rows_in, laid.memo.rows_in)
        )
        return next(same, fits[0] if fits else last)

    def keep(self, laid: _Laid, trial: bool) -> None:
        """Make `laid` (its pieces made) the layout the next starts from or, for a trial, keep
        it beside that one; keep the layout it replaces when its runs are numbered as now (no
        run split or added since). One of each runs drawn and rows, the latest."""
        if trial:
            spare: _Laid | None = laid
        else:
            spare = self.laid if not self.edits else None
            self.laid, self.edits = laid, []
        current, kept = self.laid, list[_Laid]()
        for other in ([spare] if spare is not None else []) + self.others:
            if len(kept) == KEEP_LAIDS:
                break
            twin = current is not None and _twins(other, current)
            if not twin and not any(_twins(other, k) for k in kept):
                kept.append(other)
        self.others = kept

    def _split_and_add(self, r: int, p: int, j: int) -> None:
        """Run `r` ends at `p` now; the rest of it becomes run `r + 1`, holding its children,
        and entry `j`, a new child of `p`, starts the last run. One pass for both: a leaf
        move on a tree of many runs appends exactly this."""
        new, last = r + 1, len(self.lo) + 1
        self._groups, self.others = [], []
        self.edits.append(r)
        if self.cut_hint is not None:  # a fold after p is in the rest of r now
            runs, first = self.cut_hint
            # Runs are in order: those after r shift by one as a slice, not four passes over
            # all (90,000 side runs on the deep 1M tree: 0.55 ms of a leaf move).
            k = int(np.searchsorted(runs, r, side="right"))
            runs = runs.copy()
            runs[k:] += 1
            if k and runs[k - 1] == r and first[k - 1] > p:
                runs[k - 1] += 1
            self.cut_hint = (runs, first)
        at = int(self.pre[r])
        rest = int(self.size[r])  # the rest of r and all below it: as many runs as r had
        end = at + rest  # where r's subtree ended in preorder
        # Shifts are made in place, adding comparisons: a masked add (`where=`) over a path
        # through half the runs measured five times slower, a branch per run.
        within = self._within(r)  # r and its ancestors gain two
        self.size += within
        self.size += within
        self.pre += self.pre > at
        self.pre += self.pre > end  # past r's old subtree: one more (the new last run)
        tail = self.par[new:]  # only runs after r can hang from r or a later run
        tail += tail >= r  # r's children now hang from the rest of r, run r + 1
        self.lo = _put(self.lo, new, p + 1, j)
        self.hi = _put(self.hi, new, self.hi[r], j + 1)
        self.hi[r] = p + 1
        self.par = _put(self.par, new, r, r)
        self.pre = _put(self.pre, new, at + 1, end + 1)
        self.size = _put(self.size, new, rest, 1)
        # The runs in preorder: the rest of r comes right after r, the new run right after
        # r's old subtree. A new array, not shifted in place like the others: a layout's
        # pieces may still read the old one (`side_roots`).
        order = self.preorder + (self.preorder >= new)  # run numbers from `new` on shift by one
        self.preorder = np.concatenate(
            (order[: at + 1], (new,), order[at + 1 : end], (last,), order[end:]), dtype=INT
        )

    def _add(self, j: int, q: int) -> None:
        """A run starting at `j`, the newest child of run `q` (-1: a root)."""
        last = len(self.lo)
        self._groups, self.others = [], []
        self.edits.append(-1)
        if q >= 0:
            at = int(self.pre[q] + self.size[q])
            self.size += self._within(q)  # see `_split_and_add` for why no `where=`
            self.pre += self.pre >= at
        else:
            at = last
        self.lo = _grown(self.lo, j)
        self.hi = _grown(self.hi, j + 1)
        self.par = _grown(self.par, q)
        self.pre = _grown(self.pre, at)
        self.size = _grown(self.size, 1)
        self.preorder = np.insert(self.preorder, at, last)  # new: see `_split_and_add`


def _same(a: Any, b: Any) -> bool:
    """Whether two per-run arrays are equal (False when of different lengths)."""
    return len(a) == len(b) and bool(np.array_equal(a, b))


def _key(drawn: Any, rows_in: Any) -> tuple[int, int, int]:
    """Runs, runs drawn and rows of a layout: layouts whose keys differ differ (a filter's
    rows, a fold's), so their arrays need not be compared (each comparison is a pass over
    180,000 runs on the deep 1M tree, and keeping four layouts made some twenty a key)."""
    return len(drawn), int(np.count_nonzero(drawn)), int(rows_in.sum())


def _twins(a: _Laid, b: _Laid) -> bool:
    """Whether two layouts draw the same runs with the same rows (`_Shape.keep` keeps one)."""
    if a.key != b.key or not _same(a.drawn, b.drawn):
        return False
    if a.memo is None or b.memo is None:
        return a.memo is b.memo
    return _same(a.memo.rows_in, b.memo.rows_in)


def _recall(kept: list[tuple[Any, T]], flags: Any, make: Callable[[], T], most: int) -> T:
    """The value kept for `flags` (per-run flags) in `kept`, latest first, or `make()`'s, kept
    with the `most - 1` latest others."""
    for k, (seen, value) in enumerate(kept):
        if np.array_equal(seen, flags):
            kept.insert(0, kept.pop(k))
            return value
    value = make()
    kept.insert(0, (flags, value))
    del kept[most:]
    return value


def _put(values: Any, at: int, inserted: int, appended: int) -> Any:
    """`values` with `inserted` placed at index `at` and `appended` at the end, in one copy
    with room to grow (`_grown`). A copy, not a shift in place: a layout may still read the
    old array (`_pieces`' `side_roots` reads the runs' starts)."""
    count = len(values) + 2
    out = np.empty(_roomy(count), dtype=INT)[:count]
    return np.concatenate((values[:at], (inserted,), values[at:], (appended,)), out=out)


def _grown(values: Any, value: int) -> Any:
    """`values` (a `_Shape` array: nobody appends to an older view of it) with `value` appended,
    written into the room past its end in the buffer it views when there is some: a leaf move
    on a tree of many runs appends a run, and copying the five arrays of 180,000 runs took 1.4
    ms a key. Older views keep their length, so what they show does not change."""
    count = len(values)
    base = values.base
    if base is not None and len(base) > count and values.ctypes.data == base.ctypes.data:
        grown = base[: count + 1]
    else:
        grown = np.empty(_roomy(count + 1), dtype=INT)[: count + 1]
        grown[:count] = values
    grown[count] = value
    return grown


def _roomy(count: int) -> int:
    """A buffer's length for `count` values and the next runs a session's moves add."""
    return count + count // 16 + 64


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
    r = shape.run_of(leaf)
    on = np.flatnonzero(shape.on_path(r))  # the leaf's run and its ancestors
    ends = shape.hi[on]
    ends[on == r] = leaf + 1
    steps = np.zeros(n + 1, dtype=np.int8)
    steps[shape.lo[on]] = 1
    steps[ends] -= 1
    # Summed as int32: numpy's running sum over 32-bit integers is three times its speed on bytes.
    return np.cumsum(steps[:-1], dtype=np.int32).astype(np.uint8).tobytes()


def _whole_shape(index: TreeIndex, runs: Runs) -> _Shape | None:
    """The runs' shape when it is kept (no adoptions) and the runs cover the whole log."""
    if index.relinks or not len(runs) or runs.hi[-1] != len(index):
        return None
    return _shape(index, runs)


def subtree_span(
    index: TreeIndex, runs: Runs, i: int, vis: bytes | bytearray | None = None
) -> tuple[int, int] | None:
    """(entries in the subtree of entry `i`, the latest position in it) from the runs in its
    subtree, a contiguous stretch of the preorder: a fold near the root of a deep tree covers
    180,000 runs, which a walk in Python takes ~0.35 s to count. With `vis`, `i` and the
    entries it shows below `i` (`outline.subtree_size`). None with adoptions (the preorder is
    not kept then)."""
    shape = _whole_shape(index, runs)
    if shape is None or not 0 <= i < len(index):
        return None
    r = shape.run_of(i)
    at = int(shape.pre[r])
    below = shape.preorder[at + 1 : at + int(shape.size[r])]  # every run under r's last entry
    ends = shape.hi[below]
    end = int(shape.hi[r])
    latest = max(end, int(ends.max()) if len(below) else end) - 1
    if vis is None:
        return end - i + int(ends.sum() - shape.lo[below].sum()), latest
    counts = _kept_counts(runs, vis if isinstance(vis, bytearray) else bytearray(vis))
    shown = int(counts[end] - counts[i + 1]) + int(
        counts.take(ends).sum() - counts.take(shape.lo[below]).sum()
    )
    return 1 + shown, latest


def drawn_above(index: TreeIndex, runs: Runs, piece_of: Any, p_count: Any, r: int) -> int | None:
    """The piece of the nearest run at or above run `r` drawn with rows (-1: none), all in one
    pass over the runs; None with adoptions (the preorder is not kept then) or when runs were
    added since `piece_of` was made."""
    shape = _whole_shape(index, runs)
    if shape is None:
        return None
    pre = shape.pre
    pieces = np.frombuffer(piece_of, dtype=np.int64)
    if len(pieces) != len(pre):
        return None
    above = np.flatnonzero(shape.holding(r) & (pieces >= 0))  # not `on_path`: it keeps the leaf's
    above = above[np.frombuffer(p_count, dtype=np.int64)[pieces[above]] > 0]
    return int(pieces[above[np.argmax(pre[above])]]) if len(above) else -1


def match_rows(
    runs: Runs, vis: bytearray, piece_of: Any, p_lo: Any, p_hi: Any, p_row: Any, positions: Collection[int]
) -> list[int]:
    """`Outline.rows_of` for many positions, in passes over them: a piece's rows are its shown
    entries in order, so an entry's row is its piece's first row plus the shown entries before
    it in the piece, a difference of two running counts. The loop took ~0.3 s for 500,000
    matches on the deep 1M-entry tree, on every key that changed the rows; this, ~40 ms."""
    n = len(vis)
    at = np.fromiter(positions, dtype=INT, count=len(positions))
    at = np.compress((at >= 0) & (at < n), at)
    at = np.compress(np.frombuffer(vis, dtype=np.uint8).take(at) != 0, at)
    # Copies of the pieces' arrays: a view would pin the buffer of an `array` that `grow` extends.
    run = np.searchsorted(np.array(runs.lo, dtype=INT), at, side="right") - 1
    piece = np.array(piece_of, dtype=INT).take(run)
    at, piece = np.compress(piece >= 0, at), np.compress(piece >= 0, piece)
    inside = at < np.array(p_hi, dtype=INT).take(piece)
    at, piece = np.compress(inside, at), np.compress(inside, piece)
    before = _kept_counts(runs, vis)
    rows = (
        np.array(p_row, dtype=INT).take(piece)
        + before.take(at)
        - before.take(np.array(p_lo, dtype=INT).take(piece))
    )
    rows.sort()
    return rows.tolist()


def _ints(values: Any) -> memoryview:
    """A view of an index array that Python indexes as plain ints (bisect, `a[k] += 1`), without
    copying it into a list."""
    data: Any = np.ascontiguousarray(values, dtype=np.int64)  # numpy arrays export the buffer protocol
    return memoryview(data).cast("B").cast("q")


def _shown_before(vis: bytearray) -> Any:
    """Shown entries before each position (one more slot than `vis`: the total). Counts, not
    indices: 32 bits halve the memory this pass over every entry writes."""
    shown_before = np.empty(len(vis) + 1, dtype=np.int32)
    shown_before[0] = 0
    np.cumsum(np.frombuffer(vis, dtype=np.uint8), dtype=np.int32, out=shown_before[1:])
    return shown_before


PATCH_MOST = 4  # changed entries patched one pass each; past this, counting afresh is cheaper


def _kept_counts(runs: Runs, vis: bytearray) -> Any:
    """`_shown_before(vis)`, kept with the runs for the last masks laid out (one per filter).
    A leaf move or a fold lays the same mask out again, an appended entry only lengthens it,
    and a leaf move may change whether the old and the new leaf are shown (Pi always shows the
    leaf): each costs a comparison at memory speed instead of counting a million entries. The
    array returned is only good until the next call."""
    kept = runs.derived.get("counts")  # the runs' store of what is derived from the log
    if not isinstance(kept, list):
        kept = runs.derived["counts"] = []
    n = len(vis)
    found = next((k for k, (old, _) in enumerate(kept) if len(old) <= n and vis.startswith(old)), -1)
    if found < 0 and kept and len(kept[0][0]) <= n:  # the latest mask, with a few entries changed
        old, counts = kept[0]
        m = len(old)
        now = np.frombuffer(vis, dtype=np.uint8, count=m).view(np.int8)
        changed = np.flatnonzero(now != np.frombuffer(old, dtype=np.int8))
        if len(changed) <= PATCH_MOST:
            for i in changed.tolist():
                counts[i + 1 : m + 1] += int(now[i]) - old[i]
            found = 0
    if found < 0:
        counts = _shown_before(vis)
    else:
        old, counts = kept.pop(found)
        m = len(old)
        if m < n:
            if len(counts) < n + 1:  # room for the entries to come, so appends do not copy it
                counts = np.concatenate((counts[: m + 1], np.empty(n - m + (n >> 4), dtype=np.int32)))
            tail = np.frombuffer(vis, dtype=np.uint8, count=n - m, offset=m)
            np.cumsum(tail, dtype=np.int32, out=counts[m + 1 : n + 1])
            counts[m + 1 : n + 1] += counts[m]
    kept.insert(0, (bytes(vis), counts))
    del kept[KEEP_MASKS:]
    return counts[: n + 1]


def lay_out(
    index: TreeIndex,
    runs: Runs,
    vis: bytearray,
    folded: Collection[int],
    leaf: int,
    *,
    trial: bool = False,
) -> Pieces | None:
    """The pieces of the outline with the path from `leaf` as the active path, or None when
    the loop should do it (adoptions, or a path through many older children). The path is
    taken per run, never marked entry by entry: a leaf move on a deep tree would otherwise
    write a byte for each of its hundreds of thousands of entries. A `trial` layout is not
    the one the next layout starts from (`_relay`): the app lays out the filters nobody uses
    yet only to build what each keeps."""
    if index.relinks or not len(runs) or runs.hi[-1] != len(vis):
        return None
    shape = _shape(index, runs)
    lo, hi, pre, size = shape.lo, shape.hi, shape.pre, shape.size
    count = len(lo)
    n = len(vis)
    mask = np.frombuffer(vis, dtype=np.uint8)
    shown_before = _kept_counts(runs, vis)
    # Shown entries per run. Runs tile the log in file order (each ends where the next begins),
    # so one gather of the counts at their starts gives every run's.
    starts = shown_before.take(lo)
    full = np.empty(count, dtype=starts.dtype)
    np.subtract(starts[1:], starts[:-1], out=full[:-1])
    full[-1] = shown_before[n] - starts[-1]
    shown = full > 0

    # Folds: the first folded visible entry of a run cuts it; nothing below is drawn.
    cut_runs, cut_at = _cuts(folded, mask, lo, shape.cut_hint)
    end, rows_in, drawn = hi, full, shown
    cut_rows = full[:0]
    if len(cut_runs):
        end, rows_in = hi.copy(), full.copy()
        end[cut_runs] = cut_at + 1
        cut_rows = shown_before.take(cut_at + 1) - starts.take(cut_runs)  # up to the fold
        rows_in[cut_runs] = cut_rows
        # Only a folded run with runs below it hides any: a retry left behind is mostly one
        # run (`z` on the deep 1M tree folds 90,908 of them and hides no run: 2 ms saved).
        above_some = np.compress(size.take(cut_runs) > 1, cut_runs)
        if len(above_some):
            tops = pre.take(above_some)
            below = np.cumsum(_spans(tops + 1, tops + size.take(above_some), count))
            drawn = shown & (below.take(pre) == 0)
            if np.array_equal(drawn, shown):  # the runs below are hidden (a leaf move's entry)
                drawn = shown
    leaf_run = shape.run_of(leaf) if 0 <= leaf < n else -1
    on_path = shape.on_path(leaf_run)
    key = _key(drawn, rows_in)
    laid, last = None, shape.start(drawn, rows_in, key)
    if last is not None:
        laid = _relay(shape, last, drawn, vis, leaf, leaf_run, on_path)
    if laid is None:
        laid = _lay_anew(shape, shown, drawn, vis, leaf, leaf_run, on_path)
        if laid is None:
            return None
    forks = _folded_forks(shape, shown, drawn, laid.piece_of, cut_runs, full, cut_rows)
    last_cut = bool(len(cut_runs)) and int(cut_runs[-1]) == count - 1
    memo = last.memo if last is not None else None
    pieces = _pieces(shape, runs, vis, laid, rows_in, end, on_path, leaf_run, forks, last_cut, memo)
    laid.key = key
    shape.keep(laid, trial)  # what the next leaf move, filter or fold changes from (`_relay`)
    return pieces


def _lay_anew(
    shape: _Shape, shown: Any, drawn: Any, vis: bytearray, leaf: int, leaf_run: int, on_path: Any
) -> _Laid | None:
    """The layout of the runs `drawn` from their grouping by nearest drawn ancestor, or None
    when the path takes too many older children (the loop is cheaper then)."""
    lo, hi, pre, size = shape.lo, shape.hi, shape.pre, shape.size
    count = len(lo)
    # Runs nobody draws hand on their children. A fold hides its run's whole subtree, so no
    # ancestor of a drawn run is folded away: the nearest shown ancestor is the nearest drawn.
    above = shape.above(shown)  # one more than the nearest drawn ancestor

    groups = shape.groups(drawn, above)  # kept while the same runs are drawn
    every, pre_o, order, drawn_pre = groups.every, groups.pre_o, groups.order, groups.drawn_pre
    group, in_fork, is_last = groups.group, groups.in_fork, groups.is_last
    # Which child of a fork the active path takes: the one holding part of the path. A path
    # runs through every run it enters up to its last entry (runs end where entries fork),
    # except the leaf's run, where it stops at the leaf: that child takes the fork only if the
    # leaf is at or below its first shown entry.
    marked = in_fork & on_path.take(order)
    if leaf_run >= 0 and drawn[leaf_run] and not vis[lo[leaf_run]]:
        j = int(np.searchsorted(pre_o, pre[leaf_run]))
        if marked[j]:
            marked[j] = _takes_fork(vis, lo, hi, leaf_run, leaf)
    has_marked = np.zeros(count + 1, dtype=bool)
    has_marked[group[np.flatnonzero(marked)]] = True  # few: forks on the path
    main = marked | (~has_marked.take(group) & is_last)
    side = in_fork & ~main

    # Columns: a side branch adds one to every run in its subtree.
    sides = np.compress(side, order)
    firsts = pre.take(sides)
    depth = np.cumsum(_spans(firsts, firsts + size.take(sides), count)[:count], dtype=INT)
    if not every:
        depth = depth.take(pre_o)

    # The path's child drawn after its siblings: rotate its stretch past theirs, top down.
    rotate = np.flatnonzero(marked & ~is_last)
    if len(rotate) > MAX_ROTATIONS:
        return None
    runs_o, depth_s, side_s = order, depth, side
    if len(rotate):
        seq = np.arange(len(order), dtype=INT)
        if drawn_pre is None:  # drawn runs before each preorder number
            before = np.arange(count + 1, dtype=INT)
        else:
            before = np.zeros(count + 1, dtype=INT)
            np.cumsum(drawn_pre, dtype=INT, out=before[1:])
        shift = 0
        for j in rotate.tolist():
            c = int(order[j])
            s = int(above[c]) - 1
            a = int(before[pre[c]]) + shift
            b = int(before[pre[c] + size[c]]) + shift
            e = (int(before[pre[s] + size[s]]) if s >= 0 else len(order)) + shift
            seq[a:e] = np.concatenate((seq[b:e], seq[a:b]))
            shift += e - b
        runs_o, depth_s, side_s = order.take(seq), depth.take(seq), side.take(seq)
    piece_of = np.empty(count, dtype=INT) if every else np.full(count, -1, dtype=INT)
    piece_of[runs_o] = np.arange(len(runs_o), dtype=INT)
    return _Laid(drawn, runs_o, depth_s, side_s, piece_of, order.take(rotate).tolist(), groups)


def _folded_forks(
    shape: _Shape, shown: Any, drawn: Any, piece_of: Any, cut_runs: Any, full: Any, cut_rows: Any
) -> Any:
    """The pieces whose folded row is a fork's: nothing shown follows the fold in its run, and
    the run has two or more shown children. None when the folds hide no run (`drawn is
    shown`): a fork's shown children would be below its fold."""
    if drawn is shown:
        return None
    kids = shape.kids(shown)
    k = piece_of.take(cut_runs)
    fork = (k >= 0) & (full.take(cut_runs) == cut_rows) & (kids.take(cut_runs + 1) > 1)
    return np.compress(fork, k)


def _takes_fork(vis: bytearray, lo: Any, hi: Any, r: int, leaf: int) -> bool:
    """Whether the path to `leaf`, in run `r` whose first entry is hidden, takes the fork
    above `r`: only if the leaf is at or below the run's first shown entry."""
    first = vis.find(1, int(lo[r]), int(hi[r]))
    return 0 <= first <= leaf


@dataclass(slots=True)
class _Memo:
    """A layout's pieces as arrays, with what they were made from, for the next pieces made
    from the same drawing order (`_pieces`). They are shared with the outlines built from them,
    where `Outline.grow` sets a piece's end and count in place: to what they are then, which the
    next pieces, made from the runs that changed since these, set again."""

    runs_o: Any  # the drawing order they came from (by identity, as the next two)
    depth_s: Any
    side_s: Any
    lo: Any  # the shape's run starts they read (a split copies them: compared by buffer)
    rows_in: Any  # per run, its rows
    end: Any  # per run, the position after its last drawn entry (never the shape's `hi`)
    count_o: Any
    starts: Any  # per piece its first row, and the total after them
    p_lo: Any
    p_hi: Any
    p_first: Any
    p_rest: Any
    deepest: int


@dataclass(slots=True)
class _Laid:
    """What a layout drew, kept on the shape for the next (`_relay`). The flags per run are
    derived from `groups` when first needed: a filter's layout is then not charged for
    them."""

    drawn: Any  # per run, whether it is drawn
    runs_o: Any  # the runs drawn, in drawing order (one piece each)
    depth_s: Any  # per piece, its column
    side_s: Any  # per piece, whether it starts a side branch
    piece_of: Any  # run -> its piece, -1 for runs not drawn
    rotated: list[int]  # the path's children drawn after later siblings, top down
    groups: _Groups | None
    rot_ok: Any = None  # per run, whether it is in a fork and not its group's last
    forky: Any = None  # per run, whether it has two or more drawn children
    lastkid: Any = None  # per group (run + 1; 0: the roots), its last drawn child (-1: none)
    # the layout before folds hid runs below them (`_refold`), with its pieces: ~15 MB at 1M
    unfolded: _Laid | None = None
    memo: _Memo | None = None  # the pieces last made from this layout (`_pieces`)
    # (the drawing order this one was made from by `_relay`, the stretches of pieces it changed)
    moved: tuple[Any, list[tuple[int, int]]] | None = None
    key: tuple[int, int, int] = (-1, -1, -1)  # `_key` of its runs drawn and rows, once laid out

    def flags(self) -> tuple[Any, Any, Any]:
        if self.rot_ok is None:
            g = self.groups
            assert g is not None  # one or the other is set
            count = len(self.drawn)
            self.rot_ok = np.zeros(count, dtype=bool)
            self.rot_ok[np.compress(g.in_fork & ~g.is_last, g.order)] = True
            self.forky = g.kids[1:] >= 2
            self.lastkid = np.full(count + 1, -1, dtype=INT)
            self.lastkid[np.compress(g.is_last, g.group)] = np.compress(g.is_last, g.order)
        return self.rot_ok, self.forky, self.lastkid


def _relay(
    shape: _Shape, laid: _Laid, drawn: Any, vis: bytearray, leaf: int, leaf_run: int, on_path: Any
) -> _Laid | None:
    """The layout from the last one (`laid`) when the runs drawn are the same but for a leaf
    move's entry, or None. Folds and filters matter only through the runs drawn and their
    rows (`lay_out` counts those): `z` on a tree of retries left behind draws the same runs.
    The app moves the leaf by appending an entry below the old leaf, hidden by every filter
    but one: that splits the old leaf's run in two drawn one after the other, or adds a run
    nobody draws. Otherwise only the forks where the path takes an older child change: that
    child is drawn after its siblings (a rotation of one stretch of pieces) and columns
    change in two subtrees. On the deep 1M tree this skips the grouping, the columns'
    running sum and the rotations' plan over 180,000 runs."""
    edits = shape.edits
    count = len(drawn)
    if len(edits) > 1:
        return None
    if not edits and count == len(laid.drawn) and not np.array_equal(drawn, laid.drawn):
        refolded = _refold(shape, laid, drawn)
        if refolded is None:
            return None
        laid = refolded
    old = laid.drawn
    if not edits or edits[0] < 0:
        added = len(edits)  # a run added at the end, drawn by nobody, or nothing
        if count != len(old) + added or (added and drawn[-1]):
            return None
        # With no edits, the check before `_refold` has compared them already.
        if added and not np.array_equal(drawn[: len(old)], old):
            return None
    else:  # run r split: r ends at the old leaf, run r + 1 is the rest of it
        r = edits[0]
        head, tail = bool(drawn[r]), bool(drawn[r + 1])
        if (
            count != len(old) + 2
            or drawn[-1]
            or not (old[r] and (head or tail))
            or not np.array_equal(drawn[:r], old[:r])
            or not np.array_equal(drawn[r + 2 : -1], old[r + 1 :])
        ):
            return None
    # The same runs are drawn: take the last layout's, with the edits made to them.
    own = False  # whether the arrays a rotation changes in place are new ones (else copied first)
    rot_ok, forky, lastkid = laid.flags()
    runs_o, depth_s, side_s, rotated = laid.runs_o, laid.depth_s, laid.side_s, laid.rotated
    piece_of = laid.piece_of
    base = runs_o if not edits or edits[0] < 0 else None  # pieces numbered as in `laid`'s
    touched: list[tuple[int, int]] = []  # stretches of pieces the rotations change
    if edits and edits[0] < 0:
        piece_of = np.append(piece_of, -1)
        rot_ok, forky = np.append(rot_ok, False), np.append(forky, False)
        lastkid = np.append(lastkid, -1)
    elif edits:
        # If one part is not drawn (the old leaf was shown only for being the leaf, the rest
        # of the run is hidden, or it is below a fold), the other takes r's piece; if both
        # are, the rest is drawn right after r, its only drawn child, in a piece of its own.
        at = r if tail and not head else r + 1  # old runs from here on are numbered one more
        runs_o = runs_o + (runs_o >= at)
        lastkid = lastkid + (lastkid >= at)
        rotated = [c + (c >= at) for c in rotated]
        if head and tail:
            k = int(laid.piece_of[r])
            runs_o = np.concatenate((runs_o[: k + 1], (r + 1,), runs_o[k + 1 :]), dtype=INT)
            depth_s = np.concatenate((depth_s[: k + 1], depth_s[k : k + 1], depth_s[k + 1 :]))
            side_s = np.concatenate((side_s[: k + 1], (False,), side_s[k + 1 :]))
            own = True
            parts: tuple[tuple[Any, Any], ...] = (
                (rot_ok[r], False),
                (False, forky[r]),
                (r + 1, lastkid[r + 1]),
            )
        else:
            parts = ((rot_ok[r], False), (forky[r], False), (lastkid[r + 1], -1))
            if tail:
                parts = tuple((b, a) for a, b in parts)
        rot_ok = np.concatenate((rot_ok[:r], parts[0], rot_ok[r + 1 :], (False,)))
        forky = np.concatenate((forky[:r], parts[1], forky[r + 1 :], (False,)))
        lastkid = np.concatenate((lastkid[: r + 1], parts[2], lastkid[r + 2 :], (-1,)), dtype=INT)
        piece_of = np.full(count, -1, dtype=INT)
        piece_of[runs_o] = np.arange(len(runs_o), dtype=INT)

    # The path's children that are not their group's last: drawn after their later siblings.
    wanted = np.flatnonzero(on_path & rot_ok).tolist()
    if len(wanted) > MAX_ROTATIONS:
        return None
    lo, hi, pre, size, par = shape.lo, shape.hi, shape.pre, shape.size, shape.par
    if (
        wanted
        and wanted[-1] == leaf_run
        and not vis[lo[leaf_run]]
        and not _takes_fork(vis, lo, hi, leaf_run, leaf)
    ):
        wanted.pop()  # runs are numbered in file order: the leaf's is the last on the path
    was, now = set(rotated), set(wanted)
    # Each step reads positions as they are then, so steps of one kind may go in any order;
    # undoing goes first: where the old and new paths part, both children are in one group.
    undo, redo = sorted(was - now), sorted(now - was)
    if undo or redo:
        if not own:
            runs_o, depth_s, side_s = runs_o.copy(), depth_s.copy(), side_s.copy()
            piece_of = piece_of.copy()
        drawn_pre = drawn.take(shape.preorder)

        def drawn_in(a: int, b: int) -> int:
            return int(np.count_nonzero(drawn_pre[a:b]))

        def move(a: int, b: int, e: int) -> None:
            """Stretch [a, b) of pieces after [b, e)."""
            for values in (runs_o, depth_s, side_s):
                values[a:e] = np.concatenate((values[b:e], values[a:b]))
            piece_of[runs_o[a:e]] = np.arange(a, e, dtype=INT)
            touched.append((a, e))  # the columns changed below lie in it too: c's and `last`'s

        for c, back in [(c, True) for c in undo] + [(c, False) for c in redo]:
            s, steps = int(par[c]), 0  # c's nearest drawn ancestor, a step or two up at most
            while s >= 0 and not drawn[s]:
                s, steps = int(par[s]), steps + 1
                if steps > WALK_MOST:  # a long chain of runs nobody draws: lay out anew
                    return None
            here = drawn_in(int(pre[c]), int(pre[c] + size[c]))  # c's stretch
            if s >= 0:
                at = int(piece_of[s])
                e = at + drawn_in(int(pre[s]), int(pre[s] + size[s]))
                slot = at + 1 + drawn_in(int(pre[s]) + 1, int(pre[c]))
            else:
                e, slot = len(runs_o), drawn_in(0, int(pre[c]))
            if back:  # c, drawn last in its group, goes back to its place in preorder
                move(slot, e - here, e)
            else:  # c, at its place in preorder, is drawn after its later siblings
                move(slot, slot + here, e)
            # The group's main child changes between c and its last: one more column for
            # the one that becomes a side branch, one less for the other.
            last = int(lastkid[s + 1])
            step = 1 if back else -1
            a = int(piece_of[c])
            depth_s[a : a + here] += step
            side_s[a] = back
            a = int(piece_of[last])
            depth_s[a : a + drawn_in(int(pre[last]), int(pre[last] + size[last]))] -= step
            side_s[a] = not back
    wanted.sort(key=lambda c: int(pre[c]))
    unfolded = None if edits else laid.unfolded  # renumbered runs: it would not fit them
    relaid = _Laid(drawn, runs_o, depth_s, side_s, piece_of, wanted, None, rot_ok, forky, lastkid, unfolded)
    if base is not None and touched:
        relaid.moved = (base, touched)
    return relaid


def _refold(shape: _Shape, laid: _Laid, drawn: Any) -> _Laid | None:
    """The last layout with the runs below folds taken out, or put back by a fold's undo, or
    None when the runs drawn differ otherwise. A fold hides every drawn run below its own run,
    which in drawing order are the stretch of pieces right after that run's: taking them out
    empties the folded run's group and changes no other piece's column or branch. They come
    back from the layout they were taken from, kept on the one made then (one step back: the
    undo of `z` or of a fold). A side branch that was visited and left again forks where the
    leaf was, so `z` hides the rest of it (the deep 1M tree after a few Enter and `b`: every
    `z` and its undo laid out anew, ~7 ms of a 15 ms key)."""
    back = laid.unfolded
    if back is not None and np.array_equal(drawn, back.drawn):
        return back
    old, runs_o = laid.drawn, laid.runs_o
    if np.any(drawn > old):  # a run drawn now that was not
        return None
    gone_runs = np.flatnonzero(old > drawn)
    gone = np.sort(laid.piece_of.take(gone_runs))  # pieces taken out: few, where a fold hid some
    if not len(gone) or gone[0] == 0:
        return None
    gone_runs = runs_o.take(gone)  # in drawing order, as `starts` numbers their stretches
    starts = np.ones(len(gone), dtype=bool)  # the first piece of each stretch taken out
    np.not_equal(gone[1:], gone[:-1] + 1, out=starts[1:])
    if np.count_nonzero(starts) > FEW_TOPS:
        # Many folds hiding runs, as `z` on a tree of branches inside branches (the wide 1M
        # tree: 772,879 rows become 630): laying the few runs left out anew is cheaper.
        return None
    tops = runs_o.take(np.compress(starts, gone) - 1)  # the folded runs
    pre, size = shape.pre, shape.size

    def below(runs: Any, top: Any) -> Any:
        """Whether each run is below (or is) its top: see `_Shape.holding`."""
        return np.less((pre.take(runs) - pre.take(top)).view(np.uintp), size.take(top).view(np.uintp))

    if not below(gone_runs, tops.take(np.cumsum(starts) - 1)).all():
        return None
    ends = np.compress(np.append(starts[1:], True), gone) + 1  # the piece after each stretch
    more = ends < len(runs_o)
    if below(runs_o.take(np.compress(more, ends)), np.compress(more, tops)).any():
        return None  # a stretch is not all of its top's drawn runs below it
    # The pieces kept, as slices between the stretches: copies at memory speed, where a
    # selection by flags took 0.2 ms per array over 180,000 pieces.
    cuts = np.stack((np.append(0, ends), np.append(np.compress(starts, gone), len(runs_o))), axis=1)

    def kept(values: Any) -> Any:
        return np.concatenate([values[a:b] for a, b in cuts.tolist()])

    rot_ok, forky, lastkid = laid.flags()
    runs_o = kept(runs_o)
    piece_of = np.full(len(drawn), -1, dtype=INT)
    piece_of[runs_o] = np.arange(len(runs_o), dtype=INT)
    forky = forky & drawn
    forky[tops] = False
    lastkid = lastkid.copy()
    lastkid[tops + 1] = -1
    lastkid[gone_runs + 1] = -1
    laid.unfolded = None  # one step back is kept, not a chain of layouts
    return _Laid(
        drawn,
        runs_o,
        kept(laid.depth_s),
        kept(laid.side_s),
        piece_of,
        [c for c in laid.rotated if drawn[c]],
        None,
        rot_ok & drawn,
        forky,
        lastkid,
        laid,
    )


def _pieces(
    shape: _Shape,
    runs: Runs,
    vis: bytearray,
    laid: _Laid,
    rows_in: Any,
    end: Any,
    on_path: Any,
    leaf_run: int,
    folded_forks: Any,
    last_cut: bool,
    last: _Memo | None = None,
) -> Pieces:
    """The outline's pieces from a drawing order: rows, columns and prefixes per piece; from
    `last` (the pieces of the last layout) when the order is the same."""
    lo, count, n = shape.lo, len(shape.lo), len(vis)
    runs_o, depth_s, side_s, piece_of = laid.runs_o, laid.depth_s, laid.side_s, laid.piece_of
    # A copy where the shape's own array is passed (no folds): it changes it as runs grow.
    end = end.copy() if end is shape.hi else end
    memo = _repieced(last, laid, lo, rows_in, end) if last is not None else None
    if memo is None:
        # As the index type now, not at each `_ints` (the counts are 32-bit: `_shown_before`).
        count_o = rows_in.take(runs_o).astype(INT, copy=False)
        # One running sum gives both each piece's first row and the row after it (a
        # subtraction less over 180,000 pieces).
        starts = np.empty(len(count_o) + 1, dtype=INT)
        starts[0] = 0
        np.cumsum(count_o, out=starts[1:])
        rest = 2 * depth_s
        memo = _Memo(
            runs_o=runs_o,
            depth_s=depth_s,
            side_s=side_s,
            lo=lo,
            rows_in=rows_in,
            end=end,
            count_o=count_o,
            starts=starts,
            p_lo=lo.take(runs_o),
            p_hi=end.take(runs_o),
            p_first=rest - side_s,
            p_rest=rest,
            deepest=int(depth_s.max()) if len(depth_s) else 0,
        )
    laid.memo = memo
    ends = memo.starts[1:]  # the row after each piece
    folded_rows = ends.take(folded_forks) - 1 if folded_forks is not None else ends[:0]

    def fork_rows() -> memoryview:
        """Rows whose entry has two or more shown children, in order."""
        flags = laid.groups.kids[1:] >= 2 if laid.groups is not None else laid.forky
        rows = ends[flags.take(runs_o)] - 1
        if len(folded_rows):
            rows = np.sort(np.concatenate((rows, folded_rows)), kind="stable")  # a merge
        return _ints(rows)

    def side_roots() -> memoryview:
        """Side branches' first shown entries, in file order: a side run is drawn, so it shows
        something, and runs are numbered in file order."""
        flags = np.zeros(count, dtype=bool)
        flags[np.compress(side_s, runs_o)] = True
        ranked = np.flatnonzero(flags)
        first = _first_shown(vis, _kept_counts(runs, vis), lo.take(ranked), shape.hi.take(ranked))
        if shape.lo is lo and shape.seen == n:  # no run split or added since this layout
            shape.cut_hint = (ranked, first)
        return _ints(first)

    def ahead() -> None:
        if shape.laid is laid:  # else the next layout does not start from this one
            laid.flags()

    return Pieces(
        p_lo=_ints(memo.p_lo),
        p_hi=_ints(memo.p_hi),
        p_row=_ints(memo.starts[:-1]),
        p_count=_ints(memo.count_o),
        p_first=_ints(memo.p_first),
        p_rest=_ints(memo.p_rest),
        piece_of=_ints(piece_of),
        fork_rows=fork_rows,
        side_roots=side_roots,
        ahead=ahead,
        path_runs=on_path.tobytes(),
        leaf_run=leaf_run,
        last_cut=last_cut,
        rows=int(ends[-1]) if len(ends) else 0,
        deepest=memo.deepest,
    )


def _repieced(last: _Memo, laid: _Laid, lo: Any, rows_in: Any, end: Any) -> _Memo | None:
    """The pieces of `last` with those that changed since made again, or None if too many did.
    A leaf move (`_relay`) draws the same runs, in the same order unless the path now takes
    another child at a fork, which moves the stretch of pieces of that fork's group; and it
    changes the rows of a run or two (the old and new leaf are shown for being the leaf) and
    the end of the last. Making every piece again gathers five arrays over all of them (1.7 ms
    on the deep 1M tree, 180,000 pieces); this copies those that change, makes the moved
    stretches again and sets the runs that changed."""
    seen, runs_o = len(last.rows_in), laid.runs_o
    stretches: list[tuple[int, int]] = []
    if not (last.runs_o is runs_o and last.depth_s is laid.depth_s and last.side_s is laid.side_s):
        if laid.moved is None or laid.moved[0] is not last.runs_o or len(runs_o) != len(last.runs_o):
            return None
        stretches = _merged(laid.moved[1])
        if sum(e - a for a, e in stretches) > len(runs_o) // 2:
            return None  # gathering them all is as cheap as copying and then most of that
    same_lo = lo is last.lo or (lo.base is not None and lo.base is last.lo.base)
    if not (same_lo and len(rows_in) >= seen):
        return None  # runs past `seen` are new: with the same pieces, none of them is drawn
    grown = np.flatnonzero(rows_in[:seen] != last.rows_in)
    moved = np.flatnonzero(end[:seen] != last.end)
    if len(grown) + len(moved) > FEW_CHANGED:
        return None
    count_o, starts, p_hi = last.count_o, last.starts, last.p_hi
    p_lo, p_first, p_rest, deepest = last.p_lo, last.p_first, last.p_rest, last.deepest
    if stretches:
        count_o, p_lo, p_hi, p_first, p_rest = (a.copy() for a in (count_o, p_lo, p_hi, p_first, p_rest))
        for a, e in stretches:
            part = runs_o[a:e]
            count_o[a:e] = rows_in.take(part)
            p_lo[a:e] = lo.take(part)
            p_hi[a:e] = end.take(part)
            rest = 2 * laid.depth_s[a:e]
            p_rest[a:e] = rest
            p_first[a:e] = rest - laid.side_s[a:e]
        deepest = int(laid.depth_s.max())
    count_o = _set_drawn(count_o, last.count_o, grown, rows_in, laid.piece_of)
    p_hi = _set_drawn(p_hi, last.p_hi, moved, end, laid.piece_of)
    if count_o is not last.count_o:
        starts = np.empty(len(count_o) + 1, dtype=INT)
        starts[0] = 0
        np.cumsum(count_o, out=starts[1:])
    return _Memo(
        runs_o=runs_o,
        depth_s=laid.depth_s,
        side_s=laid.side_s,
        lo=lo,
        rows_in=rows_in,
        end=end,
        count_o=count_o,
        starts=starts,
        p_lo=p_lo,
        p_hi=p_hi,
        p_first=p_first,
        p_rest=p_rest,
        deepest=deepest,
    )


def _set_drawn(values: Any, kept: Any, runs: Any, source: Any, piece_of: Any) -> Any:
    """`values` (per piece) with each drawn run of `runs` set from `source` (per run) at its
    piece; copied first if it still is `kept`, the last layout's array."""
    for r in runs.tolist():
        k = int(piece_of[r])
        if k >= 0:
            if values is kept:
                values = values.copy()
            values[k] = source[r]
    return values


def _merged(stretches: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches `[a, e)` as few disjoint ones covering the same places, in order (a
    rotation's stretch holds those of the columns it changes)."""
    merged: list[tuple[int, int]] = []
    for a, e in sorted(stretches):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((a, e))
    return merged


def _spans(starts: Any, stops: Any, count: int) -> Any:
    """+1 at each start and -1 at each stop (over `count + 1` slots): its running sum counts
    the spans `starts[k]:stops[k]` covering each place. Starts are distinct (runs' preorder
    numbers); stops may repeat (subtrees that end together)."""
    steps = np.zeros(count + 1, dtype=INT)
    steps[starts] = 1
    np.subtract.at(steps, stops, 1)
    return steps


def _first_shown(vis: bytearray, shown_before: Any, lo: Any, hi: Any) -> Any:
    """The first shown position in each range `lo[k]:hi[k]` (`len(vis)` if none), ranges in
    file order: `lo[k]` for most, else found by `bytearray.find`, or when many, a few steps
    ahead at once and then by bisection over `shown_before` (the first position past which
    one more entry is shown; sorted keys let numpy's search narrow)."""
    n = len(vis)
    # A view for this call only: kept (by the caller's closure), it would pin `vis`, which
    # `Outline.grow` lengthens in place.
    mask = np.frombuffer(vis, dtype=np.uint8)
    first = lo.copy()
    later = np.flatnonzero(mask.take(lo) == 0)
    step = 0
    while len(later) > FIND_MAX and step < NEAR_STEPS:
        # Side branches often start with an entry or two the filter hides: `z` on the deep
        # 1M tree met 90,908 such, and this function took 1.7 ms with bisection alone, 0.7
        # with these steps first.
        step += 1
        at = lo.take(later) + step
        found = at < hi.take(later)
        found &= mask.take(np.minimum(at, n - 1)) == 1
        first[np.compress(found, later)] = np.compress(found, at)
        later = np.compress(~found, later)
    if len(later) <= FIND_MAX:
        for k in later.tolist():
            f = vis.find(1, int(lo[k]), int(hi[k]))
            first[k] = f if f >= 0 else n
        return first
    found = np.searchsorted(shown_before, shown_before.take(lo.take(later)) + 1) - 1
    first[later] = np.where(found < hi.take(later), found, n)
    return first


def _cuts(
    folded: Collection[int], mask: Any, lo: Any, hint: tuple[Any, Any] | None = None
) -> tuple[Any, Any]:
    """(runs, positions): for each run holding a folded entry that is shown, the first such;
    runs in order. `Folds` are read in place, sorted already: `z` folds every side branch,
    ~90,000 entries on a deep tree, and sorted keys make the search for their runs a merge;
    when they are the side roots `z` was just handed (`hint`), there is no search at all."""
    if not folded:
        empty = np.zeros(0, dtype=INT)
        return empty, empty
    at = np.frombuffer(Folds.of(folded).positions, dtype=np.int64).astype(INT, copy=False)
    if hint is not None and _hinted(at, hint[1], mask):
        return hint[0], at
    at = at[(at >= 0) & (at < len(mask))]
    at = at[mask[at] == 1]
    run = np.searchsorted(lo, at, side="right") - 1
    first = np.ones(len(run), dtype=bool)  # a run's first folded entry: its smallest
    np.not_equal(run[1:], run[:-1], out=first[1:])
    return run[first], at[first]


def _hinted(at: Any, first: Any, mask: Any) -> bool:
    """Whether the folds `at` are the side roots `first` themselves (the same memory: `z` hands
    them over without a copy) and each is shown under `mask` (a filter may have changed since):
    then each is the only fold in its run, and the runs are known."""
    return (
        len(at) == len(first) > 0
        and at.ctypes.data == first.ctypes.data
        and int(at[0]) >= 0
        and int(at[-1]) < len(mask)
        and bool(mask.take(at).all())
    )


def _nearest(flags: Any, par: Any) -> Any:
    """For each run, its nearest proper ancestor whose flag is set (-1: none). Most runs are
    flagged (something in them is shown), so only the others are resolved, by pointer doubling:
    a few passes over them however deep the tree."""
    count = len(flags)
    if not flags.any():
        return np.full(count, -1, dtype=INT)
    up = np.arange(count + 1, dtype=INT)  # a run if flagged, else its nearest flagged ancestor
    up[count] = -1  # what `par`'s -1 (above the roots) reads
    off = np.flatnonzero(~flags).astype(INT)
    if len(off):
        flagged = np.append(flags, True)  # index -1: above the roots
        slot = np.empty(count + 1, dtype=INT)  # a run's place in `off`
        slot[off] = np.arange(len(off), dtype=INT)
        jump = par[off]
        while True:
            stuck = np.flatnonzero(~flagged[jump])
            if not len(stuck):
                break
            jump[stuck] = jump[slot[jump[stuck]]]
        up[off] = jump
    return up[par]

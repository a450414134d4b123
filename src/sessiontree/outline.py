"""The append log as rows to draw: a flattened, filtered, foldable view of the tree.

Indentation grows with the nesting of *side* branches only, never with the number of forks
along one path: at a fork, the child that continues the path being read stays in its parent's
column (on the active path, the child toward the leaf; inside a side branch, its latest child),
and the other children are drawn just below the fork as blocks one step in (`├─`/`│`). A
session where the user went back and retried three hundred times therefore reads as one column
with three hundred one-step blocks, not as a staircase that runs out of width (Pi's /tree
indents at every fork, see pi-coding-agent's `tree-selector.js`).

The layout works on *runs*, not entries: a run is a stretch of consecutive positions where each
entry is the only child of the one before it. An agent appends its turns one after another, so
a million-entry session is a few thousand runs, and every row of one run shares its column.
Building the rows therefore costs Python work per run and C-speed byte counting per entry
(`bytearray.count`/`find` over the filter's mask); the rows themselves are never materialised:
the row → entry and entry → row maps are answered by bisection over the runs drawn. A tree of
many runs (thousands of forks) is laid out by `layout` with array operations instead of this
module's loop over runs; both give the same pieces.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from enum import Enum
from itertools import compress
from typing import TYPE_CHECKING, TypeAlias

from .folds import Folds
from .storage.index import (
    ACTIVE_TOOLS_CHANGE,
    CUSTOM,
    LABEL,
    LEAF,
    MODEL_CHANGE,
    NONE,
    SESSION_INFO,
    THINKING_LEVEL_CHANGE,
    TOOL_ONLY,
    TOOL_RESULT,
    USER,
    TreeIndex,
)
from .storage.runs import Runs, children

if TYPE_CHECKING:
    from .layout import Pieces

GUIDE = 3  # columns per level of side-branch nesting
BLOCK = 4096  # entries per block when finding the k-th shown entry of a long run
# From this many runs the layout is computed with array operations (`layout`, numpy): below
# it, the loop over runs takes a few milliseconds and numpy's import would cost more.
VECTOR_MIN = 4096
MANY_MATCHES = 4096  # search matches whose rows `rows_of` finds with array operations
WALK_MOST = 512  # runs a leaf move walks before the path is marked anew at once (`ActivePath`)

# Per-piece numbers: arrays the loop appends to, or views of the numpy layout's arrays; both
# index as plain ints.
Ints: TypeAlias = "array[int] | memoryview"


class Cycle(Enum):
    """An enum whose `next()` goes round its members (filters, preview modes)."""

    def next(self):
        members = list(type(self))
        return members[(members.index(self) + 1) % len(members)]


class Filter(Cycle):
    """Pi's /tree filters, in Pi's cycling order."""

    DEFAULT = "default"  # no settings or bookkeeping entries, no assistant turns of only tool calls
    NO_TOOLS = "no-tools"  # the default minus tool results
    USER = "user-only"
    LABELED = "labeled-only"
    ALL = "all"

    @classmethod
    def _missing_(cls, value: object) -> Filter | None:
        name = _OLD_NAMES.get(str(value))  # names used before the filters followed Pi's
        return cls(name) if name else None


_OLD_NAMES = {"user messages": "user-only", "everything": "all", "labeled": "labeled-only"}


_HIDDEN_BY_DEFAULT = {
    LABEL,
    CUSTOM,
    LEAF,
    THINKING_LEVEL_CHANGE,
    MODEL_CHANGE,
    ACTIVE_TOOLS_CHANGE,
    SESSION_INFO,
}
_DEFAULT_TABLE = bytes(0 if code in _HIDDEN_BY_DEFAULT else 1 for code in range(256))
_USER_TABLE = bytes(1 if code == USER else 0 for code in range(256))
_NOT_TOOL_TABLE = bytes(0 if code == TOOL_RESULT else 1 for code in range(256))
_NOT_TOOL_ONLY_TABLE = bytes(0 if flags & TOOL_ONLY else 1 for flags in range(256))
# entries that change the layout beyond their own row: what `Outline.grow` leaves to a rebuild
_RELAYOUT_TABLE = bytes(1 if code in (LABEL, LEAF, CUSTOM, SESSION_INFO) else 0 for code in range(256))


def _and(a: bytes | bytearray, b: bytes | bytearray) -> bytes:
    """Bytewise AND of two 0/1 masks of one length, at C speed (as big integers)."""
    n = len(a)
    return (int.from_bytes(a, "little") & int.from_bytes(b, "little")).to_bytes(n, "little")


def _type_mask(index: TreeIndex, flt: Filter, start: int, end: int) -> bytearray:
    """The part of `flt`'s mask that depends only on each entry's own type, role and flags."""
    if flt is Filter.ALL:
        return bytearray(b"\x01") * (end - start)
    if flt is Filter.USER:
        return bytearray(index.role[start:end].translate(_USER_TABLE))
    shown = _and(
        index.kind[start:end].translate(_DEFAULT_TABLE),
        index.flags[start:end].translate(_NOT_TOOL_ONLY_TABLE),
    )
    if flt is Filter.NO_TOOLS:
        shown = _and(shown, index.role[start:end].translate(_NOT_TOOL_TABLE))
    return bytearray(shown)


def _finish(index: TreeIndex, flt: Filter, labels: Mapping[str, str], vis: bytearray) -> bytearray:
    """What depends on the session's state rather than the entries: the leaf, the labels."""
    if flt is Filter.LABELED:
        for eid in labels:
            i = index.pos.get(eid)
            if i is not None and i < len(vis):
                vis[i] = 1
    elif flt in (Filter.DEFAULT, Filter.NO_TOOLS):
        leaf = index.leaf
        if 0 <= leaf < len(vis) and index.flags[leaf] & TOOL_ONLY:
            vis[leaf] = 1  # as in Pi, the current leaf is always shown
        # A labelled turn that only calls tools, which Pi hides: its label was nowhere to be
        # seen but under labeled-only (QA), and a label is set to be found again.
        for eid in labels:
            i = index.pos.get(eid)
            if i is not None and i < len(vis) and index.flags[i] & TOOL_ONLY:
                vis[i] = 1
    return vis


def visibility(index: TreeIndex, flt: Filter, labels: Mapping[str, str]) -> bytearray:
    """One byte per entry: 1 = shown under `flt` (computed with bytes.translate, C speed)."""
    if flt is Filter.LABELED:
        return _finish(index, flt, labels, bytearray(len(index)))
    return _finish(index, flt, labels, _type_mask(index, flt, 0, len(index)))


class Masks:
    """`visibility` per filter, kept and extended as entries arrive: recomputing a mask is a
    pass over every entry, and switching filters back and forth should not pay it again."""

    __slots__ = ("_types", "index")

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self._types: dict[Filter, bytearray] = {}

    def mask(self, flt: Filter, labels: Mapping[str, str]) -> bytearray:
        """A fresh mask (the caller may change it) for `flt` over every entry indexed so far."""
        index = self.index
        n = len(index)
        if flt is Filter.LABELED:
            return _finish(index, flt, labels, bytearray(n))
        types = self._types.get(flt)
        if types is None or len(types) > n:
            types = self._types[flt] = _type_mask(index, flt, 0, n)
        elif len(types) < n:
            types += _type_mask(index, flt, len(types), n)
        return _finish(index, flt, labels, bytearray(types))


class ActivePath:
    """One byte per entry, 1 on the path from the leaf to its root, moved by difference: a leaf
    move costs the runs between the old and the new leaf (slices set at C speed), not the
    depth of the tree."""

    __slots__ = ("index", "leaf", "marks", "relinks")

    def __init__(self, index: TreeIndex) -> None:
        self.index = index
        self.marks = bytearray()
        self.leaf = NONE
        self.relinks = index.relinks

    def update(self) -> bytearray:
        index, marks = self.index, self.marks
        if index.relinks != self.relinks:  # an adoption changed ancestors: start over
            self.relinks = index.relinks
            marks[:] = bytes(len(marks))
            self.leaf = NONE
        if len(marks) < len(index):
            marks.extend(bytes(len(index) - len(marks)))
        new = index.leaf
        if new == self.leaf:
            return marks
        # On a tree of many runs, a path that would take long to walk is marked anew with array
        # operations instead (a leaf move across 100,000 forks: 70 ms walked, 3 ms at once).
        budget = WALK_MOST if len(index.runs()) >= VECTOR_MIN and not index.relinks else -1
        meet = NONE  # where the new path meets the old one (NONE: they share nothing)
        for lo, hi in index.ranges(new):  # up the new path, a run at a time
            m = marks.rfind(1, lo, hi + 1)  # the old path covers a prefix of a run it enters
            if m >= 0:
                marks[m + 1 : hi + 1] = b"\x01" * (hi - m)
                meet = m
                break
            marks[lo : hi + 1] = b"\x01" * (hi + 1 - lo)
            budget -= 1
            if budget == 0:
                return self._anew(new)
        if self.leaf >= 0:
            for lo, hi in index.ranges(self.leaf):  # the old path below the meeting point is left
                if lo <= meet <= hi:
                    marks[meet + 1 : hi + 1] = bytes(hi - meet)
                    break
                marks[lo : hi + 1] = bytes(hi + 1 - lo)
                budget -= 1
                if budget == 0:
                    return self._anew(new)
        self.leaf = new
        return marks

    def _anew(self, leaf: int) -> bytearray:
        from .layout import path_marks  # numpy: loaded only for trees of many runs

        self.marks[:] = path_marks(self.index, self.index.runs(), leaf)
        self.leaf = leaf
        return self.marks


class Outline:
    """Rows for one (filter, folds, active path) combination of a `TreeIndex`.

    The rows are *pieces* in drawing order: a piece is the shown entries of one run (up to a
    folded entry), with the row it starts at and its guide prefixes."""

    __slots__ = (
        "_ahead",
        "_blocks",
        "_fork_rows",
        "_last_cut",
        "_leaf",
        "_leaf_run",
        "_path",
        "_path_runs",
        "_piece_of",
        "_relinks",
        "_runs_count",
        "_seen",
        "_side_roots",
        "_sums",
        "folded",
        "index",
        "p_count",
        "p_first",
        "p_hi",
        "p_lo",
        "p_rest",
        "p_row",
        "prefixes",
        "rows",
        "runs",
        "vis",
    )

    def __init__(
        self,
        index: TreeIndex,
        flt: Filter = Filter.DEFAULT,
        labels: Mapping[str, str] | None = None,
        folded: Collection[int] = (),
        marks: bytes | bytearray | ActivePath | None = None,
        restrict: bytes | bytearray | None = None,
        *,
        runs: Runs | None = None,
        vis: bytearray | None = None,
        trial: bool = False,
    ) -> None:
        """`marks`: the active path from the index's leaf, one byte per entry, 1 on the path
        (see `active_marks`), or an `ActivePath` that keeps them; it decides which child
        continues a fork in place. Without it, the marks are computed when needed: the array
        layout never needs them (it takes the path per run). `restrict`:
        one byte per entry, 0 hides the entry whatever the filter says (search as a filter).
        `runs` and `vis` (the filter's mask, see `Masks`) may be passed in when kept between
        builds; they must be up to date with `index`. A `trial` outline is built only for what
        the filter keeps (`SessionTreeView.prepare`): the next build does not start from it."""
        self.index = index
        self.vis = vis if vis is not None else visibility(index, flt, labels or {})
        if restrict is not None:
            n = len(self.vis)
            self.vis = bytearray(_and(self.vis, bytes(restrict[:n]).ljust(n, b"\x01")))
        self.folded = Folds.of(folded)  # a value: kept without a copy when it is one
        self._path = marks
        self._path_runs: bytes | None = None  # from the array layout: 1 per run on the path
        self._leaf_run = NONE
        if runs is None:
            runs = Runs(index)
        self.runs = runs
        self.prefixes: list[str] = [""]
        self._side_roots: Sequence[int] | Callable[[], Sequence[int]] = []
        self._ahead: Callable[[], None] | None = None
        self.p_lo: Ints = array("q")
        self.p_hi: Ints = array("q")
        self.p_row: Ints = array("q")
        self.p_count: Ints = array("q")
        self.p_first: Ints = array("q")  # prefix id of a piece's first row
        self.p_rest: Ints = array("q")  # prefix id of its other rows
        self._piece_of: Ints = array("q")  # run -> its piece, -1 for runs not drawn
        # rows whose entry has two or more shown children (the array layout finds them when asked)
        self._fork_rows: Sequence[int] | Callable[[], Sequence[int]] = []
        self._sums: dict[int, list[int]] = {}  # piece -> shown entries before each block
        self._blocks: dict[tuple[int, int], list[int]] = {}  # (piece, block) -> shown positions
        self.rows = 0
        self._seen = len(self.vis)  # what `grow` needs to know about the log as built
        self._runs_count = len(runs)
        self._leaf = index.leaf
        self._relinks = index.relinks
        self._last_cut = False  # the last run is cut short by a fold
        self._build(trial)

    @classmethod
    def empty(cls, index: TreeIndex) -> Outline:
        """No rows (a placeholder until the first real build); costs nothing."""
        return cls(index, Filter.LABELED, {}, marks=b"", runs=_NO_RUNS, vis=bytearray())

    def __len__(self) -> int:
        return self.rows

    # Made on each use, not kept: kept, they would point back at the outline, and the cycle
    # would keep a replaced outline's arrays (tens of MB on a deep 1M-entry tree) alive until
    # Python's next full garbage-collection pass, so every rebuild took fresh memory.
    @property
    def rows_pos(self) -> _Positions:
        """The entry on each row, as if the rows were a list."""
        return _Positions(self)

    @property
    def row_of(self) -> _RowOf:
        """The row of each entry (-1: not drawn), as if it were an array per entry."""
        return _RowOf(self)

    # --- building -----------------------------------------------------------------------------

    def _build(self, trial: bool) -> None:
        if len(self.runs) >= VECTOR_MIN:
            from .layout import lay_out  # numpy: loaded only for trees of many runs

            pieces = lay_out(self.index, self.runs, self.vis, self.folded, self._leaf, trial=trial)
            if pieces is not None:
                self._take(pieces)
                return
        self._loop()

    def _take(self, pieces: Pieces) -> None:
        self.p_lo, self.p_hi, self.p_row = pieces.p_lo, pieces.p_hi, pieces.p_row
        self.p_count, self.p_first, self.p_rest = pieces.p_count, pieces.p_first, pieces.p_rest
        self._piece_of, self._fork_rows = pieces.piece_of, pieces.fork_rows
        self._side_roots, self._ahead = pieces.side_roots, pieces.ahead
        self.rows = pieces.rows
        self._last_cut = pieces.last_cut
        self._path_runs, self._leaf_run = pieces.path_runs, pieces.leaf_run
        self.prefixes = [text for d in range(pieces.deepest + 1) for text in ("│  " * d, "│  " * d + "├─ ")]

    def _loop(self) -> None:
        vis, runs, marks = self.vis, self.runs, self.marks
        lo_of, hi_of, kids_of = runs.lo, runs.hi, runs.kids
        cut: dict[int, int] = {}  # run -> its first shown folded entry: nothing below is drawn
        for f in self.folded:
            if 0 <= f < len(vis) and vis[f]:
                r = runs.of(f)
                if f < cut.get(r, f + 1):
                    cut[r] = f
        self._last_cut = len(runs) - 1 in cut

        def shown(runs_below: list[int]) -> list[int]:
            """The runs that start the shown children below a run, oldest first: a run with
            nothing shown gives way to its own children, depth first."""
            out: list[int] = []
            todo = runs_below[::-1]
            while todo:
                r = todo.pop()
                if vis.find(1, lo_of[r], hi_of[r]) >= 0:
                    out.append(r)
                else:
                    todo.extend(kids_of(r)[::-1])
            return out

        # Prefixes are `│  ` per level of side-branch nesting; a block's first row ends in `├─ `
        # instead. Prefix id 2d is the body of depth d, 2d + 1 the first row of a block at d + 1.
        stack: list[tuple[int, int, int]] = []  # (run, prefix id of its first row, depth)
        side_roots: list[int] = []
        fork_rows: list[int] = []
        self._side_roots, self._fork_rows = side_roots, fork_rows
        p_lo, p_hi, p_row, p_count, p_first, p_rest = (array("q") for _ in range(6))
        self.p_lo, self.p_hi, self.p_row, self.p_count = p_lo, p_hi, p_row, p_count
        self.p_first, self.p_rest = p_first, p_rest
        piece_of: dict[int, int] = {}
        deepest = 0

        def fork(kids: list[int], depth: int) -> None:
            """The side branches (oldest first) as blocks one step in, then the child that
            continues the path in the fork's own column (pushed first: popped last)."""
            firsts = [vis.find(1, lo_of[k], hi_of[k]) for k in kids]
            main = len(kids) - 1
            for j, e in enumerate(firsts):
                if e < len(marks) and marks[e]:
                    main = j
                    break
            stack.append((kids[main], 2 * depth, depth))
            for j in range(len(kids) - 1, -1, -1):
                if j != main:
                    stack.append((kids[j], 2 * depth + 1, depth + 1))
            side_roots.extend(e for j, e in enumerate(firsts) if j != main)

        roots = shown([runs.of(h) for h in self.index.roots]) if len(runs) else []
        if roots:
            fork(roots, 0)
        rows = 0
        while stack:
            r, line_pid, depth = stack.pop()
            deepest = max(deepest, depth)
            body = 2 * depth
            while True:  # a chain of runs: every row is drawn in the same column
                lo = lo_of[r]
                f = cut.get(r, NONE)
                hi = hi_of[r] if f == NONE else f + 1
                count = vis.count(1, lo, hi)
                piece_of[r] = len(p_lo)
                p_lo.append(lo)
                p_hi.append(hi)
                p_row.append(rows)
                p_count.append(count)
                p_first.append(line_pid)
                p_rest.append(body)
                rows += count
                line_pid = body
                if f != NONE:  # folded: its row is drawn, nothing below it
                    if vis.find(1, f + 1, hi_of[r]) < 0 and len(shown(kids_of(r))) > 1:
                        fork_rows.append(rows - 1)
                    break
                kids = shown(kids_of(r))
                if len(kids) == 1:
                    r = kids[0]
                    continue
                if kids:
                    fork_rows.append(rows - 1)
                    fork(kids, depth)
                break
        self.rows = rows
        self._piece_of = array("q", [-1]) * len(runs)
        for r, k in piece_of.items():
            self._piece_of[r] = k
        fork_rows.sort()
        side_roots.sort()
        self.prefixes = [text for d in range(deepest + 1) for text in ("│  " * d, "│  " * d + "├─ ")]

    def grow(self, vis: bytearray, restrict: bytes | bytearray | None = None) -> bool:
        """Take in entries appended since the build if all they do is lengthen the chain drawn
        last (an agent writing its next turns at the leaf): their rows go at the end, in
        O(new entries) whatever the size and shape of the tree. `vis` is the filter's mask
        over the grown log. Returns False, changing nothing, when anything else may have
        changed; the caller rebuilds then."""
        index, runs = self.index, self.runs
        old, n = self._seen, len(index)
        if n == old:
            return True
        r, k = len(runs) - 1, len(self.p_lo) - 1
        if len(runs) != self._runs_count or k < 0 or len(vis) != n:
            return False  # a new run: a fork, a new root, or a chain written elsewhere
        if index.relinks != self._relinks:
            return False  # an entry written before its parent was adopted: a subtree moved
        if self.p_lo[k] != runs.lo[r] or self.p_hi[k] != old or runs.hi[r] != n or self._last_cut:
            return False  # the run that grew is not the last one drawn, or it is folded
        if bytes(index.kind[old:n]).translate(_RELAYOUT_TABLE).count(1):
            return False  # a label, leaf move, archive or name changes more than these rows
        leaf, was = index.leaf, self._leaf
        if leaf != was:
            if not (runs.lo[r] <= was <= leaf):  # the leaf moved down this run, or not at all
                return False
            if 0 <= was < old and vis[was] != self.vis[was]:
                return False  # the old leaf was shown only for being the leaf
        part = vis[old:n]
        if restrict is not None:
            part = bytearray(_and(part, bytes(restrict[old:n]).ljust(n - old, b"\x01")))
        self.vis += part
        added = part.count(1)
        self.p_hi[k] = n
        self.p_count[k] += added
        self.rows += added
        self._sums.pop(k, None)
        for key in [key for key in self._blocks if key[0] == k]:
            del self._blocks[key]
        self._seen, self._leaf = n, leaf
        if leaf != was and not isinstance(self._path, ActivePath):
            self._path = None  # marked anew from the leaf when next asked
        return True

    # --- queries ------------------------------------------------------------------------------

    @property
    def marks(self) -> bytes | bytearray:
        """One byte per entry, 1 on the active path (computed on first use if not given)."""
        path = self._path
        if isinstance(path, ActivePath):
            return path.update()
        if path is None:
            path = self._path = active_marks(self.index, self._leaf)
        return path

    def on_path(self, i: int) -> bool:
        """Whether entry `i` lies on the active path."""
        on_runs = self._path_runs
        if on_runs is None:
            marks = self.marks
            return i < len(marks) and bool(marks[i])
        r = self.runs.of(i)
        return 0 <= r < len(on_runs) and bool(on_runs[r]) and (r != self._leaf_run or i <= self._leaf)

    @property
    def side_roots(self) -> Sequence[int]:
        """The first entries of the side-branch blocks drawn, in file order (what `z` folds).
        The array layout finds them only when asked."""
        if callable(self._side_roots):
            self._side_roots = self._side_roots()
        return self._side_roots

    def warm(self) -> None:
        """Find now what the next keys would find when pressed: the side branches `z` folds,
        the forks `[` and `]` jump to, and what the next build reads from this one. The app
        calls this while nobody types: on the deep 1M-entry tree (`bench/make_session.py
        --shape deep`) `z` after a filter change no longer pays ~3 ms of its ~10."""
        self.side_roots  # noqa: B018 (a property that computes and keeps them)
        self.next_fork_row(0, 1)
        if self._ahead is not None:
            self._ahead()
            self._ahead = None

    @property
    def side_folds(self) -> Folds:
        """`side_roots` as folds (sorted already: no sort, no copy)."""
        return Folds.of(self.side_roots)

    def _piece(self, row: int) -> int:
        return bisect_right(self.p_row, row) - 1

    def position(self, row: int) -> int:
        """The entry drawn on `row` (0 <= row < len(self))."""
        if not 0 <= row < self.rows:
            raise IndexError(row)
        k = self._piece(row)
        j = row - self.p_row[k]
        lo = self.p_lo[k]
        if self.p_count[k] == self.p_hi[k] - lo:  # every entry of the run is shown
            return lo + j
        sums = self._sums.get(k)
        if sums is None:
            sums = self._sums[k] = self._block_sums(k)
        b = bisect_right(sums, j) - 1
        block = self._blocks.get((k, b))
        if block is None:
            if len(self._blocks) > 256:  # rows on screen touch a handful; keep memory flat
                self._blocks.clear()
            start = lo + b * BLOCK
            end = min(start + BLOCK, self.p_hi[k])
            block = self._blocks[(k, b)] = list(compress(range(start, end), self.vis[start:end]))
        return block[j - sums[b]]

    def _block_sums(self, k: int) -> list[int]:
        vis, hi = self.vis, self.p_hi[k]
        sums, total = [0], 0
        for start in range(self.p_lo[k], hi, BLOCK):
            total += vis.count(1, start, min(start + BLOCK, hi))
            sums.append(total)
        sums.pop()  # the last block's end: `bisect` then finds the block a row is in
        return sums

    def prefix(self, row: int) -> str:
        k = self._piece(row)
        return self.prefixes[self.p_first[k] if row == self.p_row[k] else self.p_rest[k]]

    def exact_row(self, i: int) -> int:
        """The row showing entry `i`, or -1 if it is not drawn."""
        if not 0 <= i < len(self.vis) or not self.vis[i]:
            return -1
        k = self._piece_of[self.runs.of(i)]
        if k < 0 or i >= self.p_hi[k]:
            return -1
        return self.p_row[k] + self.vis.count(1, self.p_lo[k], i)

    def rows_of(self, positions: Collection[int]) -> list[int]:
        """The rows showing these entries (those drawn), sorted: one count per run touched
        instead of one per entry, so thousands of search matches cost milliseconds; past
        `MANY_MATCHES`, with array operations (`layout.match_rows`)."""
        vis, piece_of, of = self.vis, self._piece_of, self.runs.of
        if len(positions) > MANY_MATCHES:
            from .layout import match_rows  # numpy

            return match_rows(self.runs, vis, piece_of, self.p_lo, self.p_hi, self.p_row, positions)
        by_piece: dict[int, list[int]] = {}
        for i in positions:
            if 0 <= i < len(vis) and vis[i]:
                k = piece_of[of(i)]
                if k >= 0 and i < self.p_hi[k]:
                    by_piece.setdefault(k, []).append(i)
        rows: list[int] = []
        for k, members in by_piece.items():
            members.sort()
            row, at = self.p_row[k], self.p_lo[k]
            for i in members:
                row += vis.count(1, at, i)
                rows.append(row)
                at = i
        rows.sort()
        return rows

    def row_for(self, i: int) -> int:
        """The row showing entry `i`, or of its nearest shown ancestor (-1 if none)."""
        if not self.rows:  # nothing to find: do not walk a path of a million entries to its root
            return -1
        parent, vis = self.index.parent, self.vis
        # A fold near the root of a deep tree hides a path of 90,000 runs: past a few hundred,
        # the runs above are searched at once (only whole runs are left to look at by then).
        budget = WALK_MOST if len(self.runs) >= VECTOR_MIN else -1
        while 0 <= i < len(vis):
            r = self.runs.of(i)
            k = self._piece_of[r]
            if k >= 0:
                lo, hi = self.p_lo[k], self.p_hi[k]
                shown = vis.count(1, lo, min(i + 1, hi))  # up to i, or up to the folded entry
                if shown:
                    return self.p_row[k] + shown - 1
            i = parent[self.runs.lo[r]]
            budget -= 1
            if budget == 0 and i >= 0:
                from .layout import drawn_above  # numpy: loaded only for trees of many runs

                found = drawn_above(self.index, self.runs, self._piece_of, self.p_count, self.runs.of(i))
                if found is not None:
                    return self.p_row[found] + self.p_count[found] - 1 if found >= 0 else -1
        return -1

    def visiblechildren(self, i: int) -> list[int]:
        """Children of `i` in the filtered tree: hidden entries are skipped and their visible
        descendants take their place (depth-first, oldest first)."""
        vis, first_child, next_sibling = self.vis, self.index.first_child, self.index.next_sibling
        out: list[int] = []
        todo = children(first_child, next_sibling, i)[::-1]
        while todo:
            c = todo.pop()
            if vis[c]:
                out.append(c)
            else:
                todo.extend(children(first_child, next_sibling, c)[::-1])
        return out

    def is_foldable(self, i: int) -> bool:
        return i in self.folded or bool(self.visiblechildren(i))

    def _forks(self) -> Sequence[int]:
        if callable(self._fork_rows):
            self._fork_rows = self._fork_rows()
        return self._fork_rows

    def fork_count(self, row: int) -> tuple[int, int]:
        """(how many fork rows there are down to `row`, `row` included; how many in all)."""
        forks = self._forks()
        return bisect_right(forks, row), len(forks)

    def next_fork_row(self, row: int, step: int) -> int:
        """The next row (in direction `step`) whose entry has 2+ visible children, or -1."""
        forks = self._forks()
        if step > 0:
            k = bisect_right(forks, row)
            return forks[k] if k < len(forks) else -1
        k = bisect_right(forks, row - 1) - 1
        return forks[k] if k >= 0 else -1

    def iter_positions(self) -> Iterator[int]:
        vis = self.vis
        for lo, hi, count in zip(self.p_lo, self.p_hi, self.p_count, strict=True):
            if count == hi - lo:
                yield from range(lo, hi)
            else:
                yield from compress(range(lo, hi), vis[lo:hi])


class _Positions:
    """`outline.rows_pos[row]`: the entry on a row, as if the rows were a list."""

    __slots__ = ("outline",)

    def __init__(self, outline: Outline) -> None:
        self.outline = outline

    def __len__(self) -> int:
        return self.outline.rows

    def __getitem__(self, row: int) -> int:
        return self.outline.position(row if row >= 0 else row + self.outline.rows)

    def __iter__(self) -> Iterator[int]:
        return self.outline.iter_positions()


class _RowOf:
    """`outline.row_of[i]`: the row of entry `i`, or -1, as if it were an array per entry."""

    __slots__ = ("outline",)

    def __init__(self, outline: Outline) -> None:
        self.outline = outline

    def __getitem__(self, i: int) -> int:
        return self.outline.exact_row(i)


_NO_RUNS = Runs(TreeIndex())


def subtree_size(
    index: TreeIndex, i: int, runs: Runs | None = None, vis: bytes | bytearray | None = None
) -> tuple[int, int]:
    """(entries in the subtree of `i`, the latest position in it): what a folded stub says.
    With `runs`, whole runs are counted at once (a fold near the root of a long session). With
    `vis` (one byte per entry), only the entries it shows below `i` are counted, and `i` itself
    always: a retry left with Enter hides a `leaf` entry the filter does not show, which a
    stub called "1 entry"."""
    first_child, next_sibling = index.first_child, index.next_sibling
    if vis is not None and len(vis) != len(index):  # entries arrived since it was made
        vis = None

    def shown(lo: int, hi: int) -> int:
        return hi - lo if vis is None else vis.count(1, lo, hi)

    if runs is not None and len(runs.lo) and runs.hi[-1] == len(index):
        if len(runs) >= VECTOR_MIN:
            from .layout import subtree_span  # numpy: loaded only for trees of many runs

            span = subtree_span(index, runs, i, vis)
            if span is not None:
                return span
        r = runs.of(i)
        count, latest = 1 + shown(i + 1, runs.hi[r]), runs.hi[r] - 1
        todo = children(first_child, next_sibling, runs.hi[r] - 1)
        while todo:
            r = runs.of(todo.pop())
            count += shown(runs.lo[r], runs.hi[r])
            latest = max(latest, runs.hi[r] - 1)
            todo.extend(children(first_child, next_sibling, runs.hi[r] - 1))
        return count, latest
    count, latest = 0, i
    stack = [i]
    while stack:
        j = stack.pop()
        count += 1 if vis is None or j == i else vis[j]
        if j > latest:
            latest = j
        c = first_child[j]
        while c != NONE:
            stack.append(c)
            c = next_sibling[c]
    return count, latest


def active_marks(index: TreeIndex, leaf: int) -> bytearray:
    """One byte per entry: 1 if it lies on the leaf's root path."""
    marks = bytearray(len(index))
    parent = index.parent
    while leaf >= 0:
        marks[leaf] = 1
        leaf = parent[leaf]
    return marks


def render_plain(outline: Outline, describe) -> list[str]:
    """Plain-text lines (CLI `tree`): prefix + `describe(position)`."""
    return [outline.prefix(r) + describe(i) for r, i in enumerate(outline.iter_positions())]

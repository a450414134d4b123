"""The append log as rows to draw: a flattened, filtered, foldable view of the tree.

Indentation grows with the nesting of *side* branches only, never with the number of forks
along one path: at a fork, the child that continues the path being read stays in its parent's
column (on the active path, the child toward the leaf; inside a side branch, its latest child),
and the other children are drawn just below the fork as blocks one step in (`├─`/`│`). A
session where the user went back and retried three hundred times therefore reads as one column
with three hundred one-step blocks, not as a staircase that runs out of width (Pi's /tree
indents at every fork, see pi-coding-agent's `tree-selector.js`).

Rows are two int arrays (entry position, prefix id) plus a position → row map, so a
million-entry session costs ~12 bytes per entry here. Building is O(visible nodes) with no
recursion; drawing a screen needs only the rows on it.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Mapping
from enum import Enum

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

GUIDE = 3  # columns per level of side-branch nesting


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


def visibility(index: TreeIndex, flt: Filter, labels: Mapping[str, str]) -> bytearray:
    """One byte per entry: 1 = shown under `flt` (computed with bytes.translate, C speed)."""
    n = len(index)
    if flt is Filter.ALL:
        return bytearray(b"\x01") * n
    if flt in (Filter.DEFAULT, Filter.NO_TOOLS):  # masks ANDed at C speed, as big integers
        shown = int.from_bytes(index.kind.translate(_DEFAULT_TABLE), "little")
        shown &= int.from_bytes(index.flags.translate(_NOT_TOOL_ONLY_TABLE), "little")
        if flt is Filter.NO_TOOLS:
            shown &= int.from_bytes(index.role.translate(_NOT_TOOL_TABLE), "little")
        vis = bytearray(shown.to_bytes(n, "little"))
        if index.leaf >= 0 and index.flags[index.leaf] & TOOL_ONLY:
            vis[index.leaf] = 1  # as in Pi, the current leaf is always shown
        return vis
    if flt is Filter.USER:
        return bytearray(index.role.translate(_USER_TABLE))
    vis = bytearray(n)
    for eid in labels:
        i = index.pos.get(eid)
        if i is not None:
            vis[i] = 1
    return vis


class Outline:
    """Rows for one (filter, folds) combination of a `TreeIndex`."""

    __slots__ = (
        "folded",
        "index",
        "marks",
        "prefixes",
        "row_of",
        "rows_pos",
        "rows_prefix",
        "side_roots",
        "vis",
    )

    def __init__(
        self,
        index: TreeIndex,
        flt: Filter = Filter.DEFAULT,
        labels: Mapping[str, str] | None = None,
        folded: Collection[int] = (),
        marks: bytes | bytearray | None = None,
        restrict: bytes | bytearray | None = None,
    ) -> None:
        """`marks`: one byte per entry, 1 on the active path (see `active_marks`); it decides
        which child continues a fork in place. Without it, the latest child does. `restrict`:
        one byte per entry, 0 hides the entry whatever the filter says (search as a filter)."""
        self.index = index
        self.vis = visibility(index, flt, labels or {})
        if restrict is not None:
            n = len(self.vis)
            both = int.from_bytes(self.vis, "little") & int.from_bytes(restrict[:n], "little")
            self.vis = bytearray(both.to_bytes(n, "little"))
        self.folded = set(folded)
        self.marks = marks if marks is not None else active_marks(index, index.leaf)
        self.prefixes: list[str] = [""]
        self.rows_pos = array("i")
        self.rows_prefix = array("i")
        self.row_of = array("i", [-1]) * len(index)
        self.side_roots: list[int] = []  # first entries of the side-branch blocks drawn
        self._build()

    @classmethod
    def empty(cls, index: TreeIndex) -> Outline:
        """No rows (a placeholder until the first real build); costs nothing."""
        outline = cls.__new__(cls)
        outline.index = index
        outline.vis = bytearray()
        outline.folded = set()
        outline.marks = bytearray()
        outline.side_roots = []
        outline.prefixes = [""]
        outline.rows_pos = array("i")
        outline.rows_prefix = array("i")
        outline.row_of = array("i")
        return outline

    def __len__(self) -> int:
        return len(self.rows_pos)

    def visible_children(self, i: int) -> list[int]:
        """Children of `i` in the filtered tree: hidden entries are skipped and their visible
        descendants take their place (depth-first, oldest first)."""
        index, vis = self.index, self.vis
        first_child, next_sibling = index.first_child, index.next_sibling
        out: list[int] = []
        c = first_child[i]
        if c != NONE and next_sibling[c] == NONE and vis[c]:
            return [c]  # the common case: a chain link
        stack: list[int] = []
        while c != NONE:
            stack.append(c)
            c = next_sibling[c]
        stack.reverse()
        while stack:
            c = stack.pop()
            if vis[c]:
                out.append(c)
                continue
            k = first_child[c]
            if k != NONE:
                kids = []
                while k != NONE:
                    kids.append(k)
                    k = next_sibling[k]
                kids.reverse()
                stack.extend(kids)
        return out

    def _visible_roots(self) -> list[int]:
        out: list[int] = []
        for r in self.index.roots:
            if self.vis[r]:
                out.append(r)
            else:
                out.extend(self.visible_children(r))
        return out

    def _build(self) -> None:
        prefix_ids: dict[str, int] = {"": 0}
        prefixes = self.prefixes
        rows_pos, rows_prefix, row_of = self.rows_pos, self.rows_prefix, self.row_of
        folded = self.folded
        visible_children = self.visible_children

        def pid(text: str) -> int:
            k = prefix_ids.get(text)
            if k is None:
                k = prefix_ids[text] = len(prefixes)
                prefixes.append(text)
            return k

        stack: list[tuple[int, int, str]] = []  # (entry, prefix id of its row, prefix below it)
        roots = self._visible_roots()
        if roots:
            self._push_fork(stack, roots, "", pid)
        index, vis = self.index, self.vis
        first_child, next_sibling = index.first_child, index.next_sibling
        n = len(rows_pos)
        while stack:
            i, line_pid, cont = stack.pop()
            cont_pid = pid(cont)
            while True:  # walk a chain: every link is drawn in the same column
                row_of[i] = n
                n += 1
                rows_pos.append(i)
                rows_prefix.append(line_pid)
                if i in folded:
                    break
                c = first_child[i]
                if c != NONE and next_sibling[c] == NONE and vis[c]:
                    i, line_pid = c, cont_pid
                    continue
                kids = visible_children(i)
                if len(kids) == 1:
                    i, line_pid = kids[0], cont_pid
                    continue
                if kids:
                    self._push_fork(stack, kids, cont, pid)
                break

    def _push_fork(self, stack: list[tuple[int, int, str]], kids: list[int], cont: str, pid) -> None:
        """At a fork: the side branches (oldest first) as blocks one step in, then the child
        that continues the path, in the fork's own column (pushed first: popped last)."""
        marks = self.marks
        main = next((k for k in kids if marks[k]), kids[-1])
        stack.append((main, pid(cont), cont))
        sides = [k for k in kids if k != main]
        self.side_roots.extend(sides)
        head, below = pid(cont + "├─ "), cont + "│  "
        for k in reversed(sides):
            stack.append((k, head, below))

    # --- queries ------------------------------------------------------------------------------

    def position(self, row: int) -> int:
        return self.rows_pos[row]

    def prefix(self, row: int) -> str:
        return self.prefixes[self.rows_prefix[row]]

    def row_for(self, i: int) -> int:
        """The row showing entry `i`, or of its nearest shown ancestor (-1 if none)."""
        parent, row_of = self.index.parent, self.row_of
        while i >= 0:
            r = row_of[i]
            if r >= 0:
                return r
            i = parent[i]
        return -1

    def is_foldable(self, i: int) -> bool:
        return i in self.folded or bool(self.visible_children(i))

    def next_fork_row(self, row: int, step: int) -> int:
        """The next row (in direction `step`) whose entry has 2+ visible children, or -1."""
        r = row + step
        while 0 <= r < len(self.rows_pos):
            if len(self.visible_children(self.rows_pos[r])) > 1:
                return r
            r += step
        return -1


def subtree_size(index: TreeIndex, i: int) -> tuple[int, int]:
    """(entries in the subtree of `i`, the latest position in it): what a folded stub says."""
    first_child, next_sibling = index.first_child, index.next_sibling
    count, latest = 0, i
    stack = [i]
    while stack:
        j = stack.pop()
        count += 1
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
    return [outline.prefix(r) + describe(outline.rows_pos[r]) for r in range(len(outline))]

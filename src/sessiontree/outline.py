"""The append log as rows to draw: a flattened, filtered, foldable view of the tree.

Drawn like Pi's /tree: a linear chain stays in one column, and only a fork indents its branches
(`├─`/`└─`). That keeps chains thousands of entries long readable and makes flattening a loop
with no recursion. Rows are two int arrays (entry position, prefix id) plus a position → row
map, so a million-entry session costs ~12 bytes per entry here. Building is O(visible nodes);
drawing a screen needs only the rows on it.
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
    USER,
    TreeIndex,
)

MAX_INDENT_LEVELS = 24


class Cycle(Enum):
    """An enum whose `next()` goes round its members (filters, preview modes)."""

    def next(self):
        members = list(type(self))
        return members[(members.index(self) + 1) % len(members)]


class Filter(Cycle):
    DEFAULT = "default"
    USER = "user messages"
    ALL = "everything"
    LABELED = "labeled"


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


def visibility(index: TreeIndex, flt: Filter, labels: Mapping[str, str]) -> bytearray:
    """One byte per entry: 1 = shown under `flt` (computed with bytes.translate, C speed)."""
    n = len(index)
    if flt is Filter.ALL:
        return bytearray(b"\x01") * n
    if flt is Filter.DEFAULT:
        return bytearray(index.kind.translate(_DEFAULT_TABLE))
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

    __slots__ = ("folded", "index", "prefixes", "row_of", "rows_pos", "rows_prefix", "vis")

    def __init__(
        self,
        index: TreeIndex,
        flt: Filter = Filter.DEFAULT,
        labels: Mapping[str, str] | None = None,
        folded: Collection[int] = (),
    ) -> None:
        self.index = index
        self.vis = visibility(index, flt, labels or {})
        self.folded = set(folded)
        self.prefixes: list[str] = [""]
        self.rows_pos = array("i")
        self.rows_prefix = array("i")
        self.row_of = array("i", [-1]) * len(index)
        self._build()

    @classmethod
    def empty(cls, index: TreeIndex) -> Outline:
        """No rows (a placeholder until the first real build); costs nothing."""
        outline = cls.__new__(cls)
        outline.index = index
        outline.vis = bytearray()
        outline.folded = set()
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
        limit = 3 * MAX_INDENT_LEVELS

        def pid(text: str) -> int:
            k = prefix_ids.get(text)
            if k is None:
                k = prefix_ids[text] = len(prefixes)
                prefixes.append(text)
            return k

        roots = self._visible_roots()
        stack: list[tuple[int, int, str]] = []
        if len(roots) == 1:
            stack.append((roots[0], 0, ""))
        else:
            self._push_fork(stack, roots, "", pid, limit)
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
                    self._push_fork(stack, kids, cont, pid, limit)
                break

    @staticmethod
    def _push_fork(stack, kids: list[int], cont: str, pid, limit: int) -> None:
        if len(cont) >= limit:  # very deep nesting: drop the outermost guides, keep alignment
            cont = "┄  " + cont[-(limit - 3) :]
        last = len(kids) - 1
        for k in range(last, -1, -1):
            is_last = k == last
            line = cont + ("└─ " if is_last else "├─ ")
            stack.append((kids[k], pid(line), cont + ("   " if is_last else "│  ")))

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

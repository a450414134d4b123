"""The row layout as first written: a node-by-node walk of the whole tree. Slow (O(entries) in
Python on every build) but short enough to check by eye; `tests/core/test_outline_runs.py` holds
`sessiontree.outline.Outline`, which works a run of entries at a time, to the very same rows."""

from __future__ import annotations

from array import array
from collections.abc import Collection, Mapping

from sessiontree.outline import Filter, active_marks, visibility
from sessiontree.storage.index import NONE, TreeIndex


class ReferenceOutline:
    """Rows for one (filter, folds) combination of a `TreeIndex`, entry by entry."""

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

    def next_fork_row(self, row: int, step: int) -> int:
        """The next row (in direction `step`) whose entry has 2+ visible children, or -1."""
        r = row + step
        while 0 <= r < len(self.rows_pos):
            if len(self.visible_children(self.rows_pos[r])) > 1:
                return r
            r += step
        return -1

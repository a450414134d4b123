"""The tree structure of an append log, in flat arrays.

Every storage keeps one `TreeIndex`: entry positions (file order) → id, parent, type and message
role, plus first-child/next-sibling links, the folded leaf, labels and the session name. Nothing
here holds entry payloads, so the whole tree of a million-entry session costs a few bytes per
entry plus its id string, and walking a path is integer indexing. Payloads are decoded on demand
by the storage (`load_entry`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..model.entries import normalize_label
from ..model.errors import Diagnostic
from .runs import Runs

if TYPE_CHECKING:
    from . import path_sums

# type codes (0 = unknown type; its name is kept in `unknown_types`)
UNKNOWN = 0
MESSAGE = 1
THINKING_LEVEL_CHANGE = 2
MODEL_CHANGE = 3
ACTIVE_TOOLS_CHANGE = 4
COMPACTION = 5
BRANCH_SUMMARY = 6
CUSTOM = 7
CUSTOM_MESSAGE = 8
LABEL = 9
SESSION_INFO = 10
LEAF = 11

TYPE_CODES: dict[str, int] = {
    "message": MESSAGE,
    "thinking_level_change": THINKING_LEVEL_CHANGE,
    "model_change": MODEL_CHANGE,
    "active_tools_change": ACTIVE_TOOLS_CHANGE,
    "compaction": COMPACTION,
    "branch_summary": BRANCH_SUMMARY,
    "custom": CUSTOM,
    "custom_message": CUSTOM_MESSAGE,
    "label": LABEL,
    "session_info": SESSION_INFO,
    "leaf": LEAF,
}
TYPE_NAMES: dict[int, str] = {v: k for k, v in TYPE_CODES.items()}

# message role codes (0 = not a message)
NO_ROLE = 0
USER = 1
ASSISTANT = 2
TOOL_RESULT = 3
BASH_EXECUTION = 4
CUSTOM_ROLE = 5
OTHER_ROLE = 6
ROLE_CODES: dict[str, int] = {
    "user": USER,
    "assistant": ASSISTANT,
    "toolResult": TOOL_RESULT,
    "bashExecution": BASH_EXECUTION,
    "custom": CUSTOM_ROLE,
}

# entry flags
TOOL_ONLY = 1  # an assistant message with no text that is not an error: only tool calls

Facts = tuple[int, int, int, int, int, int]
"""`TreeIndex.path_facts`: a root path's length, then its nearest compaction, thinking-level
change, model source and active-tools change (positions, NONE where absent), then how many of
its entries add a message to a context (`MESSAGE_KINDS`)."""

# The entry kinds Pi's projection makes a message of, one each: a compaction's is counted apart
# (only the newest on a path heads a context), and a branch summary without text, which adds
# none, is counted among them (the index does not know its text).
MESSAGE_KINDS = (MESSAGE, CUSTOM_MESSAGE, BRANCH_SUMMARY)

NONE = -1  # no parent / no leaf / no child
MISSING = -2  # parent id not present in the log
WALK_FIRST = 1_000  # path entries walked one by one before the runs are made (`TreeIndex.ranges`)
# `path_facts` sums a walk crossing more runs than this with array operations (`path_sums`):
# about 7 µs a run in Python, against a few milliseconds to start numpy's operations.
ARRAY_WALK = 512
KEEP_EVERY = 32  # of the runs such a walk crosses, `path_facts` keeps what holds at one in this many


class TreeIndex:
    """Append-only structure of one session. Positions are ints in file order."""

    __slots__ = (
        "_anc",
        "_fact_tables",
        "_facts",
        "_facts_relinks",
        "_orphans",
        "_roots",
        "_runs",
        "compactions",
        "diagnostics",
        "first_child",
        "flags",
        "ids",
        "kind",
        "labels",
        "last_child",
        "leaf",
        "leaf_targets",
        "next_sibling",
        "parent",
        "pos",
        "relinks",
        "role",
        "session_name",
        "unknown_types",
    )

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent = array("i")
        self.kind = bytearray()
        self.role = bytearray()
        self.flags = bytearray()  # TOOL_ONLY: what Pi's /tree hides by default
        self.first_child = array("i")
        self.last_child = array("i")
        self.next_sibling = array("i")
        # an ordered set (dict keys): adoption takes a root out in O(1), order stays file order
        self._roots: dict[int, None] = {}
        self.leaf: int = NONE
        self.labels: dict[str, str] = {}  # target id -> current label
        self.session_name: str | None = None
        self.compactions: dict[int, tuple[str | None, bool]] = {}  # pos -> (firstKept, has tail)
        self.leaf_targets: dict[int, int] = {}  # leaf-entry pos -> target pos (NONE = null)
        self.unknown_types: dict[int, str] = {}
        self.diagnostics: list[Diagnostic] = []
        self._orphans: dict[str, list[int]] = {}  # missing parent id -> children waiting for it
        self._anc = array("i")  # see `_top`; filled only once an adoption needs it
        self.relinks = 0  # adoptions so far: an entry written before its parent got one
        self._runs: Runs | None = None  # made on the first long walk, then kept up to date
        self._facts: dict[int, Facts] = {}  # see `path_facts`
        self._facts_relinks = 0
        self._fact_tables: path_sums.Tables | None = None  # see `path_facts`; kinds never change

    # --- building ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    def add(
        self,
        eid: str,
        parent_id: str | None,
        type_name: str,
        role: str | None = None,
        *,
        target_id: str | None = None,
        label: object = None,
        name: object = None,
        first_kept: str | None = None,
        has_tail: bool = False,
        tool_only: bool = False,
        line: int | None = None,
    ) -> int:
        """Index one entry (already validated) and fold leaf/labels/name. Returns its position.

        Problems that do not invalidate the line itself (duplicate id, missing parent, leaf
        target unknown) become diagnostics; the caller decides what they mean (read-only).
        """
        i = len(self.ids)
        code = TYPE_CODES.get(type_name, UNKNOWN)
        self.ids.append(eid)
        if eid in self.pos:
            self.diagnostics.append(
                Diagnostic(
                    "error",
                    "duplicate_id",
                    f"entry id {eid!r} is used again (first use at entry #{self.pos[eid] + 1})",
                    line,
                    eid,
                )
            )
        self.pos[eid] = i
        self.kind.append(code)
        self.role.append(ROLE_CODES.get(role, OTHER_ROLE) if role is not None else NO_ROLE)
        self.flags.append(TOOL_ONLY if tool_only else 0)
        self.first_child.append(NONE)
        self.last_child.append(NONE)
        self.next_sibling.append(NONE)
        if code == UNKNOWN:
            self.unknown_types[i] = type_name
        if parent_id is None:
            self.parent.append(NONE)
            self._roots[i] = None
        elif parent_id == eid:
            self.parent.append(MISSING)
            self._roots[i] = None
            self.diagnostics.append(
                Diagnostic("error", "self_parent", f"entry {eid!r} names itself as parent", line, eid)
            )
        else:
            p = self.pos.get(parent_id)
            if p is None:
                self.parent.append(MISSING)
                self._roots[i] = None
                self._orphans.setdefault(parent_id, []).append(i)
            else:
                self.parent.append(p)
                self.link(p, i)
        waiting = self._orphans.pop(eid, None)
        if waiting:  # children that were written before their parent
            self._adopt(i, waiting, line)

        if code == LEAF:
            t = NONE if target_id is None else self.pos.get(target_id)
            if t is None:
                self.diagnostics.append(
                    Diagnostic(
                        "error",
                        "dangling_leaf",
                        f"leaf entry {eid!r} points to unknown entry {target_id!r}; the move is ignored",
                        line,
                        eid,
                    )
                )
                return i
            self.leaf_targets[i] = t
        else:
            t = NONE
        fold_entry(
            self,
            code,
            i,
            leaf_target=t,
            target_id=target_id,
            label=label,
            name=name,
            first_kept=first_kept,
            has_tail=has_tail,
        )
        return i

    def _adopt(self, i: int, children: list[int], line: int | None) -> None:
        # Every waiting child is a root, so it is an ancestor of `i` exactly when it is the root
        # of `i`'s tree; linking it then would close a loop. `i` without a parent is its own root.
        top = self._top(i) if self.parent[i] >= 0 else i
        anc = self._anc
        for child in children:
            if child == top:
                self.diagnostics.append(
                    Diagnostic(
                        "error",
                        "parent_cycle",
                        f"entries {self.ids[child]!r} and {self.ids[i]!r} are each other's"
                        " ancestors; the cycle is cut",
                        line,
                        self.ids[i],
                    )
                )
                continue
            self.parent[child] = i
            self.relinks += 1
            if child < len(anc):
                anc[child] = i
            del self._roots[child]
            self.link(i, child)

    def _top(self, i: int) -> int:
        """The root of the tree `i` is in, in amortised O(log n) (a union-find "find" with path
        compression). `_anc[k]` is some ancestor of k: its parent when copied, later a root met
        above it. Trees only grow by hanging a root under a node (`_adopt`), so an ancestor stays
        an ancestor and the shortcuts stay true. Walking `parent` instead costs the depth of `i`
        per adoption: quadratic for a file whose children come before their parents."""
        anc = self._anc
        if len(anc) < len(self.parent):  # catch up on entries added since (their parent as is)
            anc.extend(self.parent[len(anc) :])
        top = i
        while anc[top] >= 0:
            top = anc[top]
        while anc[i] >= 0 and anc[i] != top:
            anc[i], i = top, anc[i]
        return top

    def link(self, p: int, i: int) -> None:
        """Append `i` to the children of `p` (oldest first)."""
        last = self.last_child[p]
        if last == NONE:
            self.first_child[p] = i
        else:
            self.next_sibling[last] = i
        self.last_child[p] = i

    def finish_load(self, line_of: Callable[[str], int | None] | None = None) -> None:
        """Report parents that never appeared (call once the whole log has been read)."""
        for parent_id, children in self._orphans.items():
            for child in children:
                self.diagnostics.append(
                    Diagnostic(
                        "error",
                        "missing_parent",
                        f"entry {self.ids[child]!r} names parent {parent_id!r}, which is not in the"
                        " log; it is shown as a separate root",
                        line_of(self.ids[child]) if line_of else None,
                        self.ids[child],
                    )
                )

    @property
    def missing_parents(self) -> dict[str, list[int]]:
        return self._orphans

    @property
    def roots(self) -> list[int]:
        """Positions without a parent in the log (true roots and orphans), in file order."""
        return list(self._roots)

    # --- reading ----------------------------------------------------------------------------

    def type_name(self, i: int) -> str:
        code = self.kind[i]
        return TYPE_NAMES[code] if code else self.unknown_types[i]

    def leaf_id(self) -> str | None:
        return None if self.leaf < 0 else self.ids[self.leaf]

    def children(self, i: int) -> Iterator[int]:
        c = self.first_child[i]
        while c != NONE:
            yield c
            c = self.next_sibling[c]

    def branch_counts(self) -> tuple[int, int]:
        """(tips, forks): entries nothing continues, and entries continued more than once.
        `leaf` entries, which record a move of the leaf rather than say anything, are left out:
        browsing back and forth added a tip and a fork per move (QA)."""
        kind, parent = self.kind, self.parent
        # The entries indexed when asked: another thread may be appending (a session shared by
        # threads), and an entry's arrays grow one after the other (IndexError, QA).
        n = min(len(parent), len(kind))
        kids = bytearray(n)  # children counted up to 2: enough to tell
        for i in range(n):
            p = parent[i]
            if p >= 0 and kind[i] != LEAF and kids[p] < 2:
                kids[p] += 1
        tips = sum(1 for i, k in enumerate(kids) if not k and kind[i] != LEAF)
        return tips, kids.count(2)

    def runs(self) -> Runs:
        """The tree cut into runs of consecutive positions (`storage.runs`), up to date."""
        runs = self._runs
        if runs is None:
            runs = self._runs = Runs(self)
        else:
            runs.update()
        return runs

    def ranges(self, i: int) -> Iterator[tuple[int, int]]:
        """The path from `i` up to its root as `(lo, hi)` position ranges, nearest first: each
        range is consecutive positions, each the parent of the one after it, walked from `hi`
        down to `lo` (`i` is the first `hi`).

        Over the runs once they exist. Before, the path is walked one entry at a time, for at most
        a sixteenth of the log: making the runs is a pass over the whole log (110 ms at a million
        entries), which a short path does not need — a compacted or many-branched session's
        context, asked for once by a library call or `sessiontree context`."""
        runs = self._runs
        if runs is not None:
            runs.update()
            return runs.path(i)
        return self._walk(i)

    def _walk(self, i: int) -> Iterator[tuple[int, int]]:
        parent = self.parent
        budget = max(WALK_FIRST, len(parent) // 16)  # at worst a sixteenth more than the runs
        if not 0 <= i < len(parent):
            return
        while i >= 0:
            hi = i
            while i > 0 and parent[i] == i - 1 and hi - i < budget:
                i -= 1
            yield i, hi
            budget -= hi - i + 1
            i = parent[i]
            if i >= 0 and budget <= 0:  # a long path: the runs pay for themselves
                yield from self.runs().path(i)
                return

    def path_to_root(self, i: int) -> list[int]:
        """Positions from the root down to `i` (inclusive). Stops at a missing parent."""
        out: list[int] = []
        for lo, hi in self.ranges(i):
            out.extend(range(hi, lo - 1, -1))
        out.reverse()
        return out

    def bounded_path(self, i: int, marker: str | None = None) -> list[int]:
        """Path root-most first, cut at the newest compaction boundary (Pi's session storage
        `getPathToRootOrCompaction`): a compaction with a retained tail starts the path; one
        without makes its `firstKeptEntryId` the first element; an older compaction met before
        that id replaces the marker. `marker` continues a walk begun below `i`."""
        if len(self.pos) != len(self.ids):  # an id used twice: match the marker entry by entry
            return self._bounded_path_by_entry(i, marker)
        out: list[int] = []
        kind, compactions, pos = self.kind, self.compactions, self.pos
        for lo, hi in self.ranges(i):
            while True:  # compactions inside this range, nearest first
                m = pos.get(marker, NONE) if marker is not None else NONE
                c = kind.rfind(COMPACTION, lo, hi + 1)
                if lo <= m <= hi and m >= c:  # the kept entry comes first: the path starts there
                    out.extend(range(hi, m - 1, -1))
                    out.reverse()
                    return out
                if c < 0:
                    out.extend(range(hi, lo - 1, -1))
                    break
                out.extend(range(hi, c - 1, -1))
                first_kept, has_tail = compactions[c]
                if has_tail:
                    out.reverse()
                    return out
                marker = first_kept
                if c == lo:
                    break
                hi = c - 1
        out.reverse()
        return out

    def _bounded_path_by_entry(self, i: int, marker: str | None) -> list[int]:
        out: list[int] = []
        ids, kind, parent, compactions = self.ids, self.kind, self.parent, self.compactions
        while i >= 0:
            out.append(i)
            if marker is not None and ids[i] == marker:
                break
            if kind[i] == COMPACTION:
                first_kept, has_tail = compactions[i]
                if has_tail:
                    break
                marker = first_kept
            i = parent[i]
        out.reverse()
        return out

    def state_entries(self, i: int) -> tuple[int, int, int]:
        """Nearest thinking-level change, model source and active-tools change (see `state_slot`)
        on the full root path of `i`; NONE where absent."""
        _, _, thinking, model, tools, _ = self.path_facts(i)
        return thinking, model, tools

    def path_facts(self, i: int) -> Facts:
        """(how many entries the root path of `i` holds, and on it the nearest compaction,
        thinking-level change, model source and active-tools change; NONE where absent).

        On a session of many nested retries a path crosses tens of thousands of runs, and the
        preview asks at every cursor move and every followed append. What holds for a position
        never changes as entries are appended (only an adoption relinks paths), so the answer
        for each fork point a walk passes is kept, and the next walk stops at the first one it
        meets: near the last question, that is after a range or two. A first walk crossing more
        than `ARRAY_WALK` runs is summed with array operations (`path_sums`, tables of the log
        kept for the next: about 7 bytes an entry) and keeps one fork point in `KEEP_EVERY`."""
        if self._facts_relinks != self.relinks:
            self._facts.clear()
            self._facts_relinks = self.relinks
        memo = self._facts
        seen: list[tuple[int, int]] = []
        above: Facts = (0, NONE, NONE, NONE, NONE, 0)
        for lo, hi in self.ranges(i):
            if seen and (known := memo.get(hi)) is not None:
                above = known
                break
            seen.append((lo, hi))
        if len(seen) > ARRAY_WALK:
            from . import path_sums  # numpy's import: only for such paths

            tables = self._fact_tables
            if tables is None or max(hi for _, hi in seen) >= tables.size:
                tables = self._fact_tables = path_sums.Tables(
                    bytes(self.kind),
                    bytes(self.role),
                    (
                        COMPACTION,
                        THINKING_LEVEL_CHANGE,
                        MODEL_CHANGE,
                        ACTIVE_TOOLS_CHANGE,
                        MESSAGE,
                        ASSISTANT,
                    ),
                    MESSAGE_KINDS,
                )
            facts, kept = path_sums.facts_down(tables, seen, above, KEEP_EVERY)
            memo.update(kept)
            return facts
        facts = above
        for k in range(len(seen) - 1, -1, -1):  # from the root down, each range over the one above
            lo, hi = seen[k]
            facts = self._range_facts(lo, hi, facts)
            if k:
                memo[hi] = facts
        return facts

    def _range_facts(self, lo: int, hi: int, above: Facts) -> Facts:
        """`path_facts` for the positions `lo..hi` of one run, below what holds at `above`."""
        kind, role = self.kind, self.role
        end = hi + 1
        model = kind.rfind(MODEL_CHANGE, lo, end)
        k = end
        while (k := role.rfind(ASSISTANT, max(lo, model + 1), k)) >= 0:
            if kind[k] == MESSAGE:  # an assistant message names the model that answered
                model = k
                break
        found = (
            kind.rfind(COMPACTION, lo, end),
            kind.rfind(THINKING_LEVEL_CHANGE, lo, end),
            model,
            kind.rfind(ACTIVE_TOOLS_CHANGE, lo, end),
        )
        return (
            above[0] + end - lo,
            found[0] if found[0] >= 0 else above[1],
            found[1] if found[1] >= 0 else above[2],
            found[2] if found[2] >= 0 else above[3],
            found[3] if found[3] >= 0 else above[4],
            above[5] + sum(kind.count(k, lo, end) for k in MESSAGE_KINDS),
        )

    def message_entries(self, positions: Iterable[int]) -> int:
        """How many of `positions` hold entries of `MESSAGE_KINDS`."""
        kind = self.kind
        return sum(1 for i in positions if kind[i] in MESSAGE_KINDS)

    def newest_on_path(self, i: int, most: int) -> list[int]:
        """The `most` positions nearest to `i` on its root path (`i` first), without walking the
        rest of the path."""
        out: list[int] = []
        for lo, hi in self.ranges(i):
            take = min(hi - lo + 1, most - len(out))
            out.extend(range(hi, hi - take, -1))
            if len(out) >= most:
                break
        return out


# --- what entries do to the folded state ------------------------------------------------------

Boundary = tuple[str | None, bool]
"""A compaction's `firstKeptEntryId` and whether it carries a `retainedTail` (`bounded_path`)."""

K = TypeVar("K")


class Folded(Protocol[K]):
    """State folded from a log. `TreeIndex` names entries by position (NONE: no leaf); the
    databases' projection (`storage.projection.Projection`) names them by id (None: no leaf)."""

    leaf: K
    labels: dict[str, str]
    session_name: str | None
    compactions: dict[K, Boundary]


def fold_entry(
    state: Folded[K],
    code: int,
    me: K,
    *,
    leaf_target: K,
    target_id: str | None,
    label: object,
    name: object,
    first_kept: str | None,
    has_tail: bool,
) -> None:
    """What one entry does to the leaf, labels, name and compactions. The only place these rules
    live: the tree index and the databases' projection (`projection.advance`) both fold through
    here, so a database's stored state and a fresh fold of its log cannot drift apart by
    construction.

    Every entry but `leaf` becomes the leaf, and a label entry sets or (empty) clears its
    target's label, as Pi's `_buildIndex` (packages/coding-agent/src/core/session-manager.ts)
    folds them. A `leaf` entry moves the leaf to `leaf_target` (its target as the caller names
    it; the caller decides what an unknown target means). The newest `session_info` names the
    session; a compaction records its boundary under its own name."""
    if code == LEAF:
        state.leaf = leaf_target
        return
    state.leaf = me
    if code == LABEL:
        if target_id is not None:
            text = normalize_label(label)
            if text is None:
                state.labels.pop(target_id, None)
            else:
                state.labels[target_id] = text
    elif code == SESSION_INFO:
        state.session_name = name.strip() or None if isinstance(name, str) else None
    elif code == COMPACTION:
        state.compactions[me] = (first_kept, has_tail)


THINKING_SLOT, MODEL_SLOT, TOOLS_SLOT = 0, 1, 2


def state_slot(code: int, role: int) -> int:
    """Which input of the derived state an entry is (`context.derive_state`): THINKING_SLOT for a
    thinking-level change, MODEL_SLOT for a model change or an assistant message (it names the
    model that answered), TOOLS_SLOT for an active-tools change; -1 for everything else. The
    nearest one of each on the leaf's path wins."""
    if code == THINKING_LEVEL_CHANGE:
        return THINKING_SLOT
    if code == MODEL_CHANGE or (code == MESSAGE and role == ASSISTANT):
        return MODEL_SLOT
    if code == ACTIVE_TOOLS_CHANGE:
        return TOOLS_SLOT
    return -1

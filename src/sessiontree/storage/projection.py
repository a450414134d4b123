"""The materialised state of one session and how appending entries changes it.

A database storage keeps, next to the log, what `open` needs without reading the log: the leaf,
the session name, the labels, the latest compaction, the entries that decide the thinking
level, model and active tools at the leaf, and the active branch (the compaction-bounded path
from the root to the leaf, as ids). `advance` folds a batch of new entries into a copy of that
state, so the storage can write the result in the same transaction as the entries and adopt it
only once the transaction has committed.

Most appends only extend the active branch. A compaction cuts it, which is worked out along the
branch in memory when the cut lies inside it (the usual case). A `leaf` entry moves the leaf to
an arbitrary entry, so its path is walked on the whole tree: the entries of the same batch first
(they are not indexed yet), then the storage's full `TreeIndex`, loaded on first need.

The rules are those of `TreeIndex.bounded_path` and `TreeIndex.state_entries`; `differences`
compares a stored state with a fresh fold of the log so storages can check themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..model.entries import Entry, entry_from_dict
from ..model.errors import SessionError
from .base import SessionStorage
from .index import (
    ASSISTANT,
    COMPACTION,
    LEAF,
    MESSAGE,
    NONE,
    TYPE_CODES,
    UNKNOWN,
    Boundary,
    TreeIndex,
    fold_entry,
)
from .scan import LineError, decode_entry_dict

StateIds = tuple[str | None, str | None, str | None]  # thinking level, model, active tools


@dataclass(slots=True)
class Projection:
    """What a database stores of one session beside its log. `leaf`, `labels`, `session_name`
    and `compactions` are folded by `index.fold_entry`, as the tree index folds them."""

    leaf: str | None = None
    session_name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    latest_compaction: str | None = None
    state_ids: StateIds = (None, None, None)
    active: list[str] = field(default_factory=list)
    # every compaction of the session: id -> (firstKeptEntryId, has a retained tail); None is
    # never a key (the type is `index.Folded`'s, whose leaf may be None)
    compactions: dict[str | None, Boundary] = field(default_factory=dict)
    count: int = 0

    def copy(self) -> Projection:
        return Projection(
            self.leaf,
            self.session_name,
            dict(self.labels),
            self.latest_compaction,
            self.state_ids,
            list(self.active),
            dict(self.compactions),
            self.count,
        )


class _Node(NamedTuple):
    parent: str | None
    type: str
    assistant: bool
    first_kept: str | None
    has_tail: bool


class _Walker:
    """Parent links of the tree as it will be once the batch is written: the batch's own
    entries (by id) over the full index of what was written before."""

    def __init__(
        self,
        batch: Mapping[str, Mapping[str, Any]],
        tree: Callable[[], TreeIndex],
        parent_of: Callable[[str], str | None] | None,
    ) -> None:
        self.batch = batch
        self._tree = tree
        self._parent_of = parent_of
        self._index: TreeIndex | None = None

    def parent(self, entry_id: str) -> str | None:
        """The parent of an entry known to be in the log."""
        data = self.batch.get(entry_id)
        if data is not None:
            return data["parentId"]
        if self._index is None and self._parent_of is not None:
            return self._parent_of(entry_id)
        node = self.node(entry_id)
        return None if node is None else node.parent

    def node(self, entry_id: str) -> _Node | None:
        data = self.batch.get(entry_id)
        if data is not None:
            etype = data["type"]
            message = data.get("message") if etype == "message" else None
            return _Node(
                data["parentId"],
                etype,
                isinstance(message, dict) and message.get("role") == "assistant",
                data.get("firstKeptEntryId") if etype == "compaction" else None,
                etype == "compaction" and data.get("retainedTail") is not None,
            )
        if self._index is None:
            self._index = self._tree()
        index = self._index
        i = index.pos.get(entry_id)
        if i is None:
            return None
        p = index.parent[i]
        compaction = index.compactions.get(i)
        return _Node(
            index.ids[p] if p >= 0 else None,
            index.type_name(i),
            index.kind[i] == MESSAGE and index.role[i] == ASSISTANT,
            compaction[0] if compaction else None,
            bool(compaction and compaction[1]),
        )

    def _batch_part(self, start: str) -> tuple[list[tuple[str, _Node]], int]:
        """The ancestors of `start` (itself first) that are in the batch, and the index
        position where the walk continues (NONE: at a root, or a parent not in the log)."""
        out: list[tuple[str, _Node]] = []
        current: str | None = start
        while current is not None and current in self.batch:
            node = self.node(current)
            assert node is not None
            out.append((current, node))
            current = node.parent
        if current is None:
            return out, NONE
        if self._index is None:
            self._index = self._tree()
        return out, self._index.pos.get(current, NONE)

    def bounded_path(self, start: str, marker: str | None = None) -> list[str]:
        """`TreeIndex.bounded_path` over the batch and then the index (the index's own loop
        takes over as soon as the walk leaves the batch)."""
        near, i = self._batch_part(start)
        out: list[str] = []
        for eid, node in near:
            out.append(eid)
            if marker is not None and eid == marker:
                i = NONE
                break
            if node.type == "compaction":
                if node.has_tail:
                    i = NONE
                    break
                marker = node.first_kept
        out.reverse()
        if i == NONE:
            return out
        assert self._index is not None
        ids = self._index.ids
        return [ids[k] for k in self._index.bounded_path(i, marker)] + out

    def state_ids(self, start: str) -> StateIds:
        thinking = model = tools = None
        near, i = self._batch_part(start)
        for eid, node in near:
            if node.type == "thinking_level_change":
                thinking = thinking or eid
            elif node.type == "model_change" or node.assistant:
                model = model or eid
            elif node.type == "active_tools_change":
                tools = tools or eid
        if i != NONE and not (thinking and model and tools):
            assert self._index is not None
            ids = self._index.ids
            found = [None if k < 0 else ids[k] for k in self._index.state_entries(i)]
            thinking, model, tools = thinking or found[0], model or found[1], tools or found[2]
        return (thinking, model, tools)


def advance(
    before: Projection,
    entries: Sequence[Mapping[str, Any]],
    tree: Callable[[], TreeIndex],
    parent_of: Callable[[str], str | None] | None = None,
    *,
    where: str | None = None,
) -> tuple[Projection, int]:
    """The state after appending `entries` (validated wire dicts, in order) to a session in
    state `before`, and how many leading ids of `before.active` are still the active branch's
    leading ids (rows before that position need no rewrite). `tree` returns the full index of
    the entries written before the batch; `parent_of`, if given, answers the one parent lookup a
    compaction may need without it. `before` is not changed."""
    after = before.copy()
    batch: dict[str, Mapping[str, Any]] = {}
    walker = _Walker(batch, tree, parent_of)
    thinking, model, tools = after.state_ids
    moved = False
    for data in entries:
        eid = data["id"]
        etype = data["type"]
        code = TYPE_CODES.get(etype, UNKNOWN)
        batch[eid] = data
        previous_leaf = after.leaf
        target = data.get("targetId")
        if code == LEAF and target is not None and walker.node(target) is None:
            raise SessionError("not_found", f"Entry {target} not found", path=where)
        fold_entry(  # leaf, labels, name and compactions: the tree index's own rules
            after,
            code,
            eid,
            leaf_target=target,
            target_id=target,
            label=data.get("label"),
            name=data.get("name"),
            first_kept=data.get("firstKeptEntryId"),
            has_tail=data.get("retainedTail") is not None,
        )
        if code == LEAF:
            if target is None:
                after.active = []
                thinking = model = tools = None
            else:
                after.active = path_via_active(after.active, target, after.compactions, walker.bounded_path)
                thinking, model, tools = walker.state_ids(target)
            moved = True
            continue
        parent = data["parentId"]
        if parent != previous_leaf:  # appended away from the leaf: the leaf moves to it, on its path
            if parent is None:
                after.active = []
                thinking = model = tools = None
            else:
                after.active = path_via_active(after.active, parent, after.compactions, walker.bounded_path)
                thinking, model, tools = walker.state_ids(parent)
            moved = True
        if etype == "thinking_level_change":
            thinking = eid
        elif etype == "model_change" or (etype == "message" and data["message"]["role"] == "assistant"):
            model = eid
        elif etype == "active_tools_change":
            tools = eid
        if code == COMPACTION:
            after.latest_compaction = eid
            after.active = _active_after_compaction(after.active, eid, after.compactions, walker)
            moved = True
            continue
        after.active.append(eid)
    after.state_ids = (thinking, model, tools)
    after.count += len(entries)
    if not moved:
        return after, len(before.active)
    return after, shared_prefix(before.active, after.active)


def shared_prefix(old: Sequence[str], new: Sequence[str]) -> int:
    """How many leading ids two active branches share, by bisection: each is a chain of
    ancestors, so one id at the same position in both means the same ids above it. After a
    move up a deep tree the whole branch was written again, and an import of a deep tree, a
    move every few entries, compared whole branches (a 50k-entry one took minutes)."""
    lo, hi = 0, min(len(old), len(new))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[mid - 1] == new[mid - 1]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def path_via_active(
    active: list[str], entry: str, compactions: Mapping[Any, Any], walk: Callable[[str], list[str]]
) -> list[str]:
    """The bounded path of `entry` (see `TreeIndex.bounded_path`): `active` (a bounded path)
    cut after it when it lies there below every compaction of it, else `walk(entry)`. A retry
    branches from an entry a few rows above the leaf: this looks at those rows, where walking
    the path cost O(depth) per branch (an import of a deep session slowed from 5,800 to 1,600
    entries/s)."""
    for k in range(len(active) - 1, -1, -1):
        eid = active[k]
        if eid == entry:
            return active[: k + 1]
        if eid in compactions:  # the entry is above it: its own walk goes past this boundary
            break
    return walk(entry)


def _active_after_compaction(
    active: list[str], compaction: str, compactions: dict[str | None, Boundary], walker: _Walker
) -> list[str]:
    """The active branch once `compaction`, appended below the current leaf, is the leaf. The
    walk goes up the current active branch in memory; only when the boundary lies above the
    branch's first entry (which itself began at an older boundary) is the whole tree needed."""
    first_kept, has_tail = compactions[compaction]
    if has_tail:
        return [compaction]
    marker = first_kept
    out = [compaction]
    for eid in reversed(active):
        out.append(eid)
        if marker is not None and eid == marker:
            break
        older = compactions.get(eid)
        if older is not None:
            if older[1]:
                break
            marker = older[0]
    else:
        if active and walker.parent(active[0]) is not None:
            return walker.bounded_path(compaction)
    out.reverse()
    return out


def fold(index: TreeIndex) -> Projection:
    """The state a fresh fold of a whole log gives (what a stored state must equal)."""
    latest = max(index.compactions, default=None)
    found = index.state_entries(index.leaf) if index.leaf != NONE else (NONE, NONE, NONE)
    return Projection(
        leaf=index.leaf_id(),
        session_name=index.session_name,
        labels=dict(index.labels),
        latest_compaction=None if latest is None else index.ids[latest],
        state_ids=tuple(None if k < 0 else index.ids[k] for k in found),  # type: ignore[arg-type]
        active=[index.ids[i] for i in index.bounded_path(index.leaf)],
        compactions={index.ids[i]: c for i, c in index.compactions.items()},
        count=len(index),
    )


def differences(stored: Projection, fresh: Projection) -> list[str]:
    """What differs between a stored state and a fresh fold, one line each (empty: consistent)."""
    problems = []
    if stored.leaf != fresh.leaf:
        problems.append(f"leaf: stored {stored.leaf!r}, log says {fresh.leaf!r}")
    if stored.session_name != fresh.session_name:
        problems.append(f"name: stored {stored.session_name!r}, log says {fresh.session_name!r}")
    if stored.labels != fresh.labels:
        problems.append(f"labels: stored {stored.labels!r}, log says {fresh.labels!r}")
    if stored.active != fresh.active:
        problems.append(
            f"active branch: stored {len(stored.active)} ids, log says {len(fresh.active)}"
            + (" (different ones)" if len(stored.active) == len(fresh.active) else "")
        )
    if stored.latest_compaction != fresh.latest_compaction:
        problems.append(
            f"latest compaction: stored {stored.latest_compaction!r}, log says {fresh.latest_compaction!r}"
        )
    if stored.state_ids != fresh.state_ids:
        problems.append(f"state entries: stored {stored.state_ids}, log says {fresh.state_ids}")
    if stored.count != fresh.count:
        problems.append(f"entry count: stored {stored.count}, log has {fresh.count}")
    return problems


class ProjectedStorage(SessionStorage):
    """A database's storage, whose leaf, name, labels, count and derived state are its stored
    projection (`_state`, read at open and `refresh` without the log) rather than its index,
    which is loaded on first need (`_index`), and whose entries are stored as their JSON."""

    _state: Projection
    _index: TreeIndex | None

    @property
    def index_loaded(self) -> bool:
        return self._index is not None

    def _decode(self, blob: bytes, where: str) -> Entry:
        """A stored entry's JSON, decoded and checked; `where` names it in the error."""
        try:
            return entry_from_dict(decode_entry_dict(blob))
        except LineError as exc:
            raise SessionError("invalid_entry", f"{where} {exc.reason}", path=self.location) from None

    @property
    def leaf_id(self) -> str | None:
        return self._state.leaf

    @property
    def session_name(self) -> str | None:
        return self._state.session_name

    def get_label(self, entry_id: str) -> str | None:
        return self._state.labels.get(entry_id)

    def labels(self) -> dict[str, str]:
        return dict(self._state.labels)

    def entry_count(self) -> int:
        return self._state.count

    def state_entries(self, at: str | None = None) -> tuple[Entry | None, Entry | None, Entry | None]:
        if at is not None and at != self._state.leaf:
            return super().state_entries(at)
        thinking, model, tools = (None if e is None else self.get_entry(e) for e in self._state.state_ids)
        return thinking, model, tools

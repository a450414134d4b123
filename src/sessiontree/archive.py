"""Archiving dead branches without deleting anything.

The log stays append-only: archiving writes a Pi `custom` entry (`customType`
"sessiontree.archive", `data` = {"targetId", "archived"}) naming the root of the subtree, and
unarchiving writes another. Pi keeps `custom` entries out of the model's context
(`buildSessionContext` in pi-coding-agent's `core/session-manager.ts` projects only message-like
entries), so a Pi user loses nothing and sees the same context. The records are replayed in file
order whenever they are asked for, the way labels are, so every storage gives the same answer
with no schema of its own.
"""

from __future__ import annotations

from .model.errors import SessionError
from .session import Session
from .storage.index import CUSTOM, LEAF, TreeIndex

ARCHIVE_TYPE = "sessiontree.archive"


def archived(session: Session) -> set[int]:
    """Positions of the entries whose subtrees are archived now (the last record for each
    target wins). Only `custom` entries are decoded: a byte search finds them in the index."""
    kinds = session.tree.kind
    state: dict[str, bool] = {}
    marker = bytes((CUSTOM,))
    i = kinds.find(marker)
    while i >= 0:
        try:
            entry = session.entry_at(i)
        except SessionError:
            entry = None  # an unreadable record archives nothing
        if entry is not None and entry.get("customType") == ARCHIVE_TYPE:
            data = entry.get("data")
            if isinstance(data, dict) and isinstance(data.get("targetId"), str):
                state[data["targetId"]] = bool(data.get("archived", True))
        i = kinds.find(marker, i + 1)
    pos = session.tree.pos
    return {pos[t] for t, on in state.items() if on and t in pos}


def set_archived(session: Session, entry_id: str, on: bool) -> str:
    """Archive (or unarchive) the subtree below `entry_id`; returns the record's id. Archiving a
    subtree that holds the leaf is refused: the conversation would go on inside a hidden branch;
    so is archiving an entry with nothing below it but records of the leaf's moves."""
    target = session.position(entry_id)
    if on:
        tree = session.tree
        if _nothing_below(tree, target):  # a stub of nothing, where "Archived" would be the only change
            raise SessionError("invalid_argument", f"entry {entry_id} has nothing below it to archive")
        j = tree.leaf
        while j >= 0:
            if j == target:
                raise SessionError(
                    "invalid_argument",
                    f"entry {entry_id} is on the active path (the leaf is below it): move the leaf"
                    " off this branch before archiving it",
                )
            j = tree.parent[j]
    return session.append_custom_entry(ARCHIVE_TYPE, {"targetId": entry_id, "archived": on})


def _nothing_below(tree: TreeIndex, i: int) -> bool:
    """Whether entry `i` has no children but `leaf` entries with none of their own: the records
    a move away from `i` leaves below it (the tree draws them only under the "all" filter)."""
    child = tree.first_child[i]
    while child >= 0:
        if tree.kind[child] != LEAF or tree.first_child[child] >= 0:
            return False
        child = tree.next_sibling[child]
    return True

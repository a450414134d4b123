"""Pi coding-agent v1/v2 → v3, in memory (as pi-coding-agent's `migrateSessionEntries` in
`core/session-manager.ts` does).

v1 entries have no ids: each gets a fresh id and the previous entry as parent (one chain), and a
compaction's `firstKeptEntryIndex` (header = index 0) becomes `firstKeptEntryId`. v2 → v3 renames
the message role `hookMessage` to `custom`. The file is never touched here; `JsonlStorage.upgrade`
writes the result explicitly. v1 ids are random, so they differ on every load until upgraded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def migrate_entries(
    version: int, objects: list[dict[str, Any]], new_id: Callable[[set[str]], str]
) -> list[dict[str, Any]]:
    """`objects`: the parsed entry objects in file order (header excluded); returns v3 dicts.

    Entries that still are not valid v3 afterwards are returned anyway, for the caller to
    diagnose.
    """
    out = objects
    if version < 2:
        used: set[str] = set()
        ids = []
        for _ in objects:
            eid = new_id(used)
            used.add(eid)
            ids.append(eid)
        out = []
        previous: str | None = None
        for obj, eid in zip(objects, ids, strict=True):
            new: dict[str, Any] = {
                "type": obj.get("type"),
                "id": eid,
                "parentId": previous,
                "timestamp": obj.get("timestamp"),
            }
            new.update((k, v) for k, v in obj.items() if k not in new)
            if new["type"] == "compaction" and "firstKeptEntryIndex" in new:
                index = new.pop("firstKeptEntryIndex")
                # the index counts the header as 0, so entry k of `objects` is index k + 1
                if isinstance(index, int) and not isinstance(index, bool) and 1 <= index <= len(ids):
                    new["firstKeptEntryId"] = ids[index - 1]
            out.append(new)
            previous = eid
    migrated = []
    for obj in out:
        message = obj.get("message")
        if (
            obj.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            obj = {**obj, "message": {**message, "role": "custom"}}
        migrated.append(obj)
    return migrated

"""Pi coding-agent v1/v2 → v3, in memory (as pi-coding-agent's `migrateSessionEntries` in
`core/session-manager.ts` does).

v1 entries have no ids: each gets one (`stable_ids`) and the previous entry as parent (one chain), and a
compaction's `firstKeptEntryIndex` (header = index 0) becomes `firstKeptEntryId`. v2 → v3 renames
the message role `hookMessage` to `custom`. The file is never touched here; `JsonlStorage.upgrade`
writes the result explicitly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from itertools import count
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


def stable_ids(session_id: str) -> Callable[[set[str]], str]:
    """Ids for v1 entries, in the shape of Pi's (8 hex digits): a hash of the session id and
    the entry's place among the file's entries, which does not change as the file grows. Pi's
    migration draws random ones; these are the same on every read, so an id printed for a v1
    file names the same entry in the next command, an import, and the upgraded file."""
    order = count()

    def new_id(used: set[str]) -> str:
        k = next(order)
        for salt in count():
            seed = f"{session_id}\x00{k}\x00{salt}".encode("utf-8", "surrogatepass")
            candidate = hashlib.blake2b(seed, digest_size=4).hexdigest()
            if candidate not in used:
                return candidate
        raise AssertionError("unreachable")

    return new_id

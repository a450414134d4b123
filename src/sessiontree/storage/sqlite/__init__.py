"""SQLite storage: one database file holds many sessions.

Every entry is a row (`data` = the exact wire JSON, plus the denormalised columns the tree needs,
`schema.Row`). Each append is one transaction that also updates a materialised projection — leaf, name,
labels, latest compaction, the derived-state entries and the active branch (the
compaction-bounded leaf path, one row per entry) — and memory is updated only after that
transaction commits.

The projection is what `open` reads: the leaf, name, labels and the context of a session come
from it without reading the rest of the log. It is computed by `projection.advance`, the fold
PostgreSQL's storage uses too, with the rules of `TreeIndex`. The full `TreeIndex` (every entry)
is loaded the first time something needs the whole tree (the browser, `get_children`, a move).
`verify_state()` (what `check` reports) compares every stored column, the log position and the
projection with a fresh fold of the entries' data.

A read-only open uses a `mode=ro` connection and writes nothing, and every error SQLite raises
leaves this package as a SessionError naming the database.
"""

from .connection import recover
from .storage import SqliteStorage

__all__ = ["SqliteStorage", "recover"]

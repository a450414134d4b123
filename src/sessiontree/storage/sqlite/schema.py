"""The tables of a sessiontree SQLite database, and the columns kept next to each entry's JSON.

One database file holds many sessions: `sessions` (their headers), `entries` (every entry's exact
wire JSON, `data`, with the columns the tree and the projection are built from, `Row`),
`session_state` and `active_branch` (the projection `open` reads), and `writers` (who holds a
session's writer lock, made when first needed: `writers.take_lock`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..index import TreeIndex
from ..scan import LONE_SURROGATE, LineError, add_dict, decode_entry_dict, tool_only_line

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    cwd TEXT NOT NULL,
    parent_session TEXT,
    header TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_created ON sessions (created_at DESC);
CREATE INDEX IF NOT EXISTS sessions_cwd ON sessions (cwd);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    id TEXT NOT NULL,
    parent_id TEXT,
    type TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    role TEXT,
    target_id TEXT,
    label TEXT,
    name TEXT,
    first_kept TEXT,
    has_tail INTEGER NOT NULL DEFAULT 0,
    data BLOB NOT NULL,
    UNIQUE (session_id, id)
);
CREATE INDEX IF NOT EXISTS entries_by_session ON entries (session_id, seq);
CREATE INDEX IF NOT EXISTS entries_by_parent ON entries (session_id, parent_id);
CREATE TABLE IF NOT EXISTS session_state (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id),
    leaf_id TEXT,
    session_name TEXT,
    labels TEXT NOT NULL DEFAULT '{}',
    latest_compaction_id TEXT,
    thinking_entry_id TEXT,
    model_entry_id TEXT,
    tools_entry_id TEXT,
    entry_count INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS active_branch (
    session_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    entry_id TEXT NOT NULL,
    PRIMARY KEY (session_id, pos)
) WITHOUT ROWID;
"""

COLUMNS = "id, parent_id, type, timestamp, role, target_id, label, name, first_kept, has_tail"
INSERT = f"INSERT INTO entries (session_id, {COLUMNS}, data) VALUES ({', '.join('?' * 12)})"


class Row(NamedTuple):
    """The columns stored next to an entry's JSON: exactly what the tree and the projection need,
    so neither has to decode payloads. `of` is the only place they are derived from the data."""

    id: str
    parent_id: str | None
    type: str
    timestamp: str
    role: str | None
    target_id: str | None
    label: str | None
    name: str | None
    first_kept: str | None
    has_tail: int

    @classmethod
    def of(cls, data: dict[str, Any]) -> Row:
        etype = data["type"]
        return cls(
            data["id"],
            data["parentId"],
            etype,
            data["timestamp"],
            data["message"]["role"] if etype == "message" else None,
            data.get("targetId") if etype in ("label", "leaf") else None,
            data.get("label") if etype == "label" else None,
            data.get("name") if etype == "session_info" else None,
            data.get("firstKeptEntryId") if etype == "compaction" else None,
            int(etype == "compaction" and data.get("retainedTail") is not None),
        )

    def index_into(self, index: TreeIndex, data: bytes | None) -> int:
        """`data`: the entry's JSON where it is an assistant message (whether Pi's /tree hides
        it is judged from it), else None."""
        return index.add(
            self.id,
            self.parent_id,
            self.type,
            self.role,
            target_id=self.target_id,
            label=self.label,
            name=self.name,
            first_kept=self.first_kept,
            has_tail=bool(self.has_tail),
            tool_only=data is not None and tool_only_line(data),
        )


def storable(text: str) -> str:
    """`text` with any lone surrogate (which UTF-8 cannot encode) as U+FFFD."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


MAX_COLUMN_REPORTS = 20


def check_columns(rows: list[tuple[Any, ...]], fresh: TreeIndex) -> list[str]:
    """Compare each entry's stored columns with what its data says (`Row.of`), and fold the
    data into `fresh` (with `scan.add_dict`, not `Row`: a second derivation of the same
    fields). An entry whose data does not decode is folded from its columns, so that one
    damaged row is one problem, not also a different leaf, count and branch."""
    problems: list[str] = []
    differing = 0
    for n, (_seq, *columns, blob) in enumerate(rows, 1):
        stored = Row(*columns)
        try:
            data = decode_entry_dict(blob)
        except LineError as exc:
            problems.append(f"entry #{n} ({stored.id!r}): its data {exc.reason}")
            stored.index_into(fresh, None)
            continue
        add_dict(fresh, data, None)
        expected = Row.of(data)
        if stored == expected:
            continue
        for column, have, want in zip(Row._fields, stored, expected, strict=True):
            if have != want:
                differing += 1
                if differing <= MAX_COLUMN_REPORTS:
                    problems.append(
                        f"entry #{n} ({stored.id!r}): column {column} is {have!r}, its data says {want!r}"
                    )
    if differing > MAX_COLUMN_REPORTS:
        problems.append(f"{differing - MAX_COLUMN_REPORTS} more columns differ from their entries' data")
    return problems

"""The tables, in a `sessiontree` schema of the database so they sit beside anything else.

Every entry is a row of `entries` with the denormalised columns the tree needs, and a row of
`entry_data` with the exact wire JSON (bytea, so key order, big integers and escaped lone
surrogates survive byte for byte). They are two tables so that loading a session's whole tree
reads ~100 bytes per entry instead of every payload (the same idea as the JSONL indexer's
skipping of message content); both rows are written in the same transaction.
Labels and session names are free text that may hold what PostgreSQL's text type refuses (NUL
characters, lone surrogates), so they are stored JSON-encoded in bytea; ids, types and
timestamps are text, and an entry whose ids PostgreSQL cannot store is refused before writing.
`seq` numbers a session's entries 1, 2, 3, ... in append order: the position of an entry in
the index is `seq - 1`, and "what is new since I last looked" is an index range scan on the
primary key. `state` and `active_branch` are the materialised projection (see
`storage.projection`), rewritten in the same transaction as every append.
"""

from __future__ import annotations

from typing import Any

from ...model.errors import SessionError

SCHEMA = "sessiontree"
SCHEMA_VERSION = 1

# Taken (for the transaction) while the tables are created, so two first writers racing on an
# empty database do not both run CREATE TABLE; any constant distinct from a session's hash.
DDL_LOCK_KEY = 0x5E55_1047_7EE0_0001

DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS {SCHEMA}.sessions (
    id text PRIMARY KEY,
    created_at text NOT NULL,
    cwd text NOT NULL,
    parent_session text,
    header bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_created ON {SCHEMA}.sessions (created_at DESC);
CREATE TABLE IF NOT EXISTS {SCHEMA}.entries (
    session_id text NOT NULL REFERENCES {SCHEMA}.sessions (id),
    seq bigint NOT NULL,
    id text NOT NULL,
    parent_id text,
    type text NOT NULL,
    timestamp text NOT NULL,
    role text,
    target_id text,
    label bytea,
    name bytea,
    first_kept text,
    has_tail boolean NOT NULL DEFAULT false,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.entry_data (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX IF NOT EXISTS entries_compactions ON {SCHEMA}.entries (session_id) WHERE type = 'compaction';
CREATE TABLE IF NOT EXISTS {SCHEMA}.state (
    session_id text PRIMARY KEY REFERENCES {SCHEMA}.sessions (id),
    leaf_id text,
    session_name bytea,
    labels bytea NOT NULL,
    latest_compaction_id text,
    thinking_entry_id text,
    model_entry_id text,
    tools_entry_id text,
    entry_count bigint NOT NULL DEFAULT 0,
    last_seq bigint NOT NULL DEFAULT 0,
    updated_at text NOT NULL
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.active_branch (
    session_id text NOT NULL,
    pos integer NOT NULL,
    entry_id text NOT NULL,
    PRIMARY KEY (session_id, pos)
);
"""


def ensure(conn: Any, where: str) -> None:
    """Create the tables if the database has none yet; refuse a schema of another version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK_KEY,))
        exists = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_version",)).fetchone()[0]
        if exists is None:
            _refuse_a_foreign_schema(conn, where)
            conn.execute(DDL)
            conn.execute(f"INSERT INTO {SCHEMA}.schema_version VALUES (%s)", (SCHEMA_VERSION,))
    check(conn, where)


def _refuse_a_foreign_schema(conn: Any, where: str) -> None:
    """A `sessiontree` schema holding tables but not ours (another program's of that name): our
    tables were created beside its own where their names differed, and the first that met one
    of its tables of the same name ended in PostgreSQL's own words ("column created_at does not
    exist")."""
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (SCHEMA,)
        ).fetchall()
    ]
    if tables:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        raise SessionError(
            "storage",
            f"the database has a schema named {SCHEMA} that sessiontree did not make (its tables: {shown});"
            " nothing was changed: use another database",
            path=where,
        )


def check(conn: Any, where: str) -> None:
    """Refuse a database without our tables (`not_found`) or with another schema version."""
    exists = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_version",)).fetchone()[0]
    if exists is None:
        raise SessionError("not_found", "the database holds no sessiontree sessions", path=where)
    row = conn.execute(f"SELECT version FROM {SCHEMA}.schema_version").fetchone()
    if row is None or row[0] != SCHEMA_VERSION:
        raise SessionError(
            "storage", f"unsupported sessiontree schema version {row and row[0]} in this database", path=where
        )

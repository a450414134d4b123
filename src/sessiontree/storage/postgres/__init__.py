"""PostgreSQL storage: many sessions in one database, one writer per session.

`connection` (URLs, connecting, errors), `schema` (the tables), `lock` (the advisory writer
lock), `storage` (`PostgresStorage`). psycopg is imported only when a connection is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .connection import is_postgres_url, redact

if TYPE_CHECKING:
    from .storage import PostgresStorage


def __getattr__(name: str) -> object:
    # The storage class loads on first use: checking whether an address is a URL must not import it.
    if name != "PostgresStorage":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .storage import PostgresStorage

    globals()[name] = PostgresStorage
    return PostgresStorage


__all__ = ["PostgresStorage", "is_postgres_url", "redact"]

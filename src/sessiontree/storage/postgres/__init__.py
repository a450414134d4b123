"""PostgreSQL storage: many sessions in one database, one writer per session.

`connection` (URLs, connecting, errors), `schema` (the tables), `lock` (the advisory writer
lock), `storage` (`PostgresStorage`). psycopg is imported only when a connection is made.
"""

from __future__ import annotations

from .connection import is_postgres_url, redact
from .storage import PostgresStorage

__all__ = ["PostgresStorage", "is_postgres_url", "redact"]

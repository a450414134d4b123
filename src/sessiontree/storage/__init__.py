"""Storages: one contract (`SessionStorage`), four backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.lazy import lazy_names
from .base import SessionStorage
from .index import TreeIndex

if TYPE_CHECKING:
    from .jsonl import JsonlStorage
    from .memory import MemoryStorage
    from .postgres import PostgresStorage
    from .sqlite import SqliteStorage

# Backends load on first use, so opening a JSONL file does not import SQLite or PostgreSQL code.
_LAZY = {
    "JsonlStorage": "jsonl",
    "MemoryStorage": "memory",
    "PostgresStorage": "postgres",
    "SqliteStorage": "sqlite",
}


__getattr__ = lazy_names(__name__, _LAZY)


__all__ = ["JsonlStorage", "MemoryStorage", "PostgresStorage", "SessionStorage", "SqliteStorage", "TreeIndex"]

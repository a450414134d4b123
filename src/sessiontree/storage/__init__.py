"""Storages: one contract (`SessionStorage`), four backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sessiontree.storage' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["JsonlStorage", "MemoryStorage", "PostgresStorage", "SessionStorage", "SqliteStorage", "TreeIndex"]

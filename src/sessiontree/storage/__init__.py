"""Storages: one contract (`SessionStorage`), four backends."""

from __future__ import annotations

from .base import SessionStorage
from .index import TreeIndex
from .jsonl import JsonlStorage
from .memory import MemoryStorage
from .postgres import PostgresStorage
from .sqlite import SqliteStorage

__all__ = ["JsonlStorage", "MemoryStorage", "PostgresStorage", "SessionStorage", "SqliteStorage", "TreeIndex"]

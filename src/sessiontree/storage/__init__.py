"""Storages: one contract (`SessionStorage`), three backends."""

from __future__ import annotations

from .base import SessionStorage
from .index import TreeIndex
from .jsonl import JsonlStorage
from .memory import MemoryStorage
from .sqlite import SqliteStorage

__all__ = ["JsonlStorage", "MemoryStorage", "SessionStorage", "SqliteStorage", "TreeIndex"]

"""sessiontree: LLM conversation sessions stored as a tree (Pi-compatible), and a browser for them.

Layers, lowest first: `model` (entries, header, errors) → `storage` (one contract, three
backends) → `session` / `context` → `tui` and `cli`. Lower layers never import upper ones.
"""

from __future__ import annotations

from .context import (
    ModelRef,
    SessionContext,
    convert_to_llm,
    estimate_context_tokens,
    estimate_tokens,
)
from .model import Diagnostic, Entry, SessionError, SessionHeader
from .opening import create_session, open_or_read_only, open_session, parse_address
from .session import BranchSummary, Navigation, Session, SessionStats
from .storage import JsonlStorage, MemoryStorage, PostgresStorage, SessionStorage, SqliteStorage

__version__ = "0.1.0"

__all__ = [
    "BranchSummary",
    "Diagnostic",
    "Entry",
    "JsonlStorage",
    "MemoryStorage",
    "ModelRef",
    "Navigation",
    "PostgresStorage",
    "Session",
    "SessionContext",
    "SessionError",
    "SessionHeader",
    "SessionStats",
    "SessionStorage",
    "SqliteStorage",
    "convert_to_llm",
    "create_session",
    "estimate_context_tokens",
    "estimate_tokens",
    "open_or_read_only",
    "open_session",
    "parse_address",
]

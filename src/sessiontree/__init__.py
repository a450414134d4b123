"""sessiontree: LLM conversation sessions stored as a tree (Pi-compatible), and a browser for them.

Layers, lowest first: `model` (entries, header, errors) → `storage` (one contract, four
backends: memory, JSONL, SQLite, PostgreSQL) → `session` / `context` → `tui` and `cli`.
Lower layers never import upper ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model.lazy import lazy_names

if TYPE_CHECKING:
    from .context import (
        ContextStream,
        ModelRef,
        SessionContext,
        convert_to_llm,
        estimate_context_tokens,
        estimate_tokens,
    )
    from .model import (
        ActiveToolsChangeEntry,
        BranchSummaryEntry,
        CompactionEntry,
        CustomEntry,
        CustomMessageEntry,
        Diagnostic,
        Entry,
        LabelEntry,
        LeafEntry,
        MessageEntry,
        ModelChangeEntry,
        SessionError,
        SessionHeader,
        SessionInfoEntry,
        ThinkingLevelChangeEntry,
        UnknownEntry,
    )
    from .opening import (
        Address,
        create_session,
        list_sessions,
        open_or_read_only,
        open_session,
        parse_address,
        upgrade_session,
    )
    from .session import BranchSummary, LeafMove, Navigation, Session, SessionStats
    from .storage import JsonlStorage, MemoryStorage, PostgresStorage, SessionStorage, SqliteStorage

# The public names load on first use: `import sessiontree.cli` or `sessiontree.tui` must not pay
# for every storage backend (SQLite, PostgreSQL, urllib) before the first screen is drawn.
_LAZY = {
    "ContextStream": "context",
    "ModelRef": "context",
    "SessionContext": "context",
    "convert_to_llm": "context",
    "estimate_context_tokens": "context",
    "estimate_tokens": "context",
    "Diagnostic": "model",
    "Entry": "model",
    "ActiveToolsChangeEntry": "model",  # the entry types, to narrow an `Entry` by isinstance
    "BranchSummaryEntry": "model",
    "CompactionEntry": "model",
    "CustomEntry": "model",
    "CustomMessageEntry": "model",
    "LabelEntry": "model",
    "LeafEntry": "model",
    "MessageEntry": "model",
    "ModelChangeEntry": "model",
    "SessionInfoEntry": "model",
    "ThinkingLevelChangeEntry": "model",
    "UnknownEntry": "model",
    "SessionError": "model",
    "SessionHeader": "model",
    "Address": "opening",
    "create_session": "opening",
    "list_sessions": "opening",
    "upgrade_session": "opening",
    "open_or_read_only": "opening",
    "open_session": "opening",
    "parse_address": "opening",
    "BranchSummary": "session",
    "LeafMove": "session",
    "Navigation": "session",
    "Session": "session",
    "SessionStats": "session",
    "JsonlStorage": "storage",
    "MemoryStorage": "storage",
    "PostgresStorage": "storage",
    "SessionStorage": "storage",
    "SqliteStorage": "storage",
}


__getattr__ = lazy_names(__name__, _LAZY)


def __dir__() -> list[str]:
    """The lazy names too: `dir()`, `help()` and completion showed none of the public API."""
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "ActiveToolsChangeEntry",
    "Address",
    "BranchSummary",
    "BranchSummaryEntry",
    "CompactionEntry",
    "ContextStream",
    "CustomEntry",
    "CustomMessageEntry",
    "Diagnostic",
    "Entry",
    "JsonlStorage",
    "LabelEntry",
    "LeafEntry",
    "LeafMove",
    "MemoryStorage",
    "MessageEntry",
    "ModelChangeEntry",
    "ModelRef",
    "Navigation",
    "PostgresStorage",
    "Session",
    "SessionContext",
    "SessionError",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionStats",
    "SessionStorage",
    "SqliteStorage",
    "ThinkingLevelChangeEntry",
    "UnknownEntry",
    "convert_to_llm",
    "create_session",
    "estimate_context_tokens",
    "estimate_tokens",
    "list_sessions",
    "open_or_read_only",
    "open_session",
    "parse_address",
    "upgrade_session",
]

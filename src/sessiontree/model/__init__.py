"""The data model: entries, the header, errors. Depends on nothing else in sessiontree."""

from __future__ import annotations

from .entries import (
    ENTRY_TYPES,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    entry_from_dict,
    validate_entry,
)
from .errors import Diagnostic, SessionError
from .header import CURRENT_VERSION, SessionHeader

__all__ = [
    "CURRENT_VERSION",
    "ENTRY_TYPES",
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Diagnostic",
    "Entry",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionError",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "UnknownEntry",
    "entry_from_dict",
    "validate_entry",
]

"""Session entries: thin typed views over the wire dict.

An entry *is* its JSON object. Keeping the decoded dict (instead of copying fields into
attributes) makes round-tripping exact — unknown keys and unknown entry types survive a
read/write cycle unchanged — and keeps decoding cheap. Typed properties give the fields a name.
Entries are validated once, when they are read or built (`validate_entry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = [
    "ENTRY_TYPES",
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "UnknownEntry",
    "entry_from_dict",
    "validate_entry",
]

JsonDict = dict[str, Any]


class Entry:
    """Base of every tree entry. Subclasses only add typed accessors."""

    __slots__ = ("_d",)
    type_name: ClassVar[str] = ""

    def __init__(self, data: JsonDict) -> None:
        self._d = data

    @property
    def type(self) -> str:
        return self._d["type"]

    @property
    def id(self) -> str:
        return self._d["id"]

    @property
    def parent_id(self) -> str | None:
        return self._d["parentId"]

    @property
    def timestamp(self) -> str:
        return self._d["timestamp"]

    def get(self, key: str, default: Any = None) -> Any:
        """A raw wire field (camelCase), for fields without a typed accessor."""
        return self._d.get(key, default)

    def to_dict(self) -> JsonDict:
        """The wire dict (camelCase keys, Pi's key order). Shallow copy: treat nested values as
        read-only."""
        return dict(self._d)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and other._d == self._d

    def __hash__(self) -> int:
        return hash((self.type, self.id))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, parent_id={self.parent_id!r})"


class MessageEntry(Entry):
    __slots__ = ()
    type_name = "message"

    @property
    def message(self) -> JsonDict:
        return self._d["message"]

    @property
    def role(self) -> str:
        return self._d["message"]["role"]


class ThinkingLevelChangeEntry(Entry):
    __slots__ = ()
    type_name = "thinking_level_change"

    @property
    def thinking_level(self) -> str:
        return self._d["thinkingLevel"]


class ModelChangeEntry(Entry):
    __slots__ = ()
    type_name = "model_change"

    @property
    def provider(self) -> str:
        return self._d["provider"]

    @property
    def model_id(self) -> str:
        return self._d["modelId"]


class ActiveToolsChangeEntry(Entry):
    __slots__ = ()
    type_name = "active_tools_change"

    @property
    def active_tool_names(self) -> list[str]:
        return list(self._d["activeToolNames"])


class _SummaryFields(Entry):
    __slots__ = ()

    @property
    def summary(self) -> str:
        return self._d["summary"]

    @property
    def details(self) -> Any:
        return self._d.get("details")

    @property
    def from_hook(self) -> bool:
        return bool(self._d.get("fromHook", False))

    @property
    def usage(self) -> JsonDict | None:
        return self._d.get("usage")


class CompactionEntry(_SummaryFields):
    __slots__ = ()
    type_name = "compaction"

    @property
    def first_kept_entry_id(self) -> str | None:
        return self._d.get("firstKeptEntryId")

    @property
    def tokens_before(self) -> int | float:
        return self._d["tokensBefore"]

    @property
    def retained_tail(self) -> list[JsonDict] | None:
        return self._d.get("retainedTail")


class BranchSummaryEntry(_SummaryFields):
    __slots__ = ()
    type_name = "branch_summary"

    @property
    def from_id(self) -> str:
        return self._d["fromId"]


class CustomEntry(Entry):
    __slots__ = ()
    type_name = "custom"

    @property
    def custom_type(self) -> str:
        return self._d["customType"]

    @property
    def data(self) -> Any:
        return self._d.get("data")


class CustomMessageEntry(Entry):
    __slots__ = ()
    type_name = "custom_message"

    @property
    def custom_type(self) -> str:
        return self._d["customType"]

    @property
    def content(self) -> str | list[Any]:
        return self._d["content"]

    @property
    def display(self) -> bool:
        return self._d["display"]

    @property
    def details(self) -> Any:
        return self._d.get("details")


class LabelEntry(Entry):
    __slots__ = ()
    type_name = "label"

    @property
    def target_id(self) -> str:
        return self._d["targetId"]

    @property
    def label(self) -> str | None:
        """The label as Pi's harness session layer reads it: trimmed, blank means "cleared"
        (None). (Pi's coding agent keeps labels untrimmed; a whitespace-only label is the only
        case where the two differ.)"""
        return normalize_label(self._d.get("label"))


class SessionInfoEntry(Entry):
    __slots__ = ()
    type_name = "session_info"

    @property
    def name(self) -> str | None:
        value = self._d.get("name")
        return value.strip() or None if isinstance(value, str) else None


class LeafEntry(Entry):
    __slots__ = ()
    type_name = "leaf"

    @property
    def target_id(self) -> str | None:
        return self._d["targetId"]


class UnknownEntry(Entry):
    """An entry type this version does not know; kept verbatim and folded like any entry."""

    __slots__ = ()


_CLASSES: dict[str, type[Entry]] = {
    cls.type_name: cls
    for cls in (
        MessageEntry,
        ThinkingLevelChangeEntry,
        ModelChangeEntry,
        ActiveToolsChangeEntry,
        CompactionEntry,
        BranchSummaryEntry,
        CustomEntry,
        CustomMessageEntry,
        LabelEntry,
        SessionInfoEntry,
        LeafEntry,
    )
}
ENTRY_TYPES: tuple[str, ...] = tuple(_CLASSES)


def normalize_label(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    return value.strip() or None


def entry_from_dict(data: JsonDict) -> Entry:
    """Wrap an already validated wire dict in its typed class."""
    return _CLASSES.get(data["type"], UnknownEntry)(data)


# --- validation -------------------------------------------------------------------------------


def _is_str(v: object) -> bool:
    return isinstance(v, str)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _str_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _dict_list(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _message(v: object) -> bool:
    return isinstance(v, dict) and isinstance(v.get("role"), str)


# Per type: (key, check, requirement). Requirement "required" = key must be present and pass;
# "optional" = absent, or present and passing (JSON null counts as absent, as in Pi's writers).
_PAYLOAD_RULES: dict[str, tuple[tuple[str, Any, bool], ...]] = {
    "message": (("message", _message, True),),
    "thinking_level_change": (("thinkingLevel", _is_str, True),),
    "model_change": (("provider", _is_str, True), ("modelId", _is_str, True)),
    "active_tools_change": (("activeToolNames", _str_list, True),),
    "compaction": (
        ("summary", _is_str, True),
        ("firstKeptEntryId", _is_str, False),
        ("tokensBefore", _is_number, True),
        ("retainedTail", _dict_list, False),
        ("fromHook", lambda v: isinstance(v, bool), False),
        ("usage", lambda v: isinstance(v, dict), False),
    ),
    "branch_summary": (
        ("fromId", _is_str, True),
        ("summary", _is_str, True),
        ("fromHook", lambda v: isinstance(v, bool), False),
        ("usage", lambda v: isinstance(v, dict), False),
    ),
    "custom": (("customType", _is_str, True),),
    "custom_message": (
        ("customType", _is_str, True),
        ("content", lambda v: isinstance(v, (str, list)), True),
        ("display", lambda v: isinstance(v, bool), True),
    ),
    "label": (("targetId", _is_str, True), ("label", _is_str, False)),
    "session_info": (("name", _is_str, False),),
}


def validate_entry(data: object) -> str | None:
    """Why `data` is not a valid entry (phrased like Pi's loader), or None when it is valid.

    The fast scanner (`storage.scan`) encodes exactly these rules as msgspec types; a property
    test keeps the two in agreement.
    """
    # `type(...) is dict` first: what a decoder returns; the ABC check cost 2-4% of a context.
    if type(data) is not dict and not isinstance(data, Mapping):
        return "is not a valid session entry (expected a JSON object)"
    etype = data.get("type")
    if not isinstance(etype, str):  # "missing" of one present but not text misled (QA)
        return "is missing entry type" if etype is None else "has an entry type that is not a string"
    if etype == "session":  # said as "invalid parentId" (QA)
        return "is a second session header (a session has one, on its first line)"
    eid = data.get("id")
    if not isinstance(eid, str) or not eid:
        return (
            "is missing entry id"
            if eid is None
            else "has an empty entry id"
            if eid == ""
            else ("has an entry id that is not a string")
        )
    if "parentId" not in data or not (data["parentId"] is None or isinstance(data["parentId"], str)):
        return "has invalid parentId"
    ts = data.get("timestamp")
    if not isinstance(ts, str) or not ts:
        return "is missing timestamp"
    if etype == "leaf":
        if "targetId" not in data or not (data["targetId"] is None or isinstance(data["targetId"], str)):
            return "has invalid targetId"
        return None
    for key, check, required in _PAYLOAD_RULES.get(etype, ()):
        value = data.get(key)
        if value is None:
            if required:
                return f"({etype}) is missing {key}"
        elif not check(value):
            return f"({etype}) has invalid {key}"
    return None

"""Indexing JSONL lines without materialising payloads.

Fast path: msgspec decodes each line into a small tagged-union Struct that names only the fields
the tree needs (id, parent, role, label target, ...). msgspec still validates the *whole* line as
JSON and checks every field the validation rules of `model.entries.validate_entry` mention, but it
skips over message content without building Python objects for it — about 7x less work than a
full parse on real sessions (see README, "Why msgspec").

Slow path: anything the fast path rejects (unknown entry types, damaged lines, v1/v2 entries) is
decoded fully and judged by `validate_entry`, which also words the diagnostic. The two paths must
agree on what is valid; `tests/test_scan.py` checks that with generated inputs.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..model.entries import validate_entry
from .index import MESSAGE, NONE, OTHER_ROLE, ROLE_CODES, TreeIndex

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Object(msgspec.Struct, gc=False):
    """Any JSON object, contents skipped."""


class _Head(msgspec.Struct, gc=False):
    role: str


class _Row(msgspec.Struct, tag_field="type", gc=False):
    id: NonEmpty
    parentId: str | None
    timestamp: NonEmpty

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(self.id, self.parentId, self.__struct_config__.tag, line=line)  # type: ignore[arg-type]


class _Message(_Row, tag="message"):
    message: _Head

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(self.id, self.parentId, "message", self.message.role, line=line)


class _Thinking(_Row, tag="thinking_level_change"):
    thinkingLevel: str


class _Model(_Row, tag="model_change"):
    provider: str
    modelId: str


class _Tools(_Row, tag="active_tools_change"):
    activeToolNames: list[str]


class _Compaction(_Row, tag="compaction"):
    summary: str
    tokensBefore: int | float
    firstKeptEntryId: str | None = None
    retainedTail: list[_Object] | None = None
    fromHook: bool | None = None
    usage: _Object | None = None

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(
            self.id,
            self.parentId,
            "compaction",
            first_kept=self.firstKeptEntryId,
            has_tail=self.retainedTail is not None,
            line=line,
        )


class _BranchSummary(_Row, tag="branch_summary"):
    fromId: str
    summary: str
    fromHook: bool | None = None
    usage: _Object | None = None


class _Custom(_Row, tag="custom"):
    customType: str


class _CustomMessage(_Row, tag="custom_message"):
    customType: str
    content: str | list[msgspec.Raw]
    display: bool


class _Label(_Row, tag="label"):
    targetId: str
    label: str | None = None

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(
            self.id, self.parentId, "label", target_id=self.targetId, label=self.label, line=line
        )


class _SessionInfo(_Row, tag="session_info"):
    name: str | None = None

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(self.id, self.parentId, "session_info", name=self.name, line=line)


class _Leaf(_Row, tag="leaf"):
    targetId: str | None

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(self.id, self.parentId, "leaf", target_id=self.targetId, line=line)


_ROW_TYPES = (
    _Message,
    _Thinking,
    _Model,
    _Tools,
    _Compaction,
    _BranchSummary,
    _Custom,
    _CustomMessage,
    _Label,
    _SessionInfo,
    _Leaf,
)

fast_decode = msgspec.json.Decoder(
    _Message
    | _Thinking
    | _Model
    | _Tools
    | _Compaction
    | _BranchSummary
    | _Custom
    | _CustomMessage
    | _Label
    | _SessionInfo
    | _Leaf
).decode

full_decode = msgspec.json.Decoder(float_hook=float).decode
"""Untyped decode of one line, with the same parser as the fast path. Out-of-range floats
(`1e999`) become infinities, as JavaScript's JSON.parse makes them, instead of failing."""


def utf8_ok(raw: bytes) -> bool:
    """msgspec skips the fields the fast path does not name without checking their UTF-8, so
    non-ASCII lines are checked here (a str is only built for them: ~4% of a real file)."""
    if raw.isascii():
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class LineError(Exception):
    """A line that is not a valid entry; `reason` is phrased for a user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_entry_dict(raw: bytes | memoryview) -> dict[str, Any]:
    """Full decode + validation of one line; raises LineError with a readable reason."""
    try:
        data = full_decode(raw)
    except msgspec.DecodeError as exc:
        raise LineError(f"is not valid JSON ({_short(exc)})") from None
    except (RecursionError, MemoryError):
        raise LineError("is not valid JSON (nested too deeply)") from None
    reason = validate_entry(data)
    if reason is not None:
        raise LineError(reason)
    return data


def add_dict(index: TreeIndex, data: dict[str, Any], line: int | None) -> int:
    """Index a validated entry dict (slow path, memory and SQLite storages)."""
    etype = data["type"]
    role = data["message"]["role"] if etype == "message" else None
    if etype == "compaction":
        return index.add(
            data["id"],
            data["parentId"],
            etype,
            first_kept=data.get("firstKeptEntryId"),
            has_tail=data.get("retainedTail") is not None,
            line=line,
        )
    return index.add(
        data["id"],
        data["parentId"],
        etype,
        role,
        target_id=data.get("targetId"),
        label=data.get("label"),
        name=data.get("name"),
        line=line,
    )


_FAST_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def decode_all(lines: list[bytes]) -> list[_Row] | None:
    """Fast-decode a batch of lines in one C-level pass; None if any of them needs the slow
    path (blank, damaged, unknown type), in which case the caller goes line by line."""
    try:
        rows = list(map(fast_decode, lines))
    except _FAST_ERRORS:
        return None
    if not all(map(bytes.isascii, lines)) and not all(map(utf8_ok, lines)):
        return None
    return rows


def feed_rows(index: TreeIndex, rows: list[_Row], first_line: int) -> None:
    """Index fast-decoded rows of consecutive lines.

    The common case — a message whose parent is already indexed, with a fresh id and no orphan
    waiting for it — is inlined here (it is >95% of real files and this loop is the open-time hot
    path); every other row goes through `TreeIndex.add`. Both produce the same index, which
    `tests/test_scan.py` checks on generated sessions.
    """
    ids, pos, parent, kind, role = index.ids, index.pos, index.parent, index.kind, index.role
    first_child, last_child, next_sibling = index.first_child, index.last_child, index.next_sibling
    orphans = index.missing_parents
    roles = ROLE_CODES
    line = first_line
    for row in rows:
        if type(row) is _Message and not orphans:
            eid = row.id
            p = pos.get(row.parentId) if row.parentId is not None else None
            if p is not None and eid not in pos:
                i = len(ids)
                ids.append(eid)
                pos[eid] = i
                kind.append(MESSAGE)
                role.append(roles.get(row.message.role, OTHER_ROLE))
                parent.append(p)
                first_child.append(NONE)
                last_child.append(NONE)
                next_sibling.append(NONE)
                last = last_child[p]
                if last == NONE:
                    first_child[p] = i
                else:
                    next_sibling[last] = i
                last_child[p] = i
                index.leaf = i
                line += 1
                continue
        row.feed(index, line)
        line += 1


def index_line(index: TreeIndex, raw: bytes, line: int | None) -> int:
    """Index one v3 line: fast path first, full validation when it refuses. Raises LineError."""
    try:
        if not utf8_ok(raw):
            raise LineError("is not valid JSON (invalid UTF-8)")
        row = fast_decode(raw)
    except _FAST_ERRORS:
        return add_dict(index, decode_entry_dict(raw), line)
    return row.feed(index, line)


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 120 else text[:117] + "..."

"""Indexing JSONL lines without materialising payloads.

Fast path: msgspec decodes each line into a small tagged-union Struct that names only the fields
the tree needs (id, parent, role, label target, ...). msgspec still checks the JSON syntax of the
*whole* line and every field the rules of `model.entries.validate_entry` mention, but it skips
over message content without building Python objects for it — about 7x less work than a full
parse on real sessions (see README, "Why msgspec"). What skipping does not check — the UTF-8 of
skipped strings, the range of skipped numbers — is covered by `JsonlStorage.finish_verification`
and, for numbers, when the entry is decoded (reported as damage either way).

Slow path: anything the fast path rejects (unknown entry types, damaged lines, v1/v2 entries) is
decoded fully and judged by `validate_entry`, which also words the diagnostic. The two paths must
agree on what is valid; `tests/test_scan.py` checks that with generated inputs.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, ge
from typing import Annotated, Any, cast

import msgspec
import orjson

from ..model.entries import Entry, entry_from_dict, validate_entry
from ..model.messages import content_text
from .index import MESSAGE, NONE, OTHER_ROLE, ROLE_CODES, TOOL_ONLY, TreeIndex

NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Object(msgspec.Struct, gc=False):
    """Any JSON object, contents skipped."""


class _Head(msgspec.Struct, gc=False):
    """A message's role and what decides whether Pi's /tree shows an assistant message. The
    content is kept as raw bytes (not parsed into objects) and looked at only for assistants."""

    role: str
    content: msgspec.Raw = msgspec.Raw(b"null")  # msgspec.Raw cannot be part of a union
    stopReason: Any = None

    @property
    def tool_only(self) -> bool:
        if self.role != "assistant":
            return False
        if self.stopReason and self.stopReason not in ("stop", "toolUse"):
            return False  # errors and aborts stay visible (checked before decoding the content)
        return tool_only_assistant(_decode_blocks(self.content), self.stopReason)


class _Block(msgspec.Struct, gc=False):
    type: Any = None
    text: Any = None


_blocks_decoder = msgspec.json.Decoder(list[_Block] | str | None).decode


def _decode_blocks(raw: msgspec.Raw) -> Any:
    """Assistant content as blocks (only `type` and `text` become objects); any other shape as
    plain JSON values, which `tool_only_assistant` judges the way Pi's /tree does."""
    try:
        return _blocks_decoder(raw)
    except msgspec.ValidationError:
        return _decode(raw)
    except msgspec.DecodeError:
        # Bad UTF-8 inside the text: not this check's business. The byte check reports it as
        # damage; until then the message counts as having text, so it stays visible.
        return "?"


def tool_only_assistant(content: Any, stop_reason: Any) -> bool:
    """Pi's /tree hides an assistant message that has no non-blank text and did not end in an
    error or abort (`applyFilter` in pi-coding-agent's `modes/interactive/components/
    tree-selector.js`): a turn that only calls tools, whose results tell the story."""
    if stop_reason and stop_reason not in ("stop", "toolUse"):
        return False
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        for block in content:
            kind = (
                block.type
                if isinstance(block, _Block)
                else (block.get("type") if isinstance(block, dict) else None)
            )
            text = (
                block.text
                if isinstance(block, _Block)
                else (block.get("text") if isinstance(block, dict) else None)
            )
            if kind == "text" and isinstance(text, str) and text.strip():
                return False
    return True


class _MessageHead(msgspec.Struct, gc=False):
    message: _Head


_message_head = msgspec.json.Decoder(_MessageHead).decode


def tool_only_line(line: bytes) -> bool:
    """Whether a stored message entry (its JSON) is an assistant turn Pi's /tree hides
    (`tool_only_assistant`), judged from the bytes as the JSONL scan judges a line: for the
    databases, which keep the tree's columns but not this flag."""
    try:
        return _message_head(line).message.tool_only
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False  # an entry that cannot be read as a message stays visible


class _Row(msgspec.Struct, tag_field="type", gc=False):
    id: NonEmpty
    parentId: str | None
    timestamp: NonEmpty

    def feed(self, index: TreeIndex, line: int | None) -> int:
        return index.add(self.id, self.parentId, self.__struct_config__.tag, line=line)  # type: ignore[arg-type]


class _Message(_Row, tag="message"):
    message: _Head

    def feed(self, index: TreeIndex, line: int | None) -> int:
        head = self.message
        return index.add(self.id, self.parentId, "message", _role(head), tool_only=head.tool_only, line=line)


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


RowType = (
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
)
fast_decode = msgspec.json.Decoder(RowType).decode

# No `float_hook`: out-of-range floats go to the standard library with the other rare lines, and
# a Python call per float (a turn's usage and cost) took 4% of a deep context's decoding.
_decode = msgspec.json.Decoder().decode


def full_decode(raw: bytes | memoryview) -> Any:
    """Untyped decode of one line, reading what JavaScript's `JSON.parse` reads (Pi writes these
    files with JavaScript): out-of-range floats (`1e999`) become infinities; integers too long
    for msgspec become Python ints, or infinities past Python's digit limit; lone surrogate
    escapes (`"\\ud83d"`, which Pi writes when it cuts text in the middle of an emoji) become
    lone surrogates in the string. msgspec refuses all three, so such lines — rare — are
    decoded again by the standard library. Raises `msgspec.DecodeError` when neither reads it."""
    try:
        return _decode(raw)
    except msgspec.DecodeError as exc:
        try:
            text = bytes(raw).decode("utf-8")
            return json.loads(text, parse_int=_js_int, parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError):
            raise exc from None


# Characters of a session's first user message a database's list gives: as many as the file
# picker keeps (`catalog.FIRST_WORDS`), as its filter searches them (with 200, a word further
# on was found in the file's list and not in the database's; QA).
LISTED_WORDS = 2000


def message_words(raw: bytes | memoryview | None) -> str:
    """The start of the text of a stored user message entry (a database's `list_sessions`:
    what a session without a name is known by, as the file picker shows); "" when there is
    none or it cannot be read."""
    if raw is None:
        return ""
    try:
        data = full_decode(raw)
    except (msgspec.DecodeError, RecursionError, ValueError):
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return " ".join(content_text(content, image_placeholder="").split())[:LISTED_WORDS]


def encode_line(data: Any) -> bytes:
    """One entry as a JSON line body (no newline). orjson is the fast path; what it refuses —
    lone surrogates read from Pi's files, integers past 64 bits — is written by the standard
    library with `\\u` escapes, so what was read is written back unchanged in meaning. Raises
    TypeError/ValueError for values JSON cannot hold."""
    try:
        return orjson.dumps(data)
    except TypeError:
        try:
            # A number read as `1e999` is an infinity here: null, as orjson (and Pi's
            # JSON.stringify) write it, rather than a ValueError when the same entry also
            # holds an integer past 64 bits (QA: a traceback from `fork`).
            finite = nulled_non_finite(data) if non_finite(data) is not None else data
            return json.dumps(finite, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()
        except RecursionError:  # past Python's recursion limit (orjson stops at 255 levels)
            raise ValueError("its values are nested too deeply to write") from None


def nulled_non_finite(value: Any) -> Any:
    """`value` with each NaN or infinity replaced by None (JSON's null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: nulled_non_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nulled_non_finite(v) for v in value]
    return value


# Half of a character cut in two (Pi's truncation can leave one): JSON holds it as an escape,
# UTF-8 (and so SQLite's text) has no form for it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def non_finite(value: Any, where: str = "") -> str | None:
    """Where `value` holds a NaN or an infinity (`message.usage.cost`), or None. JSON has no such
    numbers: orjson writes them as null, which would change the entry on its way to disk (a
    compaction's `tokensBefore` would then be missing, the file damaged)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where or "the value"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(item, float | dict | list | tuple):
            found = non_finite(item, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    return None


def copied(entry: Entry) -> Entry:
    """An entry of its own, as written and read back: a storage never hands out an object it
    keeps (a caller that marks a context's last message for prompt caching would otherwise
    see the mark in every later context)."""
    return entry_from_dict(full_decode(encode_line(entry.to_dict())))


def _js_int(digits: str) -> int | float:
    try:
        return int(digits)
    except ValueError:  # beyond Python's int-from-string digit limit; JavaScript gives Infinity
        return float(digits)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN and Infinity literals


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


NOT_UTF8 = "is not valid UTF-8 text"


def decode_entry_dict(raw: bytes | memoryview) -> dict[str, Any]:
    """Full decode + validation of one line; raises LineError with a readable reason."""
    try:
        data = full_decode(raw)
    except msgspec.DecodeError as exc:
        if "UTF-8" in str(exc):  # as the byte check says it (`verify.py`), not as a JSON error
            raise LineError(NOT_UTF8) from None
        raise LineError(f"is not valid JSON ({_short(exc)})") from None
    except (RecursionError, MemoryError):
        # Valid JSON, which sets no limit (Node reads 5,000 levels): said as this reader's limit,
        # not as a fault of the line (QA)
        raise LineError(
            "holds values nested deeper than sessiontree reads (about 1,000 levels; JSON itself has no limit)"
        ) from None
    reason = validate_entry(data)
    if reason is not None:
        raise LineError(reason)
    return data


def add_dict(index: TreeIndex, data: dict[str, Any], line: int | None) -> int:
    """Index a validated entry dict (slow path, memory and SQLite storages)."""
    etype = data["type"]
    message = data["message"] if etype == "message" else None
    role = message["role"] if message is not None else None
    only_tools = (
        role == "assistant"
        and message is not None
        and tool_only_assistant(message.get("content"), message.get("stopReason"))
    )
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
        tool_only=only_tools,
        line=line,
    )


_FAST_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def decode_all(lines: Sequence[bytes | memoryview]) -> list[_Row] | None:
    """Fast-decode a batch of lines in one C-level pass; None if any of them needs the slow
    path (blank, damaged, unknown type), in which case the caller goes line by line.

    UTF-8 inside the fields the structs skip is not checked here (see `JsonlStorage` for the
    byte check that covers it)."""
    try:
        return list(map(fast_decode, lines))
    except _FAST_ERRORS:
        return None


_ID = attrgetter("id")
_PARENT = attrgetter("parentId")
_MESSAGE = attrgetter("message")


def _role(head: _Head) -> str:
    return head.role


def _flag(head: _Head) -> int:
    return TOOL_ONLY if head.tool_only else 0


def feed_rows(index: TreeIndex, rows: list[_Row], first_line: int) -> None:
    """Index fast-decoded rows of consecutive lines.

    Runs of messages — >95% of real files, and the open-time hot path — are indexed with
    C-level bulk operations when they are the common case (fresh unique ids, parents already
    indexed, nothing waiting for them); every other row goes through `TreeIndex.add` in file
    order. Both produce the same index, which `tests/test_scan.py` checks on generated sessions.
    """
    k = 0
    n = len(rows)
    while k < n:
        j = k
        while j < n and type(rows[j]) is _Message:
            j += 1
        if j > k:
            _feed_messages(index, rows[k:j], first_line + k)
        if j < n:
            rows[j].feed(index, first_line + j)
            j += 1
        k = j


def _feed_messages(index: TreeIndex, run: list[_Row], first_line: int) -> None:
    pos, ids = index.pos, index.ids
    n = len(run)
    i0 = len(ids)
    new_ids = list(map(_ID, run))
    if index.missing_parents or len(set(new_ids)) != n or not pos.keys().isdisjoint(new_ids):
        _feed_each(index, run, first_line)
        return
    pos.update(zip(new_ids, range(i0, i0 + n), strict=True))
    found = list(map(pos.get, map(_PARENT, run)))
    if None in found or any(map(ge, found, range(i0, i0 + n))):  # type: ignore[arg-type]
        # roots, gaps, forward references: the one-at-a-time path handles them
        for eid in new_ids:
            del pos[eid]
        _feed_each(index, run, first_line)
        return
    parents = cast("list[int]", found)  # no None left
    ids.extend(new_ids)
    index.kind.extend(bytes((MESSAGE,)) * n)
    heads = list(map(_MESSAGE, run))
    index.role.extend(bytes(map(ROLE_CODES.get, map(_role, heads), repeat(OTHER_ROLE))))
    index.flags.extend(bytes(map(_flag, heads)))
    index.parent.extend(parents)
    blank = array("i", (NONE,)) * n
    first_child, last_child, next_sibling = index.first_child, index.last_child, index.next_sibling
    first_child.extend(blank)
    last_child.extend(blank)
    next_sibling.extend(blank)
    if parents[1:] == list(range(i0, i0 + n - 1)):  # a chain: each row continues the previous
        index.link(parents[0], i0)
        chain = array("i", range(i0 + 1, i0 + n))
        first_child[i0 : i0 + n - 1] = chain
        last_child[i0 : i0 + n - 1] = chain
    else:
        link = index.link
        for i, p in zip(range(i0, i0 + n), parents, strict=True):
            link(p, i)
    index.leaf = i0 + n - 1


def _feed_each(index: TreeIndex, run: list[_Row], first_line: int) -> None:
    for k, row in enumerate(run):
        row.feed(index, first_line + k)


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

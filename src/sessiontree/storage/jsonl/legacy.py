"""Pi's older session files (format versions 1 and 2), read and upgraded.

They are small legacy files: read whole, migrated to v3 in memory (`storage.migrate`) and opened
read-only, because appending v3 lines to a v1/v2 file would make a file no version reads right.
`upgrade` rewrites one as v3, atomically, keeping the original as `<file>.bak`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...model.entries import Entry, entry_from_dict, validate_entry
from ...model.errors import Diagnostic
from ...model.header import SessionHeader
from ..migrate import migrate_entries, stable_ids
from ..scan import add_dict, full_decode
from .indexer import LineIndex
from .verify import utf8_damage


@dataclass(slots=True)
class Legacy:
    """A v1/v2 file as read: its migrated entries (in memory), their index and line numbers."""

    entries: list[Entry] = field(default_factory=list)
    lines: LineIndex = field(default_factory=LineIndex)
    end: int = 0
    next_line: int = 0


_UNREAD = object()  # a line that is not JSON (`None` is JSON's null)


def _replaced(raw: bytes) -> Any:
    """`raw` read as Pi reads a file, its bytes that are not UTF-8 as U+FFFD (`_UNREAD` if it
    is not JSON even so)."""
    try:
        return full_decode(raw.decode("utf-8", "replace").encode())
    except (msgspec.DecodeError, RecursionError):
        return _UNREAD


def read_legacy(
    fd: int,
    header: SessionHeader,
    header_end: int,
    header_line: int,
) -> Legacy:
    """Read and migrate a v1/v2 file; v1 entries, which have no ids, are named by
    `stable_ids` of the session."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size - header_end, header_end)
    out = Legacy(end=size)
    objects: list[dict[str, Any]] = []
    line_of: list[int] = []
    line_no = header_line
    pieces = data.split(b"\n")
    for k, raw in enumerate(pieces):
        line_no += 1
        if not raw.strip():
            continue
        why = ""
        try:
            obj = full_decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            why = str(exc)
            obj = _replaced(raw) if "UTF-8" in why else _UNREAD
            if obj is not _UNREAD:  # bytes that are not UTF-8: U+FFFD, as in a v3 file
                out.lines.diagnostics.append(utf8_damage(line_no, None))
        if obj is _UNREAD:
            if k == len(pieces) - 1:  # no newline after it: a write cut short, as in a v3 file
                out.lines.diagnostics.append(
                    Diagnostic(
                        "warning",
                        "torn_tail",
                        f"line {line_no} is incomplete ({len(raw)} bytes, not valid JSON): probably"
                        " a write cut short by a crash. It is left out",
                        line_no,
                    )
                )
            else:
                out.lines.diagnostics.append(
                    Diagnostic("error", "invalid_line", f"line {line_no} is not valid JSON ({why})", line_no)
                )
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            out.lines.diagnostics.append(
                Diagnostic("error", "invalid_line", f"line {line_no} is not a session entry", line_no)
            )
            continue
        objects.append(obj)
        line_of.append(line_no)
    migrated = migrate_entries(header.version, objects, stable_ids(header.id))
    for obj, line in zip(migrated, line_of, strict=True):
        reason = validate_entry(obj)
        if reason is not None:
            out.lines.diagnostics.append(Diagnostic("error", "invalid_line", f"line {line} {reason}", line))
            continue
        add_dict(out.lines.index, obj, line)
        out.entries.append(entry_from_dict(obj))
        out.lines.lines.append(line)
    out.next_line = line_no + 1
    return out


def read_only_reason(header: SessionHeader, path: str) -> str:
    return (
        f"this is a version {header.version} session file (Pi's older format); it is shown"
        " migrated to v3 in memory, and the file is left untouched (lines appended to it"
        f" are not followed). Run `sessiontree upgrade {path}` to convert it (a backup is"
        " kept) before writing to it"
    )

"""The path root → ID as a session file of its own (Pi's v3 JSONL).

The entries are copied unchanged (ids, parents, payloads), so Pi opens the new file at the last
entry and computes exactly the context it computes at ID in the source. The header is new: a
fresh session id, now as its timestamp, the source's working directory, and `parentSession`
naming the source — what Pi writes for a branched session.

An entry's `parentId` changes in two cases only, so that the file written is a clean session
rather than a copy of a problem: where the source is damaged (an ancestor missing or
unreadable), the next readable entry is re-parented onto the previous one or made a root; and a
`leaf` entry inside the path is left out (see `session_lines`).

A fork (`relabel`) also does what Pi's `createBranchedSession` does
(packages/coding-agent/src/core/session-manager.ts): the path's `label` entries are left out and
written again after it, one per label an entry of the path carries, so a label set on the path
from another branch is kept and one cleared since is not. Like any label entry the last of them
becomes the leaf, as in Pi's fork; the context is the path's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..model.entries import Entry, LabelEntry, LeafEntry
from ..model.errors import SessionError
from ..model.header import SessionHeader
from ..model.ids import iso_now, new_entry_id, new_session_id
from ..session import Session
from ..storage.index import LABEL
from ..storage.scan import encode_line
from .common import PathExport, collect_path, source_name

# Characters that mean nothing to JSON but something to a terminal or an editor (DEL, C1
# controls, bidi controls, zero-width characters, line/paragraph separators, BOM). They only
# ever occur inside JSON strings, where `\uXXXX` says the same thing, so escaping them at the
# byte level changes no value and makes the file safe to print.
_INERT_BYTES = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa0-\xa4\xa6-\xa9]|\xef\xbb\xbf"
)


def _escape(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode())


def inert_json(line: bytes) -> bytes:
    """`line` (encoded JSON) with the characters above written as `\\uXXXX` escapes."""
    return _INERT_BYTES.sub(_escape, line)


def session_lines(
    session: Session,
    path: PathExport,
    *,
    session_id: str | None = None,
    parent_session: str | None = None,
    timestamp: str | None = None,
    relabel: bool = False,
) -> list[bytes]:
    """The lines (each ending in a newline) of a v3 session file holding `path` (and with
    `relabel`, its labels as Pi's fork writes them: see the module docstring)."""
    return list(
        iter_session_lines(
            session,
            path.entries,
            session_id=session_id,
            parent_session=parent_session,
            timestamp=timestamp,
            relabel=relabel,
        )
    )


def iter_session_lines(
    session: Session,
    entries: Iterable[Entry],
    *,
    session_id: str | None = None,
    parent_session: str | None = None,
    timestamp: str | None = None,
    relabel: bool = False,
) -> Iterator[bytes]:
    """`session_lines` of a path's `entries` (root first), each line made as its entry comes.

    A `leaf` entry inside the path (Pi's coding agent chains new entries below one when it
    continues a file that ends with a leaf move) is left out and its child re-parented onto its
    parent: in a file of one path, its target is usually absent, which a reader takes for
    damage, and it contributes nothing to the context. One at the end of the path is kept."""
    header = SessionHeader.new(
        session_id or new_session_id(),
        timestamp or iso_now(),
        session.header.cwd,
        parent_session=parent_session if parent_session is not None else source_name(session),
    )
    yield inert_json(encode_line(header.to_dict())) + b"\n"
    previous: str | None = None
    written: set[str] = set()
    held: Entry | None = None  # a `leaf` entry, written only if nothing follows it

    def line(entry: Entry) -> bytes:
        nonlocal previous
        data = entry.to_dict()
        if data.get("parentId") != previous:
            data["parentId"] = previous  # bridge a gap (see the module docstring)
        previous = entry.id
        written.add(entry.id)
        return inert_json(encode_line(data)) + b"\n"

    # A label entry a compaction keeps from stays: left out, the copy's compaction kept
    # nothing, and the context lost the kept turns (helper review: the library takes any id as
    # `firstKeptEntryId`).
    kept_from = {first for first, _ in session.tree.compactions.values()} if relabel else set()
    for entry in entries:
        held = None  # whatever comes after a `leaf` entry leaves it out
        if isinstance(entry, LeafEntry):
            held = entry
        elif not (relabel and isinstance(entry, LabelEntry)) or entry.id in kept_from:
            yield line(entry)
    if held is not None:
        yield line(held)
    for target_id, label, stamp in labels_of(session, written) if relabel else ():
        label_id = new_entry_id(written.__contains__)
        data = {
            "type": "label",
            "id": label_id,
            "parentId": previous,
            "timestamp": stamp,
            "targetId": target_id,
            "label": label,
        }
        yield inert_json(encode_line(data)) + b"\n"
        previous = label_id
        written.add(label_id)


def labels_of(session: Session, ids: set[str]) -> list[tuple[str, Any, str]]:
    """(target id, label as its latest label entry wrote it, that entry's timestamp) for each
    entry of `ids` that carries a label, in the order the session's labels were first set (Pi
    keeps them in a map in that order). A label entry that cannot be read is passed over."""
    labels = session.labels()
    wanted = [target for target in labels if target in ids]
    if not wanted:
        return []
    latest: dict[str, tuple[Any, str]] = {}
    kind, code = session.tree.kind, bytes((LABEL,))
    i = kind.find(code)
    while i >= 0:  # the label entries, in file order: the latest of each target wins
        try:
            entry = session.entry_at(i)
        except SessionError:
            entry = None
        if isinstance(entry, LabelEntry) and entry.target_id in labels:
            latest[entry.target_id] = (entry.get("label"), entry.timestamp)
        i = kind.find(code, i + 1)
    return [(target, *latest[target]) for target in wanted if target in latest]


def export_jsonl(
    session: Session,
    at: str | None = None,
    *,
    session_id: str | None = None,
    parent_session: str | None = None,
) -> tuple[bytes, PathExport]:
    """The session file for root → `at` (default: the leaf), and what was collected."""
    path = collect_path(session, at)
    return b"".join(session_lines(session, path, session_id=session_id, parent_session=parent_session)), path

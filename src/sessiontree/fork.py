"""Forking: a new session file that holds the path root → ID of an existing session.

The new file continues the conversation from ID without the other branches, as Pi's "branch
into a new session" does. It follows Pi's navigation rule: forking at a user (or custom)
message ends the new file at that message's *parent* and hands the message text back to be
sent again (as Pi puts it into the editor), because continuing *after* a user message that was
already answered is never what picking it means. Every other entry ends the file itself.

The entries are copied unchanged (see `export.jsonl`), but for labels, which are written again
after the path as Pi's fork writes them; the header gets a fresh session id and
`parentSession` naming the source. By default the file goes next to the source, named the way
Pi names session files, so Pi's session list shows it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import orjson

from .export.common import PathExport, output_place, path_positions, read_path, resolve_target
from .export.files import write_file
from .export.jsonl import iter_session_lines
from .model.entries import Entry, LabelEntry
from .model.ids import iso_now, new_session_id
from .opening import session_file_name
from .session import Session


@dataclass(frozen=True, slots=True)
class ForkResult:
    """What `fork_session` wrote."""

    path: str  # the new session file
    session_id: str
    leaf_id: str | None  # the path's last entry in the new file (None: it holds no entries)
    resend_text: str | None  # the user/custom message text to send again, when forking at one
    source: PathExport  # where the path ends and the damage met on it (its entries are not kept)
    entries: int = 0  # entries the new file holds (the path's, and the labels written after it)
    file_leaf_id: str | None = None  # the new file's leaf: its last entry (a label copied after the path)


def fork_point(session: Session, entry_id: str) -> tuple[str | None, str | None]:
    """Where a fork at `entry_id` ends, and the text to re-send (Pi's navigation rule, see the
    module docstring). Raises `not_found` for an unknown id and `invalid_argument` for a
    `leaf` entry, which records a move rather than a point of the conversation."""
    resolve_target(session, entry_id)
    return session.navigation_target(entry_id)


def default_fork_path(session: Session, session_id: str, timestamp: str) -> str:
    """`<directory>/<timestamp>_<session id>.jsonl`, Pi's file name for a session, in the
    source's directory (the current one for a session on a server: `output_place`)."""
    return os.path.join(output_place(session)[0], session_file_name(timestamp, session_id))


def fork_session(
    session: Session,
    entry_id: str,
    *,
    output: str | os.PathLike[str] | None = None,
    force: bool = False,
    parent_session: str | None = None,
) -> ForkResult:
    """Write a new session file holding root → `entry_id` (see the module docstring). Nothing
    is written when anything fails; an existing `output` is replaced only with `force`. The
    path's entries are read, written and let go a batch at a time: held all at once, those of
    a 727,000-entry path took 3.8 GB (and more in the app, which froze meanwhile)."""
    end, resend = fork_point(session, entry_id)
    positions, path = path_positions(session, end)
    session_id, timestamp = new_session_id(), iso_now()
    target = os.fspath(output) if output is not None else default_fork_path(session, session_id, timestamp)
    ends: list[str] = []  # the last entry of the path that is not a label
    last: list[bytes] = []  # the last line written: the new file's leaf (labels get new ids)

    def entries() -> Iterator[Entry]:
        for entry in read_path(session, positions, path):
            if not isinstance(entry, LabelEntry):
                ends[:] = [entry.id]
            yield entry

    def noted(lines: Iterable[bytes]) -> Iterator[bytes]:
        for line in lines:
            last[:] = [line]
            yield line

    counted = [0]  # lines written, the header's included
    lines = iter_session_lines(
        session,
        entries(),
        session_id=session_id,
        parent_session=parent_session,
        timestamp=timestamp,
        relabel=True,
    )
    # a session file like any other sessiontree creates: private to its owner
    written = write_file(
        target, _blocks(noted(lines), counted), force=force, mode=0o600, sources=session.files
    )
    leaf = ends[0] if ends and end is not None else None
    file_leaf = orjson.loads(last[0])["id"] if counted[0] > 1 else None  # past the header
    return ForkResult(written, session_id, leaf, resend, path, counted[0] - 1, file_leaf)


def _blocks(lines: Iterable[bytes], counted: list[int], size: int = 1 << 20) -> Iterator[bytes]:
    """`lines` joined into writes of about `size` bytes (a write per line is a system call per
    entry); how many lines went by is added to `counted[0]`."""
    block: list[bytes] = []
    held = 0
    for line in lines:
        block.append(line)
        held += len(line)
        counted[0] += 1
        if held >= size:
            yield b"".join(block)
            block, held = [], 0
    if block:
        yield b"".join(block)


__all__ = ["ForkResult", "default_fork_path", "fork_point", "fork_session"]

"""What every export shares: which entry it ends at, the path of entries from the root to it,
and what of the source could not be read.

An export of a damaged session is still useful (the readable part of the conversation), but it
must say what it left out, so collecting the path records every gap instead of failing: a path
cut off by a missing parent, an entry on the path that no longer decodes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..display import counted, one_line
from ..model.entries import Entry, LabelEntry, LeafEntry
from ..model.errors import Diagnostic, SessionError
from ..session import Session
from ..storage.index import NONE
from ..storage.jsonl import JsonlStorage
from ..storage.memory import MemoryStorage

TORN = "torn_tail"  # the diagnostic of an incomplete last line


@dataclass(slots=True)
class PathExport:
    """The entries from the root down to `target_id` (file order along the path), readable ones
    only. `cut_above` names the missing parent when the path does not reach a root; `unreadable`
    lists entries on the path that could not be decoded (left out); `note` explains a target
    that is not an ordinary point of the conversation."""

    target_id: str | None
    entries: list[Entry]
    cut_above: str | None = None
    cut_why: str = "is missing"  # what is wrong with that parent: missing, or it closes a cycle
    unreadable: list[str] = field(default_factory=list)
    note: str | None = None
    top_id: str | None = None  # the path's root-most entry (readable or not)

    @property
    def complete(self) -> bool:
        return self.cut_above is None and not self.unreadable


def describe_entry(entry: Entry) -> str:
    """What an entry is, in a few words, for messages that refuse or explain a target."""
    if isinstance(entry, LeafEntry):
        to = entry.target_id or "the start"
        return f"a `leaf` entry (a recorded move of the leaf to {to}), not a point of the conversation"
    if isinstance(entry, LabelEntry):
        what = (
            f"labels {entry.target_id} {entry.label!r}"
            if entry.label
            else f"clears the label of {entry.target_id}"
        )
        return f"a `label` entry (it {what}); its context is the context of its parent"
    return f"a `{entry.type}` entry"


def resolve_target(session: Session, at: str | None) -> tuple[str | None, str | None]:
    """The entry an export ends at (`at`, default the leaf) and an explanatory note, or raise.

    `leaf` entries are refused: one records a move of the leaf, and the path through it leads
    to where the leaf was *before* the move, which is never what someone pointing at it means.
    A `label` entry is a real point of the path (Pi makes it the leaf), so it is accepted with a
    note saying what it is."""
    if at is None:
        return session.leaf_id, None
    entry = session.get_entry(at)
    if entry is None:
        raise SessionError(
            "not_found", f"no entry {one_line(at, 80)!r} in this session", path=session.location
        )
    if isinstance(entry, LeafEntry):
        hint = f"; use its target {entry.target_id}" if entry.target_id else ""
        raise SessionError(
            "invalid_argument", f"{one_line(at, 80)} is {describe_entry(entry)}{hint}", path=session.location
        )
    if isinstance(entry, LabelEntry):
        return at, f"{one_line(at, 80)} is {describe_entry(entry)}"
    return at, None


# Diagnostics saying an entry in the index cannot be decoded (its line fails the full decode);
# others name an entry that reads (a missing parent; bytes that are not UTF-8, read as U+FFFD).
UNREADABLE = frozenset({"unreadable_line"})


def require_readable_path(session: Session, target: str | None, what: str) -> None:
    """Raise when an entry known to be unreadable (its line damaged: not UTF-8, not JSON) is on
    the root path of `target`: `what` (a context) would be built without it and look whole.
    Said before anything is written, rather than after a warning that the readable part was
    used (QA: `context` warned, then failed with "not valid JSON")."""
    tree = session.tree
    known = {
        tree.pos[d.entry_id]: d
        for d in session.diagnostics
        if d.code in UNREADABLE and d.entry_id is not None and d.entry_id in tree.pos
    }
    if target is None or not known:
        return
    for i in tree.path_to_root(session.position(target)):
        d = known.get(i)
        if d is not None:
            raise SessionError(
                "invalid_entry",
                f"{what} cannot be built: entry {one_line(d.entry_id or '?', 40)} on its path cannot be"
                f" read ({d.message}); `sessiontree export` writes the readable part of the path",
                path=session.location,
                line=d.line,
            )


def collect_path(session: Session, at: str | None = None) -> PathExport:
    """The root → `at` path (default: the leaf) as decoded entries, recording what is missing."""
    target, note = resolve_target(session, at)
    return path_to(session, target, note)


def path_to(session: Session, target: str | None, note: str | None = None) -> PathExport:
    """The root → `target` path of an entry known to exist; None gives the empty path."""
    positions, path = path_positions(session, target, note)
    path.entries.extend(read_path(session, positions, path))
    return path


def read_path(session: Session, positions: list[int], path: PathExport) -> Iterator[Entry]:
    """The readable entries at `positions`, in order, a batch read at a time; each one that
    cannot be decoded is added to `path.unreadable` (the storage records it among its
    diagnostics) and left out."""
    for i, entry in session.iter_entries(positions):
        if entry is None:
            path.unreadable.append(session.tree.ids[i])
        else:
            yield entry


def path_positions(
    session: Session, target: str | None, note: str | None = None
) -> tuple[list[int], PathExport]:
    """The positions of the root → `target` path, and its `PathExport` with no entries read yet
    (a fork writes them as it reads them: the 727,000 entries of a path held at once took 3.8 GB)."""
    if target is None:
        return [], PathExport(None, [], note=note)
    tree = session.tree
    positions = tree.path_to_root(session.position(target))
    top = positions[0]
    cut, why = None, "is missing"
    if tree.parent[top] != NONE:  # a root whose parent is not in the log
        cut = next((pid for pid, kids in tree.missing_parents.items() if top in kids), None)
        if cut is None:  # the parent is in the log: the link to it was cut to break a cycle
            try:
                cut = session.entry_at(top).parent_id
            except SessionError:  # unreadable: its parent is not known
                cut = None
            if cut:
                why = "is the entry itself" if cut == tree.ids[top] else "leads back to it (a cycle)"
            cut = cut or "?"
    return positions, PathExport(target, [], cut, why, note=note, top_id=tree.ids[top])


def source_file(session: Session) -> str | None:
    """The file a session lives in (for SQLite, the database), absolute; None in memory."""
    from ..storage.sqlite import SqliteStorage  # here, so the browser does not load SQLite to start

    storage = session.storage
    if isinstance(storage, SqliteStorage):
        return os.path.abspath(storage.db_path)
    if isinstance(storage, JsonlStorage):
        return os.path.abspath(storage.path)
    return None


def output_place(session: Session) -> tuple[str, str]:
    """Where a file written from `session` with no name given goes, and the stem its name
    starts with: next to the session's file (for SQLite, the database), after it; for a session
    on a server (PostgreSQL), the current directory, after the session's id (its address,
    password masked or not, is no file name). `invalid_argument` for one only in memory."""
    source = source_file(session)
    if source is not None:
        return os.path.dirname(source), os.path.splitext(os.path.basename(source))[0]
    if isinstance(session.storage, MemoryStorage):
        raise SessionError("invalid_argument", "a session in memory has no directory; name the output file")
    return os.getcwd(), file_part(session.header.id)


FILE_PART_MOST = 48  # characters of an id in a file name: a name's limit is 255 bytes


def file_part(text: str) -> str:
    """`text` (an entry or session id) as a piece of a file name: characters other than
    letters, digits, `-` and `_` as `_`, and past FILE_PART_MOST characters cut, with a hash of
    the whole so that two long ids still name two files. A 300-character id made a name past
    the system's limit, and the export crashed the app (QA); a `/` named another directory."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in text)
    if safe == text and len(text) <= FILE_PART_MOST:
        return text
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe[: FILE_PART_MOST - 9]}-{digest}"


def source_name(session: Session) -> str | None:
    """How a copy names its source in `parentSession`: the absolute path of the session file
    (for SQLite, of the database, followed by `#id`); for PostgreSQL its URL, the password
    masked, and `#id` (a fork of one named no source; QA); None for a session only in memory."""
    from ..storage.sqlite import SqliteStorage

    file = source_file(session)
    if file is not None and isinstance(session.storage, SqliteStorage):
        return f"{file}#{session.storage.session_id}"
    location = session.storage.location
    if file is None and location is not None and location.startswith(("postgresql://", "postgres://")):
        return location  # `PostgresStorage.location`: the URL as messages show it, then `#id`
    return file


# Incomplete writes, which no reader could have read whole: an incomplete last line (a session
# being written ends in one for a moment) and one another writer continued on the same line
# (its entry read). `check` calls such a file ok; the other commands say it in a note, status 0.
INCOMPLETE_WRITES = (TORN, "torn_continued")


def damage(session: Session) -> list[Diagnostic]:
    """Problems of the source that mean something was left out (errors and warnings; `info`
    diagnostics record repairs that lost nothing), but incomplete writes (`incomplete_lines`)."""
    return [
        d
        for d in session.diagnostics
        if d.severity in ("error", "warning") and d.code not in INCOMPLETE_WRITES
    ]


def incomplete_lines(session: Session) -> list[str]:
    """What a command says of a source's incomplete writes (`INCOMPLETE_WRITES`), left out."""
    return [f"{session.location}: {d.message}" for d in session.diagnostics if d.code in INCOMPLETE_WRITES]


def _more(count: int, limit: int) -> str:
    return f"; and {count - limit} more" if count > limit else ""


def damage_line(
    session: Session, path: PathExport | None = None, *, done: str = "exported", limit: int = 3
) -> str | None:
    """One line saying what of a damaged source was skipped by what was `done` with the rest,
    or None when nothing was."""
    problems = damage(session)
    parts: list[str] = []
    if path is not None and path.cut_above is not None:
        top, parent = path.top_id or "?", path.cut_above
        parts.append(f"the path is cut above {top} (its parent {parent} {path.cut_why})")
    if path is not None and path.unreadable:
        parts.append(
            counted(len(path.unreadable), "unreadable entry", "unreadable entries")
            + f" on the path left out ({', '.join(path.unreadable[:limit])})"
        )
    replaced = [d for d in problems if d.code == "invalid_utf8"]  # read, not skipped
    if replaced:
        parts.append("; ".join(d.said() for d in replaced[:limit]) + _more(len(replaced), limit))
    problems = [d for d in problems if d.code != "invalid_utf8"]
    if problems:
        parts.append(
            "skipped: " + "; ".join(d.said() for d in problems[:limit]) + _more(len(problems), limit)
        )
    if not parts:
        return None
    return one_line(f"{session.location} is damaged; {done} what is readable: " + "; ".join(parts), 600)

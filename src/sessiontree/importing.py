"""Importing JSONL session files into a database (a SQLite file or a PostgreSQL URL).

An imported session keeps its header's id as its session id and every entry keeps its id, so the
same file always maps to the same session. That makes importing idempotent and incremental with
no bookkeeping of its own: the session already in the database must be exactly the first
entries the file gives today (compared entry by entry; moves, summaries, labels and names
written in the database in between are passed over); then only the rest is appended. A file
that no longer starts with what was imported (rewritten, edited, another file with the same
session id) is refused, and nothing is written for it.

What the file gives is a pure function of its bytes, so a second import sees the same sequence:
- the file is read as the browser reads it (`JsonlStorage`, read-only, never locking), so a
  live agent's file can be imported while it is written; an incomplete last line is left for
  the next import;
- damaged lines are reported (file and line) and skipped, and so is an entry that cannot be
  written on its own terms: its id used again, its move target not imported, or a value the
  target cannot store; an entry whose parent was not imported (a damaged line above it) is
  imported as a root, reported too, so one damaged line costs only that line;
- v1 entries (no ids) get the ids every read gives them (`storage.migrate.stable_ids`), where
  Pi's own migration would pick random ones.

Entries are appended in batches, each one transaction; an interrupted import leaves whole
batches, and the next import goes on from there.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .display import counted
from .model.entries import Entry, entry_from_dict
from .model.errors import SessionError
from .model.header import CURRENT_VERSION, SessionHeader
from .model.ids import iso_now
from .storage.base import SessionStorage
from .storage.dbfiles import is_sqlite
from .storage.jsonl import JsonlStorage
from .storage.jsonl.files import open_regular, read_header
from .storage.jsonl.legacy import read_legacy
from .storage.postgres import PostgresStorage, is_postgres_url, redact
from .storage.scan import LONE_SURROGATE, encode_line, non_finite, nulled_non_finite
from .storage.sqlite import SqliteStorage

# What a reader of the imported copy writes to it (the app's moves, summaries, labels, names and
# archive records): the database may hold these between the file's entries, which are compared
# in order around them; any other entry the file does not give means the two have diverged.
DATABASE_SIDE = frozenset({"leaf", "branch_summary", "label", "session_info", "custom"})
BATCH = 1000  # entries per transaction: big enough to amortise a commit, small enough to resume
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")

# Problems with the tree's shape that the import words itself, for the entries it skips.
_STRUCTURAL = {"missing_parent", "duplicate_id", "dangling_leaf", "self_parent", "parent_cycle"}

_PENDING = (
    "not imported yet: the last line is incomplete (still being written, or cut short by a"
    " crash); a later import takes it once it is complete"
)

Status = Literal["new", "appended", "unchanged", "refused", "failed"]
ProblemKind = Literal["skipped", "rooted", "mended", "pending", "noted"]


@dataclass(frozen=True, slots=True)
class Problem:
    """A line that was not imported (damaged, or an entry that could not be written)."""

    path: str
    line: int | None
    message: str
    # skipped: not imported; rooted: imported as a root (its parent was not); mended: imported
    # with a broken character replaced or a number out of range as null; pending: an incomplete
    # last line, left for a later import; noted: an incomplete write another writer continued on
    # its line, whose entry was read (nothing readable was left out)
    kind: ProblemKind = "skipped"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


@dataclass(slots=True)
class FileResult:
    path: str
    status: Status = "failed"
    session_id: str | None = None
    added: int = 0  # entries appended by this import
    total: int = 0  # entries of the session in the target afterwards
    message: str | None = None  # why a file was refused or failed
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ImportProgress:
    path: str
    file_number: int  # 1-based
    files: int
    done: int  # entries of this file handled so far
    total: int  # entries this file has


ProgressCallback = Callable[[ImportProgress], None]


class _Diverged(Exception):
    pass


# --- sources ------------------------------------------------------------------------------------


def find_sources(sources: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The session files named: files as given, directories searched for `*.jsonl` at any
    depth (Pi keeps one directory per working directory), in path order, each file once."""
    found: list[Path] = []
    seen: set[Path] = set()
    for source in sources:
        path = Path(source)
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        elif path.exists():
            candidates = [path]
        else:
            raise SessionError("not_found", "no such file or directory", path=str(path))
        for candidate in candidates:
            key = candidate.resolve()
            if key not in seen:
                seen.add(key)
                found.append(candidate)
    return found


class _Source:
    """One session file as the import sees it: its header (as v3), its entries in file order
    with their line numbers, and the damage found while reading it."""

    def __init__(self, path: str, progress: Callable[[int, int], None] | None = None) -> None:
        self.path = path
        self._storage: JsonlStorage | None = None
        self._legacy: list[tuple[int | None, Entry]] | None = None
        self._legacy_ids: set[str] | None = None
        if is_sqlite(path):  # "the first line is not valid JSON" said nothing useful (QA)
            raise SessionError(
                "invalid_session", "is a SQLite database; import reads Pi's session files (.jsonl)", path=path
            )
        storage = JsonlStorage.open(path, read_only=True, progress=progress)
        if storage.format_version >= CURRENT_VERSION:
            self._storage = storage
            self.header = storage.header
            self.diagnostics = storage.diagnostics
            self.count = len(storage.index)
            return
        storage.close()
        self._read_legacy()

    @property
    def indexed(self) -> bool:
        """Read through the file's index (v3), not migrated whole (v1/v2)."""
        return self._storage is not None

    def _read_legacy(self) -> None:
        """Pi's v1/v2 files: small, read whole and migrated, v1 ids made stable."""
        fd = open_regular(self.path, os.O_RDONLY)
        try:
            header, header_end, header_line = read_header(fd, self.path)
            legacy = read_legacy(fd, header, header_end, header_line)
        finally:
            os.close(fd)
        self.header = header.upgraded()
        self.diagnostics = legacy.lines.diagnostics + legacy.lines.index.diagnostics
        self._legacy = list(zip(legacy.lines.lines, legacy.entries, strict=True))
        self.count = len(self._legacy)

    def entries(self, problems: list[Problem]) -> Iterator[tuple[int | None, Entry]]:
        if self._legacy is not None:
            yield from self._legacy
            return
        storage = self._storage
        assert storage is not None
        for i in range(self.count):
            line = storage.line_at(i)
            try:
                entry = storage.load_entry(i)
            except SessionError as exc:  # damage found only when decoding in full
                text = exc.detail.removeprefix(f"line {exc.line or line} ")
                problems.append(Problem(self.path, exc.line or line, f"skipped, the line {text}"))
                continue
            yield line, entry

    @property
    def leaf_id(self) -> str | None:
        """The file's leaf, as it is read (Pi's: its last entry, or where a move put it)."""
        if self._legacy is not None:
            return self._legacy[-1][1].id if self._legacy else None
        assert self._storage is not None
        return self._storage.leaf_id

    def has_id(self, entry_id: str) -> bool:
        """Whether an entry of the file has this id (a damaged line's entry has none)."""
        if self._legacy is not None:
            if self._legacy_ids is None:
                self._legacy_ids = {entry.id for _, entry in self._legacy}
            return entry_id in self._legacy_ids
        assert self._storage is not None
        return entry_id in self._storage.index.pos

    def close(self) -> None:
        if self._storage is not None:
            self._storage.close()


# --- targets ------------------------------------------------------------------------------------


class Target:
    """Where sessions are imported to: a SQLite database file or a PostgreSQL database."""

    def __init__(self, spec: str | os.PathLike[str]) -> None:
        text = os.fspath(spec)
        self.spec = text
        if is_postgres_url(text):
            url, _, session = text.partition("#")
            if session:
                raise SessionError(
                    "invalid_argument",
                    "the target is a database: imported sessions keep their own ids,"
                    " so leave out #SESSION_ID",
                    path=redact(text),
                )
            self.kind = "postgres"
            self.location = url
        elif text.endswith(SQLITE_SUFFIXES) or is_sqlite(text):
            self.kind = "sqlite"
            self.location = text
        else:
            raise SessionError(
                "invalid_argument",
                "the target must be a SQLite database (.sqlite, .db, .sqlite3) or a postgresql:// URL",
                path=text,
            )

    @property
    def display(self) -> str:
        return redact(self.location)

    def check(self) -> None:
        """Fail now, once, if the target cannot be reached (server down, login refused, no
        such database, not a sessiontree database) rather than once per file."""
        if self.kind == "postgres":
            PostgresStorage.list_sessions(self.location)
        elif os.path.exists(self.location):
            try:
                SqliteStorage.list_sessions(self.location)
            except SessionError as exc:
                # An empty file or a database with no tables yet (`touch`, a creator killed
                # before its schema): the first session imported writes the schema.
                if exc.code != "not_found":
                    raise
        else:  # a database to create: a file made and removed where it will be
            directory = os.path.dirname(os.path.abspath(self.location))
            if not os.path.isdir(directory):  # a typo in the path would make a tree of directories
                problem = "is not a directory" if os.path.exists(directory) else "does not exist"
                raise SessionError(
                    "storage", f"cannot create the database: {directory} {problem}", path=self.location
                )
            try:
                fd, probe = tempfile.mkstemp(dir=directory, prefix=".sessiontree-probe-")
                os.close(fd)
                os.unlink(probe)
            except OSError as exc:
                raise SessionError(
                    "storage", f"cannot create the database here: {exc.strerror or exc}", path=self.location
                ) from None

    def open_session(self, header: SessionHeader) -> tuple[SessionStorage, bool]:
        """The target's session with the header's id, created (and True) when it has none."""
        sid = header.id
        try:
            if self.kind == "postgres":
                return PostgresStorage.open(self.location, sid), False
            if os.path.exists(self.location):
                return SqliteStorage.open(self.location, sid), False
        except SessionError as exc:
            if exc.code != "not_found":
                raise
        if self.kind == "postgres":
            return PostgresStorage.create(self.location, header=header), True
        return SqliteStorage.create(self.location, header=header), True


# --- importing ----------------------------------------------------------------------------------


def import_sessions(
    sources: Sequence[str | os.PathLike[str]],
    target: str | os.PathLike[str] | Target,
    *,
    progress: ProgressCallback | None = None,
    on_file: Callable[[FileResult], None] | None = None,
) -> list[FileResult]:
    """Import every session file named by `sources` (files, directories) into `target`. A
    file that fails does not stop the others; `on_file` hears each result as it is known.
    Raises `SessionError` only for a bad target or a source that does not exist."""
    where = target if isinstance(target, Target) else Target(target)
    where.check()
    paths = find_sources(sources)
    results = []
    for number, path in enumerate(paths, 1):
        result = import_file(path, where, file_number=number, files=len(paths), progress=progress)
        results.append(result)
        if on_file is not None:
            on_file(result)
    return results


def import_file(
    path: str | os.PathLike[str],
    target: str | os.PathLike[str] | Target,
    *,
    file_number: int = 1,
    files: int = 1,
    progress: ProgressCallback | None = None,
) -> FileResult:
    """Import one session file (see the module docstring); never raises `SessionError`: a
    failure is the result's status and message."""
    where = target if isinstance(target, Target) else Target(target)
    name = os.fspath(path)
    result = FileResult(name)

    def tell(done: int, total: int) -> None:
        if progress is not None:
            progress(ImportProgress(name, file_number, files, done, total))

    try:
        source = _Source(name)
    except SessionError as exc:
        result.message = exc.detail
        return result
    created = False
    try:
        result.session_id = source.header.id
        for d in source.diagnostics:
            if d.code == "torn_tail":
                result.problems.append(Problem(name, d.line, _PENDING, "pending"))
            elif d.code in ("torn_continued", "invalid_utf8"):  # read, and imported (QA: "skipped")
                text = d.message.removeprefix(f"line {d.line} ") if d.line is not None else d.message
                result.problems.append(Problem(name, d.line, f"note: the line {text}", "noted"))
            elif d.code == "duplicate_id" and source.indexed:
                # the file's index left the earlier line out (`JsonlStorage._drop_superseded`)
                said = f"skipped, entry id {d.entry_id!r} is used again further down, and the later"
                result.problems.append(Problem(name, d.line, said + " entry wins (as the file is read)"))
            elif d.code not in _STRUCTURAL and d.severity in ("error", "warning"):
                text = d.message.removeprefix(f"line {d.line} ") if d.line is not None else d.message
                result.problems.append(Problem(name, d.line, f"skipped, the line {text}"))
        storage, created = where.open_session(source.header)
        try:
            _copy(source, storage, result, tell)
            result.status = "new" if created else ("appended" if result.added else "unchanged")
        finally:
            result.total = storage.entry_count()
            storage.close()
    except _Diverged as exc:
        result.status = "refused"
        # Either side may have moved on: a move written to the database's copy diverges it
        # from a file that only grew (QA), which "the file changed" blamed on the file.
        # Or two files share a session id (copies, generated files): the first one imported
        # is the database's copy, and nothing says which file that was.
        result.message = (
            f"{exc} (the database's copy of session {source.header.id} differs from this file:"
            " one of them changed since the import, or another file with the same session id"
            " was imported first; nothing was written for it)"
        )
    except SessionError as exc:
        result.status = "failed"
        result.message = exc.detail
        if result.added:  # earlier batches were committed: "nothing was added" is of this one
            result.message = result.message.replace("nothing was added", "its batch was not added")
            result.message += (
                f"; {counted(result.added, 'entry', 'entries')} went in before it: importing again"
                " adds the rest"
            )
        elif created:  # its row was committed before the entries, whose commit failed
            result.message += f"; session {source.header.id} was created empty: importing again fills it"
    finally:
        source.close()
    result.problems.sort(key=lambda p: p.line or 0)
    return result


def _copy(
    source: _Source, storage: SessionStorage, result: FileResult, tell: Callable[[int, int], None]
) -> None:
    existing = storage.entry_count()
    if existing and storage.header.cwd != source.header.cwd:
        raise _Diverged(
            f"session {source.header.id} in the target has cwd {storage.header.cwd!r},"
            f" the file {source.header.cwd!r}"
        )
    theirs = storage.iter_entries()
    compared = 0
    known: set[str] = set()
    reported = {p.line for p in result.problems}
    batch: list[Entry] = []

    def flush() -> None:
        if batch:
            storage.append(batch)
            result.added += len(batch)
            batch.clear()

    done = 0
    held: list[str] = []  # the ids of the entries `_parents_first` held back
    looped: set[str] = set()
    for line, entry in _parents_first(source.entries(result.problems), source.has_id, held, looped):
        done += 1
        if done % 1000 == 0:
            tell(done, source.count)
        original = entry.to_dict()
        data, note, kind = _admit(original, known, storage, looped=entry.id in looped)
        if note is not None and line not in reported:
            result.problems.append(Problem(source.path, line, note, kind))
        if data is None:
            continue
        if data is not original:  # rooted or mended: compared as written on a later import
            entry = entry_from_dict(data)
        known.add(entry.id)
        if compared < existing:
            mine = next(theirs, None)
            # Entries written in the database after an import (a move, a summary, a label or a
            # name made in the app on the imported copy) sit between the file's: passed over.
            while mine is not None and mine.id != entry.id and mine.type in DATABASE_SIDE:
                compared += 1
                mine = next(theirs, None)
            if mine is not None:
                if mine != entry:
                    at = f"line {line}" if line is not None else f"entry #{compared + 1}"
                    said = (
                        f"entry {entry.id!r} is not the one imported with that id (#{compared + 1})"
                        if mine.id == entry.id
                        else f"entry {entry.id!r} is not what was imported there (entry {mine.id!r},"
                        f" #{compared + 1})"
                    )
                    raise _Diverged(f"{at}: {said}")
                compared += 1
                continue
            compared = existing  # the database's own entries came last: the rest of the file is new
        # A move or a compaction starts its own batch: SQLite works out what they change from
        # the tree as committed, which must already hold the entries they refer to.
        if len(batch) >= BATCH or (batch and entry.type in ("leaf", "compaction")):
            flush()
        batch.append(entry)
    flush()
    tell(done, source.count)
    if held and result.added:
        _keep_the_files_leaf(source, storage, result)
    # what is left in the database after the file's entries may only be the database's own
    if compared < existing and any(mine.type not in DATABASE_SIDE for mine in theirs):
        raise _Diverged(
            f"the target's session has {existing} entries, but the file gives only {compared} of them"
        )


def _keep_the_files_leaf(source: _Source, storage: SessionStorage, result: FileResult) -> None:
    """Entries held back until their parents came went in after entries that follow them in
    the file: the database's leaf, its last entry, was then another than the file's (its last
    line), and a session resumed from the copy went on from another branch (QA). A move of the
    leaf to the file's leaf is written, as the app writes one."""
    wanted = source.leaf_id
    if wanted is None or wanted == storage.leaf_id or not storage.has_id(wanted):
        return
    move = entry_from_dict(
        {
            "type": "leaf",
            "id": storage.new_entry_id(),
            "parentId": storage.leaf_id,
            "timestamp": iso_now(),
            "targetId": wanted,
        }
    )
    storage.append([move])
    result.problems.append(
        Problem(
            source.path,
            None,
            f"entries written above their parents went in after them; a move of the leaf to {wanted!r},"
            " the file's leaf, was written after them",
            "noted",
        )
    )


def _parents_first(
    entries: Iterator[tuple[int | None, Entry]],
    in_file: Callable[[str], bool],
    held: list[str],
    looped: set[str],
) -> Iterator[tuple[int | None, Entry]]:
    """The file's entries, each one whose parent comes further down held back until that
    parent has been given. The file is read with such a child under its parent (as Pi reads
    it); imported in file order, it was cut loose as a root, and the model's context with it
    (QA). What still waits at the end is in a loop of parents, or under one. A function of the
    file's bytes, as every import must see the same sequence.
    `held` gets the id of each entry held back, `looped` the id of each one given as a root
    although its parent is in the file: their parents make a loop."""
    given: set[str] = set()
    waiting: dict[str, list[tuple[int | None, Entry]]] = {}
    in_order: list[tuple[int | None, Entry]] = []  # what was held back, in file order
    for line, entry in entries:
        parent = entry.parent_id
        if parent is not None and parent not in given and in_file(parent):
            waiting.setdefault(parent, []).append((line, entry))
            held.append(entry.id)
            in_order.append((line, entry))
            continue
        ready = [(line, entry)]
        while ready:
            item = ready.pop(0)
            given.add(item[1].id)
            yield item
            ready.extend(waiting.pop(item[1].id, ()))
    # Loops: each given in file order, as a root, then what waits for it, so the rest of the
    # loop goes in under its parents (given by parent, a child came before its parent and was
    # cut loose as a root too: QA).
    out: set[int] = set()
    for first in in_order:
        if first[1].id in given or not waiting:
            continue
        ready = [first]
        while ready:
            item = ready.pop(0)
            if id(item[1]) in out:
                continue
            out.add(id(item[1]))
            given.add(item[1].id)
            if item is first and in_file(first[1].parent_id or ""):
                looped.add(first[1].id)
            yield item
            ready.extend(waiting.pop(item[1].id, ()))


def _admit(
    data: dict, known: set[str], storage: SessionStorage, *, looped: bool = False
) -> tuple[dict | None, str | None, ProblemKind]:
    """What to write for one entry of the file (None: skip it), what to tell the user, and
    which kind of problem that is.

    An entry whose parent was not imported (a damaged line above it) is written as a root —
    how the browser and Pi show it — rather than skipped, which would drop its whole subtree:
    one damaged line costs that line only. So is a label or a name SQLite cannot store (a lone
    surrogate: half of a character cut in two), with U+FFFD in place of the half, and an entry
    holding a number past a double's range, with null in its place (as `export` and `fork`
    write it, and Pi's `JSON.stringify`): refused, it left the session created empty."""
    eid = data["id"]
    if eid in known:
        return None, f"skipped, entry id {eid!r} is used again", "skipped"
    note = None
    kind: ProblemKind = "rooted"
    parent = data["parentId"]
    if parent is not None and parent not in known:
        data = {**data, "parentId": None}
        note = (
            f"entry {eid!r} names itself as parent; imported as a root"
            if parent == eid
            else f"entry {eid!r} hangs off {parent!r}, which is below it (their parents make a loop,"
            " cut here as the file is read); imported as a root"
            if looped
            else f"entry {eid!r} hangs off {parent!r}, which is not in the import (a damaged or"
            " missing line); imported as a root"
        )
    if data["type"] == "leaf":
        target = data.get("targetId")
        if target is not None and target not in known:
            return (
                None,
                f"skipped, leaf entry {eid!r} moves to {target!r}, which is not in the import",
                "skipped",
            )
    refusal = storage.refusal(data)
    key = {"label": "label", "session_info": "name"}.get(data["type"])
    if refusal is not None and key is not None and isinstance(data.get(key), str):
        mended = {**data, key: LONE_SURROGATE.sub("\ufffd", data[key])}
        if mended[key] != data[key] and storage.refusal(mended) is None:
            data, refusal, kind = mended, None, "mended"
            broken = f"{key} has half of a character (a lone surrogate), written as U+FFFD"
            note = f"{note}; its {broken}" if note else f"entry {eid!r}: its {broken}"
    if refusal is not None:
        return None, f"skipped, entry {eid!r} {refusal}", "skipped"
    where = non_finite(data)
    if where is not None:  # a number past a double's range (1e400): what JSON.stringify writes
        data, kind = nulled_non_finite(data), "mended"
        broken = f"{where} is a number too large to hold (read as infinite), written as null as Pi writes it"
        note = f"{note}; its {broken}" if note else f"entry {eid!r}: its {broken}"
    try:
        encode_line(data)
    except (TypeError, ValueError) as exc:
        return None, f"skipped, entry {eid!r} cannot be written as JSON ({exc})", "skipped"
    return data, note, kind

"""The front door: session addresses, opening and creating sessions, Pi's directory layout.

The CLI and the browser open sessions only through this module and then talk to `Session`;
neither constructs a storage itself. An *address* names one session:

- `path/to/file.jsonl`: a Pi session file;
- `path/to/db.sqlite#SESSION_ID` (also `.db`, `.sqlite3`): one session of a SQLite database;
  without `#SESSION_ID`, the database's only session (a database of several says to add one);
- `postgresql://user@host/db#SESSION_ID` (also `postgres://`): one session of a PostgreSQL
  database. The session id is required there: a shared database holds everyone's sessions, so
  "the newest" is rarely the one meant.

Session ids may themselves contain `#`: an address is split at the first `#` after the
database path (for a URL: its first `#`), never at a later one.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from .model.errors import SessionError
from .model.ids import iso_now, session_id_or_new
from .session import Session
from .storage.dbfiles import is_sqlite
from .storage.jsonl import JsonlStorage, Progress
from .storage.lock import ADVICE
from .storage.postgres.connection import is_postgres_url, redact

T = TypeVar("T")  # a storage `_by_id_or_prefix` opens
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
DEFAULT_SESSIONS_DIR = Path.home() / ".pi" / "agent" / "sessions"

StoreKind = Literal["jsonl", "sqlite", "postgres"]


@dataclass(frozen=True, slots=True)
class Address:
    """Where one session lives: the store kind, its location (a path or a connection URL), and
    for stores that hold many sessions, which one (None: not given, which opens a SQLite
    database's only session)."""

    kind: StoreKind
    location: str
    session_id: str | None = None

    def __str__(self) -> str:
        return self.location if self.session_id is None else f"{self.location}#{self.session_id}"

    def display(self) -> str:
        """The address for messages: a URL's password is never shown."""
        return redact(str(self))

    def __repr__(self) -> str:  # what a log or a traceback shows: without the password
        return f"Address({self.kind!r}, {redact(self.location)!r}, {self.session_id!r})"


def parse_address(target: str | os.PathLike[str]) -> Address:
    """Read an address (see the module docstring). A path that exists as written wins over any
    reading of a `#` in it, so a file named `a#b.jsonl` still opens."""
    if not isinstance(target, (str, os.PathLike)):  # os.fspath's own TypeError named no argument
        raise SessionError(
            "invalid_argument", f"a session address is a path or text, not {type(target).__name__}"
        )
    text = os.fspath(target)
    if not isinstance(text, str):  # a path of bytes
        raise SessionError("invalid_argument", "a session address is a path or text, not bytes")
    if is_postgres_url(text):
        location, _, session_id = text.partition("#")
        if "@" in session_id and "@" not in location.partition("://")[2]:  # a `#` in the password
            raise SessionError(
                "invalid_argument",
                "the URL's password holds a '#', which starts the session id: write it as %23",
                path=text,
            )
        scheme, colon, rest = location.partition(":")  # libpq knows `postgresql:` in lower case only
        return Address("postgres", scheme.lower() + colon + rest, session_id or None)
    if os.path.lexists(text):  # a database by its suffix, or else by its first bytes
        return Address("sqlite" if text.endswith(SQLITE_SUFFIXES) or is_sqlite(text) else "jsonl", text)
    for suffix in SQLITE_SUFFIXES:
        cut = text.find(suffix + "#")
        if cut >= 0:
            location = text[: cut + len(suffix)]
            return Address("sqlite", location, text[cut + len(suffix) + 1 :] or None)
    if text.endswith(SQLITE_SUFFIXES):
        return Address("sqlite", text)
    location, hashed, session_id = text.partition("#")
    if hashed and is_sqlite(location):  # a database under another name: `team.data#ID`
        return Address("sqlite", location, session_id or None)
    return Address("jsonl", text)


def open_session(
    target: str | os.PathLike[str] | Address,
    *,
    read_only: bool = False,
    session_id: str | None = None,
    durable: bool = False,
    progress: Progress | None = None,
    verify: str = "now",
    lock: str = "open",
) -> Session:
    """Open the session at an address (`file.jsonl`, `db.sqlite#<id>`; `session_id=` overrides
    the address's id). Writers take the single-writer lock; `locked` if another process holds
    it (see `open_or_read_only` for the browser's fallback). `lock="write"`: refused the same
    way, but the lock is taken for each write only, and a refusal then turns the session
    read-only (what the browser asks for: a viewer never keeps a writer out)."""
    if verify not in ("now", "later"):
        raise SessionError("invalid_argument", f"verify is 'now' or 'later', not {verify!r}")
    if lock not in ("open", "write"):
        raise SessionError("invalid_argument", f"lock is 'open' or 'write', not {lock!r}")
    address = target if isinstance(target, Address) else parse_address(target)
    if address.kind == "postgres":
        sid = session_id or address.session_id
        from .storage.postgres import PostgresStorage  # loaded only for that kind of address

        if sid is None:
            sessions = PostgresStorage.list_sessions(address.location)
            raise SessionError("invalid_argument", _which_session(sessions), path=redact(address.location))
        url = address.location
        return Session(
            _by_id_or_prefix(
                lambda i: PostgresStorage.open(url, i, read_only=read_only, durable=durable, lock_at=lock),
                lambda: PostgresStorage.list_sessions(url),
                sid,
                redact(url),
            )
        )
    if address.kind == "sqlite":
        from .storage.sqlite import SqliteStorage  # loaded only for that kind of address

        db = address.location
        sid = session_id or address.session_id
        if sid is None:  # its only session; of several, the user says which
            sessions = SqliteStorage.list_sessions(db)
            if len(sessions) != 1:
                raise SessionError("invalid_argument", _which_session(sessions), path=db)
            sid = sessions[0]["id"]
        return Session(
            _by_id_or_prefix(
                lambda i: SqliteStorage.open(db, i, read_only=read_only, durable=durable, lock_at=lock),
                lambda: SqliteStorage.list_sessions(db),
                sid,
                db,
            )
        )
    _check_no_hash_on_a_file(address.location)
    _check_not_a_url(address.location)
    return Session(
        JsonlStorage.open(
            address.location,
            read_only=read_only,
            durable=durable,
            progress=progress,
            verify=verify,
            lock_at=lock,
        )
    )


def is_one_of(path: str | os.PathLike[str], files: Collection[str]) -> bool:
    """Whether `path` is one of `files` (a session's, `Session.files`), by device and inode: a
    symlink or another spelling of the name counts too."""
    for other in files:
        with contextlib.suppress(OSError):
            if os.path.samefile(path, other):
                return True
    return False


def _check_no_hash_on_a_file(path: str) -> None:
    """`file.jsonl#ID` reads as a file of that name; when only `file.jsonl` exists, say that
    `#ID` picks a session in a database, not "no such session file" of a file the user sees."""
    location, hashed, _ = path.partition("#")
    if hashed and not os.path.lexists(path) and os.path.isfile(location):
        raise SessionError(
            "invalid_argument",
            f"{location} is a file, not a database: `#` picks a session only in a SQLite or"
            f" PostgreSQL database; open {location} itself",
            path=path,
        )


_URL_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")


def _check_not_a_url(path: str, *, creating: bool = False) -> None:
    """`postgresq://…`, `pgsql://…` or `postgresql+psycopg://…` read as file names: say what
    the database URLs look like, rather than "no such session file" (or, for a new session,
    rather than making folders named after the URL)."""
    if _URL_LIKE.match(path) and not os.path.lexists(path):
        raise SessionError(
            "invalid_argument" if creating else "not_found",
            f"{'' if creating else 'no such session file, and '}not a PostgreSQL URL: those start with"
            " postgresql:// or postgres://",
            path=path,
        )


def _by_id_or_prefix(
    open_one: Callable[[str], T], list_all: Callable[[], list[dict[str, Any]]], sid: str, where: str
) -> T:
    """`open_one(sid)`, or, when the database has no session `sid`, the one session whose id
    starts with it (as entry ids are taken by their start); else `not_found` naming a few."""
    try:
        return open_one(sid)
    except SessionError as exc:
        if exc.code != "not_found":
            raise
        ids = [s["id"] for s in list_all()]  # a missing database or none at all says so here
    folded = sid.lower()
    hits = [i for i in ids if i.lower().startswith(folded)]
    if len(hits) == 1:
        return open_one(hits[0])
    if hits:  # as an entry id's start that names several: the caller must say more
        raise SessionError(
            "invalid_argument", f"{sid!r} starts {len(hits)} sessions' ids ({_few(hits)})", path=where
        )
    some = f"the last active: {_few(ids)}" if ids else "it holds none"
    raise SessionError("not_found", f"no session {sid!r} in the database ({some})", path=where)


def _few(ids: list[str]) -> str:
    """The first three of `ids`, and how many more there are."""
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def _which_session(sessions: list[dict[str, Any]]) -> str:
    """The message for a database's address without `#SESSION_ID`, naming a few sessions."""
    if not sessions:
        return "the address names no session (add #SESSION_ID), and the database holds none"
    some = _few([s["id"] for s in sessions])
    return f"the address names no session: add #SESSION_ID (the last active: {some})"


def list_sessions(target: str | os.PathLike[str] | Address) -> list[dict[str, Any]]:
    """The sessions of a database (SQLite path or PostgreSQL URL), the last active first: id,
    created_at, last_active, cwd, name, entry_count, first_message."""
    address = target if isinstance(target, Address) else parse_address(target)
    if address.kind == "postgres":
        from .storage.postgres import PostgresStorage  # loaded only for that kind of address

        return PostgresStorage.list_sessions(address.location)
    if address.kind == "sqlite":
        from .storage.sqlite import SqliteStorage  # loaded only for that kind of address

        return SqliteStorage.list_sessions(address.location)
    raise SessionError("invalid_argument", "a session file holds one session, not a list", path=str(address))


def open_or_read_only(
    target: str | os.PathLike[str] | Address,
    *,
    progress: Progress | None = None,
    verify: str = "now",
    lock: str = "open",
) -> Session:
    """Open for writing when possible; when another process holds the writer lock, open
    read-only instead, with `read_only_reason` naming the holder. Other errors are raised.
    `lock` as for `open_session`."""
    try:
        return open_session(target, progress=progress, verify=verify, lock=lock)
    except SessionError as exc:
        if exc.code != "locked":
            raise
        session = open_session(target, read_only=True, progress=progress, verify=verify)
        # the refusal's advice ("open it read-only, or wait") is what was just done
        detail = exc.detail.removesuffix(ADVICE)
        session.storage.mark_read_only(
            f"{detail}. Opened read-only; once it quits, opening it again opens it for writing"
        )
        session.storage.locked_out = True
        return session


def open_to_write(target: str | os.PathLike[str] | Address) -> Session:
    """`open_session` for a command that must write. Refused because another process writes the
    session (often the app, which holds the lock while browsing), the advice is to wait: "open
    it read-only" is no way to write (QA)."""
    try:
        return open_session(target)
    except SessionError as exc:
        if exc.code != "locked" or not exc.detail.endswith(ADVICE):
            raise
        detail = exc.detail.removesuffix(ADVICE)
        raise SessionError(
            "locked", f"{detail}; try again once that process has closed it", path=exc.path
        ) from None


def upgrade_session(target: str | os.PathLike[str], notes: list[str] | None = None) -> str | None:
    """Rewrite a v1/v2 session file as v3 atomically, keeping the original as `<file>.bak`.
    Returns the backup's path, or None when the file already is v3; `notes` gets what the
    caller should say besides (an incomplete last line left out, kept in the backup)."""
    address = parse_address(target)
    if address.kind != "jsonl":
        raise SessionError(
            "invalid_argument", "only JSONL session files have older formats", path=address.display()
        )
    return JsonlStorage.upgrade(address.location, notes)


def encode_cwd(cwd: str) -> str:
    """Pi's directory name for a working directory: strip one leading separator, replace
    `/`, `\\` and `:` with `-`, wrap in `--`."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for ch in "/\\:":
        trimmed = trimmed.replace(ch, "-")
    return f"--{trimmed}--"


def session_file_name(timestamp: str, session_id: str) -> str:
    return f"{timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def create_session(
    cwd: str,
    *,
    root: str | os.PathLike[str] | None = None,
    path: str | os.PathLike[str] | None = None,
    session_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    parent_session: str | None = None,
) -> Session:
    """A new session. By default a JSONL file where Pi would put it
    (`<root>/--cwd--/<ts>_<id>.jsonl`, the timestamp the header's); a `session_id` that would not
    stay one file name there (a `/`, `..`, a control character) is refused. `path` is an address
    as `open_session` reads them: a file (any name ending in `.jsonl` is one), or a new session
    in a SQLite or PostgreSQL database (`team.sqlite#ID`, `postgresql://…#ID`; the id from the
    address or `session_id`, else a new one), never a file named after a database's address
    (for a URL, folders with its password in their names)."""
    if not isinstance(cwd, str):
        raise SessionError("invalid_argument", f"cwd is text (a directory), not {type(cwd).__name__}")
    now = iso_now()
    if path is not None:
        # a name ending in .jsonl is a session file, whatever `#` it holds (`a.db#b.jsonl`)
        address = Address("jsonl", os.fspath(path)) if str(path).endswith(".jsonl") else parse_address(path)
        if address.kind != "jsonl":
            if session_id is not None and address.session_id not in (None, session_id):
                raise SessionError(
                    "invalid_argument",
                    f"two session ids: {address.session_id!r} in the address and {session_id!r}",
                    path=address.display(),
                )
            sid = session_id if session_id is not None else address.session_id
            # each loaded only for that kind of address
            if address.kind == "postgres":
                from .storage.postgres import PostgresStorage as Store
            else:
                from .storage.sqlite import SqliteStorage as Store  # type: ignore[assignment]
            return Session(
                Store.create(
                    address.location,
                    cwd=cwd,
                    session_id=sid,
                    metadata=metadata,
                    parent_session=parent_session,
                )
            )
        _check_no_hash_on_a_file(address.location)
        _check_not_a_url(address.location, creating=True)
    else:
        session_id = session_id_or_new(session_id)
        if session_id in (".", "..") or not _FILE_NAME_PART.fullmatch(session_id):
            raise SessionError(
                "invalid_argument",
                f"a session id names the file: {session_id!r} has a path separator, a control"
                " character, or is '.' or '..'",
            )
        base = Path(root) if root is not None else DEFAULT_SESSIONS_DIR
        path = base / encode_cwd(cwd) / session_file_name(now, session_id)
    return Session(
        JsonlStorage.create(
            path,
            cwd=cwd,
            session_id=session_id,
            metadata=metadata,
            parent_session=parent_session,
            timestamp=now,
        )
    )


_FILE_NAME_PART = re.compile(r"[^\x00-\x1f\x7f/\\]+")  # no separator or control character

"""Opening sessions by path, and Pi's sessions directory layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .model.errors import SessionError
from .model.ids import iso_now, new_session_id
from .session import Session
from .storage.jsonl import JsonlStorage, Progress
from .storage.sqlite import SqliteStorage

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
DEFAULT_SESSIONS_DIR = Path.home() / ".pi" / "agent" / "sessions"


def is_sqlite_path(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).split("#", 1)[0].endswith(SQLITE_SUFFIXES)


def split_sqlite_target(target: str) -> tuple[str, str | None]:
    """`db.sqlite#session-id` → (db path, session id)."""
    if "#" in target:
        db, sid = target.rsplit("#", 1)
        return db, sid or None
    return target, None


def open_session(
    target: str | os.PathLike[str],
    *,
    read_only: bool = False,
    session_id: str | None = None,
    durable: bool = False,
    progress: Progress | None = None,
    verify: str = "now",
) -> Session:
    """Open a JSONL file, or a session in a SQLite database (`db.sqlite#<id>` or `session_id=`;
    with neither, the database's only/newest session)."""
    target = os.fspath(target)
    if is_sqlite_path(target):
        db, sid = split_sqlite_target(target)
        sid = session_id or sid
        if sid is None:
            sessions = SqliteStorage.list_sessions(db)
            if not sessions:
                raise SessionError("not_found", "the database holds no sessions", path=db)
            sid = sessions[0]["id"]
        return Session(SqliteStorage.open(db, sid, read_only=read_only, durable=durable))
    return Session(
        JsonlStorage.open(target, read_only=read_only, durable=durable, progress=progress, verify=verify)
    )


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
) -> Session:
    """A new JSONL session, by default where Pi would put it (`<root>/--cwd--/<ts>_<id>.jsonl`)."""
    if path is None:
        session_id = session_id or new_session_id()
        base = Path(root) if root is not None else DEFAULT_SESSIONS_DIR
        path = base / encode_cwd(cwd) / session_file_name(iso_now(), session_id)
    return Session(JsonlStorage.create(path, cwd=cwd, session_id=session_id, metadata=metadata))

"""Finding and describing session files in a directory (the session picker's data)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .model.errors import SessionError
from .model.messages import content_text
from .opening import open_session
from .storage.index import USER


@dataclass(slots=True)
class SessionListing:
    path: Path
    modified: float
    session_id: str = ""
    cwd: str = ""
    name: str | None = None
    first_message: str = ""
    entry_count: int = 0
    error: str | None = None

    @property
    def title(self) -> str:
        return self.name or self.first_message or self.path.name


def find_session_files(directory: str | os.PathLike[str]) -> list[Path]:
    """`*.jsonl` files in `directory` and its direct sub-directories (Pi's layout), newest
    modification first."""
    root = Path(directory)
    found: list[Path] = []
    for pattern in ("*.jsonl", "*/*.jsonl"):
        found.extend(p for p in root.glob(pattern) if p.is_file())
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def describe(path: Path) -> SessionListing:
    """Header, name, first user message and entry count of one file; damage becomes `error`."""
    listing = SessionListing(path=path, modified=path.stat().st_mtime)
    try:
        with open_session(path, read_only=True) as session:
            listing.session_id = session.session_id
            listing.cwd = session.header.cwd
            listing.name = session.session_name
            listing.entry_count = session.entry_count()
            tree = session.tree
            first_user = next((i for i in range(len(tree)) if tree.role[i] == USER), None)
            if first_user is not None:
                entry = session.entry_at(first_user)
                listing.first_message = content_text(entry.get("message", {}).get("content"))
            problems = [d for d in session.diagnostics if d.severity == "error"]
            if problems:
                listing.error = f"{len(problems)} problem(s)"
    except SessionError as exc:
        listing.error = exc.detail
    except OSError as exc:
        listing.error = str(exc)
    return listing

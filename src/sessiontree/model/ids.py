"""Entry ids and timestamps as Pi writes them."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

_MAX_SHORT_TRIES = 100


def new_entry_id(exists: Callable[[str], bool]) -> str:
    """8 lowercase hex chars from a CSPRNG, unique per `exists`; a full UUID after 100
    collisions — the rule of Pi's `generateId` in `packages/coding-agent/src/core/session-manager.ts`,
    so our ids look like Pi's."""
    for _ in range(_MAX_SHORT_TRIES):
        candidate = secrets.token_hex(4)
        if not exists(candidate):
            return candidate
    while True:
        candidate = str(uuid.uuid4())
        if not exists(candidate):
            return candidate


def new_session_id() -> str:
    return str(uuid.uuid4())


def session_id_or_new(session_id: str | None) -> str:
    """`session_id` as given, a new one for None. An empty or non-text id is refused: `""` was
    replaced by a random id without a word."""
    if session_id is None:
        return new_session_id()
    if not isinstance(session_id, str) or not session_id:
        from .errors import SessionError

        raise SessionError("invalid_argument", f"a session id is non-empty text, not {session_id!r}")
    return session_id


def iso_now() -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2025-01-01T10:00:00.000Z."""
    return format_iso(datetime.now(UTC))


def format_iso(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_to_ms(value: str) -> int:
    """Unix milliseconds of an ISO timestamp; 0 when it cannot be parsed (display-only use)."""
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, AttributeError):
        return 0


def now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)

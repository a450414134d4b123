"""One writer per session: a PostgreSQL session-level advisory lock.

The key is a 64-bit hash of the session id, so writers of different sessions never wait on each
other, and the lock belongs to the writer's connection: it goes away with the connection when
the writer closes, crashes or is killed, with nothing to clean up. Readers take no lock, and
MVCC means they never block a writer (nor it them).

A refused writer names the holder from `pg_locks` joined to `pg_stat_activity`: the server
backend's pid, and the holder's application name, which sessiontree sets to `sessiontree[PID]`
with the client's own pid.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...model.errors import SessionError
from ..lock import ADVICE


def lock_key(session_id: str) -> int:
    """A signed 64-bit key (what `pg_try_advisory_lock(bigint)` takes) from the session id,
    prefixed so our keys are unlikely to meet another application's."""
    digest = hashlib.blake2b(
        b"sessiontree-session\x00" + session_id.encode("utf-8", "surrogatepass"), digest_size=8
    )
    return int.from_bytes(digest.digest(), "big", signed=True)


def try_lock(conn: Any, session_id: str, what: str) -> None:
    """Take the session's writer lock on `conn`, or raise `locked` naming the holder."""
    key = lock_key(session_id)
    if conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        return
    raise _refusal(conn, key, what)


def refuse_if_held(conn: Any, session_id: str, what: str) -> None:
    """Raise `try_lock`'s refusal when another connection holds the session's writer lock,
    without taking it: taken for an instant, it refused a writer opening at that instant."""
    if held(conn, session_id):
        raise _refusal(conn, lock_key(session_id), what)


def _refusal(conn: Any, key: int, what: str) -> SessionError:
    who = holder(conn, key)
    return SessionError("locked", f"{what} is open for writing in another process ({who}){ADVICE}")


def held(conn: Any, session_id: str) -> bool:
    """Whether some connection holds the session's writer lock (asked of `pg_locks`, which
    takes nothing)."""
    unsigned = lock_key(session_id) & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1",
        (unsigned >> 32, unsigned & 0xFFFF_FFFF),
    ).fetchone()
    return row is not None


def unlock(conn: Any, session_id: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(session_id),))


def holder(conn: Any, key: int) -> str:
    """Who holds the advisory lock `key`, as text for a message. A bigint key shows in
    `pg_locks` as classid = its high 32 bits, objid = its low 32 bits, objsubid = 1."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(
        "SELECT l.pid, a.application_name, a.client_addr::text, a.backend_start"
        " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::bigint::oid"
        " AND l.objid = %s::bigint::oid AND l.objsubid = 1",
        (unsigned >> 32, unsigned & 0xFFFF_FFFF),
    ).fetchone()
    if row is None:  # released in the meantime, or not visible to this role
        return "holder unknown"
    pid, app, addr, since = row
    parts = [f"server pid {pid}"]
    if app:
        parts.append(f"application_name {app!r}")
    if addr:
        parts.append(f"from {addr}")
    if since is not None:
        parts.append(f"connected since {since:%Y-%m-%d %H:%M:%S}")
    return ", ".join(parts)

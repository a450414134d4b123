"""Connections to PostgreSQL, and its errors as one-line `SessionError`s.

psycopg is an optional dependency (`pip install 'sessiontree[postgres]'`): it is imported the
first time a PostgreSQL address is opened, so nothing else pays for it or needs it installed.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from ...model.errors import ErrorCode, SessionError
from ...model.secrets import redact

if TYPE_CHECKING:
    import psycopg

URL_SCHEMES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT = 10  # seconds; an unreachable host should fail, not hang the command line


def is_postgres_url(text: str) -> bool:
    return text.lower().startswith(URL_SCHEMES)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise SessionError(
            "storage",
            "PostgreSQL support needs psycopg: pip install 'sessiontree[postgres]'",
        ) from None
    return psycopg


def connect(url: str, *, read_only: bool, durable: bool) -> psycopg.Connection[Any]:
    """An autocommit connection (transactions are explicit). The application name carries our
    pid unless the URL sets one: a refused writer reads it from `pg_stat_activity` to say which
    process holds the session. Without `durable`, commits do not wait for the WAL flush — the
    same trade as JSONL files without fsync: a server crash may lose the last moments, a client
    crash loses nothing."""
    check_password_spelling(url)
    psycopg = _psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        reason = _first_line(exc)
        if "percent-encoded" in reason:  # libpq quotes the token: a piece of the password
            reason = "a '%' that does not start an escape such as %40 (write a '%' in the password as %25)"
        raise SessionError("invalid_argument", f"not a usable PostgreSQL URL: {reason}") from None
    extra: dict[str, Any] = {}
    if "application_name" not in params:
        extra["application_name"] = f"sessiontree[{os.getpid()}]"
    if "connect_timeout" not in params:
        extra["connect_timeout"] = CONNECT_TIMEOUT
    try:
        conn = psycopg.connect(url, autocommit=True, **extra)
    except psycopg.Error as exc:
        raise connect_error(exc, url) from None
    try:
        conn.execute(f"SET synchronous_commit = {'on' if durable else 'off'}")
        if read_only:  # the server refuses writes too, not only this library
            conn.execute("SET default_transaction_read_only = on")
    except psycopg.Error as exc:
        conn.close()
        raise SessionError("storage", _first_line(exc), path=redact(url)) from None
    return conn


def check_password_spelling(url: str) -> None:
    """Refuse a URL whose password has a raw `@`, `/`, `?` or `#`: the driver would read the
    password's end as the host, the database or the options, and its messages would quote the
    pieces (generated passwords often hold a `/`). A run of digits after the `:` is a port."""
    rest = url.split("://", 1)[-1]
    authority = rest.split("/", 1)[0]
    if authority.count("@") > 1:
        raise SessionError(
            "invalid_argument",
            "the URL has more than one '@' before its host: write an '@' in the password as %40",
        )
    user, colon, password = rest[: rest.rfind("@")].partition(":") if "@" in rest else ("", "", "")
    reserved = colon and not any(c in user for c in "/?#") and any(c in password for c in "/?#")
    if reserved and not re.split(r"[/?#]", password, maxsplit=1)[0].isdigit():
        raise SessionError(
            "invalid_argument",
            "the URL's password holds a '/', '?' or '#': write them as %2F, %3F and %23",
        )


def connect_error(exc: Exception, url: str) -> SessionError:
    """What went wrong while connecting, in one line: unreachable server, refused login,
    missing database."""
    line = _first_line(exc)
    fatal = re.search(r"FATAL:\s+(.*)", line)
    code: ErrorCode = "storage"
    if fatal:
        reason = fatal.group(1).strip()
        if reason.startswith("database") and reason.endswith("does not exist"):
            code = "not_found"
        elif "authentication failed" in reason or "no pg_hba.conf entry" in reason:
            reason = f"the server refused the login: {reason}"
    else:
        reason = re.sub(r"^connection failed:\s*", "", line)
        reason = re.sub(
            r"^connection to server at (.*?) failed:\s*", r"cannot reach the server at \1: ", reason
        )
        if "Connection refused" in reason:
            reason += " (is it running, and on that port?)"
        elif "timeout expired" in reason:  # libpq does not say how long it waited
            reason += f" (no answer in {CONNECT_TIMEOUT} s: is the host right, and the port open?)"
        elif "no password supplied" in reason:  # the server answered: it wants a password
            reason = (
                "the server asks for a password and none was given: put it in the URL"
                " (postgresql://USER:PASSWORD@HOST/DB), in PGPASSWORD or in ~/.pgpass"
            )
    # unreachable, refused, timed out: the server may be back later (not so a refused login)
    return SessionError(code, redact(reason), path=redact(url), transient=not fatal)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return redact(text.splitlines()[0].strip() if text else type(exc).__name__)


def database_error(exc: Exception, doing: str, where: str | None) -> SessionError:
    """A failed statement as a one-line `SessionError` (`doing`: "write failed, nothing was
    added"), with the connection loss worded as such."""
    psycopg = _psycopg()
    if isinstance(exc, psycopg.OperationalError) and getattr(exc, "sqlstate", None) is None:
        return SessionError(
            "storage",
            f"{doing}: lost the connection to the server ({_first_line(exc)})",
            path=where,
            transient=True,
        )
    return SessionError("storage", f"{doing}: {_first_line(exc)}", path=where)

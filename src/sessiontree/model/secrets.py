"""Passwords in connection URLs, kept out of every message, title and location: a URL the user
typed with a password (`postgresql://me:secret@db/agents`) must never be printed back, also
when it is misspelt and taken for a file name (`postgresq://…`, `postgresql:/…`, `pgsql://…`)."""

from __future__ import annotations

import re

# `scheme:/` or `scheme://`, the user, then the password up to the last `@` of the URL: a
# password with a raw `@`, `/`, `?` or `#` (which should be `%40`, `%2F`, `%3F`, `%23`) is
# hidden whole, not cut there. An `@` later in the URL hides more than the password, never less.
_USERINFO_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*:/{1,2}[^:/@?#\[\]\s]*):\S*@")
_PARAM_PASSWORD = re.compile(r"(password=)[^&#\s]*", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with any password of a connection URL replaced by `***`."""
    return _PARAM_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1:***@", text))

"""Passwords of connection URLs never reach a message (`model/secrets.py`), and connection
failures say what to check."""

from __future__ import annotations

import pytest

from sessiontree import SessionError
from sessiontree.model.secrets import redact
from sessiontree.storage.postgres.connection import CONNECT_TIMEOUT, connect_error


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://me:pw@db/agents#s1", "postgresql://me:***@db/agents#s1"),
        ("postgresq://me:pw@db/x", "postgresq://me:***@db/x"),  # misspelt: taken for a file name
        ("postgresql:/me:pw@db/x", "postgresql:/me:***@db/x"),
        ("postgresql+psycopg://me:p@w@db/x", "postgresql+psycopg://me:***@db/x"),  # a raw @ in it
        (
            "see postgresql://db/x?password=pw&sslmode=require",
            "see postgresql://db/x?password=***&sslmode=require",
        ),
        ("/tmp/a:b@c.jsonl", "/tmp/a:b@c.jsonl"),  # a file name, not a URL
        ("mailto:me@example.org", "mailto:me@example.org"),
    ],
)
def test_redact(text, shown):
    assert redact(text) == shown


def test_a_session_error_never_holds_a_password():
    exc = SessionError("not_found", "cannot open pgsql://me:pw@db/x", path="pgsql://me:pw@db/x#s")
    assert "pw" not in str(exc) and "pw" not in (exc.path or "") and "pw" not in exc.detail


def test_a_connection_timeout_says_how_long_it_waited():
    exc = Exception(
        'connection failed: connection to server at "10.0.0.9", port 5432 failed: timeout expired'
    )
    said = str(connect_error(exc, "postgresql://me:pw@10.0.0.9/db"))
    assert f"no answer in {CONNECT_TIMEOUT} s" in said and "pw" not in said

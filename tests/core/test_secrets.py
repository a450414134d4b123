"""Passwords of connection URLs never reach a message (`model/secrets.py`), and connection
failures say what to check."""

from __future__ import annotations

import pytest

from sessiontree import SessionError, open_session
from sessiontree.model.secrets import redact
from sessiontree.opening import parse_address
from sessiontree.storage.postgres.connection import CONNECT_TIMEOUT, check_password_spelling, connect_error


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


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgresql://me:Sek/rIT@127.0.0.1:1/db#s", "%2F"),  # a generated password's `/`
        ("postgresql://me:Sek?rIT@127.0.0.1:1/db#s", "%2F"),
        ("postgresql://me:Sek#rIT@127.0.0.1:1/db", "%23"),  # `#` starts the session id
        ("postgresql://me:Sekr%zzIT@127.0.0.1:1/db#s", "%25"),  # the driver quoted the token
    ],
)
def test_a_password_with_characters_a_url_reserves_is_refused_unsaid(url, said):
    """Such a password was printed back: the masking stopped at the `/`, `?` or `#`, and the
    driver quoted a piece of it ("failed to resolve host 'me'" with the URL whole)."""
    with pytest.raises(SessionError) as raised:
        open_session(url)
    assert raised.value.code == "invalid_argument"
    assert said in str(raised.value)
    assert "Sek" not in str(raised.value) and "rIT" not in str(raised.value)
    assert "Sek" not in redact(f"sessiontree: {url}: failed")


def test_a_port_after_the_host_is_not_taken_for_a_password():
    check_password_spelling("postgresql://host:5432/db?user=a@b")
    check_password_spelling("postgresql://me:pw@host:5432/db?sslmode=require")


def test_an_address_repr_hides_the_password():
    assert "pw" not in repr(parse_address("postgresql://me:pw@db/x#s1"))

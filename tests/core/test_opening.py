"""The front door: addresses, read-only-if-locked, upgrade through the opening API."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, U
from sessiontree import Session, SessionError, SqliteStorage, open_session
from sessiontree.opening import Address, create_session, open_or_read_only, parse_address, upgrade_session


def test_plain_paths_are_jsonl(tmp_path: Path):
    assert parse_address("a/b.jsonl") == Address("jsonl", "a/b.jsonl")
    assert parse_address(tmp_path / "x.jsonl").kind == "jsonl"


def test_sqlite_addresses_split_at_the_first_hash_after_the_database():
    assert parse_address("db.sqlite#abc") == Address("sqlite", "db.sqlite", "abc")
    assert parse_address("dir/x.db#a#b") == Address("sqlite", "dir/x.db", "a#b")
    assert parse_address("x.sqlite3") == Address("sqlite", "x.sqlite3")
    assert parse_address("x.sqlite#") == Address("sqlite", "x.sqlite")
    assert str(Address("sqlite", "x.db", "a#b")) == "x.db#a#b"


def test_an_existing_path_wins_over_a_hash_in_it(tmp_path: Path):
    odd = tmp_path / "a.db#b.jsonl"
    create_session("/p", path=odd).close()
    assert parse_address(str(odd)) == Address("jsonl", str(odd))
    with open_session(str(odd)) as s:
        assert s.entry_count() == 0


def test_session_ids_with_a_hash_open_by_address(tmp_path: Path):
    db = tmp_path / "s.sqlite"
    with Session(SqliteStorage.create(db, cwd="/p", session_id="team#42")) as s:
        s.append_message(U("hello"))
    with open_session(f"{db}#team#42", read_only=True) as s:
        assert s.session_id == "team#42" and s.entry_count() == 1


def test_locked_session_opens_read_only_with_the_holder_named(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    with create_session("/p", path=path) as writer:
        writer.append_message(U("hi"))
        with pytest.raises(SessionError) as refused:
            open_session(path)
        assert refused.value.code == "locked"
        with open_or_read_only(path) as reader:
            assert reader.read_only and "pid" in (reader.read_only_reason or "")
            with pytest.raises(SessionError):
                reader.append_message(U("nope"))


def test_upgrade_through_the_front_door(tmp_path: Path):
    path = tmp_path / "old.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    with open_session(path, read_only=True) as s:
        assert s.format_version < 3
    backup = upgrade_session(path)
    assert backup is not None and Path(backup).exists()
    with open_session(path, read_only=True) as s:
        assert s.format_version == 3
    assert upgrade_session(path) is None
    with pytest.raises(SessionError):
        upgrade_session(tmp_path / "x.sqlite#id")


def test_postgres_urls_are_addresses():
    assert parse_address("postgresql://u@h/db#abc") == Address("postgres", "postgresql://u@h/db", "abc")
    assert parse_address("postgres://h:5433/db?sslmode=disable#a#b") == Address(
        "postgres", "postgres://h:5433/db?sslmode=disable", "a#b"
    )
    assert parse_address("postgresql://h/db") == Address("postgres", "postgresql://h/db")
    assert Address("postgres", "postgresql://u:secret@h/db", "x").display() == "postgresql://u:***@h/db#x"


def test_a_locked_postgres_session_opens_read_only_naming_the_holder(pg_url):
    from sessiontree import PostgresStorage

    with Session(PostgresStorage.create(pg_url, cwd="/p")) as writer:
        writer.append_message(U("hi"))
        with open_or_read_only(f"{pg_url}#{writer.session_id}") as reader:
            assert reader.read_only and "sessiontree[" in (reader.read_only_reason or "")
            assert reader.entry_count() == 1
            with pytest.raises(SessionError):
                reader.append_message(U("nope"))


def test_a_sqlite_database_under_another_name_opens_by_its_hash(tmp_path: Path):
    """A database is known by its first bytes, whatever its name: `team.data#ID` opens it."""
    db = tmp_path / "team.data"
    with Session(SqliteStorage.create(db, cwd="/p", session_id="s1")) as s:
        s.append_message(U("hello"))
    assert parse_address(f"{db}#s1") == Address("sqlite", str(db), "s1")
    with open_session(f"{db}#s1", read_only=True) as s:
        assert s.session_id == "s1" and s.entry_count() == 1
    notes = tmp_path / "notes.data"
    notes.write_text("not a database\n")
    assert parse_address(f"{notes}#s1") == Address("jsonl", f"{notes}#s1")


def test_a_hash_after_a_session_file_says_what_a_hash_is_for(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    create_session("/p", path=path).close()
    before = path.read_bytes()
    with pytest.raises(SessionError) as refused:
        open_session(f"{path}#abc")
    assert refused.value.code == "invalid_argument"
    assert "is a file, not a database" in str(refused.value) and "SQLite or PostgreSQL" in str(refused.value)
    assert path.read_bytes() == before
    with pytest.raises(SessionError) as missing:  # no file before the `#` either: as before
        open_session(f"{tmp_path / 'gone.jsonl'}#abc")
    assert missing.value.code == "not_found"

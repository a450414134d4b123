"""The front door: addresses, read-only-if-locked, upgrade through the opening API."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, U
from sessiontree import JsonlStorage, MemoryStorage, Session, SessionError, SqliteStorage, open_session
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


def test_a_database_under_another_name_opens_by_its_first_bytes(tmp_path: Path):
    """The README says a database is known by its suffix or else by its first bytes, and
    `#SESSION_ID` may be left out when it holds one session: `one.data` was read as a JSONL
    file ("the first line is not valid JSON")."""
    db = tmp_path / "one.data"
    with Session(SqliteStorage.create(db, cwd="/p", session_id="only")) as s:
        s.append_message(U("hi"))
    assert parse_address(db) == Address("sqlite", str(db))
    with open_session(db) as s:
        assert s.storage.session_id == "only" and s.entry_count() == 1


def test_create_session_names_its_file_after_its_header_and_refuses_ids_that_are_paths(tmp_path: Path):
    """The file name's timestamp and the header's differed by a millisecond now and then; an id
    with a `/` made a directory, `../..` pointed outside the sessions directory."""
    for _ in range(20):
        with create_session("/p", root=tmp_path) as s:
            stamp = s.storage.header.timestamp.replace(":", "-").replace(".", "-")
            assert Path(s.storage.path).name == f"{stamp}_{s.storage.header.id}.jsonl"
    for bad in ("a/b", "../../evil", "x\ny", "..", "nul\x00"):
        with pytest.raises(SessionError, match="a session id names the file") as info:
            create_session("/p", root=tmp_path, session_id=bad)
        assert info.value.code == "invalid_argument"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["--p--"]


def test_options_and_inputs_a_type_checker_lets_through_are_refused(tmp_path: Path):
    """`verify="bogus"` was taken silently; `append_active_tools_change("read")` stored the
    tools r, e, a, d (a str is a Sequence[str]); an id factory that repeats itself looped
    forever on the move that needs a fresh id."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        first = s.append_message(U("hi"))
        with pytest.raises(SessionError, match="active tool names are a list of names"):
            s.append_active_tools_change("read")
    with pytest.raises(SessionError, match="verify is 'now' or 'later'"):
        open_session(path, verify="bogus")
    with Session(MemoryStorage(cwd="/p"), id_factory=lambda: "fixed") as s:
        s.append_message(U("hi"))
        with pytest.raises(SessionError, match="keeps giving ids already in use"):
            s.move_to(s.leaf_id, "a summary")
    assert first


def test_a_value_of_the_wrong_type_is_refused_saying_so(tmp_path: Path):
    """A label given as a number failed with "'int' object has no attribute 'strip'", a name
    as None with a TypeError from `re`, a position past the end with an IndexError (and -1 was
    the last entry on JSONL but an error on SQLite), `limit=-1` silently gave nothing."""
    with Session(JsonlStorage.create(tmp_path / "s.jsonl", cwd="/p")) as s:
        first = s.append_message(U("hi"))
        for attempt, said in (
            (lambda: s.append_label(first, 5), "a label must be text or None, not 5"),
            (lambda: s.append_session_name(None), "a session name must be text, not None"),
            (lambda: s.resolve_id(None), "an entry id must be text, not None"),
            (lambda: s.get_entry([1]), r"an entry id must be text, not \[1\]"),
            (lambda: s.entry_at(999), "no entry at position 999 \\(the session has 1\\)"),
            (lambda: s.entry_at(-1), "no entry at position -1"),
            (lambda: s.tool_call_of(7), "no entry at position 7"),
            (lambda: s.tool_results_of(7), "no entry at position 7"),
            (lambda: s.build_context(limit="3"), "limit must be a whole number or None, not '3'"),
            (lambda: s.build_context(limit=-1), "limit cannot be negative"),
            (lambda: s.recent_leaf_moves(-1), "skip and count cannot be negative"),
            # these were `invalid_entry`, refused only as the entry was written
            (lambda: s.append_thinking_level_change(3), "a thinking level must be text, not 3"),
            (lambda: s.append_model_change("openai", None), "a model id must be text, not None"),
            (lambda: s.append_compaction("sum", None, "5"), "tokens before must be a number, not '5'"),
            (lambda: s.append_compaction(b"x", None, 5), "summary must be text, not b'x'"),
            (lambda: s.append_custom_entry(None), "a custom type must be text, not None"),
            (
                lambda: s.append_custom_message_entry("note", 3, True),
                "a custom message's 'content' is a string or a list of parts .*; it is an int",
            ),
            (lambda: s.append_custom_message_entry("note", "x", 1), "display must be True or False, not 1"),
            # a TypeError or ValueError from deep inside, `invalid_entry`, or written as given (QA)
            (lambda: s.append_message(None), "a message is a mapping with a string 'role', not None"),
            (lambda: s.append_active_tools_change(None), r"active tool names are a list of names \(text\)"),
            (lambda: s.append_active_tools_change([1, 2]), r"a list of names \(text\), not \[1, 2\]"),
            (lambda: s.append_compaction("s", None, 5, retained_tail="abc"), "a retained tail is a list"),
            (lambda: s.append_compaction("s", None, 5, usage=[1]), r"usage is a mapping or None, not \[1\]"),
            (lambda: s.append_compaction("s", None, 5, from_hook="yes"), "from_hook must be True or False"),
            (lambda: s.append_compaction("s", None, -5), "tokens before is a count, not -5"),
            (
                lambda: s.append_custom_message_entry("x", [1], True),
                "a custom message's 'content' is a string",
            ),
            (lambda: s.append_custom_entry(""), "a custom type cannot be empty"),
            (lambda: s.append_model_change("", "m"), "a provider cannot be empty"),
        ):
            with pytest.raises(SessionError, match=said) as info:
                attempt()
            assert info.value.code == "invalid_argument"
        assert s.entry_count() == 1 and s.entry_at(0).id == first


def test_the_start_of_several_session_ids_is_an_invalid_argument(tmp_path: Path):
    """As the start of several entry ids is: the caller must say more (it said `not_found`)."""
    db = tmp_path / "db.sqlite"
    for sid in ("alpha-1", "alpha-2"):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            s.append_message(U(sid))
    with pytest.raises(SessionError, match="starts 2 sessions' ids") as info:
        open_session(f"{db}#alpha")
    assert info.value.code == "invalid_argument"
    with pytest.raises(SessionError, match="no session 'beta'") as info:
        open_session(f"{db}#beta")
    assert info.value.code == "not_found"


@pytest.mark.parametrize("target", [42, None, b"s.jsonl", 1.5])
def test_an_address_of_the_wrong_type_is_said_as_such(target):
    """`open_session(42)` raised os.fspath's bare TypeError, `open_session(b"h.jsonl")` one from
    the PostgreSQL URL check (QA)."""
    with pytest.raises(SessionError, match="a session address is a path or text, not") as caught:
        open_session(target)
    assert caught.value.code == "invalid_argument"


def test_wrong_ids_and_cwds_are_refused_before_anything_is_written(tmp_path):
    """`create_session(5)` failed inside with "'int' object is not subscriptable"; an `id_factory`
    giving ints was said as an entry "missing entry id"; `session_id=""` became a random id,
    unsaid (QA)."""
    with pytest.raises(SessionError, match="cwd is text"):
        create_session(5, root=tmp_path)  # type: ignore[arg-type]
    for make in (
        lambda: JsonlStorage.create(tmp_path / "e.jsonl", cwd="/p", session_id=""),
        lambda: SqliteStorage.create(tmp_path / "e.sqlite", cwd="/p", session_id=""),
        lambda: MemoryStorage(cwd="/p", session_id=""),
        lambda: create_session("/p", root=tmp_path, session_id=""),
    ):
        with pytest.raises(SessionError, match="a session id is non-empty text"):
            make()
    assert not (tmp_path / "e.jsonl").exists() and not list(tmp_path.glob("-*"))
    s = Session(MemoryStorage(cwd="/p"), id_factory=lambda: 5)  # type: ignore[arg-type,return-value]
    with pytest.raises(SessionError, match="the id factory gave 5: an entry id is non-empty text"):
        s.append_message(U("hi"))
    assert s.entry_count() == 0


def test_create_session_at_a_database_address_makes_it_in_the_database(tmp_path, monkeypatch, pg_url):
    """A database address made a JSONL file of that name (`x.sqlite#new`, then opened as an
    empty session) and, for a URL, folders named after it with its password in them."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "team.sqlite"
    with create_session("/p", path=f"{db}#new") as s:
        s.append_message(U("hi"))
    assert sorted(tmp_path.iterdir()) == [db]  # no JSONL file named after the address
    with open_session(f"{db}#new") as again:
        assert again.session_id == "new" and len(again.tree) == 1
    with create_session("/q", path=db, session_id="second") as s:  # the id given apart
        assert s.session_id == "second"
    with pytest.raises(SessionError, match="two session ids") as raised:
        create_session("/p", path=f"{db}#a", session_id="b")
    assert raised.value.code == "invalid_argument"

    made = f"made-by-address-{uuid.uuid4().hex[:8]}"  # the server outlives one test run
    with create_session("/p", path=f"{pg_url}#{made}") as s:
        s.append_message(U("in postgres"))
    with open_session(f"{pg_url}#{made}") as again:
        assert len(again.tree) == 1 and again.header.cwd == "/p"
    assert sorted(tmp_path.iterdir()) == [db]
    with pytest.raises(SessionError, match="not a PostgreSQL URL") as raised:
        create_session("/p", path="postgresq://me:secret@db/x#s")  # misspelt
    assert raised.value.code == "invalid_argument" and "secret" not in str(raised.value)
    assert sorted(tmp_path.iterdir()) == [db]

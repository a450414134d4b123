"""A session of a database opened with `lock="write"` (what the browser asks for) takes its
writer lock at its first write, not at the open: a teammate who opened a session to look at it
kept the owner's agent and imports out until they quit (QA). Both database storages, through
the opening API."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import A, U
from sessiontree import Session, SessionError, SqliteStorage, open_session
from sessiontree.opening import open_or_read_only, open_to_write


@pytest.fixture(params=["sqlite", "postgres"])
def session_address(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database holding one session "s1" of two messages, as an address."""
    if request.param == "sqlite":
        db = str(tmp_path / "team.sqlite")
        with Session(SqliteStorage.create(db, cwd="/p", session_id="s1")) as s:
            s.append_message(U("question"))
            s.append_message(A("answer"))
        return f"{db}#s1"
    from sessiontree.storage.postgres import PostgresStorage

    url = request.getfixturevalue("pg_database")
    with Session(PostgresStorage.create(url, cwd="/p", session_id="s1")) as s:
        s.append_message(U("question"))
        s.append_message(A("answer"))
    return f"{url}#s1"


def test_a_viewer_that_never_writes_keeps_no_writer_out(session_address):
    with open_or_read_only(session_address, lock="write") as viewer:
        assert not viewer.read_only
        with open_to_write(session_address) as agent:  # refused while the viewer had it open
            agent.append_message(U("the agent goes on"))
        assert viewer.refresh() == 1
        assert not viewer.read_only and not viewer.writer_elsewhere()


def test_the_first_write_takes_the_lock_from_the_leaf_as_it_is_then(session_address):
    with open_or_read_only(session_address, lock="write") as viewer:
        with open_to_write(session_address) as agent:
            agent_id = agent.append_message(U("written while the viewer looked"))
        first = viewer.get_entries()[0].id
        viewer.move_to(first)  # without a refresh of its own first: the write asks
        leaf = viewer.get_entries()[-1]
        assert leaf.parent_id == agent_id  # the `leaf` record goes on from the agent's entry
        with pytest.raises(SessionError) as refused:  # the viewer is the writer now
            open_session(session_address)
        assert refused.value.code == "locked"
    with open_session(session_address) as after:  # and lets go when it closes
        assert after.leaf_id == first


def test_a_write_after_another_took_the_lock_is_refused_and_turns_read_only(session_address):
    with open_or_read_only(session_address, lock="write") as viewer:
        agent = open_to_write(session_address)
        try:
            count = viewer.entry_count()
            with pytest.raises(SessionError) as refused:
                viewer.append_label(viewer.get_entries()[0].id, "mine")
            assert refused.value.code == "locked"
            assert "nothing was written, and the session is read-only here now" in str(refused.value)
            assert viewer.read_only and viewer.locked_out and viewer.writer_elsewhere()
            assert "since after it was opened here. Read-only now" in (viewer.read_only_reason or "")
            assert viewer.entry_count() == count
            agent.append_message(U("the agent was not disturbed"))
        finally:
            agent.close()
        assert not viewer.writer_elsewhere()  # the watch in the app says so from here
        with pytest.raises(SessionError) as still:
            viewer.append_label(viewer.get_entries()[0].id, "mine")
        assert still.value.code == "read_only"


def test_a_session_being_written_still_opens_read_only_at_once(session_address):
    """Locked at the open as before: the banner says so before any key."""
    with open_to_write(session_address), open_or_read_only(session_address, lock="write") as viewer:
        assert viewer.read_only and viewer.locked_out


def test_lock_is_open_or_write(session_address):
    with pytest.raises(SessionError) as refused:
        open_session(session_address, lock="later")
    assert refused.value.code == "invalid_argument"

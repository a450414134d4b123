"""A session opened with `lock="write"` (what the browser asks for) takes its writer lock for
each write only, not at the open: a teammate who opened a session to look at it kept the
owner's agent and imports out until they quit, and an agent built on the library was refused
a file the app had open (QA). Every storage that locks, through the opening API."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from helpers import A, U
from sessiontree import JsonlStorage, Session, SessionError, SqliteStorage, open_session
from sessiontree.opening import open_or_read_only, open_to_write


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def session_address(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A session "s1" of two messages, as an address: a file, or in a database."""
    if request.param == "jsonl":
        path = tmp_path / "s1.jsonl"
        with Session(JsonlStorage.create(path, cwd="/p", session_id="s1")) as s:
            s.append_message(U("question"))
            s.append_message(A("answer"))
        return str(path)
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


def test_a_write_goes_on_from_the_leaf_as_it_is_then_and_keeps_no_lock(session_address):
    """A teammate who moved the leaf once kept the lock, and the owner's agent out, until they
    quit (QA): the lock is the write's only."""
    with open_or_read_only(session_address, lock="write") as viewer:
        with open_to_write(session_address) as agent:
            agent_id = agent.append_message(U("written while the viewer looked"))
        first = viewer.get_entries()[0].id
        viewer.move_to(first)  # without a refresh of its own first: the write asks
        leaf = viewer.get_entries()[-1]
        assert leaf.parent_id == agent_id  # the `leaf` record goes on from the agent's entry
        with open_to_write(session_address) as agent:  # not kept out by the viewer's move
            agent.append_message(U("the agent goes on from the moved leaf"))
        viewer.append_label(first, "seen")  # and the viewer writes again after it
        assert viewer.labels() == {first: "seen"} and not viewer.read_only


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
            reason = viewer.read_only_reason or ""
            assert "(it began after this session was opened): read-only from now on" in reason
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


AGENT = """
import sys
import threading
import time
from sessiontree import open_session
with open_session(sys.argv[1]) as s:
    for k in range(int(sys.argv[2])):
        s.append_message({"role": "user", "content": f"{sys.argv[3]} {k}"})
"""


def test_agents_in_other_processes_lose_nothing_beside_a_viewer(session_address, tmp_path):
    """On SQLite the open let go of the lock through a descriptor closed before the file was
    marked in use, which dropped SQLite's own locks of the viewer's connection: the next agent
    to quit took itself for the last user and removed the log under it. Its entries were lost
    once the viewer wrote, and the database's indexes were damaged (QA)."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    with open_or_read_only(session_address, lock="write") as viewer:
        count = viewer.entry_count()
        for name, turns, seen in (("first", 2, 2), ("second", 3, 5)):
            subprocess.run([sys.executable, str(agent), session_address, str(turns), name], check=True)
            viewer.refresh()  # following them, as the app does
            assert viewer.entry_count() == count + seen
        viewer.append_label(viewer.get_entries()[0].id, "checkpoint")
    with open_session(session_address, read_only=True) as after:
        texts = [e.to_dict().get("message", {}).get("content") for e in after.get_entries()]
        assert [t for t in texts if isinstance(t, str) and t[:1] in "fs"] == [
            "first 0",
            "first 1",
            "second 0",
            "second 1",
            "second 2",
        ]
        assert after.entry_count() == count + 6
    if "#" in session_address and not session_address.startswith("postgres"):
        db = session_address.split("#")[0]
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_refusal_never_names_this_process_after_its_own_write(tmp_path):
    """SQLite: the viewer's pid stayed in `writers` after its write, and a writer that had
    taken the lock but not yet recorded itself was named as "this process" (QA)."""
    from sessiontree.storage.lock import RangeLock, session_slot

    db = str(tmp_path / "team.sqlite")
    with Session(SqliteStorage.create(db, cwd="/p", session_id="s1")) as s:
        s.append_message(U("question"))
    with open_or_read_only(f"{db}#s1", lock="write") as viewer:
        first = viewer.get_entries()[0].id
        viewer.append_label(first, "mine")  # recorded itself, then let go
        other = RangeLock(session_slot("s1"))
        other.acquire(db, "session s1")  # another writer, between its lock and its record
        try:
            with pytest.raises(SessionError) as refused:
                viewer.append_label(first, "again")
        finally:
            other.release()
    assert refused.value.code == "locked" and "this process" not in str(refused.value)


def test_a_move_to_the_leaf_another_writer_has_left_is_written(session_address):
    """The viewer's leaf was stale when a move asked "is it the leaf already?": a move back to
    the leaf the agent had just gone on from wrote nothing (it was the leaf when last looked)."""
    with open_or_read_only(session_address, lock="write") as viewer:
        left = viewer.leaf_id
        with open_to_write(session_address) as agent:
            agent.append_message(U("the agent goes on"))
        nav = viewer.navigate(left)  # no refresh of its own first
        assert nav.moved and viewer.leaf_id == left
        assert viewer.get_entries()[-1].type == "leaf"


def test_an_agent_sets_a_torn_line_aside_beside_a_viewer(tmp_path):
    """The viewer held the file open for writing between its writes, which is how a writer
    tells that an unfinished last line may still be ended: after a crash, an agent's writes
    were refused ("another program is writing this file right now (pid N: …)") for as long as
    the app was open. It holds it open only to read now."""
    path = tmp_path / "s1.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p", session_id="s1")) as s:
        s.append_message(U("question"))
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"cut","parentId":')  # a write cut short by a crash
    os.utime(path, (time.time() - 60, time.time() - 60))
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    with open_or_read_only(str(path), lock="write") as viewer:
        done = subprocess.run(
            [sys.executable, str(agent), str(path), "1", "after"], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        viewer.refresh()
        texts = [e.to_dict().get("message", {}).get("content") for e in viewer.get_entries()]
        assert texts == ["question", "after 0"]
        viewer.append_label(viewer.get_entries()[0].id, "seen")
        assert viewer.labels() == {viewer.get_entries()[0].id: "seen"}
    assert [p.name for p in tmp_path.glob("s1.jsonl.torn*")] == ["s1.jsonl.torn"]


def test_a_write_waits_a_moment_for_another_writers_own_write(session_address):
    """An agent that opens the session for each turn holds the lock for milliseconds: a
    viewer's write that met one was refused, and the session turned read-only for good (QA:
    one of 18 leaf moves written)."""
    with open_or_read_only(session_address, lock="write") as viewer:
        agent = open_to_write(session_address)
        threading.Timer(0.2, agent.close).start()  # its turn written, the agent lets go
        first = viewer.get_entries()[0].id
        viewer.append_label(first, "mine")  # waits for the agent
        assert viewer.labels() == {first: "mine"} and not viewer.read_only


@pytest.mark.parametrize("lock", ["open", "write"])
def test_an_open_waits_a_moment_for_another_writers_own_write(session_address, lock):
    """An agent was refused at its open when it met one of the app's writes of a few
    milliseconds; the app opened read-only when it met one of the agent's."""
    other = open_to_write(session_address)
    threading.Timer(0.2, other.close).start()  # its write done, the other lets go
    with open_or_read_only(session_address, lock=lock) as opened:
        assert not opened.read_only and not opened.locked_out
        opened.append_message(U("written once the other let go"))

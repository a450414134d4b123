"""The browser on a PostgreSQL session: the demo session imported into a real server, opened by
address while an agent holds the writer lock (so read-only, saying who holds it), following
what the agent appends."""

from __future__ import annotations

import pytest

from helpers import U
from sessiontree import open_session
from sessiontree.importing import import_file
from sessiontree.tui.app import SessionTreeApp
from sessiontree.tui.launch import open_for_browsing
from sessiontree.tui.preview_pane import PREVIEW_DELAY
from sessiontree.tui.tree_view import SessionTreeView

SIZE = (150, 45)
pytestmark = pytest.mark.usefixtures("utc")


async def test_browse_and_follow_a_postgres_session(demo, pg_database):
    imported = import_file(demo, pg_database)
    address = f"{pg_database}#{imported.session_id}"
    agent = open_session(address)  # the writer, as a live agent would be
    try:
        session, note = open_for_browsing(address, read_only=False)
        assert session.read_only and note is not None and "sessiontree[" in note
        app = SessionTreeApp(session, note=note)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(PREVIEW_DELAY + 0.05)
            await app.workers.wait_for_complete()
            tree = app.browser.query_one(SessionTreeView)
            assert app.browser.title == "Fix flaky date parsing in weather-cli"
            assert "46 entries" in app.browser.sub_title and "***" not in app.browser.sub_title
            assert tree.current_target().entry_id == agent.leaf_id
            new = agent.append_message(U("appended by the agent"))
            for _ in range(40):
                await pilot.pause(0.1)
                if app.session.entry_count() == 47:
                    break
            assert app.session.leaf_id == new
            assert tree.current_target().entry_id == new  # the cursor followed the leaf
            assert any("appended by the agent" in tree.render_line(y).text for y in range(tree.size.height))
    finally:
        agent.close()


async def test_export_and_fork_from_a_postgres_session_write_in_the_current_directory(
    demo, pg_database, tmp_path, monkeypatch
):
    """The palette's export took the session's address for a file path ("cannot write:
    …/postgresql:/sessiontree:***@…"), and `X` said "a session in memory has no directory"
    with no way to name one (QA). Both write in the current directory."""
    imported = import_file(demo, pg_database)
    address = f"{pg_database}#{imported.session_id}"
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    session, note = open_for_browsing(address, read_only=False)
    app = SessionTreeApp(session, note=note)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        await app.workers.wait_for_complete()
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Export as HTML")
        command.callback()
        for _ in range(100):
            await pilot.pause(0.1)
            if list(here.glob("*.html")):
                break
        await app.workers.wait_for_complete()
        (page,) = here.glob("*.html")
        assert page.name == f"{imported.session_id}.{session.leaf_id}.html"
        assert b"<html" in page.read_bytes()[:500].lower()
        await pilot.press("X", "y")
        await pilot.pause(0.3)
        forks = list(here.glob("*.jsonl"))
        assert len(forks) == 1
        with open_session(forks[0], read_only=True) as fork:
            assert fork.get_entry(session.leaf_id) is not None  # the path to the cursor, labels after

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

"""`sessiontree db.sqlite` with several sessions lists them to choose from (it said "add
#SESSION_ID", and the ids were only to be found with psql, QA); `o` from a session kept in a
database lists the sessions beside it, not the files of the current directory."""

from __future__ import annotations

from textual import events

from harness.pilot import settle
from helpers import A, U
from sessiontree import Session, SqliteStorage
from sessiontree.tui.browser import BrowserScreen
from sessiontree.tui.database_picker import DatabasePickerScreen
from sessiontree.tui.launch import build_app

SIZE = (120, 30)


def team_db(tmp_path):
    db = tmp_path / "team.sqlite"
    for sid, cwd, name in (
        ("s-alpha", "/p/alpha", "alpha work"),
        ("s-beta", "/p/beta", None),
        ("s-gamma", "/p/g", "gamma"),
    ):
        with Session(SqliteStorage.create(db, cwd=cwd, session_id=sid)) as s:
            s.append_message(U(f"question in {sid}"))
            s.append_message(A(f"answer in {sid}"))
            if name:
                s.append_session_name(name)
    return db


def rows(app) -> list[str]:
    table = app.screen.query_one("#dbpick-table")
    return [str(table.get_row_at(k)[1]) for k in range(table.row_count)]


async def test_choosing_a_session_of_a_database(tmp_path):
    db = team_db(tmp_path)
    app = build_app(str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, DatabasePickerScreen)
        assert sorted(rows(app)) == ["s-alpha", "s-beta", "s-gamma"]
        names = [str(app.screen.query_one("#dbpick-table").get_row_at(k)[0]) for k in range(3)]
        assert "question in s-beta" in names  # no name: its first message, as the file picker
        await pilot.press(*"beta")  # typing on the list filters it
        await settle(app, pilot)
        assert app.screen.query_one("#dbpick-filter").value == "beta"  # QA: fast typing kept "a"
        assert rows(app) == ["s-beta"]
        assert "1 of 3 sessions match" in str(app.screen.query_one("#dbpick-status").render())
        await pilot.press("enter")  # Enter in the filter opens the match (it only went to the list)
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen) and app.session is not None
        assert app.session.session_id == "s-beta" and not app.session.read_only
        await pilot.press("o")  # the sessions beside it, the cursor on the one open here
        await settle(app, pilot)
        assert isinstance(app.screen, DatabasePickerScreen) and len(rows(app)) == 3
        table = app.screen.query_one("#dbpick-table")
        assert str(table.get_row_at(table.cursor_row)[0]).startswith("● ")
        assert rows(app)[table.cursor_row] == "s-beta"
        await pilot.press("enter")  # the one open here: back to it, not opened again read-only
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen) and not app.session.read_only
        assert "s-beta is the session open here" in list(app._notifications)[-1].message
        await pilot.press("o")
        await settle(app, pilot)
        await pilot.press("escape")  # back to the session, as it was
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen) and app.session.session_id == "s-beta"
        await pilot.press("o")
        await settle(app, pilot)
        table = app.screen.query_one("#dbpick-table")
        table.move_cursor(row=rows(app).index("s-gamma"))
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, BrowserScreen) and app.session.session_id == "s-gamma"
        await pilot.press("q")
    assert not app.is_running


async def test_esc_with_nothing_chosen_quits(tmp_path):
    db = team_db(tmp_path)
    app = build_app(str(db), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("x", "escape")  # the filter cleared first
        await settle(app, pilot)
        assert isinstance(app.screen, DatabasePickerScreen) and len(rows(app)) == 3
        await pilot.press("escape")
        await pilot.pause()
    assert not app.is_running


async def test_a_filter_typed_in_a_burst_keeps_every_key(tmp_path):
    """Typed fast on the list (a paste, a quick typist), "bench" left "b": the keys after the
    first had been sent to the list before the first moved the focus to the filter (QA)."""
    app = build_app(str(team_db(tmp_path)))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for character in "gam":
            app.post_message(events.Key(character, character))
        await pilot.pause(0.3)
        assert app.screen.query_one("#dbpick-filter").value == "gam" and rows(app) == ["s-gamma"]

"""`sessiontree db.sqlite` with several sessions lists them to choose from (it said "add
#SESSION_ID", and the ids were only to be found with psql, QA); `o` from a session kept in a
database lists the sessions beside it, not the files of the current directory."""

from __future__ import annotations

import threading

import pytest
from textual import events
from textual.widgets import Static

from harness.pilot import settle, until
from harness.pilot import status as status_line
from helpers import A, U
from sessiontree import JsonlStorage, Session, SqliteStorage, open_session
from sessiontree.tui.browser import BrowserScreen
from sessiontree.tui.core import NOT_DONE_LOCKED
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
        keys = [(b.key, b.description) for _, b, enabled, _ in app.screen.active_bindings.values() if enabled]
        assert ("escape", "Back") in keys and ("escape", "Quit") not in keys
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


async def test_the_session_worked_on_last_is_on_top(tmp_path):
    """The list was newest first by creation: the session just worked on sat under every one
    started after it. It is by the last entry's time now, and the title says so."""
    db = team_db(tmp_path)
    with open_session(f"{db}#s-alpha") as s:  # the first one created
        s.append_message(U("back to alpha"))
    app = build_app(str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert rows(app)[0] == "s-alpha" and len(rows(app)) == 3
        title = str(app.screen.query_one("#dbpick-title", Static).render())
        assert "last active first" in title


async def test_esc_with_nothing_behind_the_list_never_quits(tmp_path):
    """Esc quit the app from a database's list with no session behind it, where the file
    picker's never does (q quits): a k9s user backing out lost the app (QA)."""
    db = team_db(tmp_path)
    app = build_app(str(db), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("x", "escape")  # the filter cleared first
        await settle(app, pilot)
        assert isinstance(app.screen, DatabasePickerScreen) and len(rows(app)) == 3
        keys = [(b.key, b.description) for _, b, enabled, _ in app.screen.active_bindings.values() if enabled]
        assert ("escape", "Quit") not in keys and ("escape", "Back") not in keys
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.is_running and isinstance(app.screen, DatabasePickerScreen)
        assert [n.message for n in app._notifications] == ["Nothing to clear here: q quits"]
        await pilot.press("q")
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


def status(app) -> str:
    return str(app.screen.query_one("#dbpick-status").render())


async def test_sessions_are_listed_off_the_ui_thread(tmp_path, monkeypatch):
    """`o` on a PostgreSQL session froze the app while the server was asked (up to its 10 s
    timeout): the list is up at once, takes keys while the sessions are listed, and fills in."""
    import sessiontree.tui.app as app_module
    from sessiontree.opening import list_sessions

    db = team_db(tmp_path)
    answer = threading.Event()
    listings = []

    def slow_server(database):
        listings.append(database)
        answer.wait(10)
        return list_sessions(database)

    app = build_app(f"{db}#s-beta")
    monkeypatch.setattr(app_module, "list_sessions", slow_server)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("o")
        await pilot.pause(0.1)
        assert isinstance(app.screen, DatabasePickerScreen) and rows(app) == []
        assert status(app).startswith("listing the sessions of")
        await pilot.press(*"gam")  # typed while the server is silent: the filter takes it
        await pilot.pause(0.1)
        assert app.screen.query_one("#dbpick-filter").value == "gam"
        answer.set()
        await until(pilot, lambda: rows(app) == ["s-gamma"])
        assert "1 of 3 sessions match" in status(app)
        await pilot.press("escape", "escape")
        await pilot.pause(0.1)
        assert isinstance(app.screen, BrowserScreen) and app.session.session_id == "s-beta"
    assert len(listings) == 1


async def test_a_database_is_listed_once_at_start(tmp_path, monkeypatch):
    """The launcher counted the sessions and the list read them all again."""
    db = team_db(tmp_path)
    calls = []
    real = SqliteStorage.list_sessions

    def counted(cls, location):
        calls.append(location)
        return real(location)

    monkeypatch.setattr(SqliteStorage, "list_sessions", classmethod(counted))
    app = build_app(str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert len(rows(app)) == 3
    assert len(calls) == 1


async def test_a_server_is_listed_after_the_first_paint(demo, pg_database):
    """A PostgreSQL address without `#SESSION_ID` was listed before the app started (a blank
    terminal while the server answered): the list paints first; a database of one session
    opens it."""
    from sessiontree.importing import import_file

    import_file(demo, pg_database)
    app = build_app(pg_database)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, BrowserScreen))
        await settle(app, pilot)  # mounted whole before the app quits
        assert app.session is not None and app.session.entry_count() == 46
    other = demo.parent / "other.jsonl"
    with Session(JsonlStorage.create(other, cwd="/p/other", session_id="s-other")) as s:
        s.append_message(U("another one"))
    import_file(other, pg_database)
    app = build_app(pg_database)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DatabasePickerScreen) and len(rows(app)) == 2)
        await pilot.press(*"another", "enter")
        await until(pilot, lambda: isinstance(app.screen, BrowserScreen))
        assert app.session.session_id == "s-other"


async def test_a_server_that_cannot_be_listed_says_why(tmp_path):
    """Nothing listens on port 1: the list says why in place of the count, the password
    masked, and q leaves (a toast died with the app)."""
    app = build_app("postgresql://me:hunter2@127.0.0.1:1/team")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "Cannot list" in status(app))
        assert "hunter2" not in status(app) and "***" in status(app)
        await pilot.press("q")
        await pilot.pause(0.1)
    assert not app.is_running


async def test_every_column_is_seen_at_80_columns(tmp_path):
    """At 80 columns Entries and Created were reached by scrolling sideways; they share the
    width now, and a resize shares it again, keeping the highlighted row."""
    db = team_db(tmp_path)
    long_cwd = "/home/someone/work/clients/acme/monorepo/packages/weather-cli"
    with Session(SqliteStorage.create(db, cwd=long_cwd, session_id="s-delta")) as s:
        s.append_message(U("why does the date parser fail on the first day of every month " * 3))
    app = build_app(str(db))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#dbpick-table")

        def screen_lines() -> list[str]:
            return [table.render_line(y).text for y in range(table.size.height)]

        labels = ("Name", "Id", "Project", "Entries", "Last active")
        assert all(label in screen_lines()[0] for label in labels)
        assert all(len(line.rstrip()) <= 80 for line in screen_lines())
        await pilot.press("down")
        highlighted = rows(app)[table.cursor_row]
        await pilot.resize_terminal(160, 40)
        await pilot.pause(0.1)
        assert rows(app)[table.cursor_row] == highlighted
        assert long_cwd[-36:] in "\n".join(screen_lines())  # more of a path, with room
        # at 60 columns the date was reached by scrolling sideways: it is left out there
        await pilot.resize_terminal(60, 20)
        await pilot.pause(0.1)
        assert "Last active" not in screen_lines()[0] and "Entries" in screen_lines()[0]
        assert table.virtual_size.width <= table.size.width


async def test_a_wide_character_project_shows_its_end(tmp_path):
    """A CJK path cut by characters was cut again by the table at its other end: the project's
    end, where projects differ, was lost (QA)."""
    db = team_db(tmp_path)
    cwd = "/home/開発者/プロジェクト/とても長いディレクトリ名前/サブディレクトリ"
    with Session(SqliteStorage.create(db, cwd=cwd, session_id="s-cjk")) as s:
        s.append_message(U("質問"))
    app = build_app(str(db))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#dbpick-table")
        row = next(y for y in range(table.size.height) if "s-cjk" in table.render_line(y).text)
        assert " …ディレクトリ " in table.render_line(row).text  # the end, in the cells it has


async def test_a_session_another_writer_held_opens_for_writing_once_it_quits(tmp_path):
    """Read-only while another process wrote to it, the session stayed so after that writer
    quit: choosing it again in the database's list went back to the read-only view, where the
    banner says opening it again opens it for writing (QA). As the file picker does, it is
    opened again: still read-only while the writer is there, for writing once it is gone."""
    db = team_db(tmp_path)
    holder = Session(SqliteStorage.open(db, "s-beta"))  # an agent writing to it
    app = build_app(f"{db}#s-beta")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.session.read_only and app.session.storage.locked_out

        async def choose_it_again() -> None:
            await pilot.press("o")
            await settle(app, pilot)
            assert isinstance(app.screen, DatabasePickerScreen)
            table = app.screen.query_one("#dbpick-table")
            table.move_cursor(row=rows(app).index("s-beta"))
            await pilot.press("enter")
            await settle(app, pilot)

        await choose_it_again()
        assert app.session.read_only
        assert list(app._notifications)[-1].message.startswith("Still read-only")
        holder.close()
        await choose_it_again()
        assert isinstance(app.screen, BrowserScreen) and app.session.session_id == "s-beta"
        assert not app.session.read_only
        assert "s-beta is open for writing now" in list(app._notifications)[-1].message
        await pilot.press("home", "enter")  # a write: the leaf moved to where the cursor is
        await settle(app, pilot)
    with Session(SqliteStorage.open(db, "s-beta", read_only=True)) as after:
        assert after.get_entries()[-1].type == "leaf"


async def test_an_empty_database_says_how_to_fill_it(pg_database):
    """A database without sessions showed a bare "0 sessions" list (QA)."""
    app = build_app(pg_database)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DatabasePickerScreen) and not app.screen.listing)
        said = str(app.screen.query_one("#dbpick-status").render())
        assert said.startswith("No sessions in this database yet") and "sessiontree import" in said


async def test_esc_says_clear_while_a_filter_is_typed_and_wide_screens_show_whole_ids(tmp_path):
    """With a filter typed the footer said "esc Quit" where Esc clears it; at 160 columns an
    id, typed after `#`, was still cut at 13 characters (QA)."""
    db = team_db(tmp_path)
    uuid = "0b8e6a8c-9420-4060-ac13-7745215f90ff"
    with Session(SqliteStorage.create(db, cwd="/p/u", session_id=uuid)) as s:
        s.append_message(U("a session with a UUID"))
    app = build_app(str(db), read_only=True)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(app, pilot)

        def esc() -> list[str]:
            bindings = app.screen.active_bindings.values()
            return [b.description for _, b, enabled, _ in bindings if enabled and b.key == "escape"]

        assert esc() == ["Nothing to clear (q quits)"]
        await pilot.press("x")
        await settle(app, pilot)
        assert esc() == ["Clear"]
        await pilot.press("escape")
        await settle(app, pilot)
        assert esc() == ["Nothing to clear (q quits)"] and isinstance(app.screen, DatabasePickerScreen)
        table = app.screen.query_one("#dbpick-table")
        assert uuid in "\n".join(table.render_line(y).text for y in range(table.size.height))


async def test_a_session_added_while_the_list_is_shown_appears(tmp_path, monkeypatch):
    """With the list open, a session imported into the database meanwhile never showed: it
    kept saying "15 sessions" (QA)."""
    from sessiontree.tui import database_picker

    monkeypatch.setattr(database_picker, "RELIST_SECONDS", 0.2, raising=False)
    db = team_db(tmp_path)
    app = build_app(str(db), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert len(rows(app)) == 3
        table = app.screen.query_one("#dbpick-table")
        await pilot.press("down")
        highlighted = rows(app)[table.cursor_row]
        with Session(SqliteStorage.create(db, cwd="/p/new", session_id="s-delta")) as s:
            s.append_message(U("arrived while the list was open"))
        await until(pilot, lambda: len(rows(app)) == 4)
        assert "s-delta" in rows(app) and rows(app)[table.cursor_row] == highlighted


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_browsing_a_session_keeps_no_writer_out_until_it_writes(tmp_path, monkeypatch, kind):
    """The app took a session's writer lock at the open: a teammate browsing a database kept
    the owner's agent and imports out until they quit, and an agent built on the library was
    refused a file the app had open (QA). The lock is taken for each write now; refused there,
    the write says so, the banner says why the session is read-only, the write keys go, and
    the banner says when that writer has quit."""
    from sessiontree.tui import follow

    monkeypatch.setattr(follow, "WRITER_LOOK_SECONDS", 0.1)
    if kind == "sqlite":
        address = f"{team_db(tmp_path)}#s-beta"
    else:
        address = str(tmp_path / "s-beta.jsonl")
        with Session(JsonlStorage.create(address, cwd="/p/beta", session_id="s-beta")) as s:
            s.append_message(U("question in s-beta"))
            s.append_message(A("answer in s-beta"))
    app = build_app(address)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert not app.session.read_only
        count = app.session.entry_count()
        agent = open_session(address)  # refused before: the app held the lock
        agent.append_message(U("the agent's next turn"))
        await until(pilot, lambda: app.session.entry_count() == count + 1)  # followed
        await pilot.press("home", "enter")  # a move: the app's first write
        await settle(app, pilot)
        said = [n.message for n in app._notifications]
        assert any("nothing was written, and the session is read-only here now" in m for m in said)
        assert status_line(app) == NOT_DONE_LOCKED  # not the last write that was done
        banner = str(app.browser.query_one("#banner", Static).render())
        assert banner.startswith("READ-ONLY: ") and banner.endswith("(o)")
        assert "is already open for writing in this process (pid" in banner
        assert "Move" not in [
            b.description for _, b, enabled, _ in app.screen.active_bindings.values() if enabled
        ]
        agent.close()
        await until(pilot, lambda: status_line(app) == follow.WRITER_GONE)
        assert "has quit" in str(app.browser.query_one("#banner", Static).render())
    with open_session(address, read_only=True) as after:
        assert after.get_entries()[-1].type == "message"  # the agent's turn, and no move of the app's


async def test_a_long_list_scrolls_inside_its_table(tmp_path):
    """With more sessions than rows, the table took the height of its rows: the whole screen
    scrolled, the title, the filter and the count out of view (QA, 300 sessions)."""
    db = tmp_path / "many.sqlite"
    for k in range(40):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=f"s-{k:02d}")) as s:
            s.append_message(U(f"question {k}"))
    app = build_app(str(db))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        title, count = screen.query_one("#dbpick-title"), screen.query_one("#dbpick-status")
        assert title.region.y == 0 and 0 < count.region.y < 23 and count.region.height == 1
        assert "40 sessions" in status(app)
        await pilot.press("end")  # to the last session (it scrolled the rows sideways; QA)
        await pilot.pause(0.1)
        assert title.region.y == 0  # the list scrolled, not the screen
        table = screen.query_one("#dbpick-table")
        assert table.cursor_row == 39
        await pilot.press("home")
        assert table.cursor_row == 0


async def test_a_burst_ending_in_enter_opens_what_it_typed(tmp_path):
    """`gam` and Enter typed at once opened the first session of the whole list (Enter reached
    the list before the filter's change did), `xyz` and Enter too, and a q typed inside a
    filter ("aqueued") was dropped (QA)."""
    db = team_db(tmp_path)
    for burst, opened in (("gam", "s-gamma"), ("xyz", None)):
        app = build_app(str(db))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            for key in [*burst, "enter"]:
                app.post_message(events.Key(key, None if key == "enter" else key))
            await pilot.pause(0.3)
            await settle(app, pilot)
            if opened is None:
                assert isinstance(app.screen, DatabasePickerScreen)
                assert app.screen.query_one("#dbpick-filter").value == burst
            else:
                assert isinstance(app.screen, BrowserScreen) and app.session.session_id == opened
    app = build_app(str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for character in "aqueued":
            app.post_message(events.Key(character, character))
        await pilot.pause(0.3)
        assert app.is_running and app.screen.query_one("#dbpick-filter").value == "aqueued"


async def test_last_active_times_are_shown_in_one_time_zone(tmp_path, monkeypatch):
    """Each time was shown as written: 13:00+05:00 above 10:00Z looked unsorted (QA)."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    db = tmp_path / "zones.sqlite"
    for sid, stamp in (("s-east", "2026-03-01T13:00:00+05:00"), ("s-west", "2026-03-01T10:00:00.000Z")):
        storage = SqliteStorage.create(db, cwd="/p", session_id=sid)
        with Session(storage, clock=lambda stamp=stamp: stamp) as s:
            s.append_message(U(sid))
    app = build_app(str(db))
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            table = app.screen.query_one("#dbpick-table")
            shown = [table.render_line(y).text for y in range(1, 3)]
            assert "2026-03-01 10:00" in shown[0] and "s-west" in shown[0]
            assert "2026-03-01 08:00" in shown[1] and "s-east" in shown[1]
    finally:
        monkeypatch.undo()
        time.tzset()


async def test_q_typed_first_in_a_burst_quits(tmp_path):
    """ "qx" typed fast: the x moved the focus to the filter before the q's binding was looked
    up, and the filter took the q for itself; the app stayed (QA)."""
    db = team_db(tmp_path)
    app = build_app(str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for character in "qx":
            app.post_message(events.Key(character, character))
        await pilot.pause(0.3)
        assert not app.is_running
    app = build_app(str(db))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("slash", "q")  # in the filter, a q is typed
        await pilot.pause(0.2)
        assert app.is_running and app.screen.query_one("#dbpick-filter").value == "q"

"""Copy, fork, compare and export from the browser, on real files."""

from __future__ import annotations

import json

import pytest

from harness.pilot import cursor_id, make_app, put_cursor, settle
from sessiontree import open_session
from sessiontree.tui.modals import ChoiceScreen, ConfirmScreen, LinesScreen

pytestmark = pytest.mark.usefixtures("utc")


async def test_copy_each_kind_to_the_clipboard(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")  # everything, so the tool result row is there
        await put_cursor(app, pilot, "3a7c0da5")
        copied = {}
        for n, key in enumerate(("text", "call", "sent", "id"), 1):
            await pilot.press("c")
            assert isinstance(app.screen, ChoiceScreen)
            await pilot.press(str(n))
            await pilot.pause()
            copied[key] = app.clipboard
        assert copied["id"] == "3a7c0da5"
        sent = json.loads(copied["sent"])
        assert isinstance(sent, list) and sent[-1]["role"] == "toolResult"
        assert copied["call"].startswith("read(") and "→" in copied["call"]


async def test_fork_writes_a_new_session_and_opens_it(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c137e")
        before = demo.read_bytes()
        await pilot.press("X")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)  # "open it now?"
        await pilot.press("y")
        await settle(app, pilot)
        forked = app.session.location
        assert forked != str(demo) and demo.read_bytes() == before
        assert app.session.leaf_id == "3a7c137e"
    with open_session(forked, read_only=True) as s:
        assert s.header.parent_session and s.leaf_id == "3a7c137e"


async def test_compare_two_entries_shows_both_tails(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await put_cursor(app, pilot, "3a7c137e")
        await pilot.press("d")
        await pilot.press("a")  # to the leaf
        await settle(app, pilot)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, LinesScreen)
        lines = app.screen.lines
        assert lines[0].startswith("---") and lines[1].startswith("+++")
        assert any(line.startswith("=") for line in lines)  # the shared prefix, collapsed
        await pilot.press("escape")
        assert cursor_id(app) == app.session.leaf_id


async def test_export_html_from_the_palette_writes_next_to_the_session(demo):
    app = make_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Export as HTML")
        command.callback()
        await pilot.pause()
        out = demo.with_name(f"demo.{app.session.leaf_id}.html")
        assert out.exists() and b"<html" in out.read_bytes()[:500].lower()

"""The tree's and the preview's scrollbars draw what Textual's own would, without its console and
styles cache, and still scroll when clicked."""

from __future__ import annotations

import pytest
from textual._styles_cache import StylesCache
from textual.geometry import Offset, Region
from textual.scrollbar import ScrollBar

from harness.pilot import THEMES, make_app, settle, use_theme
from helpers import A, U
from sessiontree import create_session
from sessiontree.tui.preview import PreviewView
from sessiontree.tui.scroll_bar import QuickScrollBar
from sessiontree.tui.tree_view import SessionTreeView


def textual_lines(bar: ScrollBar, crop: Region) -> list[list]:
    """What Textual draws: its console render of the bar, through a styles cache of its own."""
    return [list(strip) for strip in StylesCache().render_widget(bar, crop)]


def bars(app) -> list[QuickScrollBar]:
    found = []
    for cls in (SessionTreeView, PreviewView):
        bar = app.browser.query_one(cls).vertical_scrollbar
        assert isinstance(bar, QuickScrollBar), cls.__name__
        found.append(bar)
    return found


def check(app) -> int:
    """Every shown bar's lines equal Textual's, for a whole frame and for parts; how many shown
    (the preview of a short entry has none)."""
    shown = 0
    for bar in bars(app):
        if not bar.display or not bar.region:
            continue
        shown += 1
        width, height = bar.region.size
        for crop in (Region(0, 0, width, height), Region(0, 2, width, 3), Region(0, height - 2, width, 4)):
            quick = bar._quick_lines(crop)
            assert quick is not None, "went through Textual's path"
            assert [list(strip) for strip in quick] == textual_lines(bar, crop)
    return shown


@pytest.fixture
def long_session(tmp_path):
    """Long enough for both views to scroll, with entries whose preview overflows too."""
    session = create_session("/w", path=tmp_path / "s.jsonl")
    for k in range(120):
        session.append_message(U(f"question {k}\n\n" + "a line of the question\n" * (k % 40)))
        session.append_message(A(f"answer {k}"))
    session.close()
    return tmp_path / "s.jsonl"


@pytest.mark.parametrize("theme", THEMES)
async def test_the_bars_draw_what_textual_would(long_session, monkeypatch, theme):
    theme = use_theme(theme, monkeypatch)
    app = make_app(long_session)
    async with app.run_test(size=(90, 26)) as pilot:
        await settle(app, pilot)
        app.theme = theme
        await settle(app, pilot)
        assert check(app) == 2
        for keys in (["pageup"], ["up", "up"], ["home"], ["5"], ["tab", "pagedown"], ["shift+tab", "end"]):
            await pilot.press(*keys)
            await settle(app, pilot)
            assert check(app) >= 1, keys
        tree_bar, preview_bar = bars(app)
        tree_bar.mouse_over = True  # the hover colours
        preview_bar.grabbed = Offset(0, 1)  # the colours while dragged
        await settle(app, pilot)
        assert check(app) == 2
        preview_bar.grabbed = None
        tree_bar.mouse_over = False
        await pilot.resize_terminal(70, 20)
        await settle(app, pilot)
        assert check(app) == 2


async def test_a_click_on_the_track_still_scrolls(long_session):
    """Clicks reach Textual's actions through the rows' styles (`@mouse.down`)."""
    app = make_app(long_session)
    async with app.run_test(size=(90, 26)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        bar = tree.vertical_scrollbar
        assert tree.scroll_offset.y > 0  # the leaf is the last entry: the tree shows its end
        before = tree.scroll_offset.y
        await pilot.click(bar, offset=Offset(0, 0))  # the track above the thumb
        await settle(app, pilot)
        assert tree.scroll_offset.y < before

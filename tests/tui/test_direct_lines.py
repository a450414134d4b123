"""The tree's and the preview's lines reach the compositor past Textual's styles cache, and are
what that cache would have made of them."""

from __future__ import annotations

import pytest
from textual._styles_cache import StylesCache
from textual.geometry import Region
from textual.widget import Widget

from harness.pilot import THEMES, make_app, settle, use_theme
from sessiontree.tui.direct_lines import DirectLines
from sessiontree.tui.preview import PreviewView
from sessiontree.tui.tree_view import SessionTreeView

VIEWS = (SessionTreeView, PreviewView)


def textual_lines(view: Widget, crop: Region) -> list[list]:
    """What Textual draws, from a styles cache of its own (the view's own may hold lines)."""
    return [list(strip) for strip in StylesCache().render_widget(view, crop)]


def crops(view: Widget) -> list[Region]:
    width, height = view.region.size
    return [
        Region(0, 0, width, height),  # a whole frame
        Region(0, 3, width, 2),  # the two rows a cursor move redraws
        Region(5, 0, width - 9, height),  # under an overlapping toast
        Region(0, height - 1, width, 3),  # past the last row
    ]


def check(app) -> None:
    for cls in VIEWS:
        view = app.browser.query_one(cls)
        for crop in crops(view):
            direct = view._direct_lines(crop)
            assert direct is not None, f"{cls.__name__} went through Textual's path"
            assert [list(strip) for strip in direct] == textual_lines(view, crop), cls.__name__
            assert {strip.cell_length for strip in direct} == {crop.width}


@pytest.mark.parametrize("theme", THEMES)
async def test_the_lines_are_those_textual_would_draw(demo, monkeypatch, theme):
    """After each kind of change, the lines kept from the frames drawn so far (`_made`) are
    those Textual would draw now."""
    theme = use_theme(theme, monkeypatch)
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        app.theme = theme  # a change of styles
        await settle(app, pilot)
        check(app)
        for keys in (
            ["down", "down"],  # the cursor
            ["pagedown"],  # the tree scrolls
            ["5"],  # every row again
            ["up", "space"],  # a fold
            ["space", "z"],  # folds elsewhere: only some lines change
            ["z", "1", "5"],
            ["home", "down", "down", "enter"],  # a leaf move: the path marks change
            ["b"],  # and back
            ["tab", "pagedown", "pagedown"],  # the preview, focused, scrolls
            ["shift+tab", "home"],
        ):
            await pilot.press(*keys)
            await settle(app, pilot)
            check(app)
        await pilot.resize_terminal(84, 26)
        await settle(app, pilot)
        check(app)


async def test_styles_that_need_textual_send_the_view_back_to_it(demo):
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        crop = Region(0, 0, *tree.region.size)
        for rule, value in [
            ("border_right", ("tall", "red")),
            ("padding", (1, 0)),
            ("tint", "red 30%"),
            ("text_opacity", 0.5),
        ]:
            setattr(tree.styles, rule, value)
            await pilot.pause()
            assert tree._direct_lines(crop) is None, rule
            assert [list(strip) for strip in tree.render_lines(crop)] == textual_lines(tree, crop)
            tree.styles.clear_rule(rule)
            await pilot.pause()
        assert tree._direct_lines(crop) is not None


async def test_a_page_of_rows_skips_the_styles_cache(demo, monkeypatch):
    """Guards the CSS too: a border or vertical padding on either view would bring the cost back."""
    styled: list[str] = []
    real = StylesCache.render_widget

    def spy(self, widget, crop):
        styled.append(type(widget).__name__)
        return real(self, widget, crop)

    monkeypatch.setattr(StylesCache, "render_widget", spy)
    app = make_app(demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        styled.clear()
        await pilot.press("pagedown", "pageup", "5", "1")
        await settle(app, pilot)
        assert issubclass(SessionTreeView, DirectLines) and issubclass(PreviewView, DirectLines)
        assert not {"SessionTreeView", "PreviewView"} & set(styled)


async def test_a_fold_repaints_the_lines_from_its_row_down(demo):
    """A rebuild repaints the lines whose look changed, not the pane: Textual then composes and
    sends the terminal only those. The lines kept are checked against Textual's by the test above."""
    app = make_app(demo)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(app, pilot)
        tree = app.browser.query_one(SessionTreeView)
        await pilot.press("home")
        foldable = [
            row
            for row in range(4, min(len(tree.outline), tree.size.height) - 2)
            if tree.outline.is_foldable(tree.outline.rows_pos[row])
        ]
        assert foldable, "the demo has a branch to fold below its first rows"
        row = foldable[0]
        tree.set_cursor(row, scroll=False)
        await settle(app, pilot)
        assert int(tree.scroll_offset.y) == 0
        drawn: list[int] = []
        real = tree.render_line

        def spy(y: int):
            drawn.append(y)
            return real(y)

        tree.render_line = spy  # type: ignore[method-assign]
        await pilot.press("space")
        await settle(app, pilot)
        assert int(tree.scroll_offset.y) == 0
        assert drawn and min(drawn) == row, (row, sorted(set(drawn)))
        check(app)

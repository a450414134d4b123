"""A vertical scrollbar whose lines reach the compositor past Textual's styles cache.

Textual draws a scrollbar as a Rich renderable (`ScrollBarRender`) rendered through a console
into lines, which then pass through the styles cache like any widget's (`Widget.render_lines`).
For the preview's scrollbar that cost ~2 ms a frame at 50 rows, and the preview's scrollbar is
drawn twice on every cursor move (the first screen of the entry, then its context above): ~4 ms
of every key, a quarter of the frame budget. Yet a scrollbar has at most five distinct rows
(track above, partial end, thumb, partial end, track below): here each distinct row is styled,
fitted and filtered once, and a frame is those rows repeated. Rows are the ones
`ScrollBarRender.render_bar` computes, so the thumb's glyphs, colours (hover and grab included)
and click actions are Textual's own; `tests/tui/test_scroll_bar.py` compares the lines with
Textual's after scrolls, hovers, grabs, theme changes and under Textual's monochrome filter
(`NO_COLOR`).
"""

from __future__ import annotations

from typing import NamedTuple

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.app import App
from textual.color import Color
from textual.dom import NoScreen
from textual.filter import LineFilter
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from .direct_lines import filtered, plain

# What `Widget.vertical_scrollbar` uses to make a scrollbar; without it, Textual's own is made.
BUILDS_SCROLLBARS = callable(getattr(App, "_start_widget", None))
DEFAULT_BACK = RichColor.parse("#555555")  # `ScrollBarRender.__rich_console__`'s defaults
DEFAULT_BAR = RichColor.parse("bright_magenta")


class QuickScrollBar(ScrollBar):
    """`ScrollBar`, with its vertical lines made without a console or the styles cache."""

    def __init__(self, vertical: bool = True, name: str | None = None, *, thickness: int = 1) -> None:
        super().__init__(vertical, name, thickness=thickness)
        self._rows: dict[Segment, Strip] = {}  # a distinct row -> its finished line, for `_look`
        self._look: _Look | None = None
        self._last: tuple[tuple[object, ...], list[Strip]] | None = None  # the last frame's lines

    def render_lines(self, crop: Region) -> list[Strip]:
        lines = self._quick_lines(crop)
        return super().render_lines(crop) if lines is None else lines

    def _quick_lines(self, crop: Region) -> list[Strip] | None:
        """What Textual's `Widget.render_lines(crop)` returns; None where its path is needed."""
        if not self.vertical or self.opacity != 1.0 or not plain(self) or any(self.styles.padding):
            return None
        try:
            if self.parent is None or self.screen.styles.scrollbar_color.a == 0:
                return None  # (without a screen: torn down; a clear bar: `render` leaves sizes out)
        except NoScreen:
            return None
        renderable = self.render()
        if not isinstance(renderable, ScrollBarRender) or not isinstance(renderable.style, RichStyle):
            return None
        style = renderable.style
        width, height = self.region.size
        base_background, background = self.background_colors
        look = _Look(
            width,
            self.visual_style.rich_style,
            Style(background=base_background + background).rich_style,
            background,
            tuple(self.get_line_filters()),
        )
        if look != self._look:
            self._look = look
            self._rows.clear()
        key = (look, height, renderable.virtual_size, renderable.window_size, renderable.position, style)
        if self._last is not None and self._last[0] == key:
            lines = self._last[1]
        else:
            bar = renderable.render_bar(
                size=height,
                virtual_size=renderable.virtual_size,
                window_size=renderable.window_size,
                position=renderable.position,
                thickness=width,
                vertical=True,
                back_color=style.bgcolor or DEFAULT_BACK,
                bar_color=style.color or DEFAULT_BAR,
            )
            rows = self._rows
            lines = []
            for segment in bar.segments:
                line = rows.get(segment)
                if line is None:
                    line = rows[segment] = self._finish(segment, look)
                lines.append(line)
            self._last = (key, lines)
        picked = lines[crop.y : crop.bottom]
        if len(picked) < crop.height:  # past the last row: what the styles cache draws there
            blank = self._rows.get(_PAST)
            if blank is None:
                blank = self._rows[_PAST] = look.filter(Strip.blank(width, look.fill))
            picked += [blank] * (crop.height - len(picked))
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            picked = [line.crop(x1, x2) for line in picked]
        return picked

    @staticmethod
    def _finish(segment: Segment, look: _Look) -> Strip:
        """One row as Textual passes it on: on the widget's own style (`Widget.post_render`),
        fitted and filtered (the styles cache)."""
        text, style, _ = segment
        strip = Strip([Segment(text, look.base + style if style else look.base)])
        return look.filter(strip.adjust_cell_length(look.width, look.fill))


_PAST = Segment("")  # the key of the line drawn past the last row


class _Look(NamedTuple):
    """What a row's finished line depends on besides the row."""

    width: int
    base: RichStyle  # the scrollbar widget's own style, under each row's
    fill: RichStyle  # the background of cells a row leaves empty
    background: Color  # what the line filters blend with
    filters: tuple[LineFilter, ...]

    def filter(self, strip: Strip) -> Strip:
        return filtered(strip, self.filters, self.background)


class QuickScrollBars(Widget):
    """Mix into a scrolling view to give it a `QuickScrollBar`; list it after the view's Textual
    base. Where a Textual release builds the scrollbar differently, the view keeps Textual's."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        # As `Widget.vertical_scrollbar` makes it, of this class.
        if BUILDS_SCROLLBARS and getattr(self, "_vertical_scrollbar", False) is None:
            bar = QuickScrollBar(vertical=True, name="vertical", thickness=self.scrollbar_size_vertical)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return super().vertical_scrollbar

"""A long listing (two contexts compared) drawn a screen at a time: a row becomes a line only
when it is on screen, cut to the view's width then. As one `Static`, the comparison of a deep
session's leaf with its start (72,726 lines) froze the app 40–60 s to lay it out, and again on
every resize."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..compare import Row
from ..display import inert
from .cells import shortened

MADE_MOST = 1024  # lines kept made: a few screens, whatever the length of the listing
STYLES = {"-": Style.parse("red"), "+": Style.parse("green"), "=": Style.parse("dim")}


class LinesView(ScrollView, can_focus=True):
    """Rows drawn by `Row.line` at the width there is; scrolled with the keys of any scrollable
    container (↑ ↓ PgUp PgDn Home End)."""

    def __init__(self, rows: Sequence[Row], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows = rows
        self._made: LRUCache[int, Strip] = LRUCache(MADE_MOST)  # row -> its line at `_width`
        self._width = 0

    def on_resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        i = self.scroll_offset.y + y
        if i >= len(self.rows) or width <= 0:
            return Strip.blank(max(width, 0), self.rich_style)
        if width != self._width:
            self._made.clear()
            self._width = width
        strip = self._made.get(i)
        if strip is None:
            line = inert(self.rows[i].line(width))
            line = shortened(line, width)  # a header, which the CLI prints whole
            text = Text(line, style=STYLES.get(line[:1], ""), no_wrap=True, end="")
            strip = Strip(text.render(self.app.console)).crop_extend(0, width, self.rich_style)
            self._made[i] = strip
        return strip

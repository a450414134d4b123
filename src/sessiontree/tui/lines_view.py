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
    """`head` lines wrapped whole to the width there is (what is compared: cut to a row, they
    lost their ends), then rows drawn by `Row.line` cut to it; scrolled with the keys of any
    scrollable container (↑ ↓ PgUp PgDn Home End). The head scrolls with the rows: held above
    them, its 11 lines left a comparison 4 rows at 80x24 (QA)."""

    def __init__(self, rows: Sequence[Row], *, head: Sequence[str] = (), id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows = rows
        self.head = head
        self._head_lines: list[Strip] = []  # `head` wrapped at `_width`, a blank line after it
        self._made: LRUCache[int, Strip] = LRUCache(MADE_MOST)  # row -> its line at `_width`
        self._width = 0

    @property
    def line_count(self) -> int:
        """Lines to scroll through: the head's, wrapped, and the rows."""
        return len(self._head_lines) + len(self.rows)

    def on_resize(self) -> None:
        self._rewrap(self.scrollable_content_region.width)
        self.virtual_size = Size(self.scrollable_content_region.width, self.line_count)

    def _rewrap(self, width: int) -> None:
        if width == self._width:
            return
        self._made.clear()
        self._width = width
        self._head_lines = []
        if not self.head or width <= 0:
            return
        console = self.app.console
        for line in self.head:
            text = Text(inert(line), style=STYLES.get(line[:1], ""), end="")
            for piece in text.wrap(console, width):
                self._head_lines.append(Strip(piece.render(console)).crop_extend(0, width, self.rich_style))
        self._head_lines.append(Strip.blank(width, self.rich_style))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        self._rewrap(width)
        i = self.scroll_offset.y + y
        if i < len(self._head_lines):
            return self._head_lines[i]
        i -= len(self._head_lines)
        if i >= len(self.rows) or width <= 0:
            return Strip.blank(max(width, 0), self.rich_style)
        strip = self._made.get(i)
        if strip is None:
            line = inert(self.rows[i].line(width))
            line = shortened(line, width)  # a header, which the CLI prints whole
            text = Text(line, style=STYLES.get(line[:1], ""), no_wrap=True, end="")
            strip = Strip(text.render(self.app.console)).crop_extend(0, width, self.rich_style)
            self._made[i] = strip
        return strip

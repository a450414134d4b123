"""The status line: one row above the footer that says what the last key did.

Confirmations used to be Textual toasts. At 80x24, Enter on a retry, `b` and `z` stacked four of
them over the whole preview for their five seconds, and each toast mounted widgets and laid the
screen out again when it came and again when it went (8-18 ms in a real terminal on a deep 100k
tree, 160x50). This row keeps its size, so a message repaints one line and nothing moves; a new
message replaces the last, which dims when its time is up rather than vanishing, for a user who
looks down late (as in lazygit's and k9s's status lines).

Warnings and errors stay toasts: they are rare, may be long, and should be hard to miss.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

FRESH_SECONDS = 5.0


class StatusLine(Static):
    """The last confirmation, bright for its time and dim after it; before the first one, a
    dim hint (`hint`) for a newcomer: the first of its wordings that fits the row, longest
    first, so that a narrow terminal reads a whole short one rather than a long one cut."""

    COMPONENT_CLASSES = {"status--old"}

    def __init__(self, hint: Sequence[str] = ("",), *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.message = ""  # the last confirmation said; the hint is not one
        self._hint = tuple(hint)
        self._aging: Timer | None = None

    def on_mount(self) -> None:
        if not self.message:
            self._rest()

    def on_resize(self, event: events.Resize) -> None:
        if not self.message:
            self._rest()

    def say(self, message: str, *, timeout: float = FRESH_SECONDS) -> None:
        """Show `message` in place of the last one; it dims after `timeout` seconds."""
        if self._aging is not None:
            self._aging.stop()
        self.message = message
        self._draw(message, old=False)
        self._aging = self.set_timer(timeout, self._age)

    def hint(self, wordings: Sequence[str]) -> None:
        """Hold `wordings` as the hint, shown now if nothing has been said yet."""
        self._hint = tuple(wordings)
        if not self.message:
            self._rest()

    def withdraw(self, prefix: str) -> None:
        """Take the last message back if it starts with `prefix`: it said something about a
        state that has ended ("No fork below this row" after a jump that found one), which
        left there would read as the key having failed."""
        if self.message and self.message.startswith(prefix):
            if self._aging is not None:
                self._aging.stop()
                self._aging = None
            self.message = ""
            self._rest()

    def _rest(self) -> None:
        """Nothing said (yet, or any longer): the hint, dim."""
        room = self.content_size.width
        fits = (text for text in self._hint if cell_len(text) <= room)
        self._draw(next(fits, self._hint[-1]), old=True)

    def _age(self) -> None:
        self._aging = None
        self._draw(self.message, old=True)

    def _draw(self, text: str, *, old: bool) -> None:
        style = self.get_component_rich_style("status--old", partial=True) if old else ""
        # The row keeps its size whatever it says: a repaint, not a layout of the screen.
        self.update(Text(text, style=style, no_wrap=True, overflow="ellipsis", end=""), layout=False)


def withdraw(widget: Widget, prefix: str) -> None:
    """`StatusLine.withdraw` on the status line of `widget`'s screen, if it has one."""
    for line in widget.screen.query(StatusLine):
        line.withdraw(prefix)


def confirm(widget: Widget, message: str, *, timeout: float = FRESH_SECONDS) -> None:
    """Say `message` on the status line of `widget`'s screen; a toast where there is none."""
    try:
        line = widget.screen.query_one(StatusLine)
    except NoMatches:
        widget.notify(message, markup=False, timeout=timeout)
        return
    line.say(message, timeout=timeout)

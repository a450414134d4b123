"""The browser's header: Textual's, with a title line that redraws only itself."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.visual import VisualType
from textual.widgets import Header
from textual.widgets._header import HeaderClockSpace, HeaderIcon, HeaderTitle


class _Title(HeaderTitle):
    """Its size is the header's (all the width, one row), so the layout that `Static.update`
    asks for by default changes nothing, yet it lays out and redraws the whole screen: on every
    leaf move, filter change and followed append, whose only change is this line."""

    def update(self, content: VisualType = "", *, layout: bool = False) -> None:
        super().update(content, layout=layout)


class SessionHeader(Header):
    """`Header` without a clock, whose title line redraws alone (see `_Title`)."""

    def compose(self) -> ComposeResult:
        yield HeaderIcon().data_bind(Header.icon)
        yield _Title()
        yield HeaderClockSpace()

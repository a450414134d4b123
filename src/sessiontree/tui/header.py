"""The browser's header: Textual's, with a title line that redraws only itself."""

from __future__ import annotations

import contextlib

from textual.app import ComposeResult
from textual.content import Content
from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.events import Mount
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

    def _on_mount(self, event: Mount) -> None:
        """Header's own, whose title update also passes over a title line not there: a session
        opened as the app quit had its title set after the line was gone, and the app ended in
        a NoMatches traceback (seen in a test that quits at once)."""
        event.prevent_default()  # Header's handler, which runs after this one

        async def set_title() -> None:
            with contextlib.suppress(NoScreen, NoMatches):
                self.query_one(HeaderTitle).update(self.format_title())

        for source in (self.app, self.screen):
            self.watch(source, "title", set_title)
            self.watch(source, "sub_title", set_title)

    def format_title(self) -> Content:
        """The app's, but a sub-title without a title is shown without the dash before it: the
        browser leaves the session's name out where the state beside it needs the row."""
        title, sub_title = self.screen_title, self.screen_sub_title
        if not title and sub_title:
            return Content(sub_title).stylize("dim")
        return self.app.format_title(title, sub_title)

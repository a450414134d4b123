"""The browser application: one `BrowserScreen` per open session, the session picker, and the
keys that work everywhere (help, quit).

The app talks only to `Session` (through the screens) and to the opener it is given. Reads that
may be slow on big sessions (context previews, search) run in thread workers; writes (moves,
labels, names) happen on the UI thread, where they take about a millisecond.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from ..model.errors import SessionError
from ..session import Session
from .browser import BrowserScreen
from .help import HelpScreen
from .keymap import load_keymap
from .picker import PickerScreen


class SessionTreeApp(App[None]):
    """`sessiontree FILE` (or a directory: the picker first)."""

    CSS_PATH = "app.tcss"  # next to this module; Textual resolves it relative to the class
    TITLE = "sessiontree"

    # Bindings of the app come first in the footer: help and quit stay visible at any width.
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(
        self,
        session: Session | None,
        *,
        summarizer: str | None = None,
        follow: bool = True,
        picker_dir: Path | None = None,
        note: str | None = None,
        opener: Callable[[Path], Session] | None = None,
        keymap_path: Path | None = None,
    ) -> None:
        super().__init__()
        self._first_session = session
        self.summarizer = summarizer
        self.follow = follow
        self.picker_dir = picker_dir
        self.note = note
        self.opener = opener  # Path -> Session; used when another session is picked
        self.keymap_path = keymap_path
        self.demo_dir: Path | None = None  # set by the launcher for the bundled demo

    @property
    def browser(self) -> BrowserScreen | None:
        """The browser screen of the open session (None while only the picker is open)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, BrowserScreen):
                return screen
        return None

    @property
    def session(self) -> Session | None:
        browser = self.browser
        return browser.session if browser is not None else self._first_session

    def on_mount(self) -> None:
        keymap, problems = load_keymap(self.keymap_path)
        if keymap:
            self.set_keymap(keymap)
        for problem in problems:
            self.notify(problem, title="Key bindings", severity="warning", markup=False, timeout=8)
        session, self._first_session = self._first_session, None
        if session is None:
            self.push_screen(PickerScreen(self.picker_dir or Path.cwd()), self._picked)
            return
        self._show(session)
        if self.note:
            self.notify(self.note, title="sessiontree", markup=False, timeout=8)

    def _show(self, session: Session) -> None:
        screen = BrowserScreen(session, summarizer=self.summarizer, follow=self.follow)
        if self.browser is None:
            self.push_screen(screen)
        else:
            self.switch_screen(screen)  # the old browser unmounts and closes its session

    async def _picked(self, path: Path | None) -> None:
        if path is None:
            if self.browser is None:
                self.exit()
            return
        try:
            session = self.opener(path) if self.opener else None
        except SessionError as exc:
            self.notify(str(exc), severity="error", markup=False)
            self.push_screen(PickerScreen(path.parent, can_go_back=self.browser is not None), self._picked)
            return
        if session is not None:
            self._show(session)

    def action_open_other(self) -> None:
        directory = self.picker_dir
        session = self.session
        if directory is None and session is not None and session.storage.location:
            directory = Path(session.storage.location).parent
        self.push_screen(PickerScreen(directory or Path.cwd(), can_go_back=True), self._picked)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen.for_screen(self.screen))

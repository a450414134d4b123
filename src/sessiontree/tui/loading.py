"""What the app shows while a session is being opened: a large file takes seconds to index, and a
blank terminal for that long reads as a hang. The screen paints at once, says what is being
opened, how far the indexing is (bytes and an estimate) and how to leave; a failed open is
said here in one line instead of a traceback."""

from __future__ import annotations

import time

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

TYPED_MOST = 64  # keys kept while the session opens
LEAVING = frozenset({"escape", "q", "ctrl+q", "ctrl+c"})  # they act at once (quit), not later


class LoadingScreen(Screen[None]):
    """Opening `label`: a progress bar the opener's worker moves with `advance`. Keys typed
    meanwhile are kept in `typed`, for the browser once it is up (as a terminal keeps what is
    typed ahead): they were lost, and a served page's first keys with them."""

    BINDINGS = [Binding("escape", "app.quit", "Quit", show=False)]
    AUTO_FOCUS = None

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label
        self._started = time.monotonic()
        self.typed: list[events.Key] = []

    def compose(self) -> ComposeResult:
        # Only plain widgets: a small session replaces this screen within milliseconds, and
        # Textual's Header and Footer finish mounting in tasks that fail once it is gone.
        with Vertical(id="loading"):
            yield Static(Text(f"Opening {self.label}"), id="loading-title")
            yield ProgressBar(total=None, show_eta=False, id="loading-bar")
            yield Static("reading…", id="loading-status")
            yield Static("q or Esc quits; other keys act once it is open", id="loading-keys")

    def on_key(self, event: events.Key) -> None:
        if event.key in ("ctrl+c", "ctrl+q"):  # Textual's Ctrl+C only says "press q" (unseen here)
            event.stop()
            self.app.exit()
            return
        if event.key in LEAVING:
            return  # on to the bindings
        event.stop()  # not to the app's bindings now (help would open over this screen)
        event.prevent_default()
        if len(self.typed) < TYPED_MOST:
            self.typed.append(events.Key(event.key, event.character))

    def advance(self, done: int, total: int) -> None:
        """`done` of `total` bytes indexed."""
        self.query_one(ProgressBar).update(total=max(total, 1), progress=done)
        elapsed = time.monotonic() - self._started
        text = f"{done / 1e6:,.0f} of {total / 1e6:,.0f} MB indexed"
        if done and elapsed > 0.5 and done < total:
            left = elapsed * (total - done) / done
            if left >= 1:  # "about 0 s left" stood for seconds while the last bytes were indexed
                text += f" · about {left:.0f} s left"
        self.query_one("#loading-status", Static).update(Text(text))

    def failed(self, message: str) -> None:
        """The open failed: say why; q or Esc leaves."""
        self.query_one(ProgressBar).display = False
        self.query_one("#loading-title", Static).update(Text(f"Cannot open {self.label}"))
        status = self.query_one("#loading-status", Static)
        status.update(Text(message))
        status.add_class("-error")
        # not "other keys act once it is open": it will not open
        self.query_one("#loading-keys", Static).update(Text("q or Esc quits"))

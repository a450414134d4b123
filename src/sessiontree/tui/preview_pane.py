"""The right-hand pane: a title line and the preview of what the model would see at the entry
under the cursor. Owns the debounce (a rebuild starts after the cursor rests) and the worker that
builds the lines off the UI thread, so cursor moves never wait for a context to be built."""

from __future__ import annotations

import contextlib

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import get_current_worker

from ..model.errors import SessionError
from ..session import Session
from . import deliver
from .preview import Line, PreviewMode, PreviewView, context_lines, llm_lines, raw_lines
from .tree_view import RowTarget

PREVIEW_LIMIT = 400  # context entries decoded for a preview before "e" asks for all
PREVIEW_DELAY = 0.05  # seconds of cursor rest before the preview is rebuilt


class PreviewPane(Vertical):
    """Title + `PreviewView` for one session; `show(target)` follows the tree's cursor."""

    mode: reactive[PreviewMode] = reactive(PreviewMode.CONTEXT, init=False)
    expanded: reactive[bool] = reactive(False, init=False)

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self.target: RowTarget | None = None
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="preview-title", markup=False)
        yield PreviewView(id="preview")

    def show(self, target: RowTarget) -> None:
        """The cursor is on `target`: rebuild once it has rested for PREVIEW_DELAY."""
        self.target = target
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(PREVIEW_DELAY, self.rebuild)

    def rebuild(self) -> None:
        target = self.target
        if target is None:
            return
        try:
            title = self.query_one("#preview-title", Static)
        except NoMatches:  # a timer firing while the app shuts down
            return
        extra = " · expanded" if self.expanded else ""
        title.update(Text(f"{self.mode.value} · at {target.entry_id}{extra}"))
        self._build(target, self.mode, self.expanded)

    def watch_mode(self) -> None:
        self.rebuild()

    def watch_expanded(self) -> None:
        self.rebuild()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self.workers.cancel_group(self, "preview")

    @work(thread=True, exclusive=True, group="preview")
    def _build(self, target: RowTarget, mode: PreviewMode, expanded: bool) -> None:
        worker = get_current_worker()
        session = self.session
        try:
            if mode is PreviewMode.RAW:
                entry = session.entry_at(target.position)
                lines = raw_lines(entry, session.line_number(entry.id), expanded)
            else:
                context = session.build_context(at=target.entry_id, limit=None if expanded else PREVIEW_LIMIT)
                make = context_lines if mode is PreviewMode.CONTEXT else llm_lines
                lines = make(context, target.entry_id, expanded)
        except SessionError as exc:
            lines = [Line(f"cannot build the preview: {exc}", "preview--error")]
        if not worker.is_cancelled:
            deliver(self.app, self._deliver, target, lines)

    def _deliver(self, target: RowTarget, lines: list[Line]) -> None:
        if self.target != target:
            return
        with contextlib.suppress(NoMatches):  # the screen closed while the worker ran
            self.query_one(PreviewView).set_lines(lines)

"""The right-hand pane: a title line and the preview of what the model would see at the entry
under the cursor. Owns the debounce (a rebuild starts after the cursor rests) and the worker that
plans and renders the preview off the UI thread, so cursor moves never wait for a context to be
built or for Markdown and code to be rendered: the UI thread only swaps in finished rows."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.theme import Theme
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import get_current_worker

from ..model.entries import MessageEntry
from ..model.errors import SessionError
from ..query import Query
from ..session import Session
from . import deliver
from .input_gate import gated
from .preview import (
    COLLAPSED,
    ENTRY,
    ENTRY_ALL,
    EXPANDED,
    Part,
    Plan,
    PreviewMode,
    PreviewView,
    RenderCache,
    Rendered,
    Renderer,
    Scope,
    plan_context,
    plan_entry,
    plan_raw,
    render_plan,
    tool_call_index,
    warm_up,
)
from .tree_view import RowTarget

PREVIEW_DELAY = 0.05  # seconds of cursor rest before the preview is rebuilt, while keys repeat
# While the cursor follows an agent's turns to the leaf, the preview is rebuilt at most this
# often: once a turn, a context and its frames cost 60-100 ms of CPU a turn, half a core at 20
# turns a second (QA, a viewer left open beside the agent).
FOLLOW_PREVIEW_SECONDS = 0.5
FOLLOW_SOONEST = 0.01  # the shortest wait for that rebuild
SLOW_PREVIEW = 0.3  # seconds without a row of a rebuild before its title says it is working
WORKING = "working… "  # put before the title meanwhile: a cut title keeps it in view


@dataclass(frozen=True, slots=True)
class Request:
    """One rebuild: what to show and for which size."""

    target: RowTarget
    mode: PreviewMode
    scope: Scope
    expanded: bool
    width: int
    height: int
    dark: bool
    generation: int
    leaf: str | None = None  # the session's leaf when asked: read on the UI thread, not the worker's
    find: Query | None = None  # the search whose words are marked (see `Detail.find`)
    started: float = field(default_factory=time.perf_counter)

    @property
    def view(self) -> tuple[object, ...]:
        return (self.target, self.mode, self.scope, self.expanded)


class PreviewPane(Vertical):
    """Title + `PreviewView` for one session; `show(target)` follows the tree's cursor."""

    mode: reactive[PreviewMode] = reactive(PreviewMode.CONTEXT, init=False)
    expanded: reactive[bool] = reactive(False, init=False)
    scope: reactive[Scope] = reactive(Scope.CONTEXT, init=False)

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self.target: RowTarget | None = None
        self._timer: Timer | None = None
        self._last_show = 0.0
        self._last_rebuild = 0.0  # when the preview was last rebuilt (`show(followed=True)`)
        self._follow_timer: Timer | None = None  # a rebuild due for the turns that came meanwhile
        self._generation = 0
        self._shown: tuple[object, ...] | None = None  # the `view` of the rows on screen
        self._title_text = ""  # the title as the last rebuild set it
        self._waiting = -1  # the generation whose rows have not come yet (-1: none)
        self._slow: Timer | None = None  # fires SLOW_PREVIEW after a rebuild started
        self.cache = RenderCache()
        # When the last rebuild started, first showed rows, and finished (perf_counter seconds):
        # read by the benchmarks and the tests.
        self.timings: dict[str, float] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="preview-title", markup=False)
        yield PreviewView(id="preview")

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        self.call_after_refresh(self._warm_up)

    @work(thread=True, group="preview-warm-up")
    def _warm_up(self) -> None:
        """Render a little Markdown and code once, after the first paint: the first render
        otherwise pays for importing Pygments' lexers and styles (~50 ms)."""
        warm_up(dark=self.app.current_theme.dark)

    def _theme_changed(self, theme: Theme) -> None:
        self.rebuild()  # code is highlighted with a dark or a light palette

    def show(self, target: RowTarget, *, followed: bool = False) -> None:
        """The cursor is on `target`. A move after a pause rebuilds at once; moves in quick
        succession (a held key) rebuild once the cursor has rested for PREVIEW_DELAY. A render
        still running for the previous entry stops now, not when the next one starts.
        `followed`: the cursor followed new entries to the leaf (live follow): rebuilt at most
        every FOLLOW_PREVIEW_SECONDS, for the newest of them."""
        self.target = target
        if followed:
            if self._follow_timer is None:
                wait = self._last_rebuild + FOLLOW_PREVIEW_SECONDS - time.monotonic()
                # never 0: Textual's timer divides by its delay (a ZeroDivisionError in its
                # task, and no rebuild at all)
                self._follow_timer = self.set_timer(max(wait, FOLLOW_SOONEST), self._followed)
            return
        if self._follow_timer is not None:  # a key: its own rebuild replaces the one due
            self._follow_timer.stop()
            self._follow_timer = None
        if self._timer is not None:
            self._timer.stop()
        self.workers.cancel_group(self, "preview")
        now = time.monotonic()
        # The first show waits too: the screen is still being laid out and styled.
        rested = self._last_show > 0 and now - self._last_show > PREVIEW_DELAY
        self._last_show = now
        if rested:
            self.rebuild()
        else:
            self._timer = self.set_timer(PREVIEW_DELAY, self.rebuild)

    def show_none(self, why: str) -> None:
        """No row is shown (a filter that leaves none): nothing is previewed, and the title says
        why. The entry the cursor had left went on being previewed, under a tree that showed
        nothing (QA). `show` brings the preview back."""
        self.target = None
        for timer in (self._timer, self._follow_timer, self._slow):
            if timer is not None:
                timer.stop()
        self._follow_timer = None
        self.workers.cancel_group(self, "preview")
        self._shown, self._waiting = None, -1
        with contextlib.suppress(NoMatches):
            self._title_text = f"nothing selected: {why}"
            self.query_one("#preview-title", Static).update(Text(self._title_text), layout=False)
            self.query_one(PreviewView).display = False

    def _followed(self) -> None:
        self._follow_timer = None
        self.workers.cancel_group(self, "preview")
        self.rebuild()

    def rebuild(self) -> None:
        target = self.target
        if target is None:
            return
        try:
            title = self.query_one("#preview-title", Static)
            view = self.query_one(PreviewView)
        except NoMatches:  # a timer firing while the app shuts down
            return
        if not view.display:  # back from `show_none`
            view.display = True
            self.call_after_refresh(self.rebuild)  # laid out again first
            return
        if view.scrollable_content_region.width <= 0:  # not laid out yet: render for its width
            self.call_after_refresh(self.rebuild)
            return
        # One row cut to its width: no layout (a whole-screen redraw on every cursor move).
        self._title_text = self._title(target, title.size.width or view.size.width)
        title.update(Text(self._title_text), layout=False)
        self._generation += 1
        self._last_rebuild = time.monotonic()
        # The whole context expanded on a deep session is seconds of work before its first row:
        # the title says so meanwhile, where the rows of the last view stayed without a word.
        self._waiting = self._generation
        if self._slow is not None:
            self._slow.stop()
        self._slow = self.set_timer(SLOW_PREVIEW, self._still_working)
        request = Request(
            target,
            self.mode,
            self.scope,
            self.expanded,
            view.render_width(),
            max(view.scrollable_content_region.height, 10),
            self.app.current_theme.dark,
            self._generation,
            self.session.leaf_id,
            view.highlight,
        )
        self.timings = {"start": request.started}
        self._build(request)

    def mark(self, query: Query | None) -> None:
        """Mark the words of `query` in the rows (None: none), and say in the markers of cut
        bodies when those words are in what is cut."""
        view = self.query_one(PreviewView)
        if query is not view.highlight:
            view.highlight = query
            self.rebuild()

    def _title(self, target: RowTarget, width: int) -> str:
        """The mode and what is shown; then, where it fits in `width`, what `v` switches to."""
        if self.mode is PreviewMode.RAW:
            where = f"at {target.entry_id}"
        elif self.scope is Scope.ENTRY:
            where = f"entry {target.entry_id}"
        else:
            where = f"up to {target.entry_id}"
        extra = " · expanded" if self.expanded else ""
        hint = (
            ""
            if self.mode is PreviewMode.RAW
            else f" · v: {'context' if self.scope is Scope.ENTRY else 'entry'}"
        )
        title = f"{self.mode.value} · {where}{extra}"
        return title + hint if len(title + hint) <= width else title

    def watch_mode(self) -> None:
        self.rebuild()

    def watch_expanded(self) -> None:
        self.rebuild()

    def watch_scope(self) -> None:
        self.rebuild()

    def action_toggle_scope(self) -> None:
        """Between the selected entry alone (whole) and the context up to it."""
        self.scope = self.scope.next()

    def action_toggle_expanded(self) -> None:
        self.expanded = not self.expanded

    @on(PreviewView.WidthChanged)
    def _width_changed(self) -> None:
        self.rebuild()

    def stop(self) -> None:
        for timer in (self._timer, self._slow, self._follow_timer):
            if timer is not None:
                timer.stop()
        self.workers.cancel_group(self, "preview")

    # --- the worker ---------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="preview")
    def _build(self, request: Request) -> None:
        worker = get_current_worker()
        # A key's handler may start this worker; planning (finding the context and its parts)
        # before that key's frame is out would share the interpreter lock with drawing it
        # (`tui/input_gate.py`).
        cancelled = gated(self.app, lambda: worker.is_cancelled)
        if cancelled():
            return
        try:
            plan = self._plan(request)
        except SessionError as exc:
            message = f"cannot build the preview: {exc}"
            plan = Plan([Part(lambda r: r.plain(message, "preview--error"))])
        except Exception as exc:  # a planning bug on odd data costs the preview, not the app
            message = f"cannot build the preview ({type(exc).__name__})"
            plan = Plan([Part(lambda r: r.plain(message, "preview--error"))])
        renderer = Renderer(request.width, dark=request.dark, cache=self.cache)

        def emit(rendered: Rendered) -> None:
            if not worker.is_cancelled:
                deliver(self.app, self._deliver, request, rendered)

        # Between parts, a key being handled is waited out first.
        render_plan(plan, renderer, request.height, emit, cancelled)

    def _plan(self, request: Request) -> Plan:
        session = self.session
        target = request.target
        entry = session.entry_at(target.position)
        if request.mode is PreviewMode.RAW:
            return plan_raw(entry, session.line_number(entry.id), request.expanded, session.format_version)
        as_sent = request.mode is PreviewMode.LLM
        if request.scope is Scope.ENTRY:
            calls = {}
            if isinstance(entry, MessageEntry) and entry.role == "toolResult" and entry.parent_id:
                parent = session.get_entry(entry.parent_id)  # the call, to know a read's file name
                if isinstance(parent, MessageEntry):
                    calls = tool_call_index([parent.message])
            detail = replace(ENTRY_ALL if request.expanded else ENTRY, find=request.find)
            return plan_entry(entry, session.line_number(entry.id), detail, as_sent=as_sent, calls=calls)
        detail = replace(EXPANDED if request.expanded else COLLAPSED, find=request.find)
        context = session.build_context(at=target.entry_id, limit=detail.entries)
        is_leaf = target.entry_id == request.leaf
        return plan_context(context, entry, detail, as_sent=as_sent, is_leaf=is_leaf)

    def _still_working(self) -> None:
        if self._waiting == self._generation:
            with contextlib.suppress(NoMatches):
                title = self.query_one("#preview-title", Static)
                title.update(Text(f"{WORKING}{self._title_text}"), layout=False)

    def _deliver(self, request: Request, rendered: Rendered) -> None:
        if request.generation != self._generation:
            return  # a newer rebuild started: these rows are for something else
        if self._waiting == request.generation:
            self._waiting = -1
            with contextlib.suppress(NoMatches):
                self.query_one("#preview-title", Static).update(Text(self._title_text), layout=False)
        with contextlib.suppress(NoMatches):  # the screen closed while the worker ran
            view = self.query_one(PreviewView)
            # Another entry, mode or scope is placed afresh; the same one again (a resize, a
            # write, more rows of this render) keeps what the reader scrolled to.
            view.show_rows(rendered, fresh=self._shown != request.view)
            self._shown = request.view
            now = time.perf_counter()
            self.timings.setdefault("first", now)
            if rendered.complete:
                self.timings["done"] = now

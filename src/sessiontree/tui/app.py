"""The browser: the whole append log on the left, what the model would see on the right.

The app talks only to `Session`. Reads that may be slow on big sessions (context previews,
search) run in thread workers; writes (moves, labels, names) happen on the UI thread, where they
take about a millisecond.
"""

from __future__ import annotations

import contextlib
import gc
import re
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Static
from textual.worker import get_current_worker

from ..display import entry_preview, entry_summary, inert, one_line
from ..model.errors import SessionError
from ..outline import Filter
from ..session import BranchSummary, Session
from ..summarize import collect_branch, summarize_branch
from . import deliver
from .modals import HelpScreen, HistoryItem, HistoryScreen, SummaryChoice, SummaryPrompt, TextPrompt
from .picker import PickerScreen
from .preview import Line, PreviewMode, PreviewView, context_lines, llm_lines, raw_lines
from .tree_view import RowTarget, SessionTreeView

PREVIEW_LIMIT = 400  # context entries decoded for a preview before "e" asks for all
PREVIEW_DELAY = 0.05  # seconds of cursor rest before the preview is rebuilt

HELP = """\
Tree                              Moving the leaf
  ↑ ↓ j k      move the cursor       Enter   move the leaf here (Pi's rules: a user
  PgUp PgDn    page                          message puts the leaf on its parent and
  g G          first / last row              offers its text to re-send)
  h ←          parent entry          s       move, with a branch summary prompt
  [ ]          previous / next fork  b       back to the previous leaf
  space        fold / unfold         H       navigation history (recorded leaf moves)
  a            jump to the active leaf
  f            cycle the filter      Entries
  / n N        search, next, prev      m     set or clear a label
                                       r     rename the session
Preview
  p            context / as sent (convert_to_llm) / raw JSON
  e            expand long messages (or load a huge context whole)
  tab          switch focus tree ↔ preview

  o            open another session   q   quit
"""


class SessionTreeApp(App[None]):
    """`sessiontree FILE`."""

    CSS_PATH = "app.tcss"  # next to this module; Textual resolves it relative to the class
    TITLE = "sessiontree"

    BINDINGS = [
        Binding("enter", "move", "Move here"),
        Binding("s", "move_with_summary", "Move+summary"),
        Binding("f", "set_filter('user messages')", "Filter: default"),
        Binding("f", "set_filter('everything')", "Filter: user msgs"),
        Binding("f", "set_filter('labeled')", "Filter: everything"),
        Binding("f", "set_filter('default')", "Filter: labeled"),
        Binding("slash", "search", "Search"),
        Binding("n", "next_match(1)", "Next match", show=False),
        Binding("N", "next_match(-1)", "Previous match", show=False),
        Binding("m", "label", "Label"),
        Binding("r", "rename", "Rename"),
        Binding("b", "leaf_back", "Back"),
        Binding("H", "history", "History"),
        Binding("p", "preview_mode", "Preview"),
        Binding("e", "expand", "Expand", show=False),
        Binding("o", "open_other", "Open", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    preview_mode: reactive[PreviewMode] = reactive(PreviewMode.CONTEXT, init=False)
    expanded: reactive[bool] = reactive(False, init=False)

    def __init__(
        self,
        session: Session | None,
        *,
        summarizer: str | None = None,
        follow: bool = True,
        picker_dir: Path | None = None,
        note: str | None = None,
        opener: Callable[[Path], Session] | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.summarizer = summarizer
        self.follow = follow
        self.picker_dir = picker_dir
        self.note = note
        self.opener = opener  # Path -> Session; used when another session is picked
        self.demo_dir: Path | None = None  # set by the launcher for the bundled demo
        self._preview_timer: Timer | None = None
        self._preview_target: RowTarget | None = None
        self._back_cursor: int | None = None
        self._matches: list[int] = []
        self._damage_told = False
        self._follow_wait = 0.0

    # --- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(icon="├")
        yield Static("", id="banner", markup=False)
        with Horizontal(id="main"):
            if self.session is not None:
                yield SessionTreeView(self.session, id="tree")
            with Vertical(id="side"):
                yield Static("", id="preview-title", markup=False)
                yield PreviewView(id="preview")
        yield Input(placeholder="search entries (Enter: find, Esc: close)", id="search")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#search", Input).display = False
        if self.follow:
            self.set_interval(0.5, self._poll)
        if self.session is None:
            self.push_screen(PickerScreen(self.picker_dir or Path.cwd()), self._picked)
            return
        self._session_ready()

    def _session_ready(self) -> None:
        session = self.session
        assert session is not None
        self._update_header()
        tree = self.query_one(SessionTreeView)
        tree.focus()
        tree.rebuild(keep=session.tree.leaf if session.tree.leaf >= 0 else 0)
        # Everything alive now (the widget tree, the session index) lives as long as the app:
        # take it out of the garbage collector's full passes, which otherwise walk it every time
        # and stall scrolling for 50-200 ms on big sessions (measured in bench/run.py).
        gc.freeze()
        self.call_after_refresh(self._verify)  # after the first paint: it competes for the GIL
        if self.note:
            self.notify(self.note, title="sessiontree", markup=False, timeout=8)

    async def _picked(self, path: Path | None) -> None:
        if path is None:
            if self.session is None:
                self.exit()
            return
        try:
            session = self.opener(path) if self.opener else None
        except SessionError as exc:
            self.notify(str(exc), severity="error", markup=False)
            self.push_screen(PickerScreen(path.parent), self._picked)
            return
        if session is None:
            return
        old = self.session
        self.session = session
        self._matches, self._back_cursor, self._damage_told = [], None, False
        if old is not None:
            self.workers.cancel_group(self, "preview")
            await self.query_one(SessionTreeView).remove()
            old.close()
        await self.query_one("#main").mount(SessionTreeView(session, id="tree"), before=0)
        self._session_ready()

    @work(thread=True, exclusive=True, group="verify")
    def _verify(self) -> None:
        """The checks left for after the first paint (the UTF-8 of message text)."""
        session = self.session
        if session is None:
            return
        session.finish_verification()
        deliver(self, self._damage_found)

    @on(SessionTreeView.Damaged)
    def _damage_found(self) -> None:
        """Damage can surface after the first paint (the deferred UTF-8 check, an entry that
        fails to decode): show the read-only banner as soon as it does, and say it once."""
        self._update_header()
        session = self.session
        if session is not None and session.read_only and not self._damage_told:
            self._damage_told = True
            self.notify(session.read_only_reason or "", title="Read-only", severity="warning", markup=False)

    # --- header -------------------------------------------------------------------------------

    def _update_header(self) -> None:
        session = self.session
        if session is None:
            return
        location = Path(session.storage.location or "?").name
        self.title = inert(session.session_name or "(unnamed session)")
        leaf = session.leaf_id or "(none)"
        parts = [location, f"{session.entry_count():,} entries", f"leaf {leaf}"]
        if self._matches:
            rows = self._match_rows()
            cursor = self._tree().cursor_row
            here = rows.index(cursor) + 1 if cursor in rows else "-"
            parts.append(f"match {here}/{len(rows)}")
        self.sub_title = inert(" · ".join(parts))
        banner = self.query_one("#banner", Static)
        if session.read_only:
            banner.update(Text(f"READ-ONLY: {inert(session.read_only_reason or '')}"))
            banner.display = True
        else:
            banner.display = False

    # --- preview ------------------------------------------------------------------------------

    @on(SessionTreeView.Highlighted)
    def _highlighted(self, event: SessionTreeView.Highlighted) -> None:
        self._preview_target = event.target
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(PREVIEW_DELAY, self._start_preview)

    def _start_preview(self) -> None:
        target = self._preview_target
        if target is None or self.session is None:
            return
        try:
            title = self.query_one("#preview-title", Static)
        except NoMatches:  # a timer firing while the app shuts down
            return
        title.update(
            Text(
                f"{self.preview_mode.value} · at {target.entry_id}" + (" · expanded" if self.expanded else "")
            )
        )
        self._build_preview(target, self.preview_mode, self.expanded)

    @work(thread=True, exclusive=True, group="preview")
    def _build_preview(self, target: RowTarget, mode: PreviewMode, expanded: bool) -> None:
        worker = get_current_worker()
        session = self.session
        assert session is not None
        try:
            if mode is PreviewMode.RAW:
                entry = session.entry_at(target.position)
                line_of = getattr(session.storage, "line_number", None)
                lines = raw_lines(entry, line_of(entry.id) if line_of else None, expanded)
            else:
                context = session.build_context(at=target.entry_id, limit=None if expanded else PREVIEW_LIMIT)
                make = context_lines if mode is PreviewMode.CONTEXT else llm_lines
                lines = make(context, target.entry_id, expanded)
        except SessionError as exc:
            lines = [Line(f"cannot build the preview: {exc}", "preview--error")]
        if not worker.is_cancelled:
            deliver(self, self._show_preview, target, lines)

    def _show_preview(self, target: RowTarget, lines: list[Line]) -> None:
        if self._preview_target != target:
            return
        with contextlib.suppress(NoMatches):  # the app closed while the worker ran
            self.query_one(PreviewView).set_lines(lines)

    def watch_preview_mode(self) -> None:
        self._start_preview()

    def watch_expanded(self) -> None:
        self._start_preview()

    def action_preview_mode(self) -> None:
        self.preview_mode = self.preview_mode.next()

    def action_expand(self) -> None:
        self.expanded = not self.expanded

    # --- bindings state -----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "set_filter":
            if self.session is None:
                return False
            return parameters[0] == self._tree().filter.next().value
        if action in ("next_match",):
            return bool(self._matches) or None
        return True

    def _tree(self) -> SessionTreeView:
        return self.query_one(SessionTreeView)

    def _writable(self) -> bool:
        if self.session is None:
            return False
        if self.session.read_only:
            self.notify(
                self.session.read_only_reason or "read-only",
                title="Read-only",
                severity="warning",
                markup=False,
            )
            return False
        return True

    def _after_write(self, keep: int | None = None, message: str | None = None) -> None:
        self._tree().rebuild(keep=keep)
        self._update_header()
        self._start_preview()
        if message:
            self.notify(message, markup=False)

    def _guard(self, operation) -> bool:
        try:
            operation()
        except SessionError as exc:
            self.notify(f"{exc} (nothing was written)", title="Not done", severity="error", markup=False)
            return False
        return True

    # --- moving -------------------------------------------------------------------------------

    def action_move(self) -> None:
        target = self._tree().current_target()
        if target is None or not self._writable():
            return
        self._back_cursor = None
        self._navigate(target, None)

    def _navigate(self, target: RowTarget, summary: BranchSummary | None) -> None:
        session = self.session
        assert session is not None
        result = []
        if not self._guard(lambda: result.append(session.navigate(target.entry_id, summary))):
            return
        nav = result[0]
        if not nav.moved:
            self.notify("That entry already is the leaf.", markup=False)
            return
        keep = session.tree.pos.get(nav.new_leaf_id) if nav.new_leaf_id else target.position
        message = f"Leaf moved to {nav.new_leaf_id or 'the start (empty context)'}"
        if nav.summary_id:
            message += " with a branch summary"
        self._after_write(keep=keep, message=message)
        if nav.editor_text:
            self.copy_to_clipboard(nav.editor_text)
            self.notify(
                one_line(nav.editor_text, 300),
                title="Text to re-send (copied to the clipboard)",
                markup=False,
                timeout=10,
            )

    def action_move_with_summary(self) -> None:
        target = self._tree().current_target()
        if target is None or not self._writable():
            return
        session = self.session
        assert session is not None
        if target.entry_id == session.leaf_id:
            self.notify("That entry already is the leaf.", markup=False)
            return
        new_leaf, _ = session.navigation_target(target.entry_id)
        branch = collect_branch(session, new_leaf)
        command = self.summarizer

        def drafter(instructions: str) -> str:
            return summarize_branch(branch, command=command, custom_instructions=instructions).summary

        def done(choice: SummaryChoice | None) -> None:
            if choice is None:
                self.notify("Move cancelled: nothing was written.", markup=False)
                return
            summary = None
            if choice.text is not None:
                summary = BranchSummary(choice.text, details=branch.files.details())
            self._back_cursor = None
            self._navigate(target, summary)

        name = f"command: {one_line(command, 30)}" if command else "offline extractive draft"
        entry = session.entry_at(target.position)
        self.push_screen(
            SummaryPrompt(
                target_text=f"{target.entry_id} — {entry_preview(entry, 50)}",
                branch_size=len(branch.entries),
                drafter=drafter,
                drafter_name=name,
            ),
            done,
        )

    def action_leaf_back(self) -> None:
        """Move the leaf to where it was before the most recent move; again for the one before."""
        if not self._writable():
            return
        session = self.session
        assert session is not None
        moves = session.leaf_moves()
        cursor = len(moves) - 1 if self._back_cursor is None else self._back_cursor
        if cursor < 0:
            self.notify("No earlier leaf is recorded in this session.", markup=False)
            return
        previous = moves[cursor].from_id
        if not self._guard(lambda: session.move_to(previous)):
            return
        self._back_cursor = cursor - 1
        keep = session.tree.pos.get(previous) if previous else None
        self._after_write(keep=keep, message=f"Back: leaf is {previous or 'the start'} again")

    def action_history(self) -> None:
        session = self.session
        if session is None:
            return
        items = []
        for move in session.leaf_moves():
            text = ""
            if move.to_id is not None:
                entry = session.get_entry(move.to_id)
                text = entry_summary(entry) if entry else ""
            timestamp = session.require_entry(move.entry_id).timestamp
            items.append(HistoryItem(move.entry_id, timestamp, move.from_id, move.to_id, text))

        def chosen(entry_id: str | None) -> None:
            if entry_id and session.tree.pos.get(entry_id) is not None:
                self._tree().go_to_position(session.tree.pos[entry_id])

        self.push_screen(HistoryScreen(items), chosen)

    # --- labels and names ---------------------------------------------------------------------

    def action_label(self) -> None:
        target = self._tree().current_target()
        if target is None or not self._writable():
            return
        session = self.session
        assert session is not None

        def done(value: str | None) -> None:
            if value is None:
                return
            text = value.strip() or None
            if self._guard(lambda: session.append_label(target.entry_id, text)):
                what = f"Label {text!r} set on" if text else "Label cleared on"
                self._after_write(keep=target.position, message=f"{what} {target.entry_id}")

        self.push_screen(
            TextPrompt(
                f"Label for {target.entry_id}",
                session.get_label(target.entry_id) or "",
                "Enter saves; an empty label clears it."
                " (As in Pi, the label entry joins the current branch.)",
            ),
            done,
        )

    def action_rename(self) -> None:
        if not self._writable():
            return
        session = self.session
        assert session is not None

        def done(value: str | None) -> None:
            if value is None:
                return
            if self._guard(lambda: session.append_session_name(value)):
                self._after_write(message=f"Session renamed to {value.strip() or '(no name)'}")

        self.push_screen(TextPrompt("Session name", session.session_name or ""), done)

    # --- filter and search --------------------------------------------------------------------

    def action_set_filter(self, value: str) -> None:
        tree = self._tree()
        tree.filter = Filter(value)
        tree.rebuild()
        self.refresh_bindings()
        self.notify(f"Filter: {value} ({len(tree.outline):,} rows)", markup=False, timeout=2)

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        query = event.value.strip()
        self._tree().focus()
        if not query:
            self.query_one("#search", Input).display = False
            self._set_matches([])
            return
        self._run_search(query)

    def key_escape(self) -> None:
        search = self.query_one("#search", Input)
        if search.display:
            search.display = False
            self._tree().focus()

    @work(thread=True, exclusive=True, group="search")
    def _run_search(self, query: str) -> None:
        worker = get_current_worker()
        session = self.session
        assert session is not None
        outline = self._tree().outline
        needle = re.compile(re.escape(query), re.IGNORECASE)
        found: list[int] = []
        total = len(outline)
        for row in range(total):
            if worker.is_cancelled:
                return
            i = outline.rows_pos[row]
            entry = session.entry_at(i)
            label = session.get_label(entry.id) or ""
            if needle.search(entry_summary(entry)) or needle.search(label) or entry.id.startswith(query):
                found.append(row)
            if row % 5000 == 4999:
                deliver(self, self.notify, f"searching… {100 * row // total}%", timeout=1)
        if not worker.is_cancelled:
            deliver(self, self._search_done, query, outline, found)

    def _search_done(self, query: str, outline, rows: list[int]) -> None:
        try:
            tree = self._tree()
        except NoMatches:  # the app closed while the worker ran
            return
        self._set_matches([outline.rows_pos[r] for r in rows])
        if not rows:
            self.notify(f"No entry matches {query!r}", severity="warning", markup=False)
            return
        self.notify(f"{len(rows)} matches for {query!r} (n / N)", markup=False, timeout=3)
        if tree.outline is outline:
            self.action_next_match(1, include_current=True)

    def _set_matches(self, positions: list[int]) -> None:
        """Matches are kept as entry positions, so they survive rebuilds of the rows."""
        self._matches = positions
        self._tree().set_matches(set(positions))
        self.refresh_bindings()
        self._update_header()

    def _match_rows(self) -> list[int]:
        row_of = self._tree().outline.row_of
        return sorted(r for r in (row_of[p] for p in self._matches) if r >= 0)

    def action_next_match(self, step: int, include_current: bool = False) -> None:
        rows = self._match_rows()
        if not rows:
            self.app.bell()
            return
        tree = self._tree()
        here = tree.cursor_row
        if step > 0:
            after = [r for r in rows if r > here or (include_current and r == here)]
            row = after[0] if after else rows[0]
        else:
            before = [r for r in rows if r < here]
            row = before[-1] if before else rows[-1]
        tree.set_cursor(row, center=True)
        self._update_header()

    # --- follow -------------------------------------------------------------------------------

    def _poll(self) -> None:
        """Live follow: pick up entries other processes appended. Rebuilding the rows costs
        O(entries), so on huge sessions rebuilds are spaced by ten times their own cost."""
        session = self.session
        if session is None or not self.follow or time.monotonic() < self._follow_wait:
            return
        try:
            tree = self._tree()
        except NoMatches:  # the interval fired while the app shuts down
            return
        followed_leaf = tree.current_position() == session.tree.leaf
        try:
            added = session.refresh()
        except SessionError as exc:
            self.follow = False
            self.notify(f"{exc}; live follow stopped", severity="warning", markup=False)
            return
        if not added:
            return
        start = time.monotonic()
        tree.rebuild(keep=session.tree.leaf if followed_leaf else None)
        self._update_header()
        cost = time.monotonic() - start
        self._follow_wait = time.monotonic() + 10 * cost
        self.notify(f"{added} new entr{'y' if added == 1 else 'ies'} arrived", markup=False, timeout=2)

    # --- misc ---------------------------------------------------------------------------------

    def action_open_other(self) -> None:
        directory = self.picker_dir
        if directory is None and self.session is not None and self.session.storage.location:
            directory = Path(self.session.storage.location).parent
        self.push_screen(PickerScreen(directory or Path.cwd(), can_go_back=True), self._picked)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(HELP))

    def on_unmount(self) -> None:
        if self.session is not None:
            self.session.close()

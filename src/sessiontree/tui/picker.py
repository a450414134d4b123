"""Choosing a session from a directory (Pi keeps one sub-directory per working directory).

A table of the session files (newest first; sortable), a search box that takes the query syntax
of `sessiontree.query` over names, first messages, working directories and, in a background
worker, the text of every user and assistant message, a project (working directory) filter,
and a preview of the highlighted session. Files are only ever opened read-only.

Everything shown from a file (names, messages, ids, paths) goes in as Rich `Text` made inert by
`display`, never as markup: a message reading `[@click=app.quit]x[/]` is drawn as written.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from ..catalog import Catalog, Hit, SessionListing, listing_key, listing_match, text_match
from ..display import counted, for_cells, inert, one_line
from ..opening import SQLITE_SUFFIXES
from ..query import Query, QueryError, QueryTimeout, compile_query
from . import deliver
from .cells import ending, shortened
from .help import HelpScreen
from .inputs import InTurnInput

SORTS = ("active", "name", "entries", "size", "project")
# The order each column sorts in before `r` reverses it: what people look for first.
_DESCENDING = {"active": True, "name": False, "entries": True, "size": True, "project": False}
SIDE_PREVIEW_WIDTH = 120  # at least this many columns: the preview sits beside the table
BELOW_PREVIEW_HEIGHT = 20  # narrower, and at least this many rows: below it; fewer: hidden
BATCH_SECONDS = 0.3  # worker results are handed to the screen at most this often
# How often the directory is looked at again while the picker is open: an agent's session grows
# and new ones start while one reads the list (a glob and a stat per file, in a thread).
RESCAN_SECONDS = 2.0
# Rows put in the table at once. Refilling a DataTable costs about half a millisecond a row, paid
# on every keystroke of a search, so thousands of rows would make typing lag; beyond this many,
# the status line says how many more there are and the search or project filter narrows them.
ROW_LIMIT = 500
FIELDS = ("cwd",)  # `cwd:TEXT` in the search box limits it to sessions of matching directories

# One paragraph: the help wraps it to its width (hard line breaks made it ragged: QA).
HELP_NOTES = (
    'Search: every word must appear somewhere in the session, in any case; "a phrase" as written;'
    " re:PATTERN a regular expression; cwd:TEXT only sessions whose directory matches. Names,"
    " first messages and directories match at once; message text is read in the background"
    " (progress under the search box)."
)


@dataclass
class _Memory:
    """What the picker keeps per directory while the app runs, so that coming back (`o` from a
    session) finds the cursor, sort and project filter as they were and reads only files that
    changed."""

    catalog: Catalog
    cursor: str | None = None  # the row key (path) last highlighted or chosen
    sort: str = "active"
    reverse: bool = False
    project: str | None = None
    query: str = ""  # the search typed when a session was chosen


# Room for "Entries ▼" and "1,000,000", and for "Size ▼": the sort's arrow was cut off the
# label of both, and a million entries off their count.
ENTRIES_WIDTH = 9
SIZE_WIDTH = 6


@dataclass(frozen=True, slots=True)
class _Column:
    key: str  # title, id, active, entries, size or cwd
    width: int


_Decided = tuple[SessionListing, Hit | None, bool]  # a file the search worker read: matched?


@dataclass
class _Search:
    """One search: rows decided so far (matched ones with their hit) and rows the background
    worker has still to read."""

    query: Query
    matched: dict[str, Hit | None] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    done: int = 0
    total: int = 0


class SessionTable(DataTable):
    """The table of sessions: Enter opens the highlighted one, and the footer says so (the
    plain DataTable's Enter binding is hidden, and hides any other for the same key).

    `pin_top`: while a new query's results come in, the cursor stays on the top (best) row
    until the user moves it; each way a user moves the cursor clears it."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open"),
        # the cursor to the first or last session, as `g`/`G` (DataTable's only scroll the view)
        Binding("home", "scroll_top", "First", show=False),
        Binding("end", "scroll_bottom", "Last", show=False),
    ]

    pin_top = False

    def action_cursor_up(self) -> None:
        self.pin_top = False
        super().action_cursor_up()

    def action_cursor_down(self) -> None:
        self.pin_top = False
        super().action_cursor_down()

    def action_page_up(self) -> None:
        self.pin_top = False
        super().action_page_up()

    def action_page_down(self) -> None:
        self.pin_top = False
        super().action_page_down()

    def action_scroll_top(self) -> None:
        self.pin_top = False
        super().action_scroll_top()

    def action_scroll_bottom(self) -> None:
        self.pin_top = False
        super().action_scroll_bottom()

    def on_click(self) -> None:
        self.pin_top = False


class PickerScreen(Screen[Path | None]):
    """Dismissed with the chosen session file's path, or None (back, or quit at start)."""

    HELP_TITLE = "Picker"
    HELP_NOTES = HELP_NOTES
    # The list has the focus from the start. Textual's default gave it to the first focusable
    # widget, the search box, until `on_mount`'s focus() came round: `q` or `j j Enter` typed
    # in the first ~0.7 s of `sessiontree DIR` were typed into the box (QA).
    AUTO_FOCUS = "#picker-table"

    # Help and quit first, as in the browser: the footer cuts its last keys at narrow widths
    # (at 80 columns a help key listed last showed as "? H").
    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "app.quit", "Quit"),
        # Esc next: listed last, "esc Clear search" was cut to "esc Clear sea" at 80 columns (QA)
        Binding("escape", "escape('clear')", "Clear search"),
        Binding("escape", "escape('project')", "All projects"),
        Binding("escape", "escape('back')", "Back"),
        # With nothing to clear or go back to, Esc says how to quit: a second Esc after the one
        # that cleared a search quit the whole app (QA).
        Binding("escape", "escape('none')", "Nothing to clear (q quits)", show=False),
        # also when typed before the app had the terminal (`SessionTreeApp.on_event`)
        Binding("enter", "open", "Open"),
        # With priority, the app runs it as the key arrives: the keys typed in the same burst
        # are handed to the box it focuses, not to the list (`check_action` leaves `/` to the
        # box while it has focus).
        Binding("slash", "search", "Search", priority=True),
        Binding("s", "sort", "Sort", tooltip="sort: last active → name → entries → size → project"),
        Binding("r", "reverse", "Reverse", tooltip="reverse the sort"),
        Binding("p", "project(1)", "Project"),
        Binding("P", "project(-1)", "Previous project", show=False),
        Binding("v", "toggle_preview", "Preview"),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("g,ctrl+home", "edge(0)", "First", show=False),
        Binding("G,ctrl+end", "edge(-1)", "Last", show=False),
    ]

    # Per directory (resolved), for as long as the process runs.
    _memory: ClassVar[dict[Path, _Memory]] = {}

    def __init__(
        self,
        directory: Path,
        *,
        can_go_back: bool = False,
        search_again: bool = False,
        current: Path | None = None,
    ) -> None:
        """`search_again`: with the search typed when a session was last chosen here (that
        session failed to open: the list comes back as it was left, not all of it);
        `current`: the session open behind the picker, marked ● (after a fork, two rows of
        one name: which one was open was not said, QA)."""
        super().__init__()
        self.directory = directory
        self._current = os.path.abspath(current) if current is not None else None
        self.can_go_back = can_go_back
        self._search_again = search_again
        key = directory.expanduser().resolve()
        memory = self._memory.get(key)
        if memory is None:
            memory = self._memory[key] = _Memory(Catalog(directory))
        self.memory = memory
        self.catalog = memory.catalog
        self.listings: dict[str, SessionListing] = {}
        self.search: _Search | None = None
        self._columns: list[_Column] = []
        self._table_width = 0  # the table's columns' room, from the last `_arrange`
        self._rendered: dict[str, tuple[Text, ...]] = {}  # what each row shows, to update in place
        self._shared: set[str] = set()  # titles more than one row shows: those rows name their file
        self._order: list[str] = []  # the keys in the table, top to bottom
        self._matching = 0  # rows that pass the filters, of which the first ROW_LIMIT are shown
        self._describing: tuple[int, int] | None = None  # (done, total) while files are read
        self._error: str | None = None  # the search box's invalid query, one line
        self._preview_choice: bool | None = None  # None: by screen size; else forced by `v`
        self._preview_key: str | None = None

    @property
    def is_modal(self) -> bool:
        """The picker takes every key. Without this, keys it does not bind would fall through to
        the App's bindings and act on a session hidden behind it (Enter would move its leaf)."""
        return True

    # --- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("", id="picker-title")
        yield InTurnInput(
            # `/` first: typed on the list, letters are its keys (s sorts); it looked like a box
            # to type in, as the database list's filter is (QA)
            placeholder='/ to search: words, "a phrase", re:regex, cwd:dir',
            id="picker-search",
            compact=True,
            select_on_focus=False,  # `action_search` selects at once: a late selection ate a burst
        )
        yield Static("", id="picker-message")
        with Horizontal(id="picker-body"):
            yield SessionTable(id="picker-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="picker-preview", can_focus=False):
                yield Static("", id="picker-preview-text")
        yield Static("", id="picker-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#picker-preview", VerticalScroll).border_title = "Session"
        for listing in self.catalog.scan():
            self.listings[str(listing.path)] = listing
        if self.memory.cursor not in self.listings:
            self.memory.cursor = self._open_session_key()
        self._arrange(self.app.size.width, self.app.size.height)
        self._show_message()
        self._update_title()
        self._update_status()
        self.query_one(DataTable).focus()
        if self._search_again and self.memory.query:
            self.query_one("#picker-search", Input).value = self.memory.query  # runs the search
        waiting = [self.listings[k] for k in self._order] + list(self.listings.values())
        todo = list(dict.fromkeys(str(x.path) for x in waiting if not x.described))
        if todo:
            self._describing = (0, len(todo))
            self._describe_all([self.listings[k].path for k in todo])
        self._update_status()
        self.set_interval(RESCAN_SECONDS, self._rescan)

    def _rescan(self) -> None:
        """Look at the directory again, unless files are still being read or a search is on
        (its verdicts are per file as it was: a search typed again takes the new ones)."""
        if self._describing is None and self.search is None:
            self._look_again()

    @work(thread=True, exclusive=True, group="rescan")
    def _look_again(self) -> None:
        deliver(self.app, self._looked, self.catalog.scan())

    def _looked(self, found: list[SessionListing]) -> None:
        """Sessions that appeared, grew or went away since the last look: the rows follow, the
        cursor stays on its session, and what changed is read again."""
        if not self.is_attached or self._describing is not None or self.search is not None:
            return
        now = {str(x.path): x for x in found}
        changed = [
            key
            for key, listing in now.items()
            if key not in self.listings or listing_key(self.listings[key]) != listing_key(listing)
        ]
        gone = self.listings.keys() - now.keys()
        if not changed and not gone:
            return
        for key in gone:
            del self.listings[key]
        for key in changed:
            self.listings[key] = now[key]
        self._fill()
        todo = [now[key].path for key in changed if not now[key].described]
        if todo:
            self._describing = (0, len(todo))
            self._describe_all(todo)
        self._update_title()
        self._update_status()

    def _open_session_key(self) -> str | None:
        """The row of the session the app has open, if it is in this directory: where the
        cursor starts when the picker has nothing to remember yet (the first `o`)."""
        location = getattr(getattr(self.app, "session", None), "location", None)
        if not location:
            return None
        with contextlib.suppress(OSError):
            wanted = Path(location).resolve()
            for key in self.listings:
                if Path(key).resolve() == wanted:
                    return key
        return None

    def on_resize(self, event: events.Resize) -> None:
        self._arrange(event.size.width, event.size.height)

    def _arrange(self, width: int, height: int) -> None:
        """Preview beside the table on wide screens, below it on narrow ones, hidden on short
        ones (or as `v` says); then the columns that fit the table's width."""
        show = height >= BELOW_PREVIEW_HEIGHT if self._preview_choice is None else self._preview_choice
        side = show and width >= SIDE_PREVIEW_WIDTH
        self.set_class(side, "-side")
        self.set_class(show and not side, "-below")
        self.set_class(not show, "-no-preview")
        preview = self.query_one("#picker-preview", VerticalScroll)
        body = self.query_one("#picker-body", Horizontal)
        body.styles.layout = "horizontal" if side else "vertical"
        table_width = width
        if side:
            preview_width = max(40, min(64, int(width * 0.36)))
            preview.styles.width = preview_width
            table_width -= preview_width
        else:
            preview.styles.width = "1fr"
        with contextlib.suppress(NoMatches):  # so that at 80 columns every key is listed
            self.query_one(Footer).compact = width < 100
        self._table_width = table_width - 1  # the table's scrollbar takes one column
        self._fill()  # with new columns if they changed
        self._update_title()
        self._show_preview()

    # --- rows ---------------------------------------------------------------------------------

    def _visible(self) -> list[SessionListing]:
        """The rows to show, in order: search and project filters applied, then the sort."""
        rows = list(self.listings.values())
        search = self.search
        if search is not None:
            rows = [x for x in rows if str(x.path) in search.matched]
        project = self.memory.project
        if project is not None:
            rows = [x for x in rows if x.cwd == project]
        sort = self.memory.sort
        key: Callable[[SessionListing], tuple]
        if sort == "name":
            # sessions of one name (a retried task, "(no name)"), newest first among them
            key = lambda x: (x.title.casefold(), -x.active, str(x.path))  # noqa: E731
        elif sort == "entries":
            key = lambda x: (x.entry_count, x.active)  # noqa: E731
        elif sort == "size":
            key = lambda x: (x.size, x.active)  # noqa: E731
        elif sort == "project":
            key = lambda x: (x.cwd.casefold(), -x.active)  # noqa: E731
        else:
            key = lambda x: (x.active, str(x.path))  # noqa: E731
        rows.sort(key=key, reverse=_DESCENDING[sort] != self.memory.reverse)
        return rows

    def _cells(self, listing: SessionListing) -> tuple[Text, ...]:
        """One row's cells as Text, never markup: names and messages come from the files."""
        cells: list[Text] = []
        for column in self._columns:
            if column.key == "title":
                # Two sessions of one name (a copy, a fork) would be two identical rows; the
                # file's path takes at most half the cell (a title read so far may be its name).
                shared = listing.title in self._shared and listing.title != listing.path.name
                file = "· " + ending(self._file_of(listing.path), column.width // 2 - 2) if shared else ""
                room = max(column.width - (len(file) + 1 if file else 0), 8)
                # cut by cells, not characters: a CJK name was cut by the table, without its `…` (QA)
                said = f"⚠ {listing.title} ({listing.error})" if listing.error else listing.title
                if self._current is not None and os.path.abspath(listing.path) == self._current:
                    said = "● " + said
                title = shortened(for_cells(one_line(said, 400)), room)
                text = Text(title)
                if file:
                    room = max(column.width - cell_len(title) - 1, 1)
                    text.append(" " + shortened(one_line(file, 400), room), style="dim")
                if self.search is not None:
                    for start, end in self.search.query.spans(title):
                        text.stylize("reverse", start, end)
                cells.append(text)
            elif column.key == "id":
                cells.append(Text(one_line(listing.session_id[:8], 8), style="dim"))
            elif column.key == "active":
                cells.append(Text(_when(listing.active, column.width)))
            elif column.key == "entries":
                count = f"{listing.entry_count:,}" if listing.described else "…"
                cells.append(Text(count, justify="right"))
            elif column.key == "size":
                cells.append(Text(_size(listing.size), justify="right"))
            elif column.key == "cwd":
                cells.append(Text(ending(one_line(listing.cwd, 400), column.width), style="dim"))
        return tuple(cells)

    def _cwd_room(self) -> int:
        """Cells the longest project path listed takes, rounded up to `CWD_STEP` (the table is
        laid out again each time it grows): the column gives the rest to the titles, which
        were cut beside a Project column half empty (QA)."""
        longest = max((cell_len(one_line(x.cwd, 400)) for x in self.listings.values()), default=0)
        return -(-longest // CWD_STEP) * CWD_STEP

    def _file_of(self, path: Path) -> str:
        """A file as a row names it: by its path below the directory (copies of one file in
        two project directories share their name too), its end shown when cut."""
        try:
            return str(path.relative_to(self.directory))
        except ValueError:
            return path.name

    def _fill(self, *, rebuild: bool = False) -> None:
        """Bring the table up to date with as little redrawing as possible: cells are updated in
        place while the rows and their order stay the same (files being described), the table
        is refilled when they change (search, sort, filter). The cursor stays on its session."""
        try:
            table = self.query_one(SessionTable)
        except NoMatches:  # a worker's result arriving after the screen closed
            return
        rows = self._visible()
        columns = _columns_for(self._table_width, self.memory.sort, self._cwd_room())
        if columns != self._columns:
            self._columns, rebuild = columns, True
        titles = Counter(x.title for x in rows)
        self._shared = {title for title, count in titles.items() if count > 1}
        self._matching = len(rows)
        del rows[ROW_LIMIT:]
        order = [str(x.path) for x in rows]
        if not rebuild and order == self._order:
            for listing in rows:
                key = str(listing.path)
                cells = self._cells(listing)
                old = self._rendered.get(key)
                if old != cells:
                    self._rendered[key] = cells
                    for column, cell, before in zip(self._columns, cells, old or (), strict=False):
                        if cell != before:
                            table.update_cell(key, column.key, cell)
            if table.pin_top and rows and table.cursor_row != 0:
                table.move_cursor(row=0, animate=False)
            self._update_status()
            return
        keep = None if table.pin_top else self._current_key() or self.memory.cursor
        if rebuild:
            table.clear(columns=True)
            for column in self._columns:
                table.add_column(self._label(column), key=column.key, width=column.width)
        else:
            table.clear()
        self._rendered = {}
        for listing in rows:
            key = str(listing.path)
            cells = self._rendered[key] = self._cells(listing)
            table.add_row(*cells, key=key)
        self._order = order
        if rows:
            table.move_cursor(row=order.index(keep) if keep in self._rendered else 0, animate=False)
        self._update_status()
        self._show_preview()  # the cursor may be on another session without having moved

    def _label(self, column: _Column) -> Text:
        names = {
            "title": "Session",
            "id": "Id",
            "active": "Active",
            "entries": "Entries",
            "size": "Size",
            "cwd": "Project",
        }
        sort = self.memory.sort
        sorted_here = (
            column.key == sort
            or (column.key == "title" and sort == "name")
            or (column.key == "cwd" and sort == "project")
        )
        if not sorted_here:
            return Text(names[column.key])
        descending = _DESCENDING[sort] != self.memory.reverse
        return Text(names[column.key] + (" ▼" if descending else " ▲"), style="bold")

    def _current_key(self) -> str | None:
        try:
            table = self.query_one(DataTable)
        except NoMatches:
            return None
        if not table.row_count:
            return None
        with contextlib.suppress(Exception):  # the cursor can point past a table just cleared
            value = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            return value if value in self.listings else None
        return None

    # --- describing files ---------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="describe")
    def _describe_all(self, paths: list[Path]) -> None:
        """Read every file's header, counts and messages, visible rows first, handing results
        over in batches so the table is not redrawn for each file."""
        worker = get_current_worker()
        app, catalog = self.app, self.catalog
        batch: list[SessionListing] = []
        sent = time.monotonic()
        for n, path in enumerate(paths, 1):
            if worker.is_cancelled:
                return
            batch.append(catalog.describe(path))
            if n == len(paths) or time.monotonic() - sent > BATCH_SECONDS:
                deliver(app, self._described, batch, n, len(paths))
                batch, sent = [], time.monotonic()

    def _described(self, batch: list[SessionListing], done: int, total: int) -> None:
        if not self.is_attached:
            return
        for listing in batch:
            key = str(listing.path)
            if key in self.listings:
                self.listings[key] = listing
        self._describing = None if done == total else (done, total)
        self._fill()
        self._update_title()
        self._update_status()
        if self._preview_key in {str(x.path) for x in batch}:
            self._show_preview()

    # --- search -------------------------------------------------------------------------------

    @on(Input.Changed, "#picker-search")
    def _search_changed(self, event: Input.Changed) -> None:
        try:
            query = compile_query(event.value, fields=FIELDS)
        except QueryError as exc:
            self._error = str(exc)  # the rows stay as the last valid query left them
            self._show_message()
            return
        self._error = None
        self._start_search(query)

    def _start_search(self, query: Query) -> None:
        self.workers.cancel_group(self, "search")
        self.query_one(SessionTable).pin_top = not query.is_empty
        if query.is_empty:
            self.search = None
        else:
            search, gave_up = _Search(query), False
            try:
                for key, listing in self.listings.items():
                    verdict = listing_match(query, listing) if listing.described else ((), None)
                    if verdict is None:
                        continue
                    missing, hit = verdict
                    if listing.described and not missing:
                        search.matched[key] = hit
                    else:
                        search.pending.add(key)
            except QueryTimeout as exc:
                self._error, gave_up = str(exc), True  # no search: the rows are all listed again
                search.pending.clear()
                search.matched.clear()
            search.total = len(search.pending)
            self.search = None if gave_up else search
            if search.pending:
                # Rows on screen first, so what the user is looking at is decided first.
                order = [k for k in self._order if k in search.pending]
                listed = set(order)
                order += [k for k in search.pending if k not in listed]
                self._search_text(search, [self.listings[k].path for k in order])
        self._fill()
        self._show_message()
        self._update_status()
        self._show_preview()
        self.refresh_bindings()

    @work(thread=True, exclusive=True, group="search")
    def _search_text(self, search: _Search, paths: list[Path]) -> None:
        """Read the message text of the rows not decided by their name, first message and
        directory; every term must occur somewhere in the session (each may be in a different
        message)."""
        worker = get_current_worker()
        app, catalog, query = self.app, self.catalog, search.query
        batch: list[_Decided] = []
        sent = time.monotonic()
        for n, path in enumerate(paths, 1):
            if worker.is_cancelled:
                return
            listing, texts = catalog.messages(path)
            found, hit = False, None
            try:
                verdict = listing_match(query, listing)
                if verdict is not None:
                    missing, hit = verdict
                    if not missing:
                        found = True
                    else:
                        in_text = text_match(missing, texts)
                        found, hit = in_text is not None, in_text or hit
            except QueryTimeout as exc:
                deliver(app, self._search_failed, search, str(exc))
                return
            batch.append((listing, hit, found))
            if n == len(paths) or time.monotonic() - sent > BATCH_SECONDS:
                deliver(app, self._searched, search, batch, n)
                batch, sent = [], time.monotonic()

    def _search_failed(self, search: _Search, reason: str) -> None:
        """A regular expression gave up on one session's text: the search stops there, its
        reason under the search box as an invalid query's is."""
        if not self.is_attached:
            return
        if search is self.search:
            self.search = None
            self._error = reason
            self._fill()
            self._show_message()
            self._update_status()

    def _searched(self, search: _Search, batch: list[_Decided], done: int) -> None:
        if not self.is_attached or search is not self.search:
            return  # a newer search replaced this one
        for listing, hit, found in batch:
            key = str(listing.path)
            if key not in self.listings:
                continue
            self.listings[key] = listing
            search.pending.discard(key)
            if found:
                search.matched[key] = hit
        search.done = done
        self._fill()
        self._show_message()
        self._update_status()
        if self._preview_key is None or self._preview_key in {str(x[0].path) for x in batch}:
            self._show_preview()

    @on(Input.Submitted, "#picker-search")
    def _search_submitted(self) -> None:
        if self._error:  # the box stays, to fix the query, as the browser's find does (QA)
            return
        self.query_one(DataTable).focus()

    def _show_message(self) -> None:
        """The line under the search box: an invalid query, the search's progress, or (while
        the box has focus) a reminder of the syntax."""
        message = self.query_one("#picker-message", Static)
        search = self.search
        focused = self.focused is not None and self.focused.id == "picker-search"
        text: Text | None = None
        if self._error:
            text = Text(one_line(self._error, 300), style="bold red")
        elif search is not None and search.pending:
            text = Text(f"searching message text… {search.done}/{search.total} files", style="italic")
        elif search is not None:
            # Counted as the rows are shown: in the project filtered to, if one is (QA: "5
            # sessions match" over 4 rows).
            project = self.memory.project
            listings = (self.listings.get(key) for key in search.matched)
            found = sum(1 for x in listings if x is not None and project in (None, x.cwd))
            verb = "matches" if found == 1 else "match"
            where = " in this project" if project is not None else ""
            text = Text(f"{counted(found, 'session')} {verb}{where} · Esc clears")
        elif focused:
            text = Text('words (all must appear) · "a phrase" · re:regex · cwd:dir · Enter: to the list')
        message.update(text or "")
        message.display = text is not None

    def on_descendant_focus(self) -> None:
        self._show_message()
        self.refresh_bindings()

    def on_descendant_blur(self) -> None:
        self._show_message()
        self.refresh_bindings()

    # --- preview ------------------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#picker-table")
    def _highlighted(self) -> None:
        self._show_preview()

    def _show_preview(self) -> None:
        """Draw the highlighted session's details; a file not yet described is read in a worker
        first (ahead of the background pass, which may still be far from it)."""
        try:
            body = self.query_one("#picker-preview-text", Static)
            preview = self.query_one("#picker-preview", VerticalScroll)
        except NoMatches:
            return
        key = self._current_key()
        if key != self._preview_key:
            preview.scroll_home(animate=False)
        self._preview_key = key
        if key is not None:
            self.memory.cursor = key
        if self.has_class("-no-preview"):
            return
        if key is None:
            said = "No session here." if not self.listings else "No session matches."
            if not self.listings:  # the list holds session files only, and said nothing of these (QA)
                said += _databases_said(self.directory.expanduser())
            body.update(Text(said, style="dim"))
            return
        listing = self.listings[key]
        if not listing.described:
            body.update(Text(f"{listing.path.name}\nreading…", style="dim"))
            self._describe_one(listing.path)
            return
        if self.has_class("-below") and not preview.size.width:
            # Just shown (`v`) and not laid out yet: its lines were cut to 20 columns (QA).
            self.call_after_refresh(self._show_preview)
            return
        hit = self.search.matched.get(key) if self.search is not None else None
        width = max(20, preview.size.width - 2) if self.has_class("-below") else None
        body.update(
            preview_text(listing, self.directory, hit, self.search.query if self.search else None, width)
        )

    @work(thread=True, exclusive=True, group="preview")
    def _describe_one(self, path: Path) -> None:
        listing = self.catalog.describe(path)
        deliver(self.app, self._described_one, listing)

    def _described_one(self, listing: SessionListing) -> None:
        if not self.is_attached:
            return
        key = str(listing.path)
        if key in self.listings:
            self.listings[key] = listing
            self._fill()
            if key == self._preview_key:
                self._show_preview()

    # --- status lines -------------------------------------------------------------------------

    def _update_title(self) -> None:
        """Directory, sort and project filter on one line; at narrow widths the directory is
        cut from the left (its end names it) and the wording shortens before anything is lost."""
        try:
            title = self.query_one("#picker-title", Static)
        except NoMatches:
            return
        width = max(20, self.app.size.width - 2)
        sort = self.memory.sort
        arrow = "↓" if _DESCENDING[sort] != self.memory.reverse else "↑"
        projects = self._projects()
        project = self.memory.project
        if project is None:
            where = "all projects"
        else:
            count = f" ({projects.index(project) + 1}/{len(projects)})" if project in projects else ""
            where = ending(one_line(project, 400), max(12, width // 2 - len(count))) + count
        said = "last active" if sort == "active" else sort
        for sorted_by in (f"sorted by {said} {arrow}", f"{said} {arrow}"):
            right = f"  ·  {sorted_by}  ·  {where}"
            room = width - len(right) - len("Sessions in ")
            if room >= 12 or sorted_by == f"{said} {arrow}":
                break
        directory = ending(one_line(str(self.directory), 400), max(8, room))
        title.update(Text.assemble(("Sessions in ", "bold"), (directory, "bold"), right))

    def _update_status(self) -> None:
        with contextlib.suppress(NoMatches):
            status = self.query_one("#picker-status", Static)
            total = len(self.listings)
            unreadable = self.catalog.unreadable
            if not total:
                where = inert(str(self.directory))
                missing = not self.directory.expanduser().is_dir()
                said = f"{where} does not exist" if missing else f"No session files found in {where}"
                if self.directory in unreadable:
                    said = f"{where} cannot be read (permission denied?)"
                elif unreadable:
                    said += f" ({_unread(unreadable)})"
                status.update(Text(said))
                return
            shown, matching = len(self._order), self._matching
            sessions = counted(total, "session")
            parts = [f"{matching:,} of {sessions}" if matching != total else sessions]
            if shown < matching:
                parts.append(f"the first {shown} listed (search or p to narrow)")
            projects = len(self._projects())
            if projects:
                parts.append(counted(projects, "project"))
            if unreadable:
                parts.append(_unread(unreadable))
            if self._describing is not None:
                parts.append(f"reading {self._describing[0]}/{self._describing[1]}…")
            status.update(Text(" · ".join(parts)))

    def _projects(self) -> list[str]:
        """Working directories of the described sessions, most recently used first."""
        newest: dict[str, float] = {}
        for listing in self.listings.values():
            if listing.described and listing.cwd:
                newest[listing.cwd] = max(newest.get(listing.cwd, 0.0), listing.active)
        return sorted(newest, key=lambda cwd: (-newest[cwd], cwd))

    # --- actions ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "escape":
            return parameters[0] == self._escape_mode()
        if action == "open":
            return True if self._current_key() else None
        if action == "search":  # already there: the footer need not offer it
            return self.focused is None or self.focused.id != "picker-search"
        return True

    def _escape_mode(self) -> str:
        try:
            search = self.query_one("#picker-search", Input)
        except NoMatches:  # the footer asks before the screen is composed
            return "back" if self.can_go_back else "none"
        if search.value or self.focused is search:
            return "clear"
        if self.memory.project is not None:
            return "project"
        return "back" if self.can_go_back else "none"

    def action_escape(self, mode: str) -> None:
        if mode == "clear":
            search = self.query_one("#picker-search", Input)
            search.value = ""  # Input.Changed runs the (now empty) search: every row again
            self._error = None
            self._start_search(compile_query(""))
            self.query_one(DataTable).focus()
        elif mode == "project":
            self.memory.project = None
            self.action_project(0)
        elif mode == "none":
            self.notify("Nothing to clear here: q quits", timeout=3, markup=False)
        else:
            self._leave(None)

    def action_open(self) -> None:
        key = self._current_key()
        if key is not None:
            self._leave(Path(key))

    @on(DataTable.RowSelected, "#picker-table")
    def _chosen(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is not None and key in self.listings:
            self._leave(Path(key))

    def _leave(self, chosen: Path | None) -> None:
        if chosen is not None:
            self.memory.cursor = str(chosen)
            self.memory.query = self.query_one("#picker-search", Input).value
        for group in ("describe", "search", "preview"):
            self.workers.cancel_group(self, group)
        if self.is_current:
            self.dismiss(chosen)

    def action_search(self) -> None:
        # Now, not via `focus()`'s message: keys typed in the same burst as `/` (a fast
        # typist, a paste) are already queued behind it, and ran as the list's commands (`r`
        # reversed the sort, `q` quit the app). As the tree's search does (`tui/search.py`).
        search = self.query_one("#picker-search", Input)
        self.set_focus(search)
        search.select_all()  # typing replaces the last search, which stays there to be edited

    def action_sort(self) -> None:
        self.memory.sort = SORTS[(SORTS.index(self.memory.sort) + 1) % len(SORTS)]
        self.memory.reverse = False
        self._resorted()

    def action_reverse(self) -> None:
        self.memory.reverse = not self.memory.reverse
        self._resorted()

    def _resorted(self) -> None:
        self._fill(rebuild=True)  # the column labels carry the sort arrow; the sort's own shows
        self._update_title()

    def action_project(self, step: int) -> None:
        """Cycle all projects → each working directory (most recent first) → all projects."""
        projects: list[str | None] = [None, *self._projects()]
        current = self.memory.project
        index = projects.index(current) if current in projects else 0
        self.memory.project = projects[(index + step) % len(projects)]
        self._fill()
        self._update_title()
        self._update_status()
        self._show_message()
        self._show_preview()
        self.refresh_bindings()  # Esc's meaning goes with the project (the footer kept "All projects")

    def action_toggle_preview(self) -> None:
        self._preview_choice = self.has_class("-no-preview")
        self._arrange(self.app.size.width, self.app.size.height)

    def action_cursor(self, step: int) -> None:
        table = self.query_one(SessionTable)
        table.pin_top = False
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + step)))

    def action_page(self, step: int) -> None:
        table = self.query_one(SessionTable)
        if step > 0:
            table.action_page_down()
        else:
            table.action_page_up()

    def action_edge(self, end: int) -> None:
        table = self.query_one(SessionTable)
        table.pin_top = False
        if table.row_count:
            table.move_cursor(row=0 if end == 0 else table.row_count - 1)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen.for_screen(self))

    @on(DataTable.HeaderSelected, "#picker-table")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        """A click on a column's label sorts by it; a second click reverses."""
        column = str(event.column_key.value)
        sort = next((sort for sort, key in SORTED_COLUMN.items() if key == column), None)
        if sort is None:  # the id column
            return
        if sort == self.memory.sort:
            self.memory.reverse = not self.memory.reverse
        else:
            self.memory.sort, self.memory.reverse = sort, False
        self._resorted()


# --- drawing helpers ------------------------------------------------------------------------------


def preview_text(
    listing: SessionListing, directory: Path, hit: Hit | None, query: Query | None, width: int | None
) -> Text:
    """The preview of one session. `width`: one line per field, cut to fit (the preview below
    the table); None: messages may wrap over a few lines (the preview beside it)."""
    limit = width or 600
    out = Text()

    def line(label: str, value: str, style: str = "", *, keep: int | None = None) -> None:
        shown = one_line(value, max(8, (keep or limit) - len(label) - 1)) if label else one_line(value, limit)
        if out:
            out.append("\n")
        if label:
            out.append(f"{label} ", style="dim")
        text = Text(shown, style=style)
        if query is not None:
            for start, end in query.spans(shown):
                text.stylize("reverse", start, end)
        out.append_text(text)

    if listing.name:
        line("", listing.name, "bold")
    else:
        line("", "(unnamed session)", "dim")
    if hit is not None:
        line("match", f"{hit.where}: {_around(hit.text, hit.span, limit)}")
    line("id", listing.session_id or "?")
    line("cwd", listing.cwd or "?")
    line("first ›", listing.first_message or "(no user message)")
    if listing.last_message and listing.last_message != listing.first_message:
        line("last  ›", listing.last_message)
    branches = counted(listing.leaf_count, "leaf", "leaves")
    forks = counted(listing.fork_count, "fork")
    leaf = listing.leaf_id or "(none)"  # a v1 file's too: its entries are named the same at every read
    counts = f"{counted(listing.entry_count, 'entry', 'entries')} · {branches} · {forks} · leaf {leaf}"
    line("", f"{counts} · {_size(listing.size)}")
    if width is None:
        line("last active", _when(listing.active, 16))
        if abs(listing.modified - listing.active) >= 60:  # a move, a label or a name since
            line("file modified", _when(listing.modified, 16))
        try:
            shown = listing.path.relative_to(directory)
        except ValueError:
            shown = listing.path
        line("file", str(shown))
    if listing.error:  # a damaged session's first problem, not only how many it has (QA)
        line("⚠", listing.problem or listing.error, "bold red")
    return out


def _around(text: str, span: tuple[int, int], limit: int) -> str:
    """Some of `text` around `span`, so the match is within the first `limit` characters."""
    start = max(0, span[0] - max(10, limit // 4))
    return ("…" if start else "") + text[start : start + limit * 4]


SORTED_COLUMN = {**{sort: sort for sort in SORTS}, "name": "title", "project": "cwd"}  # sort -> column
ADDED_WIDTH = {"active": 11, "entries": ENTRIES_WIDTH, "size": SIZE_WIDTH, "cwd": 16}  # on a narrow table
DROPPED_FIRST = ("size", "entries", "active", "id")  # to make room for the sort's own column
TITLE_ROOM = 16  # the title's cells before a column makes way for the sort's own
CWD_STEP = 6  # the Project column's width follows the longest path listed by this many cells
CWD_LEAST = 9  # its label, "Project", and the sort's arrow


def _columns_for(width: int, sort: str = "active", cwd_room: int | None = None) -> list[_Column]:
    """Columns that fit `width` cells (each column also takes two cells of padding); the
    session's title gets what is left. The column the rows are sorted by is always among
    them, in place of others on a narrow table: sorted by project at 80 columns, the rows
    had looked out of order, with no Project column to read the order from. `cwd_room`: the
    cells the longest project path takes, past which the Project column does not grow."""
    if width >= 130:
        rest = [
            _Column("id", 8),
            _Column("active", 16),
            _Column("entries", ENTRIES_WIDTH),
            _Column("size", SIZE_WIDTH),
            _Column("cwd", 30),
        ]
    elif width >= 100:
        rest = [
            _Column("active", 16),
            _Column("entries", ENTRIES_WIDTH),
            _Column("size", SIZE_WIDTH),
            _Column("cwd", 18),
        ]
    elif width >= 70:
        rest = [_Column("active", 11), _Column("entries", ENTRIES_WIDTH), _Column("size", SIZE_WIDTH)]
    elif width >= 45:
        rest = [_Column("active", 11)]
    else:
        rest = []
    key = SORTED_COLUMN.get(sort, "title")
    if key != "title" and all(c.key != key for c in rest):
        rest.append(_Column(key, ADDED_WIDTH[key]))
        for dropped in DROPPED_FIRST:
            if width - sum(c.width + 2 for c in rest) - 2 >= TITLE_ROOM:
                break
            rest = [c for c in rest if c.key != dropped or c.key == key]
        over = sum(c.width + 2 for c in rest) + 2 + 10 - width  # past a title of 10 cells
        if over > 0 and key == "cwd":  # a project's path is shown by its end: it may be short
            rest[-1] = _Column(key, max(8, rest[-1].width - over))
    if cwd_room is not None:
        rest = [_Column(c.key, min(c.width, max(cwd_room, CWD_LEAST))) if c.key == "cwd" else c for c in rest]
    used = sum(c.width + 2 for c in rest) + 2
    return [_Column("title", max(10, width - used)), *rest]


def _when(timestamp: float, width: int) -> str:
    """Date and time; in a narrow column the year of this year's dates and the time of older
    ones give way (an old session's day matters more than its minute). "?" for a time no
    date can show (a file's time set past the year 9999)."""
    try:
        moment = datetime.fromtimestamp(timestamp)
    except (ValueError, OverflowError, OSError):
        return "?"
    if width >= 16:
        return moment.strftime("%Y-%m-%d %H:%M")
    return moment.strftime("%m-%d %H:%M" if moment.year == datetime.now().year else "%Y-%m-%d")


def _size(n: int) -> str:
    """At most five characters: 999B, 9.9K, 999K, 9.9M, 999M, 9.9G."""
    value = float(n)
    for unit in ("B", "K", "M", "G"):
        if value < 999.5 or unit == "G":
            if unit == "B":
                return f"{int(value)}B"
            return f"{value:.1f}{unit}" if value < 9.95 else f"{value:.0f}{unit}"
        value /= 1024
    return f"{n}B"


def _databases_said(directory: Path) -> str:
    """What the empty list says of the SQLite databases in `directory` (known by their
    suffix), which it does not list: how to open one."""
    try:
        names = sorted(
            p.name for p in directory.iterdir() if p.name.endswith(SQLITE_SUFFIXES) and p.is_file()
        )
    except OSError:
        return ""
    if not names:
        return ""
    shown = "\n".join(f"  sessiontree {inert(shlex.quote(str(directory / name)))}" for name in names[:5])
    more = f"\n  and {len(names) - 5:,} more" if len(names) > 5 else ""
    each = "each opened as" if len(names) > 1 else "opened as"
    return f"\n\nIt holds {counted(len(names), 'SQLite database')}, {each}\n{shown}{more}"


def _unread(directories: list[Path]) -> str:
    """The folders a scan could not read, said: their sessions are not listed."""
    named = inert(directories[0].name) + (f" and {len(directories) - 1} more" if len(directories) > 1 else "")
    return f"{counted(len(directories), 'folder')} could not be read ({named})"

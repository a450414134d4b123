"""The sessions of one database (a SQLite file or a PostgreSQL URL) to choose from: what
`sessiontree db.sqlite` shows when the database holds several, and `o` from a session kept
there. After an import of a directory the ids were only to be found with `psql` (QA).

A table of name (or first message), id, project, entries and the time of the last entry, the
last active first (as the file picker sorts by the time a file was last written to);
typing filters it (by name, first message, id or project, words ANDed, case-insensitive);
Enter opens the highlighted session, Esc clears the filter, then goes back (or quits when
there is nothing to go back to).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..display import counted, inert, one_line, short_time
from ..model.errors import SessionError
from . import deliver
from .cells import ending
from .inputs import InTurnInput

# Whole at 60 columns. It said "(/ for a q)", for `/` then `q` to filter by a q (QA: cryptic);
# help says it.
FILTER_HINT = "type to filter by name, message, id or project (q quits)"
ID_SHOWN = 13  # a UUID's first two groups: room for Name and Project at 80 columns
ID_WHOLE_FROM = 120  # columns from which ids are shown whole (up to ID_MOST): typed after `#`
ID_MOST = 40
ACTIVE_SHOWN = 16  # `2025-01-01 10:00`
ACTIVE_FROM = 72  # columns from which Last active is shown: at 60 it was reached by scrolling sideways
# Seconds between two listings while the list is shown: a session imported or created meanwhile
# appears (the list kept its count; QA), as the file picker notices new files.
RELIST_SECONDS = 10.0
NAME_WIDTHS = (16, 60)  # the name column's least and most; the project column gets the rest
PROJECT_MOST = 40
COLUMNS = (("name", "Name"), ("id", "Id"), ("cwd", "Project"), ("entries", "Entries"), ("at", "Last active"))


def _local_time(iso: str) -> str:
    """An entry's time in this machine's time zone (`2025-01-01 10:00`), as the file picker
    shows a file's: each as written, 13:00+05:00 beside 10:00Z, the column looked unsorted
    (QA). A time without a zone, or one that does not parse, is shown as written."""
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return short_time(iso)
    if moment.tzinfo is None:
        return short_time(iso)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


class SessionRows(DataTable[Text]):
    """The sessions, a row each. Home and End go to the first and last (DataTable's scroll
    sideways along a row; QA), as `g`/`G` do in the file picker."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "scroll_top", "First", show=False),
        Binding("end", "scroll_bottom", "Last", show=False),
    ]


class DatabasePickerScreen(Screen[str | None]):
    """Dismissed with the chosen session's id, or None (Esc back to the session behind it)."""

    AUTO_FOCUS = "#dbpick-table"  # not the filter, first in the layout: as the file picker's list

    BINDINGS: ClassVar[list[BindingType]] = [
        # Esc leaves the list back to the session open behind it; with none it never quits (q
        # does), as in the file picker: a k9s user backing out with Esc lost the app (QA).
        # With a filter typed, Esc clears it first: the footer said "Quit" there (QA).
        Binding("escape", "back('clear')", "Clear"),
        Binding("escape", "back('back')", "Back"),
        Binding("escape", "back('none')", "Nothing to clear (q quits)", show=False),
        Binding("slash", "search", "Filter (then q and ? are typed too)", show=False),
        Binding("enter", "open", "Open the session", show=False),  # the list's Enter, said in help
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark", "app.help", "Help"),
    ]

    def __init__(
        self,
        label: str,
        sessions: list[dict[str, Any]] | None,
        *,
        current: str | None = None,
        can_go_back: bool = True,
        lister: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        """`label`: the database, as messages show it; `sessions`: `opening.list_sessions`'s,
        or None while they are being listed (`listed` or `failed` follows); `current`: the
        session open here (`o`), marked, and where the cursor starts; `can_go_back`: a session
        is open behind the list (else leaving it quits); `lister`: lists the database again,
        called off the UI thread every RELIST_SECONDS."""
        super().__init__()
        self.lister = lister
        self.can_go_back = can_go_back
        self.label = label
        self.sessions = sessions or []
        self.listing = sessions is None
        self.problem: str | None = None  # why the sessions could not be listed
        self.current = current
        self._shown: list[dict[str, Any]] = []
        self._filled = ""  # the filter `_shown` is of

    @property
    def is_modal(self) -> bool:
        """Keys the screen does not bind must not reach a session behind it (Enter would move
        its leaf), as in the file picker."""
        return True

    def compose(self) -> ComposeResult:
        yield Static("", id="dbpick-title")
        # not selected on focus: the first key typed on the list moves the focus here, and a
        # selection made then was replaced by the second key (QA: "bench" left "h")
        yield InTurnInput(placeholder=FILTER_HINT, id="dbpick-filter", compact=True, select_on_focus=False)
        yield SessionRows(id="dbpick-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="dbpick-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self.query_one("#dbpick-title", Static).update(
            Text(
                f"Sessions in {inert(self.label)} · last active first · Enter opens",
                no_wrap=True,
                overflow="ellipsis",
            )
        )
        self._fill("")
        table.focus()
        if self.lister is not None:
            self.set_interval(RELIST_SECONDS, self._relist)

    @work(thread=True, exclusive=True, group="relist")
    def _relist(self) -> None:
        """The database listed again; shown if it changed. A listing that fails now (a server
        restarting) leaves the list as it was: the next one tries again."""
        if self.listing or self.lister is None:
            return
        try:
            sessions = self.lister()
        except SessionError:
            return
        if sessions != self.sessions:
            deliver(self.app, self._relisted, sessions)

    def _relisted(self, sessions: list[dict[str, Any]]) -> None:
        if self.is_attached:  # else the list was left meanwhile
            self.listed(sessions)

    def listed(self, sessions: list[dict[str, Any]]) -> None:
        """The sessions, listed off the UI thread (a server may take seconds to answer): shown
        filtered by what was typed meanwhile."""
        self.sessions, self.listing = sessions, False
        if self.is_mounted:  # else `on_mount` shows them (a server can answer that fast)
            self._fill(self.query_one("#dbpick-filter", Input).value)

    def failed(self, message: str) -> None:
        """The database could not be listed: said in place of the count; Esc or q leaves."""
        self.listing, self.problem = False, f"Cannot list the sessions: {message}"
        if self.is_mounted:
            self._fill("")

    def on_resize(self) -> None:
        """The columns share the new width (at 80 columns, Entries and the date were reached by
        scrolling sideways)."""
        self._fill(self.query_one("#dbpick-filter", Input).value)

    def _fill(self, query: str) -> None:
        self._filled = query
        words = query.casefold().split()
        table = self.query_one(DataTable)
        at = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value if table.row_count else None
        self._shown = [s for s in self.sessions if all(w in _haystack(s) for w in words)]
        counts = [f"{int(s.get('entry_count') or 0):,}" for s in self._shown]
        columns = COLUMNS if self.size.width >= ACTIVE_FROM else COLUMNS[:-1]
        name_width, project_width = self._widths(columns, max(map(len, counts), default=0))
        table.clear(columns=True)
        widths = (name_width, self._id_width(), project_width, None, ACTIVE_SHOWN)
        for (key, label), width in zip(columns, widths, strict=False):
            table.add_column(label, key=key, width=width)
        for s, count in zip(self._shown, counts, strict=True):
            here = s["id"] == self.current
            name = ("● " if here else "") + one_line(inert(_title(s)), 200)
            cells = [
                Text(name, style="bold" if here else "", no_wrap=True, overflow="ellipsis"),
                Text(inert(str(s["id"])[: self._id_width()])),  # as the file picker shows ids; found whole
                Text(ending(inert(s.get("cwd") or ""), project_width), no_wrap=True, overflow="ellipsis"),
                Text(count, justify="right"),
                Text(_local_time(str(s.get("last_active") or s.get("created_at") or ""))),
            ]
            table.add_row(*cells[: len(columns)], key=str(s["id"]))
        ids = [str(s["id"]) for s in self._shown]
        for keep in (at, self.current):  # the row highlighted before a resize, else this one
            if keep in ids:
                table.move_cursor(row=ids.index(str(keep)))
                break
        total = counted(len(self.sessions), "session")
        said = total if not words else f"{len(self._shown):,} of {total} match"
        if not self.sessions:  # a bare "0 sessions" said nothing of how to fill it (QA)
            said = "No sessions in this database yet: sessiontree import FILE… --to DATABASE adds some"
        if self.listing:
            said = f"listing the sessions of {inert(self.label)}…"
        status = self.query_one("#dbpick-status", Static)
        status.update(Text(self.problem or said))
        status.set_class(self.problem is not None, "-error")

    def _id_width(self) -> int:
        """The id column's width: the first two groups of a UUID, and from ID_WHOLE_FROM columns
        the longest id (QA: at 160 columns ids were cut at 13 characters)."""
        if self.size.width < ID_WHOLE_FROM:
            return ID_SHOWN
        return max(ID_SHOWN, min(ID_MOST, max((len(str(s["id"])) for s in self.sessions), default=0)))

    def _widths(self, columns: tuple[tuple[str, str], ...], entries: int) -> tuple[int, int]:
        """The name and project columns' widths: what the others leave of the screen's width
        (two cells of padding per column, one for the scrollbar), three parts to the name."""
        active = ACTIVE_SHOWN if len(columns) == len(COLUMNS) else 0
        fixed = self._id_width() + max(entries, len("Entries")) + active + 2 * len(columns) + 2
        room = self.size.width - fixed
        least, most = NAME_WIDTHS
        name = min(most, max(least, room * 3 // 5, room - PROJECT_MOST))
        return name, max(min(PROJECT_MOST, room - name), len("Project"))

    @on(Input.Changed, "#dbpick-filter")
    def _filtered(self, event: Input.Changed) -> None:
        self.refresh_bindings()  # Esc: "Clear" while there is a filter
        self._fill(event.value)

    @on(Input.Submitted, "#dbpick-filter")
    def _open_first(self) -> None:
        """Enter in the filter opens the highlighted (first) match, as the title says."""
        table = self.query_one(DataTable)
        self._caught_up()
        if not self._shown:
            table.focus()
            return
        self.dismiss(str(self._shown[min(table.cursor_row, len(self._shown) - 1)]["id"]))

    @on(DataTable.RowSelected, "#dbpick-table")
    def _chosen(self, event: DataTable.RowSelected) -> None:
        if self._caught_up():  # the row was of a list the filter typed since has changed
            self._open_first()
        elif event.row_key.value is not None:
            self.dismiss(event.row_key.value)

    def _caught_up(self) -> bool:
        """Fill the list for the filter as typed, if it is not yet (the box's change is a
        message behind the keys): `ffae` and Enter typed at once opened the first session of
        the whole list, and `xyz` and Enter, matching nothing, opened it too (QA). Whether it
        had to."""
        typed = self.query_one("#dbpick-filter", Input).value
        if typed == self._filled:
            return False
        self._fill(typed)
        return True

    def action_open(self) -> None:
        """The highlighted session, as Enter opens it."""
        self._open_first()

    def on_key(self, event: Any) -> None:
        """A printable key typed on the table starts the filter with it (as in lazygit's lists)."""
        # The box takes the characters typed in it: one reaching the screen came from the list.
        # Keys of a burst were all sent to the list before the first moved the focus, so each
        # is added here, not only the first (QA: "bench" typed fast left "b").
        box = self.query_one("#dbpick-filter", Input)
        # Once a filter is being typed, q, / and ? are characters of it: "aqueued" typed fast
        # left "aueued" (QA).
        keys = (None,) if box.value else (None, "q", "/", "?")
        if event.character == "q" and not box.value:
            # Quit now: a key typed right after would move the focus to the box before the q's
            # binding is looked up, and the box takes a printable key for itself ("qx", QA).
            event.stop()
            self.call_next(self.run_action, "app.quit")
            return
        if event.is_printable and event.character not in keys:
            self.set_focus(box)
            box.insert_text_at_cursor(event.character)
            event.stop()

    def action_search(self) -> None:
        self.set_focus(self.query_one("#dbpick-filter", Input))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            if self.query_one("#dbpick-filter", Input).value:
                return parameters[0] == "clear"
            return parameters[0] == ("back" if self.can_go_back else "none")
        return True

    def action_back(self, where: str = "back") -> None:
        box = self.query_one("#dbpick-filter", Input)
        if box.value:
            box.value = ""  # Input.Changed shows every session again
            self.query_one(DataTable).focus()
            return
        if where == "none":
            self.notify("Nothing to clear here: q quits", timeout=3, markup=False)
            return
        self.dismiss(None)


def _title(session: dict[str, Any]) -> str:
    """What a session is known by: its name, else its first message, as the file picker does."""
    return str(session.get("name") or session.get("first_message") or "(no message)")


def _haystack(session: dict[str, Any]) -> str:
    return " ".join(str(session.get(k) or "") for k in ("name", "first_message", "id", "cwd")).casefold()

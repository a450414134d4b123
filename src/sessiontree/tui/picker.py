"""Choosing a session from a directory (Pi keeps one sub-directory per working directory)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from ..catalog import SessionListing, describe, find_session_files
from ..display import one_line
from . import deliver


class PickerScreen(Screen[Path | None]):
    """A table of sessions (name or first message, modified, entries, cwd) with a search box.
    Files are listed at once and described in the background, newest first."""

    BINDINGS = [
        Binding("escape", "cancel", "Back"),
        Binding("slash", "search", "Search"),
        Binding("q", "cancel", "Quit", show=False),
    ]

    def __init__(self, directory: Path, *, can_go_back: bool = False) -> None:
        super().__init__()
        self.directory = directory
        self.can_go_back = can_go_back
        self.listings: dict[str, SessionListing] = {}
        self._query = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(Text(f"Sessions in {self.directory}"), id="picker-title")
            yield Input(placeholder="search name, first message or directory", id="picker-search")
            yield DataTable(id="picker-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="picker-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("Session", key="title", width=56)
        table.add_column("Modified", key="modified", width=16)
        table.add_column("Entries", key="entries", width=8)
        table.add_column("Directory", key="cwd")
        files = find_session_files(self.directory) if self.directory.is_dir() else []
        for path in files:
            listing = SessionListing(path=path, modified=path.stat().st_mtime)
            self.listings[str(path)] = listing
        self._fill()
        status = f"{len(files)} session files" if files else f"No session files found in {self.directory}"
        self.query_one("#picker-status", Static).update(Text(status))
        table.focus()
        if files:
            self._describe_all(files)

    def _row(self, listing: SessionListing) -> tuple[Text, Text, Text, Text]:
        """Cells as Text, never markup: names and messages come from the files."""
        title = listing.title if not listing.error else f"⚠ {listing.title} ({listing.error})"
        when = datetime.fromtimestamp(listing.modified).strftime("%Y-%m-%d %H:%M")
        cells = (one_line(title, 56), when, str(listing.entry_count or ""), one_line(listing.cwd, 60))
        return tuple(Text(c) for c in cells)  # type: ignore[return-value]

    def _matches(self, listing: SessionListing) -> bool:
        if not self._query:
            return True
        hay = f"{listing.name or ''} {listing.first_message} {listing.cwd} {listing.path.name}".lower()
        return all(word in hay for word in self._query.lower().split())

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for key, listing in self.listings.items():
            if self._matches(listing):
                table.add_row(*self._row(listing), key=key)

    @work(thread=True, exclusive=True, group="describe")
    def _describe_all(self, files: list[Path]) -> None:
        worker = get_current_worker()
        for n, path in enumerate(files, 1):
            if worker.is_cancelled:
                return
            listing = describe(path)
            deliver(self.app, self._update, listing, n, len(files))

    def _update(self, listing: SessionListing, done: int, total: int) -> None:
        if not self.is_attached:
            return
        key = str(listing.path)
        self.listings[key] = listing
        table = self.query_one(DataTable)
        if self._matches(listing) and key in table.rows:
            for column, value in zip(
                ("title", "modified", "entries", "cwd"), self._row(listing), strict=True
            ):
                table.update_cell(key, column, value)
        status = f"{total} session files" + ("" if done == total else f" · reading {done}/{total}…")
        self.query_one("#picker-status", Static).update(Text(status))

    @on(Input.Changed, "#picker-search")
    def _search(self, event: Input.Changed) -> None:
        self._query = event.value.strip()
        self._fill()

    @on(Input.Submitted, "#picker-search")
    def _search_done(self) -> None:
        self.query_one(DataTable).focus()

    def action_search(self) -> None:
        self.query_one("#picker-search", Input).focus()

    @on(DataTable.RowSelected)
    def _chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.dismiss(Path(event.row_key.value))

    def action_cancel(self) -> None:
        self.workers.cancel_group(self, "describe")
        self.dismiss(None)

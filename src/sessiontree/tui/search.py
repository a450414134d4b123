"""Finding entries: `/` opens the search box, `n`/`N` step through the matches. The scan runs in
a thread worker over the rows of the current outline, so a slow search never freezes keys and a
new search (or leaving the session) cancels the old one."""

from __future__ import annotations

import re

from textual import on, work
from textual.css.query import NoMatches
from textual.widgets import Input
from textual.worker import get_current_worker

from ..display import entry_summary
from ..outline import Outline
from . import deliver
from .core import BrowserBase


class SearchMixin(BrowserBase):
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
                deliver(self.app, self.notify, f"searching… {100 * row // total}%", timeout=1)
        if not worker.is_cancelled:
            deliver(self.app, self._search_done, query, outline, found)

    def _search_done(self, query: str, outline: Outline, rows: list[int]) -> None:
        try:
            tree = self._tree()
        except NoMatches:  # the screen closed while the worker ran
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

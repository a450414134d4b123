"""Finding entries. `/` finds (the matching rows are highlighted and the preview marks their
words; `n`/`N` step through them); `&`
filters (the tree narrows to the matching rows plus the ancestors that place them, like less's
`&pattern`; Esc restores the tree with the cursor where it was). Both take the query syntax of
`sessiontree.query`: words ANDed, `"a phrase"`, `re:` for a regular expression.

The search runs in a thread worker: a byte scan of the file picks the entries worth decoding
(`sessiontree.finding`), then those are matched, with progress under the search box and a check
for cancellation on every entry, so a slow expression never freezes keys; Esc or a new search
stops it."""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from contextlib import suppress

from rich.text import Text
from textual import on, work
from textual.css.query import NoMatches
from textual.widgets import Input, Static
from textual.worker import Worker, get_current_worker

from ..display import counted
from ..finding import Remembered
from ..outline import Outline
from ..query import Query, QueryError, QueryTimeout, compile_query
from . import deliver
from .core import BrowserBase
from .input_gate import gated
from .notices import confirm, withdraw
from .preview import PreviewView
from .search_box import Mode, SearchBox

PROGRESS_EVERY = 2000  # entries between two progress reports
PARTIAL_EVERY = 0.5  # seconds before a running find first shows its matches so far (then 1, 2, 4…)
WRAPPED = "Search wrapped"  # what `n` and `N` say past the last or first match


class SearchMixin(BrowserBase):
    _restore_position: int | None = None  # the cursor's entry before a filter narrowed the tree
    _remembered: Remembered | None = None  # the last query's verdicts, for `&` after `/` (made once)
    _search_row = -1  # the cursor's row when a find began, or the match it was put on since
    _query: Query | None = None  # the last find's or filter's query: its words marked in the preview

    def action_search(self) -> None:
        self._open_search("find", 'find entries: words, "a phrase", re:regex (Enter; Esc closes)')

    def action_search_filter(self) -> None:
        self._open_search("filter", "show only matching entries (Enter; Esc restores the tree)")

    def _open_search(self, mode: Mode, placeholder: str) -> None:
        search = self.query_one(SearchBox)
        search.open(mode, placeholder)
        # Now, not via `focus()`'s message or the input's own select-on-focus: the keys typed
        # right after `/` (a fast typist, a paste) are already queued behind it. They went to
        # the tree as commands, or a late selection of what they had typed made the next key
        # replace it. Typing replaces the last query, which stays there to be edited.
        self.set_focus(search)
        search.select_all()
        self._status("")

    def _status(self, text: str, error: bool = False) -> None:
        with_status = self.query_one("#search-status", Static)
        with_status.update(Text(text))
        with_status.set_class(error, "-error")
        with_status.display = bool(text)

    def _compile(self, text: str) -> Query | None:
        try:
            return compile_query(text)
        except QueryError as exc:
            self._status(str(exc), error=True)
            return None

    @on(Input.Changed, "#search")
    def _search_typed(self, event: Input.Changed) -> None:
        if self._compile(event.value) is not None:
            self._status("")

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        query = self._compile(text)
        if query is None:
            return  # the message stays under the box; the user fixes the expression
        search = self.query_one(SearchBox)
        search.display = False
        self._tree().focus()
        if query.is_empty:
            self._set_matches([])
            self._clear_filter()
            return
        tree = self._tree()
        # The last search's matches and its line go now: they stood through the whole of the
        # next search, and after it when it found nothing, where `n` then did nothing (QA).
        self._set_matches([])
        self._query = query
        withdraw(self, "")  # whatever the status line said (the progress shows below the tree)
        self._update_header()  # its "match k/n"
        if search.mode == "filter":
            if self._restore_position is None:
                self._restore_position = tree.current_position()
            self._run_search(query, None, bytes(tree.outline.vis))
        else:
            self._search_row = tree.cursor_row
            self._run_search(query, tree.outline, None)

    @on(SearchBox.Closed)
    def _search_closed(self) -> None:
        self.key_escape()

    def key_escape(self) -> None:
        search = self.query_one(SearchBox)
        was_open = search.display
        if was_open:
            search.display = False
            self._tree().focus()
        if self.workers.cancel_group(self, "search"):
            self._status("")
            if self._matches:  # a find stopped after showing some
                confirm(
                    self, f"Search stopped: {counted(len(self._matches), 'match', 'matches')} so far (n / N)"
                )
            return
        self._status("")
        if self._tree().restrict is not None:
            self._clear_filter()
        elif self._matches and not was_open:  # one Esc at a time: then the highlights go
            self._set_matches([])
            confirm(self, "Search highlights cleared")

    def _clear_filter(self) -> None:
        tree = self._tree()
        if tree.restrict is None:
            return
        tree.restrict = None
        keep, self._restore_position = self._restore_position, None
        tree.rebuild(keep=keep)
        self._update_header()  # the cursor is back where it was: on no match, maybe
        self.app.clear_notifications()  # "… · Esc restores the tree" is done
        confirm(self, "Search filter cleared")

    @work(thread=True, exclusive=True, group="search")
    def _run_search(self, query: Query, outline: Outline | None, visible: bytes | None) -> None:
        """Find: the rows of `outline` that match. Filter: every entry shown under the current
        filter (`visible`), folded or not, whose text matches. A byte scan of the file picks
        the entries worth decoding (`finding.find`)."""
        worker = get_current_worker()
        positions = (
            outline.iter_positions()
            if outline is not None
            else (i for i, shown in enumerate(visible or b"") if shown)
        )
        deliver(self.app, self._status, "searching…")
        shown = [-1]  # the percentage of the file scanned last shown

        def scanning(done: int, total: int) -> None:
            # The byte scan takes about a second per gigabyte before any entry is decoded:
            # "searching…" alone stood for 2.3 s on a 1M-entry file (QA).
            percent = 100 * done // max(total, 1)
            if percent != shown[0]:
                shown[0] = percent
                deliver(self.app, self._status, f"searching… scanning the file {percent}%")

        due = [time.monotonic() + PARTIAL_EVERY, PARTIAL_EVERY]  # next showing of matches, then the wait

        def progress(done: int, total: int, matches: list[int]) -> None:
            deliver(self.app, self._status, f"searching… {100 * done // total}% · {len(matches):,} found")
            # Find shows its matches as they come: a common word on a 1M-entry file takes ~17 s
            # to decode, and its first match is on screen after the scan rather than at the end.
            # Each showing costs the UI thread a pass over the matches (~0.1 s at 400,000), so
            # the waits between them double: the count is on the progress line meanwhile.
            now = time.monotonic()
            if outline is not None and matches and now >= due[0] and not worker.is_cancelled:
                due[1] *= 2
                due[0] = now + due[1]
                deliver(self.app, self._search_partial, worker, outline, list(matches))

        if self._remembered is None:
            self._remembered = Remembered()
        try:
            found = self._remembered.find(
                self.session,
                query,
                positions,
                cancelled=gated(self.app, lambda: worker.is_cancelled),  # waits out keys being handled
                progress=progress,
                every=PROGRESS_EVERY,
                scanning=scanning,
            )
        except QueryTimeout as exc:
            if not worker.is_cancelled:
                deliver(self.app, self._search_gave_up, str(exc))
            return
        if found is None or worker.is_cancelled:
            return
        # The matches and the ancestors that place them, for `&`: here, not on the UI thread,
        # where the walks up a deep tree took 65 ms for 3,900 matches.
        placed = _placing(self.session.tree.parent, found.positions) if outline is None else None
        if not worker.is_cancelled:
            deliver(self.app, self._search_done, query, outline, found.positions, found.skipped, placed)

    def _search_partial(self, worker: Worker[None], outline: Outline, found: list[int]) -> None:
        """Matches so far of a find still running: highlighted and counted, and the cursor on
        the first of them if it has not moved since the search began."""
        if worker.is_cancelled:  # Esc or a new search came after this was sent
            return
        try:
            tree = self._tree()
        except NoMatches:
            return
        first = not self._matches
        self._set_matches(found)
        if first and tree.outline is outline and tree.cursor_row == self._search_row:
            self.action_next_match(1, include_current=True)
            self._search_row = tree.cursor_row

    def _search_gave_up(self, reason: str) -> None:
        self._status("")
        self.notify(reason, severity="error", markup=False, timeout=8)

    def _search_done(
        self,
        query: Query,
        outline: Outline | None,
        found: list[int],
        skipped: int,
        placed: bytearray | None = None,
    ) -> None:
        try:
            tree = self._tree()
        except NoMatches:  # the screen closed while the worker ran
            return
        note = f" ({skipped:,} unreadable entries skipped)" if skipped else ""
        self._status("")
        if outline is None:  # filter mode
            if not found:
                self._restore_position = None
                self.notify(f"No entry matches '{query.source}'{note}", severity="warning", markup=False)
                return
            mask = placed if placed is not None else _placing(self.session.tree.parent, found)
            mask.extend(bytes(max(len(self.session.tree) - len(mask), 0)))  # appended since: no match
            tree.restrict = mask
            # The cursor stays on its match, else goes to the match nearest it in the file.
            here = self._restore_position if self._restore_position is not None else found[0]
            k = bisect_left(found, here)
            near = [found[j] for j in (k - 1, k) if 0 <= j < len(found)]
            tree.rebuild(keep=min(near, key=lambda i: (abs(i - here), i < here)))
            self._set_matches(found)
            matches = counted(len(found), "match", "matches")
            confirm(self, f"{matches}{note} · Esc restores the tree")
            return
        self._set_matches(found)
        if not found:
            self.notify(f"No entry matches '{query.source}'{note}", severity="warning", markup=False)
            return
        matches = counted(len(found), "match", "matches")
        confirm(self, f"{matches} for '{query.source}'{note} (n / N)")
        # Onto the first match from where the search began, unless the reader has moved
        # since (a search may run for seconds; matches shown meanwhile may have placed it).
        if tree.outline is outline and tree.cursor_row == self._search_row:
            self.action_next_match(1, include_current=True)

    def _set_matches(self, positions: list[int]) -> None:
        """Matches are kept as entry positions, so they survive rebuilds of the rows. The
        preview marks the query's words while there are matches (and not after Esc)."""
        self._matches = positions
        self._tree().set_matches(set(positions))
        with suppress(NoMatches):
            self.query_one(PreviewView).highlight = self._query if positions else None
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
            k = bisect_left(rows, here) if include_current else bisect_right(rows, here)
            wrapped = k >= len(rows)
            row = rows[0] if wrapped else rows[k]
        else:
            k = bisect_left(rows, here) - 1
            wrapped = k < 0
            row = rows[-1] if wrapped else rows[k]
        tree.set_cursor(row, center=True)
        self._update_header()
        # As vim says it: the header's "match 1/9" alone looks like a jump. Not for a search's
        # first landing (`include_current`), whose message says how many it found.
        if wrapped and len(rows) > 1 and not include_current:
            confirm(self, f"{WRAPPED} to the {'first' if step > 0 else 'last'} match")
        else:
            withdraw(self, WRAPPED)


def _placing(parent: Sequence[int], found: list[int]) -> bytearray:
    """1 for each entry of `found` and each of their ancestors (what places them in the tree),
    over the entries of `parent`."""
    mask = bytearray(len(parent))
    for i in found:
        while 0 <= i < len(mask) and not mask[i]:
            mask[i] = 1
            i = parent[i]
    return mask

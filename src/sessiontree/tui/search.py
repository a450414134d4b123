"""Finding entries. `/` finds (the matching rows are highlighted and the preview marks their
words; `n`/`N` step through them); `&`
filters (the tree narrows to the matching rows, each under its nearest matching ancestor, like
less's `&pattern` and Pi's own `/tree` search; Esc restores the tree with the cursor where it
was). Both take the query syntax of
`sessiontree.query`: words ANDed, `"a phrase"`, `re:` for a regular expression.

The search runs in a thread worker: a byte scan of the file picks the entries worth decoding
(`sessiontree.finding`), then those are matched, with progress under the search box and a check
for cancellation on every entry, so a slow expression never freezes keys; Esc or a new search
stops it."""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
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
from .keymap import key_of
from .notices import StatusLine, confirm, withdraw
from .preview_pane import PreviewPane
from .search_box import Mode, SearchBox

PROGRESS_EVERY = 2000  # entries between two progress reports
PARTIAL_EVERY = 0.5  # seconds before a running find first shows its matches so far (then 1, 2, 4…)
WRAPPED = "Search wrapped"  # what `n` and `N` say past the last or first match


FILTERED_END = " · Esc restores the tree"  # how `&`'s count ends (`_filtered_said`)


class SearchMixin(BrowserBase):
    _restore_position: int | None = None  # the cursor's entry before a filter narrowed the tree
    _remembered: Remembered | None = None  # the last query's verdicts, for `&` after `/` (made once)
    _search_row = -1  # the cursor's row when a find began, or the match it was put on since
    _query: Query | None = None  # the last find's or filter's query: its words marked in the preview
    _filter_after = False  # `&` came for the words of a find still running: narrow when it ends
    _filter_landed: int | None = None  # the entry a search filter put the cursor on
    # (the running find's worker, the matches it found up to now): the list grows in its thread
    _so_far: tuple[Worker[None], list[int]] | None = None

    def _show_keys(self) -> tuple[str, str]:
        """The keys that show hidden matches: fold every side branch (z), and filter 5 (all)."""
        return key_of(self.app, "fold_sides", "z"), key_of(self.app, "filter-5", "5")

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
        self._steps_waiting = []  # pressed during an earlier search
        if query.is_empty:
            marked, narrowed = bool(self._matches), self._tree().restrict is not None
            self._set_matches([])
            self._clear_filter()  # says so when the tree was narrowed
            if not narrowed:  # the status line kept saying whatever it said before (QA)
                confirm(self, "Search cleared" if marked else "Nothing to search for: the search was empty")
            return
        if search.mode == "filter" and self._finding(query):
            # The find of these words still running narrows the tree when it ends (from what it
            # found, at once): starting over scanned the file again, and a common word on a
            # 1M-entry file left the tree unfiltered for 25 s more (QA).
            self._filter_after = True
            confirm(self, f"The tree narrows to the matches of '{query.source}' once the search ends")
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

    def _finding(self, query: Query) -> bool:
        """Whether a find of `query`'s words is running."""
        running = any(w.group == "search" and not w.is_finished for w in self.workers)
        return running and self._query is not None and self._query.source == query.source

    @on(SearchBox.Closed)
    def _search_closed(self) -> None:
        self.key_escape()

    def key_escape(self) -> None:
        search = self.query_one(SearchBox)
        was_open = search.display
        running = [w for w in self.workers if w.group == "search" and not w.is_finished]
        if was_open:
            search.display = False
            self._tree().focus()
            if running:  # one Esc at a time: the box goes, the find it was opened over goes on
                return  # (`&` then Esc stopped a find, and its progress line stayed; QA)
        self._filter_after = False
        self._steps_waiting = []
        if self.workers.cancel_group(self, "search"):
            self._status("")
            so_far = self._so_far
            # The matches found up to now, not those shown last (the showings come at growing
            # intervals): the progress line said 74,793 found, and Esc then 56,315 (QA).
            if so_far is not None and so_far[0] in running and len(so_far[1]) > len(self._matches):
                self._set_matches(list(so_far[1]), partial=True)
            self._so_far = None
            if self._matches:  # a find stopped after showing some
                # Counted as a finished find counts them: those shown, as `n` steps through
                # them ("match 3/4,735" after "56,315 matches", QA), and what hides the others
                # said apart; the total with "shown" counted the filtered out as matches (QA).
                found, shown = self._matches, len(self._match_rows())
                vis = self._tree().outline.vis
                said = (
                    f"Search stopped: {counted(shown, 'match', 'matches')} so far (n / N)"
                    if shown
                    else "Search stopped: no match shown so far"
                )
                notes = (_hidden_note(found, shown, vis, keys) for keys in (self._show_keys(), None))
                wordings = [f"{said}{' · ' + hidden if hidden else ''}" for hidden in notes]
                confirm(self, next((t for t in wordings if len(t) <= self.app.size.width - 2), wordings[-1]))
            return
        self._status("")
        if self._tree().restrict is not None:
            self._clear_filter()
        elif self._matches and not was_open:  # one Esc at a time: then the highlights go
            self._set_matches([])
            confirm(self, "Search highlights cleared")

    def _clear_filter(self) -> None:
        """The whole tree again: the cursor back where it was before the filter, unless the
        reader moved it among the matches (it jumped away from the entry they had chosen, or
        had just moved the leaf to: QA)."""
        tree = self._tree()
        if tree.restrict is None:
            return
        tree.restrict = None
        here = tree.current_position()
        keep = self._restore_position if here == self._filter_landed else here
        self._restore_position = None
        tree.rebuild(keep=keep)
        self._update_header()  # the cursor is back where it was: on no match, maybe
        self.app.clear_notifications()  # "… · Esc restores the tree" is done
        confirm(self, "Search filter cleared")

    @work(thread=True, exclusive=True, group="search")
    def _run_search(self, query: Query, outline: Outline | None, visible: bytes | None) -> None:
        """Every entry that matches, shown or not, so that the matches a fold or the filter
        hides are counted and said, and are there when the filter changes. Find (`outline`)
        steps through those with rows; the filter (`visible`: what the filter in use shows)
        narrows the tree to those it shows. A byte scan of the
        file picks the entries worth decoding (`finding.find`)."""
        worker = get_current_worker()
        positions = range(len(self.session.tree))
        deliver(self.app, self._progress, worker, "searching…")
        shown = [-1]  # the percentage of the file scanned last shown

        def scanning(done: int, total: int) -> None:
            # The byte scan takes about a second per gigabyte before any entry is decoded:
            # "searching…" alone stood for 2.3 s on a 1M-entry file (QA).
            percent = 100 * done // max(total, 1)
            if percent != shown[0]:
                shown[0] = percent
                deliver(self.app, self._progress, worker, f"searching… scanning the file {percent}%")

        due = [time.monotonic() + PARTIAL_EVERY, PARTIAL_EVERY]  # next showing of matches, then the wait

        def progress(done: int, total: int, matches: list[int]) -> None:
            if outline is not None:  # a find: Esc keeps what it found
                self._so_far = (worker, matches)
            # Named apart from the scan's percentage, which reached 100% and then seemed to
            # start again (QA): these are the entries the scan left to decode.
            said = f"searching… {100 * done // total}% of {total:,} entries to check · {len(matches):,} found"
            deliver(self.app, self._progress, worker, said)
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
        # The mask of the shown matches, for `&`: built here, off the UI thread.
        kept = None
        if visible is not None:
            kept = _matching(
                len(self.session.tree), [i for i in found.positions if i < len(visible) and visible[i]]
            )
        if not worker.is_cancelled:
            searched = len(positions)
            deliver(
                self.app, self._search_done, query, outline, found.positions, found.skipped, kept, searched
            )

    def _progress(self, worker: Worker[None], said: str) -> None:
        """A running find's progress line, unless it was stopped since it was sent: the thread
        waits for the line to be shown, and one sent as Esc stopped the find came after Esc had
        cleared the line, to stay there (QA)."""
        if not worker.is_cancelled:
            self._status(said)

    def _entries_arrived(self, start: int) -> None:
        """Entries live follow brought in are matched against the search in effect: its count,
        `n`/`N` and `&` left them out until the next search (QA: a new row holding the word, and
        "match 4/4" wrapped over it). A search still running reads them itself."""
        if self._query is None or not self._in_effect():
            return
        if not any(w.group == "search" and not w.is_finished for w in self.workers):
            self._search_arrivals(self._query, range(start, len(self.session.tree)))

    def _in_effect(self) -> bool:
        """A search is in effect: its matches are marked, or `&` narrows the tree to them."""
        return bool(self._matches) or self._tree().restrict is not None

    @work(thread=True, group="search-arrivals")
    def _search_arrivals(self, query: Query, positions: range) -> None:
        worker = get_current_worker()
        if self._remembered is None:
            self._remembered = Remembered()
        try:
            # decoded one by one: a few entries, where a byte scan reads the whole file
            found = self._remembered.find(
                self.session, query, positions, cancelled=lambda: worker.is_cancelled, scan=False
            )
        except QueryTimeout:
            return
        if found is not None and not worker.is_cancelled:
            deliver(self.app, self._arrivals_found, query, positions, found.positions)

    def _arrivals_found(self, query: Query, positions: range, found: list[int]) -> None:
        if query is not self._query or not self._in_effect():
            return  # another search, or Esc, came meanwhile
        tree = self._tree()
        if tree.restrict is not None:  # the filter shows the arrivals that match, only
            mask = bytearray(tree.restrict)
            mask.extend(bytes(max(positions.stop - len(mask), 0)))
            for i in positions:
                mask[i] = 0
            for i in found:
                mask[i] = 1
            tree.restrict = mask
            tree.rebuild()
        if found:
            self._set_matches(sorted({*self._matches, *found}), partial=self._matches_partial)
            line = self.query_one(StatusLine)
            if tree.restrict is not None and line.message.endswith(FILTERED_END):
                # the count said when `&` ended, now short of the header's "match 5/5" (QA)
                confirm(self, self._filtered_said())

    def _filtered_said(self, note: str = "") -> str:
        """What `&` says of the tree narrowed to the matches: how many are shown, and what
        hides the others."""
        shown = len(self._match_rows())
        hidden = _hidden_note(self._matches, shown, self._tree().outline.vis, self._show_keys())
        more = f" · {hidden}" if hidden else ""
        return f"{counted(shown, 'match', 'matches')} shown{note}{more}{FILTERED_END}"

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
        self._set_matches(found, partial=True)
        if first and tree.outline is outline and tree.cursor_row == self._search_row:
            self.action_next_match(1, include_current=True)
            self._search_row = tree.cursor_row
        self._take_steps_waiting()

    def _search_gave_up(self, reason: str) -> None:
        self._status("")
        self.notify(reason, severity="error", markup=False, timeout=8)

    def _search_done(
        self,
        query: Query,
        outline: Outline | None,
        found: list[int],
        skipped: int,
        kept: bytearray | None = None,
        searched: int = 0,
    ) -> None:
        """`searched`: the entries there were when the search began; those live follow brought
        in since are searched now (`_entries_arrived` passes over them while it runs)."""
        try:
            tree = self._tree()
        except NoMatches:  # the screen closed while the worker ran
            return
        note = f" ({skipped:,} unreadable entries skipped)" if skipped else ""
        self._status("")
        # taken once the landing is made, below; a search ending otherwise (no match shown, a
        # filter) drops them
        steps, self._steps_waiting = self._steps_waiting, []
        if self._filter_after and outline is not None:  # `&` came while it ran: now the filter,
            self._filter_after = False  # from the verdicts just made (`Remembered`), not a rescan
            if self._restore_position is None:
                self._restore_position = tree.current_position()
            self._run_search(query, None, bytes(tree.outline.vis))
            return
        if outline is None and kept is not None:  # filter mode
            shown_found = [i for i in found if i < len(kept) and kept[i]]
            if not shown_found:
                self._restore_position = None
                self._set_matches(found)  # to be stepped through once the filter shows them
                self.app.bell()
                hidden = _hidden_note(found, 0, tree.outline.vis, self._show_keys())
                said = (
                    f"No shown entry matches '{query.source}': {hidden}"
                    if found
                    else (f"No entry matches '{query.source}'{_regex_hint(query)}")
                )
                confirm(self, said + note)
                return
            mask = kept
            mask.extend(bytes(max(len(self.session.tree) - len(mask), 0)))  # appended since: no match
            tree.restrict = mask
            # The cursor stays on its match, else goes to the match nearest it in the file.
            here = self._restore_position if self._restore_position is not None else shown_found[0]
            k = bisect_left(shown_found, here)
            near = [shown_found[j] for j in (k - 1, k) if 0 <= j < len(shown_found)]
            tree.rebuild(keep=min(near, key=lambda i: (abs(i - here), i < here)))
            self._filter_landed = tree.current_position()
            self._set_matches(found)
            confirm(self, self._filtered_said(note))
            self._catch_up(query, searched)
            return
        self._set_matches(found)
        shown = len(self._match_rows())
        hidden = _hidden_note(found, shown, tree.outline.vis, self._show_keys())
        if not shown:
            self.app.bell()
            if found:
                confirm(self, f"No shown entry matches '{query.source}': {hidden}{note}")
            else:
                confirm(self, f"No entry matches '{query.source}'{note}{_regex_hint(query)}")
            return
        matches = counted(shown, "match", "matches")
        # Onto the first match from where the search began, unless the reader has moved
        # since (a search may run for seconds; matches shown meanwhile may have placed it).
        landing = tree.outline is outline and tree.cursor_row == self._search_row
        # None at or below the cursor (the leaf, at the bottom): the landing goes round to
        # the first, which `n` says and the first landing did not (QA)
        wrapped = landing and bisect_left(self._match_rows(), tree.cursor_row) >= shown
        tail = " · none below: from the top" if wrapped else ""
        said = f"{matches} for '{query.source}'{note} (n / N)"
        short = _hidden_note(found, shown, tree.outline.vis, None)
        # The whole of it, else without the keys that show what is hidden, then without n / N:
        # at 80 columns the end was cut, and it said where the cursor went (QA).
        bare = f"{matches} for '{query.source}'{note}"
        brief = " · from the top" if wrapped else ""
        wordings = (
            f"{said}{' · ' + hidden if hidden else ''}{tail}",
            f"{said}{' · ' + short if short else ''}{tail}",
            f"{bare}{' · ' + short if short else ''}{tail}",
            f"{bare}{' · ' + short if short else ''}{brief}",  # long words: cut, it lost the end (QA)
            f"{bare}{brief}",
        )
        confirm(self, next((t for t in wordings if len(t) <= self.app.size.width - 2), wordings[-1]))
        if landing:
            self.action_next_match(1, include_current=True)
        self._take_steps_waiting(steps)
        self._catch_up(query, searched)

    def _take_steps_waiting(self, steps: list[int] | None = None) -> None:
        """The `n`/`N` pressed while the search had found nothing yet, now that it has."""
        if steps is None:
            steps, self._steps_waiting = self._steps_waiting, []
        for step in steps:
            self.action_next_match(step)

    def _catch_up(self, query: Query, searched: int) -> None:
        """The entries that arrived while the search of `query` ran, searched now."""
        if 0 < searched < len(self.session.tree):
            self._search_arrivals(query, range(searched, len(self.session.tree)))

    def _refilter_matches(self) -> None:
        """Under `&`, the matches a new filter shows: the view kept those of the filter it was
        made under, so "2 filtered out (5)" said, and 5 still showed 10 of 12 (QA)."""
        tree = self._tree()
        if tree.restrict is not None:
            shows = tree.filter_mask()
            tree.restrict = _matching(len(self.session.tree), [i for i in self._matches if shows[i]])

    def _set_matches(self, positions: list[int], *, partial: bool = False) -> None:
        """Matches are kept as entry positions, so they survive rebuilds of the rows. The
        preview marks the query's words while there are matches (and not after Esc).
        `partial`: those of a search still running."""
        self._matches = positions
        self._matches_partial = partial and bool(positions)
        self._tree().set_matches(set(positions))
        with suppress(NoMatches):
            self.query_one(PreviewPane).mark(self._query if positions else None)
        self.refresh_bindings()
        self._update_header()

    def action_next_match(self, step: int, include_current: bool = False) -> None:
        rows = self._match_rows()
        if not rows and not self._matches and self._query is not None and self._finding(self._query):
            # `/ word Enter n` in a burst: the `n` came before the search had found anything,
            # and said there was no search (QA). It steps once the first matches are shown.
            self._steps_waiting.append(step)
            return
        if not rows:
            self.app.bell()  # and why, as less says "No previous regular expression"
            if self._matches:
                hidden = _hidden_note(self._matches, 0, self._tree().outline.vis, self._show_keys())
                confirm(self, f"No match is shown: {hidden}")
            else:
                confirm(self, "No search to step through: / finds")
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
        if include_current:  # a search's first landing: its message says how many it found
            return
        # As vim says it: the header's "match 1/9" alone looks like a jump. The position is
        # said here too, as the header's end is cut at 80 columns with a filter on (QA).
        so_far = " so far" if self._matches_partial else ""  # a search still running, or stopped
        where = f"match {bisect_left(rows, row) + 1:,}/{len(rows):,}{so_far}"
        if wrapped and len(rows) > 1:
            confirm(self, f"{WRAPPED} to the {'first' if step > 0 else 'last'} {where}")
        else:
            confirm(self, where[0].upper() + where[1:])


def _hidden_note(found: list[int], shown: int, vis: bytes | bytearray, keys: tuple[str, str] | None) -> str:
    """What hides the matches without a row ("2 folded (z), 1 filtered out (5 shows all)": the
    keys that show them; a bare "(5)" said nothing to a newcomer, QA), or "": a find said "No
    entry matches" where a fold or the filter hid the one that did (QA). `vis`: what the filter
    shows, folded or not; `keys`: those of "fold every side branch" and of filter 5, as the
    user has them (`_show_keys`), or None: without them ("2 folded, 1 filtered out")."""
    hidden = len(found) - shown
    if hidden <= 0:
        return ""
    import numpy as np

    at = np.asarray(found, dtype=np.int64)
    shows = np.frombuffer(bytes(vis), dtype=np.uint8)
    at = at[at < len(shows)]
    filtered = int(np.count_nonzero(shows[at] == 0)) + len(found) - len(at)
    parts = []  # short: after "N matches for 'query' (n / N)" at 80 columns (QA)
    if hidden - filtered > 0:
        parts.append(f"{hidden - filtered:,} folded" + (f" ({keys[0]})" if keys else ""))
    if filtered:
        parts.append(f"{filtered:,} filtered out" + (f" ({keys[1]} shows all)" if keys else ""))
    return ", ".join(parts)


LOOKS_LIKE_REGEX = re.compile(r"\.\*|\.\+|\\[dswb]|\[.*\]|\|")  # `a.*b`, `\d+`, `[ab]`, `a|b`


def _regex_hint(query: Query) -> str:
    """A hint when words that found nothing look like a regular expression (`a.*b`)."""
    terms = query.terms
    if all(t.kind != "regex" for t in terms) and any(LOOKS_LIKE_REGEX.search(t.text) for t in terms):
        return f" (as a regular expression: re:{terms[0].text})" if len(terms) == 1 else " (re: for a regex)"
    return ""


def _matching(n: int, found: list[int]) -> bytearray:
    """1 for each entry of `found`, over `n` entries: what `&` shows. Only the matches, as Pi's
    `/tree` search shows them (`applyFilter` in Pi's
    packages/coding-agent/src/modes/interactive/components/tree-selector.ts), each under its
    nearest matching ancestor: with the ancestors that place them, a chain kept every entry
    above its last match (17 matches, 694 rows on Pi's own `large-session.jsonl`)."""
    mask = bytearray(n)
    for i in found:
        if 0 <= i < n:
            mask[i] = 1
    return mask

"""What every part of the browser screen shares: the session, the tree widget, the header and
the guard around writes. The screen's jobs (moves, search, follow) are mixins over this base,
one module each, so a change to one job touches one file."""

from __future__ import annotations

import contextlib
import os
import re
from bisect import bisect_left
from collections.abc import Callable
from pathlib import Path

from rich.cells import cell_len
from rich.text import Text
from textual.css.query import NoMatches
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widgets import Static

from ..catalog import first_words
from ..display import counted, for_cells, inert, one_line
from ..model.errors import Diagnostic, SessionError
from ..outline import Filter
from ..session import Session
from .cells import shortened
from .notices import confirm
from .preview_pane import PreviewPane
from .tree_view import RowTarget, SessionTreeView

# Entries the check left for after the first paint may still have to look at for a write key to
# run at once (waiting, it blocks the screen; ~50,000 entries are about a quarter of a second).
WAIT_FOR_CHECK = 50_000
NOT_THE_NAME = 40  # header columns a long session name leaves to the rest (`_update_header`)
NAME_MOST = 48  # columns a session's name keeps whatever the rest (`_update_header`)
HEADER_CHROME = 8  # the header's columns that are neither name nor the rest: icon, " — ", the right margin
NAME_LEAST = 16  # columns a session's name keeps whatever the state beside it
# The banner of a session opened with --read-only, and shorter ones for narrow terminals: at 60
# columns it took two rows of the tree's (QA).
ASKED = "opened with --read-only; nothing is written to the session"
ASKED_SHORTER = (
    f"READ-ONLY: {ASKED}",
    "READ-ONLY (--read-only): nothing is written",
    "READ-ONLY (--read-only)",
)
# A database's refusal names the session and the database ("session ID in postgresql://… is
# open for writing"), which the header names already: the banner says "this session".
THIS_SESSION = re.compile(r"^session .+? in .+? is ((already )?open for writing in (another|this) process)")


NOT_DONE = "Not done: nothing was written (the notice says why)"
NOT_DONE_LOCKED = "Not done: another process is writing this session (the banner says more)"


class BrowserBase(Screen[None]):
    """State and helpers used by more than one of the browser's jobs."""

    # Textual's Screen repaints itself when its title changes, and a repainted screen is laid
    # out and drawn again whole (its compositor maps the widgets, not the screen): 25-30 ms at
    # 160×50 on a big session, after every write and every followed append. The Header watches
    # these and redraws its own line, which is all that changes.
    title: Reactive[str | None] = Reactive(None, compute=False, repaint=False)
    sub_title: Reactive[str | None] = Reactive(None, compute=False, repaint=False)

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self._matches: list[int] = []  # entry positions of the last search's hits
        self._matches_partial = False  # those of a search still running or stopped: "so far"
        self._steps_waiting: list[int] = []  # `n`/`N` pressed before a running search found any
        self._match_rows_key: tuple[int, int] | None = None
        self._match_rows_cache: list[int] = []
        self._new_entries = 0  # appended by another process since the cursor was at the leaf
        self._banner_text = ""  # what the read-only banner says
        self._first_words = ""  # an unnamed session's first user message, once read
        self.writer_gone = False  # the writer that kept this session read-only has quit
        self.writer_back = False  # and another took its place since (the reason names the first)
        self.follow = True
        self.checking = False  # the check left for after the first paint runs (`_verify`)
        # write keys pressed meanwhile, in order, with how the status line named each
        self._waiting: list[tuple[Callable[[], object], str]] = []
        # (what to do once they are written, how the status line names it, the key that asks again)
        self._after_writes: tuple[Callable[[], object], str, str] | None = None
        self._refused = 0  # writes `_guard` refused: a quit after waiting writes asks

    def _tree(self) -> SessionTreeView:
        return self.query_one(SessionTreeView)

    def _entries_arrived(self, start: int) -> None:
        """Entries from position `start` on arrived from another writer (live follow) and have
        rows: a hook for the jobs that must take them in too (`SearchMixin`: the search in
        effect). The base has nothing more to do with them."""
        return

    def _refilter_matches(self) -> None:
        """The tree's filter changed: a hook for a view made under the old one (`SearchMixin`:
        `&`'s matches). The base has nothing to redo."""
        return

    def reveal(self, position: int, what: str) -> None:
        """Put the cursor on entry `position` and say so (`what`: "At 3f2a…"), showing every
        entry first when the filter hides it and opening the folds over it: the history's
        Enter and a label's command landed on a shown ancestor without a word, and `:` on the
        stub of a fold, saying the filter had hidden it (QA)."""
        tree = self._tree()
        notes = []
        if tree.outline.row_of[position] < 0 and not tree.filter_shows(position):
            tree.filter = Filter.ALL
            self._refilter_matches()
            tree.rebuild()
            self.refresh_bindings()
            notes.append("the filter hid it: now all")
        opened = tree.unfold_to(position) if tree.outline.row_of[position] < 0 else 0
        if opened:
            tree.rebuild(keep=position)
            notes.append(f"unfolded {counted(opened, 'fold')} over it")
        tree.go_to_position(position)
        confirm(self, what + (f" ({'; '.join(notes)})" if notes else ""))

    def _target(self) -> RowTarget | None:
        """The cursor's entry, or None after saying on the status line why there is none (an
        empty session, a filter that shows nothing): the key did nothing, said."""
        tree = self._tree()
        target = tree.current_target()
        if target is None:
            confirm(self, tree.empty_text())
        return target

    # --- header and banner --------------------------------------------------------------------

    def _update_header(self) -> None:
        try:
            tree = self._tree()
            banner = self.query_one("#banner", Static)
        except NoMatches:  # called while the screen is being torn down
            return
        session = self.session
        location = Path(session.storage.location or "?").name
        name = session.session_name
        if not name:  # as the picker lists it: by its first user message
            if not self._first_words:
                self._first_words = first_words(session)
            name = self._first_words or "(unnamed session)"
        leaf = session.leaf_id or "(none)"
        # What changes first, what is known from the command line last: a narrow terminal cuts
        # the header's end (at 80 columns, after the title, about thirty characters are left).
        parts = [f"leaf {leaf}"]
        if tree.filter is not Filter.DEFAULT:
            parts.append(f"filter {tree.filter.value}")
        if tree.restrict is not None:  # `&`: said here as long as it lasts, not only by a toast
            parts.append("only matches (Esc)")
        if self._matches:
            rows = self._match_rows()
            cursor = tree.cursor_row
            k = bisect_left(rows, cursor)
            # While a search runs, its matches come in file order, not the tree's: both the
            # count and the place among them grow ("match 1/1,534" was #311 of 356,369, QA)
            so_far = " so far" if self._matches_partial else ""
            if not rows:
                parts.append("matches hidden")
            elif k < len(rows) and rows[k] == cursor:
                parts.append(f"match {k + 1:,}/{len(rows):,}{so_far}")
            else:  # "match -/3" read as a fault (QA)
                parts.append(counted(len(rows), "match", "matches") + so_far)
        if self._new_entries:
            parts.append(f"+{self._new_entries:,} new")
        if not self.follow:
            parts.append("follow paused")
        state = inert(" · ".join(parts))
        sub_title = inert(" · ".join([*parts, counted(session.entry_count(), "entry", "entries"), location]))
        # The name takes what the rest leaves, and at least what leaves NOT_THE_NAME columns
        # (for the icon, the dash and "leaf 3a7c55c4 · 1,234,567 entries") up to NAME_MOST:
        # then the end of the rest is cut, where the file name is (known from the command
        # line). Counted in cells: a name in wide characters took twice the columns its length
        # said, and a first message of 120 characters hid the file name at 160 columns (QA).
        # The state before the counts (filter, matches, "+2 new", "follow paused") is not cut
        # for the name: at 80 columns the name kept 40 and hid them (QA). Where it leaves the
        # name fewer than NAME_LEAST columns, the name goes (`SessionHeader.format_title`).
        width = self.app.size.width
        room = width - HEADER_CHROME - cell_len(sub_title)
        state_room = width - HEADER_CHROME - cell_len(state) - len(" · ")
        keeps = max(room, min(max(width - NOT_THE_NAME, NAME_LEAST), NAME_MOST, state_room))
        self.title = shortened(for_cells(one_line(name, 400)), keeps) if keeps >= NAME_LEAST else ""
        self.sub_title = sub_title
        if session.read_only:
            if session.format_version < 3 and session.location is not None:
                # The storage's reason names the CLI's `upgrade` with the file's path: four
                # rows at 80 columns. Here a key does it, so two rows say as much.
                old = f"READ-ONLY: a version {session.format_version} file (Pi's older format), shown as v3"
                blocked = self.upgrade_blocked()
                if blocked is None:
                    text = f"{old}; the file is left untouched. U upgrades it (a backup is kept)."
                else:  # U was offered, and said so only after its dialog (QA)
                    text = f"{old}, and {blocked}: it cannot be upgraded here."
            else:
                reason = session.read_only_reason
                if reason in (None, "opened read-only"):  # the storage's word for what was asked
                    reason = ASKED
                if session.locked_out:  # the header names the session: five rows at 80 columns
                    reason = THIS_SESSION.sub(r"this session is \1", reason, count=1)
                text = f"READ-ONLY: {inert(reason)}"
                if session.locked_out and self.writer_gone:
                    text = (
                        "READ-ONLY, though the process that was writing this session has quit: o, then"
                        " Enter on it, opens it for writing"
                    )
                elif session.locked_out and self.writer_back:
                    text = "READ-ONLY: another process is writing this session again (o)"
                elif session.locked_out:  # the library's reason names no key
                    text += " (o)"
                if "damage" not in (session.read_only_reason or ""):
                    text += self._damage_said()
                if text == f"READ-ONLY: {ASKED}":  # one row, not two, down to 24 columns
                    text = next((t for t in ASKED_SHORTER if len(t) <= width - 2), ASKED_SHORTER[-1])
            if text != self._banner_text:  # `Static.update` lays the whole screen out again
                self._banner_text = text
                banner.update(Text(text))
            banner.display = True
        else:
            banner.display = False

    def _damage_said(self) -> str:
        """Damage the session has, for a banner that gives another reason for being read-only:
        a viewer opened with --read-only, or locked out by the writer, never said a damaged line
        (the writer's banner did; QA)."""
        errors = [d for d in self.session.diagnostics if d.severity == "error"]
        if not errors:
            return ""
        more = f"; and {counted(len(errors) - 1, 'more problem')}" if len(errors) > 1 else ""
        return f"; the session has damage ({errors[0].said()}{more}): `sessiontree check` lists it"

    def upgrade_blocked(self) -> str | None:
        """Why an old-format file cannot be upgraded by this user (a rewrite next to the file,
        with a backup: the file and its directory must be writable), or None."""
        location = self.session.location
        if location is None:
            return None
        if getattr(self.app, "writes_nothing", False):
            return "the page is served read-only"
        if not os.access(location, os.W_OK):
            return "the file is not writable by you"
        try:  # as the storage reads a mode without write bits, root's too (the banner said U; QA)
            if not os.stat(location).st_mode & 0o222:
                return "the file's permissions make it read-only (chmod u+w allows writing)"
        except OSError:
            return "the file cannot be looked at"
        if not os.access(os.path.dirname(os.path.abspath(location)), os.W_OK):
            return "its directory is not writable by you"
        return None

    def _match_rows(self) -> list[int]:
        """The rows of the search matches, sorted; kept until the rows or the matches change
        (the header asks on every cursor move)."""
        tree = self._tree()
        key = (tree.version, id(self._matches))
        if self._match_rows_key != key:
            self._match_rows_cache = tree.outline.rows_of(self._matches)
            self._match_rows_key = key
        return self._match_rows_cache

    # --- writes -------------------------------------------------------------------------------

    def _write_when_checked(self, write: Callable[[], object], what: str) -> None:
        """Run a write key's work now or, while the check left for after the first paint has
        many entries to go, as soon as it ends. Every write waits for that check (the UTF-8 of
        every line: `JsonlStorage.finish_verification`); waited for inside the key's handler, it
        froze the screen for 2.4 s after the first Enter on a deep 1M-entry file. `write` takes
        its target when the key is pressed: it runs there even if the cursor moved since. Its
        writes go through `_guard`, which refuses them if the check found damage."""
        if not self.checking or self.session.unchecked < WAIT_FOR_CHECK:
            write()
            return
        self._waiting.append((write, what))
        # fits 80 columns with an id of Pi's length: the end of a longer wording was cut off
        confirm(self, f"{what}: waiting for the file check to end (keys work meanwhile)")

    @property
    def writes_waiting(self) -> bool:
        return bool(self._waiting)

    def waiting_writes(self) -> list[str]:
        """What each write key waiting for the check would write ("Move to 1a2b3c4d"), in the
        order pressed: a quit without them says them in the shell (`launch`)."""
        return [what for _, what in self._waiting]

    def after_writes(self, then: Callable[[], object], doing: str, key: str) -> bool:
        """`then`, asked while write keys wait for the check (a quit, another session: leaving
        closes this one), happens once they are written (True). Asked again, it happens now,
        without them (False). `doing`: "Quitting"; `key`: what asks for it ("q")."""
        if self._after_writes is not None:
            return False
        self._after_writes = (then, doing, key)
        confirm(self, f"{doing} once the keys pressed are written ({key} again: without them)")
        return True

    def _checked(self) -> None:
        """The check left for after the first paint ended: the write keys pressed meanwhile
        run, in order. A quit asked meanwhile waits for them (`after_writes`), and does not
        happen when one was refused (the check found damage, another writer): it quit as if all
        were written (QA)."""
        self.checking = False
        waiting, self._waiting = self._waiting, []
        if not self.is_attached:  # another session was opened meanwhile: this one is closed
            return
        if waiting:  # what each write says replaces it; a refused one said only in a toast (QA)
            confirm(self, "The file check ended")
        refused = self._refused
        for write, _ in waiting:
            write()
        after, self._after_writes = self._after_writes, None
        if after is None:
            return
        then, doing, key = after
        if self._refused == refused:
            then()
        else:
            confirm(
                self, f"Not {doing[:1].lower()}{doing[1:]}: a key that waited was not written ({key} again)"
            )

    def _writable(self) -> bool:
        if self.session.read_only:
            confirm(self, "Read-only: nothing was written (the banner says why)")
            return False
        return True

    def _guard(self, operation: Callable[[], object]) -> bool:
        """Run a write; a refused write is reported, never raised into Textual. A torn last line
        the write set aside first is said with where its bytes went (the toast at open said
        only that it would be, and stayed up after). Read-only is said as `_writable` says it:
        a write that waited for the file check may find the session read-only since."""
        if not self._writable():
            self._refused += 1
            return False
        aside = self._set_aside()
        try:
            operation()
        except SessionError as exc:
            self._refused += 1
            said = str(exc)  # the storage's messages mostly say so already
            already = ("nothing was written", "nothing was added", "nothing was changed")
            note = "" if any(words in said for words in already) else " (nothing was written)"
            self.notify(f"{said}{note}", title="Not done", severity="error", markup=False)
            # the status line said the last write that was done (QA: "Leaf moved to …" stayed)
            if self.session.locked_out:  # refused the writer lock at this write
                self._locked_out_now()
                confirm(self, NOT_DONE_LOCKED)
            else:
                confirm(self, NOT_DONE)
            return False
        for diagnostic in self._set_aside()[len(aside) :]:
            self.app.clear_notifications()  # the warning that it would be is out of date
            self.notify(
                diagnostic.message[:1].upper() + diagnostic.message[1:],
                title="Incomplete last line set aside",
                markup=False,
                timeout=15,
            )
        return True

    def _locked_out_now(self) -> None:
        """Another process holds the writer lock this session was to take at its first write:
        the banner says why it is read-only now, and the write keys go."""
        self._update_header()
        self.refresh_bindings()

    def _set_aside(self) -> list[Diagnostic]:
        return [d for d in self.session.diagnostics if d.code == "tail_set_aside"]

    def _after_write(self, keep: int | None = None, message: str | None = None) -> None:
        self._tree().rebuild(keep=keep)
        self._update_header()
        self._refresh_preview()
        if message:
            confirm(self, message)

    def _refresh_preview(self) -> None:
        with contextlib.suppress(NoMatches):
            self.query_one(PreviewPane).rebuild()

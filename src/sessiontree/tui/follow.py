"""Live follow: entries another process (the agent) appends show up while the session is open."""

from __future__ import annotations

import time

from textual.css.query import NoMatches
from textual.timer import Timer

from ..model.errors import SessionError
from .core import BrowserBase
from .notices import confirm

# A poll is one stat() of the file when nothing changed, so a short interval costs nothing and
# keeps an appended entry's way to the screen well under a quarter of a second.
POLL_SECONDS = 0.1
# How often a session read-only because another process writes it asks whether that writer has
# quit (a lock probe: an instant's flock, a lock query, or a look at `pg_locks`).
WRITER_LOOK_SECONDS = 2.0
# Within 78 columns: at 80 the end, the keys that open the session for writing, was cut (QA).
WRITER_GONE = "The writing process has quit: o, then Enter on it, opens it for writing"
WRITER_BACK = "Another process is writing this session again: its entries are followed here"
# How long live follow waits to look again after the database server did not answer.
RETRY_SECONDS = 2.0


class FollowMixin(BrowserBase):
    """New entries are counted quietly in the header (`+N new`) instead of a toast each; the
    counter clears when the cursor reaches the leaf. `F` pauses and resumes following."""

    follow: bool = True
    _follow_wait = 0.0
    _follow_stopped: str | None = None  # why following stopped for good (the file replaced, ...)
    _follow_lost = False  # the last look found the database server gone: said once, retried
    _writer_watch: Timer | None = None  # asks whether the writer keeping this read-only has quit

    def _start_following(self) -> None:
        self.set_interval(POLL_SECONDS, self._poll)
        if self.session.locked_out:
            self._writer_watch = self.set_interval(WRITER_LOOK_SECONDS, self._look_for_writer)

    def _locked_out_now(self) -> None:
        super()._locked_out_now()
        if self._writer_watch is None:  # and the banner says when that writer quits
            self._writer_watch = self.set_interval(WRITER_LOOK_SECONDS, self._look_for_writer)

    def _look_for_writer(self) -> None:
        """Say when the writer that made this session read-only has quit (the banner went on
        naming its pid, and only choosing the session again told), and when a writer came back
        after that (the banner went on saying the writer had quit, QA)."""
        gone = not self.session.writer_elsewhere()
        if gone == self.writer_gone:
            return
        self.writer_gone = gone
        self.writer_back = not gone
        self._update_header()
        confirm(self, WRITER_GONE if gone else WRITER_BACK, timeout=10)

    def _say_leaf_taken(self, old_leaf: int, first_new: int) -> None:
        """Another writer's entries, arrived from position `first_new` on, went on from
        somewhere else than the leaf as it was (an agent appends from its own last entry,
        whatever this app moved): said, as the leaf this app had moved is no longer the leaf.
        The header showed the agent's leaf while the status line still said "Leaf moved to …"
        (QA). Walks the new entries only."""
        index = self.session.tree
        leaf = index.leaf
        if leaf < first_new or old_leaf < 0:
            return  # not a new entry's doing (a `leaf` record moves it, and is no entry of its own)
        anchor = leaf
        while anchor >= first_new:
            anchor = index.parent[anchor]
        if anchor == old_leaf or anchor < 0:
            return  # it went on from the leaf: the usual turn
        ids = index.ids
        # Within 80 columns with 8-character ids: the longer wording lost its end there (QA).
        # The leaf it makes is the header's to name: named here, it went stale as that writer's
        # next entries came (QA).
        said = f"Another writer went on from {ids[anchor]}, not from the leaf {ids[old_leaf]} moved here"
        confirm(self, said)

    def action_toggle_follow(self) -> None:
        if self._follow_stopped is not None:  # it said "Live follow on" and stopped again (QA)
            confirm(self, f"Live follow cannot resume: {self._follow_stopped}; open the session again")
            return
        self.follow = not self.follow
        self._update_header()
        confirm(self, "Live follow on" if self.follow else "Live follow paused (F resumes)")

    def _poll(self) -> None:
        """Pick up appended entries. Turns added at the leaf become rows at the end of the tree
        in O(new entries); anything else rebuilds the rows from structures kept up to date
        (see `outline`), milliseconds at a million entries on common shapes. Should that ever be
        slow, the next poll waits twice its cost so keys still get through."""
        session = self.session
        if not self.follow or time.monotonic() < self._follow_wait:
            return
        try:
            tree = self._tree()
        except NoMatches:  # the interval fired while the screen shuts down
            return
        followed_leaf = tree.at_leaf()
        was_read_only = session.read_only
        old_leaf = session.tree.leaf
        problems = len(session.diagnostics)
        try:
            added = session.refresh()
        except SessionError as exc:
            if exc.transient:  # a server restart: it stopped following for good (QA)
                self._follow_wait = time.monotonic() + RETRY_SECONDS
                if not self._follow_lost:
                    self._follow_lost = True
                    self.notify(f"{exc}; following again once it answers", severity="warning", markup=False)
                return
            self.follow = False
            self._follow_stopped = exc.detail
            if session.read_only and not was_read_only:  # the write keys go off; said here, once
                self._damage_told = True
                tree.post_message(tree.Damaged())
            self._update_header()
            self.notify(f"{exc}; live follow stopped", severity="warning", markup=False)
            return
        if self._follow_lost:
            self._follow_lost = False
            confirm(self, "The database answers again: following")
        if session.read_only and not was_read_only:  # a damaged line arrived: said now, keys off
            tree.post_message(tree.Damaged())
        elif len(session.diagnostics) > problems:  # read-only already: the banner says it too
            self._update_header()
        if not added:
            return
        start = time.monotonic()
        tree.appended(keep=session.tree.leaf if followed_leaf else None)
        self._entries_arrived(len(session.tree) - added)
        self._say_leaf_taken(old_leaf, len(session.tree) - added)
        self._new_entries = 0 if followed_leaf else self._new_entries + added
        self._update_header()
        cost = time.monotonic() - start
        self._follow_wait = time.monotonic() + 2 * cost

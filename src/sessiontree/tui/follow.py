"""Live follow: entries another process (the agent) appends show up while the session is open."""

from __future__ import annotations

import time

from textual.css.query import NoMatches

from ..model.errors import SessionError
from .core import BrowserBase

POLL_SECONDS = 0.5


class FollowMixin(BrowserBase):
    follow: bool = True
    _follow_wait = 0.0

    def _start_following(self) -> None:
        if self.follow:
            self.set_interval(POLL_SECONDS, self._poll)

    def _poll(self) -> None:
        """Pick up appended entries. Rebuilding the rows costs O(entries), so on huge sessions
        rebuilds are spaced by ten times their own cost."""
        session = self.session
        if not self.follow or time.monotonic() < self._follow_wait:
            return
        try:
            tree = self._tree()
        except NoMatches:  # the interval fired while the screen shuts down
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

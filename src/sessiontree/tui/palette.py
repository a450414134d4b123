"""The command palette (Ctrl+P), whose Enter picks from the list of what was typed.

Textual's palette searches its commands in a worker as each key changes the text; Enter then
picks the command highlighted in the list shown. Typed in one burst, Enter came before the
search for the words had run, and picked the first command of the list for no words at all:
`Ctrl+P user-only Enter` archived the branch below the cursor, a write (QA). Here Enter waits
for that search first (briefly: it is a match over this app's few dozen commands). The keys
typed after Enter were typed into the palette as it closed: the app keeps them for it
(`SessionTreeApp.on_event`, `KeysAfterClosing`) and they act once it has closed."""

from __future__ import annotations

import asyncio
import contextlib

from textual import events, on
from textual.command import CommandPalette
from textual.widgets import Input
from textual.worker import WorkerCancelled, WorkerFailed

from .inputs import KeysAfterClosing

SEARCH_WAIT = 1.0  # seconds Enter waits at most for the search of the text typed


class TypedPalette(KeysAfterClosing, CommandPalette):
    def keep(self, key: events.Key) -> bool:
        """`key`, arrived at the app: kept if an Enter came before it (see `_hold`)."""
        return self._keep(key)

    def hold(self) -> None:
        """An Enter arrived at the app: keep the keys after it until the palette closes."""
        self._hold()

    def _open(self) -> bool:
        return self in self.app.screen_stack

    @on(Input.Submitted)
    async def _submitted_in_turn(self, event: Input.Submitted) -> None:
        event.prevent_default()  # not Textual's own handler too (it would pick from the old list)
        event.stop()
        running = [w for w in self.workers if w.group == self._GATHER_COMMANDS_GROUP and not w.is_finished]
        if running:
            # past the wait, or a search that failed: picked from the list there is
            with contextlib.suppress(TimeoutError, WorkerCancelled, WorkerFailed):
                await asyncio.wait_for(running[-1].wait(), SEARCH_WAIT)
        if self.is_attached:
            self._select_or_command()

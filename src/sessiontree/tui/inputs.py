"""An `Input` whose own keys act in turn with the characters typed around them.

Textual runs a key's binding once the key has bubbled up to the app, after the keys typed next
have reached the input: in a burst (keys queued while the app was busy, a fast typist), `m`,
End, space, `x`, Enter replaced the selected label with " x" before End moved the cursor, and
`/`, a word, Enter, `n` searched for the word and the `n` (QA). Here the input's own bindings
(End, Home, Backspace, Enter, …) run as their key arrives; Input's handler, run after this one,
types the rest.

Enter closes the box it is typed in (a label's prompt, the search box), but the keys typed
after it in the same burst have reached the box already: they were typed into it as it closed,
and lost (`m abc Enter k k k` labelled the row and did not move; `Enter q` did not quit; QA).
They are kept, and handed back to the app in order once the box has lost the focus, or at
once when it stays open (a value refused): a message posted after Enter's reaches the app
after the screen's handler of the submitted value has run. The summary's editor does the same
for Ctrl+S, which moves with its text: the keys after it were saved in the summary (QA)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import cast

from textual import events
from textual.actions import parse
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, TextArea

HAND_BACK_WITHIN = 0.5  # seconds for a box to close on Enter; past them, what followed is typed in it
HAND_BACK_POLL = 0.01


class KeysAfterClosing:
    """For a box whose key may close it: the keys that arrive after that key are kept
    (`_keep`) and handed back to the app once the box has closed (`_hand_back`)."""

    _after_close: list[events.Key] | None = None  # keys that came after the closing key
    _close_done = False  # what that key did has been handled (`CloseDone` reached the app)

    class CloseDone(Message):
        """Posted after the closing key's own messages, which it follows up to the app: once
        there, their handlers have run. The app calls `close_done`."""

        def __init__(self, box: KeysAfterClosing) -> None:
            super().__init__()
            self.box = box

    def close_done(self) -> None:
        self._close_done = True

    def _keep(self, event: events.Key) -> bool:
        """Keep `event` if a closing key came before it; whether it was kept."""
        if self._after_close is None:
            return False
        event.prevent_default()
        event.stop()
        self._after_close.append(events.Key(event.key, event.character))
        return True

    def _hold(self) -> None:
        """Keep the keys that arrive from now on, until the box has closed (`_hand_back`)."""
        self._after_close, self._close_done = [], False
        # the app's worker: one of this box would be cancelled as a closing dialog goes
        cast(Widget, self).app.run_worker(self._hand_back(), group="keys-after-closing")

    async def _run_closing(self, run: Awaitable[object]) -> None:
        """Run the closing key's action, keeping the keys that arrive meanwhile and after."""
        self._hold()
        await run
        cast(Widget, self).post_message(self.CloseDone(self))

    def _open(self) -> bool:
        """Whether the box is still there to type in."""
        widget = cast(Widget, self)
        return widget.app.focused is widget

    async def _hand_back(self) -> None:
        """The kept keys, to the app once the box has closed (the focus has left it), or back
        into it when it stays open (a value refused: `CloseDone` reached the app with the box
        focused still), or after `HAND_BACK_WITHIN` at the latest."""
        app = cast(Widget, self).app
        deadline = time.monotonic() + HAND_BACK_WITHIN
        while self._open() and not self._close_done and time.monotonic() < deadline:
            await asyncio.sleep(HAND_BACK_POLL)
        keys, self._after_close = self._after_close or [], None
        for key in keys:
            app.post_message(key)


class InTurnInput(KeysAfterClosing, Input):
    async def _on_key(self, event: events.Key) -> None:
        if self._keep(event) or event.is_printable:
            return
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            _, name, parameters = parse(binding.action)
            if not self.check_action(name, parameters):  # another of the key's bindings, maybe
                continue
            event.prevent_default()
            event.stop()  # not run again when it reaches the app
            if event.key == "enter":  # it submits (`action_submit`, `SearchBox.action_run`)
                await self._run_closing(self.run_action(binding.action))
            else:
                await self.run_action(binding.action)
            return


class InTurnTextArea(KeysAfterClosing, TextArea):
    """A text box whose screen binds `closing_key` (the summary dialog's Ctrl+S): that key
    runs the screen's action here, after the keys typed before it and before those after."""

    closing_key = "ctrl+s"

    async def _on_key(self, event: events.Key) -> None:
        if self._keep(event):
            return
        if event.key == self.closing_key:
            screen = self.screen
            for binding in screen._bindings.key_to_bindings.get(event.key, ()):
                event.prevent_default()
                event.stop()
                await self._run_closing(screen.run_action(binding.action))
                return
        await super()._on_key(event)

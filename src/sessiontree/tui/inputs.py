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
after the screen's handler of the submitted value has run."""

from __future__ import annotations

import asyncio
import time

from textual import events
from textual.actions import parse
from textual.message import Message
from textual.widgets import Input

HAND_BACK_WITHIN = 0.5  # seconds for a box to close on Enter; past them, what followed is typed in it
HAND_BACK_POLL = 0.01


class InTurnInput(Input):
    _after_enter: list[events.Key] | None = None  # keys that came after an Enter, while it closes
    _enter_done = False  # what Enter submitted has been handled (`EnterDone` reached the app)

    class EnterDone(Message):
        """Posted after Enter's `Submitted`, which it follows up to the app: once there, the
        handlers of the value have run. The app calls `enter_done`."""

        def __init__(self, box: InTurnInput) -> None:
            super().__init__()
            self.box = box

    def enter_done(self) -> None:
        self._enter_done = True

    async def _on_key(self, event: events.Key) -> None:
        if self._after_enter is not None:
            event.prevent_default()
            event.stop()
            self._after_enter.append(events.Key(event.key, event.character))
            return
        if event.is_printable:
            return
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            _, name, parameters = parse(binding.action)
            if not self.check_action(name, parameters):  # another of the key's bindings, maybe
                continue
            event.prevent_default()
            event.stop()  # not run again when it reaches the app
            enter = event.key == "enter"  # it submits (`action_submit`, `SearchBox.action_run`)
            if enter:
                self._after_enter, self._enter_done = [], False
                # the app's worker: one of this box would be cancelled as a closing dialog goes
                self.app.run_worker(self._hand_back(), group="keys-after-enter")
            await self.run_action(binding.action)
            if enter:
                self.post_message(self.EnterDone(self))
            return

    async def _hand_back(self) -> None:
        """The keys that followed the Enter, to the app once the box has closed (the focus has
        left it), or back into it when it stays open (a value refused: `EnterDone` reached the
        app with the box focused still), or after `HAND_BACK_WITHIN` at the latest."""
        deadline = time.monotonic() + HAND_BACK_WITHIN
        app = self.app
        while app.focused is self and not self._enter_done and time.monotonic() < deadline:
            await asyncio.sleep(HAND_BACK_POLL)
        keys, self._after_enter = self._after_enter or [], None
        for key in keys:
            app.post_message(key)

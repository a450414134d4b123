"""An `Input` whose own keys act in turn with the characters typed around them.

Textual runs a key's binding once the key has bubbled up to the app, after the keys typed next
have reached the input: in a burst (keys queued while the app was busy, a fast typist), `m`,
End, space, `x`, Enter replaced the selected label with " x" before End moved the cursor, and
`/`, a word, Enter, `n` searched for the word and the `n` (QA). Here the input's own bindings
(End, Home, Backspace, Enter, …) run as their key arrives; Input's handler, run after this one,
types the rest."""

from __future__ import annotations

from textual import events
from textual.actions import parse
from textual.widgets import Input


class InTurnInput(Input):
    async def _on_key(self, event: events.Key) -> None:
        if event.is_printable:
            return
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            _, name, parameters = parse(binding.action)
            if not self.check_action(name, parameters):  # another of the key's bindings, maybe
                continue
            event.prevent_default()
            event.stop()  # not run again when it reaches the app
            await self.run_action(binding.action)
            return

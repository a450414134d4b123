"""The box `/` and `&` open under the tree: an `Input` whose footer says what Enter and Esc do
there. A plain `Input` takes every printable key, so the footer showed none of the screen's keys
but the one bound with priority (`/ Find`), which typed a slash there."""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.binding import Binding, BindingType
from textual.message import Message

from .inputs import InTurnInput

Mode = Literal["find", "filter"]


class SearchBox(InTurnInput):
    """Enter runs the search as the box's `mode` says; Esc posts `Closed` (the screen decides
    what else Esc undoes: a running search, a filter, the highlights)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "run('find')", "Find"),
        Binding("enter", "run('filter')", "Filter"),
        Binding("escape", "close", "Close"),
    ]

    class Closed(Message):
        """Esc in the box."""

    mode: Mode = "find"

    def open(self, mode: Mode, placeholder: str) -> None:
        self.mode = mode
        self.placeholder = placeholder
        self.display = True
        self.refresh_bindings()  # the Enter shown is the mode's

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run":
            return parameters[0] == self.mode
        return True

    async def action_run(self, mode: Mode) -> None:
        await self.action_submit()

    def action_close(self) -> None:
        self.post_message(self.Closed())

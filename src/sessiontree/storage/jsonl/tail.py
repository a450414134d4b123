"""What the end of a session file holds after its last newline, and what that means.

A complete line ends with a newline. What follows the last newline is one of:

- nothing (`NONE`);
- whitespace only (`BLANK`): harmless; our next line starts after a newline of its own;
- a valid entry without its newline (`ENTRY`): indexed; a proper writer ends it before adding its
  own line (so do we), and a line glued onto it without one is reported;
- found at open, an incomplete line (`TORN`): a write cut short by a crash — left out, and
  before our next append copied to a `.torn` sidecar and blanked in place (see `repair`);
- found while following another writer, an incomplete line (`PENDING`): its writer may be in the
  middle of writing it, so it is left for the next look and our own appends wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class TailKind(Enum):
    NONE = "none"
    BLANK = "blank"
    ENTRY = "entry"
    TORN = "torn"
    PENDING = "pending"


@dataclass(slots=True)
class Tail:
    """The unterminated bytes at the end of the file: where they start, how many, what they are."""

    kind: TailKind = TailKind.NONE
    offset: int = 0  # the end of the last complete line
    length: int = 0
    line: int = 0  # the line number they would have

    @property
    def end(self) -> int:
        return self.offset + self.length

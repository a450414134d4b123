"""How big the context would be with the leaf at any entry — for every row of the tree, cheaply.

Pi's rule for the size of a context (`estimateContextTokens` in pi-coding-agent's
`core/compaction/compaction.ts`, mirrored by `context.estimate_context_tokens`) is: the usage the
last assistant message reported, plus an estimate (chars / 4) for each message after it. That
rule composes along the parent chain, so the size at an entry follows from the size at its
parent:

- an assistant message that reported usage: its usage total (what the model was actually sent
  and produced), whatever came before;
- a compaction: the size of the context it starts (its summary and kept messages), built once
  and estimated: a usage its kept messages reported measured the context it replaced;
- any other entry: the size at its parent plus the estimate of the message it adds (0 for
  entries that add none: settings, labels, leaf moves).

Sizes are memoised per entry, so the walk for an entry stops at the nearest known size, the
nearest assistant with usage (a few entries up in real sessions) or the nearest compaction. A
screen of rows costs a few dozen decodes, whatever the size of the session; the numbers are the
ones the preview shows for the same entry.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from .context import estimate_context_tokens, estimate_tokens, project, usage_total
from .model.entries import CompactionEntry, Entry, MessageEntry
from .model.errors import SessionError
from .session import Session

UNKNOWN = -1


class ContextSizes:
    """Memoised context sizes (estimated tokens) of one session's entries."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._total = array("q")

    def _grow(self) -> None:
        n = len(self.session.tree)
        if len(self._total) < n:
            self._total.extend(array("q", [UNKNOWN]) * (n - len(self._total)))

    def known(self, i: int) -> int | None:
        """The size at entry `i` if already computed (never decodes: safe while drawing)."""
        return self._total[i] if i < len(self._total) and self._total[i] != UNKNOWN else None

    def added(self, i: int) -> int | None:
        """How much entry `i` changes the size of its parent's context (None if not known)."""
        here = self.known(i)
        parent = self.session.tree.parent[i]
        before = 0 if parent < 0 else self.known(parent)
        return None if here is None or before is None else here - before

    def compute(self, i: int, cancelled: Callable[[], bool] = lambda: False) -> int | None:
        """The size at entry `i`, computing (and remembering) what is missing on the way up.
        None if `cancelled` said stop first."""
        self._grow()
        total, parent = self._total, self.session.tree.parent
        pending: list[tuple[int, int]] = []  # (entry, tokens it adds), leaf-most first
        base = 0
        j = i
        while j >= 0:
            if total[j] != UNKNOWN:
                base = total[j]
                break
            if cancelled():
                return None
            anchor, adds = self._own(j)
            if anchor is not None:
                total[j] = base = anchor
                break
            pending.append((j, adds))
            j = parent[j]
        for j, adds in reversed(pending):
            base += adds
            total[j] = base
        return int(total[i])

    def _own(self, j: int) -> tuple[int | None, int]:
        """(the size at `j` if it does not depend on the parent, else None; tokens `j` adds)."""
        try:
            entry: Entry = self.session.entry_at(j)
        except SessionError:
            return None, 0  # an unreadable entry adds nothing we can count
        if isinstance(entry, CompactionEntry):
            context = self.session.build_context(at=entry.id)
            return estimate_context_tokens(context.messages), 0
        if isinstance(entry, MessageEntry):
            msg = entry.message
            if msg.get("role") == "assistant" and msg.get("stopReason") not in ("aborted", "error"):
                reported = usage_total(msg.get("usage"))
                if reported > 0:
                    return reported, 0
        return None, sum(estimate_tokens(m) for m in project([entry]))


def short_tokens(n: int) -> str:
    """`850`, `12.3k`, `1.2M`: a count that fits a narrow column."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"

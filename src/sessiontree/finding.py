"""Finding entries by text at a million entries: a byte scan picks candidate lines, and only
those are decoded and matched.

What a query is matched against is an entry's *haystack*: the text the tree shows for it
(`display.entry_summary`; for a tool result also the call its row is drawn as), for an
assistant turn also what its row cuts short and the preview shows whole (its tool calls'
arguments, its thinking), its label and its id. Decoding every entry to build that text costs
tens of seconds per million entries; scanning the file's bytes for a word about one.
The scan must never lose a match, so it looks only for pieces of the query that any matching
entry's line is sure to contain byte for byte once ASCII letters are lowercased:

- runs of ASCII letters from literal words and phrases (never from `re:` terms). Digits end a
  run (numbers may be re-serialised for display);
- never a piece of a word the display adds itself (`_ADDED_WORDS`: "thinking", "summary", …),
  which may be in the haystack and nowhere in the line;
- the longest piece is scanned for (at least three letters, or the scan would pick nearly every
  line); the other pieces are checked in each candidate's raw line before it is decoded.

Lines where JSON spells an ASCII character as an escape (`\\u0066`, `\\u000a`: the display may
write it another way) are decoded whatever they say, and so are lines holding a letter that
Python's case-insensitive matching takes for an ASCII one (`İ` and `ı` match i, `ſ` matches s,
the Kelvin sign `K` matches k: other bytes than the letter's), custom entries, labels and
entries of unknown types (their display text re-serialises values) and every labelled entry
(the label lives on another line), and every tool result whose calling turn's line the scan
marked (its row shows the call). Without a usable piece, or on a storage without a file to
scan (SQLite, PostgreSQL, memory), every entry is decoded.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .display import call_label, entry_summary
from .model.entries import Entry, MessageEntry
from .model.errors import SessionError
from .model.messages import format_tool_call, thinking_text, tool_calls
from .query import Query
from .session import TOOL_CALL_SEARCH, WALKED_PAST, Session
from .storage.base import CONTAINS, ESCAPED
from .storage.index import ASSISTANT, CUSTOM, LABEL, TOOL_RESULT, UNKNOWN

__all__ = ["Found", "Remembered", "find", "haystack", "scan_needle"]

# Words `display.entry_summary` adds to what the line says; a needle inside one of them could
# match there and nowhere in the line.
_ADDED_WORDS = (
    "thinking",
    "error",
    "exit",
    "tool",
    "tools",
    "image",
    "compaction",
    "tokens",
    "before",
    "branch",
    "summary",
    "empty",
    "session",
    "name",
    "cleared",
    "moved",
    "the",
    "start",
    "model",
)
# Entries whose display text re-serialises values (JSON, repr) rather than quoting them: they
# are decoded whatever their bytes say.
_ALWAYS_DECODED = bytes(1 if code in (CUSTOM, LABEL, UNKNOWN) else 0 for code in range(256))
_RUN = re.compile(r"[a-z]+")  # ASCII letters (compared lowercased)
MIN_NEEDLE = 3
DECODE_BATCH = 512  # candidates decoded at once (`Session.iter_entries`)
KEEP_RECENT = 256  # entries decoded kept for the tool results below them (`find`)

# (entries done, entries to do, the matches so far): the list the search appends to, to be
# copied by a caller that keeps it
Progress = Callable[[int, int, list[int]], None]


class Found:
    """Matches in the order they were asked for, and how many entries could not be read."""

    __slots__ = ("candidates", "positions", "scanned", "unreadable")

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.unreadable: list[int] = []  # entries that could not be decoded: no match, no crash
        self.candidates = 0  # entries decoded and matched
        self.scanned = False  # a byte scan chose them

    @property
    def skipped(self) -> int:
        return len(self.unreadable)


def haystack(
    session: Session,
    position: int,
    entry: Entry | None = None,
    entry_at: Callable[[int], Entry] | None = None,
) -> str:
    """The text a query is matched against: what the tree shows, the label, the id. A tool
    result's row shows the call that produced it, so the call is part of its text too, whole:
    the default filter hides the turn of an edit, whose row is then its result's. `entry`: the
    entry at `position`, when decoded already; `entry_at`: how to get its call's turn."""
    if entry is None:
        entry = session.entry_at(position)
    text = entry_summary(entry)
    if isinstance(entry, MessageEntry) and entry.role == "assistant":
        # The row cuts a call's arguments at 80 characters and shows thinking only on a turn
        # without text: an edit's new text, shown in the preview, was never found (QA).
        message = entry.message
        calls = [_whole(call) for call in tool_calls(message)]
        text = "\n".join((text, *calls, thinking_text(message)))
    if session.tree.role[position] == TOOL_RESULT:
        call = session.tool_call_of(position, entry_at=entry_at)
        if call is not None:
            text = f"{call_label(call)}\n{_whole(call)}\n{text}"
    return f"{text}\n{session.get_label(entry.id) or ''}\n{entry.id}"


def _whole(call: dict[str, Any]) -> str:
    """A tool call with every argument in full: `name(key=value, …)`."""
    return format_tool_call(call, max_args=sys.maxsize)


def _results_of_turns(session: Session, lines: bytearray) -> set[int]:
    """The tool results whose calling turn's line the scan marked: a result's row shows its
    call, whose words are on that assistant entry's line. The results of one turn hang below it
    in a chain (`Session.tool_call_of` walks up the same way), so they are found going down
    from the few marked turns rather than up from every result."""
    tree = session.tree
    role, kind, first_child, next_sibling = tree.role, tree.kind, tree.first_child, tree.next_sibling
    out: set[int] = set()
    for hit in re.finditer(rb"[^\x00]", lines):  # marked lines, at C speed
        turn = hit.start()
        if role[turn] != ASSISTANT:
            continue
        below = [(turn, 0)]
        while below:
            i, depth = below.pop()
            child = first_child[i]
            while child >= 0:
                if depth < TOOL_CALL_SEARCH and (role[child] == TOOL_RESULT or kind[child] in WALKED_PAST):
                    if role[child] == TOOL_RESULT:
                        out.add(child)
                    below.append((child, depth + 1))
                child = next_sibling[child]
    return out


def required_pieces(query: Query) -> list[bytes]:
    """Every piece of the query that a matching message's line contains once lowercased (see
    the module docstring), longest first."""
    pieces = {
        run
        for term in query.terms
        if term.kind != "regex"
        for run in _RUN.findall(term.text.lower())
        if not any(run in word for word in _ADDED_WORDS)
    }
    return sorted((p.encode() for p in pieces), key=lambda p: (-len(p), p))  # ties: the same each run


def scan_needle(query: Query) -> bytes | None:
    """The piece of the query a byte scan looks for, or None if none is worth scanning for."""
    pieces = required_pieces(query)
    return pieces[0] if pieces and len(pieces[0]) >= MIN_NEEDLE else None


def find(
    session: Session,
    query: Query,
    positions: Iterable[int],
    *,
    cancelled: Callable[[], bool] = lambda: False,
    progress: Progress | None = None,
    every: int = 2000,
    scanning: Callable[[int, int], None] | None = None,
    matched: Iterable[int] = (),
    scan: bool = True,
) -> Found | None:
    """The entries among `positions` (kept in that order) whose haystack matches `query`,
    after the entries `matched` already known to match (`Remembered`). Without `scan`, each is
    decoded, not picked by a byte scan of the whole file first (about a second per gigabyte):
    for a few entries, such as those live follow brought in. `scanning` is called
    with (bytes scanned, bytes to scan) as the byte scan goes (about a second per gigabyte),
    `progress` every `every` entries decoded after it; returns None if
    `cancelled()`."""
    found = Found()
    found.positions.extend(matched)
    wanted = list(positions)
    needle = scan_needle(query)
    lines = None
    if needle is not None and wanted and scan:  # nothing asked (all known to `Remembered`): no scan
        lines = session.storage.lines_containing(needle, cancelled=cancelled, progress=scanning)
        if lines is None and cancelled():
            return None
    tree = session.tree
    if lines is not None:
        found.scanned = True
        kind = tree.kind
        labelled = {tree.pos[eid] for eid in session.labels() if eid in tree.pos}
        pieces = required_pieces(query)[1:]
        raw_line = session.storage.raw_line
        kept = []
        called = _results_of_turns(session, lines)
        for i in wanted:
            if _ALWAYS_DECODED[kind[i]] or i in labelled or lines[i] & ESCAPED or i in called:
                kept.append(i)  # decoded whatever the bytes say
            elif lines[i] & CONTAINS and all(p in raw_line(i).lower() for p in pieces):
                kept.append(i)  # the other pieces are in the line too: a check far cheaper than decoding
        wanted = kept
    total = len(wanted)
    # Decoded a batch at a time (one read per stretch of consecutive lines, not through the
    # entry cache, which a million entries would only churn), and kept a while: the results of
    # a turn, right below it, show its calls.
    recent: dict[int, Entry] = {}

    def entry_at(i: int) -> Entry:
        entry = recent.get(i)
        return entry if entry is not None else session.entry_at(i)

    for n, (i, entry) in enumerate(_decoded(session, wanted), 1):
        if cancelled():
            return None
        if entry is None:
            found.unreadable.append(i)  # an entry that cannot be decoded is not a match
            continue
        if len(recent) >= KEEP_RECENT:
            recent.clear()
        recent[i] = entry
        try:
            if query.matches(haystack(session, i, entry, entry_at)):
                found.positions.append(i)
        except SessionError:
            found.unreadable.append(i)  # its call's turn could not be read
        if progress is not None and n % every == 0:
            progress(n, total, found.positions)
    found.candidates = total
    return found


def _decoded(session: Session, positions: list[int]) -> Iterator[tuple[int, Entry | None]]:
    """(position, entry) for each of `positions`, None for an entry that cannot be read: a
    batch at a time, and, should the storage fail (the session closed as the app leaves it),
    the rest one by one, as unreadable as they are."""
    done = 0
    try:
        for pair in session.iter_entries(positions, batch=DECODE_BATCH):
            yield pair
            done += 1
    except SessionError:
        for i in positions[done:]:
            try:
                entry: Entry | None = session.entry_at(i)
            except SessionError:
                entry = None
            yield i, entry


class Remembered:
    """The last query's verdict on each entry it looked at, so that searching with it again
    (`&` after `/`, the same `/` again) decodes only the entries it has not looked at yet: at a
    million entries `&` repeated a finished 2-4 s search whole. Entries never change once
    written, so the verdicts hold as entries are appended, but a label is part of its entry's
    haystack: other labels, another query or another session's tree forget them."""

    NO, YES, UNREADABLE = 1, 2, 3  # 0: not looked at

    def __init__(self) -> None:
        self._key: tuple[object, str, dict[str, str]] | None = None
        self._verdicts = bytearray()

    def find(
        self,
        session: Session,
        query: Query,
        positions: Iterable[int],
        **options: Any,
    ) -> Found | None:
        """`find(session, query, positions, **options)`, deciding the entries looked at before
        from what they were found to be then."""
        key = (session.tree, query.source, dict(session.labels()))
        kept = self._key is not None and self._key[0] is key[0] and self._key[1:] == key[1:]
        verdicts = bytearray(self._verdicts) if kept else bytearray()
        verdicts.extend(bytes(max(len(session.tree) - len(verdicts), 0)))
        wanted = list(positions)
        todo = [i for i in wanted if not verdicts[i]]
        known = [i for i in wanted if verdicts[i] == self.YES] if len(todo) < len(wanted) else []
        found = find(session, query, todo, matched=known, **options)  # `progress` sees them all
        if found is None:
            return None
        for i in found.positions:
            verdicts[i] = self.YES
        for i in found.unreadable:
            verdicts[i] = self.UNREADABLE
        out = Found()
        out.scanned, out.candidates = found.scanned, found.candidates
        for i in wanted:
            verdict = verdicts[i]
            if not verdict:
                verdicts[i] = self.NO
            elif verdict == self.YES:
                out.positions.append(i)
            elif verdict == self.UNREADABLE:
                out.unreadable.append(i)
        self._key, self._verdicts = key, verdicts
        return out

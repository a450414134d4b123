"""`Session`: the meaning of a session on top of any storage.

The append rule (parent = current leaf), moving the leaf (`leaf` entry + optional
`branch_summary`), the compaction-bounded active branch and context building all live here, once,
for every backend. Keep the three sets apart: `get_entries()` is the append log (all branches),
`get_branch()` the active path, `build_context().messages` what the model sees.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import threading
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import (
    ContextStream,
    Projector,
    SessionContext,
    Transform,
    derive_state,
    project,
    select_context_entries,
    select_indices,
    usage_number,
)
from .model.entries import (
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    entry_from_dict,
)
from .model.errors import Diagnostic, SessionError
from .model.header import SessionHeader
from .model.ids import iso_now, now_ms
from .model.messages import content_text
from .storage.base import SessionStorage
from .storage.index import (
    ACTIVE_TOOLS_CHANGE,
    ASSISTANT,
    COMPACTION,
    CUSTOM,
    LABEL,
    MODEL_CHANGE,
    SESSION_INFO,
    THINKING_LEVEL_CHANGE,
    TOOL_RESULT,
    TreeIndex,
)


@dataclass(frozen=True, slots=True)
class BranchSummary:
    """What `move_to` records about the branch being left."""

    summary: str
    details: Any = None
    usage: dict[str, Any] | None = None
    from_hook: bool = False

    @classmethod
    def coerce(cls, value: str | BranchSummary | Mapping[str, Any]) -> BranchSummary:
        if isinstance(value, BranchSummary):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping) and isinstance(value.get("summary"), str):
            return cls(
                value["summary"],
                value.get("details"),
                value.get("usage"),
                bool(value.get("from_hook", value.get("fromHook", False))),
            )
        raise SessionError("invalid_argument", "summary must be text or have a 'summary' string")


@dataclass(frozen=True, slots=True)
class Navigation:
    """Result of `Session.navigate` (Pi's tree navigation)."""

    new_leaf_id: str | None
    old_leaf_id: str | None
    editor_text: str | None = None  # text of a user/custom message the user may re-send
    summary_id: str | None = None
    moved: bool = True


@dataclass(frozen=True, slots=True)
class LeafMove:
    """One recorded move of the leaf (a `leaf` entry): where the leaf was, where it went."""

    entry_id: str  # the `leaf` entry itself
    from_id: str | None  # its parent: the leaf before the move (None: the start)
    to_id: str | None  # its target (None: before the first entry)


@dataclass(slots=True)
class SessionStats:
    entry_count: int
    message_count: int
    cached_tokens: int = 0
    uncached_tokens: int = 0
    total_tokens: int = 0
    cost_total: float = 0.0
    types: dict[str, int] = field(default_factory=dict)
    roles: dict[str, int] = field(default_factory=dict)
    fork_count: int = 0
    leaf_count: int = 0


def _usable_usage(usage: Any) -> bool:
    if not isinstance(usage, dict):
        return False
    nums = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
    cost = usage.get("cost")
    nums.append(cost.get("total") if isinstance(cost, dict) else None)
    return all(usage_number(n) for n in nums)


def _check(value: object, kind: type | tuple[type, ...], what: str) -> None:
    """Refuse a value of the wrong type with a `SessionError` that says so, rather than a
    TypeError or AttributeError from deep inside (`bool` is no position or limit)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise SessionError("invalid_argument", f"{what} must be {_kind_name(kind)}, not {value!r}")


def _check_named(value: object, what: str) -> None:
    """A name the entry is known by (a provider, a custom type): text, and not empty."""
    _check(value, str, what)
    if not value:
        raise SessionError("invalid_argument", f"{what} cannot be empty")


def _check_text(value: str, what: str) -> None:
    """Refuse text a person typed that is not Unicode text: half of a character (a lone
    surrogate), which is what a command line's argument holds for a byte that is not UTF-8
    (Python decodes argv with `surrogateescape`). JSON could write it escaped, but SQLite and
    PostgreSQL refuse it and every reader shows a replacement character."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(value[exc.start])
        said = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        raise SessionError(
            "invalid_argument", f"{what} is not valid text: half a character ({said}) at {exc.start}"
        ) from None


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {
        str: "text",
        int: "a whole number",
        float: "a number",
        bool: "True or False",
        list: "a list",
        type(None): "None",
    }
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if set(kinds) == {int, float}:
        return "a number"
    return " or ".join(names.get(k, k.__name__) for k in kinds)


FRESH_ID_TRIES = 100  # an id factory that repeats itself (a fixed id) is refused, not looped on
# Context entries decoded at once by `stream_context`: enough for `load_many`'s long reads, few
# enough that what is held is a few megabytes however long the context.
STREAM_ENTRIES = 4096
TOOL_CALL_SEARCH = 64  # results of one turn a call is looked for above (parallel calls)
# Entries another writer may append between a tool call and its results, which carry no message
# (a label or an archive record written from this app while the agent runs a tool, a rename):
# the walk from a result to its call goes past them, as Pi's `/tree` finds a call by its id
# wherever it is (packages/coding-agent/src/modes/interactive/components/tree-selector.ts).
WALKED_PAST = frozenset(
    {LABEL, CUSTOM, SESSION_INFO, MODEL_CHANGE, THINKING_LEVEL_CHANGE, ACTIVE_TOOLS_CHANGE}
)


class Session:
    """A session over a storage. Construct with any `SessionStorage`, or use `open_session`.

    A session may be shared by threads: its writes (appends, moves) and `refresh` take one lock,
    so each new entry's parent is the leaf the previous write left. Without it, two threads
    appending read the same leaf (silent forks in memory and SQLite, a context that disagreed
    with the log in PostgreSQL, a JSONL file taken for rewritten by another program)."""

    def __init__(
        self,
        storage: SessionStorage,
        *,
        transforms: Sequence[Transform] = (),
        projectors: Mapping[str, Projector] | None = None,
        clock: Callable[[], str] = iso_now,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        """`transforms`/`projectors` apply to every context build (Pi's instance options).
        `clock` (ISO timestamps) and `id_factory` exist for reproducible files: demos,
        benchmarks, tests."""
        if not isinstance(storage, SessionStorage):  # `Session("s.jsonl")` failed deep inside
            raise SessionError(
                "invalid_argument",
                f"Session takes a storage, not {storage!r}: open_session(path) opens a file or a database",
            )
        self.storage = storage
        self._transforms = list(transforms)
        self._projectors = dict(projectors or {})
        self._clock = clock
        self._new_id = id_factory or storage.new_entry_id
        self._writing = threading.RLock()  # see the class's docstring

    # --- identity and health ------------------------------------------------------------------

    @property
    def header(self) -> SessionHeader:
        return self.storage.header

    @property
    def session_id(self) -> str:
        return self.storage.header.id

    @property
    def read_only(self) -> bool:
        return self.storage.read_only

    @property
    def read_only_reason(self) -> str | None:
        return self.storage.read_only_reason

    @property
    def locked_out(self) -> bool:
        """Opened read-only because another process was writing the session
        (`open_or_read_only`)."""
        return self.storage.locked_out

    def writer_elsewhere(self) -> bool:
        """Whether another process holds the session's writer lock now (True when it cannot be
        told): once False, a session `locked_out` opens for writing."""
        return self.storage.writer_elsewhere()

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.storage.diagnostics

    @property
    def location(self) -> str:
        """Where the session lives, for messages: a file path, or `db#id`."""
        return self.storage.location or "<memory>"

    @property
    def files(self) -> tuple[str, ...]:
        """The files holding the session (none for memory and PostgreSQL)."""
        return self.storage.files

    @property
    def format_version(self) -> int:
        """The format version as stored (Pi's older JSONL files are v1/v2 until upgraded)."""
        return self.storage.format_version

    def check(self, *, decode: bool = False) -> list[Diagnostic]:
        """Every problem known: the diagnostics found while reading, plus any difference between
        what the storage keeps materialised and a fresh fold of its log (SQLite). With `decode`,
        every entry is first decoded in full, so damage that indexing cannot see (a number out
        of range, a line changed on disk since) is found and listed too."""
        self.storage.require_open()
        if decode:
            for i in range(self.entry_count()):
                # a line that fails is recorded by the storage as a diagnostic, listed below
                with contextlib.suppress(SessionError):
                    self.storage.load_entry(i)
        problems = list(self.storage.diagnostics)
        for difference in self.storage.verify_state():
            problems.append(
                Diagnostic(
                    "error",
                    "state_mismatch",
                    f"the materialised state differs from the log: {difference}",
                )
            )
        return problems

    def line_number(self, entry_id: str) -> int | None:
        """The physical line of an entry in its file (header = line 1); None without lines."""
        return self.storage.line_number(entry_id)

    @property
    def tree(self) -> TreeIndex:
        """The structure of the whole append log (read-only use: the browser draws from it)."""
        return self.storage.index

    def refresh(self) -> int:
        """Pick up entries another process appended; returns how many arrived."""
        with self._writing:
            return self.storage.refresh()

    def finish_verification(self, *, elsewhere: bool = False) -> None:
        """Run checks the storage deferred at open (see `open_session(verify="later")`);
        afterwards `diagnostics` and `read_only` are final. `elsewhere`: in a helper process
        where the storage can, so a browser's keys keep the interpreter lock."""
        self.storage.finish_verification(elsewhere=elsewhere)

    @property
    def unchecked(self) -> int:
        """Entries the checks deferred at open have still to look at; the first write waits for
        them (`finish_verification`)."""
        return self.storage.unchecked

    def close(self) -> None:
        self.storage.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reading ------------------------------------------------------------------------------

    @property
    def leaf_id(self) -> str | None:
        return self.storage.leaf_id

    @property
    def session_name(self) -> str | None:
        return self.storage.session_name

    def get_entry(self, entry_id: str) -> Entry | None:
        _check(entry_id, str, "an entry id")
        return self.storage.get_entry(entry_id)

    def require_entry(self, entry_id: str) -> Entry:
        _check(entry_id, str, "an entry id")
        entry = self.storage.get_entry(entry_id)
        if entry is None:
            raise SessionError("not_found", f"Entry {entry_id} not found")
        return entry

    def entry_at(self, position: int) -> Entry:
        """The entry at a position of `tree` (file order); decoded on demand."""
        self._check_position(position)
        return self.storage.load_entry(position)

    def iter_entries(self, positions: Sequence[int], batch: int = 256) -> Iterator[tuple[int, Entry | None]]:
        """(position, entry) for each of `positions` in order, read `batch` at a time (one read
        per stretch of consecutive lines): what walks a long path holds is one batch, not the
        path. An entry that cannot be decoded comes as None (the storage records it among its
        diagnostics, as `entry_at` does), and the others of its batch are read one by one; a
        storage that cannot be read (closed, a failing disk) raises its `storage` error."""
        count = len(self.tree)
        wrong = next((p for p in positions if type(p) is not int or not 0 <= p < count), None)
        if wrong is not None:
            self._check_position(wrong)  # says what is wrong with it
        for start in range(0, len(positions), batch):
            part = positions[start : start + batch]
            try:
                got: list[Entry | None] = list(self.storage.load_many(part))
            except SessionError:
                got = [self._entry_or_none(position) for position in part]
            yield from zip(part, got, strict=True)
            del got  # before the next batch is read, not after

    def _entry_or_none(self, position: int) -> Entry | None:
        """The entry, or None when its line cannot be decoded. A storage that cannot be read at
        all (closed meanwhile, a failing disk) raises: taken for damage, every entry after it
        would be passed over, and a fork cut short written as whole."""
        try:
            return self.storage.load_entry(position)
        except SessionError as exc:
            if exc.code == "storage":
                raise
            return None

    def _check_position(self, position: int) -> None:
        _check(position, int, "a position")
        if not 0 <= position < len(self.tree):
            raise SessionError(
                "invalid_argument", f"no entry at position {position} (the session has {len(self.tree):,})"
            )

    def tool_call_of(
        self, position: int, *, entry_at: Callable[[int], Entry] | None = None
    ) -> dict[str, Any] | None:
        """The `toolCall` block that produced the tool result at `position`, or None. Pi writes
        the results of one assistant turn as a chain below it, so the call is found by walking
        up past sibling results (and `WALKED_PAST` entries) to the first assistant message.
        `entry_at`: how to get the entries it reads (default `Session.entry_at`), for a caller
        that has them decoded already."""
        tree = self.tree
        entry_at = entry_at or self.entry_at
        self._check_position(position)
        entry = entry_at(position)
        message = entry.get("message")
        if not isinstance(message, dict) or tree.role[position] != TOOL_RESULT:
            return None
        call_id = message.get("toolCallId")
        i = tree.parent[position]
        for _ in range(TOOL_CALL_SEARCH):
            if i < 0 or (tree.role[i] not in (TOOL_RESULT, ASSISTANT) and tree.kind[i] not in WALKED_PAST):
                return None
            if tree.role[i] == ASSISTANT:
                calls = entry_at(i).get("message", {}).get("content")
                if isinstance(calls, list):
                    for block in calls:
                        if (
                            isinstance(block, dict)
                            and block.get("type") == "toolCall"
                            and block.get("id") == call_id
                        ):
                            return block
                return None
            i = tree.parent[i]
        return None

    def tool_results_of(self, position: int) -> dict[str, dict[str, Any]]:
        """The tool result messages answering the assistant message at `position`, by call id:
        the chain of results Pi writes right below it (the one `tool_call_of` walks up)."""
        tree = self.tree
        found: dict[str, dict[str, Any]] = {}
        self._check_position(position)
        if tree.role[position] != ASSISTANT:
            return found
        i = tree.first_child[position]
        for _ in range(TOOL_CALL_SEARCH):
            if i < 0 or (tree.role[i] != TOOL_RESULT and tree.kind[i] not in WALKED_PAST):
                break
            if tree.role[i] == TOOL_RESULT:
                message = self.entry_at(i).get("message")
                if isinstance(message, dict) and isinstance(message.get("toolCallId"), str):
                    found.setdefault(message["toolCallId"], message)
            i = tree.first_child[i]
        return found

    def get_entries(self) -> list[Entry]:
        """The append log: every entry of every branch, in file order."""
        return list(self.storage.iter_entries())

    def entry_count(self) -> int:
        return self.storage.entry_count()

    def get_children(self, entry_id: str | None) -> list[Entry]:
        """Children oldest first; `None` gives the roots."""
        index = self.tree
        if entry_id is None:
            positions = list(index.roots)
        else:
            i = self.position(entry_id)
            positions = list(index.children(i))
        return [self.storage.load_entry(k) for k in positions]

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """The active path root-most first, bounded by the newest compaction (Pi's
        `getPathToRootOrCompaction`); from the leaf unless `from_id` is given."""
        if from_id is None:
            return self.storage.active_branch()
        return self.storage.load_many(self.tree.bounded_path(self.position(from_id)))

    def get_path(self, from_id: str | None = None) -> list[Entry]:
        """The full root path (no compaction bound) of `from_id` or the leaf."""
        index = self.tree
        start = index.leaf if from_id is None else self.position(from_id)
        return self.storage.load_many(index.path_to_root(start))

    def get_label(self, entry_id: str) -> str | None:
        return self.storage.get_label(entry_id)

    def labels(self) -> dict[str, str]:
        return self.storage.labels()

    def leaf_moves(self) -> list[LeafMove]:
        """Every recorded leaf move in file order (the navigation history). Built from the
        index alone, without decoding entries; moves whose target was unknown are left out."""
        tree = self.tree
        ids, parent = tree.ids, tree.parent
        return [
            LeafMove(
                ids[i],
                ids[parent[i]] if parent[i] >= 0 else None,
                ids[target] if target >= 0 else None,
            )
            for i, target in tree.leaf_targets.items()
        ]

    def move_count(self) -> int:
        """How many leaf moves are recorded (those `leaf_moves` lists)."""
        return len(self.tree.leaf_targets)

    def recent_leaf_moves(self, skip: int = 0, count: int | None = None) -> list[LeafMove]:
        """Leaf moves newest first, leaving out the `skip` newest: a page of the navigation
        history in O(skip + count), however long the history is."""
        _check(skip, int, "skip")
        _check(count, (int, type(None)), "count")
        if skip < 0 or (count is not None and count < 0):
            raise SessionError("invalid_argument", "skip and count cannot be negative")
        tree = self.tree
        ids, parent = tree.ids, tree.parent
        stop = None if count is None else skip + count
        return [
            LeafMove(ids[i], ids[parent[i]] if parent[i] >= 0 else None, ids[t] if t >= 0 else None)
            for i, t in itertools.islice(reversed(tree.leaf_targets.items()), skip, stop)
        ]

    def resolve_id(self, text: str) -> str:
        """The id of the entry `text` names: the id itself, or the start of exactly one id (as
        git takes a commit's, in either case when no id starts with it as typed); `not_found`
        when none, `invalid_argument` when several."""
        _check(text, str, "an entry id")
        tree = self.tree
        if text in tree.pos:
            return text
        shown = repr(text if len(text) <= 40 else text[:39] + "…")
        found = [eid for eid in tree.ids if eid.startswith(text)] if text else []
        if not found and text and text.lower() != text:  # "3A7C" as git takes it: ids are hex
            lowered = text.lower()
            found = [eid for eid in tree.ids if eid.lower().startswith(lowered)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise SessionError("not_found", f"no entry {shown} in this session", path=self.location)
        some = ", ".join(found[:3]) + (", …" if len(found) > 3 else "")
        raise SessionError(
            "invalid_argument",
            f"{shown} starts {len(found):,} entries' ids ({some}); give more of it",
            path=self.location,
        )

    def position(self, entry_id: str) -> int:
        """The position of `entry_id` in `tree` (file order); `not_found` if unknown."""
        i = self.tree.pos.get(entry_id)
        if i is None:
            _check(entry_id, str, "an entry id")  # `get_branch(3)` said "Entry 3 not found"
            raise SessionError("not_found", f"Entry {entry_id} not found")
        return i

    # --- context ------------------------------------------------------------------------------

    def build_context_entries(
        self,
        transforms: Sequence[Transform] = (),
        projectors: Mapping[str, Projector] | None = None,
        *,
        at: str | None = None,
    ) -> list[Entry]:
        """Bounded path → default compaction transform → instance transforms → call transforms.

        `at` builds it as if the leaf were at that entry (the browser's preview). `projectors`
        are accepted for symmetry with `build_context`; they only affect messages."""
        path = self.get_branch(at)  # a database's leaf branch is stored: no tree to load for it
        if _kept_from_above(path):
            start = self.tree.leaf if at is None else self.position(at)
            path = self.storage.load_many(self._context_path(start))
        return self._transform(select_context_entries(path), transforms)

    def _context_path(self, start: int) -> list[int]:
        """The path the context at `start` is cut from: the bounded path (`get_branch`), or the
        whole root path when the newest compaction keeps from above the bounded path's start.
        The bound moves up to an older compaction's kept entry met on the way (Pi's harness
        layer), so a newer compaction keeping from above that one kept nothing here, where Pi's
        coding agent, which looks on the whole path, keeps from there. Pi's own compactor never
        keeps from above an older cut; the library takes any id."""
        index = self.tree
        path = index.bounded_path(start)
        last = next((k for k in range(len(path) - 1, -1, -1) if index.kind[path[k]] == COMPACTION), -1)
        if last < 0:
            return path
        first_kept, has_tail = index.compactions[path[last]]
        if has_tail or first_kept is None or any(index.ids[path[k]] == first_kept for k in range(last)):
            return path
        whole = index.path_to_root(start)
        return whole if first_kept in (index.ids[k] for k in whole) else path

    def _transform(self, entries: list[Entry], transforms: Sequence[Transform]) -> list[Entry]:
        for transform in [*self._transforms, *transforms]:
            entries = list(transform(entries))
        return entries

    def build_context(
        self,
        transforms: Sequence[Transform] = (),
        projectors: Mapping[str, Projector] | None = None,
        *,
        at: str | None = None,
        limit: int | None = None,
        root_path: Sequence[Entry] | None = None,
    ) -> SessionContext:
        """Messages from the bounded path; thinking level, model and active tools from the full
        root path, as Pi derives them, so a compaction does not reset them.

        `limit` caps how many context entries are decoded: at most `limit`, the newest, with the
        compaction summary that heads the context counted among them and kept first when any
        are cut (`limit=3`: the summary and the newest two); `omitted` says how many were left
        out — for previews of huge sessions. Transforms then see only the kept entries.
        `root_path`: every entry from the root to `at` (or the leaf), decoded already by the
        caller (an export), which the bounded path is the end of: not decoded again."""
        _check(limit, (int, type(None)), "limit")
        if limit is not None and limit < 0:
            raise SessionError("invalid_argument", f"limit cannot be negative ({limit})")
        if at is None and self.leaf_id is None:
            return SessionContext(messages=[], entries=[])
        omitted = omitted_messages = 0
        if root_path is not None and limit is None:
            start = self.tree.leaf if at is None else self.position(at)
            bounded = list(root_path[len(root_path) - len(self._context_path(start)) :])
            entries = self._transform(select_context_entries(bounded), transforms)
        elif limit is None:
            entries = self.build_context_entries(transforms, at=at)
        else:
            entries, omitted, omitted_messages = self._limited_context_entries(at, limit)
            entries = self._transform(entries, transforms)
        merged = {**self._projectors, **(projectors or {})}
        level, model, tools = derive_state(*self.storage.state_entries(at))
        return SessionContext(
            messages=project(entries, merged),
            thinking_level=level,
            model=model,
            active_tool_names=tools,
            entries=entries,
            omitted=omitted,
            omitted_messages=omitted_messages,
        )

    def stream_context(self, *, at: str | None = None) -> ContextStream:
        """`build_context(at=at)`, its messages decoded a stretch of entries at a time as the
        stream is iterated, so a context of a million messages is never all in memory (`context
        --json`). Transforms and projectors see a whole context: with any set on the session,
        it is built whole first. A line damaged on disk after the open raises `SessionError`
        part-way through."""
        if at is None and self.leaf_id is None:
            return ContextStream(())
        start = self.tree.leaf if at is None else self.position(at)  # an unknown id: `not_found`
        state = derive_state(*self.storage.state_entries(at))
        if self._transforms or self._projectors:
            return ContextStream(self.build_context(at=at).messages, *state)
        positions = self._context_positions(start)
        storage = self.storage

        def messages() -> Iterator[dict[str, Any]]:
            for k in range(0, len(positions), STREAM_ENTRIES):
                yield from project(storage.load_many(positions[k : k + STREAM_ENTRIES]))

        return ContextStream(messages(), *state)

    def _context_positions(self, start: int, compaction: int | None = None) -> list[int]:
        """The positions of the context entries at `start`, in context order (`select_indices`
        over the bounded path); `compaction` is the path's newest, when known (`path_facts`)."""
        index = self.tree
        if compaction is None:
            compaction = index.path_facts(start)[1]
        path = self._context_path(start)
        chosen = select_indices(
            len(path),
            lambda k: index.kind[path[k]] == COMPACTION,
            lambda k: index.compactions[path[k]],
            lambda k: index.ids[path[k]],
            last=_index_in(path, compaction, index.relinks),
        )
        return [path[k] for k in chosen]

    def _limited_context_entries(self, at: str | None, limit: int) -> tuple[list[Entry], int, int]:
        """(the newest `limit` context entries, how many were left out, how many messages those
        would have added)."""
        index = self.tree
        start = index.leaf if at is None else self.position(at)
        length, compaction, *_, messages = index.path_facts(start)
        if compaction < 0 and len(index.pos) == len(index.ids):
            # No compaction bounds the path: the context is the whole root path, of which only the
            # newest `limit` are read, without listing the rest (700,000 on a deep retry tree).
            newest = index.newest_on_path(start, limit)
            newest.reverse()
            omitted = length - len(newest)
            return self.storage.load_many(newest), omitted, messages - index.message_entries(newest)
        chosen = self._context_positions(start, compaction)
        omitted = 0
        left_out: list[int] = []
        if len(chosen) > limit:
            head = chosen[:1] if limit and index.kind[chosen[0]] == COMPACTION else []
            keep = max(limit - len(head), 0)
            omitted = len(chosen) - len(head) - keep
            left_out = chosen[len(head) : len(chosen) - keep]
            chosen = head + chosen[len(chosen) - keep :]
        return [self.storage.load_entry(i) for i in chosen], omitted, index.message_entries(left_out)

    # --- appending ----------------------------------------------------------------------------

    def _append(self, etype: str, payload: dict[str, Any]) -> str:
        with self._writing:
            self.storage.begin_write()  # a database's writer lock, when it is taken per write
            try:
                self.storage.refresh()  # the parent must be the leaf as it is on disk now
                entry = self._make(etype, payload, self.storage.leaf_id)
                self.storage.append([entry])
            finally:
                self.storage.end_write()
            return entry.id

    def _make(self, etype: str, payload: dict[str, Any], parent_id: str | None) -> Entry:
        data: dict[str, Any] = {
            "type": etype,
            "id": self._entry_id(),
            "parentId": parent_id,
            "timestamp": self._clock(),
        }
        data.update(payload)
        return entry_from_dict(data)

    def append_message(self, message: Mapping[str, Any]) -> str:
        """Append an AgentMessage (`role` required; a user, assistant or tool result message
        needs a `content`, a string or a list of parts; a missing `timestamp` is set to now)."""
        if not isinstance(message, Mapping):
            raise SessionError(
                "invalid_argument", f"a message is a mapping with a string 'role', not {message!r:.60}"
            )
        if not isinstance(message.get("role"), str):
            raise SessionError("invalid_argument", "a message needs a string 'role'")
        _check_content(message)
        msg = dict(message)
        msg.setdefault("timestamp", now_ms())
        return self._append("message", {"message": msg})

    def append_thinking_level_change(self, level: str) -> str:
        _check(level, str, "a thinking level")
        return self._append("thinking_level_change", {"thinkingLevel": level})

    def append_model_change(self, provider: str, model_id: str) -> str:
        _check_named(provider, "a provider")
        _check_named(model_id, "a model id")
        return self._append("model_change", {"provider": provider, "modelId": model_id})

    def append_active_tools_change(self, names: Sequence[str]) -> str:
        # a str is a Sequence[str] to type checkers: "read" became r, e, a, d
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise SessionError(
                "invalid_argument", f"active tool names are a list of names (text), not {names!r:.60}"
            )
        return self._append("active_tools_change", {"activeToolNames": list(names)})

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_hook: bool = False,
        usage: dict[str, Any] | None = None,
        retained_tail: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        _check(summary, str, "a compaction's summary")
        _check_text(summary, "the compaction's summary")
        _check(tokens_before, (int, float), "tokens before")
        if not 0 <= tokens_before < math.inf:
            raise SessionError("invalid_argument", f"tokens before is a count, not {tokens_before!r}")
        _check(from_hook, bool, "from_hook")
        if usage is not None and not isinstance(usage, Mapping):
            raise SessionError("invalid_argument", f"usage is a mapping or None, not {usage!r:.60}")
        if retained_tail is not None and (
            not isinstance(retained_tail, (list, tuple))
            or not all(isinstance(m, Mapping) for m in retained_tail)
        ):
            raise SessionError(
                "invalid_argument",
                f"a retained tail is a list of messages (mappings), not {retained_tail!r:.60}",
            )
        if first_kept_entry_id is not None:
            self.require_entry(first_kept_entry_id)
        payload: dict[str, Any] = {"summary": summary}
        if first_kept_entry_id is not None:
            payload["firstKeptEntryId"] = first_kept_entry_id
        payload["tokensBefore"] = tokens_before
        if details is not None:
            payload["details"] = details
        if from_hook:
            payload["fromHook"] = True
        if usage is not None:
            payload["usage"] = usage
        if retained_tail is not None:
            payload["retainedTail"] = [dict(m) for m in retained_tail]
        return self._append("compaction", payload)

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        _check_named(custom_type, "a custom type")
        payload: dict[str, Any] = {"customType": custom_type}
        if data is not None:
            payload["data"] = data
        return self._append("custom", payload)

    def append_custom_message_entry(
        self, custom_type: str, content: str | list[Any], display: bool, details: Any = None
    ) -> str:
        _check_named(custom_type, "a custom type")
        _check_content({"role": "user", "content": content}, "a custom message's")
        _check(display, bool, "display")
        payload: dict[str, Any] = {
            "customType": custom_type,
            "content": content,
            "display": display,
        }
        if details is not None:
            payload["details"] = details
        return self._append("custom_message", payload)

    def append_label(self, target_id: str, label: str | None) -> str:
        """Set (or, with None/blank, clear) the label of `target_id`. The label entry itself
        joins the current branch (Pi semantics: it becomes the leaf)."""
        _check(label, (str, type(None)), "a label")
        if label is not None:
            _check_text(label, "the label")
        self.require_entry(target_id)
        payload: dict[str, Any] = {"targetId": target_id}
        if label is not None and label.strip():
            payload["label"] = label
        return self._append("label", payload)

    def append_session_name(self, name: str) -> str:
        """As Pi does: runs of CR/LF become one space, then trimmed; an empty name clears it."""
        _check(name, str, "a session name")
        _check_text(name, "the session name")
        return self._append("session_info", {"name": re.sub(r"[\r\n]+", " ", name).strip()})

    # --- moving -------------------------------------------------------------------------------

    def move_to(
        self, entry_id: str | None, summary: str | BranchSummary | Mapping[str, Any] | None = None
    ) -> str | None:
        """Move the leaf to `entry_id` (None = before the first entry). Always writes a `leaf`
        entry; with a summary also a `branch_summary` (parent = target, `fromId` = the old
        leaf or "root", as Pi writes it), which becomes the leaf. Returns the new leaf id.
        Any entry is a target, a `leaf` record included, as for Pi's `setLeafId`; the command
        line refuses those, which are moves rather than points of the conversation."""
        with self._writing:
            return self._move(entry_id, summary)

    def move_unless_leaf(self, entry_id: str | None) -> bool:
        """`move_to(entry_id)` unless `entry_id` is the leaf already, as the file is now
        (asked under the writer lock: another writer may have moved it there since the last
        look); whether a `leaf` entry was written. A `leaf` record from the leaf to itself
        says nothing: the browser's `b` wrote one where another app had gone back first (QA)."""
        with self._writing:
            self.storage.begin_write()
            try:
                self.storage.refresh()
                if entry_id == self.storage.leaf_id:
                    return False
                self._move_now(entry_id, None)
                return True
            finally:
                self.storage.end_write()

    def _move(
        self, entry_id: str | None, summary: str | BranchSummary | Mapping[str, Any] | None
    ) -> str | None:
        self.storage.begin_write()
        try:
            return self._move_now(entry_id, summary)
        finally:
            self.storage.end_write()

    def _move_now(
        self, entry_id: str | None, summary: str | BranchSummary | Mapping[str, Any] | None
    ) -> str | None:
        self.storage.refresh()
        if entry_id is not None:
            self.require_entry(entry_id)
        old_leaf = self.storage.leaf_id
        leaf = self._make("leaf", {"targetId": entry_id}, old_leaf)
        batch = [leaf]
        if summary is not None:
            s = BranchSummary.coerce(summary)
            _check_text(s.summary, "the summary")
            payload: dict[str, Any] = {"fromId": old_leaf or "root", "summary": s.summary}
            if s.details is not None:
                payload["details"] = s.details
            if s.from_hook:
                payload["fromHook"] = True
            if s.usage is not None:
                payload["usage"] = s.usage
            data = {
                "type": "branch_summary",
                "id": self._fresh_id(exclude={leaf.id}),
                "parentId": entry_id,
                "timestamp": self._clock(),
                **payload,
            }
            batch.append(entry_from_dict(data))
        self.storage.append(batch)
        return batch[-1].id if summary is not None else entry_id

    def _entry_id(self) -> str:
        """The id factory's next id, refused unless it is text: an int from `id_factory` was
        said as "an entry that is missing entry id" when the entry was checked."""
        entry_id = self._new_id()
        if not isinstance(entry_id, str) or not entry_id:
            raise SessionError(
                "invalid_argument", f"the id factory gave {entry_id!r}: an entry id is non-empty text"
            )
        return entry_id

    def _fresh_id(self, exclude: set[str]) -> str:
        for _ in range(FRESH_ID_TRIES):
            candidate = self._entry_id()
            if candidate not in exclude:
                return candidate
        raise SessionError("invalid_argument", "the id factory keeps giving ids already in use")

    def branch(self, entry_id: str | None) -> str | None:
        """Continue the conversation from `entry_id` (alias of `move_to` without a summary)."""
        return self.move_to(entry_id)

    def navigate(
        self, target_id: str, summary: str | BranchSummary | Mapping[str, Any] | None = None
    ) -> Navigation:
        """Pi's tree navigation: a user or custom message moves the leaf to its *parent* and
        returns its text to re-send; any other entry becomes the leaf. A move that leaves the
        leaf where it is (the current leaf, or a user message just below it) writes nothing
        without a summary: a `leaf` entry from the leaf to itself made `b` take an empty step."""
        with self._writing:
            return self._navigate(target_id, summary)

    def _navigate(
        self, target_id: str, summary: str | BranchSummary | Mapping[str, Any] | None
    ) -> Navigation:
        # the leaf as it is now: another writer may have gone on since the last look, and
        # "already the leaf" of the leaf it had left wrote nothing
        self.storage.refresh()
        old = self.storage.leaf_id
        if target_id == old:
            self.require_entry(target_id)
            return Navigation(old, old, moved=False)
        new_leaf, editor_text = self.navigation_target(target_id)
        if new_leaf == old and summary is None:
            return Navigation(old, old, editor_text=editor_text, moved=False)
        result = self._move(new_leaf, summary)
        return Navigation(
            new_leaf_id=result,
            old_leaf_id=old,
            editor_text=editor_text,
            summary_id=result if summary is not None else None,
        )

    def navigation_target(self, target_id: str) -> tuple[str | None, str | None]:
        """Where `navigate(target_id)` puts the leaf, and the text it hands back to re-send."""
        target = self.require_entry(target_id)
        if isinstance(target, MessageEntry) and target.role == "user":
            return target.parent_id, content_text(target.message.get("content"), image_placeholder="")
        if isinstance(target, CustomMessageEntry):
            return target.parent_id, content_text(target.content, image_placeholder="")
        return target_id, None

    # --- statistics ---------------------------------------------------------------------------

    def stats(self) -> SessionStats:
        """Counts over the whole append log, and usage summed as Pi's `getSessionStats` does
        (assistant messages, compactions and branch summaries whose usage has all numeric
        components). Entries that cannot be decoded are left out of the counts."""
        self.storage.require_open()  # else every entry is "undecodable" and the counts zeros
        types: Counter[str] = Counter()
        roles: Counter[str] = Counter()
        stats = SessionStats(entry_count=0, message_count=0)
        for i in range(self.entry_count()):
            try:
                entry = self.storage.load_entry(i)
            except SessionError:
                continue  # an unreadable line: the storage lists it among its diagnostics
            stats.entry_count += 1
            types[entry.type] += 1
            usage = None
            if isinstance(entry, MessageEntry):
                stats.message_count += 1
                roles[entry.role] += 1
                if entry.role == "assistant":
                    usage = entry.message.get("usage")
            elif entry.type in ("compaction", "branch_summary"):
                usage = entry.get("usage")
            if _usable_usage(usage):
                assert isinstance(usage, dict)
                stats.cached_tokens += usage["cacheRead"]
                stats.uncached_tokens += usage["input"] + usage["cacheWrite"]
                stats.total_tokens += (
                    usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
                )
                stats.cost_total += usage["cost"]["total"]
        stats.leaf_count, stats.fork_count = self.tree.branch_counts()
        stats.types = dict(types)
        stats.roles = dict(roles)
        return stats


__all__ = ["BranchSummary", "LeafMove", "Navigation", "Session", "SessionStats"]


def _kept_from_above(path: Sequence[Entry]) -> bool:
    """Whether the newest compaction of a bounded path keeps from above its start
    (`Session._context_path`)."""
    last = next((k for k in range(len(path) - 1, -1, -1) if isinstance(path[k], CompactionEntry)), -1)
    if last < 0:
        return False
    compaction = path[last]
    assert isinstance(compaction, CompactionEntry)
    kept = compaction.first_kept_entry_id
    if compaction.retained_tail is not None or kept is None:
        return False
    return all(path[k].id != kept for k in range(last))


def _index_in(path: list[int], position: int, relinks: int) -> int | None:
    """Where `position` (the path's newest compaction, from `path_facts`) is in `path`, by
    bisection (-1: not in it); None when the path's positions may not ascend (an adoption linked
    a parent written after its child) and the caller must look."""
    if relinks:
        return None
    k = bisect_left(path, position)
    return k if k < len(path) and path[k] == position else -1


# The roles whose `content` Pi's code reads without checking (pi-ai's UserMessage,
# AssistantMessage and ToolResultMessage): a message written without it is one Pi's own tools
# fail on when they read the session back. Pi's types want a list of parts (a string too for a
# user); a string is taken for every role, as harnesses write one.
CONTENT_ROLES = frozenset({"user", "assistant", "toolResult"})


def _check_content(message: Mapping[str, Any], whose: str = "") -> None:
    """A message's content as Pi reads it (`whose`: how the message is named, else by role)."""
    if message["role"] not in CONTENT_ROLES:  # bashExecution, custom, other harnesses' roles
        return
    content = message.get("content")
    if isinstance(content, str):
        return
    if isinstance(content, list) and all(isinstance(p, Mapping) and "type" in p for p in content):
        return
    name = type(content).__name__
    what = "missing" if content is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
    if isinstance(content, list):
        what = "a list with a part that is not a mapping with a 'type'"
    whose = whose or f"a {message['role']} message's"
    raise SessionError(
        "invalid_argument",
        f"{whose} 'content' is a string or a list of parts such as"
        f" {{'type': 'text', 'text': ...}}; it is {what}",
    )

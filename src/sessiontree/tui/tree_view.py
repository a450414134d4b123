"""A virtualized tree of the whole append log.

Textual's stock `Tree` renders from a node object per entry and recurses per depth level, which
does not survive 100k-entry sessions or chains thousands deep. This widget draws from an
`Outline` (flat int arrays): `render_line` decodes only the entries on screen, through a small
strip cache, so cursor moves cost a couple of rendered lines whatever the session size.
"""

from __future__ import annotations

import contextlib
import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events, work
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import get_current_worker

from ..archive import archived
from ..display import call_label, counted, entry_glyph, entry_preview, for_cells, label_text, one_line
from ..display import entry_kind as kind_of
from ..folds import Folds
from ..model.entries import Entry
from ..model.errors import SessionError
from ..outline import GUIDE, ActivePath, Filter, Masks, Outline, subtree_size
from ..session import Session
from ..sizes import ContextSizes, short_tokens
from . import deliver
from .cells import shortened
from .direct_lines import DirectLines
from .input_gate import gated
from .keymap import key_of
from .notices import confirm, withdraw
from .scroll_bar import QuickScrollBars
from .scroll_size import set_virtual_size
from .styles import CachedStyles

PREVIEW_CHARS = 300  # preview text kept per row; wider rows are rare
NOT_DIM = Style(dim=False)
WHEN_WIDTH = 100  # columns of the tree from which rows say when they were written
AGE_WIDTH = 60  # columns of the tree from which a fold's stub says the age of its newest entry
READ_AHEAD_ROWS = 16  # rows `read_ahead` decodes and draws a step (a key waits for one step)
MIN_TEXT = 22  # columns of text every row keeps, however deep its branch is nested
NO_FORK = "No fork"  # what `[` and `]` say at the first and last fork

KIND_CLASS = {
    "user": "tree--user",
    "assistant": "tree--assistant",
    "toolResult": "tree--tool",
    "bashExecution": "tree--tool",
    "compaction": "tree--compaction",
    "branch_summary": "tree--summary",
    "custom": "tree--custom",
    "custom_message": "tree--custom",
}


@dataclass(frozen=True, slots=True)
class RowTarget:
    position: int
    entry_id: str


def row_preview(session: Session, i: int, limit: int, entry: Entry | None = None) -> str:
    """The text of entry `i`'s row (`entry`, if decoded already), one line of at most `limit`
    characters: a tool result is drawn as the call that produced it (its output is in the
    preview), as in Pi's /tree."""
    if entry is None:
        entry = session.entry_at(i)
    if kind_of(entry) == "toolResult":
        call = session.tool_call_of(i)
        if call is not None:
            return call_label(call, is_error=bool(entry.get("message", {}).get("isError")))
    return entry_preview(entry, limit)


# Entries `l` walks down through while they have no row (the filter hides them) before saying
# so, a few tenths of a second at most: 1,000 gave up between two labels 3,000 entries apart
# under the labeled-only filter (QA). A folded entry is said at once, not walked.
CHILD_WALK_MOST = 100_000


class SessionTreeView(ScrollView, CachedStyles, DirectLines, QuickScrollBars, can_focus=True):
    """Rows of the session tree; the cursor row is the "highlighted" entry."""

    HELP_TITLE = "Tree"

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="down"),
        Binding("pageup,ctrl+b", "page(-1)", "Page up", show=False, id="page_up"),
        Binding("pagedown,ctrl+f", "page(1)", "Page down", show=False, id="page_down"),
        # half a page, as in vim and less (QA: a k9s user reached for them)
        Binding("ctrl+u", "half_page(-1)", "Half page up", show=False, id="half_page_up"),
        Binding("ctrl+d", "half_page(1)", "Half page down", show=False, id="half_page_down"),
        Binding("home,g", "first", "Top", show=False, id="top"),
        Binding("end,G", "last", "Bottom", show=False, id="bottom"),
        Binding("left,h", "parent", "Parent", show=False, id="parent"),
        Binding(
            "right,l", "child", "Child", tooltip="child: toward the leaf, or newest", show=False, id="child"
        ),
        Binding("[", "fork(-1)", "Prev fork", show=False, id="prev_fork"),
        Binding("]", "fork(1)", "Next fork", show=False, id="next_fork"),
        Binding("space", "fold", "Fold", tooltip="fold / unfold below the entry", show=False, id="fold"),
        Binding(
            "z",
            "fold_sides",
            "Fold sides",
            tooltip="fold / unfold every side branch",
            show=False,
            id="fold_sides",
        ),
        Binding(
            "a", "jump_active", "Active leaf", tooltip="jump to the active leaf", show=False, id="active_leaf"
        ),
        Binding(
            "t",
            "toggle_sizes",
            "Tokens",
            tooltip="column: context tokens if the leaf were here (the last reported usage plus"
            " estimates after it, Pi's rule), and what the entry adds",
            show=False,
            id="tokens",
        ),
    ]

    COMPONENT_CLASSES = {
        "tree--cursor",
        "tree--guide",
        "tree--path",
        "tree--off-path",
        "tree--leaf",
        "tree--label",
        "tree--time",
        "tree--user",
        "tree--assistant",
        "tree--tool",
        "tree--compaction",
        "tree--summary",
        "tree--custom",
        "tree--match",
        "tree--fold",
        "tree--leaf-row",
        "tree--was-leaf",
        "tree--depth",
        "tree--tokens",
    }

    show_sizes: reactive[bool] = reactive(False)

    class Damaged(Message):
        """A row's entry could not be decoded (the session just became read-only)."""

    class Relaid(Message):
        """The rows were laid out again (a fold, a filter, new entries): the header's counts
        and filter may have changed where the cursor did not move."""

    class Highlighted(Message):
        """The cursor is on another entry (the preview follows it)."""

        def __init__(self, target: RowTarget, *, followed: bool = False) -> None:
            super().__init__()
            self.target = target
            self.followed = followed  # moved by live follow (`appended`), not by a key

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        # A plain attribute, not a reactive: a reactive repaints the whole view on every move,
        # while `set_cursor` repaints only the two rows that change (and scrolling repaints all).
        self.cursor_row = 0
        self._following = False  # `set_cursor` called by `appended`: the cursor follows the leaf
        self.filter = Filter.DEFAULT
        self.folded = Folds()  # a value, replaced on each fold: outlines keep it without a copy
        self.matches: set[int] = set()
        self.restrict: bytearray | None = None  # a search used as a filter: 0 = hidden
        self.archived: set[int] = set()  # roots of archived subtrees (stubs unless "all")
        self.opened: set[int] = set()  # archived stubs the user unfolded anyway
        self.outline = Outline.empty(session.tree)  # built by the first rebuild()
        # Kept between rebuilds and brought up to date in O(change), so a filter, fold, leaf move
        # or appended entry costs milliseconds at a million entries (see `outline`).
        self._runs = session.tree.runs()
        self._masks = Masks(session.tree)
        self._unprepared = list(Filter)  # filters `prepare` has still to lay out once
        self._warmed = -1  # the version of the rows whose outline `prepare` last warmed
        self._fold_tried = False  # `prepare` has laid a fold out once (`_try_a_fold`)
        self._path = ActivePath(session.tree)
        self._labels: dict[str, str] = {}
        self._no_fork_said = False  # the status line says "No fork" of the cursor's row
        self._version = 0
        self._cache: LRUCache[RowLook, Strip] = LRUCache(256)  # ~4 screens; strips are GC-heavy
        self._info: LRUCache[int, tuple[str, str, str, str, str]] = LRUCache(8192)
        self._read_from: tuple[int, int, int] | None = None  # (version, top, height) read around
        self._rows_read = 0  # of the rows around it (`read_ahead`)
        self._upward = False  # the screen last scrolled up: the page above is read first
        self._last_highlight: int | None = None  # the cursor's last entry, kept through empty filters
        # (entry the cursor was on, entry a rebuild put it on instead): a filter that hides the
        # cursor's entry moves it to an ancestor; the next filter, if the cursor has not moved
        # since, goes back to the entry.
        self._displaced: tuple[int, int] | None = None
        self.previous_leaf: int | None = None  # marked after a move, until the next one
        self._leaf_seen = session.tree.leaf  # the leaf at the last rebuild (`_note_move`)
        self._stubs: LRUCache[int, tuple[int, str]] = LRUCache(1024)
        self._leaf_row = (-1, -1, -1)  # (version, leaf, its row): asked for by every drawn row
        # y -> how the line at y was last drawn (None: no row there), so a rebuild repaints only
        # the lines whose look changed (see `_refresh_changed`)
        self._drawn: dict[int, RowLook | None] = {}
        self.sizes = ContextSizes(session)
        self._sizes_missing = False  # a drawn row lacked its size: compute the screen's in a worker

    # --- data ---------------------------------------------------------------------------------

    def rebuild(self, keep: int | None = None) -> None:
        """Recompute rows after the log, leaf, labels, filter or folds changed. The cursor stays
        on entry `keep` (default: the current one) or its nearest shown ancestor."""
        current = self.current_position() if keep is None else keep
        if keep is None and self._displaced is not None and current in (None, self._displaced[1]):
            current = self._displaced[0]  # the cursor has not moved since a rebuild displaced it
        elif current is None:  # a filter that showed nothing: come back to where the cursor was
            current = self._last_highlight
        tree = self.session.tree
        if self._runs.index is not tree:  # the session was reopened (e.g. after an upgrade)
            self._masks, self._path = Masks(tree), ActivePath(tree)
            self._cache.clear()
            self._unprepared = list(Filter)
            self._leaf_seen, self.previous_leaf = tree.leaf, None  # positions of the old index
        self._runs = tree.runs()
        self._note_move()
        self._labels = self.session.labels()
        self.archived = archived(self.session)
        was_empty, top = not len(self.outline), int(self.scroll_offset.y)
        line = self.cursor_row - top  # the cursor's line on screen
        self.outline = self._lay_out(self.filter)
        self._version += 1  # rows keep their strips (cached by how they look), not their stubs
        self._stubs.clear()
        set_virtual_size(self, Size(self.scrollable_content_region.width, len(self.outline)), redraw=False)
        row = self.outline.row_for(current) if current is not None else -1
        self._keep_line(max(row, 0) if len(self.outline) else 0, line, was_empty)
        landed = self.current_position()
        if landed is not None or keep is not None:  # an empty outline keeps what it displaced
            self._displaced = None if current is None or landed in (None, current) else (current, landed)
        self._refresh_changed(top, was_empty)
        self.post_message(self.Relaid())

    def _keep_line(self, row: int, line: int, was_empty: bool) -> None:
        """The cursor on `row`, on the screen's `line` where it was if it was on screen: `z`
        then `z` in the middle of a deep tree left the cursor on the screen's last line and
        the rows around it scrolled away (QA), as the least scroll that showed it was taken."""
        height, n = self.scrollable_content_region.height, len(self.outline)
        if was_empty or not 0 <= line < height or not n:
            self.set_cursor(row, scroll=True)
            return
        self.set_cursor(row, scroll=False)
        top = max(0, min(self.cursor_row - line, n - height))
        if top != int(self.scroll_offset.y):
            self.scroll_to(y=top, animate=False, force=True, immediate=True)

    def _note_move(self) -> None:
        """`previous_leaf`: where the leaf was before it moved (`← was active`; it was never
        set, and help's legend named it: QA). An entry appended at the leaf moves nothing."""
        tree = self.session.tree
        leaf, seen = tree.leaf, self._leaf_seen
        if leaf != seen and not (0 <= leaf < len(tree) and tree.parent[leaf] == seen):
            self.previous_leaf = seen if 0 <= seen < len(tree) else None
        self._leaf_seen = leaf

    def _refresh_changed(self, top: int, was_empty: bool) -> None:
        """Repaint the lines on screen whose look changed since they were drawn, given the
        scroll offset and whether there were rows before the change. A fold below the middle of
        the screen, a label, a move whose path marks change on a few rows, entries appended
        below leave the other lines as they are: Textual then composes and sends the terminal
        only those, where a whole refresh redrew the pane."""
        outline, drawn = self.outline, self._drawn
        n = len(outline)
        width = self.scrollable_content_region.width
        if was_empty or not n or width <= 0 or int(self.scroll_offset.y) != top:
            self.refresh()  # every line changed (and a scroll repaints them all anyway)
            return
        start = -1  # first line of a run of changed lines
        height = self.size.height
        for y in range(height + 1):
            row = y + top
            changed = y < height and (
                y not in drawn or drawn[y] != (self._look(row, width) if row < n else None)
            )
            if changed and start < 0:
                start = y
            elif not changed and start >= 0:
                self.refresh(Region(0, start, self.size.width, y - start))
                start = -1

    def _lay_out(self, flt: Filter, trial: bool = False, folded: Folds | None = None) -> Outline:
        """The outline under `flt` with everything else as it is now (`folded`, default the
        folds; archived stubs, a search used as a filter); the runs and labels as of the last
        `rebuild`."""
        folded = self.folded if folded is None else folded
        if flt is not Filter.ALL:  # archived branches as one stub row each
            folded = folded | (self.archived - self.opened)
        vis = self._masks.mask(flt, self._labels)
        return Outline(
            self.session.tree,
            flt,
            self._labels,
            folded,
            self._path,
            self.restrict,
            runs=self._runs,
            vis=vis,
            trial=trial,
        )

    def prepare(self) -> bool:
        """One step of the work done ahead of the keys, while nobody types; False when there
        is none left. First, lay the tree out once under each filter not used yet, and drop
        the result: what a filter keeps between builds (its mask, the shown entries before
        each position, each run's nearest shown ancestor) is then built before its key is
        pressed. On a deep 1M-entry tree a filter's first use took up to 20 ms, most of it page
        faults for those arrays, against 5 ms once they exist (`bench/keys.py`). Then, after
        each build, what the next keys would find when pressed (`Outline.warm`), and the
        entries of the pages above and below the screen (`read_ahead`, which the app also runs
        soon after each key). One step per call, so a key pressed meanwhile waits for one at
        most."""
        if self._runs.index is not self.session.tree or not len(self.outline):
            return False
        if not self.prepared:
            self._runs = self.session.tree.runs()  # entries may have arrived since the last build
            self._lay_out(self._unprepared.pop(0), trial=True)
            return True
        if not self.warmed:
            self._warmed = self._version
            self.outline.warm()
            return True
        if not self._fold_tried:
            self._fold_tried = True
            self._try_a_fold()
            return True
        return self.read_ahead()

    def _try_a_fold(self) -> None:
        """Lay the tree out once with a fold, and drop the result: the first fold of a session
        asked the system for the memory of arrays no layout had needed yet, page by page, and
        the memory allocator keeps it for the next one. The deep 1M-entry tree, headless: the
        first fold 16-18 ms and 5,761 page faults, now 7-11 ms and 1,068 (a fold elsewhere
        needs arrays of other sizes); the next ones 3-5 ms and none."""
        i = self.current_position()
        if i is None or not self.outline.is_foldable(i):
            roots = self.outline.side_roots
            if not len(roots):
                return
            i = int(roots[0])
        self._lay_out(self.filter, trial=True, folded=self.folded.toggled(i))

    def read_ahead(self) -> bool:
        """Decode the entries of the pages above and below the screen (first the way it last
        scrolled), and draw their rows into the strip cache, a few rows a step
        (`READ_AHEAD_ROWS`, at most ~3 ms on a deep 1M-entry file): a page key draws a screen
        of rows new to it, decoding their entries and drawing them in its frame. Drawn ahead,
        only the rows the cursor leaves and lands on are drawn again: the tree's part of a page
        up 1.2 ms against 2.1 (headless, 160x50). Not with the tokens column shown: a row off
        screen would ask for sizes not computed yet, and be drawn with `…` in their place."""
        height = self.scrollable_content_region.height
        width = self.scrollable_content_region.width
        top = int(self.scroll_offset.y)
        where = (self._version, top, height)
        if self._read_from != where:
            # the way the screen last went first: page keys pressed again go on that way
            self._upward = self._read_from is not None and top < self._read_from[1]
            self._read_from, self._rows_read = where, 0
        above = range(max(top - height, 0), top)
        below = range(top + height, min(top + 2 * height, len(self.outline)))
        rows = [*above, *below] if self._upward else [*below, *above]
        if self._rows_read >= len(rows):
            return False
        rows_pos, draw = self.outline.rows_pos, width > 0 and not self.show_sizes
        for row in rows[self._rows_read : self._rows_read + READ_AHEAD_ROWS]:
            self._row_info(rows_pos[row])
            if draw:
                look = self._look(row, width)
                if look not in self._cache:
                    self._cache[look] = self._draw(look)
        self._rows_read += READ_AHEAD_ROWS
        return True

    @property
    def warmed(self) -> bool:
        """The rows on screen are warmed for the next keys (see `prepare`)."""
        return self._warmed == self._version

    @property
    def prepared(self) -> bool:
        """Every filter but the one in use has been laid out once (see `prepare`)."""
        self._unprepared = [flt for flt in self._unprepared if flt is not self.filter]
        return not self._unprepared

    def appended(self, keep: int | None = None) -> None:
        """Entries arrived from another writer (live follow). When they only lengthen the chain
        drawn last, their rows are added at the end without laying out the tree again, so an
        agent's next turn reaches the screen in O(new entries) on any session; otherwise this
        is `rebuild`. The cursor moves to `keep` if given, else stays on its row, and the
        preview is told the move followed the leaf (`Highlighted.followed`)."""
        self._following = True
        try:
            self._append_rows(keep)
        finally:
            self._following = False

    def _append_rows(self, keep: int | None) -> None:
        tree = self.session.tree
        if self._runs.index is not tree:
            self.rebuild(keep)
            return
        self._runs = tree.runs()
        vis = self._masks.mask(self.filter, self._labels)
        was_empty, top = not len(self.outline), int(self.scroll_offset.y)
        if not self.outline.grow(vis, self.restrict):
            self.rebuild(keep)
            return
        self._version += 1
        set_virtual_size(self, Size(self.scrollable_content_region.width, len(self.outline)), redraw=False)
        if keep is not None:
            row = self.outline.row_for(keep)
            self.set_cursor(max(row, 0), scroll=True)
        self._refresh_changed(top, was_empty)

    def set_matches(self, positions: set[int]) -> None:
        self.matches = positions
        self._version += 1
        self._refresh_changed(int(self.scroll_offset.y), False)

    @property
    def version(self) -> int:
        """Changes whenever the rows (or what they show) change."""
        return self._version

    def leaf_row(self) -> int:
        """The leaf's row: its own, or the one that stands for it when the filter or a fold
        hides it ("← active below"); -1 for none. Kept until the rows or the leaf change."""
        tree = self.session.tree
        version, leaf, row = self._leaf_row
        if version != self._version or leaf != tree.leaf:
            row = self.outline.row_for(tree.leaf) if tree.leaf >= 0 else -1
            self._leaf_row = (self._version, tree.leaf, row)
        return row

    def at_leaf(self) -> bool:
        """Whether the cursor is on `leaf_row`: following the conversation, even where its leaf
        is an entry the filter hides (a label, whose row was never the cursor's)."""
        row = self.leaf_row()
        return row >= 0 and self.cursor_row == row

    def current_position(self) -> int | None:
        if not len(self.outline):
            return None
        return self.outline.rows_pos[min(self.cursor_row, len(self.outline) - 1)]

    def current_target(self) -> RowTarget | None:
        i = self.current_position()
        return None if i is None else RowTarget(i, self.session.tree.ids[i])

    def go_to_position(self, i: int) -> None:
        row = self.outline.row_for(i)
        if row >= 0:
            self.set_cursor(row, scroll=True, center=True)

    def filter_shows(self, i: int) -> bool:
        """Whether the filter in use shows entry `i` (folded away or not)."""
        return bool(self._masks.mask(self.filter, self._labels)[i])

    def filter_mask(self) -> bytearray:
        """1 for each entry the filter in use shows (folded away or not)."""
        return self._masks.mask(self.filter, self._labels)

    def hidden_reason(self, i: int) -> str:
        """Why entry `i` has no row of its own, and the key that shows it, short enough for the
        status line at 80 columns: a fold's entry was said to be hidden by the filter, and a
        search's view (`&`) sent the user to `f`, which changes nothing there (QA)."""
        kind = self.session.tree.type_name(i)
        if self.restrict is not None and not self.restrict[i]:
            return f"a {kind} entry not among the matches shown (Esc shows the tree)"
        if not self.filter_shows(i):
            return f"a {kind} entry the filter hides ({key_of(self.app, 'filter-5', '5')} shows it)"
        return f"a {kind} entry folded away ({key_of(self.app, 'fold', 'space')} on its fold opens it)"

    def unfold_to(self, i: int) -> int:
        """Open the folds and archived stubs that hide entry `i` (as an editor opens the folds
        over a line it jumps to), without laying the rows out again: the number opened. Walks
        up from `i` to its nearest ancestor with a row, since no fold above a row hides it."""
        tree = self.session.tree
        parent, row_of = tree.parent, self.outline.row_of
        stubs = self.archived - self.opened if self.filter is not Filter.ALL else set()
        folds: set[int] = set()
        opened = 0
        a = parent[i]
        while a >= 0:
            if a in self.folded:
                folds.add(a)
            elif a in stubs:
                self.opened.add(a)
                opened += 1
            if row_of[a] >= 0:
                break
            a = parent[a]
        if folds:  # copied only then: `z` may hold 90,908 folds
            self.folded = Folds.of([p for p in self.folded if p not in folds])
        return len(folds) + opened

    # --- cursor -------------------------------------------------------------------------------

    def set_cursor(self, row: int, *, scroll: bool = True, center: bool = False) -> None:
        n = len(self.outline)
        row = max(0, min(row, n - 1)) if n else 0
        old = self.cursor_row
        self.cursor_row = row
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
            if self._no_fork_said:  # it was said of the row the cursor left: stale now (QA)
                self._no_fork_said = False
                withdraw(self, NO_FORK)
        if scroll and n:
            self.scroll_to_region(
                Region(0, row, max(self.size.width, 1), 1),
                animate=False,
                force=True,
                center=center,
                immediate=True,
            )
        target = self.current_target()
        if target is not None and target.position != self._last_highlight:
            self._last_highlight = target.position
            self.post_message(self.Highlighted(target, followed=self._following))

    def _refresh_row(self, row: int) -> None:
        y = row - int(self.scroll_offset.y)
        if 0 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def action_cursor(self, step: int) -> None:
        self.set_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.set_cursor(self.cursor_row + step * max(self.size.height - 1, 1))

    def action_half_page(self, step: int) -> None:
        self.set_cursor(self.cursor_row + step * max(self.size.height // 2, 1))

    def action_first(self) -> None:
        self.set_cursor(0)

    def action_last(self) -> None:
        self.set_cursor(len(self.outline) - 1)

    def action_parent(self) -> None:
        i = self.current_position()
        if i is None:  # an empty view (a filter that shows nothing): said, not a silent key
            confirm(self, self.empty_text())
            return
        ids, parent = self.session.tree.ids, self.session.tree.parent[i]
        row = self.outline.row_for(parent) if parent >= 0 else -1
        if row >= 0 and row != self.cursor_row:
            self.set_cursor(row, scroll=True, center=True)
            return
        self.app.bell()  # it did nothing, unsaid, on the top row (QA)
        if parent < 0:
            confirm(self, f"{ids[i]} is a root: it has no parent")
        else:
            confirm(self, f"Its parent {ids[parent]} has no row: {self.hidden_reason(parent)}")

    def action_child(self) -> None:
        """To the entry's child with a row: on the active path the one toward the leaf, else the
        newest, as the tree draws them in its column; a child the filter hides is passed
        through (`h` had no counterpart: QA)."""
        i = self.current_position()
        if i is None:
            confirm(self, self.empty_text())
            return
        tree, outline = self.session.tree, self.outline
        ids, row_of = tree.ids, outline.row_of
        if i in self.folded:
            self.app.bell()
            confirm(self, f"{ids[i]} is folded ({key_of(self.app, 'fold', 'space')} opens it)")
            return
        j = i
        for _ in range(CHILD_WALK_MOST):
            children = list(tree.children(j))
            if not children:
                break
            toward = [c for c in children if outline.on_path(c)]
            j = toward[0] if toward else max(children)
            row = row_of[j]
            if row >= 0:
                self.set_cursor(row, scroll=True, center=True)
                return
        self.app.bell()
        if j == i:
            confirm(self, f"{ids[i]} has no child")
        else:
            confirm(self, f"No child of {ids[i]} has a row: {self.hidden_reason(j)}")

    def action_fork(self, step: int) -> None:
        if not len(self.outline):  # "No fork below this row" of a view with no row (QA)
            confirm(self, self.empty_text())
            return
        row = self.outline.next_fork_row(self.cursor_row, step)
        # where among the forks: "next fork" alone did not say how many were left to visit
        upto, total = self.outline.fork_count(row if row >= 0 else self.cursor_row)
        if row >= 0:
            self.set_cursor(row, center=True)  # takes back a "No fork" said at the other end
            confirm(self, f"Fork {upto:,} of {total:,}")
        else:
            self.app.bell()
            said = f"{NO_FORK} {'above' if step < 0 else 'below'} this row under this filter"
            confirm(self, said + (f" ({counted(total, 'fork', 'forks')} in all)" if total else ""))
            self._no_fork_said = True

    def action_fold(self) -> None:
        i = self.current_position()
        if i is None:
            confirm(self, self.empty_text())
            return
        entry_id = self.session.tree.ids[i]
        if i in self.archived and self.filter is not Filter.ALL:
            self.opened.symmetric_difference_update({i})  # open / close an archived stub
            if i in self.opened:
                message = f"Opened the archived branch at {entry_id} (space closes it)"
            else:
                message = f"Closed the archived branch at {entry_id}"
        elif i in self.folded or self.outline.is_foldable(i):
            self.folded = self.folded.toggled(i)
            message = ""
        else:
            self.app.bell()
            confirm(self, f"Nothing is shown below {entry_id} to fold")
            return
        self.rebuild(keep=i)
        if not message:  # counted as the stub row counts them, whatever the filter shows
            hidden = self._folded_away(i)[0]
            below = counted(hidden, "entry", "entries")
            if not hidden:  # a fold `z` made of a branch of one entry: nothing to say it hid
                message = f"Nothing is below {entry_id}"
            elif i in self.folded:
                message = f"Folded {below} below {entry_id} (space unfolds)"
                if self.outline.on_path(i) and i != self.session.tree.leaf:
                    message += "; the leaf is in the fold"
            else:
                message = f"Unfolded the {below} below {entry_id}"
        confirm(self, message)

    def action_fold_sides(self) -> None:
        """Fold every side branch to its stub row; with all of them folded already, unfold
        everything. A fold of the user's own did not count as the side branches folded: `z`
        after one `space` unfolded it rather than folding the rest (QA)."""
        i = self.current_position()
        sides = self.outline.side_folds
        both = self.folded | sides if self.folded and self.folded != sides else self.folded
        if self.folded and len(both) == len(self.folded):
            self.folded = Folds()
            message = "Unfolded every branch (z folds the side branches again)"
        else:
            count = len(both) - len(self.folded) if self.folded else len(sides)
            if not count:  # an empty view says what is shown, as its other keys do (QA)
                confirm(
                    self, self.empty_text() if not len(self.outline) else "No side branches to fold here."
                )
                return
            self.folded = both if self.folded else sides
            # Most may be far from the screen: say what happened even when no row here changes.
            message = f"Folded {counted(count, 'side branch', 'side branches')} (z unfolds them)"
        if i is not None:
            self.rebuild()  # the cursor's entry, or back to it when the fold had hidden it
        confirm(self, message)

    def action_toggle_sizes(self) -> None:
        self.show_sizes = not self.show_sizes
        if self.show_sizes:
            # short enough for 80 columns; the help says where the figures come from
            confirm(self, "Tokens: context if the leaf were here · what the entry adds (t hides)")
        else:
            confirm(self, "Token column hidden")

    def watch_show_sizes(self) -> None:
        self._version += 1
        self.refresh()

    def _want_sizes(self) -> None:
        if not self._sizes_missing:
            self._sizes_missing = True
            self.call_after_refresh(self._compute_sizes)

    @work(thread=True, exclusive=True, group="sizes")
    def _compute_sizes(self) -> None:
        """Sizes of the rows on screen (and of the cursor's row), off the UI thread: the first
        row of a long uncompacted chain may have to walk far to its nearest known size."""
        worker = get_current_worker()
        stopped = gated(self.app, lambda: worker.is_cancelled)  # waits out keys being handled
        top = int(self.scroll_offset.y)
        rows = range(top, min(top + self.size.height, len(self.outline)))
        for row in [self.cursor_row, *rows]:
            if stopped():
                return
            if row < len(self.outline):
                self.sizes.compute(self.outline.rows_pos[row], stopped)
        if not worker.is_cancelled:
            deliver(self.app, self._sizes_ready)

    def _sizes_ready(self) -> None:
        self._sizes_missing = False
        self._version += 1
        self.refresh()

    def _size_text(self, i: int) -> str:
        total = self.sizes.known(i)
        if total is None:
            self._want_sizes()
            return f"{'…':>7} {'':>6}"
        added = self.sizes.added(i)
        share = "" if not added else (f"+{short_tokens(added)}" if added > 0 else f"-{short_tokens(-added)}")
        return f"{short_tokens(total):>7} {share:>6}"

    def action_jump_active(self) -> None:
        leaf = self.session.tree.leaf
        if leaf < 0:
            confirm(self, "No leaf yet: the context is empty")
            return
        if not len(self.outline):  # it said "On the row of the active leaf", of no row (QA)
            confirm(self, self.empty_text())
            return
        opened = self.unfold_to(leaf) if self.outline.row_of[leaf] < 0 else 0
        if opened:  # it landed on the fold's row, saying it was on the leaf (QA)
            self.rebuild(keep=leaf)
        self.go_to_position(leaf)
        tree = self.session.tree
        if self.outline.exact_row(leaf) < 0:  # on the row it is drawn under, not its own (QA)
            confirm(self, f"On the row of the active leaf {tree.ids[leaf]}, {self.hidden_reason(leaf)}")
            return
        said = f" (unfolded {counted(opened, 'fold')} over it)" if opened else ""
        confirm(self, f"On the active leaf {tree.ids[leaf]}{said}")

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.outline))
        self._cache.clear()
        self.call_after_refresh(self._keep_cursor_in_view)  # a smaller window must not lose it

    def _keep_cursor_in_view(self) -> None:
        if len(self.outline):
            self.scroll_to_region(
                Region(0, self.cursor_row, max(self.size.width, 1), 1),
                animate=False,
                force=True,
                immediate=True,
            )

    def on_click(self, event: events.Click) -> None:
        row = event.y + int(self.scroll_offset.y)
        if 0 <= row < len(self.outline):
            self.set_cursor(row, scroll=False)

    # --- drawing ------------------------------------------------------------------------------

    def empty_text(self) -> str:
        """What an empty tree says on its first row, and the status line for a key that needs
        an entry: an empty tree was a blank pane where keys did nothing, unsaid."""
        if not len(self.session.tree):
            return "No entries yet: the session has only its header (new ones show as they come)"
        if self.restrict is not None:
            return "No entry is shown: Esc restores the tree"
        return nothing_shown(self.filter)

    def render_line(self, y: int) -> Strip:
        row = y + int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        if not len(self.outline) and width > 2:  # what the empty pane means, wrapped
            self._drawn.pop(y, None)  # no look says what is written there
            said = textwrap.wrap(self.empty_text(), width - 2)
            text, _ = fit(" " + said[row] if row < len(said) else "", width)
            return Strip([Segment(text, self._style("") + self._style("tree--off-path"))], width)
        if row >= len(self.outline) or width <= 0:
            self._drawn[y] = None
            return Strip.blank(width, self._style(""))
        look = self._drawn[y] = self._look(row, width)
        strip = self._cache.get(look)
        if strip is None:
            strip = self._draw(look)
            self._cache[look] = strip
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def _row_info(self, i: int) -> tuple[str, str, str, str, str]:
        """(kind, glyph, id, preview text, local time) of entry `i`. Cached as plain strings, so
        drawing rows keeps no decoded entries alive (they are what makes garbage collection
        pauses long on big sessions)."""
        info = self._info.get(i)
        if info is None:
            session = self.session
            try:
                entry = session.entry_at(i)
                preview = row_preview(session, i, PREVIEW_CHARS, entry)
            except SessionError as exc:  # a line that cannot be decoded: say so, in the row
                self.post_message(self.Damaged())
                return ("unknown", "⚠", session.tree.ids[i], one_line(f"unreadable: {exc.detail}"), "")
            info = (
                kind_of(entry),
                entry_glyph(entry),
                entry.id,
                for_cells(preview),
                _local_time(entry.timestamp),
            )
            self._info[i] = info
        return info

    def _stub(self, i: int, width: int) -> str:
        """What a folded entry hides: `▸ 12 entries · 3h ago`; without the age in a narrow tree,
        where it left the entry's own text ten columns and a column of stubs looked alike (QA)."""
        hidden, age = self._folded_away(i)
        when = f" · {age}" if age and width >= AGE_WIDTH else ""
        return f"▸ {counted(hidden, 'entry', 'entries')}{when} "

    def _folded_away(self, i: int) -> tuple[int, str]:
        """(how many entries a fold of `i` hides, the age of the newest of them or ""), kept
        until the next rebuild: `space` says the count as the stub row is drawn, and counting a
        subtree near the root of a long session walks its runs."""
        kept = self._stubs.get(i)
        if kept is None:
            count, latest = subtree_size(self.session.tree, i, self._runs, self.outline.vis)
            age = ""
            if latest != i:
                with contextlib.suppress(SessionError):
                    age = _age(self.session.entry_at(latest).timestamp)
            kept = self._stubs[i] = (count - 1, age)
        return kept

    def _look(self, row: int, width: int) -> RowLook:
        """Everything a row's strip is drawn from. Strips are cached by it, not by row number,
        so after a fold, filter or leaf move the rows that look the same are not drawn again
        (drawing a row is most of a frame's own work: ~0.3 ms, against ~0.02 ms for this)."""
        tree = self.session.tree
        outline = self.outline
        i = outline.rows_pos[row]
        kind, glyph, entry_id, preview, when = self._row_info(i)
        stub = None
        # A fold with nothing below it (`z` folds a side branch of one entry too) is drawn
        # as the entry: a stub would say "▸ 0 entries".
        if i in outline.folded and (self._folded_away(i)[0] or i in self.archived):
            stub = self._stub(i, width)
            if i in self.archived:
                stub = "archived · " + stub
        elif i in self.archived:  # drawn whole (filter "all", a stub opened): marked still (QA)
            preview = "archived · " + preview
        leaf_row = self.leaf_row()
        marker = ""
        if row == leaf_row:
            marker = " ← active" if i == tree.leaf else " ← active below"  # folded or filtered away
        elif i == self.previous_leaf:
            marker = " ← was active"
        return RowLook(
            width,
            row == self.cursor_row,
            self.has_focus,
            outline.on_path(i),
            i == tree.leaf,
            outline.prefix(row),
            kind,
            glyph,
            preview,
            when if width >= WHEN_WIDTH else None,
            stub,
            self._labels.get(entry_id),
            marker,
            self._size_text(i) if self.show_sizes else None,
            i in self.matches,
        )

    def _draw(self, look: RowLook) -> Strip:
        width, on_path, kind = look.width, look.on_path, look.kind
        row_style = self._style("") + self._style("tree--path" if on_path else "tree--off-path")
        if look.is_leaf:
            row_style += self._style("tree--leaf-row")

        prefix = look.prefix
        budget = max(width - 1 - 2 - MIN_TEXT, 6)  # guides never take the last MIN_TEXT columns
        depth_marker = ""
        if len(prefix) > budget:  # deep nesting: `⤷12` plus the innermost guides
            depth_marker = f"⤷{len(prefix) // GUIDE} "
            keep = max((budget - len(depth_marker)) // GUIDE, 1) * GUIDE
            prefix = prefix[-keep:]
        left: list[Segment] = [
            Segment("▌" if on_path else " ", row_style + self._style("tree--leaf") if on_path else row_style)
        ]
        if depth_marker:
            left.append(Segment(depth_marker, row_style + self._style("tree--depth")))
        left.append(Segment(prefix, row_style + self._style("tree--guide")))
        kind_style = row_style + self._style(KIND_CLASS[kind]) if kind in KIND_CLASS else row_style
        left.append(Segment(look.glyph + " ", kind_style))
        if look.stub is not None:
            left.append(Segment(look.stub, row_style + self._style("tree--fold")))

        right: list[Segment] = []
        if look.marker:
            name = "tree--was-leaf" if look.marker == " ← was active" else "tree--leaf"
            right.append(Segment(look.marker, row_style + self._style(name)))
        if look.size is not None:
            right.append(Segment(f" {look.size}", row_style + self._style("tree--tokens")))
        if look.when is not None:
            right.append(Segment(f" {look.when}", row_style + self._style("tree--time")))

        used = sum(cell_len(s.text) for s in left) + sum(cell_len(s.text) for s in right)
        if look.label:  # a quarter of the row at most, and half of what the rest leaves
            label = for_cells(label_text(look.label))
            most = max(min(width // 4, (width - used) // 2 - 3), LABEL_MIN)
            label = shortened(label, most)
            left.append(Segment(f"[{label}] ", row_style + self._style("tree--label")))
            used += cell_len(label) + 3
        room = max(width - used, 0)
        text, exact = fit(look.preview, room)
        text_style = kind_style if kind in ("compaction", "branch_summary") else row_style
        if look.match:
            text_style = text_style + self._style("tree--match")
        segments = [*left, Segment(text, text_style), *right]
        if look.cursor:
            # After the row's own styles, so the bar's background wins over theirs; not dim,
            # which an off-path row is: its text blended into the bar (2.5:1, QA).
            bar = self._style("tree--cursor") + NOT_DIM
            segments = list(Segment.apply_style(segments, post_style=bar))
            return Strip(segments).crop_extend(0, width, row_style + bar)
        if exact and used <= width:  # the segments fill the row exactly
            return Strip(segments, width)
        return Strip(segments).crop_extend(0, width, row_style)


def nothing_shown(flt: Filter) -> str:
    """What to say when `flt` shows nothing, and which key shows more: under the default
    filter (a session of a name and settings only), pointing to it sent the user in a loop."""
    other = "5 shows every entry" if flt is Filter.DEFAULT else "1 shows the default one"
    return f"Nothing is shown under the {flt.value} filter: {other}"


LABEL_MIN = 4  # cells a label may take on any row (a quarter of it at most, half of what is left)


def fit(text: str, room: int) -> tuple[str, bool]:
    """`text` in `room` cells: cut with `…` when longer, padded when shorter; and whether
    that was counted exactly, so the row's strip needs no measuring either. A row's text is
    kept at up to `PREVIEW_CHARS` characters and often ends in `…`, which sends Rich's
    `cell_len` and `set_cell_size` through every character one by one (~0.1 ms a row, 2-3 ms
    of a frame after a leaf move). When the characters that can show are printable ASCII,
    one cell each (two tests at C speed), they are counted by `len`."""
    head = text[: room + 1]
    if head.isascii() and head.isprintable():  # `text` fits in `room` cells iff it has <= room chars
        if len(text) <= room:
            return text + " " * (room - len(text)), True
        return (head[: room - 1] + "…" if room > 0 else ""), True
    return set_cell_size(shortened(text, room), room), False


class RowLook(NamedTuple):
    """What a tree row is drawn from (see `SessionTreeView._look`); the key of its strip."""

    width: int
    cursor: bool
    focus: bool  # the cursor's colours depend on it, and `_style` resolves per focus
    on_path: bool
    is_leaf: bool
    prefix: str
    kind: str
    glyph: str
    preview: str
    when: str | None  # only from 100 columns
    stub: str | None  # a folded entry's `▸ 12 entries · 3h ago`
    label: str | None
    marker: str  # ` ← active`, ` ← active below`, ` ← was active` or nothing
    size: str | None  # the tokens column, when shown
    match: bool


def _age(iso: str) -> str:
    """How long ago, coarsely: `5m ago`, `3h ago`, `12d ago`."""
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        seconds = (datetime.now(UTC) - moment).total_seconds()
    except (ValueError, OverflowError, TypeError):
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def _local_time(iso: str) -> str:
    """Entry time in the local zone, `MM-DD HH:MM` (as written if it cannot be converted:
    years near 1 or 9999 overflow when shifted to the local zone)."""
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    except (ValueError, OverflowError, OSError):
        return iso[:16]
    return moment.strftime("%m-%d %H:%M")

"""A virtualized tree of the whole append log.

Textual's stock `Tree` renders from a node object per entry and recurses per depth level, which
does not survive 100k-entry sessions or chains thousands deep. This widget draws from an
`Outline` (flat int arrays): `render_line` decodes only the entries on screen, through a small
strip cache, so cursor moves cost a couple of rendered lines whatever the session size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..display import entry_glyph, entry_kind, entry_preview, inert, one_line
from ..model.errors import SessionError
from ..outline import Filter, Outline, active_marks
from ..session import Session

PREVIEW_CHARS = 300  # preview text kept per row; wider rows are rare

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


class SessionTreeView(ScrollView, can_focus=True):
    """Rows of the session tree; the cursor row is the "highlighted" entry."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup,ctrl+b", "page(-1)", "Page up", show=False),
        Binding("pagedown,ctrl+f", "page(1)", "Page down", show=False),
        Binding("home,g", "first", "Top", show=False),
        Binding("end,G", "last", "Bottom", show=False),
        Binding("left,h", "parent", "Parent", show=False),
        Binding("[", "fork(-1)", "Prev fork", show=False),
        Binding("]", "fork(1)", "Next fork", show=False),
        Binding("space", "fold", "Fold", show=False),
        Binding("a", "jump_active", "Active leaf", show=False),
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
    }

    cursor_row: reactive[int] = reactive(0, always_update=True)

    class Damaged(Message):
        """A row's entry could not be decoded (the session just became read-only)."""

    class Highlighted(Message):
        """The cursor is on another entry (the preview follows it)."""

        def __init__(self, target: RowTarget) -> None:
            super().__init__()
            self.target = target

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self.filter = Filter.DEFAULT
        self.folded: set[int] = set()
        self.matches: set[int] = set()
        self.outline = Outline.empty(session.tree)  # built by the first rebuild()
        self._marks = bytearray()
        self._labels: dict[str, str] = {}
        self._version = 0
        self._cache: LRUCache[tuple, Strip] = LRUCache(256)  # ~4 screens; strips are GC-heavy
        self._styles: dict[tuple[str, bool], Style] = {}
        self._info: LRUCache[int, tuple[str, str, str, str, str]] = LRUCache(8192)
        self._last_highlight: int | None = None

    # --- data ---------------------------------------------------------------------------------

    def rebuild(self, keep: int | None = None) -> None:
        """Recompute rows after the log, leaf, labels, filter or folds changed. The cursor stays
        on entry `keep` (default: the current one) or its nearest shown ancestor."""
        current = self.current_position() if keep is None else keep
        tree = self.session.tree
        self._labels = self.session.labels()
        self.outline = Outline(tree, self.filter, self._labels, self.folded)
        self._marks = active_marks(tree, tree.leaf)
        self._version += 1
        self._cache.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.outline))
        row = self.outline.row_for(current) if current is not None else -1
        self.set_cursor(max(row, 0) if len(self.outline) else 0, scroll=True)
        self.refresh()

    def refresh_marks(self) -> None:
        """The leaf or labels moved: repaint without re-flattening."""
        tree = self.session.tree
        self._labels = self.session.labels()
        self._marks = active_marks(tree, tree.leaf)
        self._version += 1
        self._cache.clear()
        self.refresh()

    def set_matches(self, positions: set[int]) -> None:
        self.matches = positions
        self._version += 1
        self._cache.clear()
        self.refresh()

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

    # --- cursor -------------------------------------------------------------------------------

    def set_cursor(self, row: int, *, scroll: bool = True, center: bool = False) -> None:
        n = len(self.outline)
        row = max(0, min(row, n - 1)) if n else 0
        old = self.cursor_row
        self.cursor_row = row
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
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
            self.post_message(self.Highlighted(target))

    def _refresh_row(self, row: int) -> None:
        y = row - int(self.scroll_offset.y)
        if 0 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def action_cursor(self, step: int) -> None:
        self.set_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.set_cursor(self.cursor_row + step * max(self.size.height - 1, 1))

    def action_first(self) -> None:
        self.set_cursor(0)

    def action_last(self) -> None:
        self.set_cursor(len(self.outline) - 1)

    def action_parent(self) -> None:
        i = self.current_position()
        if i is None:
            return
        parent = self.session.tree.parent[i]
        if parent >= 0:
            self.go_to_position(parent)

    def action_fork(self, step: int) -> None:
        row = self.outline.next_fork_row(self.cursor_row, step)
        if row >= 0:
            self.set_cursor(row, center=True)
        else:
            self.app.bell()

    def action_fold(self) -> None:
        i = self.current_position()
        if i is None:
            return
        if i in self.folded:
            self.folded.discard(i)
        elif self.outline.is_foldable(i):
            self.folded.add(i)
        else:
            self.app.bell()
            return
        self.rebuild(keep=i)

    def action_jump_active(self) -> None:
        leaf = self.session.tree.leaf
        if leaf >= 0:
            self.go_to_position(leaf)

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.outline))
        self._cache.clear()

    def on_click(self, event: events.Click) -> None:
        row = event.y + int(self.scroll_offset.y)
        if 0 <= row < len(self.outline):
            self.set_cursor(row, scroll=False)

    # --- drawing ------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        row = y + int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        if row >= len(self.outline) or width <= 0:
            return Strip.blank(width, self._style(""))
        key = (row, width, row == self.cursor_row, self._version, self.has_focus)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(row, width)
            self._cache[key] = strip
        return strip

    def _style(self, name: str) -> Style:
        """Component styles, cached: Textual resolves them through the CSS cascade each time,
        which would otherwise dominate drawing a row."""
        key = (name, self.has_focus)
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = (
                self.rich_style if name == "" else self.get_component_rich_style(name, partial=True)
            )
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._cache.clear()

    def _row_info(self, i: int) -> tuple[str, str, str, str, str]:
        """(kind, glyph, id, preview text, local time) of entry `i`. Cached as plain strings, so
        drawing rows keeps no decoded entries alive (they are what makes garbage collection
        pauses long on big sessions)."""
        info = self._info.get(i)
        if info is None:
            try:
                entry = self.session.entry_at(i)
            except SessionError as exc:  # a line that cannot be decoded: say so, in the row
                self.post_message(self.Damaged())
                return ("unknown", "⚠", self.session.tree.ids[i], one_line(f"unreadable: {exc.detail}"), "")
            info = (
                entry_kind(entry),
                entry_glyph(entry),
                entry.id,
                entry_preview(entry, PREVIEW_CHARS),
                _local_time(entry.timestamp),
            )
            self._info[i] = info
        return info

    def _render_row(self, row: int, width: int) -> Strip:
        tree = self.session.tree
        i = self.outline.rows_pos[row]
        kind, glyph, entry_id, preview, when = self._row_info(i)
        base = self._style("")
        on_path = bool(self._marks[i])
        leaf_row = self.outline.row_for(tree.leaf) if tree.leaf >= 0 else -1
        row_style = base + self._style("tree--path" if on_path else "tree--off-path")

        left: list[Segment] = [
            Segment("▌" if on_path else " ", row_style + self._style("tree--leaf") if on_path else row_style),
            Segment(self.outline.prefix(row), row_style + self._style("tree--guide")),
        ]
        kind_style = row_style + self._style(KIND_CLASS[kind]) if kind in KIND_CLASS else row_style
        left.append(Segment(glyph + " ", kind_style))
        if i in self.folded:
            hidden = len(self.outline.visible_children(i)) or 1
            left.append(Segment(f"▸{hidden} ", row_style + self._style("tree--fold")))
        label = self._labels.get(entry_id)
        if label:
            left.append(Segment(f"[{inert(label)}] ", row_style + self._style("tree--label")))

        right: list[Segment] = []
        if row == leaf_row:
            marker = " ← active" if i == tree.leaf else " ← active (hidden below)"
            right.append(Segment(marker, row_style + self._style("tree--leaf")))
        if width >= 100:
            right.append(Segment(f" {when}", row_style + self._style("tree--time")))

        used = sum(cell_len(s.text) for s in left) + sum(cell_len(s.text) for s in right)
        room = max(width - used, 0)
        text = preview if cell_len(preview) <= room else set_cell_size(preview, max(room - 1, 0)) + "…"
        text_style = kind_style if kind in ("compaction", "branch_summary") else row_style
        if i in self.matches:
            text_style = text_style + self._style("tree--match")
        segments = [*left, Segment(set_cell_size(text, room), text_style), *right]
        strip = Strip(segments).crop_extend(0, width, row_style)
        if row == self.cursor_row:
            strip = strip.apply_style(self._style("tree--cursor"))
        return strip


def _local_time(iso: str) -> str:
    """Entry time in the local zone, `MM-DD HH:MM`."""
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return iso[:16]
    return moment.strftime("%m-%d %H:%M")

"""A line-API view's lines handed to the compositor with only what its CSS adds, past Textual's
general per-line styling.

Textual passes every line a widget draws through its styles cache (`Widget.render_lines`), which
adds what the widget's CSS may ask for around the content: borders, padding, outline, hatching,
tint, opacity, text opacity, the hovered link. The tree and the preview ask only for a column of
padding, yet that pass cost ~40 µs a line, four times what drawing a tree row costs
(`tree_view.fit`): ~1.9 ms of a page of 48 rows, on every key that redraws the page. It also
rebuilt each line as a new `Strip` on every frame, so the app's colour filters
(`App.get_line_filters`) ran again on rows that had not changed.

Like the styles cache, the lines made are kept until Textual marks them dirty: the compositor
asks every widget under the bounding box of what changed for all its lines there (a cursor move
beside a preview update asks for the whole tree), and only the dirty ones are drawn again. Textual
says which through `Widget._set_dirty`, the one private method used here: where a Textual
release lacks it, or any other style is in play (a theme or a later CSS rule), the view goes back
through Textual's path. `tests/tui/test_direct_lines.py` compares the two after every kind of
change.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.color import Color
from textual.filter import LineFilter
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

TRACKS_DIRTY = callable(getattr(Widget, "_set_dirty", None))


class DirectLines(Widget):
    """Mix into a widget that draws its own lines (`render_line`); list it after the widget's
    Textual base, as for `styles.CachedStyles`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._made: dict[int, Strip] = {}  # y -> the line made, until Textual marks y dirty
        # id(drawn strip) -> (drawn strip, the line made of it): a row drawn again as the same
        # strip (the tree keeps one per look) is not padded and filtered again
        self._finished: dict[int, tuple[Strip, Strip]] = {}
        self._frame: _Frame | None = None  # what both depend on
        # (background, fill style, opaque), from the ancestors' styles: walking them cost more
        # than the lines of a cursor move. Forgotten when styles change, like `CachedStyles`.
        self._ground: tuple[Color, RichStyle, bool] | None = None
        super().__init__(*args, **kwargs)

    def render_lines(self, crop: Region) -> list[Strip]:
        lines = self._direct_lines(crop)
        return super().render_lines(crop) if lines is None else lines

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget()
        self._ground = None

    def _set_dirty(self, *regions: Region) -> None:
        super()._set_dirty(*regions)
        if not regions:
            self._made.clear()
            return
        offset = self.content_offset  # regions are relative to the content, lines to the widget
        for region in regions:
            for y in region.translate(offset).line_range:
                self._made.pop(y, None)

    def _forget(self) -> None:
        self._made.clear()
        self._finished.clear()

    def _direct_lines(self, crop: Region) -> list[Strip] | None:
        """What Textual's `Widget.render_lines(crop)` returns, made without its styles cache;
        None when the widget's styles need that cache."""
        ground = self._ground
        if ground is None:
            base_background, background = self.background_colors
            fill = Style(background=base_background + background).rich_style
            ground = self._ground = (background, fill, self.opacity == 1.0)
        background, fill, opaque = ground
        if not TRACKS_DIRTY or not opaque or not plain(self):
            self._made.clear()  # drawn by Textual meanwhile: nothing made here stays true
            return None
        _, pad_right, _, pad_left = self.styles.padding
        width, height = self.region.size  # no border, no vertical padding: the content's height
        frame = _Frame(width, pad_left, pad_right, fill, background, tuple(self.get_line_filters()))
        if frame != self._frame:
            self._forget()
            self._frame = frame
        elif len(self._finished) > 8 * max(height, 1):  # rows drawn as new strips each time
            self._finished.clear()  # the lines made stay true: only the shortcut to them goes
        made = self._made
        render_line = self.render_line
        strips: list[Strip] = []
        for y in crop.line_range:
            strip = made.get(y)
            if strip is None:
                drawn = render_line(y) if y < height else Strip.blank(frame.inner, fill)
                strip = made[y] = self._finish(drawn, frame)
            strips.append(strip)
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _finish(self, drawn: Strip, frame: _Frame) -> Strip:
        """`drawn` as Textual's styles cache passes it on: fitted, padded, filtered."""
        hit = self._finished.get(id(drawn))
        if hit is not None and hit[0] is drawn:
            return hit[1]
        strip = drawn.adjust_cell_length(frame.inner, frame.fill)
        if frame.pad_left or frame.pad_right:
            left = [Segment(" " * frame.pad_left, frame.fill)] if frame.pad_left else []
            right = [Segment(" " * frame.pad_right, frame.fill)] if frame.pad_right else []
            strip = Strip([*left, *strip, *right], frame.width)
        strip = filtered(strip, frame.filters, frame.background)
        self._finished[id(drawn)] = (drawn, strip)
        return strip


class _Frame(NamedTuple):
    """What the lines made depend on besides what they draw."""

    width: int
    pad_left: int
    pad_right: int
    fill: RichStyle  # the background of padding and of cells a line leaves empty
    background: Color  # what the line filters blend with
    filters: tuple[LineFilter, ...]

    @property
    def inner(self) -> int:
        return self.width - self.pad_left - self.pad_right


def filtered(strip: Strip, filters: tuple[LineFilter, ...], background: Color) -> Strip:
    """`strip` through the app's line filters, as the styles cache applies them last."""
    for line_filter in filters:
        strip = strip.apply_filter(line_filter, background)
    return strip


def plain(widget: Widget) -> bool:
    """Whether all Textual's styles cache would do to `widget`'s lines is fit them to its width,
    pad them left and right and apply the line filters (the opacity aside, which its ancestors
    set too)."""
    styles = widget.styles
    top, _, bottom, _ = styles.padding
    return (
        not top
        and not bottom
        and not any(styles.border.spacing)
        and not any(edge for edge, _ in styles.outline)
        and not styles.tint.a
        and styles.text_opacity == 1.0
        and (not styles.has_rule("hatch") or styles.hatch == "none")
        and not widget.BLANK
        and not (widget.auto_links and "@click" in widget.hover_style.meta)  # a link under the mouse
    )

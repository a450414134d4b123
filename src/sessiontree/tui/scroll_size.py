"""A scroll view's scrollable size, changed without laying the screen out again."""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widget import Widget


def set_virtual_size(view: ScrollView, size: Size, *, redraw: bool = True) -> None:
    """Give `view` a new scrollable size, redrawing only the view and its scrollbar.

    `virtual_size` is a Textual reactive with `layout=True`: assigning it lays out the whole
    screen and redraws every widget on it, though a view sized by its container (the tree, the
    preview) keeps its region when its rows change; only its scrollbar depends on the size.
    Textual sets it this way itself where no layout is needed (`Widget._size_updated`), and a
    scrollbar that appears or goes still asks for a layout (`show_vertical_scrollbar` is a
    layout reactive). Not for a view whose height is `auto`. `redraw=False` leaves the view's
    lines to the caller, which knows which changed."""
    if size == view.virtual_size:
        return
    view.set_reactive(Widget.virtual_size, size)
    view._scroll_update(size)
    if redraw:
        view.refresh()

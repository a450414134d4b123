"""Confirmations of what a key did, shown once that key's own frame is out.

A Textual toast is widgets mounted into the screen's toast rack: composing them and laying the
screen out again took 8-18 ms (real terminal, deep 100k tree, 160x50). Asked for in the key's
handler, that work ran before the key's frame: after `b`, the rows of the new leaf's path
reached the screen at +12 ms instead of +8. Asked for once the key's frame is drawn, the toast
follows a frame later, where it costs the key nothing.
"""

from __future__ import annotations

from functools import partial

from textual.widget import Widget


def confirm(widget: Widget, message: str, *, timeout: float | None = None) -> None:
    """Show `message` as an information toast after the frame being prepared."""
    notify = partial(widget.notify, message, markup=False, timeout=timeout)
    # After the second refresh: a widget that redraws itself in its own key handler (the tree's
    # `z`) reaches the screen's list of what to draw only once its handler returns, so the next
    # refresh may come, empty, before its frame.
    widget.call_after_refresh(widget.call_after_refresh, notify)

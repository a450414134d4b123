"""The Textual browser. Imports Textual; nothing below `sessiontree.tui` does."""

from __future__ import annotations

import contextlib


def deliver(app, callback, *args, **kwargs) -> None:
    """From a thread worker, run `callback` on the UI thread — unless the app has already
    stopped, in which case the result is simply dropped."""
    if not app.is_running:
        return
    with contextlib.suppress(RuntimeError):  # the event loop closed between check and call
        app.call_from_thread(callback, *args, **kwargs)

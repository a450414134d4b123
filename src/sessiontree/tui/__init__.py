"""The Textual browser. Imports Textual; nothing below `sessiontree.tui` does."""

from __future__ import annotations

import contextlib
from pathlib import Path

_PACKAGED = Path(__file__).resolve().parent.parent / "css"  # inside the wheel
_SOURCE = Path(__file__).resolve().parents[3] / "css"  # a source checkout / editable install
CSS_DIR = _PACKAGED if _PACKAGED.is_dir() else _SOURCE


def deliver(app, callback, *args, **kwargs) -> None:
    """From a thread worker, run `callback` on the UI thread — unless the app has already
    stopped, in which case the result is simply dropped."""
    if not app.is_running:
        return
    with contextlib.suppress(RuntimeError):  # the event loop closed between check and call
        app.call_from_thread(callback, *args, **kwargs)

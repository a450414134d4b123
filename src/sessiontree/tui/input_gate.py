"""Background work waits while a key is being handled.

After each cursor move the preview renders the rest of a long context in a worker thread
(`render_plan`), for a few hundred milliseconds on a deep tree. Python threads share one
interpreter lock, so a key pressed meanwhile ran its handler at about half speed: `z` on the
deep 1M-entry bench file took 36 ms at p50 against 18 ms with the worker idle (in the app,
cursor on a random row before each press). The app closes the gate when a key, click or scroll
arrives and opens it once that input's messages are handled and the screen is refreshed; the
worker asks before it plans and between the parts it renders, and waits while the gate is
closed, and its wait releases the lock. Asking before planning matters for the keys that start
a preview themselves (Enter, `b`): on the deep 1M-entry bench file the worker's plan (finding
the context and the parts to render, ~10 ms), run beside the drawing of that key's frame, put
the frame 28–42 ms after `b` instead of 18–21 (headless, every refresh timed), and 44 ms
instead of 29 at p50 in tmux. The search's scan (between blocks of the file) and the sizes
column's walks wait the same way (`gated`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

WAIT_MOST = 1.0  # seconds a worker waits at most: a gate left closed must not stop the preview
# Seconds a worker that waited sleeps on after the gate opens. The gate opens once the input's
# frame is drawn, but Textual's writer thread has still to write it to the terminal, and needs
# the interpreter lock for that: a worker resuming at once delayed the frame's write by up to a
# switch interval (see `tui/app.py`'s SWITCH_INTERVAL), or by more when both cores were busy.
AFTER_FRAME = 0.002


class InputGate:
    """Closed from the arrival of an input until the app has handled it (`close` / `release`,
    both on the app's thread: inputs overlap, so it opens when the last one is done)."""

    __slots__ = ("_open", "_pending")

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self._pending = 0

    def close(self) -> None:
        self._pending += 1
        self._open.clear()

    def release(self) -> None:
        self._pending = max(0, self._pending - 1)
        if not self._pending:
            self._open.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def wait(self) -> None:
        """From a worker thread: return when the gate is open. One closed for `WAIT_MOST` is
        taken as stuck (an input whose release never came) and opened."""
        if self._open.is_set():
            return
        if not self._open.wait(WAIT_MOST):
            self._pending = 0
            self._open.set()
        time.sleep(AFTER_FRAME)


def gated(app: object, cancelled: Callable[[], bool]) -> Callable[[], bool]:
    """`cancelled` for a worker of `app` (a worker asks it between steps), which first waits
    while an input is handled; `cancelled` itself for an app without a gate."""
    gate = getattr(app, "input_gate", None)
    if not isinstance(gate, InputGate):
        return cancelled

    def check() -> bool:
        gate.wait()
        return cancelled()

    return check

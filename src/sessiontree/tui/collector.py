"""Python's full garbage-collection passes, run while nobody is typing.

A full pass walks every object the collector tracks. Textual keeps rendered lines as strips
with seven small caches each, so a browser on a big session holds 75,000 to 150,000 tracked
objects, and a full pass over them takes 20-250 ms on a 1M-entry session (measured with
`gc.callbacks` during `bench/keys.py`: 41 full passes in a 40-second run of keys, 30 ms on
average, growing with the garbage). Python starts one whenever enough young objects survive,
which is in the middle of keys: a frame waits for it.

This collector runs the full pass itself once input has been quiet for a moment and young
passes have piled up as far as Python's own threshold for a full one. Python's passes stay as
they are (a long burst of keys still gets them), so nothing is collected later than before;
they come less often, since each pass here restarts their count. With keys 0.2-2 s apart on
the deep 1M-entry bench session (`bench/keys.py`, its last part), 7 of 50 keys had a full pass
inside them, against 12 of 50 in the blocks without this collector.

While an input is handled, Python's own collections are held (`hold`), and resumed once its
frame is written (`resume`): a key that opens a dialog allocates enough to start a full pass
in the middle of it.
"""

from __future__ import annotations

import gc
import time

QUIET = 0.5  # seconds without a key or a mouse event before a full pass may run
CHECK_EVERY = 0.25  # how often the app asks (a timer tick, which also paces `SessionTreeView.prepare`)
MIN_GAP = 2.0  # seconds between passes here: an app following a live agent allocates while idle
# Young-generation passes since the last full one before a pass is due: Python's own cadence
# (the third of `gc.get_threshold()`), so an idle app that allocates little never pays for one.
DUE_AFTER = gc.get_threshold()[2]


class IdleCollector:
    """Told of each input event (`touched`), asked on a timer (`tick`); holds Python's own
    collections while an input is handled (`hold`, `resume`)."""

    def __init__(self) -> None:
        self.last_input = self.last_pass = time.monotonic()
        self.passes = 0  # full passes run here (the tests read it)
        self._held = False  # collections are off because of `hold`

    def hold(self) -> None:
        """An input arrived: no collection until its frame is out (`resume`). Opening a dialog
        allocates enough to start a full pass in the middle of it: `?` took 54 ms to its frame
        on the demo with one every time, 35 ms without (the pass is longer on a big session).
        What the input leaves behind is collected once it is done, by Python or by `tick`."""
        if gc.isenabled():
            gc.disable()
            self._held = True

    def resume(self, *, animating: bool = False) -> None:
        """The input is handled and its frame written: collections on again, unless a smooth
        scroll holds them (Textual turns the collector off meanwhile and on at its end)."""
        if self._held and not animating:
            gc.enable()
            self._held = False

    def touched(self) -> None:
        self.last_input = time.monotonic()

    def quiet(self) -> bool:
        """No key or mouse event for `QUIET` seconds."""
        return time.monotonic() - self.last_input >= QUIET

    def due(self) -> bool:
        """Input has been quiet for `QUIET` seconds, the last pass here was `MIN_GAP` ago, young
        passes since the last full one (`gc.get_count()[2]`) reached Python's threshold, and
        the collector is on (Textual turns it off during smooth scrolls)."""
        now = time.monotonic()
        return (
            gc.isenabled()
            and self.quiet()
            and now - self.last_pass >= MIN_GAP
            and gc.get_count()[2] >= DUE_AFTER
        )

    def tick(self) -> bool:
        """Run a full pass if one is due; True if it ran."""
        if not self.due():
            return False
        gc.collect()
        self.last_pass = time.monotonic()
        self.passes += 1
        return True

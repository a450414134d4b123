"""Pausing Python's cyclic garbage collector around bulk decoding.

Decoding a million entries allocates millions of containers; each allocation burst triggers the
collector, whose full passes walk the whole (growing) heap, so a long path takes about twice as
long to load with it on. Decoded entries form no reference cycles worth collecting meanwhile.
The pause nests and is shared between threads: the collector comes back when the last pause
ends, and only if it was on before the first.

Coming back, it would start with a young pass over everything allocated meanwhile (its counter
of new objects is far past its threshold), and a pass over the middle generation soon after:
a quarter of building a 100k-entry context. The objects decoded are kept (a context, an
index) or freed by their reference counts, so they are moved to the oldest generation instead
(`gc.freeze` then `gc.unfreeze`: two list splices), where only the rarer full passes see them.
Not when something else has frozen objects (a server before it forks, the browser): unfreezing
would hand its objects back to the collector.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

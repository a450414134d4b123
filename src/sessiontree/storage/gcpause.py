"""Pausing Python's cyclic garbage collector around bulk decoding.

Decoding a million entries allocates millions of containers; each allocation burst triggers the
collector, whose full passes walk the whole (growing) heap, so a long path takes about twice as
long to load with it on. Decoded entries form no reference cycles worth collecting meanwhile.
The pause nests and is shared between threads: the collector comes back when the last pause
ends, and only if it was on before the first.
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
                gc.enable()

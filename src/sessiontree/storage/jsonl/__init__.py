"""JSONL session files as Pi writes them: one header line, then one entry per line, append-only.

One job per module:

- `storage`: `JsonlStorage` — the file's lifecycle and lock, reading entries, appending;
- `files`: opening only regular files, reading the header line;
- `indexer`: indexing lines at open and as the file grows (mmap windows, the forked helper);
- `tail`: what follows the last newline, and what it means for readers and writers;
- `repair`: blanking torn fragments and failed writes in place, cleaning up after kills;
- `verify`: the deferred UTF-8 check;
- `legacy`: Pi's older v1/v2 files.
"""

from __future__ import annotations

from .indexer import Progress
from .storage import JsonlStorage

__all__ = ["JsonlStorage", "Progress"]

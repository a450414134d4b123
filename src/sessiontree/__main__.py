from __future__ import annotations

from .entry import run

raise SystemExit(run())

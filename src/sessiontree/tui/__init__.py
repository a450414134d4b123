"""The Textual browser. Imports Textual; nothing below `sessiontree.tui` does."""

from __future__ import annotations

from pathlib import Path

_PACKAGED = Path(__file__).resolve().parent.parent / "css"  # inside the wheel
_SOURCE = Path(__file__).resolve().parents[3] / "css"  # a source checkout / editable install
CSS_DIR = _PACKAGED if _PACKAGED.is_dir() else _SOURCE

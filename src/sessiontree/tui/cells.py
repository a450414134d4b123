"""Cutting text to a number of terminal cells, where one character may take two."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size


def head(text: str, cells: int) -> str:
    """The longest start of `text` that takes at most `cells` cells. Rich's `set_cell_size`
    pads with a space where its cut halves a wide character, which put a gap before a `…`
    ("[my label ✓  …]"); that space is dropped here."""
    if cells <= 0:
        return ""
    cut = set_cell_size(text, cells)
    return cut if text.startswith(cut) else cut[:-1]


def shortened(text: str, cells: int) -> str:
    """`text` when it fits in `cells` cells, else its start and `…` in them (no padding)."""
    if cell_len(text) <= cells:
        return text
    return head(text, cells - 1) + "…" if cells > 0 else ""


def ending(text: str, cells: int) -> str:
    """`text` when it fits in `cells` cells, else `…` and its end in them: a path's end tells
    projects apart better than its start."""
    if cell_len(text) <= cells:
        return text
    return "…" + head(text[::-1], cells - 1)[::-1] if cells > 0 else ""

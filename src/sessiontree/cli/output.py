"""What commands print.

Session files hold whatever a model or a tool wrote, ids and timestamps included, so every line
of text output goes through `inert` (the same rendering the browser uses): an escape sequence in
an entry id is shown as `␛…`, never sent to the terminal. JSON output is exact JSON, in which
control characters are escaped by the encoder anyway.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from ..display import inert


def out(text: str = "") -> None:
    """One line of text on stdout, inert."""
    sys.stdout.write(inert(text) + "\n")


def err(text: str) -> None:
    """One line on stderr, inert (error messages echo ids and paths from the input)."""
    sys.stderr.write(inert(text) + "\n")


def json_out(value: Any) -> None:
    """`value` as indented JSON on stdout. Integers beyond 64 bits (JavaScript writes 1e20 as
    one) are written by the standard library's encoder, which has no size limit."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:
        import json

        data = json.dumps(value, indent=2, ensure_ascii=False).encode()
    sys.stdout.buffer.write(data + b"\n")

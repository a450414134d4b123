"""Copying a session out: the path root → ID as Markdown or as a session file of its own, and
the whole tree as one self-contained HTML page.

Library level (no Textual): the CLI's `export` and `fork` commands and the browser call the same
functions. Each `export_*` returns the data and what was collected, so the caller can say what a
damaged source left out (`damage_line`); `write_file` puts data in place atomically.
"""

from __future__ import annotations

from .common import PathExport, collect_path, damage, damage_line, describe_entry, resolve_target
from .files import Chunk, write_file
from .html import HtmlExport, html_chunks, render_html
from .jsonl import export_jsonl, session_lines
from .markdown import context_markdown, export_markdown, markdown_parts, render_markdown

__all__ = [
    "Chunk",
    "HtmlExport",
    "PathExport",
    "collect_path",
    "context_markdown",
    "damage",
    "damage_line",
    "describe_entry",
    "export_jsonl",
    "export_markdown",
    "html_chunks",
    "markdown_parts",
    "render_html",
    "render_markdown",
    "resolve_target",
    "session_lines",
    "write_file",
]

"""The context preview: what the model would see if the leaf were at the highlighted entry.

Lines are produced off the UI thread (`context_lines`, `llm_lines`, `raw_lines`: plain strings,
made inert) and shown by `PreviewView`, a line-API widget that wraps to its width and draws only
what is on screen. Long message bodies are cut to a few lines until expanded, so an entry of
hundreds of KB costs nothing until asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..context import SessionContext, bash_execution_text, convert_to_llm, estimate_tokens
from ..display import inert, pretty_json
from ..model.entries import Entry
from ..model.messages import (
    assistant_text,
    content_text,
    format_tool_call,
    json_compact,
    thinking_text,
    tool_calls,
)
from ..outline import Cycle

BODY_LINES = 14
BODY_CHARS = 4000
RAW_LINES = 400
RAW_LINE_CHARS = 2000


class PreviewMode(Cycle):
    CONTEXT = "context"
    LLM = "as sent (convert_to_llm)"
    RAW = "raw JSON"


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    style: str = ""  # a component class of PreviewView, or "" for body text


HEADING_STYLE = {
    "user": "preview--user",
    "assistant": "preview--assistant",
    "toolResult": "preview--tool",
    "bashExecution": "preview--tool",
    "custom": "preview--custom",
    "branchSummary": "preview--summary",
    "compactionSummary": "preview--summary",
}


def _heading(title: str, role: str) -> Line:
    return Line(f"── {title} ──", HEADING_STYLE.get(role, "preview--dim"))


def _body(text: str, expanded: bool, style: str = "") -> list[Line]:
    """A message body, cut to BODY_LINES / BODY_CHARS unless expanded."""
    text = inert(text).expandtabs(4)
    if not expanded and len(text) > BODY_CHARS:
        cut_chars = len(text) - BODY_CHARS
        text = text[:BODY_CHARS]
    else:
        cut_chars = 0
    lines = text.split("\n")
    out = []
    if not expanded and len(lines) > BODY_LINES:
        hidden = len(lines) - BODY_LINES
        out = [Line(x, style) for x in lines[:BODY_LINES]]
        more = f"… {hidden} more lines" + (f" and {cut_chars:,} more characters" if cut_chars else "")
        out.append(Line(more + "  (e: expand)", "preview--more"))
        return out
    out = [Line(x, style) for x in lines]
    if cut_chars:
        out.append(Line(f"… {cut_chars:,} more characters  (e: expand)", "preview--more"))
    return out


def _message_lines(msg: Any, expanded: bool) -> list[Line]:
    if not isinstance(msg, dict):
        return [Line(inert(repr(msg)), "preview--dim")]
    role = str(msg.get("role", "?"))
    tokens = estimate_tokens(msg)
    if role == "assistant":
        model = msg.get("model")
        title = (
            f"assistant · {model} · ~{tokens} tok" if isinstance(model, str) else f"assistant · ~{tokens} tok"
        )
        out = [_heading(title, role)]
        thought = thinking_text(msg)
        if thought:
            out += _body("thinking: " + thought, expanded, "preview--dim")
        text = assistant_text(msg)
        if text:
            out += _body(text, expanded)
        for call in tool_calls(msg):
            out += _body(
                "→ " + format_tool_call(call, max_args=400 if not expanded else 100_000),
                expanded,
                "preview--call",
            )
        if msg.get("stopReason") in ("error", "aborted"):
            out.append(
                Line(inert(f"({msg.get('stopReason')}: {msg.get('errorMessage', '')})"), "preview--error")
            )
        return out
    if role == "toolResult":
        name = msg.get("toolName", "tool")
        flag = " · error" if msg.get("isError") else ""
        out = [_heading(f"toolResult · {name}{flag} · ~{tokens} tok", role)]
        return out + _body(content_text(msg.get("content")), expanded, "preview--error" if flag else "")
    if role == "bashExecution":
        out = [_heading(f"bashExecution · ~{tokens} tok", role)]
        return out + _body(bash_execution_text(msg), expanded)
    if role in ("branchSummary", "compactionSummary"):
        extra = (
            f" · {msg.get('tokensBefore'):,} tokens before"
            if isinstance(msg.get("tokensBefore"), int)
            else ""
        )
        out = [_heading(f"{role}{extra} · ~{tokens} tok", role)]
        return out + _body(str(msg.get("summary", "")), expanded)
    if role == "custom":
        out = [_heading(f"custom · {msg.get('customType', '?')} · ~{tokens} tok", role)]
        return out + _body(content_text(msg.get("content")), expanded)
    out = [_heading(f"{role} · ~{tokens} tok", role)]
    return out + _body(content_text(msg.get("content")), expanded)


def _context_header(context: SessionContext, at: str) -> list[Line]:
    tools = ", ".join(context.active_tool_names) if context.active_tool_names is not None else "(default)"
    model = str(context.model) if context.model else "(none)"
    approx = "≥" if context.omitted else "~"
    out = [
        Line(
            f"if the leaf were at {at}: {len(context.messages)} messages · {approx}{context.tokens:,} tokens",
            "preview--meta",
        ),
        Line(inert(f"model {model} · thinking {context.thinking_level} · tools {tools}"), "preview--meta"),
    ]
    if context.omitted:
        out.append(
            Line(f"({context.omitted:,} older context entries not shown; e loads them all)", "preview--more")
        )
    if not context.messages:
        out.append(Line("(the model would see no messages)", "preview--dim"))
    return out


def context_lines(context: SessionContext, at: str, expanded: bool) -> list[Line]:
    out = _context_header(context, at)
    for msg in context.messages:
        out.append(Line(""))
        out += _message_lines(msg, expanded)
    return out


def _llm_block_lines(block: Any, expanded: bool) -> list[Line]:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text":
            return _body(str(block.get("text", "")), expanded)
        if kind == "thinking":
            return _body("[thinking] " + str(block.get("thinking", "")), expanded, "preview--dim")
        if kind == "toolCall":
            return _body("[toolCall] " + format_tool_call(block, max_args=100_000), expanded, "preview--call")
        if kind == "image":
            return [
                Line(
                    inert(f"[image {block.get('mimeType', '?')}, {len(str(block.get('data', '')))} chars]"),
                    "preview--dim",
                )
            ]
    return _body(json_compact(block), expanded, "preview--dim")


def llm_lines(context: SessionContext, at: str, expanded: bool) -> list[Line]:
    """The provider messages exactly as `convert_to_llm` produces them (summary wrappers
    included), block by block."""
    out = _context_header(context, at)
    for msg in convert_to_llm(context.messages):
        out.append(Line(""))
        out.append(_heading(f"{msg.get('role')} (as sent)", str(msg.get("role"))))
        content = msg.get("content")
        if isinstance(content, str):
            out += _body(content, expanded)
        elif isinstance(content, list):
            for block in content:
                out += _llm_block_lines(block, expanded)
    return out


def raw_lines(entry: Entry, line_number: int | None, expanded: bool) -> list[Line]:
    """The entry's JSON, pretty-printed, cut unless expanded."""
    where = f" · line {line_number}" if line_number else ""
    out = [
        Line(f"{entry.type} {entry.id}{where} · parent {entry.parent_id or '(root)'}", "preview--meta"),
        Line(""),
    ]
    lines = pretty_json(entry.to_dict()).split("\n")
    shown = lines if expanded else lines[:RAW_LINES]
    for line in shown:
        if not expanded and len(line) > RAW_LINE_CHARS:
            line = line[:RAW_LINE_CHARS] + f"… ({len(line) - RAW_LINE_CHARS:,} more characters)"
        out.append(Line(inert(line), "preview--json"))
    if len(lines) > len(shown):
        out.append(Line(f"… {len(lines) - len(shown):,} more lines  (e: expand)", "preview--more"))
    return out


def wrap(text: str, width: int) -> list[str]:
    """Wrap by terminal cells in one pass, keeping every character (indentation, runs of
    spaces): break after the last space of a chunk when there is one in its second half, else
    mid-word. Linear in the text, so a 1 MB line wraps in milliseconds."""
    if width <= 0 or (text.isascii() and len(text) <= width):
        return [text]
    out: list[str] = []
    if text.isascii():
        start, n = 0, len(text)
        while n - start > width:
            end = start + width
            space = text.rfind(" ", start, end)
            if space >= start + width // 2:
                end = space + 1
            out.append(text[start:end])
            start = end
        out.append(text[start:])
        return out
    start = 0
    cells = 0
    space = -1  # index just after the last space in the current chunk
    k = 0
    while k < len(text):
        ch = text[k]
        w = cell_len(ch)
        if cells + w > width and k > start:
            end = space if space > start and cell_len(text[start:space]) >= width // 2 else k
            out.append(text[start:end])
            start, space = end, -1
            cells = cell_len(text[start:k])  # what is carried over; `ch` is looked at again
            continue
        cells += w
        if ch == " ":
            space = k + 1
        k += 1
    out.append(text[start:])
    return out


class PreviewView(ScrollView, can_focus=True):
    """Scrollable, wrapped, inert lines."""

    HELP_TITLE = "Preview"

    BINDINGS = [
        Binding("up,k", "scroll_up", "Up", show=False),
        Binding("down,j", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,g", "scroll_home", "Top", show=False),
        Binding("end,G", "scroll_end", "Bottom", show=False),
    ]

    COMPONENT_CLASSES = {
        "preview--meta",
        "preview--user",
        "preview--assistant",
        "preview--tool",
        "preview--custom",
        "preview--summary",
        "preview--dim",
        "preview--call",
        "preview--error",
        "preview--json",
        "preview--more",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: list[Line] = []
        self._wrapped: list[tuple[str, str]] = []
        self._wrap_width = -1

    @property
    def lines(self) -> list[Line]:
        return self._lines

    def plain_text(self) -> str:
        return "\n".join(line.text for line in self._lines)

    def set_lines(self, lines: list[Line], *, keep_scroll: bool = False) -> None:
        self._lines = lines
        self._wrap_width = -1
        self._rewrap()
        if not keep_scroll:
            self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def _rewrap(self) -> None:
        width = max(self.scrollable_content_region.width, 10)
        if width == self._wrap_width:
            return
        self._wrap_width = width
        wrapped: list[tuple[str, str]] = []
        for line in self._lines:
            for chunk in wrap(line.text, width):
                wrapped.append((chunk, line.style))
        self._wrapped = wrapped
        self.virtual_size = Size(width, len(wrapped))

    def on_resize(self, event: events.Resize) -> None:
        self._rewrap()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        self._rewrap()
        row = y + int(self.scroll_offset.y)
        width = self.size.width
        base = self.rich_style
        if row >= len(self._wrapped):
            return Strip.blank(width, base)
        text, style_name = self._wrapped[row]
        style = base + self.get_component_rich_style(style_name, partial=True) if style_name else base
        return Strip([Segment(text, style)]).crop_extend(0, width, base)

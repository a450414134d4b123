"""The context preview: what the model would see if the leaf were at the highlighted entry.

A preview is planned as *parts* (a heading, a chunk of a message body, a tool call), and each part
is rendered to rows of Rich segments for one width, off the UI thread: Markdown through Rich's
renderer, code through Pygments (Rich `Syntax`), edits as a coloured diff. `PreviewView`, a
line-API widget, only draws the rows that are on screen. Long bodies are cut until expanded and
big ones are rendered in chunks, nearest to the selected entry first, so what is on screen shows
up in tens of milliseconds and an entry of megabytes costs no more than a bounded prefix.

Session text is made inert (`sessiontree.display.inert`) before it is rendered and again on the
segments that come out (Markdown decodes character references such as `&#x202e;`), and links and
click actions are stripped from every style: nothing in a session can become markup, a live link
or an escape sequence.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from io import StringIO
from typing import Any, ClassVar, NamedTuple

from markdown_it import MarkdownIt
from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import (  # type: ignore[import-untyped]
    find_lexer_class_by_name,
    find_lexer_class_for_filename,
)
from pygments.util import ClassNotFound  # type: ignore[import-untyped]
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markdown import CodeBlock, Heading, ListItem, Markdown
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from rich.theme import Theme
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..calls import EDIT_ARGS, call_args, call_path, diff_lines, edit_pairs
from ..context import (
    SessionContext,
    bash_execution_text,
    convert_to_llm,
    estimate_tokens,
    project,
    reports_usage,
)
from ..display import CUT_AT_LIMIT, counted, entry_summary, for_cells, inert, one_line, pretty_json
from ..model.entries import CompactionEntry, Entry, MessageEntry
from ..model.messages import (
    assistant_text,
    content_text,
    format_tool_call,
    json_compact,
    thinking_text,
    tool_calls,
)
from ..outline import Cycle
from ..query import Query
from .cells import shortened
from .direct_lines import DirectLines
from .scroll_bar import QuickScrollBars
from .scroll_size import set_virtual_size
from .styles import CachedStyles

BODY_LINES = 14  # a message body in the context, until expanded
BODY_CHARS = 4000
THINKING_LINES = 3
RESULT_LINES = 6  # tool results and command output
RAW_LINES = 400
RAW_LINE_CHARS = 2000
ENTRY_RICH_CHARS = 100_000  # "this entry" renders this much of a body; e shows the rest as text
EXPANDED_RICH_CHARS = 32_000  # per body when the whole context is expanded; the rest as text
# Bodies are rendered in chunks of characters: the first small (about half a screen, ~12 ms),
# then growing by half up to CHUNK, big enough to amortise and small enough to cancel promptly.
FIRST_CHUNK = 1200
CHUNK = 4000
TEXT_CHUNK = 64_000  # plain text past the rendered prefix, in parts of this size
GUTTER = 2  # columns left of every row: the bar that marks the selected entry
PROGRESS_SECONDS = 0.25  # while the rest renders, what is done is shown this often


class PreviewMode(Cycle):
    CONTEXT = "context"
    LLM = "as sent to the model"  # what Pi's convert_to_llm makes of the context
    RAW = "raw JSON"


class Scope(Cycle):
    CONTEXT = "up to here"
    ENTRY = "this entry"


@dataclass(frozen=True, slots=True)
class Detail:
    """How much of each body a preview shows."""

    name: str  # part of the render cache's keys
    cut: bool  # bodies are cut to a few lines, with a marker that `e` expands them
    rich_chars: int  # this much of a body is rendered (Markdown, code); the rest is plain text
    rest: bool  # the text past `rich_chars` is shown (else a marker says how much is left)
    entries: int = 0  # the newest context entries shown (the older ones are not decoded)
    # the search whose words the preview marks: a marker says when they are in what it hides
    find: Query | None = field(default=None, compare=False)


# Expanded, a context is rendered whole entry by entry: all of a deep session's 72,726 took
# three minutes and 1.6 GB that the app kept (QA); its newest thousand take a few seconds.
COLLAPSED = Detail("collapsed", True, BODY_CHARS, True, entries=400)
EXPANDED = Detail("expanded", False, EXPANDED_RICH_CHARS, True, entries=1000)
ENTRY = Detail("entry", False, ENTRY_RICH_CHARS, False)
ENTRY_ALL = Detail("entry-all", False, ENTRY_RICH_CHARS, True)


# One drawn line: ((text, style id), ...), the component class of PreviewView drawn under it,
# and whether it continues the row above (a wrapped line: `plain_text` joins them). Plain tuples
# of strings and ints, not Segments or Strips: the garbage collector stops tracking such tuples,
# and a preview holds tens of thousands of rows that its full passes (which hold the GIL, so
# keys wait) would otherwise walk every time.
Row = tuple[tuple[tuple[str, int], ...], str, bool]
BLANK: Row = ((), "", False)


class StyleTable:
    """Styles by small integer, for rows. Rendering produces few distinct styles."""

    def __init__(self) -> None:
        self._styles: list[Style | None] = [None]
        self._ids: dict[Style, int] = {}
        self._lock = threading.Lock()

    def id(self, style: Style | None) -> int:
        if style is None:
            return 0
        found = self._ids.get(style)
        if found is not None:
            return found
        with self._lock:
            found = self._ids.get(style)
            if found is None:
                found = self._ids[style] = len(self._styles)
                self._styles.append(style)
            return found

    def __getitem__(self, index: int) -> Style | None:
        return self._styles[index]


STYLES = StyleTable()


def row_text(row: Row) -> str:
    return "".join(text for text, _ in row[0])


def row_segments(row: Row) -> list[Segment]:
    return [Segment(text, STYLES[style]) for text, style in row[0]]


@dataclass(slots=True)
class Part:
    """A unit of rendering: `make` turns it into rows for a width. Parts with a `key` are cached
    (per width and code theme); `entry` is the entry the part shows, for marking and scrolling."""

    make: Callable[[Renderer], list[Row]]
    key: tuple[Any, ...] | None = None
    entry: str | None = None


@dataclass(slots=True)
class Plan:
    parts: list[Part]
    anchor: str | None = None  # the selected entry: its parts are marked and scrolled to


@dataclass(frozen=True, slots=True)
class Rendered:
    rows: list[Row]
    anchor: tuple[int, int] | None  # rows [start, end) of the selected entry
    complete: bool
    width: int = 0  # the width the rows were rendered for


# --- rendering --------------------------------------------------------------------------------

HEADING_STYLE = {
    "user": "preview--user",
    "assistant": "preview--assistant",
    "toolResult": "preview--tool",
    "bashExecution": "preview--tool",
    "custom": "preview--custom",
    "branchSummary": "preview--summary",
    "compactionSummary": "preview--summary",
}

# Rich's defaults, adjusted for a narrow pane on a themed background: no black behind inline
# code, headings told apart by weight rather than centring.
RICH_THEME = Theme(
    {
        "markdown.code": "bold cyan",
        "markdown.h1": "bold underline",
        "markdown.h2": "bold",
        "markdown.h3": "bold italic",
        "markdown.h4": "italic",
        "markdown.link_url": "blue",
    }
)

_local = threading.local()


def _as_written(url: str) -> str:
    return url


def _parser() -> MarkdownIt:
    """One parser per thread (a cancelled render may still be finishing in another). HTML is
    off: tags in session text are shown as written, not dropped. Link targets are kept as
    written rather than normalised (percent-encoded, punycode), since they are only shown."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
        parser.normalizeLink = _as_written  # type: ignore[method-assign]
        parser.normalizeLinkText = _as_written  # type: ignore[method-assign,assignment]
        _local.parser = parser
    return parser


@lru_cache(maxsize=256)
def _lexer_class(name: str = "", filename: str = "") -> type[Lexer] | None:
    """Looked up once per name: Pygments scans plugin entry points on every miss."""
    try:
        if filename:
            return find_lexer_class_for_filename(filename)
        return find_lexer_class_by_name(name) if name else None
    except (ClassNotFound, ValueError):
        return None


def lexer_for(*, name: str = "", path: str = "") -> Lexer | None:
    cls = (
        _lexer_class(name=name.strip().lower()[:40])
        if name
        else _lexer_class(filename=path.rsplit("/", 1)[-1])
    )
    return cls() if cls is not None else None


class _Heading(Heading):
    LEVEL_ALIGN: ClassVar = dict.fromkeys(("h1", "h2", "h3", "h4", "h5", "h6"), "left")


class _ListItem(ListItem):
    def render_number(
        self, console: Console, options: ConsoleOptions, number: int, last_number: int
    ) -> RenderResult:
        """`2. item`, as written, where Rich draws `2 item`."""
        width = len(str(last_number)) + 3
        lines = console.render_lines(
            self.elements, options.update(width=options.max_width - width), style=self.style
        )
        number_style = console.get_style("markdown.item.number", default="none")
        numeral = Segment(f"{number}.".rjust(width - 1) + " ", number_style)
        padding = Segment(" " * width, number_style)
        for k, line in enumerate(lines):
            yield numeral if k == 0 else padding
            yield from line
            yield Segment.line()


class _CodeBlock(CodeBlock):
    """Fenced code highlighted by Pygments, the lexer looked up once per name; no blank padding
    rows, so a fence split across chunks reads as one block."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        code = str(self.text).rstrip("\n")
        lexer = lexer_for(name=self.lexer_name) if self.lexer_name != "text" else None
        yield Syntax(code, lexer or "text", theme=self.theme, word_wrap=True, padding=(0, 1))


class _Markdown(Markdown):
    elements: ClassVar = {
        **Markdown.elements,
        "heading_open": _Heading,
        "fence": _CodeBlock,
        "code_block": _CodeBlock,
        "list_item_open": _ListItem,
    }

    def __init__(self, text: str, code_theme: str) -> None:
        # Links become "text (url)" (hyperlinks off); the parse is our own, see `_parser`.
        super().__init__("", code_theme=code_theme, hyperlinks=False)
        self.markup = text
        tokens = _parser().parse(text)
        for token in tokens:
            for child in token.children or ():
                if child.type == "softbreak":  # a newline in a message is a line break, as in chat
                    child.type = "hardbreak"
        self.parsed = tokens


def _clean(line: Iterable[Segment], width: int) -> tuple[tuple[str, int], ...]:
    """Rendered segments made safe: no control segments, no links or click actions, and text
    that decoding produced (character references) made inert again."""
    out: list[Segment] = []
    changed = False
    for text, style, control in line:
        if control:
            continue
        if "\t" in text:
            text = text.expandtabs(4)
        safe = for_cells(inert(text))
        if safe != text:
            changed = True
        if style is not None and style.link_id:
            style = style.clear_meta_and_links()
        out.append(Segment(safe, style))
    if changed and sum(cell_len(s.text) for s in out) > width:
        out = list(Strip(out).crop(0, width))
    return tuple((text, STYLES.id(style)) for text, style, _ in out)


class RenderCache:
    """Rendered parts by (key, width, theme), least recently used out first, bounded by rows.
    Moving the cursor one entry keeps almost the whole context, so most parts come from here."""

    def __init__(self, max_rows: int = 60_000) -> None:
        self._data: OrderedDict[tuple[Any, ...], list[Row]] = OrderedDict()
        self._rows = 0
        self._max = max_rows
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> list[Row] | None:
        with self._lock:
            rows = self._data.get(key)
            if rows is not None:
                self._data.move_to_end(key)
            return rows

    def put(self, key: tuple[Any, ...], rows: list[Row]) -> None:
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._rows -= len(old)
            self._data[key] = rows
            self._rows += len(rows)
            while self._rows > self._max and len(self._data) > 1:
                _, dropped = self._data.popitem(last=False)
                self._rows -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._rows = 0


class Renderer:
    """Turns parts into rows for one width (the pane's, less the gutter)."""

    def __init__(self, width: int, *, dark: bool = True, cache: RenderCache | None = None) -> None:
        self.width = max(width, 8)
        self.code_theme = "monokai" if dark else "default"
        self.cache = cache
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            self._console = Console(
                width=self.width,
                file=StringIO(),
                color_system="truecolor",
                force_terminal=True,
                legacy_windows=False,
                emoji=False,
                markup=False,
                highlight=False,
                theme=RICH_THEME,
            )
        return self._console

    def rows(self, part: Part) -> list[Row]:
        key = None if part.key is None else (*part.key, self.width, self.code_theme)
        if key is not None and self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                return cached
        try:
            rows = part.make(self)
        except Exception as exc:  # a renderer bug must cost one part, never the preview
            rows = self.plain(f"(this part could not be drawn: {type(exc).__name__})", "preview--error")
        if key is not None and self.cache is not None:
            self.cache.put(key, rows)
        return rows

    def plain(self, text: str, cls: str = "", indent: int = 0, hang: int = 0) -> list[Row]:
        """Text as written (already inert), wrapped by cells; `hang`: columns more for the rows
        a line wraps onto (a tool call's long path went on at the pane's edge, under its
        arrow)."""
        width = max(self.width - indent, 4)
        pad = ((" " * indent, 0),) if indent else ()
        out: list[Row] = []
        more = ((" " * (indent + hang), 0),) if indent + hang else ()
        for line in text.split("\n"):
            chunks = wrap(line, width)
            if hang and len(chunks) > 1:  # what follows the first row, wrapped narrower
                chunks = [chunks[0], *wrap(line[len(chunks[0]) :], max(width - hang, 4))]
            for k, chunk in enumerate(chunks):
                out.append(((*(more if k else pad), (chunk, 0)), cls, k > 0))
        return out

    def heading(self, title: str, cls: str) -> list[Row]:
        """A message's heading on one row: on a narrow pane the parts between its role and its
        token count go first, then the closing rule (wrapped, "── assistant ·" stood alone on
        a row at 80 columns)."""
        parts = title.split(" · ")
        # The parts between the role and the token count go first, from the right, then the
        # closing rule, then what the message is (an error, a cancelled command): at 80 columns
        # a failed tool result's heading lost "error" first (QA).
        middle = range(len(parts) - 2, 0, -1)
        flags = [k for k in middle if parts[k] in HEADING_FLAGS]
        order = [k for k in middle if parts[k] not in HEADING_FLAGS] + flags
        plain = len(order) - len(flags)

        def said(dropped: int, rule: bool) -> str:
            gone = order[:dropped]
            kept = " · ".join(p for k, p in enumerate(parts) if k not in gone)
            return f"── {kept} ──" if rule else f"── {kept}"

        tries = [said(d, True) for d in range(plain + 1)] + [
            said(d, False) for d in range(plain, len(order) + 1)
        ]
        text = next((t for t in tries if cell_len(t) <= self.width), None) or shortened(tries[-1], self.width)
        return [(((text, 0),), cls, False)]

    def rich(self, renderable: RenderableType, indent: int = 0) -> list[Row]:
        width = max(self.width - indent, 4)
        console = self.console
        lines = console.render_lines(renderable, console.options.update_width(width), pad=False)
        pad = ((" " * indent, 0),) if indent else ()
        return [((*pad, *_clean(line, width)), "", False) for line in lines]

    def markdown(self, text: str, indent: int = 0) -> list[Row]:
        try:
            return self.rich(_Markdown(text, self.code_theme), indent)
        except Exception:  # e.g. nesting deep enough to exhaust Rich: show it as written
            return self.plain(text, indent=indent)

    def code(self, text: str, lexer: Lexer | None, indent: int = 0) -> list[Row]:
        try:
            syntax = Syntax(text, lexer or "text", theme=self.code_theme, word_wrap=True, padding=(0, 1))
            return self.rich(syntax, indent)
        except Exception:
            return self.plain(text, indent=indent)


def render_plan(
    plan: Plan,
    renderer: Renderer,
    height: int,
    emit: Callable[[Rendered], None],
    cancelled: Callable[[], bool] = lambda: False,
) -> None:
    """Render the parts nearest the anchor first: the anchor and what follows it until a screen
    is full, then what precedes it until the screen is full (that is shown at once), then the
    rest, alternating downwards and upwards, shown every PROGRESS_SECONDS. The rendered parts
    are always one contiguous run, so each showing is a consistent piece of the preview."""
    parts = plan.parts
    n = len(parts)
    done: dict[int, list[Row]] = {}
    anchor = plan.anchor
    first = next((i for i, p in enumerate(parts) if anchor is not None and p.entry == anchor), 0)
    lo = hi = first

    def flatten(complete: bool) -> Rendered:
        rows: list[Row] = []
        start = end = -1
        for i in range(lo, hi):
            if anchor is not None and parts[i].entry == anchor:
                start = len(rows) if start < 0 else start
                rows += done[i]
                end = len(rows)
            else:
                rows += done[i]
        return Rendered(rows, (start, end) if 0 <= start < end else None, complete, renderer.width)

    def take(i: int) -> int:
        done[i] = renderer.rows(parts[i])
        return len(done[i])

    below = above = 0
    while hi < n and below < height:
        if cancelled():
            return
        below += take(hi)
        hi += 1
    while lo > 0 and above < height - below:
        if cancelled():
            return
        lo -= 1
        above += take(lo)
    if cancelled():
        return
    emit(flatten(lo == 0 and hi == n))
    if lo == 0 and hi == n:
        return
    last = time.monotonic()
    downwards = True
    while lo > 0 or hi < n:
        if cancelled():
            return
        if (downwards and hi < n) or lo == 0:
            take(hi)
            hi += 1
        else:
            lo -= 1
            take(lo)
        # No `time.sleep(0)` between parts to hand the UI thread the interpreter lock: the app
        # runs with a 1 ms switch interval (`tui/app.py`) and `cancelled` waits out a key being
        # handled, while each sleep(0) measured ~80 us (the kernel's timer slack): 1,700 parts
        # of a deep context slept 130 ms of the 140 ms their rendering took from the cache.
        downwards = not downwards
        if time.monotonic() - last > PROGRESS_SECONDS and (lo > 0 or hi < n):
            emit(flatten(False))
            last = time.monotonic()
    if not cancelled():
        emit(flatten(True))


# --- cutting and chunking ---------------------------------------------------------------------

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


def _long_lines(text: str, most: int) -> list[str]:
    """Lines, with any longer than `most` split into pieces (at a space when there is one)."""
    out: list[str] = []
    for line in text.split("\n"):
        while len(line) > most:
            cut = line.rfind(" ", most // 2, most)
            cut = cut + 1 if cut > 0 else most
            out.append(line[:cut])
            line = line[cut:]
        out.append(line)
    return out


def split_markdown(text: str, first: int = FIRST_CHUNK, most: int = CHUNK) -> list[tuple[str, bool]]:
    """Markdown in chunks that render alone as they would together: (chunk, gap) where gap says
    a blank line separated it from the chunk before. Chunks end at a blank line outside code
    fences followed by an unindented line (a new top-level block), about `first` characters
    for the first chunk and growing to `most`; where there is no such place for twice that, at a line
    end (an open fence is closed and reopened), and very long lines are split."""
    if len(text) <= first:
        return [(text, False)]
    chunks: list[tuple[str, bool]] = []
    lines = _long_lines(text, most)
    current: list[str] = []
    size = 0
    target = first
    gap = False
    fence: tuple[str, str] | None = None  # (marker, opening line)
    for k, line in enumerate(lines):
        match = _FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = (marker, line)
            elif marker[0] == fence[0][0] and len(marker) >= len(fence[0]) and not match.group(2).strip():
                fence = None
        current.append(line)
        size += len(line) + 1
        if size < target or k == len(lines) - 1:
            continue
        following = lines[k + 1]
        if fence is None and not line.strip() and following[:1] not in ("", " ", "\t"):
            chunks.append(("\n".join(current[:-1]), gap))
            current, size, target, gap = [], 0, min(most, target * 3 // 2), True
        elif size >= 2 * target:
            reopen = None
            if fence is not None:
                current.append(fence[0])
                reopen = fence[1]
            chunks.append(("\n".join(current), gap))
            current, size, target, gap = ([reopen] if reopen else []), 0, min(most, target * 3 // 2), False
    if current:
        chunks.append(("\n".join(current), gap))
    return chunks


def split_code(text: str, first: int = FIRST_CHUNK, most: int = CHUNK) -> list[str]:
    """Code in chunks of whole lines (long lines split): highlighting restarts at each chunk,
    which only matters for a construct that spans the cut."""
    if len(text) <= first:
        return [text]
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    target = first
    for line in _long_lines(text, most):
        current.append(line)
        size += len(line) + 1
        if size >= target:
            chunks.append("\n".join(current))
            current, size, target = [], 0, min(most, target * 3 // 2)
    if current:
        chunks.append("\n".join(current))
    return chunks


def _cut(text: str, max_lines: int) -> tuple[str, str | None]:
    """The first `max_lines` lines and BODY_CHARS characters, and the marker for the rest,
    which counts the lines and characters of the whole text left out (counted in the cut
    prefix alone, 50,000 lines read "787 more lines": QA)."""
    total = len(text)
    all_lines = text.count("\n") + (not text.endswith("\n"))  # a last newline ends a line
    lines = text[:BODY_CHARS].split("\n")
    if len(lines) > max_lines:
        lines = lines[:max_lines]
    shown = "\n".join(lines)
    if len(shown) == total or text[len(shown) :].isspace():
        # only a last newline or blanks left out: "… 1 more characters" promised nothing (QA)
        return shown, None
    hidden_lines = all_lines - len(lines)
    if hidden_lines:
        more = f"… {hidden_lines:,} more {'line' if hidden_lines == 1 else 'lines'}"
        if total > BODY_CHARS:  # a long text: how much of it is left out too
            more += f" ({total - len(shown):,} characters)"
    else:
        left = total - len(shown)
        more = f"… {left:,} more {'character' if left == 1 else 'characters'}"
    return shown, more + "  (e: expand · v: entry)"


def _drop_open_fence(text: str) -> str:
    """A cut that ends on the line opening a code fence would draw an empty code block."""
    head, _, last = text.rstrip("\n").rpartition("\n")
    if _FENCE.match(last) and sum(1 for line in head.split("\n") if _FENCE.match(line)) % 2 == 0:
        return head
    return text


def _at_line_end(text: str, limit: int) -> int:
    """Where to split `text` near `limit`: after a newline in the last quarter, else at `limit`."""
    if len(text) <= limit:
        return len(text)
    newline = text.rfind("\n", limit * 3 // 4, limit)
    return newline + 1 if newline >= 0 else limit


def _plain_maker(text: str, cls: str = "", indent: int = 0) -> Callable[[Renderer], list[Row]]:
    return lambda r: r.plain(text, cls, indent)


def _markdown_maker(text: str, gap: bool, indent: int) -> Callable[[Renderer], list[Row]]:
    return lambda r: ([BLANK] if gap else []) + r.markdown(text, indent)


def _code_maker(
    text: str, lexer: Callable[[], Lexer | None] | None, indent: int
) -> Callable[[Renderer], list[Row]]:
    return lambda r: r.code(text, lexer() if lexer else None, indent)


def _marker(text: str) -> Part:
    return Part(lambda r: r.plain(text, "preview--more"))


def body_parts(
    key: tuple[Any, ...] | None,
    text: str,
    detail: Detail,
    *,
    kind: str = "markdown",
    lexer: Callable[[], Lexer | None] | None = None,
    cls: str = "",
    max_lines: int = BODY_LINES,
    indent: int = 0,
) -> list[Part]:
    """A body as parts: `kind` "markdown", "code" (with `lexer`) or "plain" (drawn in `cls`).
    Cut to `max_lines` when the detail says so; rendered in chunks up to `detail.rich_chars`;
    the rest as plain text, or a marker when the detail leaves it out. Only what is shown is
    made inert and split here: planning runs for every message on every cursor rest."""
    marker = None
    whole = text
    if detail.cut:
        text, marker = _cut(text, max_lines)
        if marker and kind == "markdown":
            text = _drop_open_fence(text)
        if marker:
            marker = _with_match_note(marker, whole[len(text) :], detail.find)
    split = _at_line_end(text, detail.rich_chars)
    head, rest = text[:split], text[split:]
    head = for_cells(inert(head)).expandtabs(4)
    parts: list[Part] = []

    def keyed(*more: Any) -> tuple[Any, ...] | None:
        return None if key is None else (*key, detail.name, *more)

    def plain_parts(text: str, name: str) -> None:
        for k in range(0, len(text), TEXT_CHUNK):
            piece = text[k : k + TEXT_CHUNK]
            parts.append(Part(_plain_maker(piece, cls, indent), keyed(name, k)))

    if kind == "markdown":
        for k, (chunk, gap) in enumerate(split_markdown(head)):
            parts.append(Part(_markdown_maker(chunk, gap, indent), keyed("md", k)))
    elif kind == "code":
        for k, chunk in enumerate(split_code(head)):
            parts.append(Part(_code_maker(chunk, lexer, indent), keyed("code", k)))
    else:
        plain_parts(head, "text")
    if rest and detail.rest:
        rest = inert(rest).expandtabs(4)
        plain_parts(rest.lstrip("\n") if kind != "plain" and head.endswith("\n") else rest, "rest")
    elif rest:
        marker = _with_match_note(
            f"… {len(rest):,} more characters  (e: show them as plain text)", rest, detail.find
        )
    if marker:
        parts.append(_marker(marker))
    return parts


def _with_match_note(marker: str, hidden: str, find: Query | None) -> str:
    """`marker` ("… 4 more lines  (e: expand)") saying so when the search's words are in the
    `hidden` text: a find landed on an entry whose match was past the cut, out of sight in the
    row and in the preview alike (QA)."""
    if find is None or not find.spans(hidden[: BODY_CHARS * 20], limit=1, timeout=HIGHLIGHT_SECONDS):
        return marker
    count, _, keys = marker.partition("  (")
    return f"{count}, the match among them  ({keys}" if keys else f"{marker}, the match among them"


# --- messages ---------------------------------------------------------------------------------


def _blank() -> Part:
    return Part(lambda r: [BLANK])


def _line(text: str, cls: str = "", indent: int = 0, hang: int = 0) -> Part:
    return Part(lambda r: r.plain(text, cls, indent, hang))


HEADING_FLAGS = frozenset({"error", "cancelled", "not sent"})


def _heading(title: str, role: str) -> Part:
    return Part(lambda r: r.heading(for_cells(inert(title)), HEADING_STYLE.get(role, "preview--dim")))


CALL_HANG = 2  # a tool call's title wraps under its name, past the arrow ("→ ")
DIFF_CLASS = {" ": "preview--diff-context", "-": "preview--diff-removed", "+": "preview--diff-added"}


def _edit_part(
    title: str, key: tuple[Any, ...] | None, pairs: list[tuple[str, str]], detail: Detail
) -> list[Part]:
    """The call's title with the counts of removed and added lines, then the diff; compared in
    the part's rendering (cached), never while planning."""
    limit = detail.rich_chars
    trimmed = sum(max(len(old) - limit, 0) + max(len(new) - limit, 0) for old, new in pairs)
    bounded = [(old[:limit], new[:limit]) for old, new in pairs]

    def make(r: Renderer) -> list[Row]:
        rows: list[Row] = []
        removed = added = 0
        for k, (old, new) in enumerate(bounded):
            if k:
                rows += r.plain("⋯", "preview--diff-hunk", 2)
            for sign, line in diff_lines(inert(old).expandtabs(4), inert(new).expandtabs(4)):
                if sign == "⋯":
                    rows += r.plain("⋯", "preview--diff-hunk", 2)
                    continue
                removed += sign == "-"
                added += sign == "+"
                rows += r.plain(f"{sign} {line}", DIFF_CLASS[sign], 2)
        if detail.cut and len(rows) > BODY_LINES:
            hidden = len(rows) - BODY_LINES
            rows = rows[:BODY_LINES] + r.plain(
                f"… {hidden} more lines of the diff  (e: expand · v: entry)", "preview--more"
            )
        counts = f"  (−{removed} +{added})" if removed or added else "  (no change)"
        return r.plain(title + counts, "preview--call", hang=CALL_HANG) + rows

    parts = [Part(make, None if key is None else (*key, detail.name, "edit"))]
    if trimmed:
        parts.append(_marker(f"… {trimmed:,} more characters of the edit not compared"))
    return parts


def _field_rows(name: str, value: Any) -> Callable[[Renderer], list[Row]]:
    def make(r: Renderer) -> list[Row]:
        return r.rich(Text.assemble((f"{inert(name)}: ", "bold"), inert(value)), indent=2)

    return make


def call_parts(call: dict[str, Any], key: tuple[Any, ...] | None, detail: Detail) -> list[Part]:
    """A tool call as readable fields: edits as a diff, written files highlighted by their
    name, commands as shell, other arguments one per line (long ones as text blocks)."""
    name = inert(call["name"]) if isinstance(call.get("name"), str) else "?"
    raw = call.get("arguments")
    args = call_args(call)
    path = call_path(args) or ""
    title = f"→ {name}" + (f"  {one_line(path, 300)}" if path else "")
    shown = {"path", "file_path"} if path else set()
    parts: list[Part] = []

    def sub(*more: Any) -> tuple[Any, ...] | None:
        return None if key is None else (*key, *more)

    kind = name.lower()  # Pi's tools are lower case; other harnesses spell them Edit, Write, Bash
    pairs = edit_pairs(args) if kind in ("edit", "multiedit") else None
    if pairs is not None:
        parts += _edit_part(title, sub("diff"), pairs, detail)
        shown |= EDIT_ARGS
    elif kind == "write" and isinstance(args.get("content"), str):
        content = str(args["content"])
        count = content.count("\n") + (0 if content.endswith("\n") else 1)
        parts.append(_line(f"{title}  ({count:,} lines)", "preview--call", hang=CALL_HANG))
        lexer = (lambda: lexer_for(path=path)) if path else None
        parts += body_parts(sub("content"), content.rstrip("\n"), detail, kind="code", lexer=lexer, indent=2)
        shown.add("content")
    elif kind == "bash" and isinstance(args.get("command"), str):
        parts.append(_line(title, "preview--call", hang=CALL_HANG))
        command = str(args["command"])
        parts += body_parts(
            sub("command"), command, detail, kind="code", lexer=lambda: lexer_for(name="bash"), indent=2
        )
        shown.add("command")
    else:
        parts.append(_line(title, "preview--call", hang=CALL_HANG))
    if not isinstance(raw, dict):
        if raw is not None:
            parts += body_parts(
                sub("args"), json_compact(raw), detail, kind="plain", cls="preview--dim", indent=2
            )
        return parts
    for k, (field_name, value) in enumerate(args.items()):
        if field_name in shown:
            continue
        text = value if isinstance(value, str) else json_compact(value)
        if "\n" not in text and len(text) <= 300:
            parts.append(Part(_field_rows(str(field_name), text), sub("field", k)))
        else:
            if not isinstance(value, str):
                text = pretty_json(value)
            parts.append(_line(f"{inert(str(field_name))}:", "preview--field", 2))
            parts += body_parts(sub("field", k), text, detail, kind="plain", indent=4)
    return parts


def message_parts(
    msg: Any,
    key: tuple[Any, ...] | None,
    detail: Detail,
    calls: dict[str, dict[str, Any]] | None = None,
) -> list[Part]:
    """A message of the context: heading, then its body rendered for people."""
    if not isinstance(msg, dict):
        return [_line(inert(repr(msg)), "preview--dim")]
    known = calls or {}

    def sub(*more: Any) -> tuple[Any, ...] | None:
        return None if key is None else (*key, *more)

    role = str(msg.get("role", "?"))
    tokens = estimate_tokens(msg)
    if role == "assistant":
        model = msg.get("model")
        title = (
            f"assistant · {model} · ~{tokens:,} tok"
            if isinstance(model, str)
            else f"assistant · ~{tokens:,} tok"
        )
        sections: list[list[Part]] = []
        thought = thinking_text(msg)
        if thought:
            sections.append(
                body_parts(
                    sub("thinking"),
                    "thinking: " + thought,
                    detail,
                    kind="plain",
                    cls="preview--dim",
                    max_lines=THINKING_LINES,
                )
            )
        text = assistant_text(msg)
        if text:
            sections.append(body_parts(sub("text"), text, detail))
        for k, call in enumerate(tool_calls(msg)):
            sections.append(call_parts(call, sub("call", k), detail))
        if msg.get("stopReason") in ("error", "aborted"):
            error = msg.get("errorMessage")
            said = f": {error}" if isinstance(error, str) and error.strip() else ""  # not "(error: )"
            failure = inert(f"(stopped: {msg.get('stopReason')}{said})")
            sections.append([_line(failure, "preview--error")])
        elif msg.get("stopReason") == "length":  # it looked like a whole answer (QA)
            sections.append([_line(f"(stopped: length, {CUT_AT_LIMIT})", "preview--error")])
        parts = [_heading(title, role)]
        for k, section in enumerate(sections):  # thinking, text and each call, a blank line apart
            parts += ([_blank()] if k else []) + section
        return parts
    if role == "toolResult":
        name = msg.get("toolName", "tool")
        error = bool(msg.get("isError"))
        parts = [_heading(f"toolResult · {name}{' · error' if error else ''} · ~{tokens:,} tok", role)]
        text = content_text(msg.get("content"), image_type=True)
        source = known.get(str(msg.get("toolCallId")))
        path = call_path(call_args(source)) if source and str(name).lower() == "read" else None
        if path and not error:
            parts += body_parts(
                sub("result", path),  # drawn as the read file's code: not the same rows as text
                text,
                detail,
                kind="code",
                lexer=lambda: lexer_for(path=path),
                max_lines=RESULT_LINES,
            )
        else:
            cls = "preview--error" if error else ""
            parts += body_parts(sub("result"), text, detail, kind="plain", cls=cls, max_lines=RESULT_LINES)
        return parts
    if role == "bashExecution":
        said = " · cancelled" if msg.get("cancelled") else ""
        if msg.get("excludeFromContext"):  # in the context, but never sent (`convert_to_llm`)
            parts = [_heading(f"bashExecution{said} · not sent", role)]
        else:
            parts = [_heading(f"bashExecution{said} · ~{tokens:,} tok", role)]
        return parts + body_parts(sub("bash"), bash_execution_text(msg), detail, max_lines=RESULT_LINES)
    if role in ("branchSummary", "compactionSummary"):
        before = msg.get("tokensBefore")
        extra = f" · {before:,} tokens before" if isinstance(before, int) else ""
        parts = [_heading(f"{role}{extra} · ~{tokens:,} tok", role)]
        return parts + body_parts(sub("summary"), str(msg.get("summary", "")), detail)
    if role == "custom":
        parts = [_heading(f"custom · {msg.get('customType', '?')} · ~{tokens:,} tok", role)]
        return parts + body_parts(sub("content"), content_text(msg.get("content"), image_type=True), detail)
    parts = [_heading(f"{role} · ~{tokens:,} tok", role)]
    return parts + body_parts(sub("content"), content_text(msg.get("content"), image_type=True), detail)


def sent_parts(msg: Any, key: tuple[Any, ...] | None, detail: Detail) -> list[Part]:
    """A message exactly as `convert_to_llm` produces it (summary wrappers included), block by
    block, as plain text: this mode shows what is sent, not how it reads."""
    if not isinstance(msg, dict):
        return [_line(inert(repr(msg)), "preview--dim")]

    def sub(*more: Any) -> tuple[Any, ...] | None:
        return None if key is None else (*key, "sent", *more)

    parts = [_heading(f"{msg.get('role')} (as sent)", str(msg.get("role")))]
    content = msg.get("content")
    if isinstance(content, str):
        return parts + body_parts(sub(), content, detail, kind="plain")
    if not isinstance(content, list):
        return parts
    for k, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block, dict):
            parts += body_parts(sub(k), str(block.get("text", "")), detail, kind="plain")
        elif kind == "thinking" and isinstance(block, dict):
            text = "[thinking] " + str(block.get("thinking", ""))
            parts += body_parts(sub(k), text, detail, kind="plain", cls="preview--dim")
        elif kind == "toolCall" and isinstance(block, dict):
            text = "[toolCall] " + format_tool_call(block, max_args=100_000)
            parts += body_parts(sub(k), text, detail, kind="plain", cls="preview--call")
        elif kind == "image" and isinstance(block, dict):
            text = f"[image {block.get('mimeType', '?')}, {len(str(block.get('data', '')))} chars]"
            parts.append(_line(inert(text), "preview--dim"))
        else:
            parts += body_parts(sub(k), json_compact(block), detail, kind="plain", cls="preview--dim")
    return parts


# --- plans ------------------------------------------------------------------------------------


def _owners(context: SessionContext) -> list[str | None]:
    """The entry each context message comes from. Projecting entry by entry gives the counts;
    should a custom projector make that disagree, messages are matched by identity instead."""
    owners: list[str | None] = []
    for entry in context.entries:
        owners += [entry.id] * len(project([entry]))
    if len(owners) == len(context.messages):
        return owners
    ident = {id(e.message): e.id for e in context.entries if isinstance(e, MessageEntry)}
    return [ident.get(id(m)) for m in context.messages]


def tool_call_index(messages: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Tool calls by id, so a result can be drawn knowing its call (a read's file name)."""
    out: dict[str, dict[str, Any]] = {}
    for msg in messages:
        if isinstance(msg, dict) and msg.get("role") == "assistant":
            for call in tool_calls(msg):
                if isinstance(call.get("id"), str):
                    out[call["id"]] = call
    return out


def _context_header(context: SessionContext, at: str, is_leaf: bool, detail: Detail) -> list[Part]:
    tools = ", ".join(context.active_tool_names) if context.active_tool_names is not None else "(default)"
    model = str(context.model) if context.model else "(none)"
    # With older entries left out, the count is of every message, those not drawn included
    # ("363 messages" read as the context's size where `sessiontree context` said 914; "≥395"
    # was vaguer than the CLI's count, QA). The tokens of what is drawn are a lower bound, unless
    # an assistant among the newest reported its usage, which the estimate starts from, as Pi's.
    approx = "≥" if context.omitted and not reports_usage(context.messages) else "~"
    messages = counted(len(context.messages) + context.omitted_messages, "message")
    parts = [
        _line(
            f"{'the leaf is' if is_leaf else 'if the leaf were'} at {inert(at)}:"
            f" {messages} · {approx}{context.tokens:,} tokens",
            "preview--meta",
        ),
        _line(inert(f"model {model} · thinking {context.thinking_level} · tools {tools}"), "preview--meta"),
    ]
    if not context.messages:
        parts.append(_line("(the model would see no messages)", "preview--dim"))
    return parts


def _omitted_note(context: SessionContext, detail: Detail) -> Part:
    """Where older context entries were left out: after the compaction summary that heads the
    context when it is kept, before the newest entries (above the summary, it said the summary
    was among those left out: QA)."""
    more = (
        f"e shows the newest {EXPANDED.entries:,} whole"
        if detail.cut
        else "sessiontree context FILE or an export shows them all"
    )
    return _line(f"({context.omitted:,} older context entries not shown; {more})", "preview--more")


def plan_context(
    context: SessionContext, at: Entry, detail: Detail, *, as_sent: bool = False, is_leaf: bool = False
) -> Plan:
    """The context the model would see with the leaf at `at`, the messages of `at` marked;
    `is_leaf`: `at` is the leaf, so this is what the model sees now, said as such."""
    parts = _context_header(context, at.id, is_leaf, detail)
    owners = _owners(context)
    calls = tool_call_index(context.messages)
    seen: dict[str | None, int] = {}
    # the entries left out come after a compaction that heads the context, else first
    headed = bool(context.entries) and isinstance(context.entries[0], CompactionEntry)
    note_after = context.entries[0].id if context.omitted and headed else None
    if context.omitted and note_after is None:
        parts.append(_omitted_note(context, detail))
    for msg, owner in zip(context.messages, owners, strict=True):
        if note_after is not None and owner != note_after:
            parts += [_blank(), _omitted_note(context, detail)]
            note_after = None
        sub = seen[owner] = seen.get(owner, -1) + 1
        key = None if owner is None else (owner, sub)
        if as_sent:
            made = [p for m in convert_to_llm([msg]) for p in sent_parts(m, key, detail)]
        else:
            made = message_parts(msg, key, detail, calls)
        if not made:
            continue
        parts.append(_blank())
        for part in made:
            part.entry = owner
        parts += made
    if note_after is not None:  # only the summary was kept
        parts += [_blank(), _omitted_note(context, detail)]
    if at.id not in seen:
        summary = one_line(entry_summary(at), 300)
        parts.append(_blank())
        # What the entry records, then its parent by id: "its parent (label … = 'diagnosis')"
        # read as the parent's description, for a label whose parent was the entry it labels (QA)
        parent = inert(at.parent_id) if at.parent_id else "(none: the start)"
        text = (
            f"▸ {at.type} {inert(at.id)} ({summary}) adds no message; the context is as at its"
            f" parent, {parent}"
        )
        parts.append(Part(lambda r: r.plain(text, "preview--meta"), entry=at.id))
    return Plan(parts, at.id)


def plan_entry(
    entry: Entry,
    line_number: int | None,
    detail: Detail,
    *,
    as_sent: bool = False,
    calls: dict[str, dict[str, Any]] | None = None,
) -> Plan:
    """The selected entry alone, whole: its messages (as sent, in that mode), or for an entry
    that adds no message, what it records."""
    where = f" · line {line_number}" if line_number else ""
    parts = [_line(f"entry {inert(entry.id)} · {entry.type}{where}", "preview--meta")]
    messages = project([entry])
    for sub, msg in enumerate(messages):
        parts.append(_blank())
        if as_sent:
            parts += [p for m in convert_to_llm([msg]) for p in sent_parts(m, (entry.id, sub), detail)]
        else:
            parts += message_parts(msg, (entry.id, sub), detail, calls)
    if not messages:
        parts.append(_line(one_line(entry_summary(entry), 2000), "preview--dim"))
        parts.append(_blank())
        parts += body_parts(
            (entry.id, "json"), pretty_json(entry.to_dict()), detail, kind="plain", cls="preview--json"
        )
    return Plan(parts)


def plan_raw(entry: Entry, line_number: int | None, expanded: bool, version: int = 3) -> Plan:
    """The entry's JSON, pretty-printed, cut unless expanded. `version`: the file's format; an
    older one's entries are shown as read, converted to version 3, and said to be."""
    where = f" · line {line_number}" if line_number else ""
    header = f"{entry.type} {entry.id}{where} · parent {entry.parent_id or '(root)'}"
    lines = pretty_json(entry.to_dict()).split("\n")
    converted = []
    if version < 3:  # ids the file does not hold read as the line's own (QA)
        converted = [
            _line(
                f"(a version {version} file: the entry as converted to version 3 when read; the line on"
                " disk may hold no id or parentId, given the same at every read)",
                "preview--dim",
            ),
            _blank(),
        ]
    shown = lines if expanded else lines[:RAW_LINES]
    if not expanded:
        shown = [
            x[:RAW_LINE_CHARS] + f"… ({len(x) - RAW_LINE_CHARS:,} more characters)"
            if len(x) > RAW_LINE_CHARS
            else x
            for x in shown
        ]
    parts = [_line(inert(header), "preview--meta"), _blank(), *converted]
    for k in range(0, len(shown), 200):
        text = inert("\n".join(shown[k : k + 200]))
        parts.append(Part(_plain_maker(text, "preview--json")))
    if len(lines) > len(shown):
        parts.append(_marker(f"… {len(lines) - len(shown):,} more lines  (e: expand)"))
    return Plan(parts)


WARM_UP = """# Title

Some *text* with `code`, a [link](https://example.com) and a list:

- one
- two

| a | b |
| - | - |
| 1 | 2 |

```python
def f(x: int) -> str:
    return f"{x}"
```

```bash
ls -la
```
"""


def warm_up(*, dark: bool = True) -> None:
    """Render Markdown, Python, shell and JSON once, so the lexers are imported."""
    renderer = Renderer(60, dark=dark)
    renderer.markdown(WARM_UP)
    renderer.code('{"a": [1, 2]}', lexer_for(name="json"))
    renderer.code("x = 1", lexer_for(path="x.py"))


def render_all(plan: Plan, width: int, *, dark: bool = True) -> Rendered:
    """Every part of `plan` at `width`, at once (for tests and the command line)."""
    result: list[Rendered] = []
    render_plan(plan, Renderer(width, dark=dark), 10**9, result.append)
    return result[-1]


def plain_text(rows: Iterable[Row]) -> str:
    """Rows as text: wrapped continuations joined back to their line, trailing spaces dropped."""
    out: list[str] = []
    for row in rows:
        if row[2] and out:
            out[-1] += row_text(row)
        else:
            out.append(row_text(row))
    return "\n".join(line.rstrip() for line in out)


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


# --- the widget -------------------------------------------------------------------------------


class _LineLook(NamedTuple):
    row: Row | None  # None past the last row
    marked: bool  # a row of the selected entry: the bar in the gutter
    heading: bool  # its heading: a background

    def same(self, other: _LineLook) -> bool:
        return self.row is other.row and self.marked == other.marked and self.heading == other.heading


class PreviewView(ScrollView, CachedStyles, DirectLines, QuickScrollBars, can_focus=True):
    """Scrollable rendered rows; the rows of the selected entry carry a bar in the gutter and
    its heading a background. Where new rows leave the view depends on whether the reader has
    scrolled: untouched, the selected entry is placed in view each time rows arrive; scrolled,
    the rows keep their distance from it, so rows arriving above do not move what is read."""

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
        "preview--field",
        "preview--error",
        "preview--json",
        "preview--more",
        "preview--anchor",
        "preview--anchor-bar",
        "preview--diff-added",
        "preview--diff-removed",
        "preview--diff-context",
        "preview--diff-hunk",
        "preview--match",
    }

    ABOVE = 1  # rows left above the selected entry's heading when it is placed

    class WidthChanged(Message):
        """The width rows are rendered for changed: they need rendering again."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[Row] = []
        self._anchor: tuple[int, int] | None = None
        self._placed_y: int | None = None  # where rows were last placed
        self._reader_offset: int | None = None  # set once the reader scrolls: kept from then on
        self._placed_size = Size(0, 0)  # the view's size when rows were last placed
        self._width = -1
        self._drawing_here = False  # rows are being placed: `show_rows` says which lines changed
        self._highlight: Query | None = None  # the search whose words are marked in the rows

    @property
    def rows(self) -> list[Row]:
        return self._rows

    @property
    def anchor_rows(self) -> tuple[int, int] | None:
        """Rows [start, end) of the selected entry, when it is in the preview."""
        return self._anchor

    def plain_text(self) -> str:
        return plain_text(self._rows)

    @property
    def highlight(self) -> Query | None:
        return self._highlight

    @highlight.setter
    def highlight(self, query: Query | None) -> None:
        """Mark the words of `query` (the tree's last find) in the rows, as less marks them on
        the page: the tree shows which entries match, this shows where in their text."""
        if query is not None and query.is_empty:
            query = None
        if query is self._highlight:
            return
        self._highlight = query
        self.refresh()

    def render_width(self) -> int:
        """The width rows are rendered for: the content less the gutter, and less the scrollbar
        whether it shows or not (so that its coming and going never asks for a re-render)."""
        region = self.scrollable_content_region
        scrollbar = 0 if self.show_vertical_scrollbar else self.styles.scrollbar_size_vertical
        return max(region.width - scrollbar - GUTTER, 8)

    def show_rows(self, rendered: Rendered, *, fresh: bool) -> None:
        """Show rows; `fresh` (another entry, mode or scope) places the selected entry in view
        whatever the reader scrolled before."""
        height = max(self.scrollable_content_region.height, 1)
        y = int(self.scroll_offset.y)
        if fresh:
            self._reader_offset = None
        before = [self._line_look(y + k) for k in range(height)]
        self._rows = rendered.rows
        self._anchor = rendered.anchor
        self._width = rendered.width
        if rendered.width != self.render_width():  # rendered before a resize (or the first layout)
            self.post_message(self.WidthChanged())
        total = len(self._rows)
        scrolled = total
        if not rendered.complete and self.show_vertical_scrollbar:
            # More rows are coming: the scrollbar stays rather than go for a frame, as each time
            # it comes or goes the whole screen is laid out again.
            scrolled = max(total, height + 1)
        # Never wider than the view; the lines that changed are drawn again below. Fewer rows
        # than before make Textual clamp the offset: not the reader scrolling (`watch_scroll_y`
        # took it for one, and `e` then placed the entry 44 rows down, away from a match).
        self._placed_y = None
        set_virtual_size(self, Size(rendered.width + GUTTER, scrolled), redraw=False)
        if rendered.anchor is None:  # the entry alone (`v`): it is the whole view
            # rows only ever arrive below; a find's first match in sight as with the context (QA)
            new_y = self._at_a_match(rendered, 0, height) if fresh else y
        elif self._reader_offset is not None:
            new_y = rendered.anchor[0] - self._reader_offset
        else:
            new_y = self._at_a_match(rendered, rendered.anchor[0] - self.ABOVE, height)
        new_y = max(0, min(new_y, total - height))
        self._placed_y, self._placed_size = new_y, self.size
        self._drawing_here = True  # which lines to draw again is decided below, not on scrolling
        try:
            self.scroll_to(0, new_y, animate=False, immediate=True, force=True)
        finally:
            self._drawing_here = False
        # Rows arriving for the entry shown (its earlier context, above) leave the lines on
        # screen as they were, scrolled with them: drawing them again cost a frame of the
        # whole view (~3 ms at 160x50) on every cursor move.
        width = self.size.width
        new_y = int(self.scroll_offset.y)
        changed = [k for k, look in enumerate(before) if not look.same(self._line_look(new_y + k))]
        if changed:  # (`refresh()` with no region draws it all)
            self.refresh(*(Region(0, k, width, 1) for k in changed))

    def _at_a_match(self, rendered: Rendered, y: int, height: int) -> int:
        """`y`, the top of the selected entry (of every row: the entry alone), or, when the entry
        runs past the view with none of the search's words in sight from there, a little above
        the first row that has them: a find that landed on a 500-line result left the reader
        paging to its match (QA)."""
        query = self._highlight
        if query is None:
            return y
        start, end = rendered.anchor or (0, len(rendered.rows))
        if end - start <= height - self.ABOVE:
            return y
        rows = rendered.rows

        def marked(k: int) -> bool:
            return bool(query.spans(row_text(rows[k]), timeout=HIGHLIGHT_SECONDS))

        if any(marked(k) for k in range(max(y, start), min(y + height, end))):
            return y
        give_up = time.monotonic() + MATCH_SEEK_SECONDS  # this runs between two frames
        for k in range(start, min(end, start + MATCH_ROWS_SOUGHT)):
            if marked(k):
                return max(k - MATCH_ROWS_ABOVE, y)
            if k % 256 == 0 and time.monotonic() > give_up:
                break
        return y

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        # ScrollView tells the scrollbar only while it is shown; rows that just arrived are
        # scrolled before the layout shows it, which would leave its thumb at the top.
        self.vertical_scrollbar.position = new_value
        y = round(new_value)
        if (
            self._placed_y is not None
            and y != self._placed_y
            and self._anchor is not None
            # A resize moves the offset too (Textual clamps it to the new height): not a reader.
            and self.size == self._placed_size
        ):
            self._reader_offset = self._anchor[0] - y  # where the reader has the selected entry
            self._placed_y = y
        if round(old_value) != round(new_value) and not self._drawing_here:
            self.refresh(self.size.region)

    def _line_look(self, index: int) -> _LineLook:
        """What `render_line` draws for row `index`, but for the view's width and styles: two
        lines with the same look draw the same."""
        rows = self._rows
        if index >= len(rows):
            return _LineLook(None, False, False)
        anchor = self._anchor
        if anchor is None or not anchor[0] <= index < anchor[1]:
            return _LineLook(rows[index], False, False)
        return _LineLook(rows[index], True, self._in_heading(index, anchor[0]))

    def on_resize(self, event: events.Resize) -> None:
        if self._width >= 0 and self.render_width() != self._width:
            self.post_message(self.WidthChanged())
        self.refresh()

    def _in_heading(self, index: int, start: int) -> bool:
        """The selected entry's heading: its first row and the rows it wraps onto."""
        while index > start:
            if not self._rows[index][2]:
                return False
            index -= 1
        return index == start

    def render_line(self, y: int) -> Strip:
        index = y + int(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        base = self._style("")
        row, marked, heading = self._line_look(index)  # what `show_rows` compares
        if row is None:
            return Strip.blank(width, base)
        cls = row[1]
        style = base + self._style(cls) if cls else base
        if marked:
            bar = Segment("▌ ", base + self._style("preview--anchor-bar"))
            if heading:
                style += self._style("preview--anchor")
        else:
            bar = Segment(" " * GUTTER, base)
        body = row_segments(row)
        if self._highlight is not None:
            body = marked_segments(body, row_text(row), self._highlight, self._style("preview--match"))
        segments = [bar, *Segment.apply_style(body, style)]
        return Strip(segments).crop_extend(0, width, style)


HIGHLIGHT_SECONDS = 0.005  # a regular expression's time on one row before its words go unmarked
MATCH_ROWS_ABOVE = 3  # rows shown above a search's first match when the preview goes to it
MATCH_ROWS_SOUGHT = 20_000  # rows of the selected entry looked through for that match,
MATCH_SEEK_SECONDS = 0.03  # for this long at most


def marked_segments(segments: list[Segment], text: str, query: Query, mark: Style) -> list[Segment]:
    """`segments` (whose texts make `text`) with the spans of `query`'s words in `mark`. The
    spans are found in the row's text as drawn, so a phrase the rendering wrapped onto two rows
    is marked on neither; a regular expression that backtracks past `HIGHLIGHT_SECONDS` leaves
    the row as it was (the search itself would have said so)."""
    spans = query.spans(text, timeout=HIGHLIGHT_SECONDS)
    if not spans:
        return segments
    out: list[Segment] = []
    at = 0  # where the current segment starts in `text`
    k = 0  # the first span not yet wholly behind `at`
    for segment in segments:
        seg_text, seg_style = segment.text, segment.style
        end = at + len(seg_text)
        cut = at
        while k < len(spans) and spans[k][0] < end:
            start, stop = max(spans[k][0], cut), min(spans[k][1], end)
            if start > cut:
                out.append(Segment(seg_text[cut - at : start - at], seg_style))
            out.append(Segment(seg_text[start - at : stop - at], (seg_style or Style()) + mark))
            cut = stop
            if spans[k][1] > end:
                break  # the span goes on into the next segment
            k += 1
        if cut < end:
            out.append(Segment(seg_text[cut - at :], seg_style))
        at = end
    return out

"""Turning entries into safe, one-line text for people (the CLI and the browser share it).

Session files hold whatever a model or a tool printed: terminal escape sequences (colour, OSC 8
links, window-title changes), bidi overrides, zero-width characters. Shown raw they could
rewrite the terminal or disguise text, so everything displayed goes through `inert`, which makes
such characters visible instead of active.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .model.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
)
from .model.messages import (
    assistant_text,
    content_text,
    format_tool_call,
    json_compact,
    pretty_json,
    thinking_text,
    tool_calls,
)

__all__ = ["entry_glyph", "entry_kind", "entry_preview", "entry_summary", "inert", "one_line", "pretty_json"]

# C0 controls except \t \n, DEL, C1 controls; bidi embeddings/overrides/isolates and marks;
# zero-width and other invisible format characters.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb"
    "\ud800-\udfff]"  # lone surrogates: half an emoji, as Pi's truncation can leave it
)
_NAMES = {"\x1b": "␛", "\x7f": "␡", "\r": "␍", "\x00": "␀"}


# What a zero-width joiner may join and stay a joiner: pictographs, dingbats, the emoji
# variation selector and skin tones (👨‍👩‍👧, 🏳️‍🌈). Anywhere else it is an invisible character.
_EMOJI_SIDE = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\U0001f3fb-\U0001f3ff]")


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    if ch == "\u200d":
        text, at = match.string, match.start()
        if 0 < at < len(text) - 1 and _EMOJI_SIDE.match(text, at - 1) and _EMOJI_SIDE.match(text, at + 1):
            return ch
    if ch in _NAMES:
        return _NAMES[ch]
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # control pictures: ␁ ␂ …
    return f"⟨U+{code:04X}⟩"


def inert(text: str) -> str:
    """`text` with every control, bidi and invisible character replaced by a visible stand-in.
    Newlines and tabs are kept."""
    return _HIDDEN.sub(_visible, text) if _HIDDEN.search(text) else text


# What makes an emoji sequence of several characters: skin tones (👍🏽), the variation selectors
# (❤️ is ❤ and U+FE0F), the joiner (👨‍👩‍👧) and the keycap mark (#️⃣). Rich measures such a
# sequence as one emoji of two cells, as some terminals draw it; tmux, VTE and xterm draw its
# parts one by one (👍🏽 four cells, ❤️ one), so a tree row holding one ran over the preview's
# edge and a row of ❤️ fell short of it (QA). Without them, each part is measured as drawn.
_SEQUENCE_MARKS = re.compile("[\ufe0e\ufe0f\u200d\u20e3\U0001f3fb-\U0001f3ff]")


def for_cells(text: str) -> str:
    """`text` (inert) for a screen laid out by cells: emoji sequences as their parts, each as
    wide everywhere (`_SEQUENCE_MARKS`). The browser only: files and exports keep every mark."""
    return _SEQUENCE_MARKS.sub("", text)


def inert_name(text: str) -> str:
    """`inert`, newlines and tabs too: a name (a path) kept to one line of output, which a
    newline in a file's name split in two."""
    return inert(text).replace("\n", "␊").replace("\t", "␉")


def label_text(label: str) -> str:
    """A label as one row shows it: `inert`, its newlines and tabs as spaces (a label is any
    text: a newline in one split the row of the tree it marks in two)."""
    return inert(" ".join(label.split()))


# An assistant message whose `stopReason` is "length": Pi's providers set it when the answer
# reached the model's output limit, so its text is cut, though it reads as whole.
CUT_AT_LIMIT = "the answer reached the model's output token limit"


def counted(count: int, one: str, many: str | None = None) -> str:
    """`count` and its noun, singular for one: `counted(1, "entry", "entries")` is "1 entry";
    `many` defaults to `one` + "s"."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def one_line(text: str, limit: int = 200) -> str:
    """Inert, whitespace-collapsed, at most `limit` characters (…). A carriage return is
    whitespace here (a name written with CR LF showed `␍`, QA): on one line it moves nothing."""
    # a cut inside an emoji sequence leaves no joiner at its end (drawn as ⟨U+200D⟩, QA)
    head = text[: limit * 4].rstrip("\u200d") if len(text) > limit * 4 else text
    flat = " ".join(inert(head.replace("\r", " ")).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip("\u200d") + "…"


GLYPHS = {
    "user": "›",
    "assistant": "‹",
    "toolResult": "↳",
    "bashExecution": "$",
    "custom": "◆",
    "compaction": "▤",
    "branch_summary": "↩",
    "custom_message": "◆",
    "label": "⚑",
    "session_info": "✎",
    "leaf": "⇢",
    "thinking_level_change": "◐",
    "model_change": "◎",
    "active_tools_change": "≡",
    "custom_entry": "◇",
    "unknown": "?",
}


def entry_kind(entry: Entry) -> str:
    """A display category: the message role for messages, else the entry type."""
    if isinstance(entry, MessageEntry):
        return entry.role if entry.role in GLYPHS else "unknown"
    if isinstance(entry, CustomEntry):
        return "custom_entry"
    return entry.type if entry.type in GLYPHS else "unknown"


def entry_glyph(entry: Entry) -> str:
    return GLYPHS[entry_kind(entry)]


def entry_summary(entry: Entry) -> str:
    """The most telling text of an entry, not yet shortened or made inert."""
    if isinstance(entry, MessageEntry):
        return message_summary(entry.message)
    return _other_summary(entry)


def message_summary(msg: dict[str, Any]) -> str:
    """The most telling text of a message (an entry's, or one of a context), not yet
    shortened or made inert: an aborted answer says so where its text is empty."""
    role = msg.get("role")
    if role == "assistant":
        text = assistant_text(msg)
        calls = [format_tool_call(c) for c in tool_calls(msg)]
        if calls:
            text = (text + "  " if text.strip() else "") + " ".join(calls)
        if not text.strip():
            thought = thinking_text(msg)
            text = f"(thinking) {thought}" if thought else ""
        if not text.strip() and isinstance(msg.get("errorMessage"), str):
            text = f"(error) {msg['errorMessage']}"
        if not text.strip() and msg.get("stopReason") in ("aborted", "error", "length"):
            text = f"({msg['stopReason']})"  # as Pi's /tree says it; "(empty)" said less (helper)
        return text
    if role == "toolResult":
        name = msg.get("toolName") if isinstance(msg.get("toolName"), str) else "tool"
        flag = " ✗" if msg.get("isError") else ""
        return f"{name}{flag}: {content_text(msg.get('content'))}"
    if role == "bashExecution":  # as `context.bash_execution_text` words the end for the model
        # What is unusual first: a long command is cut from its end, and took the word with it.
        flags = "[not sent] " if msg.get("excludeFromContext") else ""
        code = msg.get("exitCode")
        if msg.get("cancelled"):  # it read "→ exit None" (QA)
            return f"{flags}[cancelled] {msg.get('command', '')}"
        if code is None:
            return f"{flags}[no exit code] {msg.get('command', '')}"
        return f"{flags}{msg.get('command', '')}  → exit {code}"
    if role in ("branchSummary", "compactionSummary"):
        return str(msg.get("summary", ""))
    return content_text(msg.get("content"))


def _other_summary(entry: Entry) -> str:
    if isinstance(entry, CompactionEntry):
        return f"compaction ({entry.tokens_before} tokens before): {entry.summary}"
    if isinstance(entry, BranchSummaryEntry):
        return f"branch summary: {entry.summary}" if entry.summary else "branch summary (empty)"
    # `type: text`, not `[type] text`: brackets around a bare word are how a label is drawn,
    # and off the active path, dimmed, the two looked the same (QA)
    if isinstance(entry, CustomMessageEntry):
        return f"{entry.custom_type}: {content_text(entry.content)}"
    if isinstance(entry, CustomEntry):
        data = entry.data
        return entry.custom_type + (f": {json_compact(data)}" if data is not None else "")
    if isinstance(entry, LabelEntry):
        return (
            f"label {entry.target_id} = {entry.label!r}" if entry.label else f"clear label {entry.target_id}"
        )
    if isinstance(entry, SessionInfoEntry):
        return f"session name: {entry.name or '(cleared)'}"
    if isinstance(entry, LeafEntry):
        return f"moved to {entry.target_id or 'the start'}"
    if isinstance(entry, ThinkingLevelChangeEntry):
        return f"thinking: {entry.thinking_level}"
    if isinstance(entry, ModelChangeEntry):
        return f"model: {entry.provider}/{entry.model_id}"
    if isinstance(entry, ActiveToolsChangeEntry):
        return "tools: " + ", ".join(entry.active_tool_names)
    payload = {k: v for k, v in entry.to_dict().items() if k not in ("type", "id", "parentId", "timestamp")}
    return f"({entry.type}) {json_compact(payload)}"


# Past Pi's /tree, which cuts a command at 50 characters and a path from the right: rows of
# `[bash: cd /Users/me/work/project && npm run c…]` or of one long directory all read the
# same. A leading `cd DIR &&` goes (the agent's usual preamble), the command keeps up to
# BASH_CHARS (the row is cut to the window anyway), and a long path keeps its end.
BASH_CHARS = 120
PATH_CHARS = 60
_CD_PREFIX = re.compile(r"^cd\s+(?:\"[^\"]*\"|'[^']*'|\S+)\s*(?:&&|;)\s*(?=\S)")


def _path_tail(text: str) -> str:
    """`…/src/core/agent-session.ts` for a path longer than PATH_CHARS: the file name and as
    many of its directories as fit."""
    if len(text) <= PATH_CHARS:
        return text
    tail = text[-(PATH_CHARS - 1) :]
    cut = tail.find("/")
    return "…" + (tail[cut:] if 0 <= cut < len(tail) - 1 else tail)


def call_label(call: dict[str, Any], *, is_error: bool = False) -> str:
    """A tool call as Pi's /tree draws the row of its result: `[read: src/x.py:10-29]`,
    `[bash: git status]`, `[edit: path]`, `[name: {args…}]` for other tools (after
    `formatToolCall` in pi-coding-agent's `modes/interactive/components/tree-selector.js`),
    with commands and paths shortened where they differ (see BASH_CHARS)."""
    name = call.get("name") if isinstance(call.get("name"), str) else "tool"
    raw = call.get("arguments")
    args: dict[str, Any] = raw if isinstance(raw, dict) else {}

    def path(*keys: str, default: str = "") -> str:
        value = next((args[k] for k in keys if args.get(k)), default)
        text = str(value)
        home = os.path.expanduser("~")
        if home not in ("", "~") and text.startswith(home):
            text = "~" + text[len(home) :]
        return _path_tail(text)

    if name == "read":
        shown = path("path", "file_path")
        offset, limit = args.get("offset"), args.get("limit")
        if isinstance(offset, int) or isinstance(limit, int):
            start = offset if isinstance(offset, int) else 1
            end = f"-{start + limit - 1}" if isinstance(limit, int) else ""
            shown += f":{start}{end}"
        label = f"read: {shown}"
    elif name in ("write", "edit"):
        label = f"{name}: {path('path', 'file_path')}"
    elif name == "bash":
        command = str(args.get("command", ""))
        flat = _CD_PREFIX.sub("", " ".join(command.split()), count=1)
        label = f"bash: {flat[:BASH_CHARS]}{'…' if len(flat) > BASH_CHARS else ''}"
    elif name == "grep":
        label = f"grep: /{args.get('pattern', '')}/ in {path('path', default='.')}"
    elif name == "find":
        label = f"find: {args.get('pattern', '')} in {path('path', default='.')}"
    elif name == "ls":
        label = f"ls: {path('path', default='.')}"
    else:
        compact = json_compact(raw if raw is not None else {})
        label = f"{name}: {compact[:40]}{'…' if len(compact) > 40 else ''}"
    return one_line(f"[{label}]" + (" ✗" if is_error else ""), 400)


def entry_preview(entry: Entry, limit: int = 200) -> str:
    """Glyph-less one-line preview, inert. A message without text says "(empty)": a bare `›`
    row looked like a drawing fault (QA)."""
    said = one_line(entry_summary(entry), limit)
    return said if said or not isinstance(entry, MessageEntry) else "(empty)"


def short_time(iso: str) -> str:
    """`2025-01-01T10:00:00.000Z` → `2025-01-01 10:00`."""
    return iso[:16].replace("T", " ") if len(iso) >= 16 else iso

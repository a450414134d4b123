"""The path root → ID as a Markdown document for people.

Every entry on the path appears in order: messages with their role, text, tool calls and
results; summaries and compactions; labels next to the entries they mark; settings changes as
one-line notes; at the end the state the model is in at ID (model, thinking level, tools, the
context size). Entries before a compaction's kept range are marked, since the model then sees
them only through the summary.

Session text is untrusted and must not take the document apart:
- code and tool output go in fences longer than any backtick run inside them;
- prose keeps its own Markdown, but a fence it opens and never closes is closed at the end of
  its message, and anything that looks like an HTML tag or a character reference is escaped;
- one-line fields (labels, names, models, tool names) are flattened to one line, with every
  character Markdown or HTML would act on escaped; ids are code spans;
- all of it is made inert (terminal escapes, bidi controls and invisible characters shown as
  visible stand-ins), so the file is safe to `cat`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..calls import EDIT_ARGS, call_args, call_path, diff_lines, edit_pairs
from ..context import SessionContext, bash_outcome
from ..display import CUT_AT_LIMIT, counted, inert, one_line
from ..model.entries import (
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
from ..model.messages import content_text, pretty_json
from ..session import Session
from .common import PathExport, collect_path, source_name

DEFAULT_MAX_RESULT = 4000  # characters of a tool result (or tool-call arguments) shown in full

_BACKTICKS = re.compile(r"`+")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TAG_LIKE = re.compile(r"<(?=[A-Za-z/!?])")
_REFERENCE_LIKE = re.compile(r"&(?=#?[0-9A-Za-z]+;)")  # `&amp;` in a message is shown as typed
_ACTIVE = re.compile(r"[\\`*_\[\]<>&|~#]")  # what a one-line field escapes
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")


def fence(text: str, info: str = "") -> str:
    """`text` as a fenced code block that nothing inside it can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    marks = "`" * max(3, longest + 1)
    body = inert(text)
    return f"{marks}{info}\n{body}{'' if body.endswith(chr(10)) else chr(10)}{marks}"


def code(text: str) -> str:
    """`text` as an inline code span (one line), however many backticks it holds."""
    flat = one_line(text, 300)
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    marks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{marks}{pad}{flat}{pad}{marks}"


def field(text: str, limit: int = 200) -> str:
    """A one-line field of session text (a title, label, model or tool name) as text that
    means nothing to Markdown or HTML: a CommonMark backslash before each character that
    could start markup (a tag, an entity, emphasis, a link)."""
    return _ACTIVE.sub(lambda m: "\\" + m.group(), one_line(text, limit))


def prose(text: str) -> str:
    """Message text kept as Markdown, made harmless to the document around it."""
    out: list[str] = []
    open_fence: str | None = None
    for line in inert(text).split("\n"):
        m = _FENCE_LINE.match(line)
        if open_fence is None:
            if m:
                open_fence = m.group(1)
            else:
                line = _escape_tags(line)
        elif (
            m
            and m.group(1)[0] == open_fence[0]
            and len(m.group(1)) >= len(open_fence)
            and not line.strip().strip(open_fence[0])  # a closing fence has nothing after it
        ):
            open_fence = None
        out.append(line)
    if open_fence is not None:
        out.append(open_fence)  # close what the message left open, or it swallows the rest
    return "\n".join(out).strip("\n")


def _escape_tags(line: str) -> str:
    """Escape tag-like `<` and reference-like `&` outside inline code spans (inside them both
    are shown literally)."""
    out, last = [], 0
    for m in _CODE_SPAN.finditer(line):
        out += [_inert_html(line[last : m.start()]), m.group()]
        last = m.end()
    out.append(_inert_html(line[last:]))
    return "".join(out)


def _inert_html(text: str) -> str:
    return _TAG_LIKE.sub("&lt;", _REFERENCE_LIKE.sub("&amp;", text))


def quote(text: str) -> str:
    """`text` as a blockquote (every line prefixed, so fences inside stay inside)."""
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def cut(text: str, limit: int | None) -> tuple[str, str]:
    """(`text` cut to `limit` characters, a note saying how much was left out or "")."""
    if limit is None or limit <= 0 or len(text) <= limit:
        return text, ""
    return text[:limit], f"*… {len(text) - limit:,} more characters not shown ({len(text):,} in all)*"


def _role_title(message: dict[str, Any]) -> str:
    role = message.get("role")
    if role == "user":
        return "User"
    if role == "assistant":
        provider, model = message.get("provider"), message.get("model")
        who = f"{provider}/{model}" if isinstance(provider, str) and isinstance(model, str) else ""
        return "Assistant" + (f" ({field(who, 80)})" if who else "")
    if role == "toolResult":
        name = message.get("toolName")
        failed = " — error" if message.get("isError") else ""
        return f"Tool result: {field(name, 80) if isinstance(name, str) else '?'}{failed}"
    if role == "bashExecution":
        return "Shell command (user)"
    if role == "custom":
        kind = message.get("customType")
        return f"Custom message: {field(kind, 80) if isinstance(kind, str) else '?'}"
    return f"Message ({field(str(role), 40)})"


def _images(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    return [
        f"*[image{': ' + field(b['mimeType'], 40) if isinstance(b.get('mimeType'), str) else ''}]*"
        for b in content
        if isinstance(b, dict) and b.get("type") == "image"
    ]


def _call_block(block: dict[str, Any], limit: int | None) -> str:
    """A tool call as the app draws it: an edit as a `diff` block, a written file in its
    language, a command as `bash`, the other arguments as JSON (an edit's lines as one JSON
    string of `\\n` escapes read badly)."""
    name = block["name"] if isinstance(block.get("name"), str) else "?"
    call_id = block.get("id")
    args = call_args(block)
    path = call_path(args)
    head = (
        f"**Tool call** {code(name)}"
        + (f" {code(path)}" if path else "")
        + (f" ({code(call_id)})" if isinstance(call_id, str) else "")
    )
    shown = {"path", "file_path"} if path else set()
    parts: list[tuple[str, str]] = []  # (text, the fence's language)
    kind = name.lower()  # Pi's tools are lower case; other harnesses spell them Edit, Write, Bash
    pairs = edit_pairs(args) if kind in ("edit", "multiedit") else None
    if pairs is not None:
        lines: list[str] = []
        for k, (old, new) in enumerate(pairs):
            lines += ["@@"] if k else []
            lines += ["@@" if sign == "⋯" else sign + line for sign, line in diff_lines(old, new)]
        parts.append(("\n".join(lines), "diff"))
        shown |= EDIT_ARGS
    elif kind == "write" and isinstance(args.get("content"), str):
        parts.append((str(args["content"]), _language(path)))
        shown.add("content")
    elif kind == "bash" and isinstance(args.get("command"), str):
        parts.append((str(args["command"]), "bash"))
        shown.add("command")
    raw = block.get("arguments")
    rest = {k: v for k, v in args.items() if k not in shown} if isinstance(raw, dict) else raw
    if rest or not (parts or path):  # a call without arguments still shows its `{}`
        parts.append((pretty_json(rest), "json"))
    out = [head, ""] if parts else [head]
    for text, info in parts:
        text, note = cut(text, limit)
        out += [fence(text, info)] + ([note] if note else [])
    return "\n".join(out)


def _language(path: str | None) -> str:
    """The fence's language for a file of this name, as Pygments (which GitHub's renderer
    follows) names it; "" when unknown."""
    if not path:
        return ""
    from pygments.lexers import find_lexer_class_for_filename  # type: ignore[import-untyped]
    from pygments.util import ClassNotFound  # type: ignore[import-untyped]

    try:
        lexer = find_lexer_class_for_filename(path)
    except ClassNotFound:
        return ""
    return lexer.aliases[0] if lexer is not None and lexer.aliases else ""


def _message_body(message: dict[str, Any], limit: int | None) -> list[str]:
    role = message.get("role")
    blocks: list[str] = []
    if role == "assistant":
        content = message.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in items if isinstance(items, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                blocks.append(prose(block["text"]))
            elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
                blocks.append(quote("**Thinking**\n\n" + prose(block["thinking"])))
            elif kind == "toolCall":
                blocks.append(_call_block(block, limit))
        stop = message.get("stopReason")
        if stop in ("error", "aborted"):
            error = message.get("errorMessage")
            blocks.append(
                f"*Stopped ({stop})" + (f": {field(error, 300)}*" if isinstance(error, str) else "*")
            )
        elif stop == "length":
            blocks.append(f"*Stopped (length): {CUT_AT_LIMIT}*")
    elif role == "toolResult":
        text, note = cut(content_text(message.get("content"), image_placeholder=""), limit)
        if text.strip():
            blocks.append(fence(text))
        blocks.extend(_images(message.get("content")))
        if note:
            blocks.append(note)
    elif role == "bashExecution":
        # What the model is sent (`bash_execution_text`), with the output in a fence of its own
        # length: in the text's three-backtick fence, output holding ``` closed it early and
        # its lines read as the document's own Markdown (QA).
        output = message.get("output")
        text, note = cut(output if isinstance(output, str) else "", limit)
        blocks.append(f"Ran {code(str(message.get('command', '')))}")
        blocks.append(fence(text) if text else "*(no output)*")
        if note:
            blocks.append(note)
        outcome = bash_outcome(message)
        if outcome.cancelled:
            blocks.append("*(command cancelled)*")
        elif outcome.failed_with is not None:
            blocks.append(f"*Command exited with code {field(str(outcome.failed_with), 20)}*")
        if outcome.full_output:
            blocks.append(f"*Output truncated; the whole of it: {code(str(outcome.full_output))}*")
        if message.get("excludeFromContext"):
            blocks.append("*Not sent to the model (run with `!!`)*")
    else:
        text = content_text(message.get("content"), image_placeholder="")
        if text.strip():
            blocks.append(prose(text))
        blocks.extend(_images(message.get("content")))
    return blocks


def _note(text: str) -> str:
    return f"*{text}*"


def _entry_section(
    entry: Entry, labels: dict[str, str], in_context: set[str], limit: int | None
) -> list[str] | None:
    """Markdown blocks for one entry of the path; None for entries that add nothing a reader
    needs (label entries: their label is shown on the entry they mark)."""
    meta = [code(entry.id), field(entry.timestamp[:19].replace("T", " "), 40)]
    label = labels.get(entry.id)
    if label:
        meta.append(f"label **{field(label, 80)}**")
    if entry.id not in in_context and isinstance(
        entry, (MessageEntry, CustomMessageEntry, BranchSummaryEntry)
    ):
        meta.append("*compacted: the model sees it only through the summary*")
    meta_line = " · ".join(meta)

    if isinstance(entry, MessageEntry):
        message = entry.message
        return [f"### {_role_title(message)}", meta_line, *_message_body(message, limit)]
    if isinstance(entry, CustomMessageEntry):
        title = f"### Custom message: {field(entry.custom_type, 80)}"
        if not entry.display:
            title += " (hidden from the user)"
        return [title, meta_line, *_message_body({"role": "custom", "content": entry.content}, limit)]
    if isinstance(entry, CompactionEntry):
        kept = entry.first_kept_entry_id
        where = f"; kept from {code(kept)}" if kept else ""
        if entry.id not in in_context:  # an older one among a newer one's kept entries (QA)
            where += " · *not sent: a newer compaction's summary replaces it*"
        return [
            "### Compaction",
            f"{meta_line} · {entry.tokens_before:,} tokens before{where}",
            quote(prose(entry.summary)),
        ]
    if isinstance(entry, BranchSummaryEntry):
        body = quote(prose(entry.summary)) if entry.summary else _note("(empty summary)")
        return ["### Branch summary", f"{meta_line} · from {code(entry.from_id)}", body]
    if isinstance(entry, LabelEntry):
        return None
    if isinstance(entry, ModelChangeEntry):
        return [_note(f"Model → {field(entry.provider, 60)}/{field(entry.model_id, 80)}") + f" ({meta_line})"]
    if isinstance(entry, ThinkingLevelChangeEntry):
        return [_note(f"Thinking level → {field(entry.thinking_level, 40)}") + f" ({meta_line})"]
    if isinstance(entry, ActiveToolsChangeEntry):
        names = ", ".join(field(n, 60) for n in entry.active_tool_names) or "(none)"
        return [_note(f"Active tools → {names}") + f" ({meta_line})"]
    if isinstance(entry, SessionInfoEntry):
        return [_note(f"Session name → {field(entry.name or '(cleared)', 120)}") + f" ({meta_line})"]
    if isinstance(entry, LeafEntry):
        return [_note(f"Leaf moved to {field(entry.target_id or 'the start', 80)}") + f" ({meta_line})"]
    if isinstance(entry, CustomEntry):
        return [_note(f"Extension state ({field(entry.custom_type, 80)})") + f" ({meta_line})"]
    return [_note(f"Entry of unknown type {field(entry.type, 60)}") + f" ({meta_line})"]


def _state_lines(context: SessionContext) -> list[str]:
    tools = (
        ", ".join(field(n, 60) for n in context.active_tool_names)
        if context.active_tool_names is not None
        else "(default)"
    )
    model = field(str(context.model), 120) if context.model else "(none)"
    return [
        "## State at the end",
        "",
        f"- Model: {model}",
        f"- Thinking level: {field(context.thinking_level, 40)}",
        f"- Active tools: {tools}",
        f"- Context: {counted(len(context.messages), 'message')}, ~{context.tokens:,} tokens",
    ]


def markdown_parts(
    session: Session, path: PathExport, *, max_result_chars: int | None = DEFAULT_MAX_RESULT
) -> Iterator[str]:
    """The Markdown document for a collected path (see `collect_path`) in parts, a section an
    entry: a writer encodes each as it comes. Joined into one string, the document of a 100k
    entry path (67 million characters, some beyond Latin-1: four bytes each) and the list of
    its lines took 0.6 GB."""
    title = session.session_name or f"Session {session.session_id}"
    header = session.header
    lines = [
        f"# {field(title, 200)}",
        "",
        f"- Session: {code(header.id)}" + (f" in {code(header.cwd)}" if header.cwd else ""),
        f"- Started: {field(header.timestamp, 40)}",
        f"- Source: {code(source_name(session) or session.location)}",
        f"- Path: root → {code(path.target_id) if path.target_id else '(empty)'},"
        f" {counted(len(path.entries), 'entry', 'entries')}",
    ]
    if path.note:
        lines.append(f"- Note: {field(path.note, 300)}")
    if path.cut_above is not None:
        lines.append(
            f"- **Incomplete:** the path is cut above the first entry; its parent {code(path.cut_above)}"
            + (" is missing from the source" if path.cut_why == "is missing" else f" {path.cut_why}")
        )
    if path.unreadable:
        lines.append(
            "- **Incomplete:** unreadable entries left out: " + ", ".join(code(i) for i in path.unreadable)
        )
    in_context: set[str] = set()
    context = None
    if path.target_id is not None and not path.unreadable and path.cut_above is None:
        context = session.build_context(at=path.target_id, root_path=path.entries)
        in_context = {e.id for e in context.entries}
    elif path.target_id is not None:
        in_context = {e.id for e in path.entries}  # a damaged path: say nothing about compaction
    labels = session.labels()
    yield "\n".join(lines)
    for entry in path.entries:
        section = _entry_section(entry, labels, in_context, max_result_chars)
        if section:
            yield "\n\n" + "\n\n".join(section)
    if context is not None:
        yield "\n\n---\n\n" + "\n".join(_state_lines(context))
    yield "\n"


def render_markdown(
    session: Session, path: PathExport, *, max_result_chars: int | None = DEFAULT_MAX_RESULT
) -> str:
    """`markdown_parts` as one string."""
    return "".join(markdown_parts(session, path, max_result_chars=max_result_chars))


def export_markdown(
    session: Session, at: str | None = None, *, max_result_chars: int | None = DEFAULT_MAX_RESULT
) -> tuple[str, PathExport]:
    """Markdown of root → `at` (default: the leaf), and what was collected."""
    path = collect_path(session, at)
    return render_markdown(session, path, max_result_chars=max_result_chars), path


def context_markdown(session: Session, at: str | None = None) -> str:
    """The Markdown of root → `at` alone (what the browser copies to the clipboard)."""
    return export_markdown(session, at)[0]

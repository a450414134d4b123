"""The whole session as one self-contained HTML page: the tree in a sidebar, the context of the
selected entry in the main pane.

The page needs nothing from the network (CSS and JavaScript are inline, and its content
security policy forbids any request). The session travels as JSON blocks: a small *index* (ids,
parents, types, roles, one-line previews, labels — enough to draw and filter the tree) before
the script, then the entries the opening entry's context is made of, then all other entries,
which a big session's page takes seconds to parse while its tree is already on screen. The page
computes contexts itself with the same rules as `Session.build_context` (compaction cut,
projection, derived state, Pi's token estimate), so any entry can be shown without a copy of
its context per entry: the file stays about the size of the session.

Safety: session text is untrusted. The JSON blocks are written with every `<` as `\\u003c` (so
no `</script>` or `<!--` can end or confuse them) and U+2028/2029 escaped; the page builds all
markup from escaped text and renders Markdown itself from escaped text; and the policy admits
only the page's own script (by its hash), so even markup that slipped through could not run.
Image data is left out (a placeholder says what was there): it would only make the file big.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import orjson

from ..context import estimate_tokens, usage_number
from ..display import entry_preview, one_line
from ..model.entries import CompactionEntry, CustomMessageEntry, Entry, MessageEntry
from ..model.errors import Diagnostic, SessionError
from ..model.ids import iso_now
from ..session import Session
from ..storage.index import ROLE_CODES, TOOL_ONLY, TYPE_CODES
from ..storage.scan import encode_line
from .common import TORN, resolve_target, source_name
from .files import Chunk
from .jsonl import inert_json

PREVIEW_CHARS = 160
READY_SCRIPT = "window.sessiontreePathReady && window.sessiontreePathReady();"


@dataclass(slots=True)
class HtmlExport:
    """What went into a page: the selected entry, and entries that could not be read."""

    target_id: str | None
    entry_count: int = 0
    unreadable: list[str] = field(default_factory=list)
    note: str | None = None


def script_json(value: Any) -> bytes:
    """`value` as JSON that is safe inside a `<script>` element (lone surrogates and integers
    past 64 bits, which Pi's files can hold, included)."""
    return _script_safe(encode_line(value))


def _script_safe(data: bytes) -> bytes:
    # `<` occurs in JSON only inside strings, where `\u003c` means the same character
    return inert_json(data).replace(b"<", b"\\u003c")


def _strip_images(content: Any) -> Any:
    """`content` with the base64 data of image blocks replaced by their size."""
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and b.get("type") == "image" for b in content
    ):
        return content
    out = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image":
            data = block.get("data")
            block = {k: v for k, v in block.items() if k != "data"}
            block["omittedBytes"] = len(data) * 3 // 4 if isinstance(data, str) else 0
        out.append(block)
    return out


def _message_without_images(message: Any) -> Any:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    stripped = _strip_images(message["content"])
    return message if stripped is message["content"] else {**message, "content": stripped}


def page_entry(entry: Entry) -> dict[str, Any]:
    """The entry as the page receives it (images left out)."""
    data = entry.to_dict()
    if isinstance(entry, MessageEntry):
        data["message"] = _message_without_images(entry.message)
    elif isinstance(entry, CustomMessageEntry):
        data["content"] = _strip_images(entry.content)
    elif isinstance(entry, CompactionEntry) and entry.retained_tail:
        data["retainedTail"] = [_message_without_images(m) for m in entry.retained_tail]
    return data


def _damage_line(d: Diagnostic) -> str:
    """A problem as the page says it: where and what, without the code kept for scripts
    (`[torn_tail]` read as noise) or what the app does to a torn line before its next write,
    which made no sense on a page (QA)."""
    text = d.said()
    if d.code == TORN:
        text = text.split(" It is left out", 1)[0] + " It is left out of this page."
    return text


def _hash(script: str) -> str:
    """The policy source that admits exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def _asset(name: str) -> str:
    return (resources.files(__package__) / name).read_text(encoding="utf-8")


def html_chunks(session: Session, at: str | None = None) -> tuple[list[Chunk], HtmlExport]:
    """The page for `session` as a list of byte chunks (a big session's page need not exist as
    one string); it opens at `at` (default: the leaf; the address `#ID` selects any other)."""
    target, note = resolve_target(session, at)
    tree = session.tree
    n = len(tree)
    tips, forks = tree.branch_counts()  # as `Session.stats` counts them
    result = HtmlExport(target, n, note=note)
    # The leaf's context, for its counts only: built before the page's parts, and dropped, so
    # its decoded entries are never held beside them.
    leaf_counts = _leaf_counts(session)
    # The entries the opening entry's context is made of (its compaction-bounded path and the
    # entries its model, thinking level and tools come from) travel first, in a block of their
    # own, so the page shows that context before it has parsed the rest (see viewer.js).
    on_path: list[int] = []
    if target is not None:
        t = session.position(target)
        on_path = sorted({*tree.bounded_path(t), *(k for k in tree.state_entries(t) if k >= 0)})
    sent_first = set(on_path)
    # Each entry's JSON goes straight into one of two growing buffers. Kept as 100,000 small
    # `bytes`, each pinned the memory freed around it while the next entries were decoded:
    # 130 MB of entries held ~600 MB (peak RSS at 100k entries 740-930 MB).
    path_entries = bytearray()
    entries = bytearray(b"[")
    previews: list[str] = []
    counts = _Counts()
    for i in range(n):
        data = b"null"
        try:
            entry = session.entry_at(i)
        except SessionError:
            result.unreadable.append(tree.ids[i])
            previews.append("(this line of the file could not be read)")
        else:
            previews.append(entry_preview(entry, PREVIEW_CHARS))
            counts.add(entry)
            try:
                data = _script_safe(encode_line(page_entry(entry)))
            except (TypeError, ValueError):
                result.unreadable.append(tree.ids[i])
        if i in sent_first:
            path_entries += data
            path_entries += b","
            data = b"0"  # already sent
        entries += data
        entries += b","
    if n:
        entries[-1:] = b"]"  # in place of the last comma
    else:
        entries += b"]"
    # chunks of the page, not joined: the buffers are not copied
    path_block: list[Chunk] = [
        b'{"positions":',
        orjson.dumps(on_path),
        b',"entries":[',
        memoryview(path_entries)[:-1],
        b"]}",
    ]
    leaf_tokens, leaf_messages = (
        leaf_counts if leaf_counts is not None and not result.unreadable else (None, None)
    )
    header = session.header
    title = one_line(session.session_name or f"Session {header.id}", 200)
    labels = session.labels()
    index = {
        "format": 1,
        "title": title,
        "header": {
            "id": header.id,
            "cwd": header.cwd,
            "timestamp": header.timestamp,
            "version": session.format_version,
            "parentSession": header.parent_session,
        },
        "source": source_name(session) or session.location,
        "exported": iso_now(),
        "typeCodes": TYPE_CODES,
        "roleCodes": ROLE_CODES,
        "ids": tree.ids,
        "parent": tree.parent.tolist(),
        "kind": list(tree.kind),
        "role": list(tree.role),
        "toolOnly": [i for i, f in enumerate(tree.flags) if f & TOOL_ONLY],  # few: a list, not a byte each
        "unknownTypes": {str(k): v for k, v in tree.unknown_types.items()},
        "compactions": {str(k): [v[0], v[1]] for k, v in tree.compactions.items()},
        "labels": labels,
        "preview": previews,
        "leaf": tree.leaf,
        "selected": session.position(target) if target is not None else -1,
        "unreadable": result.unreadable,
        "damage": [_damage_line(d) for d in session.diagnostics if d.severity != "info"][:50],
        "stats": {
            "entries": n,
            "messages": sum(counts.roles.values()),
            "roles": counts.roles,
            "types": counts.types,
            "forks": forks,
            "tips": tips,
            "labels": len(labels),
            "usageTokens": counts.usage_tokens,
            "cost": round(counts.cost, 6),
            "messageTokens": counts.message_tokens,
            "leafContextTokens": leaf_tokens,
            "leafContextMessages": leaf_messages,
        },
    }
    script = _asset("viewer.js")
    # split first: the title is session text and must not be taken for a marker
    pieces = re.split(r"@@(INDEX|SCRIPT|PATH|READY|ENTRIES)@@", _asset("viewer.html"))
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:;"
        f" script-src {_hash(script)} {_hash(READY_SCRIPT)}; base-uri 'none'; form-action 'none';"
        # the search's regular expressions run in a worker made from the page's own script
        # (a blob), which can be stopped when one backtracks without end
        " worker-src blob:"
    )
    head = pieces[0].replace("@@CSP@@", csp).replace("@@STYLE@@", _asset("viewer.css"))
    head = head.replace("@@TITLE@@", html.escape(title))
    parts: dict[str, list[Chunk]] = {
        "INDEX": [script_json(index)],
        # the script comes before the entries: the tree is drawn while the browser reads them
        "SCRIPT": [script.encode()],
        "PATH": path_block,
        "READY": [READY_SCRIPT.encode()],
        "ENTRIES": [entries],
    }
    page: list[Chunk] = [head.encode()]
    for k in range(1, len(pieces), 2):
        page += parts[pieces[k]]
        page.append(pieces[k + 1].encode())
    return page, result


def _leaf_counts(session: Session) -> tuple[int, int] | None:
    """(tokens, messages) of the leaf's context; None without a leaf or when a line of it
    cannot be read (the page then says nothing rather than a count of part of it)."""
    if session.leaf_id is None:
        return None
    try:
        context = session.build_context()
    except SessionError:
        return None
    return context.tokens, len(context.messages)


def render_html(session: Session, at: str | None = None) -> tuple[bytes, HtmlExport]:
    """The page as one `bytes` (see `html_chunks`)."""
    chunks, result = html_chunks(session, at)
    return b"".join(chunks), result


class _Counts:
    """Counts for the page's header, gathered in the one pass over the entries. Usage is summed
    as Pi's `getSessionStats` does: assistant messages, compactions and branch summaries whose
    usage has every numeric component."""

    def __init__(self) -> None:
        self.types: dict[str, int] = {}
        self.roles: dict[str, int] = {}
        self.usage_tokens = 0
        self.cost = 0.0
        self.message_tokens = 0

    def add(self, entry: Entry) -> None:
        self.types[entry.type] = self.types.get(entry.type, 0) + 1
        usage = None
        if isinstance(entry, MessageEntry):
            role = entry.role
            self.roles[role] = self.roles.get(role, 0) + 1
            self.message_tokens += estimate_tokens(entry.message)
            if role == "assistant":
                usage = entry.message.get("usage")
        elif entry.type in ("compaction", "branch_summary"):
            usage = entry.get("usage")
        if not isinstance(usage, dict):
            return
        parts = [usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")]
        cost = usage.get("cost")
        total = cost.get("total") if isinstance(cost, dict) else None
        if all(usage_number(v) for v in [*parts, total]):
            self.usage_tokens += int(sum(parts))  # type: ignore[arg-type]
            self.cost += float(total)  # type: ignore[arg-type]

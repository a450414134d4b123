"""Reading commands: `context`, `tree`, `check`. They open sessions read-only."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..context import bash_outcome, iter_llm
from ..display import CUT_AT_LIMIT, counted, entry_glyph, entry_preview, inert_name, label_text, short_time
from ..export.common import damage_line, require_readable_path, resolve_target
from ..model.errors import Diagnostic, SessionError
from ..model.messages import content_text, format_tool_call, message_text
from ..opening import Address, list_sessions, open_session, parse_address
from ..outline import Filter, Outline, render_plain
from .numbers import at_least
from .output import err, json_list_streamed, json_out_streamed, opened, out, warn_damage, working

COMMANDS = ("context", "tree", "check")


def register(sub: Any) -> None:
    p = sub.add_parser("context", help="print what the model sees at the leaf (or at --at ID)")
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    p.add_argument("--at", metavar="ID", help="as if the leaf were at this entry")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="AgentMessages and derived state as JSON")
    fmt.add_argument("--llm", action="store_true", help="the convert_to_llm form as JSON")
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("tree", help="print the whole tree")
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    p.add_argument(
        "--filter",
        dest="filter_value",
        metavar="FILTER",
        default="all",
        type=_filter,
        help=f"which entries to show: {', '.join(f.value for f in Filter)} (default: all, every entry)",
    )
    p.add_argument(
        "--width",
        type=at_least(40),
        default=100,
        help="characters of each entry's text shown on its line (40 or more)",
    )
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser(
        "check",
        help="report damage; exit status 1 if any",
        description="Report the damage of each session; a directory stands for every *.jsonl under"
        " it (as Pi keeps them: ~/.pi/agent/sessions). Exit status: 1 if any is damaged, 2 if any"
        " could not be read.",
    )
    p.add_argument(
        "file", nargs="+", metavar="FILE", help="session address: file.jsonl, db.sqlite#id or a directory"
    )
    p.set_defaults(func=cmd_check)


def cmd_context(args: argparse.Namespace) -> int:
    with opened(args.file) as session:
        # A `leaf` entry is refused (its context is that of where the leaf was before it).
        at = resolve_target(session, session.resolve_id(args.at))[0] if args.at is not None else None
        leaf = at or session.leaf_id
        require_readable_path(session, leaf, f"the context at {leaf}")
        damaged = warn_damage(session, damage_line(session, done="built the context from"))
        if args.llm or args.json:
            # Written as the entries are decoded: a context of a million messages is never all
            # in memory.
            stream = session.stream_context(at=at)
            if args.llm:
                json_list_streamed(iter_llm(stream))
            else:
                model = stream.model
                named = None if model is None else {"provider": model.provider, "modelId": model.model_id}
                json_out_streamed(
                    [
                        ("leafId", leaf),
                        ("thinkingLevel", stream.thinking_level),
                        ("model", named),
                        ("activeToolNames", stream.active_tool_names),
                    ],
                    "messages",
                    stream,
                    lambda: [("tokens", stream.tokens)],
                )
            return damaged
        with working(f"building the context at {leaf}"):
            context = session.build_context(at=at)
        tools = ", ".join(context.active_tool_names) if context.active_tool_names is not None else "(default)"
        out(
            f"leaf {leaf or '(none)'} · {counted(len(context.messages), 'message')}"
            f" · ~{context.tokens:,} tokens"
            f" · model {context.model or '(none)'} · thinking {context.thinking_level} · tools {tools}"
        )
        answered = None  # the model that answered last: named again only when it changes
        for msg in context.messages:
            heading, answered = _heading(msg, answered)
            out(f"\n── {heading} " + "─" * max(0, 60 - len(heading)))
            out(_message_body(msg))
        return damaged


def _heading(msg: dict[str, Any], answered: str | None) -> tuple[str, str | None]:
    """The role, and what a reader needs before the text: the model that answers (when another
    answered before it), which tool's result, a failure, a command the model is not sent; and
    the model that answered last."""
    role = str(msg.get("role", "?"))
    notes: list[str] = []
    if role == "assistant":
        provider, model = msg.get("provider"), msg.get("model")
        if isinstance(provider, str) and isinstance(model, str):
            if f"{provider}/{model}" != answered:
                notes.append(f"{provider}/{model}")
            answered = f"{provider}/{model}"
        if msg.get("stopReason") in ("error", "aborted"):
            notes.append(str(msg["stopReason"]))
        elif msg.get("stopReason") == "length":
            notes.append(f"stopped: {CUT_AT_LIMIT}")
    elif role == "toolResult":
        if isinstance(msg.get("toolName"), str):
            notes.append(msg["toolName"])
        if msg.get("isError"):
            notes.append("error")
    elif role == "bashExecution" and msg.get("excludeFromContext"):
        notes.append("not sent to the model")
    return " · ".join([role, *notes]), answered


def _message_body(msg: dict[str, Any]) -> str:
    """The message as a reader follows it: an assistant's blocks in their order (thinking marked
    `┆`, tool calls `→`, a blank line where the kind changes), an error it stopped on, a
    command's failure, images by type."""
    role = msg.get("role")
    if role == "assistant":
        parts: list[tuple[str, str]] = []
        content = msg.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                parts.append(("text", block["text"].strip("\n")))
            elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"].strip():
                lines = block["thinking"].strip("\n").split("\n")
                parts.append(("thinking", "\n".join(f"┆ {line}".rstrip() for line in lines)))
            elif kind == "toolCall":
                # whole: the model is sent every character (a cut said nothing of it, QA)
                parts.append(("call", "→ " + format_tool_call(block, max_args=sys.maxsize)))
        if isinstance(msg.get("errorMessage"), str) and msg.get("stopReason") in ("error", "aborted"):
            parts.append(("stop", f"[{msg['stopReason']}] {msg['errorMessage']}"))
        return "".join(
            ("" if k == 0 else "\n" if kind == parts[k - 1][0] else "\n\n") + text
            for k, (kind, text) in enumerate(parts)
        )
    if role == "bashExecution":
        text = f"$ {msg.get('command', '')}"
        if msg.get("output"):
            text += f"\n{str(msg['output']).rstrip()}"
        outcome = bash_outcome(msg)
        if outcome.cancelled:
            text += "\n[cancelled]"
        elif outcome.failed_with is not None:
            text += f"\n[exit {outcome.failed_with}]"
        if outcome.full_output:
            text += f"\n[output truncated; the whole of it: {outcome.full_output}]"
        return text
    if role in ("branchSummary", "compactionSummary"):
        return message_text(msg)
    return content_text(msg.get("content"), image_type=True)


def cmd_tree(args: argparse.Namespace) -> int:
    with opened(args.file) as session:
        index = session.tree
        labels = session.labels()
        outline = Outline(index, args.filter_value, labels)
        leaf = index.leaf
        width = args.width

        def describe(i: int) -> str:
            try:
                entry = session.entry_at(i)
            except SessionError as exc:  # its line is damaged: drawn as such, the rest as ever
                if exc.code == "storage":
                    raise
                return f"? {index.ids[i]} (unreadable: {exc.detail})"
            label = labels.get(entry.id)
            tag = f" [{label_text(label)}]" if label else ""
            active = "  ← active" if i == leaf else ""
            text = entry_preview(entry, width)
            return f"{entry_glyph(entry)} {entry.id} {short_time(entry.timestamp)}{tag} {text}{active}"

        with working(f"drawing {counted(len(outline), 'row')}"):
            lines = render_plain(outline, describe)
        damaged = warn_damage(session, damage_line(session, done="drew"))
        for line in lines:
            out(line)
        if not lines:  # on stderr: the output stays empty for a script (QA: nothing said at all)
            said = "no entry passes the filter " + args.filter_value.value if len(index) else "no entries yet"
            err(f"sessiontree: {said}")
        return damaged


def _once(files: list[str]) -> list[str]:
    """`files` without a second mention of a file (however it was spelt), in order."""
    seen: set[str] = set()
    kept = []
    for name in files:
        address = parse_address(name)
        key = str(Address(address.kind, os.path.realpath(address.location), address.session_id))
        if address.kind == "postgres":
            key = name
        if key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


def cmd_check(args: argparse.Namespace) -> int:
    """Diagnostics of each file; exit 1 on damage (errors), 2 if one could not be read, else
    0. One file not found is an error of the command (exit 2), as before several were taken."""
    files: list[str] = []
    broken: list[tuple[str, SessionError]] = []  # databases too damaged to list their sessions
    in_databases = False
    for given in args.file:
        if os.path.isdir(given):  # `check ~/.pi/agent/sessions` said "is a directory" (QA)
            found = sorted(str(f) for f in Path(given).rglob("*.jsonl") if f.is_file())
            if not found:
                raise SessionError("not_found", "no session files (*.jsonl) under this directory", path=given)
            files += found
            continue
        address = parse_address(given)
        if address.kind == "jsonl" or address.session_id is not None:
            files.append(given)
            in_databases = in_databases or address.kind != "jsonl"  # counted as sessions (QA: "2 files")
            continue
        # a database without `#ID`: each of its sessions, as a directory's files (it refused)
        try:
            sessions = list_sessions(address)
        except SessionError as exc:
            if exc.damaged:  # damage: said as the sessions' is, counted as damage (it was status 2)
                broken.append((address.display(), exc))
                continue
            if len(args.file) == 1:
                raise
            files.append(given)  # said below as not read, beside the others (they went unsaid)
            continue
        if not sessions:
            if len(args.file) == 1:
                raise SessionError("not_found", "the database holds no sessions", path=address.display())
            files.append(given)
            continue
        files += [str(Address(address.kind, address.location, str(s["id"]))) for s in sessions]
        in_databases = True
    files = _once(files)  # `check demo.jsonl .` checked and counted demo.jsonl twice (QA)
    if len(files) + len(broken) == 1 and len(args.file) == 1:  # one session: no count line
        return _check_one(files[0]) if files else _damaged_database(*broken[0])
    counts = {0: 0, 1: 0, 2: 0}
    for location, damage in broken:
        counts[_damaged_database(location, damage)] += 1
    noun = "session" if in_databases else "file"
    for file in files:
        try:
            status = _check_one(file)
        except SessionError as exc:
            out(f"{inert_name(exc.path or file)}: cannot be checked: {exc.detail}")
            status = 2
        counts[status] += 1
    out(
        f"{counted(len(files) + len(broken), noun)}: {counts[0]:,} ok, {counts[1]:,} damaged"
        + (f", {counts[2]:,} not read" if counts[2] else "")
    )
    return 2 if counts[2] else 1 if counts[1] else 0


def _check_one(file: str) -> int:
    try:
        with working(f"checking {file}"):
            session = open_session(file, read_only=True)
    except SessionError as exc:
        if exc.damaged:  # a database's damage, said for the session asked about
            return _damaged_database(file, exc)
        if exc.code != "invalid_session":
            raise  # not found, unreadable: the check could not run (exit 2)
        # In the shape of every other problem `check` lists (FILE:LINE: error: ...).
        out(Diagnostic("error", exc.code, exc.detail, exc.line).format(inert_name(exc.path or file)))
        out("damaged")
        return 1
    with session:
        location = inert_name(session.location)  # the start of every line below
        try:
            with working(f"checking {file}: decoding every entry"):
                problems = session.check(decode=True)
        except SessionError as exc:
            if not exc.damaged:
                raise
            return _damaged_database(session.location, exc)
        errors = 0
        for d in problems:
            errors += d.severity == "error"
            out(d.format(location))
        stats = session.stats()
        version = session.format_version
        out(
            f"{location}: format v{version}, {counted(stats.entry_count, 'entry', 'entries')},"
            f" {counted(stats.message_count, 'message')}, {counted(stats.fork_count, 'fork')},"
            f" leaf {session.leaf_id or '(none)'}"
        )
        name = inert_name(file)
        if version < 3 and errors:
            # `upgrade` refuses these (rewriting would drop the lines it cannot read); what
            # export writes is the readable part, as a new v3 file
            out(
                f"note: format v{version}; `sessiontree upgrade` refuses the damaged lines above:"
                f" `sessiontree export {name} --format jsonl -o NEW.jsonl` writes what is readable as v3"
            )
        elif version < 3:
            torn = any(d.code == "torn_tail" for d in problems)
            left = "; the incomplete last line is left out, the backup keeps it" if torn else ""
            out(f"note: run `sessiontree upgrade {name}` to convert it to v3 (a backup is kept{left})")
        out("damaged" if errors else "ok")
        return 1 if errors else 0


def _damaged_database(location: str, exc: SessionError) -> int:
    """Damage SQLite met in a database while checking it (`location`: the database, or one of
    its sessions): said in the shape of every other problem, and counted as damage (it was
    "cannot be checked", status 2, once per session and naming none of them; QA)."""
    out(Diagnostic("error", "damaged_database", exc.detail).format(inert_name(location)))
    out("damaged")
    return 1


def _filter(value: str) -> Filter:
    try:
        return Filter(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown filter {value!r} (choose from {', '.join(f.value for f in Filter)})"
        ) from None

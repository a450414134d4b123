"""Command line: the browser by default, plus scriptable subcommands.

sessiontree                      open the bundled demo session in the browser
sessiontree FILE                 browse a session (JSONL, or db.sqlite[#id])
sessiontree DIR                  pick a session from a directory (default ~/.pi/agent/sessions)
sessiontree context FILE [--at ID] [--json | --llm]
sessiontree check FILE
sessiontree tree FILE [--filter all|default|user|labeled]
sessiontree move FILE ID [--summary TEXT]
sessiontree upgrade FILE
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from . import __version__
from .display import entry_glyph, entry_preview, inert, short_time
from .files import DEFAULT_SESSIONS_DIR, open_session
from .model.errors import SessionError
from .model.messages import format_tool_call, message_text, tool_calls
from .outline import Filter, Outline, render_plain
from .storage.jsonl import JsonlStorage
from .storage.sqlite import SqliteStorage

COMMANDS = ("context", "check", "tree", "move", "upgrade")
SUMMARIZER_ENV = "SESSIONTREE_SUMMARIZER"


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _json_out(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")


# --- subcommands --------------------------------------------------------------------------------


def cmd_context(args: argparse.Namespace) -> int:
    with open_session(args.file, read_only=True) as session:
        context = session.build_context(at=args.at)
        leaf = args.at or session.leaf_id
        if args.llm:
            _json_out(context.to_llm())
            return 0
        if args.json:
            _json_out(
                {
                    "leafId": leaf,
                    "thinkingLevel": context.thinking_level,
                    "model": None
                    if context.model is None
                    else {"provider": context.model.provider, "modelId": context.model.model_id},
                    "activeToolNames": context.active_tool_names,
                    "tokens": context.tokens,
                    "messages": context.messages,
                }
            )
            return 0
        tools = ", ".join(context.active_tool_names) if context.active_tool_names is not None else "(default)"
        _out(
            f"leaf {leaf or '(none)'} · {len(context.messages)} messages · ~{context.tokens} tokens"
            f" · model {context.model or '(none)'} · thinking {context.thinking_level} · tools {tools}"
        )
        for msg in context.messages:
            role = msg.get("role", "?")
            _out(f"\n── {role} " + "─" * max(0, 60 - len(str(role))))
            _out(inert(_message_body(msg)))
        return 0


def _message_body(msg: dict[str, Any]) -> str:
    text = message_text(msg)
    if msg.get("role") == "assistant":
        calls = [format_tool_call(c, max_args=400) for c in tool_calls(msg)]
        if calls:
            text = "\n".join([text, *("→ " + c for c in calls)]).strip()
    elif msg.get("role") == "bashExecution":
        text = f"$ {msg.get('command', '')}\n{msg.get('output', '')}"
    return text


def cmd_check(args: argparse.Namespace) -> int:
    """Diagnostics; exit 1 on damage (errors), 0 otherwise."""
    try:
        session = open_session(args.file, read_only=True)
    except SessionError as exc:
        _out(f"error: {exc} [{exc.code}]")
        return 1
    with session:
        diagnostics = session.diagnostics
        location = session.storage.location
        errors = 0
        for d in diagnostics:
            errors += d.severity == "error"
            _out(d.format(location))
        if isinstance(session.storage, SqliteStorage):
            for problem in session.storage.verify_state():
                errors += 1
                _out(f"{location}: error: materialised state differs from the log: {problem}")
        stats = session.stats()
        version = getattr(session.storage, "version", 3)
        _out(
            f"{location}: format v{version}, {stats.entry_count} entries, {stats.message_count}"
            f" messages, {stats.fork_count} forks, leaf {session.leaf_id or '(none)'}"
        )
        if version < 3:
            _out(f"note: run `sessiontree upgrade {args.file}` to convert it to v3 (a backup is kept)")
        _out("damaged" if errors else "ok")
        return 1 if errors else 0


def cmd_tree(args: argparse.Namespace) -> int:
    with open_session(args.file, read_only=True) as session:
        index = session.tree
        labels = session.labels()
        outline = Outline(index, Filter(args.filter_value), labels)
        leaf = index.leaf
        width = max(40, args.width)

        def describe(i: int) -> str:
            entry = session.storage.load_entry(i)
            label = labels.get(entry.id)
            tag = f" [{inert(label)}]" if label else ""
            active = "  ← active" if i == leaf else ""
            text = entry_preview(entry, width)
            return f"{entry_glyph(entry)} {entry.id} {short_time(entry.timestamp)}{tag} {text}{active}"

        for line in render_plain(outline, describe):
            _out(line)
        return 0


def cmd_move(args: argparse.Namespace) -> int:
    with open_session(args.file) as session:
        new_leaf = session.move_to(None if args.id in ("root", "none") else args.id, args.summary)
        _out(f"leaf is now {new_leaf or '(none)'}")
        return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    backup = JsonlStorage.upgrade(args.file)
    if backup is None:
        _out(f"{args.file} is already version 3; nothing to do")
    else:
        _out(f"upgraded {args.file} to version 3; the original is kept as {backup}")
    return 0


# --- parsing --------------------------------------------------------------------------------------


def _command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sessiontree", description="Tree-shaped LLM sessions.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("context", help="print what the model sees at the leaf (or at --at ID)")
    p.add_argument("file")
    p.add_argument("--at", metavar="ID", help="as if the leaf were at this entry")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="AgentMessages and derived state as JSON")
    fmt.add_argument("--llm", action="store_true", help="the convert_to_llm form as JSON")
    p.set_defaults(func=cmd_context)
    p = sub.add_parser("check", help="report damage; exit status 1 if any")
    p.add_argument("file")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("tree", help="print the whole tree")
    p.add_argument("file")
    p.add_argument(
        "--filter",
        dest="filter_value",
        default="everything",
        choices=[f.value for f in Filter],
        help="which entries to show (default: everything)",
    )
    p.add_argument("--width", type=int, default=100, help="preview width")
    p.set_defaults(func=cmd_tree)
    p = sub.add_parser("move", help="move the leaf (writes a leaf entry, optionally a summary)")
    p.add_argument("file")
    p.add_argument("id", help='target entry id ("root" for before the first entry)')
    p.add_argument("--summary", help="branch summary of the branch being left")
    p.set_defaults(func=cmd_move)
    p = sub.add_parser("upgrade", help="rewrite a v1/v2 file as v3 (atomic, keeps a .bak)")
    p.add_argument("file")
    p.set_defaults(func=cmd_upgrade)
    return parser


def _browser_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessiontree",
        description="Browse a session tree. Subcommands: " + ", ".join(COMMANDS) + ".",
        epilog="Run `sessiontree COMMAND --help` for a subcommand.",
    )
    parser.add_argument(
        "path",
        nargs="?",
        help="a session file, a SQLite db (db.sqlite#id), or a directory"
        f" (default: the bundled demo; Pi keeps sessions in {DEFAULT_SESSIONS_DIR})",
    )
    parser.add_argument("--read-only", action="store_true", help="never write to the session")
    parser.add_argument(
        "--summarizer",
        metavar="CMD",
        default=os.environ.get(SUMMARIZER_ENV),
        help=f"command that reads a transcript on stdin and prints a summary (env {SUMMARIZER_ENV})",
    )
    parser.add_argument("--no-follow", action="store_true", help="do not watch the file for new entries")
    parser.add_argument(
        "--pick", action="store_true", help=f"choose a session from PATH or {DEFAULT_SESSIONS_DIR}"
    )
    parser.add_argument("--version", action="version", version=f"sessiontree {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in COMMANDS:
            args = _command_parser().parse_args(argv)
            return args.func(args)
        args = _browser_parser().parse_args(argv)
        return run_browser(args)
    except SessionError as exc:
        sys.stderr.write(f"sessiontree: {exc} [{exc.code}]\n")
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


def run_browser(args: argparse.Namespace) -> int:
    from .tui.launch import launch

    return launch(
        args.path,
        read_only=args.read_only,
        summarizer=args.summarizer,
        follow=not args.no_follow,
        pick=args.pick,
    )


if __name__ == "__main__":
    raise SystemExit(main())

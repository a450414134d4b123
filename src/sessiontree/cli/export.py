"""Commands that copy a session out: `export` (Markdown, a session file, an HTML page), `fork`
(a new session file holding one path) and `diff` (two contexts compared).

They open the source read-only. Output files appear whole or not at all, and an existing file
is replaced only with `--force`. A damaged source is exported as far as it can be read; one line
on stderr says what was skipped, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from ..compare import compare_contexts, comparison_lines
from ..display import counted
from ..export import Chunk, collect_path, damage_line, export_jsonl, html_chunks, markdown_parts, write_file
from ..export.common import require_readable_path
from ..export.markdown import DEFAULT_MAX_RESULT
from ..fork import fork_session
from ..model.errors import SessionError
from ..opening import open_session
from .numbers import at_least
from .output import err, flush_out, json_out, opened, out, out_bytes, warn_damage, working

COMMANDS = ("export", "fork", "diff")
FORMATS = {"md": "md", "markdown": "md", "html": "html", "htm": "html", "jsonl": "jsonl"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="write the path root → ID (default: the leaf) as Markdown, a session file or an HTML page",
    )
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    p.add_argument("--at", metavar="ID", help="end the path at this entry instead of the leaf")
    p.add_argument(
        "--format",
        choices=("md", "html", "jsonl"),
        help="md: readable Markdown; jsonl: a session file Pi opens at ID; html: the whole tree as"
        " one self-contained page (default: from -o's suffix .md, .html or .jsonl; md without -o)",
    )
    p.add_argument("-o", "--output", metavar="OUT", type=_output, help="write here instead of stdout")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument(
        "--max-result",
        type=at_least(0),
        metavar="CHARS",
        help=f"md: characters of a tool result shown before it is cut (default {DEFAULT_MAX_RESULT}; 0: all)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("fork", help="a new session file holding the path root → ID; prints its path")
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    p.add_argument("id", help="entry to fork at (a user message: the fork ends at its parent)")
    p.add_argument(
        "-o", "--output", metavar="NEW", type=_output, help="the new file (default: next to the source)"
    )
    p.add_argument("--force", action="store_true", help="replace NEW if it exists")
    p.add_argument("--json", action="store_true", help="path, ids and the text to re-send as JSON")
    p.set_defaults(func=cmd_fork)

    p = sub.add_parser("diff", help="compare what the model sees at two entries")
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    p.add_argument("a", help="first entry id")
    p.add_argument("b", help="second entry id")
    p.add_argument("--json", action="store_true", help="the comparison as JSON")
    p.add_argument("--width", type=at_least(40), default=100, help="width of a message line (40 or more)")
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when the contexts differ, 0 when the same, 2 on a damaged session (as diff(1))",
    )
    p.set_defaults(func=cmd_diff)


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    suffix = os.path.splitext(args.output or "")[1].lstrip(".").lower()
    if suffix and suffix not in FORMATS:  # out.pdf got Markdown, unsaid
        raise SessionError(
            "invalid_argument",
            f"cannot tell the format from .{suffix}; add --format md, html or jsonl",
            path=args.output,
        )
    return FORMATS.get(suffix, "md")


def _max_result(args: argparse.Namespace) -> int | None:
    chars = DEFAULT_MAX_RESULT if args.max_result is None else args.max_result
    return chars or None  # 0: all


def cmd_export(args: argparse.Namespace) -> int:
    if args.output == "-":  # the usual name of standard output (it made a file called "-")
        args.output = None
    fmt = _format(args)
    if args.max_result is not None and fmt != "md":  # it was taken and ignored (QA)
        raise SessionError(
            "invalid_argument", f"--max-result cuts the Markdown export's tool results, not {fmt}"
        )
    if fmt == "html" and not args.output and sys.stdout.isatty():
        # a page of JavaScript and JSON, often megabytes, is of no use scrolling past
        raise SessionError(
            "invalid_argument", "an HTML page is not for a terminal; write it to a file (-o FILE) or a pipe"
        )
    with contextlib.ExitStack() as busy:  # closed once the work is done, before any output
        busy.enter_context(working(f"exporting {args.file} as {fmt}"))
        with open_session(args.file, read_only=True) as session:
            at = session.resolve_id(args.at) if args.at is not None else None
            data: list[Chunk]
            if fmt == "md":
                path = collect_path(session, at)
                parts = markdown_parts(session, path, max_result_chars=_max_result(args))
                data, note, problem = [part.encode() for part in parts], path.note, damage_line(session, path)
            elif fmt == "jsonl":
                body, path = export_jsonl(session, at)
                data, note, problem = [body], path.note, damage_line(session, path)
            else:
                data, page = html_chunks(session, at)
                note, problem = page.note, damage_line(session)
            if fmt != "html" and at is None and session.leaf_id is None and session.entry_count():
                # A file of a header alone was written without a word (QA); the page shows the
                # whole tree whatever the leaf.
                entries = counted(session.entry_count(), "entry", "entries")
                note = (
                    "the leaf is at the start, before the first entry: the export holds none of the"
                    f" session's {entries} (--at ID ends it elsewhere)"
                )
            if args.output:
                # a session file, private to its owner like every one sessiontree creates (a fork)
                mode = 0o600 if fmt == "jsonl" else 0o666
                written = write_file(args.output, data, force=args.force, mode=mode, sources=session.files)
            busy.close()  # the spinner's line is gone before anything is printed
            if note:
                err(f"sessiontree: note: {note}")
            if args.output:
                out(f"wrote {written} ({fmt}, {sum(len(c) for c in data):,} bytes)")
            else:
                for chunk in data:
                    out_bytes(chunk)
                flush_out()
            return warn_damage(session, problem)


def _output(value: str) -> str:
    """An `-o` path; an empty one (a shell variable left unset) wrote to stdout, unsaid."""
    if not value:
        raise argparse.ArgumentTypeError("an empty path (name a file, or leave -o out)")
    return value


def cmd_fork(args: argparse.Namespace) -> int:
    if args.output and os.path.isdir(args.output):  # before its suffix: "-o dir/" named no file
        raise SessionError(
            "invalid_argument", "is a directory: name the new file in it (NAME.jsonl)", path=args.output
        )
    if args.output and not args.output.endswith(".jsonl"):  # Pi lists only *.jsonl sessions
        raise SessionError("invalid_argument", "a session file's name ends in .jsonl", path=args.output)
    with open_session(args.file, read_only=True) as session:
        entry_id = session.resolve_id(args.id)
        with working(f"forking {args.file} at {entry_id}"):
            result = fork_session(session, entry_id, output=args.output, force=args.force)
        # absolute whichever way it was named: `-o` gave it as typed, the default absolute (QA)
        path = os.path.abspath(result.path)
        if args.json:
            json_out(
                {
                    "path": path,
                    "sessionId": result.session_id,
                    # the file's leaf, as `check` and `context --json` give it (a label
                    # copied after the path may be it); where the conversation ends:
                    "leafId": result.file_leaf_id,
                    "endsAt": result.leaf_id,
                    "entries": result.entries,
                    "resendText": result.resend_text,
                }
            )
        else:
            # The new file's path alone on stdout, for `NEW=$(sessiontree fork …)`; what to
            # know about it on stderr (the four lines were all captured: QA). --json has all.
            out(path)
            ends = f"ends at {result.leaf_id}" if result.leaf_id else "holds no entries"
            size = counted(result.entries, "entry", "entries")  # labels written after it included
            err(f"the fork {ends} ({size}); session {result.session_id}")
            if result.resend_text is not None:
                err(f"{entry_id} is a message the user sent, so the fork ends before it; send again:")
                for line in result.resend_text.split("\n"):
                    err(line)
        return warn_damage(session, damage_line(session, result.source))


def cmd_diff(args: argparse.Namespace) -> int:
    with opened(args.file) as session:
        a, b = session.resolve_id(args.a), session.resolve_id(args.b)
        for at in (a, b):
            require_readable_path(session, at, f"the context at {at}")
        with working(f"comparing the contexts at {a} and {b}"):
            comparison = compare_contexts(session, a, b)
        if args.json:
            json_out(comparison.to_json())
        else:
            for line in comparison_lines(comparison, width=args.width):
                out(line)
        status = warn_damage(session, damage_line(session, done="compared"))
        if args.exit_code:
            # 1 means "they differ" here: a damaged session is trouble, 2, as in diff(1)
            return 2 if status else int(not comparison.same)
        return status

"""`sessiontree [ADDRESS|DIR]`: the browser. Textual is imported only when it starts."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import __version__
from ..model.errors import SessionError
from ..opening import DEFAULT_SESSIONS_DIR, parse_address
from .output import err

SUMMARIZER_ENV = "SESSIONTREE_SUMMARIZER"


def parser(commands: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sessiontree",
        description="Browse a session tree. Subcommands: " + ", ".join(commands) + ".",
        epilog="Run `sessiontree COMMAND --help` for a subcommand.",
    )
    p.add_argument(
        "path",
        nargs="?",
        help="a session file, a SQLite db (db.sqlite#id), a PostgreSQL URL (postgresql://…#id),"
        " or a directory"
        f" (default: the bundled demo; Pi keeps sessions in {DEFAULT_SESSIONS_DIR})",
    )
    p.add_argument("--read-only", action="store_true", help="never write to the session")
    p.add_argument(
        "--summarizer",
        metavar="CMD",
        default=os.environ.get(SUMMARIZER_ENV),
        help=f"command that reads a transcript on stdin and prints a summary (env {SUMMARIZER_ENV})",
    )
    p.add_argument("--no-follow", action="store_true", help="do not watch the file for new entries")
    p.add_argument(
        "--pick", action="store_true", help=f"choose a session from PATH or {DEFAULT_SESSIONS_DIR}"
    )
    p.add_argument("--version", action="version", version=f"sessiontree {__version__}")
    return p


def run(args: argparse.Namespace) -> int:
    if args.pick and args.path is not None and not Path(args.path).is_dir():
        # It showed an empty picker saying "No session files found in FILE" (QA).
        what = (
            "is a file: open it without --pick"
            if Path(args.path).exists()
            else "is a database: open a session in it without --pick (add #SESSION_ID)"
            if parse_address(args.path).kind == "postgres"
            else "does not exist"
        )
        raise SessionError(
            "invalid_argument", f"--pick lists the sessions of a directory; {args.path} {what}"
        )
    # Textual reads keys from stdin and draws on stderr (stdout stays free to redirect). Without
    # a terminal on either, the app started all the same, wrote escape codes into a file or a
    # pipe and waited for keys that could never come, until it was killed (QA).
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        address = parse_address(args.path) if args.path is not None else None
        if address is not None and address.kind == "jsonl" and not os.path.lexists(address.location):
            # the missing file first: "needs a terminal" sent a script's author the wrong way (QA)
            raise SessionError("not_found", "no such session file", path=address.location)
        which = "input" if not sys.stdin.isatty() else "screen (stderr)"
        err(
            f"sessiontree: the browser needs a terminal, and its {which} is not one; to print"
            " instead: `sessiontree tree FILE` (the tree), `sessiontree context FILE` (what the"
            " model sees), `sessiontree export FILE` (a whole file)"
        )
        return 2
    if os.environ.get("TERM") == "dumb":  # escape codes shown as text (an editor's shell; QA)
        err(
            "sessiontree: the browser needs a terminal that draws a screen, and TERM=dumb says this"
            " one does not; run it in a terminal emulator, or print instead: `sessiontree tree FILE`,"
            " `sessiontree context FILE`, `sessiontree export FILE`"
        )
        return 2
    from ..tui.launch import launch

    return launch(
        args.path,
        read_only=args.read_only,
        summarizer=args.summarizer,
        follow=not args.no_follow,
        pick=args.pick,
    )

"""Writing commands: `move` (append a leaf entry) and `upgrade` (v1/v2 → v3)."""

from __future__ import annotations

import argparse
from typing import Any

from ..export.common import resolve_target
from ..model.errors import SessionError
from ..opening import open_session, upgrade_session
from .output import err, out, working

COMMANDS = ("move", "upgrade")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "move",
        help="move the leaf (writes a leaf entry, optionally a summary)",
        description="Move the leaf: append a leaf entry (and a branch summary with --summary). Moving to"
        " where the leaf already is writes nothing, as in the app; the library's Session.move_to"
        " writes the entry anyway, as Pi's moveTo does.",
    )
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    # Not an argparse group of the two: given both, it said "unrecognized arguments: ID" (QA).
    p.add_argument("id", nargs="?", help="target entry id (or --start)")
    p.add_argument("--start", action="store_true", help="move before the first entry (empty context)")
    p.add_argument("--summary", help="branch summary of the branch being left")
    p.set_defaults(func=cmd_move)

    p = sub.add_parser("upgrade", help="rewrite a v1/v2 file as v3 (atomic, keeps a .bak)")
    p.add_argument("file", help="a session file (.jsonl) in Pi's v1 or v2 format")
    p.set_defaults(func=cmd_upgrade)


def cmd_move(args: argparse.Namespace) -> int:
    if args.start == (args.id is not None):
        raise SessionError(
            "invalid_argument",
            "give the entry to move to, or --start, not both"
            if args.start
            else "give the entry to move to, or --start",
        )
    if args.summary is not None and not args.summary.strip():
        # an empty summary is written by Pi's rules but never shown to the model: a mistake
        raise SessionError("invalid_argument", "--summary is empty; leave it out to move without a summary")
    with open_session(args.file) as session:
        target = None if args.start else args.id
        if target in ("root", "none") and session.get_entry(target) is None:
            target = None  # the old spelling of --start, kept where no entry has that id
        elif target is not None:
            # A `leaf` entry is refused as fork and export refuse it: the leaf would go to its
            # parent, where the leaf was before that move (QA).
            target, _ = resolve_target(session, session.resolve_id(target))
        if target == session.leaf_id:  # as in the app: a leaf entry to where it is says nothing
            where = target or "(none: before the first entry)"
            if args.summary is not None:  # the user's text would be dropped without a word (QA)
                raise SessionError(
                    "invalid_argument",
                    f"the leaf is already {where}: no move, so the summary was not written either"
                    " (a branch summary records the branch a move leaves)",
                )
            out(f"leaf is already {where}; nothing written")
            return 0
        new_leaf = session.move_to(target, args.summary)
        out(f"leaf is now {new_leaf or '(none: before the first entry)'}")
        for d in session.diagnostics:  # what the write did first: say where those bytes went
            if d.code == "tail_set_aside":
                err(f"sessiontree: note: {d.message}")
        return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    with working(f"upgrading {args.file}"):
        backup = upgrade_session(args.file)
    if backup is None:
        out(f"{args.file} is already version 3; nothing to do")
    else:
        out(f"upgraded {args.file} to version 3; the original is kept as {backup}")
    return 0

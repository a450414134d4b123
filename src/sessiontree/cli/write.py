"""Writing commands: `move` (append a leaf entry), `label` (set or clear an entry's label) and
`upgrade` (v1/v2 → v3)."""

from __future__ import annotations

import argparse
from typing import Any

from ..export.common import resolve_target
from ..model.errors import SessionError
from ..opening import open_to_write, upgrade_session
from ..session import Session
from .output import err, out, working

COMMANDS = ("move", "label", "upgrade")


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

    p = sub.add_parser(
        "label",
        help="set or clear an entry's label (writes a label entry)",
        description="Set the label of an entry, as `m` does in the app; without TEXT (or with an"
        " empty one) clear it. The label entry joins the current branch and becomes the leaf, as"
        " in Pi.",
    )
    p.add_argument("file", help="session address: file.jsonl or db.sqlite#id")
    p.add_argument("id", help="the entry to label (its id or a unique start of it)")
    p.add_argument("text", nargs="?", default=None, help="the label (leave out to clear it)")
    p.set_defaults(func=cmd_label)

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
    with open_to_write(args.file) as session:
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
        if args.summary is not None:  # the summary is the leaf, on the entry asked for (QA)
            out(f"leaf is now {new_leaf}, the branch summary on {target or '(the start)'}")
        else:
            out(f"leaf is now {new_leaf or '(none: before the first entry)'}")
        _set_aside(session)
        return 0


def cmd_label(args: argparse.Namespace) -> int:
    with open_to_write(args.file) as session:
        # a `leaf` record refused, as `move`, `fork` and `context --at` refuse it: it records a
        # move, no point of the conversation to mark (QA)
        target = resolve_target(session, session.resolve_id(args.id))[0]
        assert target is not None
        text = args.text if args.text is not None and args.text.strip() else None
        if text is None and session.get_label(target) is None:
            out(f"{target} has no label; nothing written")
            return 0
        if text is not None and session.get_label(target) == text:
            out(f"{target} is already labelled {text!r}; nothing written")
            return 0
        written = session.append_label(target, text)
        said = f"labelled {target} {text!r}" if text is not None else f"cleared the label of {target}"
        out(f"{said} (label entry {written}, now the leaf)")
        _set_aside(session)
        return 0


def _set_aside(session: Session) -> None:
    for d in session.diagnostics:  # what the write did first: say where those bytes went
        if d.code == "tail_set_aside":
            err(f"sessiontree: note: {d.message}")


def cmd_upgrade(args: argparse.Namespace) -> int:
    notes: list[str] = []
    try:
        with working(f"upgrading {args.file}"):
            backup = upgrade_session(args.file, notes)
    except SessionError as exc:
        if exc.code != "invalid_session" or "damaged" not in exc.detail:
            raise
        # what to do instead: the readable entries as a new v3 file (QA: nothing said how)
        hint = f"`sessiontree export {args.file} --format jsonl -o NEW.jsonl` writes what is readable as v3"
        raise SessionError(exc.code, f"{exc.detail}; {hint}", path=exc.path) from None
    if backup is None:
        out(f"{args.file} is already version 3; nothing to do")
    else:
        out(f"upgraded {args.file} to version 3; the original is kept as {backup}")
    for note in notes:
        err(f"sessiontree: note: {note}")
    return 0

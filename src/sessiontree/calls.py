"""What a tool call's arguments mean, for the front ends and the exports that draw calls for
people: the file it names, an edit's old and new text as a line diff, a command, a written
file. Pi's tools (`read`, `edit`, `write`, `bash`: packages/coding-agent/src/core/tools in Pi's
repository) spell their arguments `path`, `oldText`/`newText` or `edits`, `content`, `command`;
other harnesses `file_path`, `old_string`/`new_string`, and capitalised tool names."""

from __future__ import annotations

import difflib
from typing import Any

DIFF_MAX_LINES = 4000  # above this an edit is shown as removed + added, without matching lines
EDIT_ARGS = frozenset({"oldText", "newText", "old_string", "new_string", "old_str", "new_str", "edits"})


def call_args(call: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments when they are an object, else {}."""
    args = call.get("arguments")
    return args if isinstance(args, dict) else {}


def text_arg(args: dict[str, Any], *names: str) -> str | None:
    """The first of `names` whose value is a string."""
    for name in names:
        if isinstance(args.get(name), str):
            return str(args[name])
    return None


def call_path(args: dict[str, Any]) -> str | None:
    return text_arg(args, "path", "file_path")


def edit_pairs(args: dict[str, Any]) -> list[tuple[str, str]] | None:
    """(old, new) pairs of an edit call: `oldText`/`newText`, `edits: [{oldText, newText}]`, or
    the `old_string`/`new_string` spelling; None when the arguments are none of these."""
    old = text_arg(args, "oldText", "old_string", "old_str")
    new = text_arg(args, "newText", "new_string", "new_str")
    if old is not None or new is not None:
        return [(old or "", new or "")]
    edits = args.get("edits")
    if isinstance(edits, list) and edits:
        pairs = []
        for item in edits:
            if not isinstance(item, dict):
                return None
            pairs.append(
                (
                    text_arg(item, "oldText", "old_string", "old_str") or "",
                    text_arg(item, "newText", "new_string", "new_str") or "",
                )
            )
        return pairs
    return None


def diff_lines(old: str, new: str) -> list[tuple[str, str]]:
    """(sign, line) for an edit: " " unchanged, "-" removed, "+" added, "⋯" between hunks."""
    if old.endswith("\n") and new.endswith("\n"):  # the usual whole-line edit: no blank last line
        old, new = old[:-1], new[:-1]
    a, b = old.split("\n"), new.split("\n")
    if len(a) + len(b) > DIFF_MAX_LINES:
        return [("-", x) for x in a] + [("+", x) for x in b]
    out: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for k, group in enumerate(matcher.get_grouped_opcodes(3)):
        if k:
            out.append(("⋯", ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [(" ", x) for x in a[i1:i2]]
            else:
                out += [("-", x) for x in a[i1:i2]]
                out += [("+", x) for x in b[j1:j2]]
    return out

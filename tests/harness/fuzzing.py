"""Hostile-input generation and the "open and use everything" check, shared by the hypothesis
tests (tests/storage/test_fuzz.py) and the long-running fuzzer (scripts/fuzz.py).

The contract under test: whatever bytes a session file holds, opening it and using the result
produces a session (possibly read-only, with diagnostics) or a `SessionError` — never another
exception, never a hang.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import orjson

from sessiontree.model.errors import SessionError

VALUES: list[object] = [
    None,
    True,
    0,
    -1,
    2**70,
    1e308,
    "",
    "x",
    "\x1b[31m",
    "\u202e",
    [],
    [1, "a"],
    {},
    {"role": 5},
    {"type": "text", "text": 3},
    [{"type": "toolCall", "name": None, "arguments": "[]"}],
]

HUGE_NUMBERS = [b"1e999999", b"-1e999", b"1" + b"0" * 5000, b"0." + b"0" * 5000 + b"1", b"NaN", b"Infinity"]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def mutate(base: bytes, rng: random.Random) -> bytes:
    """One random mutation of a JSONL session file."""
    choice = rng.randrange(11)
    data = bytearray(base)
    if choice == 9:  # what Pi's own files hold: lone surrogate escapes, a BOM, a float version
        shape = rng.randrange(3)
        if shape == 0:
            return base.replace(b'"content":"', b'"content":"\\ud83d', 1)
        if shape == 1:
            return b"\xef\xbb\xbf" + base
        return base.replace(b'"version":3', b'"version":3.0', 1)
    if choice == 0 and data:  # bit flips
        for _ in range(rng.randint(1, 8)):
            k = rng.randrange(len(data))
            data[k] ^= 1 << rng.randrange(8)
        return bytes(data)
    if choice == 1:  # truncation anywhere (a torn write, or worse)
        return bytes(data[: rng.randrange(len(data) + 1)])
    if choice == 2:  # invalid UTF-8 spliced in
        k = rng.randrange(len(data) + 1)
        bad = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])
        return bytes(data[:k]) + bad + bytes(data[k:])
    if choice == 3:  # huge numbers in place of a value
        number = rng.choice(HUGE_NUMBERS)
        return base.replace(b'"parentId":', b'"tokensBefore":' + number + b',"parentId":', 1)
    if choice == 4:  # deep nesting inside a message
        return base.replace(b'"content":', b'"content":' + nested(rng.choice([50, 900, 5000])) + b',"c2":', 1)
    lines = base.split(b"\n")
    if choice == 5 and len(lines) > 1:  # duplicate, drop or swap lines
        k = rng.randrange(1, len(lines))
        op = rng.randrange(3)
        if op == 0:
            lines.insert(k, lines[rng.randrange(len(lines))])
        elif op == 1:
            del lines[k]
        else:
            j = rng.randrange(len(lines))
            lines[k], lines[j] = lines[j], lines[k]
        return b"\n".join(lines)
    if choice in (6, 7) and len(lines) > 1:  # a wrong type for one field of one entry
        k = rng.randrange(len(lines))
        try:
            obj = orjson.loads(lines[k])
        except orjson.JSONDecodeError:
            return base
        if isinstance(obj, dict) and obj:
            key = rng.choice(list(obj))
            obj[key] = rng.choice(VALUES)
            if isinstance(obj.get("message"), dict) and rng.random() < 0.5:
                inner = obj["message"]
                if inner:
                    inner[rng.choice(list(inner))] = rng.choice(VALUES)
            try:
                lines[k] = orjson.dumps(obj)
            except TypeError:
                return base
        return b"\n".join(lines)
    if choice == 8 and len(lines) > 1 and rng.random() < 0.5:  # a key given twice
        k = rng.randrange(1, len(lines))
        if lines[k].startswith(b"{"):
            key = rng.choice(
                [b'"type":"label"', b'"id":"dup"', b'"parentId":null', b'"message":{"role":"x"}']
            )
            lines[k] = lines[k].rstrip(b"}") + b"," + key + b"}" if lines[k].endswith(b"}") else lines[k]
        return b"\n".join(lines)
    # random garbage line
    k = rng.randrange(len(lines) + 1)
    lines.insert(k, bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))))
    return b"\n".join(lines)


def exercise(path: str, open_session: Callable, *, writable: bool = False) -> str:
    """Open `path` and use every read path the CLI and browser use. Returns "opened",
    "refused" (a SessionError at open) or "refused-later"; any other exception propagates."""
    from sessiontree.display import entry_preview, pretty_json
    from sessiontree.outline import Filter, Outline
    from sessiontree.summarize import collect_branch, transcript

    try:
        session = open_session(path, read_only=not writable)
    except SessionError:
        return "refused"
    try:
        tree = session.tree
        for entry in session.get_entries():
            entry_preview(entry)
            pretty_json(entry.to_dict())  # the browser's raw view
        for flt in Filter:
            Outline(tree, flt, session.labels())
        context = session.build_context()
        context.to_llm()
        _ = context.tokens
        for i in range(0, len(tree), max(1, len(tree) // 7)):
            session.build_context(at=tree.ids[i], limit=50)
        session.stats()
        if session.leaf_id is not None and len(tree) > 1:
            branch = collect_branch(session, tree.ids[0])
            transcript(branch.messages)
        if writable and not session.read_only:
            session.append_message({"role": "user", "content": "after fuzzing"})
        for diagnostic in session.diagnostics:
            diagnostic.format(path)
    except SessionError:
        return "refused-later"
    finally:
        session.close()
    return "opened"

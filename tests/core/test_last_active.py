"""When a session file was last active (`catalog.last_active`): the time the file picker sorts
and shows, read from the file's end by Pi's rule — the last user or assistant message, else the
header, else the file's time — and checked against Pi's own session list."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import PI_FIXTURES
from sessiontree.catalog import TAIL_READ, find_session_files, last_active

BENCH = Path(__file__).resolve().parents[2] / "bench"
PI_PACKAGE = BENCH / "node_modules" / "@mariozechner" / "pi-coding-agent"
FILE_TIME = 1_700_000_000  # every file's modification time, older than any message here


def _iso(second: int) -> str:
    return f"2026-03-01T10:00:{second:02d}.000Z"


def _ms(second: int) -> int:
    return 1_772_359_200_000 + second * 1000  # _iso(second) in milliseconds


def header(second: int = 0, **extra) -> dict:
    return {"type": "session", "version": 3, "id": "s", "timestamp": _iso(second), "cwd": "/p", **extra}


def message(n: int, role: str, second: int, *, stamp: bool = True, text: str = "hi", **extra) -> dict:
    body: dict = {"role": role, "content": [{"type": "text", "text": text}]}
    if stamp:
        body["timestamp"] = _ms(second)
    body.update(extra)
    return {"type": "message", "id": f"m{n}", "parentId": None, "timestamp": _iso(second), "message": body}


def label(n: int, second: int) -> dict:
    return {"type": "label", "id": f"l{n}", "parentId": None, "timestamp": _iso(second), "targetId": "m1"}


def write(path: Path, lines: list[dict | str], *, newline: bool = True) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + ("\n" if newline else "")
    path.write_text(text)
    os.utime(path, (FILE_TIME, FILE_TIME))
    return path


def active_ms(path: Path) -> int:
    return round(last_active(path, path.stat()) * 1000)


CASES: dict[str, list[dict | str]] = {
    # a label and a leaf move after the last message: the message's time, not theirs
    "labelled": [header(), message(1, "user", 1), message(2, "assistant", 2), label(3, 50)],
    # the message's own time first, the entry's when it has none
    "message-time": [header(), message(1, "user", 3, timestamp=_ms(40))],
    "entry-time": [header(), message(1, "user", 4, stamp=False)],
    # tool results, custom messages, messages without content: not activity; the header's time
    "tools-only": [
        header(5),
        {**message(1, "toolResult", 30), "parentId": None},
        {"type": "message", "id": "m2", "parentId": None, "timestamp": _iso(31), "message": {"role": "user"}},
        {"type": "custom_message", "id": "c", "parentId": None, "timestamp": _iso(32), "customType": "x",
         "content": "y", "display": True},
    ],
    # an earlier message counts when the last one's time cannot be read
    "bad-time": [header(), message(1, "user", 6),
                 message(2, "assistant", 7, stamp=False) | {"timestamp": "soon"}],
    # a damaged last line and no final newline
    "damaged-end": [header(), message(1, "user", 8), '{"type":"message","id":"half'],
    # a last answer longer than several reads from the end, then a label
    "long-answer": [header(), message(1, "user", 9), message(2, "assistant", 10, text="x" * (TAIL_READ * 30)),
                    label(3, 55)],
    "header-only": [header(11)],
    # a header after a line that is no entry: Pi's list takes the first entry it reads
    "torn-first": ['{"type":"sess', header(12)],
    # a time past any date (microseconds written as milliseconds): an earlier message's
    "far-future": [header(), message(1, "user", 13), message(2, "assistant", 14, timestamp=1.75e15)],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_last_active_follows_pis_rule(tmp_path, name):
    expected = {
        "labelled": _ms(2),
        "message-time": _ms(40),
        "entry-time": _ms(4),
        "tools-only": _ms(5),
        "bad-time": _ms(6),
        "damaged-end": _ms(8),
        "long-answer": _ms(10),
        "header-only": _ms(11),
        "torn-first": _ms(12),
        "far-future": _ms(13),
    }[name]
    path = write(tmp_path / f"{name}.jsonl", CASES[name], newline=name != "damaged-end")
    assert active_ms(path) == expected


def test_without_a_readable_header_or_message_the_files_time(tmp_path):
    for name, lines in {
        "bad-header-time": [header() | {"timestamp": "never"}],
        "no-header": ['{"nonsense"', "[1, 2]"],
        "empty": [],
    }.items():
        path = write(tmp_path / f"{name}.jsonl", lines, newline=bool(lines))
        assert active_ms(path) == FILE_TIME * 1000, name
    gone = tmp_path / "gone.jsonl"
    st = write(gone, [header()]).stat()
    gone.unlink()
    assert last_active(gone, st) == st.st_mtime


def test_a_header_after_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(header(15)).encode() + b"\n")
    os.utime(path, (FILE_TIME, FILE_TIME))
    assert active_ms(path) == _ms(15)


@pytest.mark.parametrize("stamp", ["1e999", "1e20", "-5"])
def test_a_time_no_date_can_show_is_no_time(tmp_path, stamp):
    """1e999 (an infinity), 1e20 or a negative time stopped the picker with a traceback."""
    line = json.dumps(message(1, "user", 1)).replace(str(_ms(1)), stamp)
    path = write(tmp_path / "odd.jsonl", [header(16), line])
    assert active_ms(path) == _ms(16)


def test_a_move_or_label_does_not_bring_an_old_session_first(tmp_path):
    """The list was by file time: looking at an old session (a move, a label) put it on top."""
    old = write(tmp_path / "old.jsonl", [header(), message(1, "user", 1), label(2, 59)])
    new = write(tmp_path / "new.jsonl", [header(), message(1, "user", 20)])
    os.utime(old, (FILE_TIME + 100, FILE_TIME + 100))
    assert find_session_files(tmp_path) == [new, old]


PI_LIST = """
import { SessionManager } from "@mariozechner/pi-coding-agent";
const sessions = await SessionManager.list("/unused", process.argv[1]);
console.log(JSON.stringify(sessions.map((s) => [s.path, s.modified.getTime()])));
"""


@pytest.mark.skipif(
    shutil.which("node") is None or not PI_PACKAGE.is_dir(),
    reason="Pi's SessionManager is not installed (needs node, then `cd bench && npm ci`)",
)
def test_the_same_order_and_times_as_pis_session_list(tmp_path):
    for name, lines in CASES.items():
        if name != "far-future":  # Pi lists it in the year 57,000: no date here, on purpose
            write(tmp_path / f"{name}.jsonl", lines, newline=name != "damaged-end")
    for fixture in PI_FIXTURES.glob("*.jsonl"):  # real files, one of them of the first format
        shutil.copy(fixture, tmp_path / fixture.name)
    done = subprocess.run(
        ["node", "--input-type=module", "-e", PI_LIST, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=BENCH,
    )
    theirs = [(Path(p).name, ms) for p, ms in json.loads(done.stdout)]
    ours = [(p.name, active_ms(p)) for p in find_session_files(tmp_path)]
    assert len(theirs) == len(CASES) + 1
    assert ours == theirs

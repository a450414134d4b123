"""What the command line prints is inert: ids, timestamps, model names, thinking levels and tool
names from a session file never reach the terminal as escape sequences; `--json` stays exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# An OSC 0 (retitle), a clear-screen CSI, a C1 control (CSI as one byte) and a bidi override.
EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"
HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True)


def write(path: Path, entries: list[dict]) -> Path:
    # json.dumps escapes the control characters, as any JSON writer must; the file is valid.
    path.write_text("".join(json.dumps(e) + "\n" for e in [HEADER, *entries]))
    return path


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    ts = "2026-01-01T00:00:00.000Z"
    return write(
        tmp_path / "evil.jsonl",
        [
            {"type": "thinking_level_change", "id": "t" + EVIL, "parentId": None, "timestamp": ts,
             "thinkingLevel": "high" + EVIL},
            {"type": "active_tools_change", "id": "k1", "parentId": "t" + EVIL, "timestamp": ts,
             "activeToolNames": ["read" + EVIL]},
            {"type": "message", "id": "u" + EVIL, "parentId": "k1", "timestamp": ts + EVIL,
             "message": {"role": "user" + EVIL, "content": "hi"}},
            {"type": "message", "id": "a" + EVIL, "parentId": "u" + EVIL, "timestamp": ts,
             "message": {"role": "assistant", "content": [{"type": "text", "text": "ok" + EVIL}],
                         "provider": "p" + EVIL, "model": "m" + EVIL, "stopReason": "stop"}},
        ],
    )  # fmt: skip


def assert_inert(text: str) -> None:
    for ch in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert ch not in text, f"{ch!r} reached the terminal"


@pytest.mark.parametrize(
    "command",
    [
        ["tree"],
        ["tree", "--filter", "default"],
        ["context"],
        ["check"],
    ],
)
def test_text_output_is_inert(hostile: Path, command: list[str]):
    done = run(command[0], str(hostile), *command[1:])
    assert done.returncode == 0, done.stderr
    assert_inert(done.stdout + done.stderr)
    assert "␛]0;pwned" in done.stdout  # shown, as a visible stand-in


def test_context_header_names_are_inert(hostile: Path):
    out = run("context", str(hostile)).stdout
    first = out.splitlines()[0]
    assert "high␛" in first and "read␛" in first and "m␛" in first  # thinking, tools, model


def test_error_messages_echoing_ids_are_inert(hostile: Path):
    done = run("move", str(hostile), "x" + EVIL)
    assert done.returncode == 2 and "no entry" in done.stderr
    assert_inert(done.stderr)
    done = run("context", str(hostile), "--at", "nope" + EVIL)
    assert done.returncode == 2
    assert_inert(done.stderr)


def test_json_output_stays_exact(hostile: Path):
    data = json.loads(run("context", str(hostile), "--json").stdout)
    assert data["thinkingLevel"] == "high" + EVIL
    assert data["messages"][-1]["content"][0]["text"] == "ok" + EVIL


def test_integers_beyond_64_bits_in_json_output(tmp_path: Path):
    """JavaScript writes 1e20 as 100000000000000000000, past what orjson encodes."""
    big = 10**20
    path = write(
        tmp_path / "big.jsonl",
        [
            {"type": "message", "id": "u1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "hi", "timestamp": big}},
        ],
    )  # fmt: skip
    for flag in ("--json", "--llm"):
        done = run("context", str(path), flag)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        text = done.stdout
        assert str(big) in text
        json.loads(text)

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


def test_an_integer_past_64_bits_beside_an_infinity_is_copied(tmp_path: Path):
    """`1e999` reads as an infinity, written as null (as orjson and Pi's JSON.stringify write
    it); beside an integer orjson cannot write, the standard library's fallback refused the
    infinity and `fork` ended in a traceback (QA)."""
    path = write(
        tmp_path / "big.jsonl",
        [
            {"type": "message", "id": "u1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "hi", "timestamp": 1}},
            {"type": "message", "id": "a1", "parentId": "u1", "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "assistant", "content": [], "timestamp": 2, "big": 2**64, "e": 0.5}},
        ],
    )  # fmt: skip
    path.write_text(path.read_text().replace('"e": 0.5', '"e": 1e999'))
    done = run("fork", str(path), "a1", "-o", str(tmp_path / "fork.jsonl"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    copied = json.loads((tmp_path / "fork.jsonl").read_text().splitlines()[-1])["message"]
    assert copied["big"] == 2**64 and copied["e"] is None


def test_an_infinite_usage_is_read_exported_and_imported(tmp_path: Path):
    """A usage figure past a double's range (`1e400`; Pi reads Infinity): `context` and the
    Markdown and HTML exports ended in a traceback (`int` of an infinity), and `import` refused
    the entry and left the session created empty (QA). The figure is not counted; the import
    writes null, as `fork` does."""
    usage = {
        "input": 0.5,
        "output": 1,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0.5,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    path = write(
        tmp_path / "inf.jsonl",
        [
            {"type": "message", "id": "u1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "hi", "timestamp": 1}},
            {"type": "message", "id": "a1", "parentId": "u1", "timestamp": "2026-01-01T00:00:01.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "yo"}], "timestamp": 2,
                         "usage": usage, "stopReason": "stop"}},
            {"type": "message", "id": "u2", "parentId": "a1", "timestamp": "2026-01-01T00:00:02.000Z",
             "message": {"role": "user", "content": "more", "timestamp": 3}},
        ],
    )  # fmt: skip
    path.write_text(path.read_text().replace("0.5", "1e400"))
    for args in (
        ("context", str(path)),
        ("context", str(path), "--json"),
        ("tree", str(path)),
        ("export", str(path), "-o", str(tmp_path / "out.md")),
        ("export", str(path), "-o", str(tmp_path / "out.html")),
    ):
        done = run(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    assert json.loads(run("context", str(path), "--json").stdout)["tokens"] == 2  # "more", estimated
    db = tmp_path / "db.sqlite"
    done = run("import", str(path), "--to", str(db))
    assert "Traceback" not in done.stderr and "1 new; 3 entries added; " in done.stderr, done.stderr
    assert "entries/s" not in done.stderr  # the setup's time, not a speed ("0 entries/s", QA)
    assert "message.usage.input is a number too large to hold" in done.stderr
    sid = done.stdout.split(" → ")[1].split(":")[0]
    said = json.loads(run("context", f"{db}#{sid}", "--json").stdout)
    assert [m["role"] for m in said["messages"]] == ["user", "assistant", "user"]
    assert said["messages"][1]["usage"]["input"] is None


def test_an_undecodable_entry_is_drawn_as_such_and_named_before_a_context(tmp_path, monkeypatch, capsys):
    """A line the index read that fails the full decode: `context` warned that it built from
    what is readable, then failed with "not valid JSON" (QA). The tree draws the entry as
    unreadable; a context through it fails naming its line, before anything is written; one
    beside it is built."""
    from sessiontree.cli import main
    from sessiontree.storage.jsonl import storage
    from sessiontree.storage.scan import LineError

    ts = "2026-01-01T00:00:00.000Z"

    def msg(eid: str, parent: str | None, text: str) -> dict:
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts,
                "message": {"role": "user", "content": text, "timestamp": 1}}  # fmt: skip

    path = write(
        tmp_path / "s.jsonl",
        [msg("u1", None, "q"), msg("a1", "u1", "BAD"), msg("u3", "u1", "side"), msg("u2", "a1", "after")],
    )
    real = storage.decode_entry_dict

    def fails_on_bad(raw):
        if b"BAD" in bytes(raw):
            raise LineError("is not valid JSON (damaged)")
        return real(raw)

    monkeypatch.setattr(storage, "decode_entry_dict", fails_on_bad)
    assert main(["tree", str(path)]) == 1
    assert "a1 (unreadable: line 3 is not valid JSON (damaged))" in capsys.readouterr().out
    assert main(["context", str(path)]) == 2
    said = capsys.readouterr()
    assert said.out == "" and "s.jsonl:3: line 3 is not valid JSON (damaged)" in said.err
    assert main(["context", "--at", "u3", str(path)]) == 0  # its path reads whole
    assert "side" in capsys.readouterr().out


def test_an_entry_that_is_not_utf8_is_read_as_pi_reads_it(tmp_path: Path):
    """One invalid UTF-8 byte in a message: `tree` printed nothing (exit 2) wherever the entry
    was, and `context` warned that it built from what is readable, then failed with "not valid
    JSON" (QA); then it refused any context through it, where Pi reads the file with U+FFFD for
    the bad bytes and sends that (QA). Read so, and said once, with status 1."""
    ts = "2026-01-01T00:00:00.000Z"

    def msg(eid: str, parent: str | None, role: str, text: str) -> dict:
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts,
                "message": {"role": role, "content": text, "timestamp": 1}}  # fmt: skip

    path = write(
        tmp_path / "s.jsonl",
        [msg("u1", None, "user", "q"), msg("a1", "u1", "user", "BAD"), msg("u3", "u1", "user", "side"),
         msg("u2", "a1", "user", "after")],
    )  # fmt: skip
    path.write_bytes(path.read_bytes().replace(b'"BAD"', b'"B\xc3D"'))
    before = path.read_bytes()
    tree = run("tree", str(path))
    assert tree.returncode == 1
    rows = tree.stdout.splitlines()
    assert len(rows) == 4 and all(any(f" {eid} " in r for r in rows) for eid in ("u1", "a1", "u2", "u3"))
    assert any(" a1 " in r and "B\ufffdD" in r for r in rows)  # read as Pi reads it
    said = "line 3 is not valid UTF-8 text (read with U+FFFD in place of its bad bytes, as Pi reads it)"
    assert tree.stderr.count(said) == 1  # said once, not once a check
    assert run("check", str(path)).stdout.count(said) == 1
    context = run("context", str(path))
    assert context.returncode == 1 and "B\ufffdD" in context.stdout and said in context.stderr
    assert "skipped" not in context.stderr
    as_json = json.loads(run("context", "--json", str(path)).stdout)
    assert [m["content"] for m in as_json["messages"]] == ["q", "B\ufffdD", "after"]  # Pi's context
    beside = run("context", "--at", "u3", str(path))
    assert beside.returncode == 1 and "side" in beside.stdout
    assert path.read_bytes() == before

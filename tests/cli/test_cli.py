"""The command line, run as a real subprocess on real files."""

from __future__ import annotations

import io
import json
import os
import pty
import resource
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, A, U
from sessiontree import JsonlStorage, Session, SqliteStorage, open_session
from sessiontree.storage.index import LEAF


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True, check=check
    )


def make(tmp_path):
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        u1 = s.append_message(U("hello \x1b]0;pwned\x07 world"))
        a1 = s.append_message(A("answer"))
        s.append_message(U("second"))
        s.move_to(a1)
        s.append_message(U("other branch"))
    return path, u1, a1


def test_context_text_json_llm(tmp_path):
    path, u1, _a1 = make(tmp_path)
    out = run("context", str(path)).stdout
    assert "3 messages" in out and "other branch" in out and "second" not in out
    assert "\x1b" not in out and "␛]0;pwned␇" in out  # escapes shown, not executed
    data = json.loads(run("context", str(path), "--json").stdout)
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "user"]
    assert data["model"] == {"provider": "anthropic", "modelId": "claude-test"}
    at = json.loads(run("context", str(path), "--at", u1, "--llm").stdout)
    assert len(at) == 1 and at[0]["role"] == "user"


def test_half_a_character_is_escaped_in_json_and_refused_from_the_command_line(tmp_path):
    """A message holding a lone surrogate (Pi's truncation cuts emoji in half; Pi reads the file)
    stopped every `--json` output with a traceback after half the JSON; a summary or label with
    a byte that is not UTF-8 (`$'s\\xff'`) was written as half a character (QA)."""
    path, _u1, a1 = make(tmp_path)
    with path.open("a") as f:  # a user message below the leaf holding "\ud83d" alone
        leaf = open_session(path, read_only=True).leaf_id
        entry = {"type": "message", "id": "halfemoj", "parentId": leaf, "timestamp": "2026-01-01T00:00:00Z",
                 "message": {"role": "user", "content": "half \ud83d here", "timestamp": 1}}  # fmt: skip
        f.write(json.dumps(entry) + "\n")  # as an escape: json.dumps writes ASCII
    for args in (("context", str(path), "--json"), ("context", str(path), "--llm")):
        done = run(*args, check=False)
        assert done.returncode == 0 and "\\ud83d" in done.stdout, (args, done.stderr)
        said = json.dumps(json.loads(done.stdout))
        assert "half \\ud83d here" in said
    before = path.read_bytes()
    for args in (("move", str(path), a1, "--summary", "s\udcff"), ("label", str(path), a1, "x\udcff")):
        done = subprocess.run(
            [sys.executable, "-m", "sessiontree", *[a.encode("utf-8", "surrogateescape") for a in args]],
            capture_output=True,
        )
        assert done.returncode == 2 and b"not valid text: half a character (byte 0xff)" in done.stderr
    assert path.read_bytes() == before


def test_a_standard_stream_closed_at_the_start_gives_the_usual_status(tmp_path):
    """With stdout closed (`>&-`) `tree` ended in an AttributeError traceback; with stderr
    closed, a missing file's status 2 became 1 (QA)."""
    path, _u1, a1 = make(tmp_path)

    def shell(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", f'"{sys.executable}" -m sessiontree {command}'], capture_output=True, text=True
        )

    done = shell(f'tree "{path}" >&-')
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == "sessiontree: cannot write the output: Bad file descriptor\n"
    before = path.read_bytes()
    done = shell(f'label "{path}" {a1} kept >&-')  # written, then its line cannot be said
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert path.read_bytes() != before and open_session(path, read_only=True).get_label(a1) == "kept"
    assert shell(f'context "{tmp_path / "missing.jsonl"}" 2>&-').returncode == 2
    assert shell(f'context "{path}" 2>&- >/dev/null').returncode == 0


def test_an_incomplete_write_another_writer_continued_is_a_note_in_every_command(tmp_path):
    """A write cut short, then another writer's whole entry on the same line (its entry read):
    `check` said ok and exited 0, `context`, `tree`, `export` and `diff` called the file damaged
    and exited 1, `import` counted a line skipped and exited 1 (QA)."""
    path, _u1, _a1 = make(tmp_path)
    leaf = open_session(path, read_only=True).leaf_id
    entry = {"type": "message", "id": "cafe0001", "parentId": leaf, "timestamp": "2026-01-01T00:00:00Z",
             "message": {"role": "user", "content": "after the torn write", "timestamp": 1}}  # fmt: skip
    with path.open("a") as f:
        f.write('{"type":"message","id":"deadbeef","parentId":"' + leaf[:3] + json.dumps(entry) + "\n")
    said = "begins with an incomplete write"
    for args in (
        ("check", str(path)),
        ("context", str(path)),
        ("tree", str(path)),
        ("export", str(path), "-o", str(tmp_path / "out.md")),
        ("diff", str(path), "cafe0001", "cafe0001", "--exit-code"),
        ("import", str(path), "--to", str(tmp_path / "db.sqlite")),
    ):
        done = run(*args, check=False)
        assert done.returncode == 0 and said in done.stdout + done.stderr, (args, done.stderr)
        assert "damaged" not in done.stderr and "1 line skipped" not in done.stderr, (args, done.stderr)
    assert "after the torn write" in run("context", str(path)).stdout


def test_context_text_shows_thinking_failures_and_images_as_the_model_gets_them(tmp_path):
    """The plain context listed an assistant's text and calls only: its thinking, the error it
    stopped on, a failed tool result, a command's exit code and images (by type) were left out."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("look at this"))
        turn = A("Let me run it.")
        turn["content"] = [
            {"type": "thinking", "thinking": "The user wants a run.\n\nFirst the tests."},
            *turn["content"],
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "pytest"}},
        ]
        s.append_message(turn)
        s.append_message(
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "content": [
                    {"type": "text", "text": "1 failed"},
                    {"type": "image", "mimeType": "image/png", "data": "AA=="},
                ],
                "isError": True,
                "timestamp": 3,
            }
        )
        s.append_message(
            {"role": "bashExecution", "command": "make", "output": "boom", "exitCode": 2, "timestamp": 4}
        )
        s.append_message({**A("", model="other-model", stop="error"), "errorMessage": "overloaded"})
        s.append_message(A("again", model="other-model"))
    lines = run("context", str(path)).stdout.split("\n")
    body = "\n".join(lines[1:])
    assert (
        body
        == """
── user ────────────────────────────────────────────────────────
look at this

── assistant · anthropic/claude-test ───────────────────────────
┆ The user wants a run.
┆
┆ First the tests.

Let me run it.

→ bash(command="pytest")

── toolResult · bash · error ───────────────────────────────────
1 failed
[image image/png]

── bashExecution ───────────────────────────────────────────────
$ make
boom
[exit 2]

── assistant · anthropic/other-model · error ───────────────────
[error] overloaded

── assistant ───────────────────────────────────────────────────
again
"""
    )


def test_a_label_of_several_lines_keeps_to_its_row(tmp_path):
    """`tree` split the labelled entry's row in two at the label's newline (QA)."""
    path, u1, _a1 = make(tmp_path)
    before = run("tree", str(path)).stdout.splitlines()
    run("label", str(path), u1, "multi\nline\ttab \x1b[31mred")
    lines = run("tree", str(path)).stdout.splitlines()
    assert len(lines) == len(before) + 1  # the label entry's own row
    assert "[multi line tab ␛[31mred]" in lines[0]


def test_tree_says_on_stderr_when_it_draws_nothing(tmp_path):
    """A session of its header only, or a filter nothing passes, printed nothing at all (QA)."""
    empty = tmp_path / "empty.jsonl"
    JsonlStorage.create(empty, cwd="/p").close()
    done = run("tree", str(empty))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "sessiontree: no entries yet\n")
    path, _u1, _a1 = make(tmp_path)
    done = run("tree", str(path), "--filter", "labeled-only")
    assert done.stdout == "" and done.stderr == "sessiontree: no entry passes the filter labeled-only\n"


def test_tree_prints_forks(tmp_path):
    path, _u1, _a1 = make(tmp_path)
    out = run("tree", str(path)).stdout
    lines = out.splitlines()
    assert len(lines) == 5  # every entry, the leaf entry included
    # The abandoned branch is a block one step in; the active path continues in its column.
    assert [line.split(" ")[0] for line in lines] == ["›", "‹", "├─", "│", "›"]
    assert lines[-1].endswith("← active")


def test_move_and_check(tmp_path):
    path, u1, _a1 = make(tmp_path)
    out = run("move", str(path), u1, "--summary", "left it").stdout
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["type"] == "branch_summary" and last["parentId"] == u1 and last["summary"] == "left it"
    # the id said is the leaf's, the summary's: said as such, beside the entry asked for (QA)
    assert out == f"leaf is now {last['id']}, the branch summary on {u1}\n"
    assert run("check", str(path)).returncode == 0
    bad = run("move", str(path), "nope", check=False)
    assert bad.returncode == 2 and "no entry 'nope' in this session" in bad.stderr
    before = path.read_bytes()
    empty = run("move", str(path), u1, "--summary", " ", check=False)  # wrote an empty summary (QA)
    assert empty.returncode == 2 and "--summary is empty" in empty.stderr and path.read_bytes() == before


def test_move_to_the_leaf_writes_nothing_and_ids_are_taken_in_either_case(tmp_path):
    """A second `move` to the same entry appended another leaf entry, where the app says "That
    entry already is the leaf." (QA); and "3A7C…" was refused, where git takes a hash in
    either case."""
    path, _u1, a1 = make(tmp_path)
    done = run("move", str(path), a1.upper()[:8])
    assert f"leaf is now {a1}" in done.stdout
    before = path.read_bytes()
    again = run("move", str(path), a1)
    assert again.stdout.strip() == f"leaf is already {a1}; nothing written" and path.read_bytes() == before
    run("move", str(path), "--start")
    before = path.read_bytes()
    assert "nothing written" in run("move", str(path), "--start").stdout and path.read_bytes() == before


def test_a_summary_with_no_move_is_refused_not_dropped(tmp_path):
    """`--summary` to where the leaf already is said "nothing written" and exited 0: the
    user's text was gone without a word (QA)."""
    path, _u1, a1 = make(tmp_path)
    run("move", str(path), a1)
    before = path.read_bytes()
    for where in ([a1], ["--start"]):
        if where == ["--start"]:
            run("move", str(path), "--start")
            before = path.read_bytes()
        done = run("move", str(path), *where, "--summary", "important notes", check=False)
        assert done.returncode == 2 and "the summary was not written either" in done.stderr
        assert path.read_bytes() == before


def test_move_and_context_refuse_a_leaf_entry_as_fork_and_export_do(tmp_path):
    """`move` to a `leaf` entry put the leaf on the entry's parent (where the leaf was before
    that move) and `context --at` one answered with that parent's context, while fork and
    export refuse one and name its target (QA)."""
    path, _u1, a1 = make(tmp_path)
    with Session(JsonlStorage.open(path, read_only=True)) as s:
        moved = next(i for i in range(len(s.tree)) if s.tree.kind[i] == LEAF)
        leaf_entry = s.tree.ids[moved]
    before = path.read_bytes()
    for args in (["move", str(path), leaf_entry], ["context", str(path), "--at", leaf_entry, "--json"]):
        done = run(*args, check=False)
        assert done.returncode == 2 and done.stdout == ""
        assert f"is a `leaf` entry (a recorded move of the leaf to {a1})" in done.stderr
        assert f"use its target {a1}" in done.stderr
    assert path.read_bytes() == before
    assert json.loads(run("context", str(path), "--at", a1, "--json").stdout)["leafId"] == a1


def test_check_reports_damage(tmp_path):
    path, _, _ = make(tmp_path)
    with open(path, "ab") as f:
        f.write(b"{broken\n")
    done = run("check", str(path), check=False)
    assert done.returncode == 1 and ":7: error" in done.stdout and "damaged" in done.stdout


def test_upgrade_fixture(tmp_path):
    path = tmp_path / "old.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    assert "upgrade" in run("check", str(path)).stdout
    # v1 entries have no ids: the ones shown are the same on every run and after the upgrade,
    # so one printed by a command works in the next (they were random on each read)
    shown = run("tree", str(path)).stdout
    assert run("tree", str(path)).stdout == shown
    some = shown.splitlines()[40].split()[1]
    assert "Entry" not in run("context", str(path), "--at", some).stderr
    out = run("upgrade", str(path)).stdout
    assert "old.jsonl.bak" in out
    assert json.loads(path.read_text().splitlines()[0])["version"] == 3
    assert run("tree", str(path)).stdout == shown


def test_upgrade_that_cannot_write_says_so_and_changes_nothing(tmp_path):
    """A full disk (here a file size limit) ended `upgrade` in a traceback."""
    path = tmp_path / "old.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    before = path.read_bytes()
    limit = 200_000  # bytes: the upgraded file is ~1 MB

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "upgrade", str(path)],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=small_files,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot write the upgraded file: File too large" in done.stderr
    assert "nothing was changed" in done.stderr
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]


def test_import_into_an_empty_file_or_database_writes_the_schema(tmp_path):
    """An existing SQLite target with no tables (an empty file from `touch`, a database whose
    tables were dropped) was refused: "holds no sessions yet"."""
    path = make(tmp_path)[0]
    (tmp_path / "zero.sqlite").touch()
    conn = sqlite3.connect(tmp_path / "bare.sqlite")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("DROP TABLE t")
    conn.close()
    for name in ("zero.sqlite", "bare.sqlite"):
        done = run("import", str(path), "--to", str(tmp_path / name), "--no-progress", check=False)
        assert done.returncode == 0 and "(new session)" in done.stdout, done.stderr
        assert "other branch" in run("context", str(tmp_path / name)).stdout


def test_import_into_a_missing_directory_is_refused(tmp_path):
    """A typo in the target's directory made a new tree of directories for the database."""
    path = make(tmp_path)[0]
    done = run("import", str(path), "--to", str(tmp_path / "typo" / "db.sqlite"), check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"cannot create the database: {tmp_path / 'typo'} does not exist" in done.stderr
    assert not (tmp_path / "typo").exists()


def test_a_failed_import_says_the_session_it_created_is_empty(tmp_path):
    """A commit that failed (here a file size limit) said "nothing was added" and left an
    empty session, which `check` then read as a good one."""
    path = tmp_path / "big.jsonl"
    shutil.copy(PI_FIXTURES / "before-compaction.jsonl", path)
    db = tmp_path / "db.sqlite"

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))

    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "import", str(path), "--to", str(db), "--no-progress"],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=small_files,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "not imported:" in done.stderr and "was created empty: importing again fills it" in done.stderr
    again = run("import", str(path), "--to", str(db), "--no-progress")
    assert "appended" not in again.stdout and "new entries" in again.stdout  # filled now


def test_an_incomplete_last_line_is_one_verdict_in_every_command(tmp_path):
    """`check` called a file whose last line was cut off ok (status 0) while `tree`,
    `context`, `export`, `diff` and `fork` called it damaged (status 1); in a v1 file the same
    cut was an invalid line, an error. Now it is a note everywhere, status 0, and `upgrade`
    rewrites the file without those bytes, which the backup keeps (refused, a v1 file with a
    torn line could never be written: QA)."""
    v3, u1, a1 = make(tmp_path)
    v1 = tmp_path / "v1.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", v1)
    for path in (v3, v1):
        path.write_bytes(path.read_bytes()[:-40])
        check = run("check", str(path), check=False)
        assert check.returncode == 0 and check.stdout.endswith("ok\n") and "torn_tail" in check.stdout
        assert "invalid_line" not in check.stdout
        out = tmp_path / "out.md"
        commands = [
            ("tree", str(path)),
            ("context", str(path)),
            ("export", str(path), "-o", str(out), "--force"),
        ]
        if path == v3:
            commands += [
                ("diff", str(path), a1, u1),
                ("fork", str(path), a1, "-o", str(tmp_path / "f.jsonl")),
            ]
        for args in commands:
            done = run(*args, check=False)
            assert done.returncode == 0, (args, done.stderr)
            assert "is incomplete" in done.stderr and "damaged" not in done.stderr, (args, done.stderr)
    before = v1.read_bytes()
    done = run("upgrade", str(v1))
    assert "the incomplete last line" in done.stderr and "keeps its bytes" in done.stderr
    assert (tmp_path / "v1.jsonl.bak").read_bytes() == before


def test_a_session_in_a_database_is_found_by_the_start_of_its_id(tmp_path):
    """`db.sqlite#nope` said "Session not found: nope" and named none of the sessions there
    (the bare `db.sqlite` does); an entry's id may be given by its start, a session's could
    not."""
    db = tmp_path / "db.sqlite"
    for sid in ("alpha-1", "alpha-2", "beta-1"):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            s.append_message(U(f"in {sid}"))
    assert "in beta-1" in run("context", f"{db}#BE").stdout
    several = run("context", f"{db}#alpha", check=False)
    assert several.returncode == 2 and several.stderr.count("\n") == 1
    assert "'alpha' starts 2 sessions' ids (alpha-" in several.stderr
    none = run("context", f"{db}#nope", check=False)
    assert none.returncode == 2 and "no session 'nope' in the database (the last active: " in none.stderr
    assert all(sid in none.stderr for sid in ("alpha-1", "alpha-2", "beta-1"))


def test_an_argument_a_command_does_not_take_is_shown_with_its_usage(tmp_path):
    """`context FILE --json WORD` printed the top level's usage, which names no option of the
    command (`move FILE --start ID` did: now its own error, below)."""
    path, _u1, _a1 = make(tmp_path)
    for args in (("context", str(path), "--json", "word"), ("tree", str(path), "--bogus")):
        done = run(*args, check=False)
        assert done.returncode == 2 and done.stderr.startswith(f"usage: sessiontree {args[0]} ")
        assert done.stderr.rstrip().endswith(f"unrecognized arguments: {args[-1]}")


def test_a_misspelt_command_and_pick_on_a_file_say_what_is_wrong(tmp_path):
    """`sessiontree exprot FILE` said "unrecognized arguments: FILE"; `--pick FILE` (or a path
    that does not exist) opened an empty picker saying no session files were found (QA)."""
    path, _u1, _a1 = make(tmp_path)
    done = run("exprot", str(path), check=False)
    assert done.returncode == 2 and "no command 'exprot'; did you mean 'export'?" in done.stderr
    # nothing close: said of the word that is wrong, not of the file after it (QA)
    done = run("bogus", str(path), check=False)
    assert done.returncode == 2 and "no command 'bogus' and no such file" in done.stderr
    assert str(path) not in done.stderr
    for where, why in ((path, "is a file: open it without --pick"), (tmp_path / "nope", "does not exist")):
        done = run("--pick", str(where), check=False)
        assert done.returncode == 2 and done.stdout == ""
        assert f"--pick lists the sessions of a directory; {where} {why}" in done.stderr
    named = tmp_path / "exprot"  # a file of that name is opened, not taken for a typo
    shutil.copyfile(path, named)
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", str(named)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "needs a terminal" in done.stderr


def test_move_says_where_an_incomplete_last_line_went(tmp_path):
    """`move` on a file whose last line was cut off set the line aside in FILE.torn, unsaid."""
    path, u1, _a1 = make(tmp_path)
    with path.open("ab") as f:
        f.write(b'{"type":"message","id":"cut')
    done = run("move", str(path), u1)
    torn = tmp_path / "s.jsonl.torn"
    assert torn.read_bytes() == b'{"type":"message","id":"cut'
    assert f"note: the incomplete last line (27 bytes) was copied to {torn}" in done.stderr


def on_a_terminal(monkeypatch, argv: list[str]) -> tuple[int, bytes]:
    """`main(argv)` with stderr on a pseudo-terminal: its exit status and what stderr showed."""
    from sessiontree.cli import main

    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stderr", terminal)
    status = main(argv)
    terminal.close()
    shown = b""
    while select.select([master], [], [], 0.2)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return status, shown


def test_reading_commands_show_they_are_opening_a_big_file(tmp_path, monkeypatch, capsys):
    """`tree`, `context` and `diff` of a 100k-entry file took 3 s with nothing on the screen
    (QA): the open (here made slow) says so on a terminal, gone before the result."""
    from sessiontree.cli import output

    _, u1, a1 = make(tmp_path)
    monkeypatch.chdir(tmp_path)
    real_open = output.open_session

    def slow_open(*args, **kw):
        time.sleep(0.4)
        return real_open(*args, **kw)

    monkeypatch.setattr(output, "open_session", slow_open)
    monkeypatch.setattr(output, "SPINNER_AFTER", 0.05)
    for argv in (["tree", "s.jsonl"], ["context", "s.jsonl"], ["diff", "s.jsonl", u1, a1]):
        capsys.readouterr()
        status, shown = on_a_terminal(monkeypatch, argv)
        assert status == 0 and b"opening s.jsonl" in shown, argv
        assert b"opening" not in capsys.readouterr().out.encode()


def test_a_long_command_shows_it_is_working_on_a_terminal(tmp_path, monkeypatch, capsys):
    """`check` of a 300k-entry file worked ten seconds with nothing on the screen. On a
    terminal a spinner line says what it is doing (here the check is made slow), and is
    erased before the result; elsewhere nothing is added."""
    from sessiontree.cli import main, output
    from sessiontree.session import Session as SessionClass

    make(tmp_path)
    monkeypatch.chdir(tmp_path)  # a short name: the line is cut to the terminal's width
    path = "s.jsonl"
    real_check = SessionClass.check

    def slow_check(self, **kw):
        time.sleep(0.6)
        return real_check(self, **kw)

    monkeypatch.setattr(SessionClass, "check", slow_check)
    monkeypatch.setattr(output, "SPINNER_AFTER", 0.05)
    status, shown = on_a_terminal(monkeypatch, ["check", str(path)])
    assert status == 0 and b"checking s.jsonl: decoding every entry" in shown
    assert capsys.readouterr().out.endswith("ok\n")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: nothing but the result
    assert main(["check", str(path)]) == 0
    assert sys.stderr.getvalue() == ""


def test_an_interrupted_import_says_where_it_stopped(tmp_path, monkeypatch, capsys):
    """Ctrl+C in an import exited 130 saying nothing, though the batches written stay and the
    next import goes on from them."""
    from sessiontree.cli import importing as importing_cli
    from sessiontree.cli import main
    from sessiontree.importing import ImportProgress

    path = make(tmp_path)[0]

    def interrupted(source, target, *, file_number, files, progress):
        progress(ImportProgress(str(source), file_number, files, 3_000, 9_000))
        raise KeyboardInterrupt

    monkeypatch.setattr(importing_cli, "import_file", interrupted)
    assert main(["import", str(path), "--to", str(tmp_path / "db.sqlite"), "--no-progress"]) == 130
    said = capsys.readouterr().err
    assert f"interrupted in {path} (file 1 of 1) after ~3,000 entries" in said
    assert "importing again goes on from there" in said


def test_missing_file_is_a_clear_error(tmp_path):
    done = run("context", str(tmp_path / "nope.jsonl"), check=False)
    assert done.returncode == 2 and "no such session file" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's /sys")
@pytest.mark.parametrize("where", ["db.sqlite", "new-dir/db.sqlite"])
def test_import_into_a_place_nobody_may_write_is_one_line(tmp_path, where):
    """A database that cannot be created there ended in a traceback (a read-only mount)."""
    path = make(tmp_path)[0]
    done = run("import", str(path), "--to", f"/sys/kernel/{where}", check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "cannot create the database" in done.stderr


def test_a_refused_import_does_not_say_lines_were_imported_as_roots(tmp_path):
    """A file refused (it changed since it was imported) wrote nothing, but its report said a
    line was "imported as a root" and the summary "1 written as roots" (QA)."""
    path, _u1, _a1 = make(tmp_path)
    db = tmp_path / "s.sqlite"
    run("import", str(path), "--to", str(db))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:40] + b"\n"  # the first answer cut: what follows it hangs off nothing
    path.write_bytes(b"".join(lines))
    done = run("import", str(path), "--to", str(db), check=False)
    assert done.returncode == 1 and "refused:" in done.stderr and "nothing was written" in done.stderr
    assert "imported as a root" not in done.stderr and "written as roots" not in done.stderr
    assert "1 refused; 0 entries added; 1 line skipped" in done.stderr


@pytest.mark.parametrize("command", [["context"], ["context", "--json"], ["context", "--llm"], ["tree"]])
def test_reading_a_damaged_session_says_so_and_exits_1(tmp_path, command):
    """A line cut short cut the path to the leaf too: `context` gave another thinking level and
    no tools, silently and with exit status 0."""
    path, _u1, _a1 = make(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:40] + b"\n"  # the first answer, the parent of what follows
    path.write_bytes(b"".join(lines))
    done = run(*command, str(path), check=False)
    assert done.returncode == 1 and done.stdout
    assert done.stderr.count("\n") == 1 and "is damaged" in done.stderr and "line 3" in done.stderr
    (tmp_path / "clean").mkdir()
    clean = make(tmp_path / "clean")[0]
    assert run(*command, str(clean)).stderr == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["tree", "--width", "0"], "0 is less than 40"),
        (["diff", "--width", "-5", "a", "b"], "-5 is less than 40"),
        (["export", "--max-result", "-1"], "-1 is less than 0"),
        (["tree", "--width", "wide"], "'wide' is not a whole number"),
    ],
)
def test_number_options_out_of_range_are_refused(tmp_path, args, said):
    """They were taken: `--width 0` drew at 40 without a word, `--max-result -1` cut nothing."""
    path = make(tmp_path)[0]
    done = run(args[0], str(path), *args[1:], check=False)
    assert done.returncode == 2 and said in done.stderr and done.stdout == ""


def test_the_browser_without_a_terminal_says_what_to_run_instead(tmp_path):
    """With stdin from /dev/null (a script, cron) the app started anyway, wrote escape codes
    and waited for keys that never came until it was killed (QA)."""
    path, _u1, _a1 = make(tmp_path)
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "needs a terminal" in done.stderr and "sessiontree tree FILE" in done.stderr
    assert "\x1b" not in done.stderr and path.read_bytes() == before
    # a file that is not there is said first: "needs a terminal" sent a script the wrong way (QA)
    missing = subprocess.run(
        [sys.executable, "-m", "sessiontree", str(tmp_path / "nosuch.jsonl")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2 and missing.stderr.endswith("no such session file [not_found]\n")


def _long_session(tmp_path, turns: int = 400):
    path = tmp_path / "long.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(turns):
            s.append_message(U(f"question {n} " + "words " * 30))
            s.append_message(A(f"answer {n}"))
    return path


@pytest.mark.parametrize("args", [["context"], ["context", "--json"], ["tree"], ["check"], ["export"]])
def test_output_that_cannot_be_written_is_said_in_one_line(tmp_path, args):
    """A full disk under stdout (`> /dev/full`) ended in a Python traceback."""
    path = _long_session(tmp_path)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "sessiontree", *args[:1], str(path), *args[1:]],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.stderr == "sessiontree: cannot write the output: No space left on device\n"
    assert done.returncode == 1


def test_a_reader_that_goes_away_gives_the_status_of_sigpipe(tmp_path):
    """`sessiontree tree FILE | head -1` exited 0, so with `pipefail` a cut-short `check` of a
    damaged file read as clean; now it is what `cat` gives (128 + SIGPIPE), and quiet."""
    path = _long_session(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "sessiontree", "tree", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline()
    process.stdout.close()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE
    assert process.stderr.read() == b""


def test_ctrl_c_while_the_command_line_loads_ends_quietly(monkeypatch):
    """The script pip writes imports the command line before `main` can catch anything: Ctrl+C
    in that first tenth of a second printed a traceback."""
    import importlib.abc

    from sessiontree import entry

    class Interrupting(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "sessiontree.cli":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "sessiontree.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    assert entry.run() == 130


def test_check_reports_a_file_that_is_no_session_like_any_other_problem(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "words.jsonl").write_text("just words\n")
    empty = run("check", str(tmp_path / "empty.jsonl"), check=False)
    assert empty.returncode == 1
    assert empty.stdout.splitlines() == [
        f"{tmp_path / 'empty.jsonl'}: error: the file is empty (no session header); nothing to open"
        " [invalid_session]",
        "damaged",
    ]
    words = run("check", str(tmp_path / "words.jsonl"), check=False)
    assert words.stdout.startswith(f"{tmp_path / 'words.jsonl'}:1: error: the first line is not valid JSON")


def test_check_advises_upgrade_only_where_upgrade_would_work(tmp_path):
    """A damaged or torn v1 file was told to run `upgrade`, which then refused it."""
    lines = (PI_FIXTURES / "large-session.jsonl").read_bytes().splitlines(keepends=True)
    clean, damaged, torn = tmp_path / "clean.jsonl", tmp_path / "damaged.jsonl", tmp_path / "torn.jsonl"
    clean.write_bytes(b"".join(lines))
    damaged.write_bytes(b"".join([*lines[:299], b"garbage\n", *lines[300:]]))
    torn.write_bytes(b"".join(lines)[:-30])
    assert f"note: run `sessiontree upgrade {clean}`" in run("check", str(clean)).stdout
    said = run("check", str(damaged), check=False).stdout
    export = f"`sessiontree export {damaged} --format jsonl -o NEW.jsonl` writes what is readable as v3"
    assert f"note: format v1; `sessiontree upgrade` refuses the damaged lines above: {export}" in said
    refused = run("upgrade", str(damaged), check=False)
    assert refused.returncode == 2 and export in refused.stderr
    # A torn last line: refused, the file could never be written again (an old format is
    # read-only, and the line is set aside only by a write: QA). Upgraded, the backup keeps it.
    said = run("check", str(torn), check=False).stdout
    assert "(a backup is kept; the incomplete last line is left out, the backup keeps it)" in said
    before = torn.read_bytes()
    done = run("upgrade", str(torn))
    assert "the incomplete last line (line" in done.stderr and ".bak keeps its bytes" in done.stderr
    assert (tmp_path / "torn.jsonl.bak").read_bytes() == before
    with open_session(torn) as session:  # writable now
        assert session.format_version == 3 and not session.read_only
        assert session.entry_count() == len(lines) - 2  # the header and the torn last line


def test_move_takes_its_id_after_an_option_and_refuses_it_beside_start(tmp_path):
    """`move FILE --start ID` said "unrecognized arguments: ID", and `move FILE --summary S ID`
    failed the same way: argparse's first pass had passed the optional ID by."""
    path, _u1, a1 = make(tmp_path)
    both = run("move", str(path), "--start", a1, check=False)
    assert both.returncode == 2
    assert both.stderr == "sessiontree: give the entry to move to, or --start, not both [invalid_argument]\n"
    neither = run("move", str(path), check=False)
    assert neither.returncode == 2 and "give the entry to move to, or --start" in neither.stderr
    run("move", str(path), "--summary", "left it", a1)
    with open_session(path, read_only=True) as session:
        leaf = session.require_entry(session.leaf_id)
        assert leaf.type == "branch_summary" and leaf.parent_id == a1
    extra = run("context", str(path), "--json", "extra", check=False)
    assert extra.returncode == 2
    assert "sessiontree context: error: unrecognized arguments: extra" in extra.stderr


def test_a_directory_named_like_a_database_is_said_to_be_one(tmp_path):
    """SQLite calls a directory a "disk I/O error" (`import --to adir.sqlite`: QA)."""
    path, _u1, _a1 = make(tmp_path)
    (tmp_path / "adir.sqlite").mkdir()
    for args in (
        ("tree", str(tmp_path / "adir.sqlite")),
        ("import", str(path), "--to", str(tmp_path / "adir.sqlite")),
    ):
        done = run(*args, check=False)
        assert done.returncode == 2
        assert (
            done.stderr
            == f"sessiontree: {tmp_path / 'adir.sqlite'}: is a directory, not a database [storage]\n"
        )


def test_an_error_that_is_not_the_outputs_is_not_called_one(tmp_path, monkeypatch, capsys):
    """Only a failed write of stdout is "cannot write the output": another OSError (here a
    read of the session failing) is not dressed up as one."""
    from sessiontree.cli import main
    from sessiontree.cli import output as output_cli

    path = _long_session(tmp_path)

    def failing(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(output_cli, "open_session", failing)
    with pytest.raises(OSError, match="Input/output error"):
        main(["context", str(path)])
    assert "cannot write the output" not in capsys.readouterr().err


def test_check_keeps_a_file_name_with_a_newline_on_one_line(tmp_path):
    path, _u1, _a1 = make(tmp_path)
    odd = tmp_path / "two\nlines.jsonl"
    shutil.copyfile(path, odd)
    said = run("check", str(odd)).stdout.splitlines()
    assert said[-2].startswith(f"{tmp_path}/two␊lines.jsonl: format v3") and said[-1] == "ok"


@pytest.mark.parametrize(
    "address",
    [
        "postgresq://me:SECRET@127.0.0.1:1/db#aa5",  # a typo: taken for a file name
        "postgresql:/me:SECRET@127.0.0.1:1/db#aa5",
        "pgsql://me:SECRET@127.0.0.1:1/db",
        "postgresql+psycopg://me:SECRET@127.0.0.1:1/db#x",
        "POSTGRESQL://me:SECRET@127.0.0.1:1/db#x",  # upper case: libpq said 'missing "="'
        "postgresql://me:SECRET@127.0.0.1:1/db#x",
    ],
)
def test_a_password_in_a_misspelt_url_is_never_printed(address):
    """A URL not read as PostgreSQL's was printed back whole, password included ("no such
    session file"); `--pick URL` too, and it said the database "does not exist"."""
    done = run("check", address, check=False)
    assert done.returncode == 2 and "SECRET" not in done.stdout + done.stderr, done.stderr
    assert "me:***@" in done.stderr and "missing" not in done.stderr
    if not address.lower().startswith("postgresql://"):
        assert "not a PostgreSQL URL: those start with postgresql:// or postgres://" in done.stderr
    picked = run("--pick", address.partition("#")[0], check=False)
    assert picked.returncode == 2 and "SECRET" not in picked.stdout + picked.stderr


def test_label_sets_and_clears_a_label_from_a_script(tmp_path):
    """Labels could be set only in the app (`m`): `sessiontree label` printed the browser's
    help, or took "label" for a file (QA)."""
    path, u1, _a1 = make(tmp_path)
    done = run("label", str(path), u1[:6], "checkpoint")
    with open_session(path, read_only=True) as session:
        assert session.get_label(u1) == "checkpoint"
        written = session.leaf_id
    assert done.stdout == f"labelled {u1} 'checkpoint' (label entry {written}, now the leaf)\n"
    before = path.read_bytes()
    assert run("label", str(path), u1, "checkpoint").stdout.endswith("nothing written\n")
    assert path.read_bytes() == before
    run("label", str(path), u1)
    with open_session(path, read_only=True) as session:
        assert session.get_label(u1) is None
    assert run("label", str(path), u1).stdout == f"{u1} has no label; nothing written\n"
    bad = run("label", str(path), "nope", "x", check=False)
    assert bad.returncode == 2 and "no entry 'nope'" in bad.stderr
    # a `leaf` record (the one `make`'s move wrote) is refused, as `move` refuses it (QA)
    with open_session(path, read_only=True) as session:
        record = next(e.id for e in session.get_entries() if e.type == "leaf")
    before = path.read_bytes()
    refused = run("label", str(path), record, "x", check=False)
    assert refused.returncode == 2 and "use its target" in refused.stderr and path.read_bytes() == before


def test_a_write_refused_by_another_writer_says_to_wait_not_to_open_read_only(tmp_path):
    """With the app open on a session, `move` said "open it read-only, or wait": a move cannot
    be made read-only (QA)."""
    path, u1, _a1 = make(tmp_path)
    with open_session(path):  # another writer, as the app browsing it
        for args in (("move", str(path), u1), ("label", str(path), u1, "x")):
            refused = run(*args, check=False)
            assert refused.returncode == 2 and "is open for writing in another process" in refused.stderr
            assert "read-only" not in refused.stderr
            assert "try again once that process has closed it" in refused.stderr


def test_check_takes_several_files_and_directories(tmp_path):
    """`check ~/.pi/agent/sessions` said "is a directory", and `check */*.jsonl` "unrecognized
    arguments" (QA). A directory stands for its *.jsonl files; each is reported, then a count,
    and the status is the worst of them."""
    sessions = tmp_path / "sessions"
    (sessions / "--p--").mkdir(parents=True)
    good, _u1, _a1 = make(sessions / "--p--")
    bad = sessions / "--p--" / "bad.jsonl"
    bad.write_bytes(good.read_bytes() + b"garbage\n")
    done = run("check", str(sessions), check=False)
    assert done.returncode == 1
    assert f"{bad}:" in done.stdout and f"{good}: format v3" in done.stdout
    assert done.stdout.endswith("2 files: 1 ok, 1 damaged\n")
    both = run("check", str(good), str(tmp_path / "nosuch.jsonl"), check=False)
    assert both.returncode == 2 and both.stdout.endswith("2 files: 1 ok, 0 damaged, 1 not read\n")
    assert "nosuch.jsonl: cannot be checked: no such session file" in both.stdout
    assert run("check", str(good)).stdout.endswith("ok\n")  # one file: as it was
    (tmp_path / "none").mkdir()
    none = run("check", str(tmp_path / "none"), check=False)
    assert none.returncode == 2 and "no session files (*.jsonl) under this directory" in none.stderr


def test_check_of_a_database_checks_each_of_its_sessions(tmp_path):
    """`check team.sqlite` refused ("add #SESSION_ID") where `check DIR` checks each file (QA)."""
    db = tmp_path / "team.sqlite"
    for sid in ("s-a", "s-b"):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            s.append_message(U(f"in {sid}"))
    done = run("check", str(db))
    assert f"{db}#s-a: format v3, 1 entry" in done.stdout and f"{db}#s-b: format v3" in done.stdout
    assert done.stdout.endswith("2 sessions: 2 ok, 0 damaged\n")
    empty = tmp_path / "empty.sqlite"
    SqliteStorage.create(empty, cwd="/p", session_id="gone").close()

    with sqlite3.connect(empty) as conn:
        conn.execute("DELETE FROM sessions")
    none = run("check", str(empty), check=False)
    assert none.returncode == 2 and "the database holds no sessions" in none.stderr
    both = run("check", str(empty), str(db), check=False)  # the others are still checked (QA)
    assert both.returncode == 2 and f"{db}#s-b: format v3" in both.stdout
    assert both.stdout.endswith("3 sessions: 2 ok, 0 damaged, 1 not read\n")


def test_check_counts_a_damaged_database_as_damage_for_each_session(tmp_path):
    """A database with a page overwritten: `check` said "cannot be checked: the database is
    damaged" once per session, naming none, and exited 2 (not read) where damage is 1 (QA)."""
    db = tmp_path / "team.sqlite"
    sids = ("s-a", "s-b", "s-c")
    for sid in sids:
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            for k in range(300):
                s.append_message(U(f"{sid} {k} " + "x" * 500))
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(bytes(range(256)) * 32)  # 8 KB of garbage over two pages in the middle
    done = run("check", str(db), check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    for sid in sids:
        assert f"{db}#{sid}: error: the database is damaged (" in done.stdout, done.stdout
    assert "[damaged_database]" in done.stdout and "cannot be checked" not in done.stdout
    assert done.stdout.endswith("3 sessions: 0 ok, 3 damaged\n")
    one = run("check", f"{db}#s-b", check=False)
    assert one.returncode == 1 and one.stdout.endswith("damaged\n") and one.stderr == ""


@pytest.mark.parametrize("table", ["sessions", "session_state"])
def test_check_counts_a_database_too_damaged_to_list_as_damaged(tmp_path, table):
    """Garbage over a page that the list of sessions reads: `check` said "not a usable
    sessiontree database" or "the database is damaged" as an error of the command, status 2
    (QA)."""
    db = tmp_path / "team.sqlite"
    for sid in ("s-a", "s-b"):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            for k in range(300):
                s.append_message(U(f"{sid} {k} " + "x" * 500))
    with closing(sqlite3.connect(db)) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        (page,) = conn.execute("PRAGMA page_size").fetchone()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page)
        f.write(bytes(range(256)) * (page // 256))
    done = run("check", str(db), check=False)
    assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
    said, verdict = done.stdout.splitlines()[-2:]
    assert said.startswith(f"{db}: error: ") and said.endswith("[damaged_database]") and verdict == "damaged"
    other = tmp_path / "ok.sqlite"
    with Session(SqliteStorage.create(other, cwd="/p", session_id="fine")) as s:
        s.append_message(U("fine"))
    both = run("check", str(db), str(other), check=False)
    assert both.returncode == 1 and both.stdout.endswith("2 sessions: 1 ok, 1 damaged\n"), both.stdout


def test_check_finds_an_index_that_does_not_match_its_table(tmp_path):
    """`quick_check` does not compare an index with its table: a database whose indexes had
    lost entries checked ok, while every import into it failed on an id "already there" (QA).
    The check is SQLite's `integrity_check`, once for the database however many sessions."""
    db = tmp_path / "team.sqlite"
    for sid in ("s-a", "s-b"):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            for k in range(20):
                s.append_message(U(f"{sid} {k}"))
    with closing(sqlite3.connect(db)) as conn:  # the index no longer holds what its table does
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'parent_id', 'timestamp')"
            " WHERE name = 'entries_by_parent'"
        )
        conn.commit()
    done = run("check", str(db), check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.count("missing from index entries_by_parent") >= 2  # said for each session
    assert done.stdout.endswith("2 sessions: 0 ok, 2 damaged\n")


def test_check_counts_a_file_named_twice_once(tmp_path):
    """`check demo.jsonl .` reported "2 files: 2 ok" for one file (QA)."""
    path, _u1, _a1 = make(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "check", path.name, ".", f"./{path.name}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(f"{path.name}: format v3") == 1
    assert done.stdout.endswith("1 file: 1 ok, 0 damaged\n")


def test_check_of_sessions_given_by_address_counts_sessions(tmp_path):
    """`check db#a db#b` ended "2 files: …" of two sessions of one database (QA)."""
    db = tmp_path / "team.sqlite"
    for sid in ("s-a", "s-b"):
        with Session(SqliteStorage.create(db, cwd="/p", session_id=sid)) as s:
            s.append_message(U(sid))
    done = run("check", f"{db}#s-a", f"{db}#s-b")
    assert done.stdout.endswith("2 sessions: 2 ok, 0 damaged\n")


def test_context_gives_a_tool_calls_arguments_whole_and_says_an_answer_cut_at_the_limit(tmp_path):
    """`context` cut a call's arguments at ~400 characters without a word, where results are
    whole; an answer stopped at the output limit read as whole (QA). A name written with "\\r\\n"
    showed `␍` in one-line places."""
    path = tmp_path / "s.jsonl"
    query = "Q" * 1_000
    call = {"type": "toolCall", "id": "c1", "name": "search", "arguments": {"query": query, "n": 3}}
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("find it"))
        s.append_message({**A(""), "content": [call], "stopReason": "toolUse"})
        s.append_message({**A("the first half of"), "stopReason": "length"})
        s.append_session_name("Line1\r\nLine2\rLine3")
    said = run("context", str(path)).stdout
    assert f'search(query="{query}", n=3)' in said
    assert "assistant · stopped: the answer reached the model's output token limit" in said
    assert "Line1 Line2 Line3" in run("tree", str(path)).stdout
    out = tmp_path / "s.md"
    run("export", str(path), "-o", str(out))
    assert "*Stopped (length): the answer reached the model's output token limit*" in out.read_text()


def test_importing_an_unchanged_damaged_file_again_exits_0(tmp_path):
    """The second import of a file with a loop said nothing ("unchanged") and exited 1 (QA)."""
    entries = [
        {"type": "message", "id": f"m{k}", "parentId": f"m{k - 1}" if k else None,
         "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": f"t{k}", "timestamp": 1}}
        for k in range(5)
    ]  # fmt: skip
    entries[1]["parentId"] = "m3"  # m1 hangs under its own descendant
    header = {
        "type": "session",
        "version": 3,
        "id": "loop",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/p",
    }
    path = tmp_path / "loop.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *entries]))
    db = str(tmp_path / "db.sqlite")
    first = run("import", str(path), "--to", db, "--no-progress", check=False)
    assert first.returncode == 1 and "make a loop" in first.stderr
    again = run("import", str(path), "--to", db, "--no-progress", check=False)
    assert again.returncode == 0 and "unchanged" in again.stdout

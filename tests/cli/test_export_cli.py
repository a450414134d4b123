"""`sessiontree export`, `fork` and `diff`, run as real subprocesses on real files: what they
print, what they write, and how each kind of bad input ends (one line on stderr, nothing
half-written, a meaningful exit status)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import A, U
from sessiontree import JsonlStorage, Session, SqliteStorage, open_session


def run(*args: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True, check=check, cwd=cwd
    )


def make(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "s.jsonl"
    ids = {}
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        ids["u1"] = s.append_message(U("hello \x1b]0;pwned\x07 world"))
        ids["a1"] = s.append_message(A("answer with ```` fences ```` inside"))
        ids["label"] = s.append_label(ids["a1"], "kept")
        ids["u2"] = s.append_message(U("second"))
        ids["a2"] = s.append_message(A("second answer"))
        s.move_to(ids["a1"])
        ids["leaf_entry"] = s.leaf_moves()[-1].entry_id
        ids["u3"] = s.append_message(U("other branch"))
        ids["a3"] = s.append_message(A("other answer"))
    return path, ids


def test_export_markdown_to_stdout(tmp_path):
    path, ids = make(tmp_path)
    done = run("export", str(path))
    assert done.stderr == ""
    assert "### User" in done.stdout and "other branch" in done.stdout and "second answer" not in done.stdout
    assert "\x1b" not in done.stdout and "␛]0;pwned␇" in done.stdout  # inert, like every text output
    assert "label **kept**" in done.stdout
    at = run("export", str(path), "--at", ids["a2"], "--format", "md").stdout
    assert "second answer" in at and "other branch" not in at


def test_export_writes_files_in_each_format(tmp_path):
    path, ids = make(tmp_path)
    for name in ("out.md", "out.jsonl", "out.html"):
        done = run("export", str(path), "-o", str(tmp_path / name))
        assert done.stdout.startswith(f"wrote {tmp_path / name} ({name.split('.')[1]},")
    assert (tmp_path / "out.md").read_text().startswith("# Session ")
    with open_session(tmp_path / "out.jsonl", read_only=True) as copy:
        assert copy.leaf_id == ids["a3"] and copy.entry_count() == 4  # u1 a1 u3 a3
    assert (tmp_path / "out.html").read_text().startswith("<!DOCTYPE html>")
    jsonl = run("export", str(path), "--format", "jsonl", "--at", ids["u2"]).stdout
    assert [json.loads(line)["type"] for line in jsonl.splitlines()] == [
        "session",
        "message",
        "message",
        "label",
        "message",
    ]


def test_an_export_of_a_leaf_at_the_start_says_it_holds_no_entries(tmp_path):
    """With the leaf moved to the start, export wrote a file of a header alone, unsaid (QA)."""
    path, _ids = make(tmp_path)
    with Session(JsonlStorage.open(path)) as s:
        s.move_to(None)
    for fmt, name in (("md", "out.md"), ("jsonl", "out.jsonl")):
        done = run("export", str(path), "-o", str(tmp_path / name))
        assert done.returncode == 0
        said = "sessiontree: note: the leaf is at the start, before the first entry: the export holds"
        assert f"{said} none of the session's 9 entries (--at ID ends it elsewhere)" in done.stderr, fmt
    done = run("export", str(path), "-o", str(tmp_path / "out.html"))  # the page shows every entry
    assert done.returncode == 0 and "note" not in done.stderr


def test_existing_output_is_refused_unless_forced(tmp_path):
    path, _ = make(tmp_path)
    target = tmp_path / "taken.md"
    target.write_text("precious")
    done = run("export", str(path), "-o", str(target), check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.count("\n") == 1
        and "already exists; --force replaces it [invalid_argument]" in done.stderr
    )
    assert target.read_text() == "precious"
    run("export", str(path), "-o", str(target), "--force")
    assert target.read_text().startswith("# Session")


def test_no_output_replaces_the_session_it_copies_even_forced(tmp_path):
    """`-o` naming the source (or a link to it) with `--force` swapped the session for a copy of
    one path: its other branches were gone."""
    path, _ = make(tmp_path)
    (tmp_path / "link.jsonl").symlink_to(path)
    db = tmp_path / "s.sqlite"
    with Session(SqliteStorage.create(db, cwd="/p")) as s:
        s.append_message(U("in a database"))
        sid = s.session_id
    before = {p: p.read_bytes() for p in (path, db)}
    runs = [
        ("export", str(path), "-o", str(path), "--force", "--format", "jsonl"),
        ("export", str(path), "-o", str(tmp_path / "link.jsonl"), "--force"),
        ("fork", str(path), "-o", str(path), "--force", leaf_of(path)),
        ("export", f"{db}#{sid}", "-o", str(db), "--force", "--format", "jsonl"),
    ]
    for args in runs:
        done = run(*args, check=False)
        assert done.returncode == 2 and done.stdout == "", args
        assert done.stderr.count("\n") == 1 and "holds the session being read" in done.stderr, args
    assert {p: p.read_bytes() for p in (path, db)} == before
    assert (tmp_path / "link.jsonl").is_symlink()


def test_forced_output_replaces_only_a_regular_file(tmp_path):
    """`--force` renamed the new file over whatever held the name: as root, `export -o
    /dev/null --force` replaced the null device with a file of the export (not tried here:
    a device takes the same path as the pipe); a named pipe or a symbolic link became a file
    too (the link's own file left as it was)."""
    path, _ = make(tmp_path)
    (tmp_path / "kept.jsonl").write_text("the link's file")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "kept.jsonl")
    os.mkfifo(tmp_path / "pipe.jsonl")
    refusals = (("link.jsonl", "is a symbolic link (to "), ("pipe.jsonl", "is a named pipe, not a file"))
    for name, says in refusals:
        target = tmp_path / name
        for args in (
            ("export", str(path), "-o", str(target), "--force"),
            ("fork", str(path), "-o", str(target), "--force", leaf_of(path)),
        ):
            done = run(*args, check=False)
            assert done.returncode == 2 and done.stdout == "", args
            assert done.stderr.count("\n") == 1 and says in done.stderr, (args, done.stderr)
    assert (tmp_path / "link.jsonl").is_symlink()
    assert (tmp_path / "kept.jsonl").read_text() == "the link's file"
    assert (tmp_path / "pipe.jsonl").is_fifo()


def test_forced_output_never_replaces_a_session_another_process_writes(tmp_path):
    """`fork … -o live.jsonl --force` replaced a session another process had open for writing:
    that writer's next append failed and everything it had written was gone (QA)."""
    path, _ = make(tmp_path)
    live = tmp_path / "live.jsonl"
    with Session(JsonlStorage.create(live, cwd="/p")) as s:
        s.append_message(U("kept"))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(live)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "open\n"
        before = live.read_bytes()
        for args in (
            ("export", str(path), "-o", str(live), "--force", "--format", "jsonl"),
            ("fork", str(path), "-o", str(live), "--force", leaf_of(path)),
        ):
            done = run(*args, check=False)
            assert done.returncode == 2 and done.stdout == "", args
            assert "is a session open for writing (pid " in done.stderr, done.stderr
            assert f"pid {writer.pid}" in done.stderr and done.stderr.count("\n") == 1
        assert live.read_bytes() == before
    finally:
        writer.communicate("")  # it appends once more, then closes
    assert writer.returncode == 0
    said = run("context", str(live)).stdout
    assert "kept" in said and "after" in said
    run("export", str(path), "-o", str(live), "--force", "--format", "jsonl")  # no writer now


def test_forced_output_never_replaces_a_database(tmp_path):
    """`export … -o store.sqlite --force` replaced a database of sessions, one of them open for
    writing in the app, with a one-session JSONL file; SQLite's -wal, left beside it, belonged
    to the database gone (QA). A database is never an earlier export to replace."""
    path, _ = make(tmp_path)
    db = tmp_path / "store.sqlite"
    with Session(SqliteStorage.create(db, cwd="/p")) as s:
        s.append_message(U("in a database"))
        sid = s.session_id
    with open_session(f"{db}#{sid}") as held:  # written meanwhile, as in the app
        before = db.read_bytes()
        for args in (
            ("export", str(path), "-o", str(db), "--force", "--format", "jsonl"),
            ("export", str(path), "-o", str(db), "--force", "--format", "html"),
        ):  # (`fork` writes only a name ending in .jsonl)
            done = run(*args, check=False)
            assert done.returncode == 2 and done.stdout == "", args
            assert "is a SQLite database; --force replaces an earlier export, never a database" in done.stderr
            assert done.stderr.count("\n") == 1
        assert db.read_bytes() == before
        held.append_message(U("still written"))
    assert "still written" in run("context", f"{db}#{sid}").stdout


WRITER = """
import sys
from sessiontree import open_session
s = open_session(sys.argv[1])
print("open", flush=True)
sys.stdin.read()
s.append_message({"role": "user", "content": "after"})
s.close()
"""


def test_a_session_file_exported_is_private_like_a_fork(tmp_path):
    """`fork` wrote mode 0600 and `export --format jsonl`, the same kind of file, 0644."""
    path, _ = make(tmp_path)
    run("export", str(path), "-o", str(tmp_path / "copy.jsonl"))
    run("fork", str(path), leaf_of(path), "-o", str(tmp_path / "fork.jsonl"))
    run("export", str(path), "-o", str(tmp_path / "page.md"))
    for name in ("copy.jsonl", "fork.jsonl"):
        assert (tmp_path / name).stat().st_mode & 0o077 == 0, name
    assert (tmp_path / "page.md").stat().st_mode & 0o777 == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def leaf_of(path: Path) -> str:
    with open_session(path, read_only=True) as s:
        return s.leaf_id or ""


@pytest.mark.parametrize(
    "where",
    ["missing-dir/out.md", "is-a-dir", "s.jsonl/out.md"],
)
def test_unwritable_output_is_one_line_and_leaves_nothing(tmp_path, where):
    path, _ = make(tmp_path)
    (tmp_path / "is-a-dir").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    done = run("export", str(path), "-o", str(tmp_path / where), check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's /sys")
def test_a_directory_nobody_may_write(tmp_path):
    path, _ = make(tmp_path)
    done = run("export", str(path), "-o", "/sys/kernel/sessiontree-export.md", check=False)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot write here" in done.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory(tmp_path):
    path, _ = make(tmp_path)
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        done = run("export", str(path), "-o", str(locked / "x.md"), check=False)
        assert done.returncode == 2 and "cannot write" in done.stderr and done.stderr.count("\n") == 1
    finally:
        locked.chmod(0o700)


def test_bad_ids(tmp_path):
    path, ids = make(tmp_path)
    unknown = run("export", str(path), "--at", "nope", check=False)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.strip().endswith("no entry 'nope' in this session [not_found]")
    leaf = run("export", str(path), "--at", ids["leaf_entry"], "-o", str(tmp_path / "x.md"), check=False)
    assert leaf.returncode == 2 and leaf.stderr.count("\n") == 1
    assert "`leaf` entry" in leaf.stderr and f"use its target {ids['a1']}" in leaf.stderr
    assert not (tmp_path / "x.md").exists()
    label = run("export", str(path), "--at", ids["label"])
    assert label.returncode == 0 and "note:" in label.stderr and "`label` entry" in label.stderr


def damaged(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path, ids = make(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines = [b"{not json\n" if f'"id":"{ids["a1"]}"'.encode() in line else line for line in lines]
    path.write_bytes(b"".join(lines))
    return path, ids


@pytest.mark.parametrize("fmt", ["md", "jsonl", "html"])
def test_damaged_source_exports_what_is_readable_and_exits_1(tmp_path, fmt):
    path, ids = damaged(tmp_path)
    out = tmp_path / f"out.{fmt}"
    done = run("export", str(path), "--at", ids["a3"], "-o", str(out), check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "damaged; exported what is readable" in done.stderr
    assert "line 3" in done.stderr  # the damaged line, by number
    assert out.exists()
    if fmt == "jsonl":
        with open_session(out, read_only=True) as copy:
            assert copy.diagnostics == [] and copy.leaf_id == ids["a3"]
            assert [e.id for e in copy.get_entries()] == [ids["u3"], ids["a3"]]  # cut above u3


def test_sqlite_address(tmp_path):
    db = tmp_path / "s.sqlite"
    with Session(SqliteStorage.create(db, cwd="/p")) as s:
        s.append_message(U("in a database"))
        a = s.append_message(A("yes"))
        sid = s.session_id
    out = run("export", f"{db}#{sid}", "--at", a).stdout
    assert "in a database" in out
    copy = tmp_path / "copy.jsonl"
    run("export", f"{db}#{sid}", "-o", str(copy))
    with open_session(copy, read_only=True) as c:
        assert c.header.parent_session == f"{db}#{sid}" and c.leaf_id == a


def test_fork(tmp_path):
    path, ids = make(tmp_path)
    done = run("fork", str(path), ids["u2"])
    new = Path(done.stdout.removesuffix("\n"))  # the path alone, for NEW=$(sessiontree fork …) (QA)
    assert new.parent == tmp_path and new.exists()
    lines = done.stderr.splitlines()  # what to know about it
    assert "send again" in lines[1] and lines[2] == "second"
    with open_session(new, read_only=True) as fork:
        # Up to the parent of the user message: the label entry, left out, and written again
        # after the path, as Pi's own fork writes labels (which makes it the leaf)
        assert fork.labels() == {ids["a1"]: "kept"}
        # what it says it wrote, labels included (it counted the path alone: QA)
        assert f"({fork.entry_count()} entries)" in lines[0] and fork.entry_count() == 3
        leaf = fork.require_entry(fork.leaf_id)
        assert leaf.type == "label" and leaf.parent_id == ids["a1"]
        assert fork.build_context().messages[-1]["role"] == "assistant"  # a1
    # a relative -o is said absolute, as the default place is (it was given back as typed: QA)
    data = json.loads(run("fork", str(path), ids["a2"], "--json", "-o", "f.jsonl", cwd=tmp_path).stdout)
    assert data["path"] == str(tmp_path / "f.jsonl") and data["resendText"] is None
    with open_session(tmp_path / "f.jsonl", read_only=True) as fork:
        # `leafId` is the file's leaf, the label written after the path (it said the path's end,
        # which `check` and `context --json` contradicted: QA); `endsAt` is where the path ends
        assert data["leafId"] == fork.leaf_id and fork.require_entry(fork.leaf_id).type == "label"
        assert data["endsAt"] == ids["a2"]
    again = run("fork", str(path), ids["a2"], "-o", str(tmp_path / "f.jsonl"), check=False)
    assert again.returncode == 2 and "already exists" in again.stderr
    bad = run("fork", str(path), ids["leaf_entry"], check=False)
    assert bad.returncode == 2 and "`leaf` entry" in bad.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".jsonl").__len__() == 3


def test_diff(tmp_path):
    path, ids = make(tmp_path)
    text = run("diff", str(path), ids["a2"], ids["a3"]).stdout.splitlines()
    assert text[0].startswith(f"--- {ids['a2']}: 4 messages")
    assert text[1].startswith(f"+++ {ids['a3']}: 4 messages")
    assert text[2].startswith("= 2 shared messages")
    assert text[3:] == [
        "-user: second",
        "-assistant: second answer",
        "+user: other branch",
        "+assistant: other answer",
    ]
    data = json.loads(run("diff", str(path), ids["a2"], ids["a3"], "--json").stdout)
    assert data["shared"]["messages"] == 2 and [m["role"] for m in data["b"]["tail"]] == ["user", "assistant"]
    bad = run("diff", str(path), ids["a2"], "nope", check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    # As git's: the status says whether they differ only when asked (a script's `if`).
    assert run("diff", str(path), ids["a2"], ids["a3"], "--exit-code", check=False).returncode == 1
    assert run("diff", str(path), ids["a2"], ids["a2"], "--exit-code").returncode == 0
    assert run("diff", str(path), ids["a2"], ids["a3"], "--json", "--exit-code", check=False).returncode == 1
    # A damaged session is not "they differ" (it said 1 for two identical contexts: QA).
    with path.open("ab") as f:
        f.write(b'{"type":"message", broken\n')
    same = run("diff", str(path), ids["a2"], ids["a2"], "--exit-code", check=False)
    assert same.returncode == 2 and "(the two contexts are identical)" in same.stdout and same.stderr
    assert run("diff", str(path), ids["a2"], ids["a2"], check=False).returncode == 1  # as every command


def test_diff_of_the_same_messages_names_what_else_differs(tmp_path):
    """The same messages under another model said "(the two contexts are identical)" while
    `--exit-code` said they differ (QA)."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("hello"))
        before = s.append_message(A("hi"))
        s.append_model_change("openai", "gpt-5")
        after = s.append_thinking_level_change("high")
    done = run("diff", str(path), before, after, "--exit-code", check=False)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == "(the same messages; the model and thinking level differ)"


def test_a_database_of_several_sessions_needs_the_id(tmp_path):
    """Without `#ID` one of them was read, unsaid; with one session there is nothing to choose."""
    db = tmp_path / "s.sqlite"
    ids = []
    for text in ("first", "second"):
        with Session(SqliteStorage.create(db, cwd="/p")) as s:
            s.append_message(U(text))
            ids.append(s.session_id)
        if len(ids) == 1:
            assert "first" in run("context", str(db)).stdout
    done = run("context", str(db), check=False)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "add #SESSION_ID" in done.stderr and all(sid in done.stderr for sid in ids)
    assert "second" in run("context", f"{db}#{ids[1]}").stdout


def test_ids_may_be_shortened_while_they_name_one_entry(tmp_path):
    path, ids = make(tmp_path)
    a2 = ids["a2"]
    short = next(a2[:k] for k in range(1, len(a2)) if sum(i.startswith(a2[:k]) for i in ids.values()) == 1)
    assert "second answer" in run("export", str(path), "--at", short).stdout
    assert run("diff", str(path), short, ids["a3"][:7]).stdout.startswith(f"--- {a2}:")
    done = run("context", str(path), "--at", "", check=False)
    assert done.returncode == 2 and "no entry '' in this session" in done.stderr


def test_an_output_name_that_says_another_format_is_refused(tmp_path):
    """`-o out.pdf` wrote Markdown and `fork -o fork.md` a session file, unsaid."""
    path, ids = make(tmp_path)
    for args, said in [
        (("export", str(path), "-o", str(tmp_path / "out.pdf")), "cannot tell the format from .pdf"),
        (("fork", str(path), ids["a1"], "-o", str(tmp_path / "fork.md")), "ends in .jsonl"),
        # a directory said "ends in .jsonl" too, with or without --force (QA)
        (("fork", str(path), ids["a1"], "-o", f"{tmp_path}/", "--force"), "is a directory: name the new"),
    ]:
        done = run(*args, check=False)
        assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    run("export", str(path), "-o", str(tmp_path / "out.pdf"), "--format", "md")
    assert (tmp_path / "out.pdf").read_text().startswith("# Session")


def test_export_to_dash_writes_standard_output_and_html_is_not_sent_to_a_terminal(tmp_path):
    """`-o -` made a file named "-"; an HTML page without -o scrolled megabytes of script past a
    terminal (QA). Piped, the page is written as before."""
    path, _ = make(tmp_path)
    done = run("export", str(path), "-o", "-", "--format", "jsonl", cwd=tmp_path)
    assert json.loads(done.stdout.splitlines()[0])["type"] == "session"
    assert not (tmp_path / "-").exists()
    main, other = os.openpty()
    try:
        on_tty = subprocess.run(
            [sys.executable, "-m", "sessiontree", "export", str(path), "--format", "html"],
            stdout=other,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(other)
        os.close(main)
    assert on_tty.returncode == 2 and "not for a terminal; write it to a file (-o FILE)" in on_tty.stderr
    assert run("export", str(path), "--format", "html").stdout.startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("command", ["export", "fork"])
def test_an_empty_output_path_is_refused(tmp_path, command):
    """`export -o ""` (a shell variable left unset) wrote to stdout with status 0."""
    path, ids = make(tmp_path)
    done = run(command, str(path), *([ids["a2"]] if command == "fork" else []), "-o", "", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "argument -o/--output: an empty path (name a file, or leave -o out)" in done.stderr


@pytest.mark.parametrize("fmt", ["html", "jsonl"])
def test_max_result_is_refused_where_it_would_do_nothing(tmp_path, fmt):
    path, _ids = make(tmp_path)
    done = run(
        "export",
        str(path),
        "--format",
        fmt,
        "--max-result",
        "10",
        "-o",
        str(tmp_path / f"x.{fmt}"),
        check=False,
    )
    assert done.returncode == 2 and not (tmp_path / f"x.{fmt}").exists()
    assert f"--max-result cuts the Markdown export's tool results, not {fmt}" in done.stderr

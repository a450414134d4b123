"""Bad input on real files: each case ends in a clear SessionError or a diagnostic, and the file is
never silently rewritten (byte-identical unless an append repairs a torn tail, which keeps the
fragment's bytes in a sidecar)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from helpers import U
from sessiontree import JsonlStorage, Session, SessionError, open_session
from sessiontree.storage.jsonl.verify import check_utf8_elsewhere

HEADER = {
    "type": "session",
    "version": 3,
    "id": "s-1",
    "timestamp": "2025-01-01T00:00:00.000Z",
    "cwd": "/p",
}


def line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def msg(eid: str, parent: str | None, text: str = "x") -> dict:
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1},
    }


def write(tmp_path: Path, *chunks: bytes, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(chunks))
    return path


def test_empty_file(tmp_path):
    path = write(tmp_path, b"")
    with pytest.raises(SessionError) as err:
        JsonlStorage.open(path)
    assert err.value.code == "invalid_session" and "empty" in str(err.value)
    assert path.read_bytes() == b""


def test_missing_header(tmp_path):
    path = write(tmp_path, line(msg("a", None)))
    before = path.read_bytes()
    with pytest.raises(SessionError) as err:
        JsonlStorage.open(path)
    assert err.value.code == "invalid_session" and "header" in str(err.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        (b"not json\n", "not valid JSON"),
        (b"[1,2]\n", "not a JSON object"),
        (line({**HEADER, "version": 9}), "unsupported session version 9"),
        (line({**HEADER, "version": None}), "unsupported session version null "),  # not None (QA)
        (line({**HEADER, "version": True}), "unsupported session version true "),
        (line({**HEADER, "version": "3"}), 'unsupported session version "3" '),
        (line({**HEADER, "id": ""}), "missing session id"),
        (line({"kind": "header", "version": 4, "id": "x"}), "v4"),
        (line({**HEADER, "metadata": [1]}), "metadata"),
    ],
)
def test_invalid_header(tmp_path, header, needle):
    path = write(tmp_path, header, line(msg("a", None)))
    with pytest.raises(SessionError, match=needle) as err:
        JsonlStorage.open(path)
    assert err.value.code == "invalid_session"
    assert str(path) in str(err.value)


def test_blank_lines_are_ignored(tmp_path):
    path = write(
        tmp_path,
        b"\n  \n",
        line(HEADER),
        b"\n",
        line(msg("a", None)),
        b"   \n\n",
        line(msg("b", "a")),
    )
    with open_session(path) as s:
        assert [e.id for e in s.get_entries()] == ["a", "b"]
        assert s.diagnostics == [] and not s.read_only
        assert s.storage.line_number("b") == 8


def test_interior_garbage_line_opens_read_only(tmp_path):
    path = write(tmp_path, line(HEADER), line(msg("a", None)), b"{garbage\n", line(msg("b", "a")))
    before = path.read_bytes()
    with open_session(path) as s:
        assert [e.id for e in s.get_entries()] == ["a", "b"]
        (d,) = s.diagnostics
        assert d.line == 3 and d.severity == "error" and "not valid JSON" in d.message
        assert s.read_only and "line 3" in s.read_only_reason
        with pytest.raises(SessionError) as err:
            s.append_message(U("more"))
        assert err.value.code == "read_only"
    assert path.read_bytes() == before


def test_invalid_entry_shapes_are_diagnosed(tmp_path):
    bad = [
        {
            "type": "message",
            "id": "",
            "parentId": None,
            "timestamp": "t",
            "message": {"role": "user"},
        },
        {"type": "message", "id": "q", "timestamp": "t", "message": {"role": "user"}},
        {"type": "leaf", "id": "l", "parentId": None, "timestamp": "t", "targetId": 5},
        {"type": "label", "id": "m", "parentId": None, "timestamp": "t"},
        [1, 2],
    ]
    path = write(tmp_path, line(HEADER), *(line(b) for b in bad))
    with open_session(path) as s:
        messages = [d.message for d in s.diagnostics]
        assert [d.line for d in s.diagnostics] == [2, 3, 4, 5, 6]
        assert "has an empty entry id" in messages[0]
        assert "invalid parentId" in messages[1]
        assert "invalid targetId" in messages[2]
        assert "missing targetId" in messages[3]
        assert "not a valid session entry" in messages[4]
        assert s.entry_count() == 0 and s.read_only


def test_unknown_type_kept_verbatim(tmp_path):
    odd = {
        "type": "future_thing",
        "id": "f",
        "parentId": "a",
        "timestamp": "t",
        "payload": {"x": [1, 2.5, None]},
    }
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(odd))
    with open_session(path) as s:
        assert s.get_entry("f").to_dict() == odd
        assert s.leaf_id == "f" and not s.read_only
        s.append_message(U("after"))
    again = [json.loads(x) for x in path.read_text().splitlines()]
    assert again[2] == odd and again[3]["parentId"] == "f"


def test_torn_final_line_set_aside_before_next_append(tmp_path):
    fragment = b'{"type":"message","id":"c","parentId":"b","timestamp":"2025-01-01T00:00:0'
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(msg("b", "a")), fragment)
    with open_session(path) as s:
        (d,) = s.diagnostics
        assert d.severity == "warning" and d.code == "torn_tail" and d.line == 4
        assert not s.read_only and s.leaf_id == "b"
        assert path.read_bytes().endswith(fragment)  # nothing changed by opening
        new = s.append_message(U("after crash"))
        sidecar = Path(s.storage.repairs[0])
    assert sidecar.read_bytes() == fragment
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    lines = path.read_bytes().split(b"\n")
    assert lines[3] == b" " * (len(fragment) - 1)  # blanked in place: a blank line, never cut off
    assert json.loads(lines[4])["id"] == new and json.loads(lines[4])["parentId"] == "b"
    assert lines[5] == b""
    with open_session(path) as s:
        assert s.diagnostics == [] and [e.id for e in s.get_entries()] == ["a", "b", new]


@pytest.mark.parametrize("whole", [False, True], ids=["torn", "entry-without-newline"])
def test_another_writers_unfinished_line_stops_our_appends_only_for_a_while(tmp_path, whole):
    """An unfinished last line another writer appended while the session was open (Pi killed
    in the middle of a write) refused every append until the session was reopened: "another
    program is writing this file right now", after 10 s as after 0.3. Once the file has been
    quiet for a while the line is judged as one found at open: a torn line is set aside, an
    entry without its newline is kept."""
    path = write(tmp_path, line(HEADER), line(msg("a", None)))
    fragment = line(msg("pi", "a"))[:-1] if whole else b'{"type":"message","id":"pi","parentId":"a","times'
    with open_session(path) as s:
        with open(path, "ab") as f:
            f.write(fragment)
        s.refresh()
        with pytest.raises(SessionError, match="another program is writing this file right now"):
            s.append_message(U("too soon"))
        assert s.entry_count() == 1 and path.read_bytes().endswith(fragment)
        quiet = path.stat().st_mtime - 5
        os.utime(path, (quiet, quiet))  # five seconds without a change
        new = s.append_message(U("after the quiet"))
        kept = ["a", "pi", new] if whole else ["a", new]
        assert [e.id for e in s.get_entries()] == kept
        assert s.get_entry(new).parent_id == kept[-2]
        repairs = list(s.storage.repairs)
    if whole:
        assert repairs == [] and path.read_bytes().count(fragment + b"\n") == 1
    else:
        assert Path(repairs[0]).read_bytes() == fragment
    with open_session(path) as s:
        assert s.diagnostics == [] and [e.id for e in s.get_entries()] == kept


PAUSED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    path, first, rest, go = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode(), sys.argv[4]
    if os.fork():  # the writer is no child of the test: a session's own children are not counted
        os._exit(0)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, first)
    open(go + ".ready", "w").close()
    for _ in range(1500):  # 30 s at most: a test that failed before `finish` leaves none behind
        if os.path.exists(go):
            break
        time.sleep(0.02)
    os.write(fd, rest)
    os.close(fd)
    open(go + ".done", "w").close()
    """
)


def paused_writer(path: Path, first: bytes, rest: bytes, go: Path) -> None:
    """Another program that holds `path` open for writing, has written `first` and waits for
    `go` to exist before writing `rest` (a writer stopped in the middle of a line)."""
    subprocess.run([sys.executable, "-c", PAUSED_WRITER, str(path), first, rest, str(go)], check=True)
    for _ in range(500):
        if Path(f"{go}.ready").exists():
            return
        time.sleep(0.01)
    raise AssertionError("the writer did not start")


def finish(go: Path) -> None:
    go.touch()
    for _ in range(500):
        if Path(f"{go}.done").exists():
            return
        time.sleep(0.01)
    raise AssertionError("the writer did not finish")


@pytest.mark.skipif(not Path("/proc/self/fdinfo").exists(), reason="asks Linux's /proc")
@pytest.mark.parametrize("seen", ["while open", "at open"])
def test_a_line_whose_writer_still_holds_the_file_is_never_set_aside(tmp_path, seen):
    """A writer that keeps the file open and pauses mid-line for more than the quiet time
    (QA: 4 s) had its fragment blanked before our append; the rest of its line then came as a
    line of garbage, its entry was lost and the next ones hung off a missing parent. While
    another process holds the file open for writing, the line is being written: our appends
    wait, however quiet the file has been, and both entries are kept once it is done."""
    path = write(tmp_path, line(HEADER), line(msg("a", None)))
    whole = line(msg("pi", "a"))
    go = tmp_path / "go"
    s = None
    if seen == "while open":
        s = open_session(path)
    paused_writer(path, whole[:30], whole[30:], go)
    try:
        _while_it_pauses(path, whole, go, s)
    finally:
        go.touch()  # the writer ends its line and exits, whatever the test found


def _while_it_pauses(path: Path, whole: bytes, go: Path, s: Session | None) -> None:
    """The test above while the writer pauses mid-line (`s`: the session open before it
    began, else opened now), and after it ends the line."""
    if s is None:
        s = open_session(path)
        (torn,) = s.diagnostics  # not the advice for a crash while it writes (QA)
        assert (
            torn.code == "torn_tail" and "has the file open for writing and may still end it" in torn.message
        )
    with s:
        quiet = path.stat().st_mtime - 5
        os.utime(path, (quiet, quiet))  # five seconds without a change
        s.refresh()
        with pytest.raises(SessionError, match="another program is writing this file right now") as said:
            s.append_message(U("too soon"))
        assert re.search(r"right now \(pid \d+: \S*python", str(said.value)), said.value  # named
        assert path.read_bytes().endswith(whole[:30]) and s.storage.repairs == []
        finish(go)
        s.refresh()
        new = s.append_message(U("after it"))
        assert [e.id for e in s.get_entries()] == ["a", "pi", new]
        assert s.get_entry(new).parent_id == "pi" and s.storage.repairs == []
    with open_session(path) as s:
        assert s.diagnostics == [] and [e.id for e in s.get_entries()] == ["a", "pi", new]


def test_valid_final_line_without_newline_is_not_glued(tmp_path):
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(msg("b", "a"))[:-1])
    with open_session(path) as s:
        assert s.diagnostics == [] and s.leaf_id == "b"
        new = s.append_message(U("next"))
    objs = [json.loads(x) for x in path.read_text().splitlines()]
    assert [o["id"] for o in objs[1:]] == ["a", "b", new]


def test_duplicate_id_opens_read_only(tmp_path):
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(msg("a", None, "again")))
    before = path.read_bytes()
    with open_session(path) as s:
        (d,) = s.diagnostics
        assert d.code == "duplicate_id" and d.line == 2 and "line 3" in d.message
        assert s.read_only
        assert s.get_entry("a").message["content"] == "again"  # later wins, as in Pi
        assert s.entry_count() == 1  # the earlier line is left out, as Pi's index leaves it
    assert path.read_bytes() == before


def test_an_id_used_twice_is_one_entry_with_the_earlier_ones_children(tmp_path):
    """The tree drew both entries of one id as a fork, and an entry written under the earlier
    stayed under it while `check` said the later wins: the context then held the earlier."""
    path = write(
        tmp_path,
        line(HEADER),
        line(msg("u", None, "question")),
        line(msg("a", "u", "first answer")),
        line(msg("x", "a", "under the earlier")),
        line(msg("a", "u", "second answer")),
        line(msg("y", "a", "under the later")),
    )
    with open_session(path) as s:
        assert [e.id for e in s.get_children("u")] == ["a"]
        assert [e.message["content"] for e in s.get_children("a")] == ["under the earlier", "under the later"]
        assert [e.message["content"] for e in s.get_branch("x")] == [
            "question",
            "second answer",
            "under the earlier",
        ]
        (d,) = s.diagnostics
        assert (d.code, d.line, d.entry_id) == ("duplicate_id", 3, "a")


def test_missing_parent_is_orphan_root(tmp_path):
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(msg("b", "zzz")))
    before = path.read_bytes()
    with open_session(path) as s:
        (d,) = s.diagnostics
        assert d.code == "missing_parent" and d.line == 3 and "zzz" in d.message
        assert s.read_only
        assert [e.id for e in s.get_children(None)] == ["a", "b"]
        assert [e.id for e in s.get_branch()] == ["b"]  # walks stop at the orphan
    assert path.read_bytes() == before


def test_leaf_entry_pointing_nowhere(tmp_path):
    dangling = {"type": "leaf", "id": "l", "parentId": "a", "timestamp": "t", "targetId": "ghost"}
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(dangling))
    with open_session(path) as s:
        (d,) = s.diagnostics
        assert d.code == "dangling_leaf" and d.line == 3
        assert s.leaf_id == "a" and s.read_only


def test_leaf_entry_null_target(tmp_path):
    to_null = {"type": "leaf", "id": "l", "parentId": "a", "timestamp": "t", "targetId": None}
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(to_null))
    with open_session(path) as s:
        assert s.leaf_id is None and s.build_context().messages == []


def test_non_utf8_bytes(tmp_path):
    path = write(tmp_path, line(HEADER), line(msg("a", None)), b'{"type":"message","id":"b\xff\xfe"}\n')
    with open_session(path) as s:
        (d,) = s.diagnostics
        assert d.line == 3 and "not valid JSON" in d.message
        assert s.read_only and s.entry_count() == 1


def test_50mb_single_line(tmp_path):
    big = "y" * (50 * 1024 * 1024)
    path = write(
        tmp_path,
        line(HEADER),
        line(msg("a", None)),
        line(msg("big", "a", big)),
        line(msg("c", "big")),
    )
    with open_session(path) as s:
        assert s.diagnostics == [] and s.leaf_id == "c"
        assert len(s.get_entry("big").message["content"]) == len(big)
        s.append_message(U("after"))
        assert s.entry_count() == 4


def test_second_writer_refused_reader_allowed(tmp_path):
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as writer:
        writer.append_message(U("1"))
        with pytest.raises(SessionError) as err:
            JsonlStorage.open(path)
        assert err.value.code == "locked"
        code = textwrap.dedent(
            f"""
            import sys
            from sessiontree import JsonlStorage, SessionError
            try:
                JsonlStorage.open({str(path)!r})
            except SessionError as e:
                print(e.code, e)
                sys.exit(0)
            sys.exit(1)
            """
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert done.stdout.startswith("locked") and f"pid {os.getpid()}" in done.stdout
        with open_session(path, read_only=True) as reader:
            assert reader.entry_count() == 1
            writer.append_message(U("2"))
            assert reader.refresh() == 1 and reader.entry_count() == 2
    # released on close
    with open_session(path) as again:
        assert again.entry_count() == 2


def test_created_files_are_private(tmp_path):
    os.umask(0)
    path = tmp_path / "new.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("x"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_create_refuses_existing_file(tmp_path):
    path = write(tmp_path, line(HEADER))
    with pytest.raises(SessionError) as err:
        JsonlStorage.create(path, cwd="/p")
    assert err.value.code == "invalid_argument"
    assert path.read_bytes() == line(HEADER)


def test_open_missing_file(tmp_path):
    with pytest.raises(SessionError) as err:
        JsonlStorage.open(tmp_path / "nope.jsonl")
    assert err.value.code == "not_found"


def test_invalid_entries_never_written(tmp_path):
    with Session(JsonlStorage.create(tmp_path / "s.jsonl", cwd="/p")) as s:
        with pytest.raises(SessionError) as err:
            s.append_message({"content": "no role"})
        assert err.value.code == "invalid_argument"
        with pytest.raises(SessionError) as err:
            s.append_message({"role": "user", "content": [{"type": "text", "text": object()}]})
        assert err.value.code == "invalid_entry"
        for content in (None, 3, {"type": "text", "text": "a part, not a list"}, ["a string, not a part"]):
            with pytest.raises(SessionError, match="'content' is a string or a list of parts") as err:
                s.append_message({"role": "assistant", "content": content} if content else {"role": "user"})
            assert err.value.code == "invalid_argument"
        assert s.entry_count() == 0
    assert len((tmp_path / "s.jsonl").read_text().splitlines()) == 1


def test_external_append_is_followed(tmp_path):
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        a = s.append_message(U("mine"))
        with open(path, "ab") as f:  # another program (Pi) appends without our lock
            f.write(line(msg("pi1", a)))
        b = s.append_message(U("after pi"))
        assert s.get_entry(b).parent_id == "pi1"  # caught up before appending
        assert [e.id for e in s.get_entries()] == [a, "pi1", b]


@pytest.mark.parametrize("mapped", [False, True])
def test_invalid_utf8_inside_message_content_is_damage(tmp_path, monkeypatch, mapped):
    """The fast scan skips message text; the byte check (run at open, or later for the
    browser, and always before a write) finds bad UTF-8 there and makes the file read-only."""
    monkeypatch.setattr("sessiontree.storage.jsonl.storage.MMAP_MIN", 0 if mapped else 1 << 40)
    bad = line(msg("b", "a"))[:-1].replace(b'"x"', b'"caf\xc3"') + b"\n"
    path = write(tmp_path, line(HEADER), line(msg("a", None)), bad, line(msg("c", "a")))
    with open_session(path) as s:
        (d,) = s.diagnostics
        assert d.line == 3 and d.code == "invalid_utf8" and s.read_only
        assert [e for e in s.tree.ids] == ["a", "b", "c"]  # the damaged line stays visible in the tree
        assert s.get_entry("b").message["content"] == "caf\ufffd"  # as Pi reads it
    with open_session(path) as s:
        assert s.unchecked == 0
    with open_session(path, verify="later") as s:
        assert s.diagnostics == [] and not s.read_only  # not checked yet
        assert s.unchecked == 3  # every entry: what a browser's write key waits for
        with pytest.raises(SessionError) as err:
            s.append_message(U("x"))  # a write runs the check first
        assert err.value.code == "read_only"
        assert [d.code for d in s.diagnostics] == ["invalid_utf8"]
        assert s.unchecked == 0
    assert path.read_bytes().count(b"\n") == 4


@pytest.mark.parametrize("child", ["runs", "cannot start"])
def test_the_deferred_check_in_a_helper_process_finds_what_the_check_here_finds(tmp_path, monkeypatch, child):
    """A browser runs the UTF-8 check in a child process (the keys keep the interpreter lock);
    it reports the same damage, and if the child cannot run, the check runs here instead."""
    if child == "cannot start":
        monkeypatch.setattr("sessiontree.storage.jsonl.verify.sys.executable", str(tmp_path / "no-python"))
    monkeypatch.setattr("sessiontree.storage.jsonl.verify.ELSEWHERE_BYTES", 0)  # this small file too
    bad = line(msg("b", "a"))[:-1].replace(b'"x"', b'"caf\xc3"') + b"\n"
    also = line(msg("d", "c"))[:-1].replace(b'"x"', b'"\xff\xfe"') + b"\n"
    fine = line(msg("e", "d"))[:-1].replace(b'"x"', b'"' + "café".encode() + b'"') + b"\n"
    path = write(tmp_path, line(HEADER), line(msg("a", None)), bad, line(msg("c", "a")), also, fine)
    with open_session(path, verify="later") as s:
        storage = s.storage
        lines = storage._lines
        answer = check_utf8_elsewhere(storage._fd, lines.offsets, lines.lengths, 0, len(lines))
        assert answer == ([1, 3] if child == "runs" else None)  # None: the caller checks here
        s.finish_verification(elsewhere=True)
        found = [(d.code, d.line, d.entry_id) for d in s.diagnostics]
        assert s.read_only
    with open_session(path) as s:  # checked here, at open
        assert [(d.code, d.line, d.entry_id) for d in s.diagnostics] == found
    assert found == [("invalid_utf8", 3, "b"), ("invalid_utf8", 5, "d")]


def test_the_helper_checks_a_line_table_bigger_than_a_pipe_holds(tmp_path, monkeypatch):
    """The helper reads its line table (16 bytes an entry) before it checks: a table over a
    pipe's 64 KiB was left half written, the helper waited for the rest, and the browser's first
    write waited with it (QA: frozen on a 20,000-entry file)."""
    monkeypatch.setattr("sessiontree.storage.jsonl.verify.HELPER_SECONDS", 30)  # not 10 minutes
    count = 6000
    bad = {2500, count - 1}
    lines = [line(HEADER)]
    for k in range(count):
        data = line(msg(f"m{k}", f"m{k - 1}" if k else None))
        if k in bad:
            data = data[:-1].replace(b'"x"', b'"\xff"') + b"\n"
        lines.append(data)
    path = write(tmp_path, *lines)
    with open_session(path, verify="later") as s:
        storage = s.storage
        table = storage._lines
        assert 16 * len(table) > 64 << 10
        assert check_utf8_elsewhere(storage._fd, table.offsets, table.lengths, 0, len(table)) == sorted(bad)


def test_closing_the_session_stops_its_check_in_a_helper_process(tmp_path, monkeypatch):
    """A browser quitting during the deferred check waited for its helper to finish (2 s on a
    million entries): closing the session kills the helper, and the check ends unfinished."""
    slow = tmp_path / "slow-python"  # a helper that would take a minute
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setattr("sessiontree.storage.jsonl.verify.sys.executable", str(slow))
    monkeypatch.setattr("sessiontree.storage.jsonl.verify.ELSEWHERE_BYTES", 0)
    started: list[subprocess.Popen[bytes]] = []

    class Recorded(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr("sessiontree.storage.jsonl.verify.subprocess.Popen", Recorded)
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(msg("b", "a")))
    s = open_session(path, verify="later")
    check = threading.Thread(target=s.finish_verification, kwargs={"elsewhere": True})
    check.start()
    for _ in range(1000):
        if started:
            break
        time.sleep(0.01)
    assert started, "the helper never started"
    s.close()
    check.join(30)
    assert not check.is_alive()
    assert started[0].returncode is not None  # killed and waited for: no process left behind
    assert s.storage._verified == 0  # not taken for checked


def test_a_small_file_is_checked_here_without_a_helper_process(tmp_path, monkeypatch):
    """A helper costs ~0.2 s of a core to start, for a check of a few milliseconds: every
    small session a browser opened started one."""

    def no_helper(*args):
        raise AssertionError("a helper process was started")

    monkeypatch.setattr("sessiontree.storage.jsonl.verify.check_utf8_elsewhere", no_helper)
    bad = line(msg("b", "a"))[:-1].replace(b'"x"', b'"caf\xc3"') + b"\n"
    path = write(tmp_path, line(HEADER), line(msg("a", None)), bad)
    with open_session(path, verify="later") as s:
        s.finish_verification(elsewhere=True)
        assert [(d.code, d.line) for d in s.diagnostics] == [("invalid_utf8", 3)] and s.read_only


def test_out_of_range_float_reads_as_infinity(tmp_path):
    odd = line(msg("b", "a"))[:-2] + b',"weight":1e999}\n'
    path = write(tmp_path, line(HEADER), line(msg("a", None)), odd)
    with open_session(path) as s:
        assert s.diagnostics == [] and s.get_entry("b").get("weight") == float("inf")


def test_integer_too_large_reads_as_javascript_reads_it(tmp_path):
    """A 5,000-digit integer is a number JSON.parse reads (as Infinity), so Pi opens such a
    file; so do we: the entry decodes, nothing is damaged, and it is written back as a number."""
    huge = line(msg("b", "a"))[:-2] + b',"n":1' + b"0" * 5000 + b"}\n"
    path = write(tmp_path, line(HEADER), line(msg("a", None)), huge)
    with open_session(path) as s:
        assert not s.read_only and s.diagnostics == []
        assert s.get_entry("b").get("n") == float("inf")
        assert len(s.build_context().messages) == 2
        s.append_message(U("after"))
    assert path.read_bytes().count(b"0" * 5000) == 1  # the original line is untouched


def test_damage_found_late_stops_writes(tmp_path):
    """A line that indexed fine but no longer decodes (its bytes changed on disk after the open)
    is damage as soon as it is read: a diagnostic, read-only, and no write follows."""
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(msg("b", "a")))
    with open_session(path) as s:
        data = path.read_bytes()
        at = data.rindex(b'"b"')
        path.write_bytes(data[:at] + b'"x"' + data[at + 3 :])  # same size, another id
        with pytest.raises(SessionError) as err:
            s.build_context()
        assert err.value.code == "invalid_entry" and err.value.line == 3
        assert s.read_only and any(d.code == "unreadable_line" and d.line == 3 for d in s.diagnostics)
        changed = path.read_bytes()
        with pytest.raises(SessionError):  # read-only; and the same-size rewrite is noticed too
            s.append_message(U("no"))
        assert path.read_bytes() == changed


@pytest.mark.parametrize("refreshed", [False, True])
def test_a_line_cut_off_by_a_truncation_after_the_open_says_so(tmp_path, refreshed):
    """Reading an entry that a truncation after the open cut off said "line 3 is not valid
    JSON", which sent the reader to the line rather than to the other program; whether or not
    a refresh saw the truncation first, the entry's read says what happened, and no write
    follows."""
    path = write(tmp_path, line(HEADER), *(line(msg(e, p)) for e, p in [("a", None), ("b", "a"), ("c", "b")]))
    with open_session(path) as s:
        data = path.read_bytes()
        path.write_bytes(data[: data.rindex(b'{"type"') + 20])
        if refreshed:
            with pytest.raises(SessionError, match="truncated"):
                s.refresh()
        with pytest.raises(SessionError) as raised:
            s.get_entry("c")
        said = str(raised.value)
        assert "line 4 cannot be read: the file was truncated by another program after it was opened" in said
        assert "JSON" not in said
        assert s.read_only
        assert sum(d.code == "truncated" for d in s.diagnostics) == 1


def test_the_read_only_reason_names_the_line_once_and_no_code(tmp_path):
    """The banner read "the session has damage (line 48: error: line 48 is not valid JSON (…)
    [invalid_line])": the line twice, the severity and a code meant for scripts (QA)."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("one"))
        s.append_message(U("two"))
    with path.open("ab") as f:
        f.write(b"garbage\n")
    with Session(JsonlStorage.open(path)) as s:
        reason = s.read_only_reason or ""
    assert (
        reason.startswith("the session has damage (line 4 is not valid JSON") and reason.count("line 4") == 1
    )
    assert "[" not in reason and "error:" not in reason


def test_a_value_nested_past_what_the_reader_takes_is_said_as_its_limit(tmp_path):
    """An entry nested ~1,500 levels deep was called "not valid JSON (nested too deeply)":
    it is valid JSON (Node reads 5,000 levels); the limit is this reader's (QA)."""
    path = tmp_path / "deep.jsonl"
    deep = b"[" * 1500 + b"]" * 1500
    body = line(msg("a", None))[:-2] + b',"extra":' + deep + b"}\n"
    path.write_bytes(line(HEADER) + line(msg("u", None)) + body)
    with open_session(path, read_only=True) as s:
        said = [d.message for d in s.diagnostics]
    assert any(
        "nested deeper than sessiontree reads" in m and "JSON itself has no limit" in m for m in said
    ), said
    assert not any("not valid JSON" in m for m in said), said


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (HEADER, "line 3 is a second session header (a session has one, on its first line)"),
        ({**msg("b", "a"), "type": 5}, "line 3 has an entry type that is not a string"),
        ({**msg("b", "a"), "id": 12345}, "line 3 has an entry id that is not a string"),
        ({k: v for k, v in msg("b", "a").items() if k != "id"}, "line 3 is missing entry id"),
    ],
)
def test_a_bad_line_says_what_is_wrong_with_it(tmp_path, bad, said):
    """A repeated header was "invalid parentId"; a number for the type or the id was "missing"
    (QA)."""
    path = write(tmp_path, line(HEADER), line(msg("a", None)), line(bad))
    with open_session(path, read_only=True) as s:
        assert [d.message for d in s.diagnostics] == [said]


def test_a_session_file_named_like_a_database_says_so(tmp_path):
    """ "not a usable sessiontree database: file is not a database", and no more (QA)."""
    path = write(tmp_path, line(HEADER), line(msg("a", None)), name="s.sqlite")
    with pytest.raises(SessionError) as err:
        open_session(path)
    assert "it is a Pi session file (JSONL): named .jsonl, it opens as one" in err.value.detail


def test_an_id_used_again_by_another_writer_while_followed_says_reopen(tmp_path):
    """Read at open, the later entry takes the earlier's place; appended while a session was
    followed, the tree drawn so far kept the earlier and its text (QA). The refresh says so,
    and the session turns read-only; a reopen reads it as Pi does."""
    path = write(
        tmp_path, line(HEADER), line(msg("u", None)), line(msg("a", "u", "EARLIER")), line(msg("b", "a"))
    )
    with open_session(path) as s:
        with open(path, "ab") as f:
            f.write(line(msg("a", None, "LATER")))
        with pytest.raises(SessionError) as err:
            s.refresh()
        assert "another writer used entry id 'a' again; reopen" in err.value.detail and s.read_only
        assert [d.code for d in s.diagnostics] == ["duplicate_id"]  # said once
    with open_session(path, read_only=True) as s:
        assert s.get_entry("a").message["content"] == "LATER" and s.get_entry("b").parent_id == "a"
        assert [e.id for e in s.get_branch("b")] == ["a", "b"]


def test_an_old_format_line_that_is_not_utf8_is_read_as_pi_reads_it(tmp_path):
    """v3 files read such bytes as U+FFFD; a v1/v2 file still dropped the line (QA)."""
    old = {**HEADER, "version": 2}
    bad = line(msg("a", None, "hi XX")).replace(b"hi XX", b"hi \xff\xfe")
    path = write(tmp_path, line(old), bad, line(msg("b", "a", "ok")))
    with open_session(path, read_only=True) as s:
        assert [e.message["content"] for e in s.get_branch()] == ["hi \ufffd\ufffd", "ok"]
        assert [(d.code, d.line) for d in s.diagnostics] == [("invalid_utf8", 2)]

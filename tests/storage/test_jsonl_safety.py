"""Never lose a byte: the JSONL storage against other writers, failing disks, symlinks, hard
links, odd files and leftovers of killed writers. Each test is one shape of the hostile review."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, U, as_nobody
from sessiontree import JsonlStorage, Session, SessionError, open_session
from sessiontree.display import inert
from sessiontree.storage import atomic
from sessiontree.storage.jsonl import repair

HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}\n'


def entry(eid: str, parent: str | None, text: str = "x") -> bytes:
    return json.dumps(
        {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text},
        }
    ).encode()


_write = os.write  # tests below patch os.write for our storage; the foreign writer is not ours


def foreign_append(path: Path, data: bytes) -> None:
    """What Pi does: an O_APPEND write of a whole line, no lock."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        _write(fd, data)
    finally:
        os.close(fd)


def ids_on_disk(path: Path) -> list[str]:
    out = []
    for raw in path.read_bytes().split(b"\n")[1:]:
        if raw.strip():
            try:
                out.append(json.loads(raw)["id"])
            except ValueError:
                out.append("<damaged>")
    return out


# --- torn tails and a writer that takes no lock ---------------------------------------------------


def make_torn(tmp_path: Path) -> tuple[Path, bytes]:
    fragment = b'{"type":"message","id":"torn","parentId":"a","timest'
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + entry("a", None) + b"\n" + fragment)
    os.utime(path, (0, 0))  # long quiet: the repair may go ahead at once
    return path, fragment


def test_a_line_appended_during_the_repair_is_kept(tmp_path, monkeypatch):
    """Pi appends (no lock) while the torn tail is being set aside: its line must survive. A
    truncate computed before that append would cut it off; blanking in place cannot."""
    path, fragment = make_torn(tmp_path)
    real_copy = repair.keep_copy

    def copy_then_pi_writes(p: str, data: bytes) -> str:
        sidecar = real_copy(p, data)
        foreign_append(path, entry("pi1", "a") + b"\n")  # lands right after the fragment
        return sidecar

    monkeypatch.setattr(repair, "keep_copy", copy_then_pi_writes)
    with open_session(path) as s:
        assert s.storage.torn_tail() == fragment
        with pytest.raises(SessionError):
            s.append_message(U("ours"))  # the file changed under the repair: nothing written
    assert b'"pi1"' in path.read_bytes()
    with open_session(path) as s:  # the foreign line was glued onto the fragment: rescued
        assert "pi1" in s.tree.pos and not s.read_only
        assert any(d.code == "torn_continued" for d in s.diagnostics) or s.storage.torn_tail() is None
        ours = s.append_message(U("ours"))
    # The glued line stays on disk as it was written (fragment + Pi's line); readers salvage it.
    assert path.read_bytes().split(b"\n")[-3].endswith(entry("pi1", "a"))
    with open_session(path, read_only=True) as s:
        assert s.storage.index.ids[-2:] == ["pi1", ours]


def test_a_line_glued_onto_a_torn_fragment_is_recovered_while_following(tmp_path):
    path, fragment = make_torn(tmp_path)
    with open_session(path, read_only=True) as reader:
        assert reader.storage.torn_tail() == fragment
        foreign_append(path, entry("pi1", "a") + b"\n")  # a writer that did not end the fragment
        assert reader.refresh() == 1
        assert "pi1" in reader.tree.pos and not any(d.severity == "error" for d in reader.diagnostics)
        assert any(d.code == "torn_continued" for d in reader.diagnostics)


def test_repair_blanks_the_fragment_and_keeps_a_copy(tmp_path):
    path, fragment = make_torn(tmp_path)
    size = path.stat().st_size
    with open_session(path) as s:
        new = s.append_message(U("after"))
        sidecar = Path(s.storage.repairs[0])
    assert sidecar.read_bytes() == fragment
    data = path.read_bytes()
    assert data[size - len(fragment) : size] == b" " * (len(fragment) - 1) + b"\n"  # same place, same size
    assert ids_on_disk(path) == ["a", new]
    with open_session(path) as s:
        assert s.diagnostics == [] and s.tree.parent[s.tree.pos[new]] == s.tree.pos["a"]


# --- a write that fails half-way ---------------------------------------------------------------


def test_a_failed_append_undoes_only_its_own_bytes(tmp_path, monkeypatch):
    """The write fails after part of it reached the file and after another program appended a
    line: the rollback must not cut that line (a truncate to the old size would)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + entry("a", None) + b"\n")
    real_write = os.write
    calls = []

    def half_then_fail(fd: int, data) -> int:
        calls.append(1)
        if len(calls) == 1:
            n = real_write(fd, bytes(data)[: len(data) // 2])
            foreign_append(path, entry("pi1", "a") + b"\n")
            return n
        raise OSError(errno.ENOSPC, "No space left on device")

    with open_session(path) as s:
        monkeypatch.setattr("sessiontree.storage.jsonl.storage.os.write", half_then_fail)
        with pytest.raises(SessionError) as err:
            s.append_message(U("ours"))
        monkeypatch.undo()
        assert "nothing was added" in str(err.value)
        assert ids_on_disk(path) == ["a", "pi1"]  # ours blanked, theirs intact
        assert s.refresh() == 1 and "pi1" in s.tree.pos and not s.read_only
        s.append_message(U("again"))
    with open_session(path) as s:
        assert s.diagnostics == [] and [e.message["content"] for e in s.get_entries()][-1] == "again"


def test_file_size_limit_mid_append_leaves_no_half_line(tmp_path):
    """A real failure: RLIMIT_FSIZE stops the write part-way (EFBIG) in a child process."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("kept"))
    limit = path.stat().st_size + 50
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from sessiontree import open_session, SessionError
        with open_session({str(path)!r}) as s:
            try:
                s.append_message({{"role": "user", "content": "y" * 500}})
            except SessionError as exc:
                print("refused:", exc)
                sys.exit(0)
        sys.exit(3)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "refused" in done.stdout, done.stderr
    assert path.stat().st_size == limit  # the bytes that got in stay, blanked
    with open_session(path) as s:
        assert s.diagnostics == [] and s.entry_count() == 1
        s.append_message(U("next"))
    assert [e for e in ids_on_disk(path) if e == "<damaged>"] == []


# --- symlinks, hard links and the lock ------------------------------------------------------------


def test_no_lock_file_can_be_hijacked(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "s.jsonl"
    for name in ("s.jsonl.lock", f".s.jsonl.new-{os.getpid()}", f".s.jsonl.tmp-{os.getpid()}"):
        (tmp_path / name).symlink_to(victim)
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("hi"))
    with open_session(path) as s:
        s.append_message(U("again"))
    assert victim.read_text() == "precious"


def test_the_same_file_through_a_symlink_or_hard_link_has_one_writer(tmp_path):
    path = tmp_path / "s.jsonl"
    JsonlStorage.create(path, cwd="/p").close()
    (tmp_path / "link.jsonl").symlink_to(path)
    with Session(JsonlStorage.open(path)) as writer:
        writer.append_message(U("hi"))
        os.link(path, tmp_path / "hard.jsonl")
        for other in ("link.jsonl", "hard.jsonl"):
            with pytest.raises(SessionError) as err:
                JsonlStorage.open(tmp_path / other)
            assert err.value.code == "locked" and str(os.getpid()) in str(err.value)
    with open_session(tmp_path / "hard.jsonl") as s:  # free again once the writer closed
        s.append_message(U("later"))


def test_the_lock_names_the_holder_in_another_process(tmp_path):
    path = tmp_path / "s.jsonl"
    JsonlStorage.create(path, cwd="/p").close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from sessiontree import open_session; s = open_session({str(path)!r});"
         " print('ready', flush=True); import time; time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(SessionError) as err:
            open_session(path)
        assert err.value.code == "locked" and f"pid {holder.pid}" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    open_session(path).close()  # a killed holder's lock is gone at once


def test_the_lock_names_what_the_holder_runs(tmp_path):
    """A pid alone did not say whether the writer was Pi, a served page's other tab or a
    script; the interpreter's path said nothing either (QA): the script is named."""
    path = tmp_path / "s.jsonl"
    JsonlStorage.create(path, cwd="/p").close()
    script = tmp_path / "agent.py"
    script.write_text(
        f"from sessiontree import open_session\ns = open_session({str(path)!r})\n"
        "print('ready', flush=True)\nimport time\ntime.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, str(script), "--flag"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(SessionError) as err:
            open_session(path)
        assert f"(pid {holder.pid}: agent.py --flag)" in str(err.value)
    finally:
        holder.kill()
        holder.wait()


def test_upgrade_through_a_symlink_upgrades_the_file_and_keeps_the_link(tmp_path):
    real = tmp_path / "real.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", real)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    backup = JsonlStorage.upgrade(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert backup == str(real) + ".bak" and Path(backup).exists()
    with open_session(link, read_only=True) as s:
        assert s.format_version == 3 and not any(d.severity == "error" for d in s.diagnostics)


# --- what Pi writes and reads ----------------------------------------------------------------------


def test_lone_surrogates_are_read_and_shown_as_stand_ins(tmp_path):
    """Pi's grep truncation can cut an emoji in half and write `\\ud83d`: Pi reads the file."""
    path = tmp_path / "s.jsonl"
    cut = b'{"type":"message","id":"b","parentId":"a","timestamp":"2025-01-01T00:00:01.000Z",' \
        b'"message":{"role":"toolResult","toolCallId":"t","toolName":"grep","content":' \
        b'[{"type":"text","text":"found \\ud83d"}],"isError":false}}'  # fmt: skip
    path.write_bytes(HEADER + entry("a", None) + b"\n" + cut + b"\n" + entry("c", "b") + b"\n")
    with open_session(path) as s:
        assert s.diagnostics == [] and not s.read_only
        assert s.tree.parent[s.tree.pos["c"]] == s.tree.pos["b"]
        text = s.get_entry("b").message["content"][0]["text"]
        assert text == "found \ud83d" and inert(text) == "found ⟨U+D83D⟩"
        s.append_message(U("after"))
        assert len(s.build_context().messages) == 4
    done = subprocess.run(
        [sys.executable, "-m", "sessiontree", "context", str(path)], capture_output=True, timeout=60
    )
    assert done.returncode == 0 and "⟨U+D83D⟩".encode() in done.stdout


def test_bom_and_float_version_headers_open(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + HEADER.replace(b'"version":3', b'"version":3.0') + entry("a", None) + b"\n"
    )
    with open_session(path) as s:
        assert s.format_version == 3 and s.leaf_id == "a" and not s.read_only


# --- files that are not session files -------------------------------------------------------------


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo)
    for args in (["check"], ["tree"], ["context"]):
        done = subprocess.run(
            [sys.executable, "-m", "sessiontree", *args, str(fifo)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 2 and "regular file" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(SessionError):
        open_session(fifo, read_only=True)


def test_a_huge_first_line_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "s.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"type":"session","x":"' + b"a" * (20 << 20))
    with pytest.raises(SessionError) as err:
        open_session(path, read_only=True)
    assert err.value.code == "invalid_session" and "without a line break" in str(err.value)


def test_a_file_the_user_cannot_write_opens_read_only_saying_why(tmp_path):
    """Another user's session: a forked child drops to `nobody` and opens a root-owned file."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + entry("a", None) + b"\n")
    path.chmod(0o644)
    tmp_path.chmod(0o755)
    for parent in tmp_path.parents:  # pytest's temp directories are private to root
        if parent == Path("/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)

    def work() -> str:
        with open_session(path) as s:
            return f"{s.read_only}|{s.read_only_reason}"

    answer = as_nobody(work)
    assert answer.startswith("True|") and "not writable by you" in answer, answer


def test_a_file_without_write_permission_opens_read_only_for_root_too(tmp_path):
    """`chmod 444` is a wish, not only a barrier: root passed it and wrote the file without a
    word (QA). Opened for writing, such a file opens read-only, saying how to write it."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + entry("a", None) + b"\n")
    before = path.read_bytes()
    path.chmod(0o444)
    with open_session(path) as s:
        assert s.read_only and "chmod u+w" in (s.read_only_reason or "")
        with pytest.raises(SessionError):
            s.append_message({"role": "user", "content": "x"})
    assert path.read_bytes() == before
    path.chmod(0o644)
    with open_session(path) as s:
        assert not s.read_only


@pytest.fixture
def read_only_mount(tmp_path):
    """A directory mounted read-only (a bind mount, as root), like a read-only share."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount")
    source, target = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    target.mkdir()
    (source / "s.jsonl").write_bytes(HEADER + entry("a", None) + b"\n")
    if subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode:
        pytest.skip("bind mounts are not allowed here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], check=True, capture_output=True)
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)


def test_a_session_on_a_read_only_mount_opens_read_only(read_only_mount):
    with open_session(read_only_mount / "s.jsonl") as s:
        assert s.read_only and "read-only file system" in (s.read_only_reason or "")
        with pytest.raises(SessionError) as err:
            s.append_message(U("no"))
        assert err.value.code == "read_only"


def test_an_old_format_file_on_a_read_only_mount_says_why_it_cannot_be_upgraded(read_only_mount):
    """Its reason was the old format's ("Run `sessiontree upgrade FILE`"), which is what failed."""
    shutil.copy(PI_FIXTURES / "large-session.jsonl", read_only_mount.parent / "rw" / "v1.jsonl")
    path = read_only_mount / "v1.jsonl"
    with open_session(path) as s:
        assert s.format_version == 1 and "read-only file system" in (s.read_only_reason or "")
    with pytest.raises(SessionError) as err:
        JsonlStorage.upgrade(path)
    assert "read-only file system" in str(err.value) and "upgrade" not in str(err.value)


# --- leftovers of killed writers ------------------------------------------------------------------


def test_leftovers_of_killed_writers_are_removed_on_the_next_open(tmp_path):
    path = tmp_path / "s.jsonl"
    JsonlStorage.create(path, cwd="/p").close()
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(atomic.__file__).parents[2])!r})
        from sessiontree.storage.atomic import private_temp
        for purpose in ("new", "rewrite"):
            fd, tmp = private_temp({str(path)!r}, purpose)
            os.write(fd, b"half")
        fd, tmp = private_temp({str(path) + ".torn"!r}, "torn")
        os.kill(os.getpid(), 9)
        """
    )
    subprocess.run([sys.executable, "-c", script], timeout=60)
    left = sorted(p.name for p in tmp_path.iterdir() if ".sessiontree-" in p.name)
    assert len(left) == 3
    alive_fd, alive = atomic.private_temp(str(path), "rewrite")  # a writer still at work
    try:
        with open_session(path) as s:
            assert len(s.storage.leftovers_removed) == 3
        assert [p.name for p in tmp_path.iterdir() if ".sessiontree-" in p.name] == [Path(alive).name]
    finally:
        os.close(alive_fd)


def test_a_same_size_rewrite_is_noticed_while_following(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + entry("a", None, "one") + b"\n")
    with open_session(path, read_only=True) as reader:
        path.write_bytes(HEADER + entry("a", None, "two") + b"\n")  # same length, other bytes
        os.utime(path, ns=(1, 1))
        with pytest.raises(SessionError) as err:
            reader.refresh()
        assert "rewritten" in str(err.value)
        assert any(d.code == "rewritten" for d in reader.diagnostics)


def test_an_entry_appended_after_a_header_without_its_line_break_starts_a_line(tmp_path):
    """A file of its header alone, without the header's line break (cut by an editor, written
    by another tool): the first entry went on the header's line, which no longer read as
    JSON, and the file never opened again (QA)."""
    path = tmp_path / "s.jsonl"
    JsonlStorage.create(path, cwd="/p").close()
    header = path.read_bytes().rstrip(b"\n")
    path.write_bytes(header)
    with Session(JsonlStorage.open(path)) as s:
        first = s.append_message(U("hi"))
    lines = path.read_bytes().split(b"\n")
    assert lines[0] == header and json.loads(lines[1])["id"] == first and lines[2:] == [b""]
    with Session(JsonlStorage.open(path)) as s:
        assert [e.id for e in s.get_entries()] == [first] and not s.diagnostics

"""Crash safety: writers killed with SIGKILL at random moments never lose an acknowledged
append, never glue lines, and torn tails are set aside byte for byte. (scripts/crashtest.py runs
the same harness for a thousand kills and more; README has its figures.)

Also: the two rewrite paths (v1/v2 upgrade, torn-tail repair) with failures injected between
their steps, and the durable (fsync) mode."""

from __future__ import annotations

import errno
import json
import os
import shutil

import pytest

from harness.crashtest import run
from helpers import PI_FIXTURES, U
from sessiontree import JsonlStorage, Session, SessionError, SqliteStorage, open_session
from sessiontree.storage import atomic


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
def test_random_kills_lose_nothing(tmp_path, backend, request):
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    report = run(backend, tmp_path, kills=25, seconds=40, seed=7, url=url)
    assert report.kills >= 10
    assert report.problems == [] and report.lost == 0
    assert report.acknowledged > 0 and report.entries > 0


def test_kills_with_a_lock_free_writer_alongside_lose_nothing_of_either(tmp_path):
    """Pi appends without a lock: its lines land during our torn-tail repairs and failing
    appends; every line either writer acknowledged is still there after every kill."""
    report = run("jsonl", tmp_path, kills=25, seconds=60, seed=11, foreign=True)
    assert report.kills >= 10
    assert report.problems == [] and report.lost == 0
    foreign = (tmp_path / "foreign-acknowledged.txt").read_text().split()
    assert foreign and report.acknowledged > len(foreign)


def test_torn_tail_repair_interrupted_between_steps(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("kept"))
    fragment = b'{"type":"message","id":"torn","parentId":null,"timest'
    with open(path, "ab") as f:
        f.write(fragment)
    before = path.read_bytes()

    real_pwrite = os.pwrite

    def fail(fd, data, offset):
        raise OSError(errno.EIO, "simulated crash between the sidecar and the blanking")

    monkeypatch.setattr("sessiontree.storage.jsonl.repair.os.pwrite", fail)
    with Session(JsonlStorage.open(path)) as s:
        with pytest.raises(SessionError) as err:
            s.append_message(U("after"))
        assert err.value.code == "storage"
    assert path.read_bytes() == before  # nothing lost, nothing glued
    sidecars = list(tmp_path.glob("s.jsonl.torn*"))
    assert [p.read_bytes() for p in sidecars] == [fragment]

    monkeypatch.setattr("sessiontree.storage.jsonl.repair.os.pwrite", real_pwrite)
    with Session(JsonlStorage.open(path)) as s:
        s.append_message(U("after"))
    assert [p.read_bytes() for p in tmp_path.glob("s.jsonl.torn*")] == [fragment]  # reused, not duplicated
    lines = path.read_bytes().split(b"\n")
    assert lines[2] == b" " * (len(fragment) - 1)  # blanked in place, same length, never cut
    assert [json.loads(x)["message"]["content"] for x in lines[1:-1] if x.strip()] == ["kept", "after"]


def test_upgrade_interrupted_while_writing_the_copy(tmp_path, monkeypatch):
    path = tmp_path / "old.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    original = path.read_bytes()
    real_write = os.write
    written = {"n": 0}

    def failing_write(fd, data):
        written["n"] += 1
        if written["n"] > 50:
            raise OSError(errno.ENOSPC, "No space left on device (simulated)")
        return real_write(fd, data)

    monkeypatch.setattr("sessiontree.storage.atomic.os.write", failing_write)
    with pytest.raises(SessionError, match=r"No space left.*nothing was changed"):
        JsonlStorage.upgrade(path)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]  # no temp file, no backup


def test_upgrade_interrupted_after_the_backup_link(tmp_path, monkeypatch):
    path = tmp_path / "old.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    original = path.read_bytes()
    monkeypatch.setattr(
        "sessiontree.storage.atomic.os.replace", lambda a, b: (_ for _ in ()).throw(OSError("crash"))
    )
    with pytest.raises(SessionError, match="crash; nothing was changed"):
        JsonlStorage.upgrade(path)
    # the backup link made before the failed replace is gone: the file it copies is unchanged
    assert path.read_bytes() == original and sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]
    monkeypatch.undo()
    (tmp_path / "old.jsonl.bak").write_text("an older backup")
    backup = JsonlStorage.upgrade(path)  # a second try works and keeps an older backup
    assert backup.endswith(".bak.1") and (tmp_path / "old.jsonl.bak").read_text() == "an older backup"
    with open_session(path) as s:
        assert s.header.version == 3 and not s.read_only


def test_an_upgrade_gives_up_when_another_program_appends_meanwhile(tmp_path, monkeypatch):
    """Pi takes no lock: lines it appended while the upgraded copy was being written were only
    in the backup (83 entries of a QA run, unsaid). The rewrite is given up instead."""
    path = tmp_path / "old.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    last = path.read_bytes().splitlines()[-1]
    written = []
    real_write_all = atomic.write_all

    def write_all(fd: int, data: bytes) -> None:
        if not written:  # Pi appends a line while the copy is being written
            with open(path, "ab") as f:
                f.write(last + b"\n")
        written.append(len(data))
        real_write_all(fd, data)

    monkeypatch.setattr(atomic, "write_all", write_all)
    grown = path.read_bytes() + last + b"\n"
    with pytest.raises(SessionError, match="another program wrote to the file while it was being upgraded"):
        JsonlStorage.upgrade(path)
    assert written and path.read_bytes() == grown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jsonl"]  # no backup, no temp file
    monkeypatch.undo()
    assert JsonlStorage.upgrade(path)  # once quiet, it goes through with every line
    with open_session(path) as s:
        assert s.header.version == 3 and s.entry_count() == grown.count(b"\n") - 1


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_durable_mode_fsyncs_every_append(tmp_path, monkeypatch, kind):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        "sessiontree.storage.jsonl.storage.os.fsync", lambda fd: (calls.append(fd), real_fsync(fd))
    )
    if kind == "jsonl":
        storage = JsonlStorage.create(tmp_path / "d.jsonl", cwd="/p", durable=True)
    else:
        storage = SqliteStorage.create(tmp_path / "d.db", cwd="/p", durable=True)
    with Session(storage) as s:
        before = len(calls)
        s.append_message(U("1"))
        s.append_message(U("2"))
        if kind == "jsonl":
            assert len(calls) - before == 2
        else:
            assert s.storage._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_create_interrupted_before_the_link_leaves_no_file(tmp_path, monkeypatch):
    """A session file appears only with its header: a writer killed while creating it used to
    leave an empty file that no one could open."""
    path = tmp_path / "new.jsonl"

    def crash(src, dst):
        raise OSError(errno.EIO, "simulated crash before the link")

    monkeypatch.setattr("sessiontree.storage.jsonl.storage.os.link", crash)
    with pytest.raises(SessionError) as err:
        JsonlStorage.create(path, cwd="/p")
    assert err.value.code == "storage"
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("fine"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl"]

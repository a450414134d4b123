"""The index cache: a reopened session is indexed exactly as a full scan indexes it, only the
appended bytes are scanned, and any doubt about the cache or the file means a full scan."""

from __future__ import annotations

import os
import shutil
from array import array

import orjson
import pytest

from helpers import PI_FIXTURES, A, U
from sessiontree import open_session
from sessiontree.opening import create_session, upgrade_session
from sessiontree.storage.index import TreeIndex
from sessiontree.storage.jsonl import cache


@pytest.fixture(autouse=True)
def small_files_are_cached(monkeypatch, tmp_path):
    monkeypatch.setattr(cache, "MIN_BYTES", 1)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))


def state(session) -> dict:
    """Everything the open built, in comparable form."""
    storage = session.storage
    lines = storage._lines
    index = lines.index
    out = {}
    for name in TreeIndex.__slots__:
        if name in ("_runs", "_anc"):  # made on demand
            continue
        value = getattr(index, name)
        if isinstance(value, (array, bytearray)):
            value = bytes(value) if isinstance(value, bytearray) else value.tolist()
        elif isinstance(value, dict):
            value = list(value.items())
        elif name == "diagnostics":
            value = [(d.severity, d.code, d.message, d.line, d.entry_id) for d in value]
        out[name] = value
    out["offsets"], out["lengths"], out["lines"] = list(lines.offsets), list(lines.lengths), list(lines.lines)
    out["diagnostics"] = [(d.severity, d.code, d.message, d.line, d.entry_id) for d in session.diagnostics]
    out["read_only"] = session.read_only
    out["leaf"] = session.leaf_id
    return out


def full_scan(path) -> dict:
    os.environ["SESSIONTREE_NO_INDEX_CACHE"] = "1"
    try:
        with open_session(path, read_only=True) as session:
            assert session.storage.index_cached == 0
            return state(session)
    finally:
        del os.environ["SESSIONTREE_NO_INDEX_CACHE"]


def opened(path) -> tuple[dict, int]:
    with open_session(path, read_only=True) as session:
        return state(session), session.storage.index_cached


def line(entry: dict) -> bytes:
    return orjson.dumps(entry) + b"\n"


def msg(eid: str, parent: str | None, text: str = "x", role: str = "user") -> dict:
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2026-12-03T10:00:00.000Z",
        "message": {"role": role, "content": text, "timestamp": 1},
    }


def odd_session(tmp_path):
    """Branches, labels, a compaction, a name, and what damage looks like: a bad line, a child
    before its parent, a parent that never appears, an id used twice, an unknown type."""
    path = tmp_path / "odd.jsonl"
    s = create_session("/p", path=path)
    a = s.append_message(U("question"))
    b = s.append_message(A("answer"))
    s.move_to(a, summary="the answer was wrong")
    s.append_label(b, "keep")
    s.append_session_name("odd one")
    s.append_compaction("so far", b, 1234)
    s.close()
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"broken"\n')  # damaged
        f.write(line(msg("kid", "late")))  # written before its parent
        f.write(line(msg("late", b)))
        f.write(line(msg("lost", "never-written")))
        f.write(line(msg(a, b, "same id again")))
        f.write(
            line(
                {"type": "future_thing", "id": "fut", "parentId": "late", "timestamp": "2026-12-03T10:00:00Z"}
            )
        )
    return path


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl", "odd"])
def test_a_cached_open_equals_a_full_scan(tmp_path, name):
    if name == "odd":
        path = odd_session(tmp_path)
    else:
        path = tmp_path / name
        shutil.copyfile(PI_FIXTURES / name, path)
        upgrade_session(path)
    expected = full_scan(path)
    first, cached = opened(path)  # scans and writes the cache
    assert cached == 0 and first == expected
    again, cached = opened(path)
    assert cached == path.stat().st_size  # the cache covered the whole file
    assert again == expected


def test_only_what_was_appended_is_scanned(tmp_path):
    path = odd_session(tmp_path)
    opened(path)
    covered = path.stat().st_size
    with open(path, "ab") as f:
        f.write(line(msg("new1", "late", "appended later")))
        f.write(line(msg("new2", "new1", "and more")))
    again, cached = opened(path)
    assert cached == covered  # the cache's bytes, then a scan of the rest
    assert again == full_scan(path)


def _cache_file(path):
    found = cache.cache_path(str(path), path.stat())
    assert found.exists()
    return found


@pytest.mark.parametrize(
    "spoil",
    ["flip a byte of the cache", "truncate the cache", "another format", "rewrite the session in place"],
)
def test_any_doubt_means_a_full_scan(tmp_path, spoil):
    path = odd_session(tmp_path)
    for k in range(200):  # enough lines that the fingerprint's samples land inside text
        with open(path, "ab") as f:
            f.write(line(msg(f"m{k}", "late", f"text number {k} " + "y" * 200)))
    opened(path)
    target = _cache_file(path)
    data = bytearray(target.read_bytes())
    if spoil == "flip a byte of the cache":
        data[len(data) // 2] ^= 0x20
        target.write_bytes(bytes(data))
    elif spoil == "truncate the cache":
        target.write_bytes(bytes(data[: len(data) // 3]))
    elif spoil == "another format":
        target.write_bytes(b"sessiontree-index 999\n" + bytes(data[len(cache.FORMAT) :]))
    else:
        raw = bytearray(path.read_bytes())
        at = raw.rindex(b"y" * 50)  # the same size, other bytes, inside the last 64 KB
        raw[at : at + 50] = b"z" * 50
        with open(path, "r+b") as f:  # in place: same inode
            f.write(bytes(raw))
    again, cached = opened(path)
    assert cached == 0
    assert again == full_scan(path)


def test_a_replaced_or_truncated_file_is_scanned_afresh(tmp_path):
    path = odd_session(tmp_path)
    opened(path)
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(path, copy)
    os.replace(copy, path)  # same path and bytes, another inode
    again, cached = opened(path)
    assert cached == 0 and again == full_scan(path)
    raw = path.read_bytes()
    path.write_bytes(raw[: raw.rindex(b"\n", 0, len(raw) - 1) + 1])  # the last line cut off
    again, cached = opened(path)
    assert cached == 0 and again == full_scan(path)


def test_no_cache_when_turned_off_or_when_the_directory_cannot_be_written(tmp_path, monkeypatch):
    path = odd_session(tmp_path)
    monkeypatch.setenv("SESSIONTREE_NO_INDEX_CACHE", "1")
    opened(path)
    assert not cache.cache_dir().exists() or not list(cache.cache_dir().glob("*.idx"))
    monkeypatch.delenv("SESSIONTREE_NO_INDEX_CACHE")
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    state_, cached = opened(path)
    assert cached == 0 and state_ == full_scan(path)


def test_the_cache_is_private(tmp_path):
    path = odd_session(tmp_path)
    opened(path)
    target = _cache_file(path)
    assert target.stat().st_mode & 0o777 == 0o600
    assert target.parent.stat().st_mode & 0o777 == 0o700


def test_a_torn_tail_is_handled_as_without_a_cache(tmp_path):
    path = odd_session(tmp_path)
    opened(path)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"half')  # a writer killed mid-line
    with open_session(path) as session:  # writable: the torn tail is set aside
        assert session.storage.index_cached > 0
        codes = [d.code for d in session.diagnostics]
    assert "torn_line" in codes or any("torn" in c for c in codes)


def test_the_least_recently_used_caches_go_once_the_directory_is_full(tmp_path, monkeypatch):
    """Every large file opened gets a cache (copies too, and files deleted since), so the
    directory is pruned after each write: the least recently used first, where a cache read
    counts as a use, and never the one just written."""
    source = odd_session(tmp_path)
    paths = [tmp_path / f"copy{k}.jsonl" for k in range(4)]
    for path in paths:
        shutil.copyfile(source, path)  # the same bytes, another file

    def cached_names() -> list[str]:
        return [p.name for p in paths if cache.cache_path(str(p), p.stat()).exists()]

    opened(paths[0])
    size = _cache_file(paths[0]).stat().st_size
    monkeypatch.setattr(cache, "MAX_TOTAL", 2 * size + size // 2)  # room for two
    clock = iter(range(1_000, 100_000, 100))

    def use(path) -> None:  # opened, then dated in 1970, 100 s apart: no ties, all before now
        opened(path)
        t = next(clock)
        os.utime(_cache_file(path), (t, t))

    for path in paths[:2]:
        use(path)
    assert opened(paths[0])[1]  # read from its cache, which makes it the more recent of the two
    use(paths[2])  # a third: the least recently used, copy1, goes
    assert cached_names() == ["copy0.jsonl", "copy2.jsonl"]
    again, cached = opened(paths[0])
    assert cached and again == full_scan(paths[0])  # what is kept is still used
    monkeypatch.setattr(cache, "MAX_TOTAL", 0)  # nothing fits: the one just written stays
    use(paths[3])
    assert cached_names() == ["copy3.jsonl"]
    (cache.cache_dir() / "notes.txt").write_text("not ours")
    use(paths[1])
    assert (cache.cache_dir() / "notes.txt").exists()

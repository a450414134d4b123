"""The fast msgspec scanner and the full validator must agree on what is a valid entry."""

from __future__ import annotations

import msgspec
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from sessiontree.model.entries import ENTRY_TYPES, validate_entry
from sessiontree.storage.index import TreeIndex
from sessiontree.storage.scan import LineError, decode_entry_dict, fast_decode

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["role", "x", "type", "text"]), inner, max_size=3),
    ),
    max_leaves=6,
)
keys = st.sampled_from(
    [
        "id",
        "parentId",
        "timestamp",
        "message",
        "targetId",
        "label",
        "name",
        "summary",
        "fromId",
        "tokensBefore",
        "firstKeptEntryId",
        "retainedTail",
        "fromHook",
        "usage",
        "customType",
        "content",
        "display",
        "data",
        "provider",
        "modelId",
        "thinkingLevel",
        "activeToolNames",
        "details",
    ]
)


@st.composite
def entry_like(draw):
    obj = {"type": draw(st.sampled_from([*ENTRY_TYPES, "other", 3]))}
    if draw(st.booleans()):  # mostly plausible base fields, so payload rules get exercised
        obj.update(
            {
                "id": draw(st.sampled_from(["a", "", 5])),
                "parentId": draw(st.sampled_from([None, "p", 1])),
                "timestamp": draw(st.sampled_from(["t", ""])),
            }
        )
    obj.update(draw(st.dictionaries(keys, values, max_size=5)))
    if obj.get("type") == "message" and draw(st.booleans()):
        obj["message"] = {"role": draw(st.sampled_from(["user", "assistant", 7])), "content": "c"}
    return obj


def fast_accepts(raw: bytes) -> bool:
    try:
        fast_decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    return True


@settings(max_examples=examples(1500), deadline=None)
@given(entry_like())
def test_fast_path_never_accepts_what_validation_rejects(obj):
    raw = orjson.dumps(obj)
    valid = validate_entry(orjson.loads(raw)) is None
    if fast_accepts(raw):
        assert valid, (obj, validate_entry(obj))
    try:
        decode_entry_dict(raw)
        assert valid
    except LineError:
        assert not valid


@settings(max_examples=examples(500), deadline=None)
@given(entry_like())
def test_fast_and_slow_index_the_same(obj):
    raw = orjson.dumps(obj)
    if validate_entry(obj) is not None:
        return
    a, b = TreeIndex(), TreeIndex()
    try:
        fast_decode(raw).feed(a, 1)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return  # handled by the slow path, which is the reference
    from sessiontree.storage.scan import add_dict

    add_dict(b, decode_entry_dict(raw), 1)
    assert (
        a.ids,
        list(a.parent),
        a.kind,
        a.role,
        a.leaf,
        a.labels,
        a.session_name,
        a.compactions,
        a.flags,
    ) == (b.ids, list(b.parent), b.kind, b.role, b.leaf, b.labels, b.session_name, b.compactions, b.flags)


ASSISTANT_CONTENT = st.sampled_from(
    [
        "text",
        "  ",
        [],
        [{"type": "toolCall", "name": "read"}],
        [{"type": "text", "text": " "}, {"type": "toolCall", "name": "read"}],
        [{"type": "text", "text": "said something"}, {"type": "toolCall", "name": "read"}],
        [{"type": "thinking", "thinking": "hmm"}],
        [7, "x"],
    ]
)


@st.composite
def entry_sequences(draw):
    """Valid entries whose parents are earlier ids, later ids, unknown ids or null, with some
    duplicate ids — the cases where the inlined fast path must step aside."""
    n = draw(st.integers(1, 25))
    ids = [draw(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"])) for _ in range(n)]
    out = []
    for k, eid in enumerate(ids):
        parent = draw(st.sampled_from([None, "zz", *ids[: k + 2]]))
        kind = draw(
            st.sampled_from(["message", "message", "message", "label", "leaf", "compaction", "custom"])
        )
        base = {"type": kind, "id": eid, "parentId": parent, "timestamp": "t"}
        if kind == "message":
            base["message"] = {"role": draw(st.sampled_from(["user", "assistant", "toolResult", "odd"]))}
            base["message"]["content"] = draw(ASSISTANT_CONTENT)
            base["message"]["stopReason"] = draw(
                st.sampled_from([None, "stop", "toolUse", "error", "aborted"])
            )
        elif kind == "label":
            base.update(targetId=draw(st.sampled_from(ids)), label=draw(st.sampled_from(["x", None, " "])))
        elif kind == "leaf":
            base["targetId"] = draw(st.sampled_from([None, "zz", *ids]))
        elif kind == "compaction":
            base.update(summary="s", tokensBefore=1, firstKeptEntryId=draw(st.sampled_from(ids)))
        else:
            base["customType"] = "c"
        out.append(base)
    return out


def _state(index: TreeIndex):
    return (
        index.ids,
        list(index.parent),
        bytes(index.kind),
        bytes(index.role),
        bytes(index.flags),
        list(index.first_child),
        list(index.next_sibling),
        index.roots,
        index.leaf,
        index.labels,
        index.compactions,
        index.leaf_targets,
        [(d.code, d.line) for d in index.diagnostics],
    )


@settings(max_examples=examples(800), deadline=None)
@given(entry_sequences())
def test_bulk_feed_matches_one_by_one(entries):
    from sessiontree.storage.scan import add_dict, decode_all, feed_rows

    lines = [orjson.dumps(e) for e in entries]
    bulk, single = TreeIndex(), TreeIndex()
    rows = decode_all(lines)
    assert rows is not None
    feed_rows(bulk, rows, 2)
    for n, raw in enumerate(lines, 2):
        add_dict(single, decode_entry_dict(raw), n)
    bulk.finish_load()
    single.finish_load()
    assert _state(bulk) == _state(single)


def test_mapped_and_read_scans_agree(tmp_path, monkeypatch):
    """Open-time indexing through mmap and through chunked reads, with tiny batches so that
    batch edges fall everywhere, including next to blank and damaged lines."""
    from helpers import A, U
    from sessiontree import JsonlStorage, Session

    path = tmp_path / "mixed.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        for n in range(400):
            s.append_message(U(f"question {n} é") if n % 3 else A(f"answer {n}"))
            if n % 37 == 0:
                s.move_to(s.tree.ids[n // 2], "detour" if n % 2 else None)
            if n % 53 == 0:
                s.append_label(s.tree.ids[n], f"mark {n}")
            if n == 250:
                s.append_compaction("sum", s.tree.ids[200], 10)
    data = path.read_bytes().split(b"\n")
    data.insert(100, b"")
    data.insert(200, b"   ")
    data.insert(300, b'{"broken": ')
    path.write_bytes(b"\n".join(data))

    def snapshot(mmap_min: int, batch: int, parallel_min: int = 1 << 40, window: int = 64 << 20):
        monkeypatch.setattr("sessiontree.storage.jsonl.storage.MMAP_MIN", mmap_min)
        monkeypatch.setattr("sessiontree.storage.jsonl.indexer.WINDOW", window)
        monkeypatch.setattr("sessiontree.storage.jsonl.indexer.PARALLEL_MIN", parallel_min)
        monkeypatch.setattr("sessiontree.storage.jsonl.indexer.BATCH_LINES", batch)
        monkeypatch.setattr("sessiontree.storage.jsonl.indexer.CHUNK", 4096)
        storage = JsonlStorage.open(path, read_only=True)
        try:
            return (
                _state(storage.index),
                list(storage._lines.offsets),
                list(storage._lines.lengths),
                list(storage._lines.lines),
                [(d.code, d.line) for d in storage.diagnostics],
            )
        finally:
            storage.close()

    reference = snapshot(1 << 40, 8192)
    assert reference[4] == [("invalid_line", 301)]
    assert snapshot(0, 7) == reference
    assert snapshot(0, 8192) == reference
    assert snapshot(1 << 40, 5) == reference
    assert snapshot(0, 64, window=4096) == reference  # mmap windows that end mid-line
    import os

    forks = []
    real_fork = os.fork
    monkeypatch.setattr("sessiontree.storage.jsonl.indexer.os.fork", lambda: forks.append(1) or real_fork())
    assert snapshot(0, 7, parallel_min=0) == reference  # the forked helper does the second half
    assert snapshot(0, 64, parallel_min=0) == reference
    assert snapshot(0, 64, parallel_min=0, window=4096) == reference
    assert len(forks) == 3

    def broken_child():  # a helper that dies at once: the parent redoes its half
        pid = real_fork()
        if pid == 0:
            os._exit(3)
        return pid

    monkeypatch.setattr("sessiontree.storage.jsonl.indexer.os.fork", broken_child)
    assert snapshot(0, 64, parallel_min=0) == reference

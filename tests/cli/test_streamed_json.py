"""`context --json` is written message by message; the bytes are those of one `orjson.dumps`
of the whole object, and a path read in stretches of lines equals one read entry by entry."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

from helpers import PI_FIXTURES
from sessiontree import open_session
from sessiontree.cli.output import json_list_streamed, json_out, json_out_streamed
from sessiontree.opening import upgrade_session


def captured(write) -> bytes:
    buffer = io.BytesIO()
    wrapper = io.TextIOWrapper(buffer, encoding="utf-8")
    with contextlib.redirect_stdout(wrapper):
        write()
        wrapper.flush()
    return buffer.getvalue()


@pytest.mark.parametrize(
    "items",
    [[], [{}], [{"role": "user", "content": "a\nb"}, {"n": [1, [2, {}]], "big": 10**30}], [[], "x", None]],
)
def test_streamed_json_is_byte_for_byte_the_whole_dump(items):
    fields = [("leafId", "abc"), ("model", {"provider": "p", "modelId": "m"}), ("tools", None), ("n", [])]
    whole = {**dict(fields), "messages": items}
    streamed = captured(lambda: json_out_streamed(fields, "messages", iter(items)))
    assert streamed == captured(lambda: json_out(whole))
    assert json.loads(streamed) == whole


@pytest.mark.parametrize("items", [[], [{}], [{"a": [1, {"b": "c\nd"}]}, None, "x"]])
@pytest.mark.parametrize("after", [[], [("tokens", 12)], [("tokens", 3), ("more", {"x": [1]})]])
def test_fields_after_the_list_and_a_list_alone_are_the_whole_dump(items, after):
    """`context --json` writes the token estimate after the messages (it needs the last of
    them); `context --llm` writes a bare list."""
    fields = [("leafId", "abc")]
    whole = {**dict(fields), "messages": items, **dict(after)}
    streamed = captured(lambda: json_out_streamed(fields, "messages", iter(items), lambda: after))
    assert streamed == captured(lambda: json_out(whole))
    assert captured(lambda: json_list_streamed(iter(items))) == captured(lambda: json_out(items))


def test_a_path_read_in_stretches_equals_one_read_entry_by_entry(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    shutil.copyfile(PI_FIXTURES / "large-session.jsonl", path)
    upgrade_session(path)
    monkeypatch.setattr("sessiontree.storage.jsonl.storage.LOAD_MANY_LINES", 7)  # many stretches
    with open_session(path, read_only=True) as session:
        positions = session.tree.path_to_root(session.tree.leaf)
        assert len(positions) > 256
        batched = session.storage.load_many(positions)
        one_by_one = [session.storage.load_entry(i) for i in positions]
        assert [e.to_dict() for e in batched] == [e.to_dict() for e in one_by_one]

"""Pi's real coding-agent files (v1): migrated in memory, never touched, context as Pi builds it.

Expected values are computed here independently of sessiontree, straight from the JSON lines and
CA's documented rules (v1: one chain in file order; context = last compaction's summary, then the
messages from its `firstKeptEntryIndex` on, skipping non-message entries)."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path

import pytest

from helpers import PI_FIXTURES
from sessiontree import JsonlStorage, SessionError, open_session
from sessiontree.context import estimate_tokens

FILES = ["before-compaction.jsonl", "large-session.jsonl"]


def independent_expectations(path):
    objs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    header, entries = objs[0], objs[1:]
    last_c = max((k for k, o in enumerate(objs) if o["type"] == "compaction"), default=None)
    if last_c is None:
        context = [o["message"] for o in entries if o["type"] == "message"]
    else:
        comp = objs[last_c]
        kept = [o["message"] for o in objs[comp["firstKeptEntryIndex"] : last_c] if o["type"] == "message"]
        after = [o["message"] for o in objs[last_c + 1 :] if o["type"] == "message"]
        context = [{"role": "compactionSummary", "summary": comp["summary"]}, *kept, *after]
    model = None
    thinking = "off"
    for o in entries:
        if o["type"] == "model_change":
            model = f"{o['provider']}/{o['modelId']}"
        elif o["type"] == "message" and o["message"]["role"] == "assistant":
            model = f"{o['message']['provider']}/{o['message']['model']}"
        elif o["type"] == "thinking_level_change":
            thinking = o["thinkingLevel"]
    return header, entries, context, model, thinking


@pytest.mark.parametrize("name", FILES)
def test_fixture_opens_migrated(tmp_path, name):
    path = tmp_path / name
    shutil.copy(PI_FIXTURES / name, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    _header, entries, context, model, thinking = independent_expectations(path)
    with open_session(path) as s:
        assert s.diagnostics == []
        assert s.header.version == 1 and s.read_only  # migrated in memory only
        log = s.get_entries()
        assert len(log) == len(entries)
        assert log[0].parent_id is None
        assert all(b.parent_id == a.id for a, b in itertools.pairwise(log))  # one chain
        c = s.build_context()
        assert len(c.messages) == len(context)
        assert [m["role"] for m in c.messages] == [m["role"] for m in context]
        assert str(c.model) == model and c.thinking_level == thinking
        assert c.tokens > 0
        with pytest.raises(SessionError) as err:
            s.append_message({"role": "user", "content": "x"})
        assert err.value.code == "read_only" and "upgrade" in str(err.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # byte-identical


def test_fixture_counts_match_the_reference():
    with open_session(PI_FIXTURES / "before-compaction.jsonl") as s:
        assert s.entry_count() == 1002
        c = s.build_context()
        assert len(c.messages) == 446 and c.messages[0]["role"] == "compactionSummary"
        assert str(c.model) == "anthropic/claude-opus-4-5" and c.thinking_level == "off"
        types = s.stats().types
        assert types["compaction"] == 2 and types["thinking_level_change"] == 5
    with open_session(PI_FIXTURES / "large-session.jsonl") as s:
        assert s.entry_count() == 1018
        c = s.build_context()
        assert len(c.messages) == 914
        assert str(c.model) == "anthropic/claude-sonnet-4-5" and c.thinking_level == "off"


@pytest.mark.parametrize("name", FILES)
def test_upgrade_writes_v3_atomically_with_backup(tmp_path, name):
    path = tmp_path / name
    shutil.copy(PI_FIXTURES / name, path)
    original = path.read_bytes()
    with open_session(path) as s:
        before = s.build_context().messages
    backup = JsonlStorage.upgrade(path)
    assert backup is not None and Path(backup).read_bytes() == original
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["version"] == 3 and lines[0]["id"] == json.loads(original.split(b"\n")[0])["id"]
    assert all(isinstance(o["id"], str) and "parentId" in o for o in lines[1:])
    assert not any("firstKeptEntryIndex" in o for o in lines)
    with open_session(path) as s:
        assert s.diagnostics == [] and not s.read_only
        assert s.build_context().messages == before
        s.append_message({"role": "user", "content": "after the upgrade"})
    assert JsonlStorage.upgrade(path) is None  # already v3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, f"{name}.bak"])


def test_upgrade_failure_leaves_original(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    shutil.copy(PI_FIXTURES / "large-session.jsonl", path)
    original = path.read_bytes()

    def boom(*a, **k):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr("sessiontree.storage.atomic.os.replace", boom)
    with pytest.raises(SessionError, match="simulated crash before the rename; nothing was changed"):
        JsonlStorage.upgrade(path)
    assert path.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]  # no temp file, no stray backup


def test_v2_file_keeps_ids_and_renames_hook_messages(tmp_path):
    rows = [
        {"type": "session", "version": 2, "id": "v2", "timestamp": "t", "cwd": "/p"},
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "timestamp": "t",
            "message": {
                "role": "hookMessage",
                "customType": "x",
                "content": "hi",
                "display": True,
                "timestamp": 1,
            },
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "timestamp": "t",
            "message": {"role": "user", "content": "u", "timestamp": 1},
        },
    ]
    path = tmp_path / "v2.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = path.read_bytes()
    with open_session(path) as s:
        assert [e.id for e in s.get_entries()] == ["a", "b"]
        assert s.get_entry("a").message["role"] == "custom"
        assert [m["role"] for m in s.build_context().messages] == ["custom", "user"]
    assert path.read_bytes() == before


def test_token_estimate_per_message_matches_chars_over_4():
    with open_session(PI_FIXTURES / "large-session.jsonl") as s:
        msgs = s.build_context().messages
    user = next(m for m in msgs if m["role"] == "user")
    text = "".join(b["text"] for b in user["content"] if b["type"] == "text")
    images = sum(1 for b in user["content"] if b["type"] == "image")
    assert estimate_tokens(user) == -(-(len(text) + 4800 * images) // 4)

"""Files sessiontree writes, read back by Pi's own SessionManager (node, @mariozechner/pi-coding-agent
0.73.1): the same leaf, the same context messages, the same thinking level and model.

Needs node and `cd bench && npm ci`; `.ci/run` installs them when the npm registry is reachable.
Without them these tests are skipped, and say so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import PI_FIXTURES, A, U
from sessiontree import JsonlStorage, Session

BENCH = Path(__file__).resolve().parents[2] / "bench"
PI_PACKAGE = BENCH / "node_modules" / "@mariozechner" / "pi-coding-agent"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not PI_PACKAGE.is_dir(),
    reason="Pi's SessionManager is not installed (needs node, then `cd bench && npm ci`)",
)


def pi_reads(path: Path) -> dict:
    done = subprocess.run(
        ["node", str(BENCH / "pi_open.mjs"), str(path)], capture_output=True, text=True, check=True, cwd=BENCH
    )
    return json.loads(done.stdout)


def assert_same(session: Session, path: Path) -> dict:
    pi = pi_reads(path)
    ours = session.build_context()
    assert pi["entries"] == session.entry_count()
    assert pi["leaf_id"] == session.leaf_id
    assert pi["roles"] == [m["role"] for m in ours.messages]
    assert pi["thinking_level"] == ours.thinking_level
    assert pi["model"] == (str(ours.model) if ours.model else None)
    return pi


def test_branches_summaries_labels_and_compaction(tmp_path):
    path = tmp_path / "written.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_model_change("openai", "gpt-5")
        s.append_thinking_level_change("high")
        u1 = s.append_message(U("start"))
        a1 = s.append_message(A("answer"))
        s.append_label(u1, "first")
        s.append_message(U("abandoned"))
        s.append_message(A("abandoned answer"))
        s.move_to(a1, "tried something else")  # leaf entry + branch_summary
        s.append_message(U("second try"))
        kept = s.append_message(A("kept answer"))
        s.append_custom_message_entry("note", "a note for the model", True)
        s.append_message(U("more"))
        s.append_compaction("summary of the early part", kept, 1234)
        s.append_message(U("after the compaction"))
        s.append_session_name("compat")
        s.append_message(A("last", model="claude-sonnet-4-5"))
        pi = assert_same(s, path)
    assert pi["roles"][0] == "compactionSummary"


def test_move_to_root_and_new_root(tmp_path):
    path = tmp_path / "roots.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("one"))
        s.move_to(None)
        s.append_message(U("a new beginning"))
        s.append_message(A("reply"))
        assert_same(s, path)


def test_upgraded_fixture_reads_the_same(tmp_path):
    path = tmp_path / "upgraded.jsonl"
    shutil.copy(PI_FIXTURES / "before-compaction.jsonl", path)
    JsonlStorage.upgrade(path)
    with Session(JsonlStorage.open(path)) as s:
        pi = assert_same(s, path)
    assert pi["context_messages"] == 446


PI_TEXTS = """
import { SessionManager } from "@mariozechner/pi-coding-agent";
const messages = SessionManager.open(process.argv[1]).buildSessionContext().messages;
console.log(JSON.stringify(messages.map((m) => JSON.stringify(m.content))));
"""


def test_an_id_used_twice_reads_as_pi_reads_it(tmp_path):
    """Pi looks a `parentId` up in a map filled in file order, so an entry written under the
    earlier of two entries of one id hangs under the later. The file's index hung it under the
    earlier: its context said the answer Pi does not send."""
    header = {
        "type": "session",
        "version": 3,
        "id": "dup",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/p",
    }

    def message(eid: str, parent: str | None, body: dict, second: int) -> dict:
        stamp = f"2026-01-01T00:00:{second:02d}.000Z"
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": stamp, "message": body}

    path = tmp_path / "dup.jsonl"
    lines = [
        header,
        message("u1", None, U("first"), 1),
        message("a1", "u1", A("answer one"), 2),
        message("x", "a1", U("written under the earlier"), 3),
        message("a1", "u1", A("answer two"), 4),
        message("y", "x", A("last"), 5),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = subprocess.run(
        ["node", "--input-type=module", "-e", PI_TEXTS, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=BENCH,
    )
    with Session(JsonlStorage.open(path, read_only=True)) as s:
        ours = [json.dumps(m["content"], separators=(",", ":")) for m in s.build_context().messages]
        assert s.leaf_id == "y"
    theirs = [json.dumps(json.loads(c), separators=(",", ":")) for c in json.loads(done.stdout)]
    assert ours == theirs
    assert "answer two" in ours[1]


def test_a_second_compaction_keeping_entries_from_before_the_first_sends_one_summary(tmp_path):
    """Pi's compactor looks for its next cut from the last compaction's kept entry on, so a
    compaction soon after another keeps entries from before it. Pi sends the newest summary
    only; the older one was sent too, between the kept entries (found by reading Pi's code)."""
    path = tmp_path / "twice.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        s.append_message(U("early"))
        s.append_message(A("early answer"))
        kept = s.append_message(U("kept question"))
        s.append_message(A("kept answer"))
        s.append_compaction("FIRST summary", kept, 1000)
        s.append_message(U("after the first"))
        s.append_message(A("answer after the first", model="claude-sonnet-4-5"))
        s.append_compaction("SECOND summary", kept, 2000)
        s.append_message(U("after the second"))
        pi = assert_same(s, path)
        ours = s.build_context()
        assert pi["roles"] == ["compactionSummary", "user", "assistant", "user", "assistant", "user"]
        assert [m.get("summary") for m in ours.messages][:1] == ["SECOND summary"]
        assert sum(1 for m in ours.messages if m["role"] == "compactionSummary") == 1


def test_a_compaction_keeping_from_above_an_older_cut_reads_as_pi_reads_it(tmp_path):
    """Cut at the older compaction's kept entry, the context of a newer one keeping from above
    it kept nothing; Pi's coding agent looks on the whole root path (helper review)."""
    path = tmp_path / "above.jsonl"
    with Session(JsonlStorage.create(path, cwd="/p")) as s:
        q1 = s.append_message(U("q1"))
        s.append_message(A("a1"))
        q2 = s.append_message(U("q2"))
        s.append_compaction("FIRST", q2, 1000)
        s.append_message(U("q3"))
        s.append_compaction("SECOND", q1, 2000)
        s.append_message(U("q4"))
        pi = assert_same(s, path)
    assert pi["roles"] == ["compactionSummary", "user", "assistant", "user", "user", "user"]

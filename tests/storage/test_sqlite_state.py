"""SQLite: many sessions per database, and the materialised state that `open` relies on."""

from __future__ import annotations

import sqlite3
import stat
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import A, U, examples
from sessiontree import MemoryStorage, Session, SessionError, SqliteStorage, open_session
from sessiontree.model.entries import entry_from_dict


def build(db, sid="s1") -> tuple[Session, dict[str, str]]:
    s = Session(SqliteStorage.create(db, cwd="/p", session_id=sid))
    ids = {}
    ids["u1"] = s.append_message(U("one"))
    ids["a1"] = s.append_message(A("two"))
    s.append_thinking_level_change("high")
    s.append_label(ids["u1"], "start")
    s.append_session_name("my session")
    ids["u2"] = s.append_message(U("three"))
    s.append_compaction("sum", ids["u2"], 50)
    ids["u3"] = s.append_message(U("four"))
    return s, ids


def test_open_uses_materialised_state_without_loading_the_tree(tmp_path):
    db = tmp_path / "db.sqlite"
    s, ids = build(db)
    expected = s.build_context()
    s.close()
    storage = SqliteStorage.open(db, "s1")
    session = Session(storage)
    statements: list[str] = []
    storage._conn.set_trace_callback(statements.append)
    c = session.build_context()
    assert not storage.index_loaded
    assert not any("FROM entries WHERE session_id = ? AND seq" in q for q in statements)
    assert c.messages == expected.messages and c.thinking_level == "high"
    assert session.leaf_id == ids["u3"] and session.session_name == "my session"
    assert session.get_label(ids["u1"]) == "start"
    assert [e.id for e in session.get_branch()] == [ids["u2"], _compaction_id(session), ids["u3"]]
    assert storage.verify_state() == []
    session.close()


def _compaction_id(session):
    return next(e.id for e in session.get_branch() if e.type == "compaction")


def test_state_is_really_read_back(tmp_path):
    """Tampering with the projection changes what open reports — and verify_state notices."""
    db = tmp_path / "db.sqlite"
    s, _ids = build(db)
    s.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE session_state SET session_name = 'tampered'")
    with open_session(f"{db}#s1", read_only=True) as session:
        assert session.session_name == "tampered"
        problems = session.storage.verify_state()
        assert any("name" in p for p in problems)


def test_stored_labels_that_are_not_json_hide_no_other_difference(tmp_path):
    """Labels that are not JSON, damaged while the session is open, were the one problem said:
    the leaf and the count stored wrong as well went unsaid (review)."""
    db = tmp_path / "db.sqlite"
    s, ids = build(db)
    s.close()
    storage = SqliteStorage.open(db, "s1", read_only=True)
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE session_state SET labels = 'nope', leaf_id = '{ids['u1']}', entry_count = 2")
        conn.execute(f"UPDATE active_branch SET entry_id = '{ids['u1']}' WHERE pos = 0")
    problems = storage.verify_state()
    storage.close()
    assert problems[0] == "labels: the stored labels is not valid JSON"
    assert any(p.startswith("leaf: stored") for p in problems)
    assert "entry count: stored 2, log has 8" in problems
    assert any(p.endswith("(different ones)") for p in problems)  # same length, other ids
    assert not any(p.startswith("labels: stored") for p in problems)  # said once, above


def test_state_matches_log_after_moves(tmp_path):
    db = tmp_path / "db.sqlite"
    s, ids = build(db)
    s.move_to(ids["a1"], "left the compacted branch")
    s.append_label(ids["u1"], None)
    s.append_message(U("five"))
    s.move_to(None)
    s.append_message(U("new root"))
    s.move_to(ids["u3"])
    assert s.storage.verify_state() == []
    s.close()
    with open_session(f"{db}#s1") as again:
        assert again.storage.verify_state() == []
        assert again.leaf_id == ids["u3"] and again.get_label(ids["u1"]) is None


def test_many_sessions_in_one_database(tmp_path):
    db = tmp_path / "db.sqlite"
    a = Session(SqliteStorage.create(db, cwd="/a", session_id="a"))
    b = Session(SqliteStorage.create(db, cwd="/b", session_id="b"))
    a.append_message(U("in a"))
    b.append_message(U("in b"))
    b.append_message(U("more b"))
    assert {x["id"]: x["entry_count"] for x in SqliteStorage.list_sessions(db)} == {"a": 1, "b": 2}
    # what a session without a name is known by in the database's list (the file picker's way)
    assert {x["id"]: x["first_message"] for x in SqliteStorage.list_sessions(db)} == {
        "a": "in a",
        "b": "in b",
    }
    a.close()
    b.close()
    with open_session(f"{db}#b") as s:
        assert [m["content"] for m in s.build_context().messages] == ["in b", "more b"]
    with pytest.raises(SessionError) as err:
        SqliteStorage.open(db, "zzz")
    assert err.value.code == "not_found"


def test_wal_and_private_file(tmp_path):
    import os

    os.umask(0)
    db = tmp_path / "db.sqlite"
    s = Session(SqliteStorage.create(db, cwd="/p"))
    s.append_message(U("x"))
    assert s.storage._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    s.close()


def test_second_writer_locked_reader_follows(tmp_path):
    db = tmp_path / "db.sqlite"
    w = Session(SqliteStorage.create(db, cwd="/p", session_id="x"))
    w.append_message(U("1"))
    with pytest.raises(SessionError) as err:
        SqliteStorage.open(db, "x")
    assert err.value.code == "locked"
    r = open_session(f"{db}#x", read_only=True)
    r.get_children(None)  # load the tree so follow has to extend it
    w.append_message(U("2"))
    assert r.refresh() == 1
    assert [m["content"] for m in r.build_context().messages] == ["1", "2"]
    assert len(r.tree) == 2
    r.close()
    w.close()


def test_failed_transaction_changes_nothing(tmp_path):
    db = tmp_path / "db.sqlite"
    s = Session(SqliteStorage.create(db, cwd="/p"))
    s.append_message(U("1"))
    before = (s.leaf_id, s.entry_count())
    s.storage._conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON active_branch BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
    )
    with pytest.raises(SessionError) as err:
        s.append_message(U("2"))
    assert err.value.code == "storage"
    assert (s.leaf_id, s.entry_count()) == before
    s.storage._conn.execute("DROP TRIGGER boom")
    s.append_message(U("3"))
    assert s.storage.verify_state() == []
    s.close()


@st.composite
def batches(draw):
    """Batches of raw entries for `storage.append`: parents anywhere in the tree (not only the
    leaf), moves to entries of the same batch, compactions with and without a retained tail."""
    out, ids, leaf = [], [], None
    for _ in range(draw(st.integers(1, 6))):
        batch = []
        for _ in range(draw(st.integers(1, 4))):
            eid = f"n{len(ids)}"
            kind = draw(
                st.sampled_from(
                    ["message", "message", "assistant", "leaf", "compaction", "label", "name", "thinking"]
                )
            )
            parent = leaf
            if ids and draw(st.integers(0, 4)) == 0:
                parent = draw(st.sampled_from([None, *ids]))
            data = {"type": kind, "id": eid, "parentId": parent, "timestamp": "2025-01-01T00:00:00Z"}
            if kind == "message":
                data["message"] = U(eid)
            elif kind == "assistant":
                data.update(type="message", message=A(eid))
            elif kind == "leaf":
                if not ids:
                    continue
                data.update(parentId=leaf, targetId=draw(st.sampled_from([None, *ids])))
            elif kind == "compaction":
                kept = draw(st.sampled_from([None, *ids])) if ids else None
                data.update(summary="s", tokensBefore=1, firstKeptEntryId=kept)
                if draw(st.booleans()):
                    data["retainedTail"] = [U("kept")]
            elif kind == "label":
                if not ids:
                    continue
                text = draw(st.sampled_from([None, "x", " "]))
                data.update(targetId=draw(st.sampled_from(ids)), label=text)
            elif kind == "name":
                data.update(type="session_info", name=draw(st.sampled_from([None, "n", "  "])))
            else:
                data.update(type="thinking_level_change", thinkingLevel="high")
            batch.append(data)
            ids.append(eid)
            leaf = data["targetId"] if data["type"] == "leaf" else eid
        if batch:
            out.append(batch)
    return out


@settings(max_examples=examples(150), deadline=None)
@given(batches())
def test_projection_matches_a_fresh_fold_for_any_append(batch_list):
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/db.sqlite"
        storage = SqliteStorage.create(db, cwd="/p", session_id="s")
        for batch in batch_list:
            storage.append([entry_from_dict(data) for data in batch])
            assert storage.verify_state() == []
        storage.close()
        with SqliteStorage.open(db, "s", read_only=True) as again:
            assert again.verify_state() == []
            memory = MemoryStorage([data for batch in batch_list for data in batch])
            assert again.leaf_id == memory.leaf_id and again.labels() == memory.labels()
            assert [e.id for e in again.active_branch()] == [e.id for e in memory.active_branch()]
            assert again.state_entries() == memory.state_entries()


def test_follow_keeps_rows_committed_during_a_refresh(tmp_path):
    """A writer commits between the reader's look at the log position and its read of the
    projection: the tree must still get every row the projection counts."""
    db = tmp_path / "db.sqlite"
    w = Session(SqliteStorage.create(db, cwd="/p", session_id="x"))
    w.append_message(U("1"))
    r = open_session(f"{db}#x", read_only=True)
    assert len(r.tree) == 1
    w.append_message(U("2"))
    seen: list[str] = []

    def between(statement: str) -> None:
        if seen and seen[-1].startswith("SELECT last_seq") and len(seen) == 1:
            w.append_message(U("3"))  # right after the position was read
        seen.append(statement)

    r.storage._conn.set_trace_callback(between)
    r.refresh()
    r.storage._conn.set_trace_callback(None)
    assert len(seen) > 1 and r.entry_count() == 3
    assert len(r.tree) == 3 and r.leaf_id == w.leaf_id
    assert [m["content"] for m in r.build_context().messages] == ["1", "2", "3"]
    r.close()
    w.close()


def test_moves_up_a_deep_branch_keep_the_stored_branch_they_share(tmp_path):
    """After a move up a deep branch the stored active branch was written again whole (its
    shared part was found only when one branch was a prefix of the other): importing a deep
    retry tree was quadratic. The rows before the fork stay; the state still checks out."""
    s = Session(SqliteStorage.create(tmp_path / "deep.sqlite", cwd="/p", session_id="d"))
    ids = [s.append_message(U(f"q{k}") if k % 2 == 0 else A(f"a{k}")) for k in range(400)]
    conn = s.storage._conn
    changes = conn.total_changes
    s.move_to(ids[299], "what the branch left behind tried")  # the summary forks at 299
    # rows changed: the 100 branch rows below the fork deleted, the two entries, the summary's
    # branch row and the state; not the 300 shared rows deleted and written again
    assert conn.total_changes - changes < 120, conn.total_changes - changes
    assert s.storage.verify_state() == []
    leaf = s.leaf_id
    s.close()
    with open_session(tmp_path / "deep.sqlite#d", read_only=True) as reopened:
        assert [e.id for e in reopened.get_branch()] == [*ids[:300], leaf]

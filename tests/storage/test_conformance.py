"""The storage contract: Session behaviours, context building and sessiontree's own rules, run
against every backend (memory, JSONL, SQLite, PostgreSQL), each checked again after a reopen."""

from __future__ import annotations

import gc
import re
import threading

import pytest

from helpers import A, U, roles, texts, zero_usage
from sessiontree import BranchSummary, JsonlStorage, Session, SessionError, SqliteStorage, open_session
from sessiontree.model.entries import BranchSummaryEntry, Entry, LabelEntry, LeafEntry, entry_from_dict
from sessiontree.storage.index import TOOL_ONLY


def check_both(backend, session: Session, check) -> Session:
    """Run `check` on the live session and on a reopened one; return the reopened session."""
    check(session)
    reopened = backend.reopened(session)
    check(reopened)
    return reopened


# --- Session behaviours (Pi's SessionManager) ---------------------------------------------------


def test_user_then_assistant_context(backend):
    s = backend.session()
    s.append_message(U("hi"))
    s.append_message(A("hello"))
    check_both(
        backend,
        s,
        lambda x: roles(x.build_context().messages) == ["user", "assistant"] or pytest.fail(),
    )


def test_model_and_thinking_changes(backend):
    s = backend.session()
    s.append_message(U("hi"))
    s.append_model_change("openai", "gpt-4.1")
    s.append_thinking_level_change("high")

    def check(x):
        c = x.build_context()
        assert c.thinking_level == "high"
        assert (c.model.provider, c.model.model_id) == ("openai", "gpt-4.1")
        assert roles(c.messages) == ["user"]

    check_both(backend, s, check)


def test_branching_with_move_to(backend):
    s = backend.session()
    u1 = s.append_message(U("one"))
    a1 = s.append_message(A("two"))
    s.append_message(U("three"))
    s.move_to(u1)
    a2 = s.append_message(A("branched"))

    def check(x):
        ids = [e.id for e in x.get_branch()]
        assert u1 in ids and a1 not in ids and ids[-1] == a2
        assert roles(x.build_context().messages) == ["user", "assistant"]
        assert texts(x.build_context().messages) == ["one", "branched"]
        assert [e.id for e in x.get_children(u1)] == [a1, a2]

    check_both(backend, s, check)


def test_a_reader_keeps_its_snapshot_until_it_refreshes(backend):
    """A read-only session beside a writer answers from what it read (the leaf, the branch,
    the context, entries by id) until `refresh`: on SQLite the branch came from the writer's
    table, so a move made since gave the other branch's context, and an append made since a
    false "active branch names missing entries"."""
    if backend.reader is None:
        pytest.skip("one in-memory storage: there is no second reader")
    w = backend.session()
    u1 = w.append_message(U("one"))
    a = w.append_message(A("A"))
    with Session(backend.reader(w.storage)) as r:
        w.move_to(u1)
        b = w.append_message(A("B"))
        w.append_message(U("two"))
        assert r.leaf_id == a and r.get_entry(b) is None
        assert texts(r.build_context().messages) == ["one", "A"]
        assert [e.id for e in r.get_branch()] == [u1, a]
        assert r.refresh() > 0
        assert texts(r.build_context().messages) == ["one", "B", "two"] and r.get_entry(b) is not None
    w.close()


def test_a_reader_learns_when_the_writer_has_quit(backend):
    """What the app asks of a session opened read-only because another process wrote it, to
    say when that writer has gone (its banner went on naming the writer's pid)."""
    if backend.reader is None:
        pytest.skip("one in-memory storage: there is no second reader")
    w = backend.session()
    w.append_message(U("one"))
    with Session(backend.reader(w.storage)) as r:
        assert r.writer_elsewhere() and not w.writer_elsewhere()
        assert r.writer_elsewhere()  # asking takes nothing: still the writer's
        w.append_message(A("two"))
        w.close()
        assert not r.writer_elsewhere()


def test_move_to_none_empties_context(backend):
    s = backend.session()
    s.append_message(U("hi"))
    assert s.move_to(None) is None

    def check(x):
        assert x.leaf_id is None
        assert x.build_context().messages == []
        assert x.get_branch() == []

    s = check_both(backend, s, check)
    root2 = s.append_message(U("new root"))
    assert s.get_entry(root2).parent_id is None
    assert len(s.get_children(None)) == 2


def test_compaction_with_retained_tail(backend):
    s = backend.session()
    s.append_message(U("one"))
    s.append_message(A("two"))
    u2 = s.append_message(U("three"))
    s.append_message(A("four"))
    s.append_compaction("summary", u2, 1234, retained_tail=[U("three"), A("four")])
    s.append_message(U("five"))

    def check(x):
        msgs = x.build_context().messages
        assert roles(msgs) == ["compactionSummary", "user", "assistant", "user"]
        assert texts(msgs)[1:] == ["three", "four", "five"]
        assert x.get_branch()[0].type == "compaction"

    check_both(backend, s, check)


def test_move_to_with_summary_writes_branch_summary(backend):
    s = backend.session()
    u1 = s.append_message(U("one"))
    sid = s.move_to(u1, {"summary": "summary text"})
    assert sid is not None

    def check(x):
        entry = x.get_entry(sid)
        assert isinstance(entry, BranchSummaryEntry)
        assert entry.parent_id == u1 and entry.from_id == u1
        assert x.leaf_id == sid
        assert roles(x.build_context().messages)[1] == "branchSummary"

    check_both(backend, s, check)


def test_usage_round_trips_on_compaction_and_summary(backend):
    usage = zero_usage(input=10, output=5, totalTokens=15)
    s = backend.session()
    u1 = s.append_message(U("one"))
    cid = s.append_compaction("sum", u1, 99, usage=usage, details={"readFiles": [], "modifiedFiles": []})
    bid = s.move_to(u1, BranchSummary("went", usage=usage))

    def check(x):
        assert x.get_entry(cid).usage == usage
        assert x.get_entry(bid).usage == usage

    check_both(backend, s, check)


def test_custom_message_entry_in_context(backend):
    s = backend.session()
    s.append_message(U("hi"))
    s.append_custom_message_entry("custom", "hello", True, {"ok": True})

    def check(x):
        msgs = x.build_context().messages
        assert roles(msgs) == ["user", "custom"]
        assert msgs[1]["customType"] == "custom" and msgs[1]["details"] == {"ok": True}
        assert isinstance(msgs[1]["timestamp"], int)

    check_both(backend, s, check)


def test_custom_entry_not_in_context_unless_projected(backend):
    s = backend.session()
    s.append_message(U("hi"))
    s.append_custom_entry("chat_message", {"text": "hello"})

    def projector(entry, index, entries):
        return [U(f"chat: {entry.data['text']}")]

    def check(x):
        assert [e.type for e in x.build_context_entries()] == ["message", "custom"]
        assert len(x.build_context().messages) == 1
        c = x.build_context(projectors={"chat_message": projector})
        assert roles(c.messages) == ["user", "user"] and texts(c.messages)[1] == "chat: hello"
        inst = Session(x.storage, projectors={"chat_message": projector})
        assert texts(inst.build_context().messages)[1] == "chat: hello"

    check_both(backend, s, check)


def test_transforms_run_after_compaction_selection(backend):
    s = backend.session()
    s.append_message(U("one"))
    kept = s.append_message(U("two"))
    s.append_compaction("summary", kept, 1234)
    s.append_message(U("three"))
    seen = []

    def transform(entries):
        seen.append(entries[0].type)
        return [e for e in entries if e.type != "compaction"]

    def check(x):
        c = x.build_context(transforms=[transform])
        assert seen[-1] == "compaction"
        assert roles(c.messages) == ["user", "user"]
        assert texts(c.messages) == ["two", "three"]

    check_both(backend, s, check)


def test_session_name_normalised(backend):
    s = backend.session()
    s.append_session_name(" hello\nworld\r\nagain ")
    check_both(backend, s, lambda x: x.session_name == "hello world again" or pytest.fail(x.session_name))


def test_label_and_name_entries(backend):
    s = backend.session()
    u1 = s.append_message(U("hi"))
    s.append_label(u1, "checkpoint")
    s.append_session_name("name")

    def check(x):
        types = [e.type for e in x.get_entries()]
        assert "label" in types and "session_info" in types
        assert x.get_label(u1) == "checkpoint"
        assert x.session_name == "name"
        assert len(x.build_context().messages) == 1

    check_both(backend, s, check)


def test_label_on_missing_entry_rejected(backend):
    s = backend.session()
    with pytest.raises(SessionError, match="Entry missing not found") as err:
        s.append_label("missing", "x")
    assert err.value.code == "not_found"
    assert s.get_entries() == []


def test_reopen_keeps_everything(backend):
    s = backend.session()
    u1 = s.append_message(U("hi"))
    s.append_message(A("hello"))
    s.append_label(u1, "first")
    s.append_session_name("named")
    s.move_to(u1)
    s.append_message(A("branched"))
    before = (
        [e.to_dict() for e in s.get_entries()],
        s.leaf_id,
        s.labels(),
        s.session_name,
        s.build_context().messages,
    )
    r = backend.reopened(s)
    after = (
        [e.to_dict() for e in r.get_entries()],
        r.leaf_id,
        r.labels(),
        r.session_name,
        r.build_context().messages,
    )
    assert after == before
    assert roles(r.build_context().messages) == ["user", "assistant"]
    if backend.name == "jsonl":
        lines = backend.path.read_text().splitlines()
        assert len(lines) > 1
        import json

        objs = [json.loads(line) for line in lines]
        assert objs[0]["type"] == "session" and objs[0]["version"] == 3
        assert any(o["type"] == "leaf" for o in objs)
        assert all(isinstance(o["id"], str) for o in objs)
        assert not any(o["type"] == "entry" for o in objs)


# --- the worked example of a branch and a move --------------------------------------------------


def test_worked_example(backend):
    s = backend.session()
    a1 = s.append_message(U("hi"))
    a2 = s.append_message(A("hello"))
    s.append_label(a1, "start")
    s.move_to(a1)
    a5 = s.append_message(U("other"))

    def check(x):
        assert x.leaf_id == a5
        assert [e.id for e in x.get_branch()] == [a1, a5]
        assert texts(x.build_context().messages) == ["hi", "other"]
        assert x.get_label(a1) == "start"
        assert [e.id for e in x.get_children(a1)] == [a2, a5]
        label = next(e for e in x.get_entries() if isinstance(e, LabelEntry))
        assert label.parent_id == a2  # the label joins the branch, it does not hang off the target

    check_both(backend, s, check)


def test_seed_example_leaf_entry_then_new_message(backend):
    s = backend.session()
    u1 = s.append_message(U("u1"))
    a1 = s.append_message(A("a1"))
    u2 = s.append_message(U("u2"))
    a2 = s.append_message(A("a2"))
    s.move_to(u1)
    nav1 = next(e for e in s.get_entries() if isinstance(e, LeafEntry))
    assert nav1.parent_id == a2 and nav1.target_id == u1
    a3 = s.append_message(A("a3"))

    def check(x):
        assert x.leaf_id == a3
        assert [e.id for e in x.get_branch()] == [u1, a3]
        log = [e.id for e in x.get_entries()]
        assert log == [u1, a1, u2, a2, nav1.id, a3]
        assert x.leaf_id != nav1.id

    check_both(backend, s, check)


# --- context building (Pi's buildSessionContext) ------------------------------------------------


def test_empty_session(backend):
    s = backend.session()

    def check(x):
        c = x.build_context()
        assert c.messages == [] and c.thinking_level == "off" and c.model is None
        assert c.active_tool_names is None
        assert x.leaf_id is None and x.get_branch() == [] and x.get_children(None) == []

    check_both(backend, s, check)


def test_model_from_assistant_overrides_model_change(backend):
    s = backend.session()
    s.append_message(U("q"))
    s.append_model_change("openai", "gpt-4.1")
    s.append_message(A("r", model="claude-sonnet-4-5"))
    check_both(
        backend,
        s,
        lambda x: str(x.build_context().model) == "anthropic/claude-sonnet-4-5" or pytest.fail(),
    )


def test_compaction_first_kept_cut(backend):
    s = backend.session()
    s.append_message(U("first"))
    s.append_message(A("response1"))
    k = s.append_message(U("second"))
    s.append_message(A("response2"))
    s.append_compaction("sum", k, 100)
    s.append_message(U("third"))
    s.append_message(A("response3"))

    def check(x):
        msgs = x.build_context().messages
        assert roles(msgs)[0] == "compactionSummary"
        assert texts(msgs)[1:] == ["second", "response2", "third", "response3"]

    check_both(backend, s, check)


@pytest.mark.parametrize("kept_by_second", ["q2", "q1"])
def test_a_second_compaction_over_the_first_sends_what_pi_sends(backend, kept_by_second):
    """Pi's compactor, compacting again soon, keeps entries from before the last compaction
    (q2): Pi's coding agent sends the newest summary only, where the older was sent too. A
    newer compaction keeping from above the older's cut (q1) kept nothing here, where Pi keeps
    from its entry (`Session._context_path`)."""
    s = backend.session()
    ids = {"q1": s.append_message(U("q1")), "q2": s.append_message(U("q2"))}
    s.append_compaction("first", ids["q2"], 1)
    s.append_message(U("q3"))
    s.append_compaction("second", ids[kept_by_second], 2)
    s.append_message(U("q4"))
    kept = ["q1", "q2", "q3", "q4"] if kept_by_second == "q1" else ["q2", "q3", "q4"]

    def check(x):
        for msgs in (x.build_context().messages, list(x.stream_context())):
            assert [m.get("summary") for m in msgs if m["role"] == "compactionSummary"] == ["second"]
            assert texts(msgs)[1:] == kept
        assert texts(x.build_context(limit=2).messages)[1:] == ["q4"]

    check_both(backend, s, check)


def test_two_compactions_use_the_latest(backend):
    s = backend.session()
    s.append_message(U("1"))
    k1 = s.append_message(U("2"))
    s.append_compaction("first", k1, 1)
    s.append_message(U("3"))
    k2 = s.append_message(U("4"))
    s.append_compaction("second", k2, 2)
    s.append_message(U("5"))

    def check(x):
        msgs = x.build_context().messages
        assert msgs[0]["summary"] == "second"
        assert texts(msgs)[1:] == ["4", "5"]
        assert len(msgs) == 3

    check_both(backend, s, check)


def test_compaction_first_kept_is_first_entry(backend):
    s = backend.session()
    first = s.append_message(U("a"))
    s.append_message(A("b"))
    s.append_message(U("c"))
    s.append_compaction("sum", first, 1)

    def check(x):
        msgs = x.build_context().messages
        assert roles(msgs) == ["compactionSummary", "user", "assistant", "user"]

    check_both(backend, s, check)


def test_branch_summary_on_path(backend):
    s = backend.session()
    one = s.append_message(U("start"))
    s.append_message(A("r1"))
    s.append_message(U("abandoned"))
    s.move_to(one, "tried something")
    s.append_message(U("better approach"))

    def check(x):
        msgs = x.build_context().messages
        assert roles(msgs) == ["user", "branchSummary", "user"]
        assert msgs[1]["summary"] == "tried something"

    check_both(backend, s, check)


def test_empty_branch_summary_not_in_context(backend):
    s = backend.session()
    one = s.append_message(U("start"))
    s.move_to(one, "")
    check_both(backend, s, lambda x: roles(x.build_context().messages) == ["user"] or pytest.fail())


def test_state_from_full_root_path_survives_compaction(backend):
    """Thinking/model/tools set before the kept range still apply after a compaction."""
    s = backend.session()
    s.append_thinking_level_change("high")
    s.append_model_change("openai", "gpt-5")
    s.append_active_tools_change(["read", "bash"])
    s.append_message(U("old"))
    kept = s.append_message(U("kept"))
    s.append_compaction("sum", kept, 10)
    s.append_message(U("new"))

    def check(x):
        c = x.build_context()
        assert (c.thinking_level, str(c.model), c.active_tool_names) == (
            "high",
            "openai/gpt-5",
            ["read", "bash"],
        )
        assert next(e.type for e in x.get_branch()) == "message"  # bounded path starts at kept

    check_both(backend, s, check)


def test_tail_compaction_state_survives(backend):
    s = backend.session()
    s.append_thinking_level_change("medium")
    s.append_message(U("old"))
    s.append_compaction("sum", None, 10, retained_tail=[U("tail")])
    s.append_message(U("new"))
    check_both(backend, s, lambda x: x.build_context().thinking_level == "medium" or pytest.fail())


# --- tree reads ---------------------------------------------------------------------------------


def test_tree_reads(backend):
    s = backend.session()
    e1 = s.append_message(U("1"))
    e2 = s.append_message(A("2"))
    e3 = s.append_message(U("3"))
    s.move_to(e2)
    e4 = s.append_message(U("4"))
    s.move_to(e2)
    e5 = s.append_message(U("5"))

    def check(x):
        assert [e.id for e in x.get_children(e2)] == [e3, e4, e5]
        assert [e.id for e in x.get_branch(e3)] == [e1, e2, e3]
        assert [e.id for e in x.get_path(e4)] == [e1, e2, e4]
        assert x.get_entry("nope") is None
        assert x.get_entry(e1).to_dict()["message"] == U("1")
        with pytest.raises(SessionError) as err:
            x.get_branch("nope")
        assert err.value.code == "not_found"

    check_both(backend, s, check)


def test_settings_entries_chain_parents(backend):
    s = backend.session()
    m = s.append_message(U("1"))
    t = s.append_thinking_level_change("low")
    c = s.append_custom_entry("ext")
    m2 = s.append_message(U("2"))
    assert s.get_entry(t).parent_id == m
    assert s.get_entry(c).parent_id == t
    assert s.get_entry(m2).parent_id == c
    assert "data" not in s.get_entry(c).to_dict()  # undefined stays absent
    assert len(s.build_context().messages) == 2


# --- sessiontree's own rules --------------------------------------------------------------------


def test_move_to_current_leaf_still_writes_leaf_entry(backend):
    s = backend.session()
    u = s.append_message(U("1"))
    s.move_to(u)
    leafs = [e for e in s.get_entries() if isinstance(e, LeafEntry)]
    assert len(leafs) == 1 and leafs[0].target_id == u and leafs[0].parent_id == u


def test_move_unless_leaf_writes_nothing_where_the_leaf_is(backend):
    s = backend.session()
    u = s.append_message(U("1"))
    a = s.append_message(A("2"))
    count = s.entry_count()
    assert s.move_unless_leaf(a) is False and s.entry_count() == count
    assert s.move_unless_leaf(u) is True and s.leaf_id == u
    assert s.move_unless_leaf(None) is True and s.leaf_id is None
    assert s.move_unless_leaf(None) is False and s.entry_count() == count + 2


def test_summary_from_id_is_old_leaf(backend):
    s = backend.session()
    t = s.append_message(U("t"))
    x = s.append_message(A("x"))
    sid = s.move_to(t, "left x")
    entries = s.get_entries()
    leaf, summary = entries[-2], entries[-1]
    assert isinstance(leaf, LeafEntry) and leaf.parent_id == x and leaf.target_id == t
    assert isinstance(summary, BranchSummaryEntry) and summary.id == sid
    assert summary.parent_id == t and summary.from_id == x


def test_summary_from_root(backend):
    s = backend.session()
    u = s.append_message(U("t"))
    s.move_to(None)
    sid = s.move_to(u, "from nothing")
    assert s.get_entry(sid).from_id == "root"


def test_move_to_unknown_id(backend):
    s = backend.session()
    s.append_message(U("1"))
    before = [e.to_dict() for e in s.get_entries()]
    with pytest.raises(SessionError, match="Entry ghost not found") as err:
        s.move_to("ghost", "summary")
    assert err.value.code == "not_found"
    assert [e.to_dict() for e in s.get_entries()] == before


def test_new_ids_are_8_hex_and_unique(backend):
    s = backend.session()
    for n in range(50):
        s.append_message(U(str(n)))
    ids = [e.id for e in s.get_entries()]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_navigate_user_message_goes_to_parent(backend):
    s = backend.session()
    u1 = s.append_message(U("first"))
    a1 = s.append_message(A("answer"))
    u2 = s.append_message(U("second question"))
    s.append_message(A("answer 2"))
    nav = s.navigate(u2)
    assert nav.new_leaf_id == a1 and nav.editor_text == "second question"
    assert s.leaf_id == a1
    nav = s.navigate(a1)
    assert nav.moved is False  # already there: nothing written
    entries = s.entry_count()
    nav = s.navigate(u2)  # its parent, a1, is the leaf: no `leaf` entry from a1 to a1 (QA)
    assert nav.moved is False and nav.editor_text == "second question" and s.entry_count() == entries
    nav = s.navigate(u1, "summary of the detour")
    assert nav.new_leaf_id == nav.summary_id and s.get_entry(nav.summary_id).parent_id is None


def test_stats(backend):
    s = backend.session()
    s.append_message(U("q"))
    s.append_message(
        A(
            "r",
            usage=zero_usage(input=1000, output=500, cacheRead=200, cacheWrite=100, cost={"total": 0.5}),
        )
    )
    s.append_message(A("bad usage", usage={"input": "x"}))
    st = s.stats()
    assert st.message_count == 3 and st.entry_count == 3
    assert st.total_tokens == 1800 and st.cached_tokens == 200 and st.uncached_tokens == 1100
    assert st.cost_total == 0.5


def test_moving_the_leaf_about_makes_no_tip_and_no_fork(backend):
    """Browsing back and forth appends `leaf` entries below the old leaf: counted as entries
    of the conversation, two moves made one more tip and one fork (QA: the picker said "2
    leaves · 1 fork" of a session nobody had branched)."""
    s = backend.session()
    u1 = s.append_message(U("q"))
    a1 = s.append_message(A("r"))
    s.append_message(U("q2"))
    st = s.stats()
    assert (st.leaf_count, st.fork_count) == (1, 0)
    s.move_to(u1)
    s.move_to(a1)
    st = s.stats()
    assert (st.leaf_count, st.fork_count) == (1, 0) and st.entry_count == 5
    s.append_message(U("another q2"))  # a branch now: the answer is continued twice
    st = s.stats()
    assert (st.leaf_count, st.fork_count) == (2, 1)


def test_limited_context_keeps_newest_and_the_summary(backend):
    s = backend.session()
    for n in range(5):
        s.append_message(U(f"old {n}"))
    kept = s.append_message(U("kept"))
    s.append_compaction("sum", kept, 1)
    for n in range(4):
        s.append_message(U(f"new {n}"))
    full = s.build_context()
    assert len(full.messages) == 6 and full.omitted == 0
    c = s.build_context(limit=3)
    assert c.omitted == 3
    assert roles(c.messages) == ["compactionSummary", "user", "user"]
    assert texts(c.messages)[1:] == ["new 2", "new 3"]
    assert s.build_context(limit=50).messages == full.messages
    none = s.build_context(limit=0)  # at most `limit`: the summary alone was one too many
    assert none.messages == [] and none.omitted == 6


# --- archiving dead branches ---------------------------------------------------------------------


def test_archive_records_replay_on_reopen_and_leave_the_context_alone(backend):
    from sessiontree.archive import archived, set_archived
    from sessiontree.model.errors import SessionError

    s = backend.session()
    u1 = s.append_message(U("question"))
    dead = s.append_message(A("first answer"))
    tip = s.append_message(U("follow-up"))
    s.move_to(u1)
    move = s.tree.ids[len(s.tree) - 1]  # the `leaf` entry below `tip`
    s.append_message(A("second answer"))
    before = s.build_context().messages
    # A stub of nothing would be the only change: nothing below, or only records of moves
    for nothing in (move, tip):
        with pytest.raises(SessionError, match="nothing below it"):
            set_archived(s, nothing, True)
    set_archived(s, dead, True)
    assert s.build_context().messages == before  # a custom entry: never in the context
    with pytest.raises(SessionError):
        set_archived(s, u1, True)  # the leaf is below it

    def check(x):
        assert archived(x) == {x.tree.pos[dead]}
        assert x.build_context().messages == before

    s = check_both(backend, s, check)
    set_archived(s, dead, False)
    check_both(backend, s, lambda x: archived(x) == set() or pytest.fail())


# --- what a caller is given is its own ----------------------------------------------------------


def test_what_a_caller_changes_is_never_seen_by_the_next_read(backend):
    """Memory and JSONL handed out the objects they kept (and kept the caller's own): a caller
    that marks the last message for prompt caching before sending saw the marks pile up in
    every later context (Anthropic refuses more than four), where SQLite and a reopened file
    had none. Every storage now gives each read a copy of its own."""
    s = backend.session()
    s.append_message({"role": "user", "content": [{"type": "text", "text": "turn 1"}]})
    for turn in range(2, 5):
        sent = s.build_context().to_llm()
        sent[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        content = [{"type": "text", "text": f"turn {turn}"}]
        last = s.append_message({"role": "user", "content": content})
        content[0]["text"] = "changed after the append"
    s.get_entry(last).message["content"][0]["text"] = "changed in an entry read"
    s.get_branch()[-1].message["content"].append({"type": "text", "text": "added to the branch"})
    s.build_context().messages[-1]["content"].clear()

    def unchanged(x: Session) -> None:
        assert [m["content"] for m in x.build_context().to_llm()] == [
            [{"type": "text", "text": f"turn {turn}"}] for turn in range(1, 5)
        ]

    check_both(backend, s, unchanged)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_number_json_cannot_hold_is_refused(backend, value):
    """A NaN compaction `tokensBefore` was written as null: the JSONL session turned read-only
    as damaged, and SQLite could no longer build the context. JSON has no NaN or infinity."""
    s = backend.session()
    u = s.append_message(U("hi"))
    with pytest.raises(SessionError, match="tokens before is a count, not") as info:
        s.append_compaction("summary", u, value)  # refused as the argument it is, before the entry
    assert info.value.code == "invalid_argument"
    with pytest.raises(SessionError, match=r"message\.usage\.cost\.1 is NaN or infinite"):
        s.append_message({**U("x"), "usage": {"cost": [1.0, value]}})
    assert s.entry_count() == 1 and not s.read_only and s.check() == []
    s.append_message({**U("a null is fine"), "usage": {"cost": None}})  # the check is only for numbers
    check_both(backend, s, lambda x: x.entry_count() == 2 or pytest.fail())


def test_a_closed_session_says_so(backend):
    """An append to a closed JSONL session failed with a bare AssertionError, `check(decode=True)`
    said nothing was wrong, and a closed memory session went on working."""
    s = backend.session()
    u = s.append_message(U("hi"))
    s.close()
    s.close()  # idempotent
    for attempt in (
        lambda: s.append_message(U("again")),
        lambda: s.append_session_name("a name"),
        lambda: s.append_label(u, "good"),
        lambda: s.move_to(None),
        lambda: s.check(decode=True),
    ):
        with pytest.raises(SessionError, match="the session is closed"):
            attempt()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_session_dropped_without_close_lets_go_of_its_lock(tmp_path, kind):
    """A writer dropped without `close` (a notebook cell run again) kept its lock until the
    process exited: every later writer was refused ("already open for writing in this
    process"). It is released when the storage is collected, with a ResourceWarning."""
    where = str(tmp_path / ("s.jsonl" if kind == "jsonl" else "s.sqlite#s"))

    def cell() -> None:
        storage = (
            JsonlStorage.create(where, cwd="/p")
            if kind == "jsonl"
            else SqliteStorage.create(tmp_path / "s.sqlite", cwd="/p", session_id="s")
        )
        Session(storage).append_message(U("hi"))

    with pytest.warns(ResourceWarning, match="was not closed"):
        cell()
        gc.collect()
    with open_session(where) as again:
        assert again.entry_count() == 1 and not again.read_only
        again.append_message(U("a writer again"))


def test_threads_appending_to_one_session_make_one_branch(backend):
    """Threads appending to one `Session` read the same leaf: forks in memory and SQLite, a
    stored path that disagreed with the log in PostgreSQL (the context had entries of other
    branches), a JSONL file taken for rewritten by another program, read-only from then on."""
    s = backend.session()
    first = s.append_message(U("start"))
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(40):
                s.append_message(U(f"{n}-{i}"))
                if i % 10 == 9:
                    s.append_label(first, f"{n}-{i}")
        except BaseException as exc:  # reported below, with the thread's cause
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    def one_branch(x: Session) -> None:
        assert not x.read_only and not x.check()
        assert x.entry_count() == 1 + 4 * 44
        assert len(x.get_branch()) == x.entry_count()  # every entry on the leaf's path: no fork
        assert len(x.build_context().messages) == 1 + 4 * 40

    check_both(backend, s, one_branch)


def test_an_unknown_id_or_a_closed_session_is_a_session_error(backend):
    """`stream_context(at=unknown)` raised a bare KeyError; `stats()` on a closed session gave
    made-up zeros (every entry taken for unreadable), where every other read says it is closed."""
    s = backend.session()
    s.append_message(U("hi"))
    for call in (
        lambda: s.stream_context(at="zz"),
        lambda: s.build_context(at="zz"),
        lambda: s.get_branch("zz"),
        lambda: s.navigate("zz"),
    ):
        with pytest.raises(SessionError, match="Entry zz not found"):
            call()
    s.close()
    with pytest.raises(SessionError, match="the session is closed"):
        s.stats()


def test_values_nested_too_deeply_are_refused_with_a_session_error(backend):
    """Past Python's recursion limit the standard library's encoder raised a bare
    RecursionError out of `append_message`."""
    s = backend.session()
    value: object = "x"
    for _ in range(5000):
        value = [value]
    with pytest.raises(SessionError, match="nested too deeply"):
        s.append_message({**U("deep"), "extra": value})
    assert s.entry_count() == 0 and not s.read_only
    s.append_message(U("still writable"))


def test_arguments_of_the_wrong_type_are_named(backend):
    """`get_branch(3)` and `build_context(at=1)` said "Entry 3 not found", and `Session("s.jsonl")`
    raised an AttributeError from deep inside (library QA)."""
    s = backend.session()
    s.append_message(U("hi"))
    for call in (lambda: s.get_branch(3), lambda: s.build_context(at=1), lambda: s.stream_context(at=2.5)):
        with pytest.raises(SessionError, match="an entry id must be text"):
            call()
    with pytest.raises(SessionError, match=re.escape("Session takes a storage, not 's.jsonl': open_session")):
        Session("s.jsonl")  # type: ignore[arg-type]


def test_a_context_stream_is_read_once(backend):
    """A second pass over a stream gave [] without a word (library QA)."""
    s = backend.session()
    s.append_message(U("hi"))
    stream = s.stream_context()
    assert [m["role"] for m in stream] == ["user"] and stream.tokens > 0
    with pytest.raises(RuntimeError, match="read once"):
        list(stream)


def test_entries_appended_away_from_the_leaf_move_it_as_in_pi_files(backend):
    """Pi's own files branch without `leaf` entries: an entry whose parent is not the leaf
    continues its parent's path (an import writes such files as they are). PostgreSQL's stored
    active branch kept the old branch and added the entry to it, so a reopened session sent
    the model both branches."""
    s = backend.session()
    u1 = s.append_message(U("one"))
    s.append_message(A("two"))
    s.append_message(U("three"))

    def raw(eid: str, parent: str, text: str) -> Entry:
        return entry_from_dict(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {
                    "role": "assistant" if eid.startswith("a") else "user",
                    "content": text,
                    "timestamp": 1,
                },
            }
        )

    s.storage.append([raw("a0000001", u1, "retried")])  # one batch: the walk over the log
    s.storage.append([raw("b0000001", "a0000001", "next"), raw("a0000002", u1, "again")])  # in it

    def check(x):
        assert texts(x.build_context().messages) == ["one", "again"]
        assert [e.id for e in x.get_branch()] == [u1, "a0000002"]
        if hasattr(x.storage, "verify_state"):
            assert x.storage.verify_state() == []

    check_both(backend, s, check)


def test_turns_that_only_call_tools_are_marked_for_the_default_filter(backend):
    """Pi's /tree hides an assistant turn without text that did not fail: a turn that only
    calls tools. Sessions kept in SQLite or PostgreSQL showed them all under the default
    filter (their tree was built from columns without that mark; QA)."""
    s = backend.session()
    s.append_message(U("run the tests"))
    call = A("", stop="toolUse")
    call["content"] = [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "pytest"}}]
    calls = s.append_message(call)
    s.append_message(
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "bash",
            "content": [{"type": "text", "text": "3 passed"}],
            "isError": False,
            "timestamp": 3,
        }
    )
    blank = s.append_message(A("  \n", stop="stop"))  # no text: hidden as well
    failed = A("", stop="error")  # an error stays in view
    failed["content"] = [{"type": "toolCall", "id": "c2", "name": "bash", "arguments": {}}]
    s.append_message(failed)
    s.append_message(A("All tests pass."))

    def check(x: Session) -> None:
        tree = x.tree
        marked = {tree.ids[i] for i in range(len(tree)) if tree.flags[i] & TOOL_ONLY}
        assert marked == {calls, blank}

    check_both(backend, s, check)

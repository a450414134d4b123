"""A preview's context (`build_context(limit=k)`) is the full context cut to the newest `k`
messages, the compaction summary kept in front: the newest compaction on the path is found by
bisection over the session's compactions, which must agree with looking at every entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import PI_FIXTURES, examples, session_from_steps
from sessiontree import open_session
from sessiontree.storage.index import COMPACTION, LEAF


@settings(max_examples=examples(150), deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from(["u", "a", "compact", "back"]), st.integers(0, 99)), max_size=40)
)
def test_limited_context_is_the_tail_of_the_full_one(steps):
    s, ids = session_from_steps(steps)
    for at in {ids[-1], ids[len(ids) // 2], s.leaf_id}:
        full = s.build_context(at=at)
        for limit in (0, 1, 2, 5):
            cut = s.build_context(at=at, limit=limit)
            messages = full.messages
            head = messages[:1] if limit and messages and messages[0]["role"] == "compactionSummary" else []
            expected = messages
            if len(messages) > limit:
                keep = max(limit - len(head), 0)
                expected = head + (messages[len(messages) - keep :] if keep else [])
            assert cut.messages == expected
            assert cut.omitted == len(full.messages) - len(expected)


@pytest.mark.parametrize(
    "path",
    [*sorted(PI_FIXTURES.glob("*.jsonl")), Path(__file__).parents[2] / "src/sessiontree/demo/demo.jsonl"],
    ids=lambda p: p.name,
)
def test_a_context_from_a_root_path_decoded_already_is_the_same(path):
    """An export decodes the root path, then needed the context at its end: decoding it again
    doubled the export's memory. Built from the path it has, the context is the same at every
    point, compactions included (the path is cut where they bound it)."""
    with open_session(path, read_only=True) as s:
        tree = s.tree
        checked = 0
        for i in range(0, len(tree), max(1, len(tree) // 40)):
            positions = tree.path_to_root(i)
            root_path = [s.entry_at(k) for k in positions]
            eid = tree.ids[i]
            if tree.kind[i] == LEAF:
                continue
            fresh, given = s.build_context(at=eid), s.build_context(at=eid, root_path=root_path)
            assert given.messages == fresh.messages and [e.id for e in given.entries] == [
                e.id for e in fresh.entries
            ]
            assert (given.thinking_level, given.model, given.active_tool_names) == (
                fresh.thinking_level,
                fresh.model,
                fresh.active_tool_names,
            )
            checked += 1
        assert checked >= 10
        compactions = [k for k in range(len(tree)) if tree.kind[k] == COMPACTION]
        if path.name == "demo.jsonl":
            assert compactions  # the point of the demo's case: a bounded path

"""A preview's context (`build_context(limit=k)`) is the full context cut to the newest `k`
messages, the compaction summary kept in front: the newest compaction on the path is found by
bisection over the session's compactions, which must agree with looking at every entry."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import A, U
from sessiontree import MemoryStorage, Session


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from(["u", "a", "compact", "back"]), st.integers(0, 99)), max_size=40)
)
def test_limited_context_is_the_tail_of_the_full_one(steps):
    s = Session(MemoryStorage())
    ids = [s.append_message(U("start"))]
    for what, k in steps:
        if what == "u":
            ids.append(s.append_message(U(f"u{k}")))
        elif what == "a":
            ids.append(s.append_message(A(f"a{k}")))
        elif what == "compact":  # kept from an entry on the path, or with nothing kept
            path = [s.tree.ids[i] for i in s.tree.path_to_root(s.tree.leaf)]
            ids.append(s.append_compaction(f"sum{k}", path[k % len(path)] if k % 3 else None, 1))
        else:  # back to an earlier entry: compactions on other branches are not on this path
            s.move_to(ids[k % len(ids)])
    for at in {ids[-1], ids[len(ids) // 2], s.leaf_id}:
        full = s.build_context(at=at)
        for limit in (1, 2, 5):
            cut = s.build_context(at=at, limit=limit)
            messages = full.messages
            head = messages[:1] if messages and messages[0]["role"] == "compactionSummary" else []
            expected = messages
            if len(messages) > limit:
                keep = max(limit - len(head), 0)
                expected = head + (messages[len(messages) - keep :] if keep else [])
            assert cut.messages == expected
            assert cut.omitted == len(full.messages) - len(expected)

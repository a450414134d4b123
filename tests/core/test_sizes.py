"""Per-entry context sizes agree with the context the preview builds, entry by entry."""

from __future__ import annotations

import pytest

from harness.retries import write_retries
from helpers import PI_FIXTURES
from sessiontree import open_session
from sessiontree.context import estimate_context_tokens
from sessiontree.sizes import ContextSizes, short_tokens


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl"])
def test_sizes_match_the_built_context_at_every_entry(name):
    with open_session(PI_FIXTURES / name, read_only=True) as s:
        sizes = ContextSizes(s)
        for i in reversed(range(len(s.tree))):  # leaf-most first: the walks are the longest
            expected = estimate_context_tokens(s.build_context(at=s.tree.ids[i]).messages)
            assert sizes.compute(i) == expected, s.tree.ids[i]


def test_sizes_across_a_compaction_restart_from_its_context():
    with open_session(PI_FIXTURES / "before-compaction.jsonl", read_only=True) as s:
        sizes = ContextSizes(s)
        compactions = [i for i in range(len(s.tree)) if s.entry_at(i).type == "compaction"]
        for c in compactions:
            assert sizes.compute(c) == estimate_context_tokens(s.build_context(at=s.tree.ids[c]).messages)


def test_a_walk_stops_at_known_sizes_and_can_be_cancelled(tmp_path):
    with write_retries(tmp_path / "r.jsonl", retries=200, nested=10) as s:
        sizes = ContextSizes(s)
        leaf = s.tree.leaf
        assert sizes.compute(leaf, cancelled=lambda: True) is None and sizes.known(leaf) is None
        total = sizes.compute(leaf)
        assert total == estimate_context_tokens(s.build_context().messages)
        parent = s.tree.parent[leaf]
        assert sizes.known(parent) is not None and sizes.added(leaf) == total - sizes.known(parent)


def test_short_tokens():
    assert [short_tokens(n) for n in (0, 850, 12_345, 123_456, 1_234_567)] == [
        "0",
        "850",
        "12.3k",
        "123k",
        "1.2M",
    ]

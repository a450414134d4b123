"""Path walks over runs (`storage.runs`) equal the walk one entry at a time: the root path, the
compaction-bounded path Pi's context starts from, and the nearest state entries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from sessiontree.storage import index as index_module
from sessiontree.storage.index import COMPACTION, NONE, TreeIndex, state_slot

TYPES = [
    ("message", "user"),
    ("message", "assistant"),
    ("message", "toolResult"),
    ("model_change", None),
    ("thinking_level_change", None),
    ("active_tools_change", None),
    ("custom_message", "assistant"),
    ("compaction", None),
]


@st.composite
def logs(draw):
    n = draw(st.integers(1, 80))
    index = TreeIndex()
    for i in range(n):
        how = draw(st.sampled_from(["next"] * 5 + ["fork", "root", "dup"]))
        parent = None if i == 0 or how == "root" else f"e{i - 1}"
        if how == "fork" and i:
            parent = f"e{draw(st.integers(0, i - 1))}"
        eid = f"e{draw(st.integers(0, i - 1))}" if how == "dup" and i else f"e{i}"
        type_name, role = draw(st.sampled_from(TYPES))
        kept = f"e{draw(st.integers(0, n))}" if type_name == "compaction" else None
        index.add(eid, parent, type_name, role, first_kept=kept, has_tail=draw(st.booleans()))
    return index


def root_path(index: TreeIndex, i: int) -> list[int]:
    out = []
    while i >= 0:
        out.append(i)
        i = index.parent[i]
    return out[::-1]


def bounded(index: TreeIndex, i: int, marker: str | None) -> list[int]:
    out = []
    while i >= 0:
        out.append(i)
        if marker is not None and index.ids[i] == marker:
            break
        if index.kind[i] == COMPACTION:
            first_kept, has_tail = index.compactions[i]
            if has_tail:
                break
            marker = first_kept
        i = index.parent[i]
    return out[::-1]


def nearest_state(index: TreeIndex, i: int) -> tuple[int, int, int]:
    found = [NONE, NONE, NONE]
    while i >= 0:
        slot = state_slot(index.kind[i], index.role[i])
        if slot >= 0 and found[slot] == NONE:
            found[slot] = i
        i = index.parent[i]
    return found[0], found[1], found[2]


@settings(max_examples=examples(300), deadline=None)
@given(
    index=logs(),
    marker=st.one_of(st.none(), st.integers(0, 80)),
    how=st.sampled_from(["entry by entry", "over the runs", "entry by entry, then over the runs"]),
)
def test_walks_over_runs_equal_walks_entry_by_entry(index, marker, how):
    """Before the runs exist a walk goes entry by entry (`TreeIndex.ranges`), and a long one
    makes the runs halfway and goes on over them: all three give the same answers."""
    mark = None if marker is None else f"e{marker}"
    walk_first = index_module.WALK_FIRST
    if how == "entry by entry, then over the runs":
        index_module.WALK_FIRST = 2  # the runs are made after two entries of a walk
    try:
        for i in range(len(index)):
            asked = (
                (index.path_to_root, (i,), root_path(index, i)),
                (index.bounded_path, (i,), bounded(index, i, None)),
                (index.bounded_path, (i, mark), bounded(index, i, mark)),
                (index.state_entries, (i,), nearest_state(index, i)),
            )
            for ask, args, expected in asked:
                if how == "over the runs":
                    index.runs()
                else:
                    index._runs = None  # each walk starts before the runs exist
                assert ask(*args) == expected
    finally:
        index_module.WALK_FIRST = walk_first


def test_walks_see_entries_appended_after_the_runs_were_made():
    index = TreeIndex()
    index.add("a", None, "message", "user")
    assert index.path_to_root(0) == [0]
    index.add("b", "a", "message", "assistant")
    index.add("c", "a", "message", "assistant")  # a second child: "a"'s run ends at "a"
    index.add("d", "b", "compaction", first_kept="b", has_tail=False)
    assert index.path_to_root(3) == [0, 1, 3]
    assert index.bounded_path(3) == [1, 3]
    assert index.state_entries(2) == (NONE, 2, NONE)


def test_a_marker_on_a_compaction_ends_the_path_there():
    index = TreeIndex()
    index.add("a", None, "message", "user")
    index.add("b", "a", "compaction", first_kept="a", has_tail=False)
    index.add("c", "b", "message", "user")
    assert index.bounded_path(2, "b") == [1, 2]  # not continued to "a" by b's own marker
    assert index.bounded_path(2) == [0, 1, 2]

"""TreeIndex with entries written before their parents: the same tree as file order gives, and
work that grows linearly with the number of entries (no timing: executed lines are counted)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from sessiontree.storage import index as index_module
from sessiontree.storage.index import TreeIndex
from sessiontree.storage.scan import add_dict


def chain_with_forks(n: int) -> list[dict[str, Any]]:
    out = []
    for k in range(n):
        parent = None if k == 0 else f"e{k - 1}"
        if k and k % 50 == 0:
            parent = f"e{k - 25}"  # a fork every 50 entries
        role = "user" if k % 2 else "assistant"
        out.append(_message(f"e{k}", parent, role))
    return out


def children_first(n: int) -> list[dict[str, Any]]:
    """A chain c0, c1, ... in order, each c_k preceded by a child written before it: every
    adoption happens at the bottom of an ever deeper chain."""
    out = []
    for k in range(n // 2):
        out.append(_message(f"x{k}", f"c{k}", "user"))
        out.append(_message(f"c{k}", f"c{k - 1}" if k else None, "assistant"))
    return out


def _message(eid: str, parent: str | None, role: str) -> dict[str, Any]:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "t", "message": {"role": role}}


def build(entries: list[dict[str, Any]]) -> TreeIndex:
    index = TreeIndex()
    for line, data in enumerate(entries, 2):
        add_dict(index, data, line)
    index.finish_load()
    return index


def shape(index: TreeIndex) -> tuple[dict[str, str | None], dict[str, set[str]], set[str]]:
    """The tree independent of file order: parent of each id, children of each id, roots."""
    ids = index.ids
    parents = {ids[i]: (ids[p] if p >= 0 else None) for i, p in enumerate(index.parent)}
    children = {ids[i]: {ids[c] for c in index.children(i)} for i in range(len(index))}
    return parents, children, {ids[r] for r in index.roots}


def test_reversed_file_gives_the_in_order_tree():
    entries = chain_with_forks(20_000)
    in_order = build(entries)
    assert in_order.diagnostics == [] and len(in_order.roots) == 1
    for order in (entries[::-1], random.Random(7).sample(entries, len(entries))):
        index = build(order)
        assert index.diagnostics == []
        assert shape(index) == shape(in_order)
        deepest = index.pos["e19999"]
        assert [index.ids[i] for i in index.path_to_root(deepest)] == [
            in_order.ids[i] for i in in_order.path_to_root(in_order.pos["e19999"])
        ]
        assert index.roots == [index.pos["e0"]]


def test_children_first_gives_the_in_order_tree():
    entries = children_first(4_000)
    in_order = build(sorted(entries, key=lambda d: (int(d["id"][1:]), d["id"][0] == "x")))
    index = build(entries)
    assert index.diagnostics == [] and shape(index) == shape(in_order)


def test_cycles_are_still_cut_when_adopting():
    # a names d as its parent, d descends from a: adopting a under d would close a loop
    index = build([_message("a", "d", "user"), _message("b", "a", "user"), _message("d", "b", "user")])
    assert [d.code for d in index.diagnostics] == ["parent_cycle"]
    assert index.roots == [index.pos["a"]]
    assert list(index.parent) == [index_module.MISSING, 0, 1]
    # the cut child is not also reported as waiting for a parent
    assert index.missing_parents == {}
    # a longer cycle closed deep below a true root stays cut as well
    index = build(
        [
            _message("x", "z", "user"),
            _message("r", None, "user"),
            _message("y", "x", "user"),
            _message("z", "y", "user"),
        ]
    )
    assert [d.code for d in index.diagnostics] == ["parent_cycle"]
    assert sorted(index.ids[r] for r in index.roots) == ["r", "x"]


def _lines_executed(entries: list[dict[str, Any]]) -> int:
    """Lines run inside storage/index.py while indexing `entries` (a count of work that does not
    depend on the machine's speed)."""
    target = Path(index_module.__file__).resolve()
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def global_(frame: Any, event: str, arg: Any) -> Any:
        return local if Path(frame.f_code.co_filename).resolve() == target else None

    index = TreeIndex()
    sys.settrace(global_)
    try:
        for data in entries:
            add_dict(index, data, None)
    finally:
        sys.settrace(None)
    return count


def test_adoption_work_grows_linearly():
    # doubling the entries must roughly double the work; adoption that walks each new parent's
    # whole path to the root (or list.remove on the roots) quadruples it
    for make in (children_first, lambda n: chain_with_forks(n)[::-1]):
        small = _lines_executed(make(1_000))
        large = _lines_executed(make(2_000))
        assert large < 2.5 * small, (small, large)


# --- path facts: kept per fork point, equal to a walk up the parents ---------------------------

KINDS = [
    "user",
    "assistant",
    "thinking_level_change",
    "model_change",
    "active_tools_change",
    "compaction",
    "branch_summary",
    "custom_message",
    "label",
]


def _entry(eid: str, parent: str | None, what: str) -> dict[str, Any]:
    if what in ("user", "assistant"):
        return _message(eid, parent, what)
    data: dict[str, Any] = {"type": what, "id": eid, "parentId": parent, "timestamp": "t"}
    if what == "compaction":
        data.update(summary="s", firstKeptEntryId=None, tokensBefore=1)
    elif what == "branch_summary":
        data.update(fromId="x", summary="s")
    elif what == "custom_message":
        data.update(customType="c", content="x", display=True)
    elif what == "label":
        data.update(targetId="x", label="l")
    return data


def _walked(index: TreeIndex, i: int) -> tuple[int, int, int, int, int, int]:
    """`path_facts` by looking at every entry from `i` up to its root."""
    from sessiontree.storage.index import (
        ACTIVE_TOOLS_CHANGE,
        ASSISTANT,
        BRANCH_SUMMARY,
        COMPACTION,
        CUSTOM_MESSAGE,
        MESSAGE,
        MODEL_CHANGE,
        NONE,
        THINKING_LEVEL_CHANGE,
    )

    length, found, messages = 0, [NONE] * 4, 0
    while i >= 0:
        length += 1
        kind = index.kind[i]
        messages += kind in (MESSAGE, BRANCH_SUMMARY, CUSTOM_MESSAGE)
        is_model = kind == MODEL_CHANGE or (kind == MESSAGE and index.role[i] == ASSISTANT)
        for slot, hit in enumerate(
            (kind == COMPACTION, kind == THINKING_LEVEL_CHANGE, is_model, kind == ACTIVE_TOOLS_CHANGE)
        ):
            if hit and found[slot] == NONE:
                found[slot] = i
        i = index.parent[i]
    return (length, *found, messages)


@pytest.mark.parametrize("arrays", [False, True], ids=["run-by-run", "arrays"])
@settings(max_examples=examples(120), deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, len(KINDS) - 1), st.integers(0, 10**6), st.booleans()),
        min_size=1,
        max_size=120,
    ),
    late=st.integers(0, 20),
)
def test_path_facts_equal_a_walk_up_the_parents_as_entries_arrive(steps, late, arrays):
    """Forks anywhere, facts asked between batches of appends (the kept answers must stay true),
    and one entry held back and appended last, after its children: its adoption relinks their
    paths, which must drop what was kept. Summed run by run, and as a long path is (numpy over
    the runs, keeping what holds at some of them: here every path crossing a run or more, and
    one run in two kept)."""
    with (
        patch.object(index_module, "ARRAY_WALK", 0 if arrays else index_module.ARRAY_WALK),
        patch.object(index_module, "KEEP_EVERY", 2),
    ):
        _facts_as_entries_arrive(steps, late)


def _facts_as_entries_arrive(steps: list[tuple[int, int, bool]], late: int) -> None:
    entries: list[dict[str, Any]] = []
    for k, (what, pick, fork) in enumerate(steps):
        parent = None if k == 0 else f"n{pick % k if fork else k - 1}"
        entries.append(_entry(f"n{k}", parent, KINDS[what]))
    held = entries.pop(late % len(entries)) if len(entries) > 2 else None
    index = TreeIndex()
    for line, data in enumerate(entries, 2):
        add_dict(index, data, line)
        if line % 7 == 0:
            for i in range(0, len(index), 3):
                assert index.path_facts(i) == _walked(index, i)
    if held is not None:
        add_dict(index, held, len(entries) + 2)
    for i in range(len(index)):
        assert index.path_facts(i) == _walked(index, i)
        thinking, model, tools = index.state_entries(i)
        assert (thinking, model, tools) == _walked(index, i)[2:5]


def test_branch_counts_read_the_entries_whole_while_one_is_being_added():
    """Another thread appending to a session grows the index's arrays one after the other:
    `stats()` read a parent without its kind and raised IndexError (QA, threads sharing a
    memory session). The counts are of the entries indexed whole."""
    index = TreeIndex()
    for k, parent in enumerate([None, "n0", "n0", "n1"]):
        add_dict(index, _entry(f"n{k}", parent, "user"), None)
    assert index.branch_counts() == (2, 1)
    index.parent.append(3)  # the next entry's parent, its kind not yet there
    assert index.branch_counts() == (2, 1)

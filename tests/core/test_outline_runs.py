"""The outline works on runs of entries; these tests hold it to the entry-by-entry walk of
`harness.reference_outline` on random trees, filters, folds and leaves, and check that the
structures kept between builds (runs, masks, the active path) stay equal to fresh ones as
entries are appended and the leaf moves."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reference_outline import ReferenceOutline
from helpers import examples
from sessiontree import folds as folds_module
from sessiontree import layout
from sessiontree import outline as outline_module
from sessiontree.layout import lay_out
from sessiontree.outline import (
    ActivePath,
    Filter,
    Masks,
    Outline,
    Runs,
    active_marks,
    subtree_size,
    visibility,
)
from sessiontree.storage.index import NONE, TreeIndex

KINDS = [
    ("message", "user"),
    ("message", "assistant"),
    ("message", "toolResult"),
    ("model_change", None),
    ("custom", None),
    ("branch_summary", None),
]


@st.composite
def trees(draw, adoptions: bool = True):
    """A log of up to 60 entries: mostly chains (each entry the child of the one before), with
    forks back to earlier entries, new roots, and (with `adoptions`) a few children written
    before their parent."""
    n = draw(st.integers(1, 60))
    index = TreeIndex()
    late: dict[int, int] = {}  # child -> the later entry that turns out to be its parent
    for i in range(n):
        how = draw(st.sampled_from(["next", "next", "next", "fork", "root", "late"][: 6 if adoptions else 5]))
        parent: str | None
        if i == 0 or how == "root":
            parent = None
        elif how == "fork":
            parent = f"e{draw(st.integers(0, i - 1))}"
        elif how == "late" and i + 1 < n:
            late[i] = draw(st.integers(i + 1, n - 1))
            parent = f"e{late[i]}"
        else:
            parent = f"e{i - 1}"
        type_name, role = draw(st.sampled_from(KINDS))
        index.add(f"e{i}", parent, type_name, role, tool_only=draw(st.booleans()) and role == "assistant")
    index.leaf = draw(st.integers(NONE, n - 1))
    return index


def _same(index: TreeIndex, outline: Outline, ref: ReferenceOutline) -> None:
    n = len(ref)
    assert len(outline) == n
    assert list(outline.rows_pos) == list(ref.rows_pos)
    assert [outline.position(r) for r in range(n)] == list(ref.rows_pos)
    assert [outline.prefix(r) for r in range(n)] == [ref.prefix(r) for r in range(n)]
    assert list(outline.side_roots) == sorted(ref.side_roots)
    assert outline.side_folds == set(ref.side_roots)
    assert [outline.row_of[i] for i in range(len(index))] == list(ref.row_of)
    drawn = sorted(r for r in ref.row_of if r >= 0)
    assert outline.rows_of(range(len(index))) == drawn
    with patch.object(outline_module, "MANY_MATCHES", -1):  # as for a search's many matches
        assert outline.rows_of([-1, *range(len(index)), len(index)]) == drawn
    assert [outline.row_for(i) for i in range(len(index))] == [ref.row_for(i) for i in range(len(index))]
    on_path = active_marks(index, index.leaf)  # per run in the array layout, per entry in the loop
    assert [outline.on_path(i) for i in range(len(index))] == [bool(m) for m in on_path]
    for step in (1, -1):
        assert [outline.next_fork_row(r, step) for r in range(n)] == [
            ref.next_fork_row(r, step) for r in range(n)
        ]


@settings(max_examples=examples(300), deadline=None)
@given(
    index=trees(),
    flt=st.sampled_from(list(Filter)),
    fold_seeds=st.lists(st.integers(0, 59), max_size=4),
    restrict_seed=st.one_of(st.none(), st.integers(0, 2**60)),
    use_marks=st.booleans(),
)
def test_rows_equal_the_entry_by_entry_walk(index, flt, fold_seeds, restrict_seed, use_marks):
    n = len(index)
    labels = {f"e{k}": "x" for k in range(0, n, 3)}
    folded = {k % n for k in fold_seeds}
    marks = active_marks(index, index.leaf) if use_marks else None
    restrict = None
    if restrict_seed is not None:
        restrict = bytes((restrict_seed >> (k % 60)) & 1 for k in range(n))
    ref = ReferenceOutline(index, flt, labels, folded, marks, restrict)
    _same(index, Outline(index, flt, labels, folded, marks, restrict), ref)


@settings(max_examples=examples(400), deadline=None)
@given(
    index=trees(adoptions=False),
    flt=st.sampled_from(list(Filter)),
    fold_seeds=st.lists(st.integers(0, 59), max_size=4),
    restrict_seed=st.one_of(st.none(), st.integers(0, 2**60)),
    leaf_seed=st.integers(0, 59),
    bisect=st.booleans(),
    walk=st.sampled_from([1, 2, 512]),
    buffers=st.booleans(),
)
def test_array_layout_equals_the_entry_by_entry_walk(
    index, flt, fold_seeds, restrict_seed, leaf_seed, bisect, walk, buffers
):
    """The numpy layout (used from `VECTOR_MIN` runs) draws exactly what the walk draws,
    including leaves on older children (rotated stretches) and folds inside the path. `walk`:
    runs `row_for` walks up before it searches the rest of the path at once. `buffers`: folds
    sorted by numpy into a memoryview, as `z` makes them on a big tree."""
    n = len(index)
    index.leaf = leaf_seed % n
    labels = {f"e{k}": "x" for k in range(0, n, 3)}
    folded = {k % n for k in fold_seeds}
    marks = active_marks(index, index.leaf)
    restrict = None
    if restrict_seed is not None:
        restrict = bytes((restrict_seed >> (k % 60)) & 1 for k in range(n))
    ref = ReferenceOutline(index, flt, labels, folded, marks, restrict)
    with (
        patch.object(outline_module, "VECTOR_MIN", 0),
        patch.object(layout, "FIND_MAX", 0 if bisect else 4096),
        patch.object(folds_module, "SORT_WITH_NUMPY", 0 if buffers else 4096),
    ):
        outline = Outline(index, flt, labels, list(folded), marks, restrict)
        assert isinstance(outline.folded.positions, memoryview) == (buffers and bool(folded))
        assert outline.side_roots is not None  # found when first asked: here, under this FIND_MAX
        assert lay_out(index, outline.runs, outline.vis, folded, index.leaf) is not None  # not the loop
        with patch.object(outline_module, "WALK_MOST", walk):
            _same(index, outline, ref)


@settings(max_examples=examples(200), deadline=None)
@given(
    index=trees(adoptions=False),
    builds=st.lists(
        st.tuples(
            st.integers(0, 59), st.sampled_from(list(Filter)), st.lists(st.integers(0, 59), max_size=2)
        ),
        min_size=2,
        max_size=8,
    ),
)
def test_array_layout_kept_between_builds_equals_the_walk(index, builds):
    """What the numpy layout keeps from one build to the next (the runs drawn under a mask and
    folds, whatever the leaf) must give the walk's rows through any sequence of leaf moves,
    filter switches and folds on the same runs."""
    n = len(index)
    runs = Runs(index)
    labels = {f"e{k}": "x" for k in range(0, n, 2)}
    for leaf_seed, flt, fold_seeds in builds:
        index.leaf = leaf_seed % n
        folded = {k % n for k in fold_seeds}
        marks = active_marks(index, index.leaf)
        with patch.object(outline_module, "VECTOR_MIN", 0):
            outline = Outline(index, flt, labels, folded, marks, runs=runs)
        _same(index, outline, ReferenceOutline(index, flt, labels, folded, marks, None))


@settings(max_examples=examples(200), deadline=None)
@given(index=trees(adoptions=False), batches=st.lists(st.integers(1, 8), min_size=1, max_size=30))
def test_array_layout_shape_follows_appends(index, batches):
    """The structure the numpy layout keeps with the runs (preorder numbers, subtree sizes,
    parents), brought up to date as forks split runs and add new ones, equals a fresh one."""
    partial = TreeIndex()
    runs = Runs(partial)
    k, full = 0, len(index)
    for batch in [*batches, full]:
        for _ in range(min(batch, full - k)):
            p = index.parent[k]
            partial.add(index.ids[k], index.ids[p] if p >= 0 else None, index.type_name(k), None)
            k += 1
        runs.update()
        kept = layout._shape(partial, runs)
        fresh = layout._Shape(partial, Runs(partial))
        for name in ("lo", "hi", "par", "pre", "size", "preorder"):
            assert getattr(kept, name).tolist() == getattr(fresh, name).tolist(), name
            assert getattr(kept, name).dtype == layout.INT, name  # else converted at every gather
        if k == full:
            break


def test_a_run_added_is_written_into_room_past_the_shapes_arrays():
    """A leaf move adds a run: the shape's arrays grow into spare room of the buffer they view
    rather than being copied, and a view taken before keeps what it showed."""
    first = layout._grown(np.arange(3, dtype=layout.INT), 7)  # copied once, with room to spare
    second = layout._grown(first, 8)
    assert first.tolist() == [0, 1, 2, 7] and second.tolist() == [0, 1, 2, 7, 8]
    assert second.ctypes.data == first.ctypes.data and second.dtype == layout.INT
    put = layout._put(second, 1, 5, 9)  # a split copies, into a buffer with room again
    assert put.tolist() == [0, 5, 1, 2, 7, 8, 9] and second.tolist() == [0, 1, 2, 7, 8]
    assert layout._grown(put, 4).ctypes.data == put.ctypes.data


@settings(max_examples=examples(200), deadline=None)
@given(index=trees(adoptions=False), leaves=st.lists(st.integers(-1, 59), min_size=1, max_size=8))
def test_active_path_marked_at_once_equals_the_walk(index, leaves):
    """On trees of many runs a long leaf move marks the path with array operations; it must
    mark the same entries as walking up from the leaf."""
    path = ActivePath(index)
    with patch.object(outline_module, "VECTOR_MIN", 0), patch.object(outline_module, "WALK_MOST", 1):
        for leaf in leaves:
            index.leaf = min(leaf, len(index) - 1)
            assert path.update() == active_marks(index, index.leaf)


def _runs_equal(a: Runs, b: Runs) -> None:
    assert (a.lo, a.hi) == (b.lo, b.hi)


@settings(max_examples=examples(200), deadline=None)
@given(
    index=trees(),
    cut=st.integers(0, 60),
    leaves=st.lists(st.integers(-1, 59), max_size=6),
    flt=st.sampled_from(list(Filter)),
)
def test_kept_structures_follow_appends_and_moves(index, cut, leaves, flt):
    """Runs, masks and the active path, built on a prefix of the log and brought up to date,
    equal fresh ones; so does the outline built from them."""
    full = len(index)
    cut = min(cut, full)
    partial = TreeIndex()
    runs, masks, path = Runs(partial), Masks(partial), ActivePath(partial)
    grown: Outline | None = None
    for k in range(full):
        if k == cut:  # everything so far arrived in one batch; the rest one by one
            runs.update()
            for flt in Filter:
                masks.mask(flt, {})
        p = index.parent[k]
        type_name = index.type_name(k)
        partial.add(index.ids[k], index.ids[p] if p >= 0 else None, type_name, None)
        partial.kind[k], partial.role[k], partial.flags[k] = index.kind[k], index.role[k], index.flags[k]
        if k > cut:  # one by one; the outline takes them in by `grow` when it can
            runs.update()
            vis = masks.mask(flt, {})
            ref = ReferenceOutline(partial, flt, {}, (), active_marks(partial, partial.leaf))
            if grown is None or not grown.grow(vis):
                grown = Outline(partial, flt, {}, (), path, runs=runs, vis=vis)  # as the app does
            _same(partial, grown, ref)
    # adoptions are decided by ids, so the copy may link a late parent like the original did
    runs.update()
    _runs_equal(runs, Runs(partial))
    for flt in Filter:
        assert masks.mask(flt, {}) == visibility(partial, flt, {})
    for leaf in [*leaves, partial.leaf]:
        partial.leaf = min(leaf, full - 1)
        assert path.update() == active_marks(partial, partial.leaf)
    marks = path.update()
    ref = ReferenceOutline(partial, Filter.DEFAULT, {}, (), marks)
    vis = masks.mask(Filter.DEFAULT, {})
    _same(partial, Outline(partial, Filter.DEFAULT, {}, (), marks, runs=runs, vis=vis), ref)


# Each example runs four full collections over the whole test process's heap (26 s for 60 in
# a full run): 25 keep every filter and both layouts well covered.
@settings(max_examples=25, deadline=None)
@given(index=trees(adoptions=False), flt=st.sampled_from(list(Filter)), fold_seed=st.integers(0, 9))
def test_a_replaced_outline_is_freed_at_once(index, flt, fold_seed):
    """An outline dropped leaves no reference cycle: its arrays (tens of MB on a deep 1M-entry
    tree) are freed as the next one replaces it, not at Python's next full garbage-collection
    pass, which in the app may be minutes away."""
    runs = Runs(index)
    folded = set(range(fold_seed, len(index), 7))
    for vector_min in (outline_module.VECTOR_MIN, 0):
        gc.collect()
        gc.disable()
        try:
            with patch.object(outline_module, "VECTOR_MIN", vector_min):
                outline = Outline(index, flt, {}, folded, ActivePath(index), runs=runs)
            list(outline.rows_pos)
            [outline.row_of[i] for i in range(len(index))]
            outline.side_roots, outline.next_fork_row(0, 1)
            del outline
            assert gc.collect() == 0
        finally:
            gc.enable()


@pytest.mark.parametrize("vector_min", [outline_module.VECTOR_MIN, 0])
def test_turns_appended_at_the_leaf_grow_the_outline_and_a_fork_rebuilds_it(vector_min):
    index = TreeIndex()
    index.add("a", None, "message", "user")
    index.add("b", "a", "message", "assistant")
    masks = Masks(index)
    with patch.object(outline_module, "VECTOR_MIN", vector_min):
        # marks as of the build: the turns after it are on the path all the same
        outline = Outline(index, Filter.DEFAULT, {}, (), active_marks(index, index.leaf), runs=index.runs())
    for k in range(2, 40):  # an agent at work: each turn the child of the one before
        index.add(f"e{k}", index.ids[-1], "message", "user" if k % 2 else "assistant")
        index.runs()
        assert outline.grow(masks.mask(Filter.DEFAULT, {}))
        assert list(outline.rows_pos) == list(range(k + 1))
        assert all(outline.on_path(i) for i in range(k + 1))
    index.add("fork", "b", "message", "user")  # back to "b" and a new try: a new run
    index.runs()
    assert not outline.grow(masks.mask(Filter.DEFAULT, {}))


def test_a_leaf_move_after_the_outline_grew_is_laid_out_from_its_new_rows():
    """The array layout's pieces are shared with the next layout when it draws the same runs in
    the same order (`layout._repieced`), and `grow` sets two of them in place: the next layout
    must still equal one made from nothing kept."""
    index = TreeIndex()
    for k in range(12):
        index.add(f"e{k}", f"e{k - 1}" if k else None, "message", "user" if k % 2 == 0 else "assistant")
    index.add("retry", "e3", "message", "assistant")  # a side branch: two runs and more
    for k in range(12, 16):
        index.add(f"e{k}", f"e{k - 1}" if k > 12 else "e11", "message", "user" if k % 2 == 0 else "assistant")
    index.leaf = len(index) - 1
    runs, masks = Runs(index), Masks(index)
    with patch.object(outline_module, "VECTOR_MIN", 0):
        outline = Outline(index, Filter.DEFAULT, {}, (), runs=runs)
        for k in range(3):  # the agent writes on: rows at the end, taken in by `grow`
            index.add(f"more{k}", index.ids[-1], "message", "user" if k % 2 else "assistant")
            index.leaf = len(index) - 1
            runs.update()
            assert outline.grow(masks.mask(Filter.DEFAULT, {}))
        for target in ("e13", "e9", "e15"):  # then Enter on rows of the same chain
            at = index.pos[target]
            index.add(f"to-{target}", index.ids[index.leaf], "leaf", target_id=target)
            index.leaf = at
            runs.update()
            outline = Outline(index, Filter.DEFAULT, {}, (), runs=runs)
            _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, (), None, None))
            _same_pieces(outline, Outline(index, Filter.DEFAULT, {}, (), runs=Runs(index)))


def _same_pieces(outline: Outline, fresh: Outline) -> None:
    """The per-piece arrays equal those of a layout made from nothing kept: the walk's checks
    read some of them only on some paths (a piece's count where every entry is shown)."""
    for name in ("p_lo", "p_hi", "p_row", "p_count", "p_first", "p_rest"):
        assert list(getattr(outline, name)) == list(getattr(fresh, name)), name
    assert outline.prefixes == fresh.prefixes  # as deep as the deepest piece


def test_grow_leaves_entries_below_a_fold_hidden():
    """An entry appended below a folded last entry stays hidden: `grow` leaves it to a rebuild,
    for the loop and the array layout alike (their drawn part ends exactly where it grew)."""
    for vector_min in (outline_module.VECTOR_MIN, 0):
        index = TreeIndex()
        for k in range(10):
            index.add(f"e{k}", f"e{k - 1}" if k else None, "message", "user")
        index.leaf = 9
        runs = Runs(index)
        with patch.object(outline_module, "VECTOR_MIN", vector_min):
            outline = Outline(index, Filter.ALL, {}, {9}, runs=runs)
        assert len(outline) == 10
        index.add("e10", "e9", "message", "user")
        runs.update()
        assert not outline.grow(visibility(index, Filter.ALL, {}))
        assert len(outline) == 10


@settings(max_examples=examples(200), deadline=None)
@given(
    start=st.binary(min_size=0, max_size=40),
    steps=st.lists(
        st.tuples(st.sampled_from(["append", "flip", "other"]), st.binary(min_size=1, max_size=20)),
        max_size=12,
    ),
)
def test_kept_counts_equal_a_fresh_count(start, steps):
    """The shown-before counts kept between builds (extended on appends, patched where a few
    entries changed, kept for one mask per filter) equal counting the mask afresh, whatever
    came before."""
    runs = Runs(TreeIndex())
    vis = bytearray(b % 2 for b in start)
    masks = [vis]
    for how, data in steps:
        if how == "append":
            vis = vis + bytearray(b % 2 for b in data)
        elif how == "flip" and vis:
            vis = bytearray(vis)
            for b in data[:3]:
                vis[b % len(vis)] ^= 1
        else:  # another filter's mask, or one seen before
            vis = masks[data[0] % len(masks)] if data[0] % 3 else bytearray(b % 2 for b in data)
        masks.append(vis)
        assert layout._kept_counts(runs, vis).tolist() == layout._shown_before(vis).tolist()


@settings(max_examples=examples(200), deadline=None)
@given(
    index=trees(adoptions=False),
    moves=st.lists(st.tuples(st.integers(-1, 200), st.booleans()), min_size=1, max_size=8),
)
def test_array_layout_follows_leaf_moves(index, moves):
    """Leaf moves as the app makes them: a `leaf` entry appended below the old leaf (which
    splits its run), maybe a branch summary below the new one, then the next build. What the
    array layout keeps from the last build (the old leaf's runs up to the root, the
    shown-before counts) must give the walk's rows, and its structure must equal a fresh one."""
    runs = Runs(index)
    for k, (target, summary) in enumerate(moves):
        if index.leaf >= 0:
            index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=index.ids[target % len(index)])
        index.leaf = min(target, len(index) - 1)  # -1: back to the start
        if summary and index.leaf >= 0:
            index.add(f"summary{k}", index.ids[index.leaf], "branch_summary")
            index.leaf = len(index) - 1
        runs.update()
        with patch.object(outline_module, "VECTOR_MIN", 0):
            outline = Outline(index, Filter.DEFAULT, {}, (), runs=runs)
        _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, (), None, None))
        fresh = layout._Shape(index, Runs(index))
        kept = layout._shape(index, runs)
        _same_subtrees(index, runs)
        for name in ("lo", "hi", "par", "pre", "size", "preorder"):
            assert getattr(kept, name).tolist() == getattr(fresh, name).tolist(), name
        _same_groups(kept, fresh)


@settings(max_examples=examples(200), deadline=None)
@given(
    index=trees(adoptions=False),
    flt=st.sampled_from([Filter.DEFAULT, Filter.NO_TOOLS, Filter.USER]),
    targets=st.lists(st.integers(0, 200), min_size=1, max_size=8),
)
def test_leaf_moves_are_laid_out_from_the_last_layout(index, flt, targets):
    """A leaf move between shown entries, nothing folded, as Enter makes it: the `leaf` entry
    appended below the old leaf is hidden, so the layout comes from the last one
    (`layout._relay`: a split run, the forks where the path takes an older child) without
    grouping the runs (the full layout's first step), and equals the walk's."""
    leaf = index.leaf
    index.leaf = NONE  # shown for what they are, not for being the leaf
    shown = [i for i, v in enumerate(visibility(index, flt, {})) if v]
    index.leaf = leaf
    if not shown:
        return
    index.leaf = shown[targets[0] % len(shown)]
    runs = Runs(index)
    with patch.object(outline_module, "VECTOR_MIN", 0):
        Outline(index, flt, {}, (), runs=runs)  # the first layout groups the runs
        for k, t in enumerate(targets[1:]):
            target = shown[t % len(shown)]
            index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=index.ids[target])
            index.leaf = target
            runs.update()
            with patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")):
                outline = Outline(index, flt, {}, (), runs=runs)
            _same(index, outline, ReferenceOutline(index, flt, {}, (), None, None))
            _same_pieces(outline, Outline(index, flt, {}, (), runs=Runs(index)))


def test_a_leaf_move_from_a_leaf_shown_only_for_being_it():
    """The old leaf, hidden by the filter but shown for being the leaf, starts the older of
    two branches, so the path took that branch (drawn after its sibling). The move splits
    its run into the old leaf, hidden now, and the rest, which takes the branch's place:
    the layout from the last one must follow the branch under its new run number."""
    index = TreeIndex()
    for i, (parent, role) in enumerate([(None, "user"), (0, "assistant"), (1, "assistant")]):
        index.add(f"e{i}", None if parent is None else f"e{parent}", "message", role, tool_only=i == 2)
    for i, (parent, role) in enumerate([(2, "user"), (3, "assistant"), (1, "user")], start=3):
        index.add(f"e{i}", f"e{parent}", "message", role)
    index.leaf = 2  # an assistant turn of only tool calls: hidden by default but for being the leaf
    runs = Runs(index)
    with patch.object(outline_module, "VECTOR_MIN", 0):
        Outline(index, Filter.DEFAULT, {}, (), runs=runs)
        with patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")):
            for k, target in enumerate([5, 4, 0, 3]):
                index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=index.ids[target])
                index.leaf = target
                runs.update()
                outline = Outline(index, Filter.DEFAULT, {}, (), runs=runs)
                _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, (), None, None))


def test_leaf_moves_between_forks_the_filter_hides_patch_the_last_pieces():
    """Moves between forks on the active path (tool-only assistant turns, hidden by default
    but shown for being the leaf) draw the same runs in the same order: the pieces come from
    the last layout's, with the rows of the runs holding the old and the new leaf changed
    (`layout._repieced`), and equal those made from nothing kept."""
    index = TreeIndex()
    index.add("e0", None, "message", "user")
    parent = "e0"
    for k in (1, 3, 5):
        index.add(f"e{k}", parent, "message", "assistant", tool_only=True)
        index.add(f"a{k}", f"e{k}", "message", "user")  # a retry left behind: e{k} is a fork
        index.add(f"e{k + 1}", f"e{k}", "message", "user")
        parent = f"e{k + 1}"
    index.add("e7", parent, "message", "assistant")
    index.leaf = len(index) - 1
    made = _moves_from_the_last_pieces(index, ["e1", "e3", "e5", "e1", "e7"])
    patched = [memo is not None and memo.count_o is not last.count_o for last, _, memo in made]
    assert sum(patched) >= 3, patched


def _moves_from_the_last_pieces(index: TreeIndex, targets: list[str]) -> list[tuple[Any, Any, Any]]:
    """Leaf moves to `targets` as Enter makes them, each laid out and compared with the walk
    and with pieces made from nothing kept; what `layout._repieced` was given and made."""
    runs = Runs(index)
    made: list[tuple[Any, Any, Any]] = []
    repieced = layout._repieced

    def spied(last: Any, laid: Any, *rest: Any) -> Any:
        made.append((last, laid, repieced(last, laid, *rest)))
        return made[-1][2]

    with patch.object(outline_module, "VECTOR_MIN", 0), patch.object(layout, "_repieced", spied):
        Outline(index, Filter.DEFAULT, {}, (), runs=runs)
        for k, target in enumerate(targets):
            index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=target)
            index.leaf = index.pos[target]
            runs.update()
            outline = Outline(index, Filter.DEFAULT, {}, (), runs=runs)
            _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, (), None, None))
            _same_pieces(outline, Outline(index, Filter.DEFAULT, {}, (), runs=Runs(index)))
    return made


def test_leaf_moves_into_late_retries_make_only_the_moved_pieces_again():
    """A move into a retry near the end changes the fork where the path takes the older child:
    that fork's group is a short stretch of pieces, made again from the last layout's while
    the rest is kept (`layout._repieced`); the pieces equal those made from nothing kept."""
    index = TreeIndex()  # a chain with a retry at every other entry, two at its last forks
    index.add("e0", None, "message", "user")
    for k in range(1, 40):
        index.add(f"e{k}", f"e{k - 1}", "message", "user" if k % 2 else "assistant")
        if k < 30 and k % 2:
            index.add(f"r{k}", f"e{k - 1}", "message", "assistant")
        if k in (30, 33, 36):
            index.add(f"r{k}", f"e{k - 1}", "message", "assistant")
            index.add(f"s{k}", f"e{k - 1}", "message", "assistant")
            index.add(f"t{k}", f"s{k}", "message", "user")
            index.add(f"u{k}", f"s{k}", "message", "user")
    index.leaf = index.pos["e39"]
    made = _moves_from_the_last_pieces(
        index, ["r36", "s36", "u36", "e39", "s33", "t33", "e38", "r30", "e39", "u30"]
    )
    stretched = [memo is not None and laid.runs_o is not last.runs_o for last, laid, memo in made]
    assert sum(stretched) >= 4, stretched


def _same_groups(kept: layout._Shape, fresh: layout._Shape) -> None:
    """The groups kept (maybe renumbered through leaf moves) equal ones made anew."""
    for drawn, groups in kept._groups:
        again = layout._Groups.of(fresh, drawn, fresh.above(drawn))
        for name in ("every", "pre_o", "order", "group", "kids", "in_fork", "is_last"):
            assert np.array_equal(getattr(groups, name), getattr(again, name)), name
        seen = [
            np.ones(len(drawn), dtype=bool) if g.drawn_pre is None else g.drawn_pre for g in (groups, again)
        ]
        assert np.array_equal(*seen)


@settings(max_examples=examples(100), deadline=None)
@given(index=trees(adoptions=False), targets=st.lists(st.integers(0, 200), min_size=1, max_size=4))
def test_pieces_computed_later_ignore_the_moves_since(index, targets):
    """Fork rows and side roots are computed when first asked (`[`, `]`, `z`), maybe after a
    leaf move has split runs: what they read of the kept structure must not have been shifted
    in place meanwhile. Every entry is shown and nothing folded, so the layout takes the
    kept preorder itself rather than a selection of it."""
    runs = Runs(index)
    index.leaf = len(index) - 1
    vis = bytearray(b"\x01") * len(index)
    pieces = lay_out(index, runs, vis, (), index.leaf)
    assert pieces is not None
    forks, sides = pieces.fork_rows().tolist(), pieces.side_roots().tolist()
    for k, target in enumerate(targets):
        index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=index.ids[target % len(index)])
        index.leaf = target % len(index)
        runs.update()
        assert lay_out(index, runs, bytearray(b"\x01") * len(index), (), index.leaf) is not None
        assert pieces.fork_rows().tolist() == forks
        assert pieces.side_roots().tolist() == sides


@contextmanager
def _array_layout(recording: str) -> Iterator[list[Any]]:
    """The array layout for trees of any size, with folds read in place as on a big tree,
    recording what `layout.<recording>` returns."""
    returned: list[Any] = []
    real = getattr(layout, recording)
    with (
        patch.object(outline_module, "VECTOR_MIN", 0),
        patch.object(folds_module, "SORT_WITH_NUMPY", 0),
        patch.object(layout, recording, lambda *a: returned.append(real(*a)) or returned[-1]),
    ):
        yield returned


@settings(max_examples=examples(300), deadline=None)
@given(
    index=trees(adoptions=False),
    first=st.sampled_from(list(Filter)),
    then=st.sampled_from(list(Filter)),
    leaf_seed=st.integers(0, 59),
    target=st.one_of(st.none(), st.integers(0, 59)),
    late=st.booleans(),
)
def test_side_branches_folded_by_z_equal_the_walk(index, first, then, leaf_seed, target, late):
    """`z` folds the side roots it was just handed, so the layout takes their runs from them
    rather than searching for them, and a leaf move (`target`) renumbers their runs as it
    splits them; not after a filter change hid one of them, nor when an outline from before
    the move is asked for its side roots only after another layout took the move in (`late`).
    Either way the rows are the walk's."""
    n = len(index)
    index.leaf = leaf_seed % n
    labels = {f"e{k}": "x" for k in range(0, n, 3)}
    runs = Runs(index)
    with _array_layout(recording="_hinted") as hinted:
        before = Outline(index, first, labels, (), runs=runs)
        late = late and target is not None
        if not late:
            folded = before.side_folds
        if target is not None:
            index.add("move", index.ids[index.leaf], "leaf", target_id=index.ids[target % n])
            index.leaf = target % n
            runs.update()
        if late:
            Outline(index, first, labels, (), runs=runs)
            folded = before.side_folds  # asked for the first time: the outline keeps them
        outline = Outline(index, then, labels, folded, runs=runs)
    _same(
        index,
        outline,
        ReferenceOutline(index, then, labels, set(folded), active_marks(index, index.leaf), None),
    )
    if late:
        assert not any(hinted)  # handed over after runs split: searched for, never taken as they are


def test_the_side_roots_z_folds_are_not_searched_for_again():
    index = TreeIndex()
    index.add("e0", None, "message", "user")
    for k in range(1, 40):  # a chain with a retry of every third entry
        index.add(f"e{k}", f"e{k - 1}", "message", "user" if k % 2 else "assistant")
        if k % 3 == 0:
            index.add(f"r{k}", f"e{k - 1}", "message", "assistant")
    index.leaf = index.pos["e39"]
    runs = Runs(index)
    with _array_layout(recording="_hinted") as hinted:
        folded = Outline(index, Filter.DEFAULT, {}, (), runs=runs).side_folds
        outline = Outline(index, Filter.DEFAULT, {}, folded, runs=runs)
    assert len(folded) == 13 and hinted == [True]
    _same(
        index,
        outline,
        ReferenceOutline(index, Filter.DEFAULT, {}, set(folded), active_marks(index, index.leaf), None),
    )


def _retries_with_forks_below() -> TreeIndex:
    """A chain with a retry of every third entry, each going on one turn or two ways (a fork
    below the retry's first entry, which `z` folds)."""
    index = TreeIndex()
    index.add("e0", None, "message", "user")
    for k in range(1, 40):
        index.add(f"e{k}", f"e{k - 1}", "message", "user" if k % 2 else "assistant")
        if k % 3 == 0:
            index.add(f"r{k}", f"e{k - 1}", "message", "assistant")
            index.add(f"q{k}", f"r{k}", "message", "user")
            if k % 2 == 0:
                index.add(f"p{k}", f"r{k}", "message", "user")
    index.leaf = index.pos["e39"]
    return index


@pytest.mark.parametrize(
    "targets",
    [["r9", "e20", "r30", "e5", "r9"], ["e39", "r3", "r3", "e38"], ["r9", "q9", "r12", "p12", "e7", "q21"]],
)
def test_leaf_moves_under_z_folds_are_laid_out_from_the_last_layout(targets):
    """`z` on a chain of retries folds every side branch; a leaf move then changes what it
    changes without folds (`layout._relay`), whether it goes into a folded branch or leaves
    one (which splits the branch's run below its fold), without searching for the folds'
    runs again, and the rows, folded forks included, equal the walk's."""
    index = _retries_with_forks_below()
    runs = Runs(index)
    with (
        patch.object(outline_module, "VECTOR_MIN", 0),
        patch.object(folds_module, "SORT_WITH_NUMPY", 0),  # as on a big tree: no copy of them
    ):
        folded = Outline(index, Filter.DEFAULT, {}, (), runs=runs).side_folds
        Outline(index, Filter.USER, {}, (), runs=runs)  # another set of runs drawn in between
        Outline(index, Filter.DEFAULT, {}, folded, runs=runs)  # the layout the moves start from
        hinted = []
        real = layout._hinted
        with (
            patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")),
            patch.object(layout, "_hinted", lambda *a: hinted.append(real(*a)) or hinted[-1]),
        ):
            for k, target in enumerate(targets):
                index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=target)
                index.leaf = index.pos[target]
                runs.update()
                outline = Outline(index, Filter.DEFAULT, {}, folded, runs=runs)
                marks = active_marks(index, index.leaf)
                shape = runs.derived["layout"]
                hint = shape.cut_hint  # `_same` asks for the side roots, which the app does on `z`
                _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, set(folded), marks, None))
                shape.cut_hint = hint
    assert hinted == [True] * len(targets)


@pytest.mark.parametrize("leaves", [["e39"], ["e39", "e20"], ["q12", "e5", "e39"]])
def test_folds_hiding_runs_and_their_undo_are_laid_out_from_the_last_layout(leaves):
    """`z` on retries that fork below their first entry hides the runs of the forks; folding
    a fork with `space` hides its branches. Both, their undo, and leaf moves in between that
    append nothing (a read-only session), take the last layout with those runs taken out
    (`layout._refold`) or the one kept of the runs drawn before (`_Shape.start`), without
    grouping the runs, and equal the walk's rows: the first leaf's three folds are refolds,
    and every layout after them finds one kept of the same runs drawn."""
    index = _retries_with_forks_below()
    runs = Runs(index)
    with _array_layout(recording="_refold") as refolds:
        sides = Outline(index, Filter.DEFAULT, {}, (), runs=runs).side_folds
        with patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")):
            for leaf in leaves:
                index.leaf = index.pos[leaf]
                for folded in (sides, (), {index.pos["r12"]}, (), {index.pos["e2"], index.pos["r30"]}, ()):
                    outline = Outline(index, Filter.DEFAULT, {}, folded, runs=runs)
                    marks = active_marks(index, index.leaf)
                    ref = ReferenceOutline(index, Filter.DEFAULT, {}, set(folded), marks, None)
                    _same(index, outline, ref)
    assert len(refolds) == 3 and all(r is not None for r in refolds)


def test_z_after_a_side_branch_was_visited_is_laid_out_from_the_last_layout():
    """Enter on a retry's first entry and `b` back: the second move's `leaf` entry forks the
    retry there, so `z`'s fold on it hides the rest of the retry, a run of its own now. `z`
    still comes from the last layout (`layout._refold`), its undo and the next `z` and undo
    from the layouts kept of the same runs drawn (`_Shape.start`), and all equal the walk's rows."""
    index = _retries_with_forks_below()
    runs = Runs(index)
    with _array_layout(recording="_refold") as refolds:
        Outline(index, Filter.DEFAULT, {}, (), runs=runs)
        for k, target in enumerate(["r9", "e39"]):  # into the retry, and back
            index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=target)
            index.leaf = index.pos[target]
            runs.update()
            sides = Outline(index, Filter.DEFAULT, {}, (), runs=runs).side_folds
        marks = active_marks(index, index.leaf)
        with patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")):
            for folded in (sides, (), sides, ()):
                outline = Outline(index, Filter.DEFAULT, {}, folded, runs=runs)
                _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, set(folded), marks, None))
    assert len(refolds) == 1 and all(r is not None for r in refolds)


def test_many_folds_hiding_runs_are_laid_out_anew():
    """Past `FEW_TOPS` folds that hide runs, `_refold` gives up (the runs left are few then,
    and laying them out anew is cheaper); the rows are the walk's either way."""
    index = _retries_with_forks_below()
    runs = Runs(index)
    with _array_layout(recording="_refold") as refolds, patch.object(layout, "FEW_TOPS", 1):
        sides = Outline(index, Filter.DEFAULT, {}, (), runs=runs).side_folds
        outline = Outline(index, Filter.DEFAULT, {}, sides, runs=runs)
    assert refolds == [None]
    marks = active_marks(index, index.leaf)
    _same(index, outline, ReferenceOutline(index, Filter.DEFAULT, {}, set(sides), marks, None))


def test_a_filter_that_hands_a_hidden_runs_children_up_is_laid_out_anew():
    """`e1`, a tool result, forks: `no_tools` hides its run and hands its children to `e0`,
    which draws fewer runs, as a fold would, but in other groups: the last layout with the
    run taken out would be wrong (`layout._refold` must give up), and the rows are the walk's."""
    index = TreeIndex()
    for i, (parent, role) in enumerate(
        [(None, "user"), (0, "toolResult"), (1, "user"), (0, "user"), (1, "user")]
    ):
        index.add(f"e{i}", None if parent is None else f"e{parent}", "message", role)
    index.leaf = 3
    runs = Runs(index)
    with _array_layout(recording="_refold") as refolds:
        Outline(index, Filter.DEFAULT, {}, (), runs=runs)
        outline = Outline(index, Filter.NO_TOOLS, {}, (), runs=runs)
    assert refolds == [None]
    _same(index, outline, ReferenceOutline(index, Filter.NO_TOOLS, {}, (), active_marks(index, 3), None))


@settings(max_examples=examples(300), deadline=None)
@given(
    index=trees(adoptions=False),
    flt=st.sampled_from(list(Filter)),
    steps=st.lists(
        st.tuples(
            st.integers(0, 59), st.sampled_from(list(Filter)), st.lists(st.integers(0, 59), max_size=3)
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_folds_and_their_undo_from_the_last_layout_equal_the_walk(index, flt, steps):
    """Folds added to the last ones and taken away again, the leaf moving in between without
    an entry appended, the filter changing now and then (which may draw fewer runs, though
    not as a fold hides them): whether the layout comes from the last one (`layout._refold`)
    or is made anew, the rows are the walk's."""
    n = len(index)
    runs = Runs(index)
    with patch.object(outline_module, "VECTOR_MIN", 0):
        Outline(index, flt, {}, (), runs=runs)
        for leaf_seed, flt, fold_seeds in steps:
            index.leaf = leaf_seed % n
            marks = active_marks(index, index.leaf)
            for folded in ({k % n for k in fold_seeds}, set()):
                outline = Outline(index, flt, {}, folded, runs=runs)
                _same(index, outline, ReferenceOutline(index, flt, {}, folded, marks, None))


@settings(max_examples=examples(300), deadline=None)
@given(
    index=trees(adoptions=False),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("filter"), st.sampled_from(list(Filter))),
            st.tuples(st.just("trial"), st.sampled_from(list(Filter))),
            st.tuples(st.just("fold"), st.lists(st.integers(0, 99), max_size=3)),
            st.tuples(st.just("move"), st.integers(0, 199)),
            st.tuples(st.just("look"), st.integers(0, 199)),
            st.tuples(st.just("turn"), st.sampled_from(KINDS)),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_layouts_kept_of_other_runs_drawn_equal_the_walk(index, steps):
    """The app's keys in any order: filters switched (each may start from the layout kept of
    the runs it draws, `_Shape.start`), the other filters laid out ahead as trials, folds, leaf
    moves that append a `leaf` entry (a run split or added: the kept layouts are numbered
    otherwise then), leaf changes that append nothing (read-only), turns appended at the leaf.
    Every build equals the walk's rows and a layout made from nothing kept."""
    labels = {f"e{k}": "x" for k in range(0, len(index), 3)}
    runs = Runs(index)
    flt, folded = Filter.DEFAULT, set[int]()
    with patch.object(outline_module, "VECTOR_MIN", 0):
        for k, (what, arg) in enumerate(steps):
            n = len(index)
            if what == "filter":
                flt = arg
            elif what == "trial":
                Outline(index, arg, labels, folded, runs=runs, trial=True)
                continue
            elif what == "fold":
                folded = {f % n for f in arg}
            elif what == "move" and index.leaf >= 0:
                index.add(f"move{k}", index.ids[index.leaf], "leaf", target_id=index.ids[arg % n])
                index.leaf = arg % n
            elif what == "look":
                index.leaf = arg % n
            elif what == "turn" and index.leaf >= 0:
                index.add(f"turn{k}", index.ids[index.leaf], arg[0], arg[1])
                index.leaf = n
            runs.update()
            outline = Outline(index, flt, labels, folded, runs=runs)
            marks = active_marks(index, index.leaf)
            _same(index, outline, ReferenceOutline(index, flt, labels, folded, marks, None))
            _same_pieces(outline, Outline(index, flt, labels, folded, runs=Runs(index)))


def test_a_filter_laid_out_before_starts_from_its_kept_layout():
    """Switching back to a filter whose runs drawn were laid out since the last run split or
    added (ahead, as a trial, or when it was last used) takes that layout with the path's
    changes, without grouping the runs; a leaf move that appends its entry splits a run, so
    the next switch to each filter groups them once again."""
    index = _retries_with_forks_below()
    labels = {index.ids[k]: "x" for k in range(0, len(index), 7)}
    runs = Runs(index)
    with _array_layout(recording="_refold"):
        Outline(index, Filter.DEFAULT, labels, (), runs=runs)
        for flt in Filter:
            Outline(index, flt, labels, (), runs=runs, trial=True)  # as `SessionTreeView.prepare`
        for leaf in ("e20", "q12", "e39"):  # moved without an entry appended (read-only)
            index.leaf = index.pos[leaf]
            marks = active_marks(index, index.leaf)
            for flt in [*Filter, Filter.DEFAULT]:
                with patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")):
                    outline = Outline(index, flt, labels, (), runs=runs)
                _same(index, outline, ReferenceOutline(index, flt, labels, (), marks, None))
        index.add("move", index.ids[index.leaf], "leaf", target_id="r9")
        index.leaf = index.pos["r9"]
        runs.update()
        grouped = []
        real = layout._Shape.groups
        with patch.object(layout._Shape, "groups", lambda *a: grouped.append(1) or real(*a)):
            for flt in Filter:
                Outline(index, flt, labels, (), runs=runs)
        assert grouped  # what was kept numbered the runs as before the split
        marks = active_marks(index, index.leaf)
        for flt in Filter:
            with patch.object(layout._Shape, "groups", side_effect=AssertionError("laid out anew")):
                outline = Outline(index, flt, labels, (), runs=runs)
            _same(index, outline, ReferenceOutline(index, flt, labels, (), marks, None))


def _same_subtrees(index: TreeIndex, runs: Runs) -> None:
    """What a folded stub counts, from the runs' preorder (trees of many runs), run by run, and
    entry by entry."""
    n = len(index)
    # every entry, and what a filter shows (the stub counts those: a hidden `leaf` entry below
    # a retry made it "1 entry"), here every third entry hidden
    for vis in (None, bytearray(k % 3 != 1 for k in range(n))):
        walk = [subtree_size(index, i, vis=vis) for i in range(n)]
        if vis is not None:  # the entry itself, and what the mask shows below it
            assert [c for c, _ in walk] == [
                1 + sum(vis[j] for j in range(n) if j != i and _below(index, j, i)) for i in range(n)
            ]
        assert [subtree_size(index, i, runs, vis) for i in range(n)] == walk
        with patch.object(outline_module, "VECTOR_MIN", 0):
            assert [subtree_size(index, i, runs, vis) for i in range(n)] == walk


def _below(index: TreeIndex, j: int, i: int) -> bool:
    while j >= 0:
        if j == i:
            return True
        j = index.parent[j]
    return False


@settings(max_examples=examples(300), deadline=None)
@given(index=trees())
def test_subtree_sizes_agree(index):
    """Adoptions included: the preorder is not kept for them, so the run walk answers."""
    _same_subtrees(index, Runs(index))

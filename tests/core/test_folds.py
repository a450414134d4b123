"""Folds: a sorted array of positions that behaves as a set and is never changed in place."""

from __future__ import annotations

import random

import pytest

from sessiontree.folds import SORT_WITH_NUMPY, Folds


@pytest.mark.parametrize("count", [0, 7, SORT_WITH_NUMPY + 500])  # sorted in Python, then by numpy
@pytest.mark.parametrize("given", ["list", "sorted list", "sorted buffer"])
def test_of_sorts_and_drops_repeats(count, given):
    rng = random.Random(count)
    positions = [rng.randrange(3 * count + 1) for _ in range(count)]
    if given != "list":
        positions.sort()
    if given == "sorted buffer":  # what the array layout hands over: a memoryview of 64-bit ints
        from array import array

        positions = memoryview(array("q", positions))
    folds = Folds.of(positions)
    expected = sorted(set(positions))
    assert list(folds) == expected and len(folds) == len(expected)
    assert folds == set(expected) and folds == Folds.of(reversed(expected))
    assert all(i in folds for i in expected)
    assert not any(i in folds for i in range(-1, 3 * count + 2) if i not in set(expected))
    assert "3" not in folds


def test_toggled_and_union_make_new_values():
    folds = Folds.of([9, 2, 5])
    more = folds.toggled(4)
    assert list(more) == [2, 4, 5, 9] and list(folds) == [2, 5, 9]  # the old value is unchanged
    assert list(more.toggled(5)) == [2, 4, 9] and list(more) == [2, 4, 5, 9]
    assert list(folds.toggled(0).toggled(10)) == [0, 2, 5, 9, 10]
    assert folds | {5, 2} is folds  # nothing new: no copy
    assert list(folds | {1, 5, 12}) == [1, 2, 5, 9, 12] and list(folds) == [2, 5, 9]
    assert Folds() == set() and not Folds() and list(Folds().toggled(3)) == [3]


@pytest.mark.parametrize("overlap", ["none", "some", "all", "empty"])
def test_a_union_of_many_is_the_union_of_the_sets(overlap):
    """Numpy merges big ones: a bisection per position in Python took 50-170 ms for the
    181,812 side branches of the deep 1M-entry tree on every `z` that unfolded them."""
    rng = random.Random(overlap)
    mine = Folds.of(rng.sample(range(10 * SORT_WITH_NUMPY), 2 * SORT_WITH_NUMPY))
    if overlap == "all":
        theirs = Folds.of(rng.sample(list(mine), SORT_WITH_NUMPY))
    elif overlap == "none":
        theirs = Folds.of(range(10 * SORT_WITH_NUMPY, 11 * SORT_WITH_NUMPY))
    elif overlap == "empty":
        mine, theirs = Folds(), mine
    else:
        theirs = Folds.of(rng.sample(range(10 * SORT_WITH_NUMPY), 2 * SORT_WITH_NUMPY))
    union = mine | theirs
    assert list(union) == sorted(set(mine) | set(theirs)) and union == set(mine) | set(theirs)
    assert (union is mine) == (overlap == "all")  # nothing new: no copy
    assert 5 * SORT_WITH_NUMPY in union or 5 * SORT_WITH_NUMPY not in set(mine) | set(theirs)

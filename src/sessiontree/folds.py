"""The folded entries of an outline, as one sorted array.

`z` folds every side branch: 90,000 entries on a deep tree of a million. Held as a Python set,
those were built into a set, copied for the outline, then turned into an array for the array
layout on every later key (~13 ms together, measured). Held as one sorted array of positions,
the same value goes from the key to the layout without a copy, and a fold's `in` is a
bisection.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, TypeAlias

Positions: TypeAlias = "array[int] | memoryview"  # 64-bit integers ("q")
SORT_WITH_NUMPY = 4096  # more positions than this are sorted by numpy (loaded by then: see layout)


class Folds(Collection[int]):
    """Entry positions, sorted, without repeats. A value: `toggled` and `|` make new ones, so
    an outline built from it never sees it change."""

    __slots__ = ("_at",)

    def __init__(self, at: Positions | None = None) -> None:
        """`at`: positions already sorted without repeats (use `of` for any others), as an
        `array("q")` or a memoryview of format "q" (the array layout reads it as a buffer)."""
        self._at: Positions = at if at is not None else array("q")

    @classmethod
    def of(cls, positions: Iterable[int]) -> Folds:
        """The positions given, in any order, repeats dropped."""
        if isinstance(positions, Folds):
            return positions
        if isinstance(positions, Sequence) and len(positions) > SORT_WITH_NUMPY:
            import numpy as np

            at: Any = np.asarray(positions, dtype=np.int64)  # no copy of a "q" buffer
            if not (at[1:] > at[:-1]).all():  # np.unique hashes: several times a sort's cost
                at = np.sort(at)
                at = at[np.concatenate(((True,), at[1:] != at[:-1]))]
            data: Any = np.ascontiguousarray(at)  # numpy arrays export the buffer protocol
            return cls(memoryview(data).cast("B").cast("q"))
        return cls(array("q", sorted(set(positions))))

    @property
    def positions(self) -> Positions:
        """The positions as a buffer of 64-bit integers, sorted (read it, do not write it)."""
        return self._at

    def __contains__(self, i: object) -> bool:
        at = self._at
        if not isinstance(i, int):
            return False
        k = bisect_left(at, i)
        return k < len(at) and at[k] == i

    def __len__(self) -> int:
        return len(self._at)

    def __iter__(self) -> Iterator[int]:
        return iter(self._at)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Folds):
            # as bytes (a copy and a memcmp; a list of each took 13 ms for 180,000): `z` asks
            # whether 90,000 folds are the side branches
            if len(self) != len(other):
                return False
            return memoryview(self._at).cast("B").tobytes() == memoryview(other._at).cast("B").tobytes()
        if isinstance(other, (set, frozenset)):
            return len(self) == len(other) and all(i in other for i in self._at)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Folds({list(self._at)!r})"

    def toggled(self, i: int) -> Folds:
        """These folds with `i` added, or removed if it was there."""
        at = array("q")
        at.frombytes(memoryview(self._at).cast("B"))  # a copy at memory speed, not item by item
        k = bisect_left(at, i)
        if k < len(at) and at[k] == i:
            del at[k]
        else:
            at.insert(k, i)
        return Folds(at)

    def __or__(self, other: Iterable[int]) -> Folds:
        if isinstance(other, Folds) and len(self) + len(other) > SORT_WITH_NUMPY:
            return self._merged(other)
        extra = [i for i in other if i not in self]
        if not extra:
            return self
        return Folds.of([*self._at, *extra])

    def _merged(self, other: Folds) -> Folds:
        """`self | other` by numpy: a bisection per position in Python took 50-170 ms for
        the 181,812 side branches of the deep 1M-entry tree, on every `z` that unfolded them."""
        import numpy as np

        mine = np.frombuffer(self._at, dtype=np.int64)
        theirs = np.frombuffer(other._at, dtype=np.int64)
        if not len(mine):
            return other
        at = np.searchsorted(mine, theirs)
        found = mine.take(np.minimum(at, len(mine) - 1)) == theirs
        extra = theirs[~found]
        if not len(extra):
            return self
        merged: Any = np.concatenate((mine, extra))
        merged.sort(kind="stable")  # two sorted runs: merged in linear time
        return Folds(memoryview(merged).cast("B").cast("q"))

"""Exact quantiles for many windows at once: B-INT-QNT.

Arasu and Widom, "Resource Sharing in Continuous Sliding-Window Aggregates"
(VLDB 2004), section 3.3: for every active base interval (Definition 3.1,
the dyadic intervals ``[2^l i, 2^l (i + 1))`` of stream positions) keep the
sorted array of its elements; a lookup of any window expresses it as
``O(log W)`` base intervals (Theorem 3.1) and selects the wanted rank
across their sorted arrays without merging them.

* :class:`BaseIntervalRuns` -- the structure: ``append`` O(log N) amortized
  (each element is merged once per level), ``select(lo, hi, rank)`` over the
  positions ``[lo, hi)``, ``evict(lo)``; space O(N log N) for ``N`` live
  positions, as the paper states;
* :class:`QuantileQuery` and :func:`median` / :func:`quantile` -- count-based
  (``rows=``) quantile queries with an optional slide;
* :class:`QuantileWindows` -- the multi-query driver: one structure sized by
  the longest window serves every query (``push(x) -> list[Result]``).

The quantile ``phi`` of ``n`` elements is the nearest-rank one: the element
of rank ``max(1, ceil(phi * n))`` in sorted order (the paper's
``floor(phi * n)`` differs by at most one rank; nearest-rank makes
``phi = 0.5`` the median of an odd count and ``phi = 1`` the maximum).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from heapq import merge
from typing import Iterable

from .query import Result

__all__ = ["BaseIntervalRuns", "QuantileQuery", "QuantileWindows", "median", "quantile", "select_rank"]


def select_rank(runs: list, rank: int):
    """The element of 1-based ``rank`` in the union of sorted ``runs``.

    Weighted-median pruning: each round takes as pivot the weighted median
    of the runs' middle elements (weights: their live lengths), counts the
    elements below and at most the pivot by binary search, and drops at
    least a quarter of the live elements.  O(p log p log N) for ``p`` runs of
    ``N`` elements in all (Arasu-Widom: ``O(p log p log q)``)."""
    total = sum(len(r) for r in runs)
    if not 1 <= rank <= total:
        raise ValueError(f"rank {rank} outside 1..{total}")
    lo = [0] * len(runs)
    hi = [len(r) for r in runs]
    below = 0  # elements known to be smaller than the answer
    while True:
        mids = []
        weight = 0
        for j, r in enumerate(runs):
            n = hi[j] - lo[j]
            if n:
                mids.append((r[(lo[j] + hi[j]) // 2], n))
                weight += n
        mids.sort(key=lambda t: t[0])
        acc = 0
        for pivot, n in mids:
            acc += n
            if 2 * acc >= weight:
                break
        less = [bisect_left(r, pivot, lo[j], hi[j]) for j, r in enumerate(runs)]
        n_less = below + sum(less[j] - lo[j] for j in range(len(runs)))
        if rank <= n_less:
            hi = less
            continue
        upto = [bisect_right(r, pivot, lo[j], hi[j]) for j, r in enumerate(runs)]
        n_upto = below + sum(upto[j] - lo[j] for j in range(len(runs)))
        if rank <= n_upto:
            return pivot
        below = n_upto
        lo = upto


class BaseIntervalRuns:
    """Sorted runs of every active base interval over stream positions
    ``[lo, hi)``: ``levels[l][i]`` holds the sorted elements of positions
    ``[2^l i, 2^l (i + 1))``."""

    __slots__ = ("levels", "lo", "hi", "_first")

    def __init__(self) -> None:
        self.levels: list[dict[int, tuple]] = [{}]
        self.lo = 0
        self.hi = 0
        self._first: list[int] = [0]  # per level, the first index that may be live

    def append(self, x) -> None:
        """Add the element at position ``hi`` and every base interval it
        completes (Arasu-Widom Fig. 3's UPDATE with a merge of sorted runs).
        O(log N) amortized: an element is merged once per level."""
        pos = self.hi
        levels = self.levels
        levels[0][pos] = (x,)
        self.hi = pos + 1
        level = 0
        while pos & 1:
            left = levels[level].get(pos - 1)
            if left is None:  # its left half was evicted: the interval is not active
                break
            run = tuple(merge(left, levels[level][pos]))
            level += 1
            pos >>= 1
            if level == len(levels):
                levels.append({})
                self._first.append(pos)
            levels[level][pos] = run

    def runs(self, lo: int, hi: int) -> list:
        """The sorted runs of the minimal base-interval cover of ``[lo, hi)``
        (Theorem 3.1).  O(log W)."""
        if not self.lo <= lo <= hi <= self.hi:
            raise ValueError(f"range [{lo}, {hi}) outside the live positions [{self.lo}, {self.hi})")
        out_left, out_right = [], []
        level = 0
        while lo < hi:
            table = self.levels[level] if level < len(self.levels) else {}
            if lo & 1:
                out_left.append(table[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                out_right.append(table[hi])
            lo >>= 1
            hi >>= 1
            level += 1
        return out_left + out_right[::-1]

    def select(self, lo: int, hi: int, rank: int):
        """The element of 1-based ``rank`` among positions ``[lo, hi)``.
        O(log W) runs, then :func:`select_rank`."""
        return select_rank(self.runs(lo, hi), rank)

    def evict(self, lo: int) -> None:
        """Forget the base intervals that start before ``lo`` (no lookup will
        reach them).  O(intervals dropped)."""
        if lo <= self.lo:
            return
        self.lo = lo = min(lo, self.hi)
        for level, table in enumerate(self.levels):
            head = -((-lo) >> level)  # first interval starting at or after lo
            first = self._first[level]
            for i in range(first, head):
                table.pop(i, None)
            if head > first:
                self._first[level] = head

    def __len__(self) -> int:
        return self.hi - self.lo


class QuantileQuery:
    """``QuantileQuery(name, phi, rows, slide=None)``: the ``phi`` quantile
    of the last ``rows`` elements, after every element (``slide=None``) or
    after every ``slide``-th one."""

    __slots__ = ("name", "phi", "rows", "slide")

    def __init__(self, name: str, phi: float, rows: int, slide: int | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"QuantileQuery name must be a non-empty str, got {name!r}")
        if not (isinstance(phi, (int, float)) and 0 <= phi <= 1):
            raise ValueError(f"QuantileQuery {name!r}: phi must be in [0, 1], got {phi!r}")
        for what, v in (("rows", rows), ("slide", slide)):
            if v is not None and (type(v) is not int or v <= 0):
                raise ValueError(f"QuantileQuery {name!r}: {what} must be a positive int, got {v!r}")
        self.name, self.phi, self.rows, self.slide = name, phi, rows, slide

    def __repr__(self) -> str:
        return f"QuantileQuery({self.name!r}, phi={self.phi}, rows={self.rows}, slide={self.slide})"


def median(name: str, rows: int, slide: int | None = None) -> QuantileQuery:
    """The median (nearest rank) of the last ``rows`` elements."""
    return QuantileQuery(name, 0.5, rows, slide)


def quantile(name: str, phi: float, rows: int, slide: int | None = None) -> QuantileQuery:
    """The ``phi`` quantile (nearest rank) of the last ``rows`` elements."""
    return QuantileQuery(name, phi, rows, slide)


class QuantileWindows:
    """Many quantile queries over one stream with one
    :class:`BaseIntervalRuns` sized by the longest window (not the sum).

    ``push(x)`` returns a :class:`~mta.multi.Result` for every query due
    after that element (``end`` is the element's 0-based index), in the
    queries' order; elements must be mutually comparable.  Per element
    O(log N) amortized plus O(log^2 W log log W)-ish per answer."""

    def __init__(self, queries: Iterable[QuantileQuery]) -> None:
        self.queries = list(queries)
        if not self.queries:
            raise ValueError("QuantileWindows needs at least one QuantileQuery")
        names = [q.name for q in self.queries]
        if len(set(names)) != len(names):
            raise ValueError("QuantileWindows: query names must be unique")
        for q in self.queries:
            if not isinstance(q, QuantileQuery):
                raise TypeError(f"QuantileWindows takes QuantileQuery objects, got {type(q).__name__}")
        self.max_rows = max(q.rows for q in self.queries)
        self.runs = BaseIntervalRuns()

    def push(self, x) -> list:
        runs = self.runs
        runs.append(x)
        n = runs.hi
        out = []
        for q in self.queries:
            if q.slide is not None and n % q.slide:
                continue
            lo = max(0, n - q.rows)
            width = n - lo
            out.append(Result(q.name, n - 1, runs.select(lo, n, max(1, math.ceil(q.phi * width)))))
        runs.evict(max(0, n - self.max_rows))
        return out

    def query(self, name: str):
        """The named query's quantile over its window ending at the newest
        element (None before any element)."""
        q = next((q for q in self.queries if q.name == name), None)
        if q is None:
            raise KeyError(name)
        n = self.runs.hi
        if not n:
            return None
        lo = max(0, n - q.rows)
        return self.runs.select(lo, n, max(1, math.ceil(q.phi * (n - lo))))

    @property
    def held(self) -> int:
        """Elements the level-0 runs hold (the longest window)."""
        return len(self.runs)

"""Exact quantiles for many windows at once: B-INT-QNT.

Arasu and Widom, "Resource Sharing in Continuous Sliding-Window Aggregates"
(VLDB 2004), section 3.3: for every active base interval (Definition 3.1,
the dyadic intervals ``[2^l i, 2^l (i + 1))`` of positions) keep the sorted
array of its elements; a lookup of any window expresses it as ``O(log W)``
base intervals (Theorem 3.1) and selects the wanted rank across their
sorted arrays without merging them.  Queries with different ``phi`` share
one structure (the paper's one exception to "same aggregation function").

The pieces, and where they run:

* :data:`SORTED_RUNS` -- the monoid: a value is a sorted tuple (a bag of
  elements), ``combine`` merges two of them.  Over it, the B-Int final
  technique (:mod:`.bint`) keeps exactly B-INT-QNT's state: one sorted array
  per active base interval, built by Fig. 3's UPDATE;
* :class:`ExactQuantile` -- the aggregator, made by :func:`quantile` and
  :func:`median`.  In a :class:`~mta.multi.SharedWindows` tree its lookup
  takes B-Int's base-interval cover unmerged (:meth:`.bint.BInt.runs`, handed
  to ``lower`` as a :class:`Runs`) and answers with :func:`select_rank`:
  B-INT-QNT's LOOKUP.  Quantile queries therefore run on B-Int trees (any
  partial technique) or, as the baseline, ``plan="separate"``; in a plain
  :class:`mta.Window` the aggregator is an ordinary (exact, O(W) per combine)
  monoid;
* :func:`select_rank` -- the greedy selection over ``p`` sorted arrays.

The quantile ``phi`` of ``n`` elements is the nearest-rank one: the element
of rank ``max(1, ceil(phi * n))`` in sorted order (the paper's
``floor(phi * n)`` differs by at most one rank; nearest-rank makes
``phi = 0.5`` the median of an odd count and ``phi = 1`` the maximum).  The
rank is computed exactly, with ``phi`` the number as written: a float is the
decimal it prints as (``0.14`` is ``14/100``, not the binary double just
above it, whose ceiling at ``n = 100`` would be rank 15), an int or a
Fraction itself (:func:`nearest_rank`).  On an empty window the result is
None.  Elements must be mutually comparable (a NaN is refused when lifted).
"""

from __future__ import annotations

import numbers
from bisect import bisect_left, bisect_right
from fractions import Fraction
from functools import lru_cache, partial

from ..monoid import Aggregator, Monoid

__all__ = ["ExactQuantile", "Runs", "SORTED_RUNS", "exact_phi", "median", "nearest_rank", "quantile", "select_rank"]


def exact_phi(phi) -> Fraction:
    """``phi`` as written: a Fraction or an int exactly, a float (or another
    real) as the shortest decimal that prints as it, since a quantile is
    asked for in decimals and the binary double of ``0.14`` is not 0.14."""
    if isinstance(phi, numbers.Rational):
        return Fraction(phi.numerator, phi.denominator)
    return Fraction(str(phi))


def nearest_rank(phi, n: int) -> int:
    """The 1-based rank of the nearest-rank ``phi`` quantile of ``n >= 1``
    elements, ``max(1, ceil(phi * n))``, exact (``phi`` as :func:`exact_phi`
    reads it).  O(1) for a Fraction ``phi``."""
    if not isinstance(phi, Fraction):
        phi = exact_phi(phi)
    return max(1, -(-phi.numerator * n // phi.denominator))


def select_rank(runs, rank: int):
    """The element of 1-based ``rank`` in the union of sorted ``runs``.

    Weighted-median pruning: each round takes as pivot the weighted median
    of the runs' middle elements (weights: their live lengths), counts the
    elements below and at most the pivot by binary search, and drops at
    least a quarter of the live elements.  O(p log p log N) for ``p`` runs of
    ``N`` elements in all (Arasu-Widom section 3.3: ``O(p log p log q)``)."""
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


def _merge(a: tuple, b: tuple) -> tuple:
    """The sorted union of two sorted tuples.  O(len(a) + len(b)): Timsort
    finds the two runs and merges them."""
    if not a:
        return b
    if not b:
        return a
    if not a[-1] > b[0]:  # already in order (a stream of rising values)
        return a + b
    return tuple(sorted(a + b))


#: Bags of elements as sorted tuples, merged: commutative, not invertible.
SORTED_RUNS = Monoid(_merge, (), name="sorted-runs", commutative=True)


def lift_element(x) -> tuple:
    """One element as a sorted run; a NaN is refused (it has no rank).  O(1)."""
    if x != x:
        raise ValueError(f"exact quantile: cannot rank {x!r} (NaN)")
    return (x,)


def _lift_from(getter, raw) -> tuple:
    return lift_element(getter(raw))


@lru_cache(maxsize=None)
def _lift_on(getter):
    """One lift per getter, so quantiles of the same field share a tree."""
    return partial(_lift_from, getter)


class Runs:
    """A window as the unmerged sorted runs of its base-interval cover (what
    B-INT-QNT's LOOKUP selects over); only ever handed to ``lower``."""

    __slots__ = ("runs",)

    def __init__(self, runs: list) -> None:
        self.runs = runs

    def __repr__(self) -> str:
        return f"Runs({len(self.runs)} runs, {sum(len(r) for r in self.runs)} elements)"


def _lower(phi: Fraction, value):
    """The nearest-rank ``phi`` quantile (exact) of a sorted tuple or of
    :class:`Runs`; None when empty.  O(p log p log N) (:func:`select_rank`)."""
    runs = value.runs if isinstance(value, Runs) else (value,)
    n = 0
    for r in runs:
        n += len(r)
    if not n:
        return None
    return select_rank(runs, nearest_rank(phi, n))


class ExactQuantile(Aggregator):
    """The exact nearest-rank ``phi`` quantile: an :class:`~mta.Aggregator`
    over :data:`SORTED_RUNS` whose ``lower`` also takes :class:`Runs`.

    Every ExactQuantile on one monoid shares the lift, so quantile queries
    with different ``phi`` share one tree (one B-INT-QNT structure)."""

    __slots__ = ("phi",)

    #: Tells the planner to run it on B-Int with a selecting lookup.
    holistic = True

    def __init__(self, phi: float, *, on=None, monoid: Monoid = SORTED_RUNS, name: str | None = None) -> None:
        """Checks ``phi`` (a real, ``0 <= phi <= 1``, read as
        :func:`exact_phi` says), ``on`` and ``monoid`` first; O(1).
        ``on(raw)`` picks the value to rank (the raw element when None);
        ``monoid`` is for wrappers of :data:`SORTED_RUNS` (e.g. a
        :class:`~mta.CountingMonoid` that counts merges)."""
        if isinstance(phi, bool) or not isinstance(phi, numbers.Real) or not 0 <= phi <= 1:
            raise ValueError(f"quantile needs 0 <= phi <= 1, got {phi!r}")
        if on is not None and not callable(on):
            raise TypeError(f"quantile on= must be callable raw -> value, got {type(on).__name__}")
        if not isinstance(monoid, Monoid) or monoid.identity != ():
            raise TypeError(f"ExactQuantile needs SORTED_RUNS (or a wrapper of it), got {monoid!r}")
        self.phi = phi
        lift = lift_element if on is None else _lift_on(on)
        shown = f"{phi:g}" if isinstance(phi, float) else str(phi)
        super().__init__(monoid, lift, partial(_lower, exact_phi(phi)), name=name or f"quantile({shown})")

    def on(self, getter, *, name: str | None = None) -> "ExactQuantile":
        """The same quantile of ``getter(raw)``; quantiles ``on`` one getter
        share a tree.  O(1)."""
        if self.lift is not lift_element:
            raise ValueError("ExactQuantile.on: already reads a field; give the whole getter once")
        return ExactQuantile(self.phi, on=getter, monoid=self.monoid, name=name or self.name)


def quantile(phi: float, *, on=None, monoid: Monoid = SORTED_RUNS) -> ExactQuantile:
    """The exact ``phi`` quantile (nearest rank) of each window, e.g.
    ``Query("p99", quantile(0.99, on=lambda r: r.ms), rows=1000)``.  O(1)."""
    return ExactQuantile(phi, on=on, monoid=monoid)


def median(*, on=None, monoid: Monoid = SORTED_RUNS) -> ExactQuantile:
    """The exact median (nearest rank: the lower middle of an even count).
    O(1)."""
    return ExactQuantile(0.5, on=on, monoid=monoid, name="median")

"""Edges: where partial aggregates (slices) start, and the composite slide.

mqo-shein-chrysanthis-tkde section 3.1: the queries of a shared tree cut
the stream at *edges*; the composite slide is the LCM of their slides, and
the number of unique edges in it (formula F1, section 3.1.2) is what the
partial aggregator's cost depends on.

An edge set here is a union of arithmetic progressions of keys
``{offset + k * period}`` (every slide's edges are one or two of them, with
a lag every progression is shifted), or :data:`EVERY` when every distinct key
starts a new partial (per-element queries, whose windows start anywhere).
The slicing techniques (:mod:`.panes`, :mod:`.pairs`, :mod:`.cutty`) build
edge sets; :class:`EdgeSet.next_after` drives the partial aggregator.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from fractions import Fraction
from functools import reduce
from itertools import combinations
from typing import Iterable, Sequence


def _lcm(a, b):
    """LCM of two positive ints or Fractions."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b // math.gcd(a, b)
    a, b = Fraction(a), Fraction(b)
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


def gcd(a, b):
    """GCD of two positive ints or Fractions (a pane's length)."""
    if isinstance(a, int) and isinstance(b, int):
        return math.gcd(a, b)
    a, b = Fraction(a), Fraction(b)
    return Fraction(math.gcd(a.numerator, b.numerator), math.lcm(a.denominator, b.denominator))


def lcm(values: Iterable):
    """LCM of positive ints or Fractions: the composite slide's length."""
    return reduce(_lcm, values)


class EdgeSet:
    """A union of progressions ``(offset, period)``: the keys
    ``offset + k * period`` for every integer ``k``; or every distinct key
    (``every=True``)."""

    __slots__ = ("progressions", "every", "_ints", "_table", "_length")

    #: Longest composite slide whose edges :meth:`next_after` keeps in a
    #: table (int keys): a lookup is then one bisect instead of a pass over
    #: the progressions.
    TABLE_MAX = 1 << 14

    def __init__(self, progressions: Iterable[tuple] = (), *, every: bool = False) -> None:
        normal = set()
        for offset, period in progressions:
            if period <= 0:
                raise ValueError(f"edge period must be > 0, got {period!r}")
            normal.add((offset % period, period))
        self.progressions = tuple(sorted(normal, key=lambda p: (p[1], p[0])))
        self.every = every
        self._ints = all(isinstance(o, int) and isinstance(p, int) for o, p in self.progressions)
        self._table = None
        self._length = None
        if self._ints and self.progressions and not every:
            length = self.composite_slide()
            if length <= self.TABLE_MAX:
                self._table = self.edges_in_composite()
                self._length = length

    def next_after(self, x):
        """The smallest edge strictly greater than key ``x``.  O(log edges
        in the composite slide) for int keys when it is at most
        :attr:`TABLE_MAX` long, else O(number of progressions); no monoid
        call."""
        if self.every:
            raise TypeError("every key is an edge: there is no next edge")
        table = self._table
        if table is not None and isinstance(x, int):
            length = self._length
            r = x % length
            i = bisect_right(table, r)
            return x - r + (table[i] if i < len(table) else length + table[0])
        if not (self._ints and isinstance(x, int)):
            x = Fraction(x)
        best = None
        for offset, period in self.progressions:
            e = x - (x - offset) % period + period
            if best is None or e < best:
                best = e
        return best

    def __or__(self, other: "EdgeSet") -> "EdgeSet":
        return EdgeSet(self.progressions + other.progressions, every=self.every or other.every)

    def composite_slide(self):
        """The composite slide: the LCM of the periods (None for ``every``)."""
        if self.every or not self.progressions:
            return None
        return lcm(p for _, p in self.progressions)

    def edges_in_composite(self) -> list:
        """The unique edges in ``[0, composite slide)``, sorted: the Bit Set
        count of section 3.1 (O(composite slide / min period) work)."""
        length = self.composite_slide()
        if length is None:
            return []
        found = set()
        for offset, period in self.progressions:
            k = 0
            while offset + k * period < length:
                found.add(offset + k * period)
                k += 1
        return sorted(found)

    def edge_rate(self):
        """Unique edges per key unit, exactly (inclusion-exclusion over the
        progressions, as F1 does for slides); ``None`` for ``every``."""
        if self.every:
            return None
        if not self.progressions:
            return 0
        return Fraction(len(self.edges_in_composite())) / Fraction(self.composite_slide())

    def __repr__(self) -> str:
        if self.every:
            return "EdgeSet(every key)"
        return "EdgeSet(" + ", ".join(f"{o}+{p}k" for o, p in self.progressions) + ")"


#: Every distinct key starts a partial.
EVERY = EdgeSet(every=True)


def window_edges(queries, *, ends) -> EdgeSet:
    """The cuts at the window starts ``k * slide - lag - range`` of periodic
    ``queries`` and, where ``ends(query)`` says so, at their ends ``k *
    slide - lag``; :data:`EVERY` if a query is per-element.  O(number of
    queries)."""
    if any(q.slide is None for q in queries):
        return EVERY
    progressions = []
    for q in queries:
        progressions.append((-q.exact_lag - q.exact_width, q.exact_slide))
        if ends(q):
            progressions.append((-q.exact_lag, q.exact_slide))
    return EdgeSet(progressions)


def f1_edges(slides: Sequence) -> int:
    """Formula F1 (mqo-shein-chrysanthis-tkde eq. 2): the number of unique
    edges in the composite slide of ``slides`` when each slide marks its
    multiples, ``LCM_n * sum_i (-1)^(i+1) G1(n, i)`` with ``G1(n, i)`` the sum
    of ``1 / LCM`` over the ``i``-subsets of the slides.  O(2^n) LCMs (over
    the distinct slides; duplicates mark the same edges)."""
    distinct = sorted(set(slides))
    if not distinct:
        return 0
    for s in distinct:
        if isinstance(s, bool) or s <= 0:
            raise ValueError(f"slides must be positive, got {s!r}")
    total_lcm = Fraction(lcm(distinct))
    acc = Fraction(0)
    for i in range(1, len(distinct) + 1):
        g1 = sum((1 / Fraction(lcm(group)) for group in combinations(distinct, i)), Fraction(0))
        acc += g1 if i % 2 else -g1
    count = total_lcm * acc
    return int(count)


def edges(ranges_slides: Iterable[tuple], horizon) -> list:
    """The unique edges in ``[0, horizon)`` of queries given as
    ``(range, slide)`` or ``(range, slide, lag)``: window starts
    ``k * slide - lag - range`` and ends ``k * slide - lag`` (the Pairs
    fragments, section 2.1).  Brute force, for checking F1 and the cost
    model."""
    found = set()
    for spec in ranges_slides:
        r, s = spec[0], spec[1]
        lag = spec[2] if len(spec) > 2 else 0
        for offset in (-lag - r, -lag):
            first = offset % s
            k = 0
            while first + k * s < horizon:
                found.add(first + k * s)
                k += 1
    return sorted(found)

"""Edges of a multi-query plan: the composite slide, where each query's
partials start, and how many distinct edges a set of queries marks.

Shein and Chrysanthis (TKDE 2022; mqo-shein-chrysanthis-tkde), section 2.1,
Table 1 (partials per window of Panes, Pairs and Cutty) and section 3.1
(the composite slide, the LCM of the slides; equation (2), F1, the unique
edges per composite slide).  :mod:`mta.multi.cost` prices plans from these
counts; the slicers (:mod:`mta.multi.panes`, ``pairs``, ``cutty``) place
their partials at the same edges.

A query is ``(range, slide)`` or ``(range, slide, lag)`` in one unit (elements
or time units).  Every function states its complexity; ``n`` is the number of
queries.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from fractions import Fraction
from itertools import combinations, compress
from typing import Iterable, Sequence

__all__ = ["PARTIALS", "composite_slide", "f1_edge_count", "progressions", "Edges", "edges",
           "edges_cached", "partials_per_window", "query_numbers"]

#: Partial aggregation (slicing) techniques, section 2.1; ``none`` makes every
#: element its own partial.
PARTIALS = ("panes", "pairs", "cutty", "none")

#: Composite slides up to this many positions are enumerated exactly; longer
#: ones are counted group by group (:func:`_union`), by inclusion-exclusion
#: (equation (2) generalised) where a group is too long to enumerate.
ENUMERATE_LIMIT = 1 << 20

#: Most inclusion-exclusion terms counted for one group of progressions
#: whose moduli share factors (the terms double with every progression);
#: past it a group too long to enumerate is estimated (:func:`_sampled_share`).
UNION_TERMS = 1 << 12

#: Positions :func:`_sampled_share` marks.
SAMPLE = 1 << 16


def composite_slide(slides: Iterable[int]) -> int:
    """The composite slide: the LCM of the slides (section 3.1).  O(n)."""
    out = 1
    for s in slides:
        s = int(s)
        if s <= 0:
            raise ValueError(f"slides must be positive integers, got {s}")
        out = out * s // math.gcd(out, s)
    return out


def f1_edge_count(slides: Sequence[int]) -> int:
    """Equation (2), F1: unique edges in one composite slide of ``slides``,
    ``LCM_n * sum_i (-1)^(i+1) G1(n, i)``, ``G1(n, i)`` the sum of ``1/LCM``
    over every ``i``-subset of the slides.  Exact (integer arithmetic).

    Duplicates are dropped first (they add no edge).  O(2^n) subsets, so it is
    for small sets and for checking :func:`edges`; the planners call
    :func:`edges`."""
    distinct = sorted(set(int(s) for s in slides))
    if not distinct:
        return 0
    lcm_n = composite_slide(distinct)
    total = 0
    for i in range(1, len(distinct) + 1):
        g1 = sum(lcm_n // composite_slide(group) for group in combinations(distinct, i))
        total += g1 if i % 2 else -g1
    return total


def progressions(query, partial: str) -> tuple[tuple[int, int], ...]:
    """The edges one query marks, as progressions ``(offset, modulus)``: a
    partial starts at every key ``offset + j * modulus``.  A query is
    ``(range, slide)`` or ``(range, slide, lag)``; its windows are the keys
    ``[j * slide - lag - range, j * slide - lag)`` (:mod:`mta.multi.query`).
    Section 2.1:

    * Panes: panes of ``gcd(range, slide)`` keys;
    * Pairs: each slide split into fragments ``f1 = slide - range % slide``
      and ``f2 = range % slide``: edges at the window starts and ends;
    * Cutty: a partial starts only where a window starts (and where a lagged
      window ends); windows ending at the newest element read the open
      partial;
    * none: every key is a partial.

    O(1)."""
    r, s, lag = query_numbers(query)
    if partial == "panes":
        g = math.gcd(r, s)
        return (((-lag) % g, g),)
    if partial == "pairs":
        return tuple(sorted({((-lag - r) % s, s), ((-lag) % s, s)}))
    if partial == "cutty":
        return tuple(sorted({((-lag - r) % s, s)} | ({((-lag) % s, s)} if lag else set())))
    if partial == "none":
        return ((0, 1),)
    raise ValueError(f"unknown partial aggregation {partial!r}; known: {', '.join(PARTIALS)}")


def query_numbers(query) -> tuple[int, int, int]:
    """``(range, slide, lag)`` as positive ints (lag >= 0)."""
    r, s = query[0], query[1]
    lag = query[2] if len(query) > 2 else 0
    r, s, lag = int(r), int(s), int(lag)
    if r <= 0 or s <= 0 or lag < 0:
        raise ValueError(f"a query needs a positive range and slide and a lag >= 0, got {tuple(query)!r}")
    return r, s, lag


class Edges:
    """The edges of a set of queries under one partial technique within one
    composite slide: ``count`` edges every ``period`` elements (or time
    units).  ``positions`` is the sorted tuple of edge offsets in
    ``[0, period)`` when the period was enumerated (at most
    :data:`ENUMERATE_LIMIT`), else None.  ``exact``: False when ``count``
    is an estimate (:func:`edges`)."""

    __slots__ = ("period", "count", "positions", "exact")

    def __init__(self, period: int, count: int, positions: tuple[int, ...] | None, exact: bool = True) -> None:
        self.period, self.count, self.positions, self.exact = period, count, positions, exact

    @property
    def density(self) -> float:
        """Edges (partials) per unit."""
        return self.count / self.period

    def is_edge(self, position: int) -> bool:
        """Whether an edge follows ``position`` (only when enumerated; O(log count))."""
        if self.positions is None:
            raise ValueError("edge positions were not enumerated (period too long)")
        p = position % self.period
        i = bisect_right(self.positions, p)
        return i > 0 and self.positions[i - 1] == p

    def in_range(self, lo: int, hi: int) -> int:
        """Edges following positions ``lo < p <= hi`` (O(log count))."""
        if self.positions is None:
            return round((hi - lo) * self.density)
        full, rest = divmod(hi - lo, self.period)
        a = lo % self.period
        b = a + rest
        pos = self.positions
        n = full * self.count + bisect_right(pos, min(b, self.period - 1)) - bisect_right(pos, a)
        if b >= self.period:
            n += bisect_right(pos, b - self.period)
        return n

    def __repr__(self) -> str:
        return f"Edges(period={self.period}, count={self.count})"


def edges(queries: Iterable[tuple[int, int]], partial: str = "panes") -> Edges:
    """Unique edges per composite slide of ``queries`` under ``partial``.

    The period is the LCM of the progressions' moduli.  Up to
    :data:`ENUMERATE_LIMIT` positions it is enumerated (a bit set over the
    period, the paper's "Bit Set" method: O(sum of period / modulus) over the
    distinct progressions); beyond, by :func:`_union`: exact unless a
    group of progressions whose moduli share factors is both too long to
    enumerate and too large for inclusion-exclusion (``Edges.exact`` False
    then).  O(period) or O(d^2 + UNION_TERMS + SAMPLE) for ``d`` distinct
    progressions."""
    progs = sorted({p for q in queries for p in progressions(q, partial)})
    if not progs:
        raise ValueError("edges of no queries")
    return _edges_of(progs)


def _edges_of(progs) -> Edges:
    progs = list(progs)
    period = composite_slide(m for _, m in progs)
    if period <= ENUMERATE_LIMIT:
        positions = tuple(compress(range(period), _marks(progs, period)))
        return Edges(period, len(positions), positions)
    count, exact = _union(progs, period)
    return Edges(period, count, None, exact)


def _marks(progs, length: int) -> bytearray:
    """A byte per position ``0 <= x < length``: 1 where a progression has a
    member.  O(sum of length / modulus)."""
    marks = bytearray(length)
    for off, m in progs:
        if off < length:
            marks[off::m] = b"\x01" * len(range(off, length, m))
    return marks


def _crt(a1: int, m1: int, a2: int, m2: int) -> tuple[int, int] | None:
    """``x = a1 (mod m1)`` and ``x = a2 (mod m2)`` as ``x = a (mod lcm)``, or
    None when they never meet.  O(log m)."""
    g = math.gcd(m1, m2)
    if (a2 - a1) % g:
        return None
    lcm = m1 // g * m2
    k = ((a2 - a1) // g * pow(m1 // g, -1, m2 // g)) % (m2 // g) if m2 // g > 1 else 0
    return (a1 + m1 * k) % lcm, lcm


def _union(progs: list[tuple[int, int]], period: int) -> tuple[int, bool]:
    """The union's size within ``period`` (the LCM of the moduli) and
    whether it is exact.

    Progressions whose moduli share no factor with another group's are
    independent (Chinese remainder theorem): a position modulo the LCM of
    all is one position modulo each group's LCM, so the positions in no
    progression number the product of each group's.  Each group is
    enumerated, counted by inclusion-exclusion (at most
    :data:`UNION_TERMS` terms), or else estimated (:func:`_sampled_share`).
    O(d^2) to group ``d`` progressions, plus each group's count."""
    free, lcm_all, exact = 1, 1, True
    for group in _coprime_groups(progs):
        g_period = composite_slide(m for _, m in group)
        lcm_all *= g_period
        if g_period <= ENUMERATE_LIMIT:
            count = _marks(group, g_period).count(1)
        else:
            count = _inclusion_exclusion(group, g_period, UNION_TERMS)
            if count is None:
                exact = False
                count = round(_sampled_share(group) * g_period)
        free *= g_period - count
    return period - free * (period // lcm_all), exact


def _coprime_groups(progs) -> list[list[tuple[int, int]]]:
    """The progressions grouped so that moduli of different groups are
    co-prime (merging every group a modulus shares a factor with).  O(d^2)."""
    groups: list[tuple[int, list]] = []  # (LCM of the moduli, progressions)
    for off, m in progs:
        joined, members, lcm = [], [(off, m)], m
        for g_lcm, g_members in groups:
            if math.gcd(g_lcm, m) > 1:
                members += g_members
                lcm = lcm * g_lcm // math.gcd(lcm, g_lcm)
            else:
                joined.append((g_lcm, g_members))
        groups = joined + [(lcm, members)]
    return [sorted(members) for _, members in groups]


def _inclusion_exclusion(progs, period: int, budget: int) -> int | None:
    """Size of the union of ``progs`` within ``period`` by inclusion-exclusion,
    depth-first with empty intersections pruned; None once ``budget`` terms
    were counted.  O(budget)."""
    total, terms = 0, 0

    def walk(start: int, a: int, m: int, depth: int) -> bool:
        nonlocal total, terms
        for j in range(start, len(progs)):
            met = _crt(a, m, *progs[j]) if depth else progs[j]
            if met is None:
                continue
            terms += 1
            if terms > budget:
                return False
            total += (period // met[1]) * (1 if depth % 2 == 0 else -1)
            if not walk(j + 1, met[0], met[1], depth + 1):
                return False
        return True

    return total if walk(0, 0, 1, 0) else None


def _sampled_share(progs) -> Fraction:
    """Estimated share of positions in the union: the progressions of a
    modulus up to :data:`SAMPLE` marked over the first SAMPLE positions
    (each off by at most one member there), the longer ones as if
    independent of them (each holds under 1 / SAMPLE of the positions).
    O(SAMPLE)."""
    short = [(off, m) for off, m in progs if m <= SAMPLE]
    free = Fraction(SAMPLE - _marks(short, SAMPLE).count(1), SAMPLE)
    for _, m in progs:
        if m > SAMPLE:
            free *= 1 - Fraction(1, m)
    return 1 - free


def partials_per_window(range_: int, slide: int, partial: str) -> int:
    """Table 1: partials in one window of a single query.  O(log)."""
    r, s, _ = query_numbers((range_, slide))
    if r % s == 0 and partial != "none":
        return r // s
    if partial == "panes":
        return r // math.gcd(r, s)
    if partial == "pairs":
        return 2 * (r // s) + 1
    if partial == "cutty":
        return -(-r // s)
    if partial == "none":
        return r
    raise ValueError(f"unknown partial aggregation {partial!r}")



def edges_cached(progs: tuple[tuple[int, int], ...]) -> Edges:
    """:func:`edges` by progression set (the planners price the same trees
    under many techniques).  O(1) when cached."""
    hit = _EDGE_CACHE.get(progs)
    if hit is None:
        if len(_EDGE_CACHE) > 4096:
            _EDGE_CACHE.clear()
        hit = _EDGE_CACHE[progs] = _edges_of(progs)
    return hit


_EDGE_CACHE: dict[tuple, Edges] = {}

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
from functools import lru_cache
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

#: Most inclusion-exclusion steps (intersections tried, met or empty) for
#: one group of progressions whose moduli share factors (the terms double
#: with every progression); past it a group too long to enumerate is
#: estimated (:func:`_sampled_share`).
UNION_TERMS = 1 << 14

#: The same budget for the planners' counts (:func:`edges_cached`): they
#: price thousands of candidate trees, and the sampled share, off by under
#: one member per progression in :data:`SAMPLE` positions, is as good for a
#: price.
PLAN_UNION_TERMS = 1 << 7

#: Most marked positions :func:`edges_cached` keeps (one byte each).
CACHE_BYTES = 1 << 27

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
    return _progressions(*query_numbers(query), partial)


@lru_cache(maxsize=1 << 16)
def _progressions(r: int, s: int, lag: int, partial: str) -> tuple[tuple[int, int], ...]:
    """:func:`progressions` of numbers (cached: the planners ask for each
    query's thousands of times)."""
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
    :data:`ENUMERATE_LIMIT`), else None; it is built from ``marks`` (a
    byte per offset) on first use, since the planners price most edge sets
    by their count alone.  ``exact``: False when ``count`` is an estimate
    (:func:`edges`)."""

    __slots__ = ("period", "count", "marks", "exact", "_positions")

    def __init__(self, period: int, count: int, positions: tuple[int, ...] | None, exact: bool = True,
                 marks: bytearray | None = None) -> None:
        self.period, self.count, self.exact = period, count, exact
        if marks is None and positions is not None:
            marks = _marks(((p, period) for p in positions), period)
        self.marks, self._positions = marks, positions

    @property
    def positions(self) -> tuple[int, ...] | None:
        """The sorted edge offsets, or None when not enumerated.  O(period) once."""
        if self._positions is None and self.marks is not None:
            self._positions = tuple(compress(range(self.period), self.marks))
        return self._positions

    @property
    def density(self) -> float:
        """Edges (partials) per unit."""
        return self.count / self.period

    def is_edge(self, position: int) -> bool:
        """Whether an edge follows ``position`` (only when enumerated; O(1))."""
        if self.marks is None:
            raise ValueError("edge positions were not enumerated (period too long)")
        return bool(self.marks[position % self.period])

    def in_range(self, lo: int, hi: int) -> int:
        """Edges following positions ``lo < p <= hi`` (O(period) at most)."""
        marks = self.marks
        if marks is None:
            return round((hi - lo) * self.density)
        full, rest = divmod(hi - lo, self.period)
        a = lo % self.period
        b = a + rest
        n = full * self.count + marks.count(1, a + 1, min(b, self.period - 1) + 1)
        if b >= self.period:
            n += marks.count(1, 0, b - self.period + 1)
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


def _edges_of(progs, terms: int | None = None) -> Edges:
    progs = list(progs)
    period = composite_slide(m for _, m in progs)
    if period <= ENUMERATE_LIMIT:
        marks = _marks(progs, period)
        return Edges(period, marks.count(1), None, marks=marks)
    count, exact = _union(progs, period, terms)
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


def _union(progs: list[tuple[int, int]], period: int, terms: int | None = None) -> tuple[int, bool]:
    """The union's size within ``period`` (the LCM of the moduli) and
    whether it is exact.

    Progressions whose moduli share no factor with another group's are
    independent (Chinese remainder theorem): a position modulo the LCM of
    all is one position modulo each group's LCM, so the positions in no
    progression number the product of each group's.  Each group is
    enumerated, counted by inclusion-exclusion (at most ``terms`` steps,
    :data:`UNION_TERMS` unless told), or else estimated (:func:`_sampled_share`).
    O(d^2) to group ``d`` progressions, plus each group's count."""
    free, lcm_all, exact = 1, 1, True
    for group in _coprime_groups(progs):
        g_period = composite_slide(m for _, m in group)
        lcm_all *= g_period
        if g_period <= ENUMERATE_LIMIT:
            count = _marks(group, g_period).count(1)
        else:
            count = _inclusion_exclusion(group, g_period, UNION_TERMS if terms is None else terms)
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
    depth-first with empty intersections pruned; None once ``budget``
    intersections were tried.  O(budget); O(1) when ``d`` progressions are
    too many for it: the walk tries every one and, below each, every later
    one, ``d (d + 1) / 2`` at least, whichever intersections are empty."""
    if len(progs) * (len(progs) + 1) // 2 > budget:
        return None
    total, terms = 0, 0

    def walk(start: int, a: int, m: int, depth: int) -> bool:
        nonlocal total, terms
        for j in range(start, len(progs)):
            terms += 1
            if terms > budget:
                return False
            met = _crt(a, m, *progs[j]) if depth else progs[j]
            if met is None:
                continue
            total += (period // met[1]) * (1 if depth % 2 == 0 else -1)
            if not walk(j + 1, met[0], met[1], depth + 1):
                return False
        return True

    return total if walk(0, 0, 1, 0) else None


def _sampled_share(progs) -> Fraction:
    """Estimated share of positions in the union: the progressions of a
    modulus up to :data:`SAMPLE` marked over the first SAMPLE positions
    (each off by at most one member there), the longer ones as if
    independent of them (each holds under 1 / SAMPLE of the positions;
    their product summed as logarithms, so that shares far below a float's
    epsilon keep their precision).  O(SAMPLE)."""
    short = [(off, m) for off, m in progs if m <= SAMPLE]
    marked = _marks(short, SAMPLE).count(1) if short else 0
    if marked == SAMPLE:
        return Fraction(1)
    log_free = math.log1p(-marked / SAMPLE) + math.fsum(math.log1p(-1 / m) for _, m in progs if m > SAMPLE)
    return Fraction(-math.expm1(log_free))


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
    under many techniques), with the planners' inclusion-exclusion budget
    :data:`PLAN_UNION_TERMS`, so a pricing's work is bounded.  O(1) when cached; else O(period) up to
    :data:`ENUMERATE_LIMIT`, O(d^2 + PLAN_UNION_TERMS + SAMPLE) beyond."""
    global _cache_bytes
    hit = _EDGE_CACHE.get(progs)
    if hit is None:
        hit = _edges_of(progs, PLAN_UNION_TERMS)
        size = len(hit.marks) if hit.marks is not None else 0
        if len(_EDGE_CACHE) > 4096 or _cache_bytes + size > CACHE_BYTES:
            _EDGE_CACHE.clear()
            _cache_bytes = 0
        _EDGE_CACHE[progs] = hit
        _cache_bytes += size
    return hit


_EDGE_CACHE: dict[tuple, Edges] = {}
_cache_bytes = 0

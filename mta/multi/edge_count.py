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

#: Most edge sets :func:`edges_cached` keeps.
CACHE_ENTRIES = 1 << 12

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
    (:func:`edges`).  ``groups``: when counted group by group (:func:`_union`, or grouped for :func:`_merged`),
    each group's ``(LCM, progressions, positions in no progression, exact, logs)`` (``logs``: an estimated
    group's terms of :func:`_sampled_share`, else None), from which the edges of a union of progression sets
    are counted without counting again the groups it leaves alone (:func:`edges_cached`)."""

    __slots__ = ("period", "count", "marks", "exact", "groups", "_positions")

    def __init__(self, period: int, count: int, positions: tuple[int, ...] | None, exact: bool = True,
                 marks: bytearray | None = None, groups: tuple | None = None) -> None:
        self.period, self.count, self.exact, self.groups = period, count, exact, groups
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
    period = _small_lcm(m for _, m in progs)
    if period is not None:
        return _enumerated(progs, period)
    return _union(progs, terms)


def _enumerated(progs, period: int) -> Edges:
    """The edges of ``progs`` marked over ``period``.  O(period)."""
    marks = _marks(progs, period)
    return Edges(period, marks.count(1), None, marks=marks)


def _small_lcm(moduli) -> int | None:
    """The LCM of ``moduli``, or None once it passes :data:`ENUMERATE_LIMIT` (that of many long moduli runs to
    thousands of digits, and :func:`_coprime_groups` finds it group by group anyway).  O(n)."""
    out = 1
    for m in moduli:
        out = out * m // math.gcd(out, m)
        if out > ENUMERATE_LIMIT:
            return None
    return out


def _from_groups(groups) -> Edges:
    """The edges of coprime groups (as :attr:`Edges.groups` holds them):
    the period is the product of the LCMs, and the positions in no
    progression the product of each group's (Chinese remainder theorem).
    O(groups) multiplications."""
    period, free = math.prod(g[0] for g in groups), math.prod(g[2] for g in groups)
    return Edges(period, period - free, None, all(g[3] for g in groups), groups=tuple(groups))


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


def _union(progs: list[tuple[int, int]], terms: int | None = None) -> Edges:
    """The union's edges within the LCM of the moduli, counted group by
    group (``Edges.exact`` False when a group was estimated).

    Progressions whose moduli share no factor with another group's are
    independent (Chinese remainder theorem): a position modulo the LCM of
    all is one position modulo each group's LCM, so the positions in no
    progression number the product of each group's.  Each group is
    enumerated, counted by inclusion-exclusion (at most ``terms`` steps,
    :data:`UNION_TERMS` unless told), or else estimated (:func:`_sampled_share`).
    O(d^2) to group ``d`` progressions, plus each group's count."""
    return _from_groups([_counted(members, lcm, terms) for lcm, members in _coprime_groups(progs)])


def _counted(members: list, lcm: int, terms: int | None, sampled: bool = False, logs: list | None = None) -> tuple:
    """One coprime group as :attr:`Edges.groups` holds it: enumerated, counted by inclusion-exclusion, or
    else (at once when ``sampled``: a group it holds was) estimated with ``logs`` (:func:`_sampled_share`).
    O(lcm) up to :data:`ENUMERATE_LIMIT`, else O(terms + SAMPLE)."""
    if lcm <= ENUMERATE_LIMIT:
        return lcm, members, lcm - _marks(members, lcm).count(1), True, None
    count = None if sampled else _inclusion_exclusion(members, lcm, UNION_TERMS if terms is None else terms)
    if count is not None:
        return lcm, members, lcm - count, True, None
    logs = _long_logs(members) if logs is None else logs
    return lcm, members, lcm - round(_sampled_share(members, logs) * lcm), False, logs


def _coprime_groups(progs) -> list[tuple[int, list[tuple[int, int]]]]:
    """The progressions grouped so that moduli of different groups are
    co-prime (merging every group a modulus shares a factor with), each
    group as ``(LCM of its moduli, sorted progressions)``.  O(d^2)."""
    groups: list[tuple[int, list]] = []  # (LCM of the moduli, progressions)
    for off, m in progs:
        joined, members, lcm = [], [(off, m)], m
        for g_lcm, g_members in groups:
            g = math.gcd(g_lcm, lcm)
            if g > 1:
                members += g_members
                lcm = lcm // g * g_lcm
            else:
                joined.append((g_lcm, g_members))
        groups = joined + [(lcm, members)]
    return [(lcm, sorted(members)) for lcm, members in groups]


def _merged(parts: Sequence[Edges], keys: Sequence[tuple], terms: int | None) -> Edges:
    """The edges of the union of ``parts`` (of the progressions ``keys``)
    built from their groups: groups that share a factor are merged and
    counted as :func:`_union` counts them, the others keep their counts;
    the same numbers :func:`_edges_of` gives, without the LCM of every
    modulus nor counting again a group left unchanged.  A part enumerated
    as a whole is grouped first (once).  O(groups^2) plus the merged
    groups' counts."""
    for e, key in zip(parts, keys):
        if e.groups is None:
            e.groups = tuple(_counted(members, lcm, terms) for lcm, members in _coprime_groups(key))
    groups: list[tuple] = list(parts[0].groups)
    for part in parts[1:]:
        for group in part.groups:
            lcm, touched, joined = group[0], [group], []
            for other in groups:
                g = math.gcd(other[0], lcm)
                if g > 1:
                    touched.append(other)
                    lcm = lcm // g * other[0]
                else:
                    joined.append(other)
            if len(touched) > 1:
                every = sorted([p for t in touched for p in t[1]])  # sorted runs: merged, not sorted anew
                members = list(dict.fromkeys(every))
                same = [t for t in touched if len(t[1]) == len(members)]  # one held them all: its count stands
                # a group estimated (its LCM too long to enumerate, and inclusion-exclusion ran out of terms) is
                # estimated within any group holding it: its walk is a part of theirs (a merged group waiting for
                # its count carries that in its fourth field)
                sampled = any(t[3] if t[2] is None else not t[3] for t in touched)
                logs = None  # the terms of disjoint groups are theirs together
                if sampled and len(every) == len(members):
                    logs = [x for t in touched for x in (_long_logs(t[1]) if t[4] is None else t[4])]
                group = same[0] if same else (lcm, members, None, sampled, logs)
            groups = joined + [group]
    groups = [g if g[2] is not None else _counted(g[1], g[0], terms, g[3], g[4]) for g in groups]
    period = math.prod(g[0] for g in groups)
    if period <= ENUMERATE_LIMIT:  # enumerated as a whole, as _edges_of does
        return _enumerated([p for g in groups for p in g[1]], period)
    return _from_groups(groups)


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


def _sampled_share(progs, logs: list | None = None) -> Fraction:
    """Estimated share of positions in the union: the progressions of a
    modulus up to :data:`SAMPLE` marked over the first SAMPLE positions
    (each off by at most one member there), the longer ones as if
    independent of them (each holds under 1 / SAMPLE of the positions;
    their product summed as logarithms, so that shares far below a float's
    epsilon keep their precision).  ``logs``: the longer ones' terms
    (:func:`_long_logs`), when known.  O(SAMPLE)."""
    short = [(off, m) for off, m in progs if m <= SAMPLE]
    marked = _marks(short, SAMPLE).count(1) if short else 0
    if marked == SAMPLE:
        return Fraction(1)
    log_free = math.log1p(-marked / SAMPLE) + math.fsum(_long_logs(progs) if logs is None else logs)
    return Fraction(-math.expm1(log_free))


def _long_logs(progs) -> list[float]:
    """``log(1 - 1/m)`` of each progression of a modulus ``m`` past :data:`SAMPLE`: :func:`_sampled_share` sums
    them exactly rounded (in any order), so a union of groups with no progression in common sums theirs.  O(d)."""
    return [math.log1p(-1 / m) for _, m in progs if m > SAMPLE]


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


def edges_cached(progs: tuple[tuple[int, int], ...], parts: Sequence[tuple] = ()) -> Edges:
    """:func:`edges` by progression set (the planners price the same trees
    under many techniques), with the planners' inclusion-exclusion budget
    :data:`PLAN_UNION_TERMS`, so a pricing's work is bounded.  ``parts``:
    progression sets whose union ``progs`` is (the trees a weaving
    merges): the union's edges are built from theirs (:func:`_merged`: the
    same numbers), each counted first when not cached.  O(1) when cached; else O(period) up to
    :data:`ENUMERATE_LIMIT`, O(d^2 + PLAN_UNION_TERMS + SAMPLE) beyond."""
    global _cache_bytes
    hit = _recent(progs)
    if hit is None:
        # a part no longer cached is counted again, once: the weaving merges it with every other tree
        hit = _merged([edges_cached(p) for p in parts], parts, PLAN_UNION_TERMS) if parts else None
        if hit is None:
            hit = _edges_of(progs, PLAN_UNION_TERMS)
        size = len(hit.marks) if hit.marks is not None else 0
        if (counted := _EDGE_CACHE.pop(progs, None)) is not None:  # put there just now: progs is one of its parts
            _cache_bytes -= len(counted.marks) if counted.marks is not None else 0
        # the least recently used go first: a weaving's current trees, the parts of its next merges, stay
        while _EDGE_CACHE and (len(_EDGE_CACHE) >= CACHE_ENTRIES or _cache_bytes + size > CACHE_BYTES):
            old = _EDGE_CACHE.pop(next(iter(_EDGE_CACHE)))
            _cache_bytes -= len(old.marks) if old.marks is not None else 0
        _EDGE_CACHE[progs] = hit
        _cache_bytes += size
    return hit


def _recent(progs: tuple) -> Edges | None:
    """The cached edges of ``progs``, marked most recently used.  O(1)."""
    hit = _EDGE_CACHE.pop(progs, None)
    if hit is not None:
        _EDGE_CACHE[progs] = hit
    return hit


_EDGE_CACHE: dict[tuple, Edges] = {}
_cache_bytes = 0

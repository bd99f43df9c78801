"""What L-Int's landmark intervals cost (:mod:`mta.multi.lint`, Arasu-Widom
section 3.1.2): the intervals ending just before a landmark are computed on
demand, right to left, once each, as far back as the widest lookup through
that landmark reaches.  So a landmark costs the largest need of the lookups
that go through it, and which lookups do depends on where the queries'
windows end relative to the landmarks.

:func:`landmark_calls_enumerated` counts it exactly: the tree's edges repeat
every composite slide, the landmarks every ``w`` partials, so the pattern of
lookups repeats after ``w / gcd(edges per composite slide, w)`` composite
slides; one such horizon is enumerated, every query's answers in it mapped
to their landmark (modulo the horizon) and each landmark charged its
largest need (the horizon is also a multiple of every slide: a Panes
tree's period need not be).  When the edges were not enumerated (a
composite slide too long) or the horizon holds too many answers, :func:`landmark_calls_expected`
estimates it assuming each query looks up a landmark independently, which
overestimates workloads whose slides divide one another (their lookups
share landmarks).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Sequence

__all__ = ["ENUMERATE_ANSWERS", "ENUMERATE_UNITS", "landmark_calls_enumerated", "landmark_calls_expected"]

#: Most answers :func:`landmark_calls_enumerated` walks before giving up:
#: the planners price hundreds of trees, so the walk stays short (the
#: section 5.1 workload of 100 queries walks about 10,000).
ENUMERATE_ANSWERS = 1 << 14

#: Longest horizon (in units) :func:`landmark_calls_enumerated` walks: its
#: edge positions are built over it.  Horizons this long come from slides
#: that do not divide one another, whose lookups do fall on landmarks
#: independently, so the expected count is within a few percent there.
ENUMERATE_UNITS = 1 << 16

#: (queries, id of the edges, w) -> (the edges, the counts); holding the
#: edges keeps their id from being reused while cached.
_CACHE: dict = {}


def landmark_calls_enumerated(queries: Sequence[tuple[int, int, int]], edges, w: int) -> tuple | None:
    """Monoid calls per partial that L-Int spends extending landmarks'
    before-intervals, and spends in its lookups themselves (one combine of
    the two landmark intervals, or the fold of a range without a landmark),
    for ``queries`` ``(range, slide, lag)`` (distinct) answered by one tree
    with ``edges`` (an :class:`~.edge_count.Edges`), a landmark every ``w``
    partials; None when it cannot enumerate.

    A window ``[a, b)`` is looked up as the closed partials
    ``[idx(a), hi)``, ``idx(x)`` the edges before ``x`` and ``hi`` the edges
    before ``b`` (less the open partial when the window ends at the newest
    element, no lag); its landmark is the last multiple of ``w`` below
    ``hi``, its need the partials from ``idx(a)`` to it, and extending a
    landmark to need ``n`` costs ``n - 1`` combines.  None also past
    :data:`ENUMERATE_UNITS` or :data:`ENUMERATE_ANSWERS`.  O(answers in the
    horizon + the horizon), O(1) when cached (the planners price a tree once per weaving)."""
    if edges.marks is None or not edges.count:
        return None
    horizon = _horizon(queries, edges.period, edges.count, w)[0]
    if horizon > ENUMERATE_UNITS or sum(horizon // s for _, s, _ in queries) > ENUMERATE_ANSWERS:
        return None  # checked before the positions are built: most priced trees stop here
    key = (tuple(queries), id(edges), w)
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        hit = _CACHE[key] = (edges, _walk(queries, edges.positions, edges.period, edges.count, w))
    return hit[1]


def _horizon(queries, period: int, count: int, w: int) -> tuple[int, int]:
    """``(units, partials)`` after which the lookups repeat: a multiple of
    the edges' period and of every slide (Panes' period is the LCM of the
    pane sizes, which a slide need not divide) holding a multiple of ``w``
    partials.  O(n)."""
    units = math.lcm(period, *(s for _, s, _ in queries))
    partials = count * (units // period)
    reps = w // math.gcd(partials, w)
    return units * reps, partials * reps


def _walk(queries, positions: tuple, period: int, count: int, w: int) -> tuple:
    """:func:`landmark_calls_enumerated` over the edges' ``positions``."""
    horizon, per_horizon = _horizon(queries, period, count, w)

    need: dict = {}
    lookups = 0
    for r, s, lag in queries:
        for end in range(s, horizon + 1, s):
            b = end - lag  # idx(x) (the edges before x) written out: the walk's inner loop
            lo = (b - r) // period * count + bisect_left(positions, (b - r) % period)
            hi = b // period * count + bisect_left(positions, b % period) - (0 if lag else 1)
            if hi <= lo:
                continue
            landmark = (hi - 1) - (hi - 1) % w
            if landmark < lo:
                lookups += hi - lo - 1  # folded
            elif landmark > lo:
                lookups += 1  # the interval before the landmark and the one after
                key = landmark % per_horizon
                if landmark - lo > need.get(key, 0):
                    need[key] = landmark - lo
    return sum(n - 1 for n in need.values()) / per_horizon, lookups / per_horizon


def landmark_calls_expected(closed: Sequence[float], answers_per_partial: Sequence[float], w: int) -> float:
    """Monoid calls per landmark, assuming independent lookups: with query
    ``i`` answering ``a_i`` times per partial, it looks up a given landmark
    with probability ``p_i = min(1, a_i * w)``, needing ``k_i - (w + 1) / 2``
    intervals (its range ends half a landmark period past the landmark);
    the landmark costs the expected largest need,
    ``sum_i k_i p_i prod_{j longer} (1 - p_j)``.  O(n log n)."""
    expected = 0.0
    none_longer = 1.0
    for k, a in sorted(zip(closed, answers_per_partial), reverse=True):
        if k < w:
            break  # a range with no landmark inside is folded, not looked up
        p = min(1.0, a * w)
        expected += (k - (w + 1) / 2) * p * none_longer
        none_longer *= 1.0 - p
        if none_longer <= 0.0:
            break
    return expected

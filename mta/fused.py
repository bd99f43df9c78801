"""Several ready aggregations of one value as one monoid over shared moments.

A job asking for ``max``, ``mean`` and ``stddev`` of one value would run a
product of three monoids: three lifts per row, a combine that calls three
combines, three lowers per result.  Every ready aggregation in
:data:`FUSABLE` is a function of five moments of the window, so
:func:`fuse` runs them as one monoid whose element is the tuple

    ``(count, sum, M2, min, max)``

(``M2``: the sum of squared deviations from the mean), lifted once per row,
merged by one combine (Chan et al.'s pairwise update of ``M2``, written
over sums: ``delta = sum_b / n_b - sum_a / n_a``), lowered once per
aggregation.  The identity is ``(0, 0, 0, None, None)``; a non-empty
element always has its ``min`` and ``max``.  As in
:data:`mta.aggregators.MOMENTS`, an infinite value lifts to a NaN ``M2``,
so a window holding one has a NaN variance and standard deviation;
integers stay Python integers in ``count``, ``sum``, ``min`` and ``max``
(an exact sum, however large).  Ties of ``min`` and ``max`` keep the older
value, as :data:`mta.aggregators.MIN` and ``MAX`` do.

A ready aggregator is recognised by its functions (the monoid's combine
and identity, lift and lower), not by its name, so a user's own
aggregator called ``"max"`` is never taken for the ready one, and a copy
unpickled on another process still is.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

from . import aggregators
from .monoid import Aggregator, Monoid

__all__ = ["FUSABLE", "IDENTITY", "fuse", "fused_names", "ready_name"]

#: The fused element of an empty window.
IDENTITY = (0, 0, 0, None, None)


def _lift(x):
    # x - x rather than math.isfinite: ints beyond a float's range lift too
    return (1, x, 0 if x - x == 0 else math.nan, x, x)


def _combine(a, b):
    na = a[0]
    if not na:
        return b
    nb = b[0]
    if not nb:
        return a
    n = na + nb
    sa, sb = a[1], b[1]
    delta = sb / nb - sa / na
    lo, hi = a[3], a[4]
    blo, bhi = b[3], b[4]
    return (n, sa + sb, a[2] + b[2] + delta * delta * na * nb / n,
            blo if blo < lo else lo, bhi if bhi > hi else hi)


def _sum(v):
    return v[1]


def _count(v):
    return v[0]


def _min(v):
    return v[3]


def _max(v):
    return v[4]


def _mean(v):
    return v[1] / v[0] if v[0] else None


def _variance(ddof: int, v):
    return v[2] / (v[0] - ddof) if v[0] > ddof else None


def _stddev(ddof: int, v):
    return math.sqrt(v[2] / (v[0] - ddof)) if v[0] > ddof else None


#: Each fusable ready aggregation's result from the fused element (the same
#: empty results as the ready aggregator's, :data:`mta.aggregators.READY`).
FUSABLE = {
    "sum": _sum, "count": _count, "min": _min, "max": _max, "mean": _mean,
    "variance": functools.partial(_variance, 1), "var_pop": functools.partial(_variance, 0),
    "stddev": functools.partial(_stddev, 1), "stddev_pop": functools.partial(_stddev, 0),
}

MONOID = Monoid(_combine, IDENTITY, name="fused_moments", commutative=True)


def _lower(names: tuple, v):
    return tuple([FUSABLE[name](v) for name in names])


def _same(f, g) -> bool:
    if f is g:
        return True
    return (isinstance(f, functools.partial) and isinstance(g, functools.partial) and f.func is g.func
            and f.args == g.args and f.keywords == g.keywords)


def ready_name(agg: Aggregator) -> str | None:
    """The ready aggregation (:data:`mta.aggregators.READY`) that ``agg``
    is, by its functions, or ``None``."""
    for ready in aggregators.READY.values():
        r = ready.aggregator
        if agg is r or (_same(agg.monoid.combine, r.monoid.combine) and agg.monoid.identity == r.monoid.identity
                        and _same(agg.lift, r.lift) and _same(agg.lower, r.lower)):
            return ready.name
    return None


def fuse(aggs: Sequence[Aggregator]) -> Aggregator | None:
    """One aggregator computing every one of ``aggs`` over the same value,
    lowering to their results as a tuple in order (what
    ``mta.product(*aggs)`` gives, up to floating-point rounding of the
    moments), when each is a ready aggregation in :data:`FUSABLE`; else
    ``None``.  O(k) to build for k aggregations; per row one lift, per
    combine O(1) whatever k."""
    names = []
    for agg in aggs:
        name = ready_name(agg) if isinstance(agg, Aggregator) else None
        if name not in FUSABLE:
            return None
        names.append(name)
    if not names:
        return None
    return Aggregator(MONOID, _lift, functools.partial(_lower, tuple(names)),
                      name="fused(" + ", ".join(names) + ")")


def fused_names(agg: Aggregator) -> tuple | None:
    """The ready aggregations a :func:`fuse` result lowers to, in order, or
    ``None`` for any other aggregator."""
    lower = agg.lower
    if isinstance(lower, functools.partial) and lower.func is _lower and agg.monoid.combine is _combine:
        return lower.args[0]
    return None

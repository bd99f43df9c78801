"""Operations per input element of a plan: what its running time follows.

The paper's plan cost (mqo-shein-chrysanthis-tkde section 3.1.1, equation
(1), with section 4.1's Omega) counts operations, not only monoid calls:
SlickDeque (Non-Inv)'s Omega holds ``+Q``, one operation per query answer,
and FlatFIT's ``3Q`` per slide.  :func:`mta.multi.cost.plan_cost` counts
monoid calls, what the planners minimise; :func:`operations` adds what the
executor (:class:`~mta.multi.shared.SharedWindows`) does besides calls, each
counted as the executor does it (:func:`counts`):

* ``element``: one push per element (the lift, the schedule's check, sorting
  the push's results);
* ``partial``: each partial a tree closes (the final technique's append, the
  partial's key, the next edge, and its share of eviction), and each
  fragment a TriWeave shared slicer closes (handed to every tree, whose
  ``add`` is then one of the tree's calls or partials);
* ``lookup``: each window looked up, once per spec (the queries of one tree
  with the same window, :mod:`.schedule`): the heap step, the binary
  search, the final technique's lookup call;
* ``result``: each :class:`~mta.multi.query.Result`, one per query answer
  (the paper's ``+Q``): building it and sorting it into the output.

Each kind is weighted by its time relative to one monoid call on the
executor running the plan (:class:`Weights`).  The weights are measured by
a calibration on trivial plans (``bench.mqo.calibrate``), never fitted to
the plans being estimated; :data:`UNIT` counts every operation as one, as
the paper does.  Monoid calls come from :func:`mta.multi.cost.plan_cost`
unchanged.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from . import cost
from .edge_count import edges

__all__ = ["Counts", "Weights", "UNIT", "counts", "operations", "solve"]


class Counts(NamedTuple):
    """Per input element: monoid calls, partials closed, windows looked up,
    Results returned (one per query answer)."""

    calls: float
    partials: float
    lookups: float
    results: float


class Weights(NamedTuple):
    """Time of each operation relative to one monoid call (``element`` is
    the per-push work every plan pays once per element)."""

    element: float
    partial: float
    lookup: float
    result: float


#: Every operation counted as one, as in the paper's Omega.
UNIT = Weights(1.0, 1.0, 1.0, 1.0)


def counts(groups, rate: float = 1.0, *, shared_slicing: bool = False) -> Counts:
    """The operations per element of a plan, by kind.  ``groups`` and
    ``shared_slicing`` as for :func:`mta.multi.cost.plan_cost`.

    A tree closes ``E / lambda`` partials per element (its edge density),
    at most one (:func:`mta.multi.cost.tree_cost`);
    a separate query (``partial="none"`` or ``final="mta"``) holds every
    element, one partial each.  Each distinct ``(range, slide, lag)`` of a
    tree is looked up once per slide, each query answers once per slide.
    O(total queries + edge counts)."""
    groups = list(cost.group_triples(groups))
    calls = cost.plan_cost(groups, rate, shared_slicing=shared_slicing)
    partials = lookups = results = 0.0
    for queries, partial, final in groups:
        results += sum(1.0 / (s * rate) for _, s, _ in queries)
        if partial == "none" or final == cost.SEPARATE:
            partials += len(queries)
            lookups += sum(1.0 / (s * rate) for _, s, _ in queries)
            continue
        partials += min(edges(queries, partial).density / rate, 1.0)
        lookups += sum(1.0 / (s * rate) for _, s, _ in set(queries))
    if shared_slicing:
        partials += min(edges([q for qs, _, _ in groups for q in qs], groups[0][1]).density / rate, 1.0)
    return Counts(calls, partials, lookups, results)


def operations(groups, weights: Weights = UNIT, rate: float = 1.0, *, shared_slicing: bool = False) -> float:
    """Operations per element in monoid-call units:
    ``calls + element + partial * partials + lookup * lookups + result * results``
    (:func:`counts`, weighted by ``weights``).  O(total queries + edge
    counts)."""
    c = counts(groups, rate, shared_slicing=shared_slicing)
    return (c.calls + weights.element + weights.partial * c.partials + weights.lookup * c.lookups
            + weights.result * c.results)


def solve(rows: Sequence[Sequence[float]], times: Sequence[float]) -> list[float]:
    """The per-operation times ``x`` with ``rows @ x == times`` for a square,
    non-singular system (the calibration's: one row of operation counts per
    trivial plan, its measured time per element): Gaussian elimination with
    partial pivoting.  O(n^3) for n unknowns.  Raises ValueError when the
    rows do not determine every time."""
    n = len(rows)
    if n == 0 or any(len(r) != n for r in rows) or len(times) != n:
        raise ValueError(f"solve needs n rows of n counts and n times, got {len(rows)} rows, {len(times)} times")
    a = [list(map(float, r)) + [float(t)] for r, t in zip(rows, times)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(a[i][col]))
        if abs(a[pivot][col]) < 1e-12:
            raise ValueError(f"the calibration plans do not separate operation {col}: the counts are singular")
        a[col], a[pivot] = a[pivot], a[col]
        for i in range(n):
            if i != col and a[i][col]:
                f = a[i][col] / a[col][col]
                a[i] = [x - f * y for x, y in zip(a[i], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]

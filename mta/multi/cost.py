"""The multi-query cost model: monoid calls per input element of a plan.

Shein and Chrysanthis, "Multi-Query Optimization of Incrementally Evaluated
Sliding-Window Aggregations" (TKDE 2022; mqo-shein-chrysanthis-tkde):

* sections 2.1 and 3.1: partials per window, the composite slide and its
  edges (counted in :mod:`mta.multi.edge_count`);
* section 3.1.1, equation (1): the plan cost ``C = m*lambda + sum E_i*Omega_i``;
* section 4.1, equations (3)-(7) and Table 3: Omega, the final-aggregation
  operations per edge, of Panes, FlatFAT, FlatFIT, SlickDeque (Inv) and
  SlickDeque (Non-Inv) (in :mod:`mta.multi._omega`, re-exported here).

The paper gives no Omega for B-Int, R-Int and L-Int (Arasu and Widom, VLDB
2004, sections 3.1.1, 3.2 and 3.1.2); the ones used are derived (Omega in
:mod:`mta.multi._omega`, the monoid calls below), each marked "derived".

Inputs are numbers, never objects: a query is a ``(range, slide)`` pair in
one unit -- elements for count-based queries, or time units for time-based
ones together with ``rate``, the elements per time unit (the paper's lambda).

Two estimates are offered.  :func:`paper_plan_cost` is equation (1) with the
paper's Omega, in operations per time unit.  :func:`plan_cost` is what the
planners use: the same decomposition (partial aggregation per element, final
aggregation per edge) in monoid calls per element, with two refinements the
paper's per-edge Omega leaves out, because a multi-query tree answers each
query only at its own slide, not at every edge of the composite slide:

* the work of a final technique is split into an *update* part, paid for
  every partial the tree receives, and an *answer* part, paid once per
  answer of each query (``1 / slide`` answers per time unit);
* a query's window holds ``k = range * edges / period`` partials of the
  tree (the edge density times the range), not ``range / slide``.

What a plan holds (partials and elements) is estimated apart, in
:mod:`mta.multi.memory`, which also states the rule trading calls for it;
what its time follows (calls, answers, partials) in :mod:`mta.multi.operations`;
the base intervals of a B-Int or FlatFAT lookup are counted in
:mod:`mta.multi.dyadic` (re-exported here).

Every function states its complexity; ``n`` is the number of queries.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

# The edge counts live in edge_count; they are re-exported here because the
# cost model's users (planners, benchmarks) read them beside the prices.
from .edge_count import (PARTIALS, Edges, composite_slide, edges, edges_cached, f1_edge_count,
                         partials_per_window, progressions, query_numbers)
from . import lint_cost as _lint  # L-Int's landmark intervals
from .dyadic import dyadic_pieces, mean_dyadic_pieces  # B-Int and FlatFAT lookups
from ._omega import (omega_bint, omega_flatfat, omega_flatfit, omega_lint, omega_panes, omega_rint,
                     omega_slickdeque_inv, omega_slickdeque_noninv)
# what a tree holds is estimated in memory; the old name stays an alias
from .memory import EVICT_EVERY, tree_held as partials_held

__all__ = [
    "PARTIALS", "FINALS", "INVERTIBLE_FINALS", "SELECTIVE_FINALS", "GENERAL_FINALS",
    "applicable_finals", "composite_slide", "f1_edge_count", "progressions", "Edges",
    "edges", "partials_per_window", "dyadic_pieces", "mean_dyadic_pieces",
    "omega_panes", "omega_flatfat", "omega_flatfit", "omega_slickdeque_inv",
    "omega_slickdeque_noninv", "omega_bint", "omega_rint", "omega_lint", "omega",
    "paper_plan_cost", "update_calls", "answer_calls", "tree_cost", "tree_costs", "plan_cost", "group_triples",
    "SEPARATE", "MTA_INSERT_CALLS", "separate_calls", "partials_held",
]


#: Final aggregation techniques, section 2.2 (and Arasu-Widom's R-Int, L-Int).
FINALS = ("naive", "slickdeque-inv", "rint", "slickdeque-noninv", "bint", "flatfat", "flatfit", "lint")
#: The no-sharing baseline: one Amortized MTA per query (``partial="none"``).
SEPARATE = "mta"
#: Finals that need an inverse (subtract-on-evict family); a planner picks
#: them only when it is exact (:func:`mta.multi.plan.planned_finals`).
INVERTIBLE_FINALS = ("slickdeque-inv", "rint")
#: Finals that need a selective monoid (combine(a, b) is a or b).
SELECTIVE_FINALS = ("slickdeque-noninv",)
#: Finals that work for any monoid.
GENERAL_FINALS = ("naive", "bint", "flatfat", "flatfit", "lint")


def applicable_finals(invertible: bool, selective: bool, available: Iterable[str] | None = None) -> tuple[str, ...]:
    """The final techniques an aggregation can use, in :data:`FINALS` order;
    ``invertible``: its inverse is exact (as a planner needs it).  O(1)."""
    out = [f for f in FINALS
           if f in GENERAL_FINALS or (f in INVERTIBLE_FINALS and invertible)
           or (f in SELECTIVE_FINALS and selective)]
    if available is not None:
        allowed = set(available)
        out = [f for f in out if f in allowed]
    return tuple(out)


# -- the paper's Omega (section 4.1, Table 3; each in mta.multi._omega) ---------

def omega(final: str, queries: Sequence[tuple[int, int]], p: Sequence[float]) -> float:
    """Omega per edge of ``final`` for queries with ``p[i]`` partials per
    window (Table 3 and the derived ones, :mod:`mta.multi._omega`).  O(n log P)."""
    if final == "naive":
        return omega_panes(queries)
    if final == "flatfat":
        return omega_flatfat(p)
    if final == "flatfit":
        return omega_flatfit(len(p))
    if final == "slickdeque-inv":
        return omega_slickdeque_inv(p)
    if final == "slickdeque-noninv":
        return omega_slickdeque_noninv(max(max(p), 1.0), len(p))
    if final == "bint":
        return omega_bint(p)
    if final == "rint":
        return omega_rint(len(p))
    if final == "lint":
        return omega_lint(p)
    raise ValueError(f"unknown final aggregation {final!r}; known: {', '.join(FINALS)}")


def paper_plan_cost(groups, rate: float = 1.0) -> float:
    """Equation (1): ``C = m * lambda + sum_i E_i * Omega_i`` in operations per
    time unit, ``E_i`` the edge rate of tree ``i`` and ``P`` of each query its
    range times that edge rate.  ``groups`` as for :func:`plan_cost`.
    O(sum of the trees' edge counts)."""
    total = 0.0
    for queries, partial, final in group_triples(groups):
        e = edges(queries, partial)
        queries = [query_numbers(q) for q in queries]
        p = [q[0] * e.density for q in queries]
        total += rate + e.density * omega(final, queries, p)
    return total


# -- monoid calls per element (what the planners minimise) ---------------------
#
# Calibrated to the executor (mta.multi.shared and the final aggregators):
# a partial's first element is stored, not combined; a periodic window that
# ends at the newest element is the final aggregator's range over the closed
# partials in it, combined once with the open partial.

#: How many live partials L-Int (mta.multi.lint) rebuilds per landmark:
#: a landmark every ``LINT_W_MIN`` partials.
LINT_W_MIN = 8

#: Amortized monoid calls of one insert into an Amortized MTA (the
#: ``separate`` baseline; mta-villalba-tpds2019 section 4.2: a constant
#: number of combines per insert).
MTA_INSERT_CALLS = 2.0


def separate_calls(query, rate: float = 1.0) -> float:
    """Monoid calls per element of one query ``(range, slide[, lag])`` on
    its own Amortized MTA (``plan="separate"``): an insert's
    :data:`MTA_INSERT_CALLS`, and at each answer (every ``slide * rate``
    elements) the eviction of the elements that left and the query: about
    two calls per element evicted one at a time (amortized O(1)), or
    ``2 * log2(window)`` for a bulk eviction (O(log n)), whichever the
    engine does, the fewer.  ``tests/test_multi_cost.py`` checks it against
    counted calls.  O(1)."""
    r, s, lag = query_numbers(query)
    between = max(1.0, s * rate)  # elements between two answers
    window = max(2.0, (r + lag) * rate)
    return MTA_INSERT_CALLS + 2 * min(between, math.log2(window)) / between


def update_calls(final: str, p: Sequence[float], held: float | None = None) -> float:
    """Monoid calls a final technique spends per partial appended, for
    queries whose windows hold ``p[i]`` partials in a structure holding
    ``held`` at its peak (the largest window when not told).  O(n).

    * naive, slickdeque-inv: 0 (they store the partial; the work is at
      lookup);
    * rint: 1, the running aggregate (Arasu-Widom Fig. 6);
    * flatfit: 1, derived from equation (5)'s 3 per query and slide: a new
      partial is combined once into the first lookup's pointer chain that
      reaches it, later lookups jump over it;
    * slickdeque-noninv: ``2 - 2/P_max``, equation (7) without its lookup
      terms (those compare positions, not values);
    * bint: one combine per base interval the partial completes,
      ``sum_{l=1..L} 2^-l = 1 - 2^-L`` for ``L = ceil(log2 P_max)`` levels
      (Arasu-Widom Fig. 3, derived);
    * flatfat: ``log2`` of its capacity, the leaf-to-root walk (section 2.2;
      the capacity is the power of two at or above the partials held at
      the peak, at least 4: the executor doubles it when full and keeps
      the partials of a lag and of the pushes since the last eviction);
    * lint: one combine extending the interval from the last landmark (none
      at a landmark); the intervals before a landmark are computed on demand
      and priced per tree in :func:`tree_costs` (derived).
    """
    p_max = max(max(p) if p else 1.0, 1.0)
    if final in ("naive", "slickdeque-inv"):
        return 0.0
    if final in ("rint", "flatfit"):
        return 1.0
    if final == "slickdeque-noninv":
        return 2.0 - 2.0 / p_max
    if final == "bint":
        levels = max(1, math.ceil(math.log2(p_max)))
        return 1.0 - 2.0 ** -levels
    if final == "flatfat":
        live = max(math.ceil(p_max if held is None else held), 4)
        return float((live - 1).bit_length())
    if final == "lint":
        return 1.0 - 1.0 / LINT_W_MIN
    raise ValueError(f"unknown final aggregation {final!r}; known: {', '.join(FINALS)}")


def answer_calls(final: str, k: float, per_lookup_partials: float = 0.0) -> float:
    """Monoid calls of the final technique's range over ``k`` closed
    partials (the open partial's one combine is counted by the caller).
    O(1) (cached for bint and flatfat).

    naive ``k - 1`` (equation (3) per answer); bint and flatfat the base
    intervals of the range less one (Theorem 3.1); flatfit 1 (derived from
    equation (5)'s 3 per query and slide: the pointers a lookup compresses
    serve the next lookups, and the open partial's combine is counted
    apart); rint 1 inverse;
    lint 1 (two landmark intervals; a range with no landmark is folded);
    slickdeque-noninv 0 (the answer is a deque node); slickdeque-inv adds the
    partials that entered its running aggregate and inverts those that left
    since its last lookup (``per_lookup_partials`` each), or folds the range
    when that is cheaper: ``min(2 * per_lookup_partials, k - 1)``."""
    kk = max(0, round(k))
    if kk <= 1:
        return 0.0
    if final == "slickdeque-inv":
        return min(2.0 * per_lookup_partials, kk - 1.0)
    per_range = _ANSWER_CALLS.get(final)
    if per_range is None:
        raise ValueError(f"unknown final aggregation {final!r}; known: {', '.join(FINALS)}")
    return per_range(kk)


def _dyadic_less_one(kk: int) -> float:
    return mean_dyadic_pieces(kk) - 1.0


#: :func:`answer_calls` of a range of ``kk > 1`` closed partials by final technique (slickdeque-inv's apart).
_ANSWER_CALLS = {
    "naive": lambda kk: kk - 1.0,
    "bint": _dyadic_less_one,
    "flatfat": _dyadic_less_one,
    "flatfit": lambda kk: 1.0,
    "rint": lambda kk: 1.0,
    "lint": lambda kk: 1.0 if kk >= LINT_W_MIN else kk - 1.0,
    "slickdeque-noninv": lambda kk: 0.0,
}


def tree_cost(queries, partial: str, final: str, rate: float = 1.0,
              *, shared_edges: Edges | None = None) -> float:
    """Monoid calls per input element of one execution tree.

    ``slice + (E / lambda) * update + sum_i (1 / (s_i * lambda)) * (answer_i + open_i)``:
    ``E`` the tree's partials per unit, ``slice = 1 - E / lambda``
    (each element but a partial's first is combined into it), a query's
    window holds ``k_i = r_i * E`` partials, its answer is the range over
    the ``k_i - 1`` closed ones plus one combine with the open partial;
    queries with the same ``(range, slide, lag)`` are answered once.
    ``E`` is the edge density but at most ``lambda``: an element closes at
    most one partial, so edges denser than elements leave some empty.
    With ``shared_edges`` (TriWeave's first level, section 3.1.1) the tree
    folds the shared fragments into its own partials instead of slicing
    elements, ``(E_shared - E) / lambda`` calls per element.  The separate
    baseline (``partial="none"``, ``final="mta"``) is one Amortized MTA per
    query, :func:`separate_calls` each.
    O(n + the edge count)."""
    return tree_costs(queries, partial, (final,), rate, shared_edges=shared_edges)[final]


def tree_costs(queries, partial: str, finals: Sequence[str], rate: float = 1.0,
               *, shared_edges: Edges | None = None) -> dict[str, float]:
    """:func:`tree_cost` for several final techniques at once (the edges and
    window sizes are computed once).  O(|finals| * n + the edge count)."""
    return with_slicing(tree_parts(queries, partial, finals, rate), rate, shared_edges)


def with_slicing(parts: tuple, rate: float = 1.0, shared_edges: Edges | None = None) -> dict[str, float]:
    """The costs of :func:`tree_parts`' ``parts`` with the slicing term,
    the one that depends on ``shared_edges``: a weaving prices a tree
    once for both ways of slicing.  Each cost is summed in the order
    :func:`tree_cost`'s formula gives.  O(|finals| * terms)."""
    density, costs = parts
    if density is None:
        return dict(costs)
    if shared_edges is None:
        base = max(1.0 - density / rate, 0.0)
    else:  # the fragments, like the partials, number at most one per element
        base = max(min(shared_edges.density, rate) - min(density, rate), 0.0) / rate
    out = {}
    for final, terms in costs.items():
        if type(terms) is float:  # the separate baseline
            out[final] = terms
            continue
        cost = base
        for term in terms:
            cost += term
        out[final] = cost
    return out


def tree_parts(queries, partial: str, finals: Sequence[str], rate: float = 1.0, *,
               progs: tuple | None = None) -> tuple:
    """:func:`tree_costs` but the slicing term: ``(density, {final: terms})``,
    ``density`` the tree's edges per unit (``None`` for ``partial="none"``,
    whose costs are numbers) and ``terms`` each final's cost without it, in
    the order they add up (the separate baseline: a number).  ``progs``:
    the tree's sorted progressions under ``partial``, when the caller has
    them (the planners; the queries are then ``(range, slide, lag)`` ints
    already).  O(|finals| * n + the edge count)."""
    if progs is None:
        queries = [query_numbers(q) for q in queries]
    if partial == "none" or SEPARATE in finals:
        sep = sum(separate_calls(q, rate) for q in queries)
        if partial == "none":
            return None, {f: float(sep) for f in finals}
    # a tree answers the queries with equal windows once (schedule.Spec)
    queries = list(dict.fromkeys(queries))
    if progs is None:
        progs = tuple(sorted({p for q in queries for p in progressions(q, partial)}))
    e = edges_cached(progs)
    density = e.density
    # an element closes at most one partial: where edges are denser than elements (slides below the element
    # spacing, exact binary float edges that nearly coincide) the extra edges start no partial, and a window
    # holds at most its elements
    filled = min(density, rate)
    per_element = filled / rate
    p = [r * filled for r, _, _ in queries]
    p_max = max(p)
    # what a tree holds at its peak, as memory.tree_held counts it but in O(1): the partials of the longest
    # reach and of the pushes between two evictions
    live = (max(r + lag for r, _, lag in queries) + (EVICT_EVERY - 1) / rate) * filled
    inv_s = [1.0 / (s * rate) for _, s, _ in queries]
    # one combine with the open partial per answer whose window holds closed partials and ends at
    # the newest element (a lagged window ends before the open partial)
    opened = sum(f for (_, _, lag), k, f in zip(queries, p, inv_s) if k >= 1.5 and not lag)
    closed = [k if lag else k - 1.0 for (_, _, lag), k in zip(queries, p)]  # a lagged window is all closed
    sums = _AnswerSums(closed, inv_s)
    out = {}
    for final in finals:
        if final == SEPARATE:
            out[final] = float(sep)
            continue
        terms = [opened, per_element * update_calls(final, (p_max,), live)]
        # the walk takes every edge for a partial: not so once edges are denser than elements
        walk = final == "lint" and density and density <= rate
        exact = _lint.landmark_calls_enumerated(queries, e, LINT_W_MIN) if walk else None
        if exact is not None:  # L-Int's landmark intervals and lookups, counted over the pattern
            out[final] = (*terms, per_element * sum(exact))
            continue
        if final == "lint" and density:
            per_partial = [f / per_element for f in inv_s]
            terms.append(per_element / LINT_W_MIN * _lint.landmark_calls_expected(closed, per_partial, LINT_W_MIN))
        if final == "slickdeque-inv":
            # one running aggregate per window length (the executor's spec)
            best: dict = {}
            for (r, s, lag), k, f in zip(queries, closed, inv_s):
                c = f * answer_calls(final, k, filled * s)
                key = (r, lag)
                best[key] = min(best.get(key, math.inf), c)
            terms.append(sum(best.values()))
        elif final in _AnswerSums.FINALS:
            terms.append(sums.of(final))
        else:
            terms.append(answer_calls(final, p_max) * sum(inv_s))
        out[final] = tuple(terms)
    return density, out


class _AnswerSums:
    """``sum_i f_i * answer_calls(final, k_i)`` for the finals whose
    answer depends on the window's partials alone (:data:`_ANSWER_CALLS`),
    each sum made once (B-Int and FlatFAT share theirs): the same products
    in the same order, so the same float.  O(n) per final."""

    FINALS = ("bint", "flatfat", "naive", "lint", "flatfit")

    def __init__(self, closed: Sequence[float], inv_s: Sequence[float]) -> None:
        self.pairs = [(round(k), f) for k, f in zip(closed, inv_s)]  # answer_calls' max(0, .): only k > 1 counts
        self.done: dict = {}

    def of(self, final: str) -> float:
        per_range = _ANSWER_CALLS[final]
        hit = self.done.get(per_range)
        if hit is None:
            hit = self.done[per_range] = sum([f * per_range(k) if k > 1 else 0.0 for k, f in self.pairs])
        return hit


def group_triples(groups):
    """Normalise plan groups to ``(queries, partial, final)`` triples, the
    queries as numeric ``(range, slide, lag)``; O(queries)."""
    for g in groups:
        if isinstance(g, tuple) and len(g) == 3 and isinstance(g[1], str):
            queries, partial, final = g
        else:
            queries, partial, final = g.queries, g.partial, g.final
        yield [query_numbers(q) for q in queries], partial, final


def plan_cost(groups, rate: float = 1.0, *, shared_slicing: bool = False) -> float:
    """Monoid calls per input element of a plan: the sum of its trees'
    :func:`tree_cost`.  ``groups`` are ``(queries, partial, final)`` triples
    (queries as ``(range, slide[, lag])``) or objects with those three
    attributes holding such tuples.  ``shared_slicing`` is TriWeave's plan
    shape: one slicer over the union of every query's edges feeds every
    tree.  O(total queries + edge counts)."""
    groups = list(group_triples(groups))
    if not shared_slicing:
        return sum(tree_cost(q, pa, f, rate) for q, pa, f in groups)
    partials = {pa for _, pa, _ in groups}
    if len(partials) != 1:
        raise ValueError("a shared slicer needs one partial technique for every tree")
    (partial,) = partials
    shared = edges([q for qs, _, _ in groups for q in qs], partial)
    return (max(1.0 - shared.density / rate, 0.0)
            + sum(tree_cost(q, pa, f, rate, shared_edges=shared) for q, pa, f in groups))


"""Choosing an execution plan: ``choose(queries, plan_name) -> list[Group]``.

The cost-based optimizers of mqo-shein-chrysanthis-tkde sections 3.1 and 4
over the cost model of :mod:`mta.multi.cost` (monoid calls per element):

* ``"weaveshare"`` -- :mod:`mta.multi.weaveshare`: greedy weaving, every
  tree slicing its own input;
* ``"triweave"`` -- :mod:`mta.multi.triweave`: the same greedy weaving
  priced with one shared slicer, and run that way: the groups hold one
  :class:`~mta.multi.shared_slicer.Slicer` (TriWeave's first level, its
  own estimate) when there are two trees or more;
* ``"auto"`` -- the candidates every query separately (its own Amortized
  MTA), one tree for all (best partial and final technique), WeaveShare's
  and TriWeave's plans, and the two weavings again with held partials
  priced (:func:`mta.multi.memory.held_price` of the cheapest of the
  first four); the memory rule (:func:`mta.multi.memory.lean`) picks the
  one holding the fewest partials among those within
  :data:`~mta.multi.memory.MEMORY_SLACK` of the cheapest estimate.
  "separate" is a candidate, so auto's estimate is never more than that
  slack above separate's.

Every group carries its ``estimate`` (monoid calls per element) and
``held`` (aggregates at its peak, :mod:`mta.multi.memory`).

The final techniques are those :func:`mta.multi.plan.planned_finals`
allows: the subtract-on-evict ones only for a monoid whose inverse is exact.

Queries that cannot share partials (different monoid, lift, or time
against rows: :func:`mta.multi.plan.sharing_key`) are planned apart.  A
query becomes numbers for the cost model in its key unit: elements for
``rows=`` queries, time units for ``range=`` ones (scaled to integers, at
``rate`` elements per time unit, 1 unless told); a per-element query
(``slide=None``) counts as a slide of one element, ``1 / rate`` time units.
"""

from __future__ import annotations

import math
from fractions import Fraction

from . import cost as _cost
from . import memory as _memory
from .plan import PARTIALS, Group, planned_finals, sharing_key
from .resolve import check_rate
from .shared_slicer import Slicer
from .triweave import triweave
from .weaveshare import price, weaveshare

PLAN_NAMES = ("auto", "weaveshare", "triweave")


def share(queries) -> list:
    """The queries split by :func:`sharing_key`, in the order they came."""
    groups: dict = {}
    for q in queries:
        groups.setdefault(sharing_key(q), []).append(q)
    return list(groups.values())


#: The most key units a number of the cost model may count: up to it the
#: model's floats cannot overflow (a product of two stays below 2^512).
PRICED_UNITS = 1 << 256


def numbers(queries, rate: float = 1.0) -> tuple[list[tuple[int, int, int]], float]:
    """``[(range, slide, lag)]`` as ints in one key unit and the elements per
    unit.  Time bounds are scaled by the LCM of their denominators (so a
    range of 0.5 with a slide of 0.25 becomes 2 and 1 at ``rate / 4``).
    Where that needs more than :data:`PRICED_UNITS` (a range of ``1e-300``,
    whose denominator is 2^1049, or ``1e300`` over slides of ``1e-10``), the
    unit is the largest bound over PRICED_UNITS, each bound is rounded to
    it (at least one unit) and the rate clamped to ``[1 / PRICED_UNITS,
    PRICED_UNITS]``: a rough estimate for the windows far below the largest
    one, rather than an overflow.  ``rows=`` queries count elements: their
    rate is 1 whatever ``rate`` says.  O(n)."""
    if any(q.by_rows for q in queries):
        rate = 1.0
    values = []
    per_element = 1 / _rational(rate)  # a per-element query answers (and cuts a partial) once per element
    for q in queries:
        s = q.exact_slide if q.exact_slide is not None else per_element
        values.append((Fraction(q.exact_width), Fraction(s), Fraction(q.exact_lag)))
    scale = 1
    for trio in values:
        for x in trio:
            scale = scale * x.denominator // math.gcd(scale, x.denominator)
    out = [tuple(int(x * scale) for x in trio) for trio in values]
    if scale <= PRICED_UNITS and all(x <= PRICED_UNITS for trio in out for x in trio):
        return out, rate / scale
    unit = max(x for trio in values for x in trio) / PRICED_UNITS
    out = [(max(1, round(r / unit)), max(1, round(s / unit)), round(lag / unit)) for r, s, lag in values]
    return out, float(min(max(Fraction(rate) * unit, Fraction(1, PRICED_UNITS)), PRICED_UNITS))


def _rational(rate: float) -> Fraction:
    """``rate`` as a fraction of small terms where one is that close
    (0.01, not the double's 5764607523034235 / 2^59): the LCM of the
    bounds' denominators, and so every number of the cost model, stays
    small.  O(1)."""
    exact = Fraction(rate)
    near = exact.limit_denominator(1 << 20)
    return near if near and abs(near - exact) <= exact * Fraction(1, 10**9) else exact


def best_final(queries, rate: float = 1.0) -> str:
    """The final technique with the lowest estimate among those a planner
    may pick (:func:`mta.multi.plan.planned_finals`; on the tree of every
    query, Cutty slicing)."""
    finals = planned_finals(queries)
    nums, unit_rate = numbers(queries, rate)
    costs = _cost.tree_costs(nums, "cutty", finals, unit_rate)
    return min(finals, key=lambda f: (costs[f], finals.index(f)))


def estimate(queries, partial: str, final: str, rate: float = 1.0) -> float:
    """Monoid calls per element of one tree (:func:`mta.multi.cost.tree_cost`)."""
    nums, unit_rate = numbers(queries, rate)
    return _cost.tree_cost(nums, partial, final, unit_rate)


def held(queries, partial: str, rate: float = 1.0) -> int:
    """Aggregates one group holds at its peak (:mod:`mta.multi.memory`):
    partials of a tree, or the elements of a query on its own engine
    (``partial="none"``).  O(queries + log edge count)."""
    nums, unit_rate = numbers(queries, rate)
    if partial == "none":
        return sum(_memory.separate_held(q, unit_rate) for q in nums)
    return _memory.tree_held(nums, partial, unit_rate)


def separate(queries, rate: float = 1.0) -> list:
    """``plan="separate"``: a group per query on its own Amortized MTA, with
    its estimates (:func:`mta.multi.cost.separate_calls`).  O(n)."""
    return [Group((q,), "none", "mta", estimate((q,), "none", "mta", rate), held=held((q,), "none", rate))
            for q in queries]


def _plan(queries, plan_name: str, rate: float) -> list:
    """The groups of one shareable set of queries."""
    finals = planned_finals(queries)
    nums, unit_rate = numbers(queries, rate)
    memo: dict = {}  # the weavings price many of the same trees

    def groups_of(trees) -> list:
        return [Group([queries[i] for i in t.members], t.partial, t.final, t.estimate, held=t.held) for t in trees]

    def three_level(partial, trees, total) -> list:
        if len(trees) < 2:
            # nothing to share: the tree slices its own input
            return groups_of([price(nums, t.members, (t.partial,), (t.final,), unit_rate) for t in trees])
        slicer = Slicer(partial, total - sum(t.estimate for t in trees))
        return [Group([queries[i] for i in t.members], t.partial, t.final, t.estimate, slicer, t.held)
                for t in trees]

    if plan_name == "weaveshare":
        return groups_of(weaveshare(nums, finals, PARTIALS, unit_rate, memo=memo))
    if plan_name == "triweave":
        return three_level(*triweave(nums, finals, PARTIALS, unit_rate, memo=memo))
    plans = [
        separate(queries, rate),
        groups_of([price(nums, tuple(range(len(nums))), PARTIALS, finals, unit_rate, memo=memo)]),
        groups_of(weaveshare(nums, finals, PARTIALS, unit_rate, memo=memo)),
        three_level(*triweave(nums, finals, PARTIALS, unit_rate, memo=memo)),
    ]
    cheapest = min(plans, key=total_estimate)
    lam = _memory.held_price(total_estimate(cheapest), total_held(cheapest))
    plans += [
        groups_of(weaveshare(nums, finals, PARTIALS, unit_rate, held_price=lam, memo=memo)),
        three_level(*triweave(nums, finals, PARTIALS, unit_rate, held_price=lam, memo=memo)),
    ]
    return plans


def candidates(queries, *, rate: float = 1.0) -> list:
    """The plans ``"auto"`` chooses among for one shareable set of queries
    (:func:`share`): separate, one tree, WeaveShare, TriWeave, then
    WeaveShare and TriWeave with held partials priced.  O(C^2) tree
    pricings, ``C`` the edge classes."""
    return _plan(queries, "candidates", rate)


def total_estimate(groups) -> float:
    """The groups' estimates plus each shared slicer's once.  O(groups)."""
    slicers = {id(g.slicer): g.slicer.estimate for g in groups if g.slicer is not None}
    return sum(g.estimate for g in groups) + sum(slicers.values())


def total_held(groups) -> int:
    """The aggregates the groups hold at their peaks.  O(groups)."""
    return sum(g.held for g in groups)


def choose(queries, plan_name: str = "auto", *, rate: float = 1.0) -> list:
    """The groups of the plan ``plan_name`` (``"auto"``, ``"weaveshare"`` or
    ``"triweave"``) for ``queries`` (:class:`mta.multi.Query`); ``rate`` is
    the elements per time unit of ``range=`` queries.  Each group's
    ``estimate`` is its monoid calls per element.  O(C^2) tree pricings per
    shareable set, ``C`` its edge classes (:mod:`mta.multi.weaveshare`)."""
    if plan_name not in PLAN_NAMES:
        raise ValueError(f"planner: plan must be one of {PLAN_NAMES}, got {plan_name!r}")
    rate = check_rate(rate)
    groups = []
    for qs in share(queries):
        if plan_name == "auto":
            groups.extend(_memory.lean(_plan(qs, "candidates", rate), total_estimate, total_held))
        else:
            groups.extend(_plan(qs, plan_name, rate))
    return groups

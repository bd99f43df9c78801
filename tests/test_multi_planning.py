"""What planning costs, and the rate it prices at.

``plan="auto"`` weaves six times over ``C`` edge classes, O(C^2) tree
pricings each; these tests bound the work: each tree is priced once per
technique and shared slicer (the weavings share their pricings), an edge
count past its enumeration stops inclusion-exclusion within
:data:`mta.multi.edge_count.PLAN_UNION_TERMS` steps, and L-Int's landmark
walk covers at most :data:`mta.multi.lint_cost.ENUMERATE_UNITS` units.  The
plan still answers as the brute-force oracle (tests/multi_oracle.py).
``SharedWindows(rate=)`` prices range= queries at that many elements per
time unit: the same windows in another time unit get the same plan.
"""

from __future__ import annotations

import math
import operator
import random

import pytest
from hypothesis import example, given, settings, strategies as st

from mta import Query, SharedWindows
from mta.monoid import Aggregator, CountingMonoid
from mta.multi import cost, edge_count, lint_cost, planner
from tests.multi_oracle import MultiOracle
from tests.oracle import CONCAT
from tests import multi_paths

executor = multi_paths.executor

CONCAT_AGG = Aggregator(CONCAT, operator.itemgetter(1), name="concat")


def _time(raw):
    return raw[0]


def random_queries(n, agg, seed=1, scale=1):
    """The review's dashboard workload: ranges 1..5000, slides 1..1000."""
    rng = random.Random(seed)
    return [Query(f"q{i}", agg, range=rng.randint(1, 5000) * scale, slide=rng.randint(1, 1000) * scale)
            for i in range(n)]


def test_auto_planning_work_is_bounded(monkeypatch):
    """50 random queries (50 edge classes): O(C^2) pricings, each with
    bounded edge-counting and landmark-walk work."""
    counts = {"pricings": 0, "ie": 0, "steps": 0}
    horizons = []
    tree_parts, crt, ie, walk = cost.tree_parts, edge_count._crt, edge_count._inclusion_exclusion, lint_cost._walk

    def counted_tree_parts(*a, **k):
        counts["pricings"] += 1
        return tree_parts(*a, **k)

    def counted_crt(*a):
        counts["steps"] += 1
        return crt(*a)

    def counted_ie(*a):
        counts["ie"] += 1
        return ie(*a)

    def recorded_walk(queries, positions, period, count, w):
        units = period
        for _, s, _ in queries:
            units = units * s // math.gcd(units, s)
        horizons.append(units)
        return walk(queries, positions, period, count, w)

    monkeypatch.setattr(cost, "tree_parts", counted_tree_parts)
    monkeypatch.setattr(edge_count, "_crt", counted_crt)
    monkeypatch.setattr(edge_count, "_inclusion_exclusion", counted_ie)
    monkeypatch.setattr(lint_cost, "_walk", recorded_walk)
    monkeypatch.setattr(edge_count, "_EDGE_CACHE", {})
    monkeypatch.setattr(lint_cost, "_CACHE", {})
    qs = random_queries(50, CONCAT_AGG)
    n_classes = 50
    shared = SharedWindows(qs, time=_time)
    assert counts["pricings"] <= 8 * n_classes ** 2
    assert counts["steps"] <= counts["ie"] * edge_count.PLAN_UNION_TERMS
    assert max(horizons, default=0) <= lint_cost.ENUMERATE_UNITS
    # and the plan answers as the brute force does
    oracle = MultiOracle(qs, time=_time)
    rng = random.Random(2)
    for t in range(0, 6000, 2):
        raw = (t, rng.choice([("a",), ("b",), (), ("c",)]))
        assert shared.push(raw) == oracle.push(raw)
    assert shared.flush() == oracle.flush()


# -- L-Int's landmark walk over a Panes tree ---------------------------------------

def test_lint_estimate_on_panes_whose_period_no_slide_divides():
    """Panes of gcd(range, slide) = 1 over slides 583 and 262: the edges'
    period (1) is no multiple of the slides, the landmark walk's horizon
    must be; the estimate is within 10 % of the counted calls."""
    counting = CountingMonoid(CONCAT)
    agg = Aggregator(counting, operator.itemgetter(1), name="concat")
    qs = [Query("a", agg, range=1101, slide=583), Query("b", agg, range=517, slide=262)]
    shared = SharedWindows(qs, time=_time, plan="panes+lint")
    for t in range(8000):
        if t == 2000:
            counting.reset()
        shared.push((t, ("x",)))
    assert counting.reset() / 6000 == pytest.approx(shared.plan.estimate, rel=0.10)


# -- rate= -----------------------------------------------------------------------------

def _counted_plan(specs, scale, rate, n=3000):
    counting = CountingMonoid(CONCAT)
    agg = Aggregator(counting, operator.itemgetter(1), name="concat")
    qs = [Query(f"q{i}", agg, range=r * scale, slide=s * scale if s else None) for i, (r, s) in enumerate(specs)]
    shared = SharedWindows(qs, time=_time, rate=rate)
    out = []
    for k in range(n):
        out += shared.push((k * scale, (("a",), (), ("b",))[k % 3]))
    shape = sorted((g.partial, g.final, tuple(q.name for q in g.queries)) for g in shared.plan.groups)
    return shape, shared.plan.estimate, counting.reset(), [(r.query, r.value) for r in out]


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.integers(0, 12)), min_size=1, max_size=8))
@example(specs=[(30, 0), (100, 20)])
def test_rate_plans_float_units_as_integer_ones(specs):
    """The same windows in quarter seconds (floats, 4 elements per second,
    told by rate=4) and in integer quarters (1 per unit): the same plan,
    estimate and counted monoid calls, and the same answers; a slide of 0
    stands for a per-element query (one answer and one edge per element,
    a quarter second in the one, a unit in the other)."""
    quarters = _counted_plan(specs, 1, None)
    seconds = _counted_plan(specs, 0.25, 4)
    assert seconds[0] == quarters[0] and seconds[2:] == quarters[2:]
    assert seconds[1] == pytest.approx(quarters[1], rel=1e-9)


def test_rate_is_ignored_by_rows_queries():
    qs = [Query("a", CONCAT_AGG, rows=40, slide=4), Query("b", CONCAT_AGG, rows=12, slide=3)]
    told, untold = SharedWindows(qs, rate=1000), SharedWindows(qs)
    assert repr(told.plan) == repr(untold.plan)


@pytest.mark.parametrize(("rate", "error"), [("10", TypeError), (True, TypeError), (complex(1, 1), TypeError),
                                             (0, ValueError), (-1.5, ValueError), (math.nan, ValueError),
                                             (math.inf, ValueError)])
def test_rate_refused(rate, error):
    """SharedWindows and the planner it calls refuse the same rates (one rule)."""
    with pytest.raises(error, match="rate"):
        SharedWindows([Query("a", CONCAT_AGG, range=3)], time=_time, rate=rate)
    with pytest.raises(error, match="rate"):
        planner.choose([Query("a", CONCAT_AGG, range=3)], rate=rate)

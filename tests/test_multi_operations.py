"""The operations estimate (mta.multi.operations) against what the executor
does: partials closed, windows looked up and Results returned, counted on
SharedWindows' pure-Python trees over whole periods of small workloads, and
monoid calls counted by a CountingMonoid.  The estimate is a rate per
element; the counts over a whole number of the workload's periods must
match it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mta import aggregators as A
from mta.monoid import Aggregator, CountingMonoid
from mta.multi import Query, SharedWindows, compiled, cost, operations
from mta.multi.plan import Group
from mta.multi.shared_slicer import Slicer
from mta.multi.triweave import triweave

from bench import mqo_model


@pytest.fixture(autouse=True)
def pure_python(monkeypatch):
    """The trees' own counters (final.hi) are the pure-Python path's."""
    monkeypatch.setattr(compiled, "USE", False)


def measure(specs, plan, shared: bool, periods: int = 3) -> dict:
    """Per element over ``periods`` whole periods (the slides' LCM) after a
    warm-up of the longest window: Results returned, windows looked up
    (Results of each spec's first query), partials the trees closed,
    fragments a shared slicer closed, monoid calls."""
    counting = CountingMonoid(A.SUM.monoid)
    agg = Aggregator(counting, A.SUM.lift, A.SUM.lower, name="sum")
    qs = [Query(f"q{i}", agg, rows=r, slide=s) for i, (r, s) in enumerate(specs)]
    if isinstance(plan, str):
        sw = SharedWindows(qs, plan=plan)
    else:
        slicer = Slicer(plan[0][1]) if shared else None
        sw = SharedWindows(qs, plan=[Group([qs[i] for i in members], partial, final, None, slicer)
                                     for members, partial, final in plan])
    assert sw.compiled_why_not  # the counters below are the pure-Python trees'
    assert bool(sw._slicers) == shared
    period = math.lcm(*(s for _, s in specs))
    warm = max(r for r, _ in specs) + 2 * max(s for _, s in specs)
    warm += -warm % period  # start on a period's boundary
    n = period * max(periods, -(-64 // period))
    rng = random.Random(7)
    for _ in range(warm):
        sw.push(rng.random())
    fragments = [0]
    for sl in sw._slicers:
        first = sl.trees[0]
        add = first.add

        def counted(key, v, add=add):
            fragments[0] += 1
            add(key, v)

        first.add = counted
    firsts = {s.members[0][1] for s in sw._schedule.specs}
    closed = sum(ex.final.hi for ex in sw._executors)
    counting.reset()
    results = lookups = 0
    for _ in range(n):
        out = sw.push(rng.random())
        results += len(out)
        lookups += sum(1 for r in out if r.query in firsts)
    partials = sum(ex.final.hi for ex in sw._executors) - closed + fragments[0]
    return {"results": results / n, "lookups": lookups / n, "partials": partials / n, "calls": counting.calls / n}


def check(specs, groups, plan, shared: bool = False, calls: bool = True) -> None:
    est = operations.counts(groups, shared_slicing=shared)
    got = measure(specs, plan, shared)
    assert est.results == pytest.approx(got["results"], rel=1e-9)
    assert est.lookups == pytest.approx(got["lookups"], rel=1e-9)
    assert est.partials == pytest.approx(got["partials"], rel=1e-9)
    if calls:  # the calls' estimate (mta.multi.cost) is tested on its own in test_multi_cost
        assert est.calls == pytest.approx(got["calls"], rel=0.25)
    # the operations estimate is these counts weighted, plus one push
    w = operations.Weights(2.0, 3.0, 5.0, 7.0)
    assert operations.operations(groups, w, shared_slicing=shared) == pytest.approx(
        est.calls + 2.0 + 3.0 * est.partials + 5.0 * est.lookups + 7.0 * est.results)


SPECS = [(6, 2), (8, 4), (8, 4), (5, 3), (12, 6)]


@pytest.mark.parametrize("partial", ["panes", "pairs", "cutty"])
@pytest.mark.parametrize("final", ["naive", "bint", "rint", "flatfit", "slickdeque-inv"])
def test_one_tree_counts_answers_and_partials(partial, final):
    check(SPECS, [(SPECS, partial, final)], f"{partial}+{final}")


def test_two_trees_count_their_partials_apart():
    plan = [([0, 1, 2], "pairs", "naive"), ([3, 4], "cutty", "bint")]
    groups = [([SPECS[i] for i in m], p, f) for m, p, f in plan]
    check(SPECS, groups, plan)


def test_triweave_shared_slicer_fragments_are_counted():
    specs = [(12, 4), (9, 3), (10, 5), (7, 2)]
    partial, trees, _ = triweave(specs, ("naive",), ("cutty",))
    plan = [(list(t.members), t.partial, t.final) for t in trees]
    if len(plan) == 1:  # make the shared level exist: one tree per query
        plan = [([i], partial, "naive") for i in range(len(specs))]
    groups = [([specs[i] for i in m], p, f) for m, p, f in plan]
    check(specs, groups, plan, shared=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(1, 6)), min_size=1, max_size=5),
       st.sampled_from(["panes", "pairs", "cutty"]), st.sampled_from(["naive", "bint", "flatfat", "lint"]))
def test_counts_match_the_executor_on_random_workloads(specs, partial, final):
    check(specs, [(specs, partial, final)], f"{partial}+{final}", calls=False)


def test_separate_queries_hold_every_element():
    c = operations.counts([([(4, 2)], "none", cost.SEPARATE), ([(3, 1)], "none", cost.SEPARATE)])
    assert (c.partials, c.lookups, c.results) == (2.0, 1.5, 1.5)


def test_unit_weights_count_every_operation_once():
    c = operations.counts([(SPECS, "cutty", "rint")])
    assert operations.operations([(SPECS, "cutty", "rint")]) == pytest.approx(
        c.calls + 1 + c.partials + c.lookups + c.results)


def test_solve_recovers_known_times():
    rng = random.Random(3)
    x = [rng.uniform(0.1, 10) for _ in range(5)]
    rows = [[rng.uniform(0, 5) for _ in range(5)] for _ in range(5)]
    times = [sum(a * b for a, b in zip(r, x)) for r in rows]
    assert operations.solve(rows, times) == pytest.approx(x, rel=1e-6)


def test_solve_refuses_singular_and_ragged_systems():
    with pytest.raises(ValueError, match="singular"):
        operations.solve([[1, 1], [2, 2]], [1, 2])
    with pytest.raises(ValueError, match="n rows of n counts"):
        operations.solve([[1, 1]], [1])


@pytest.mark.parametrize("label, specs, plan", mqo_model.CALIBRATION, ids=[c[0] for c in mqo_model.CALIBRATION])
def test_the_calibration_plans_are_counted_as_they_run(label, specs, plan):
    # bench mqo solves the operations' times from these counts
    partial, final = plan.split("+")
    check(specs, [(specs, partial, final)], plan)


def test_the_calibration_plans_separate_every_kind():
    rows = []
    for _, specs, plan in mqo_model.CALIBRATION:
        partial, final = plan.split("+")
        c = operations.counts([(specs, partial, final)])
        rows.append([1.0, c.calls, c.partials, c.lookups, c.results])
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    times = [sum(a * b for a, b in zip(r, x)) for r in rows]
    assert operations.solve(rows, times) == pytest.approx(x, rel=1e-6)

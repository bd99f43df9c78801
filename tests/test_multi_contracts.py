"""Error contracts of SharedWindows.query and of given plans, and the held
estimate of small windows (the eviction every EVICT_EVERY pushes)."""

from __future__ import annotations

import operator

import pytest

from bench.mqo import held as measured_held
from mta import OperationRefused
from mta import aggregators as A
from mta.monoid import Aggregator
from mta.multi import Group, Plan, Query, SharedWindows
from mta.multi.shared import ArgumentRefused
from tests.multi_oracle import MultiOracle
from tests.oracle import CONCAT
from tests import multi_paths

executor = multi_paths.executor

CONCAT_AGG = Aggregator(CONCAT, operator.itemgetter(1), name="concat")


def _time(raw):
    return raw[0]


@pytest.mark.parametrize("name", [["a"], {"a": 1}, 3, None, ("a",)])
def test_query_refuses_a_name_that_is_not_a_str_before_any_change(name):
    qs = [Query("a", CONCAT_AGG, rows=3), Query("b", CONCAT_AGG, rows=4, slide=2)]
    shared, oracle = SharedWindows(qs), MultiOracle(qs)
    stream = [(None, ("x",)), (None, ()), (None, ("y",))]
    for raw in stream:
        assert shared.push(raw) == oracle.push(raw)
    with pytest.raises(ArgumentRefused, match="query\\(name\\)") as caught:
        shared.query(name)
    assert isinstance(caught.value, OperationRefused) and repr(name) in str(caught.value)
    assert shared.query("a") == ("x", "y")
    for raw in [(None, ("z",)), (None, ("w",))]:
        assert shared.push(raw) == oracle.push(raw)
    assert shared.flush() == oracle.flush()


def _group_plans():
    q = Query("a", CONCAT_AGG, range=3)
    return {
        "str queries": ([Group(["a"], "cutty", "naive")], TypeError, "mta.Query"),
        "tuple in a Plan": (lambda: Plan([("a",)]), TypeError, "Group objects"),
        "text estimate": ([Group([q], "cutty", "naive", estimate="x")], TypeError, "estimate"),
        "negative held": ([Group([q], "cutty", "naive", held=-1)], TypeError, "held"),
        "no queries": ([Group([], "cutty", "naive")], ValueError, "at least one query"),
        "partial not a str": ([Group([q], 3, "naive")], TypeError, "partial"),
    }, q


@pytest.mark.parametrize("case", list(_group_plans()[0]))
def test_malformed_given_plans_are_refused_with_a_message(case):
    plans, q = _group_plans()
    plan, error, message = plans[case]
    with pytest.raises(error, match=message):
        SharedWindows([q], time=_time, plan=plan() if callable(plan) else plan)


def test_a_plan_whose_groups_changed_is_checked_again():
    q = Query("a", CONCAT_AGG, range=3)
    plan = Plan([Group([q], "cutty", "naive")])
    plan.groups.append(("a",))
    with pytest.raises(TypeError, match="Group objects"):
        SharedWindows([q], time=_time, plan=plan)


SMALL = {  # the review's small windows, and a large one
    "range 3 slide 10; range 5 slide 17": [Query("a", A.MAX, range=3, slide=10), Query("b", A.MAX, range=5, slide=17)],
    "rows 4 tumbling": [Query("a", A.MAX, rows=4, slide=4)],
    "range 8 per element": [Query("a", A.MAX, range=8)],
    "range 1000 slide 10": [Query("a", A.MAX, range=1000, slide=10)],
}


@pytest.mark.parametrize("plan", ["auto", "cutty+naive", "pairs+bint"])
@pytest.mark.parametrize("case", list(SMALL))
def test_held_estimate_of_small_windows(case, plan):
    """Within 25 % of the most the running plan holds, or one partial
    (a tumbling window of 4 rows holds 3 closed partials at most; the
    estimate says 4)."""
    qs = SMALL[case]
    shared = SharedWindows(qs, time=None if qs[0].by_rows else float, plan=plan)
    peak = 0
    for t in range(3000):
        shared.push(t)
        if t > 1100:
            peak = max(peak, measured_held(shared))
    assert abs(shared.plan.held - peak) <= max(0.25 * peak, 1), (peak, shared.plan.held)

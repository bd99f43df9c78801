"""Exact and approximate inverses (``Monoid.exact_inverse``).

A float sum's inverse rounds: a running aggregate that subtracts what leaves
the window stays NaN for good after one inf and cancels small windows after
a large value has left.  The ready float-valued monoids declare it, the
planners then leave R-Int and SlickDeque (Inv) out for them, and every plan
they pick answers as a brute-force oracle over exact Fractions.  Exact
inverses keep those finals; named, they still run.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import Aggregator, CountingMonoid, Monoid, Query, SharedWindows, product
from mta import aggregators as A
from mta.multi.cost import INVERTIBLE_FINALS
from tests import multi_paths
from tests.multi_oracle import MultiOracle
from tests.strategies import sane_settings
from tests.strategies import shared_operations as operations

#: every test here runs with the compiled core in use where it applies, then without
executor = multi_paths.executor

EXACT = {"count", "collect", "countmin"}
APPROXIMATE = {"sum", "mean", "geomean", "variance", "stddev", "var_pop", "stddev_pop"}
INT_SUM = Aggregator(Monoid(operator.add, 0, name="int_sum", inverse=operator.sub, commutative=True), name="int_sum")


def _time(raw):
    return raw[0]


def _value(raw):
    return raw[1]


# -- the declarations ----------------------------------------------------------

def test_ready_monoids_declare_whether_their_inverse_is_exact():
    for name, agg in A.BY_NAME.items():
        m = agg.monoid
        assert m.exact_inverse == (name in EXACT), name
        assert (m.inverse is not None) == (name in EXACT | APPROXIMATE), name


#: a front and a rest for each approximate monoid: removing the large front
#: through the inverse leaves the small rest wrong
WITNESSES = {name: ([1e17], [1.0, 2.0]) for name in APPROXIMATE} | {"geomean": ([1e300], [2.0, 3.0])}


@pytest.mark.parametrize("name", sorted(APPROXIMATE))
def test_approximate_declarations_are_truthful(name):
    agg = A.BY_NAME[name]
    m = agg.monoid
    assert m.inverse is not None and not m.exact_inverse
    front, rest = (m.fold(map(agg.lift, xs)) for xs in WITNESSES[name])
    assert agg.lower(m.inverse(m.combine(front, rest), front)) != agg.lower(rest)


def test_products_and_counting_monoids_carry_the_declaration():
    assert product(A.COUNT, A.COUNT).monoid.exact_inverse
    assert product(A.COUNT, A.COLLECT).monoid.exact_inverse
    assert not product(A.COUNT, A.SUM).monoid.exact_inverse  # one approximate part
    assert not product(A.COUNT, A.MAX).monoid.exact_inverse  # no inverse at all
    assert CountingMonoid(A.COUNT.monoid).exact_inverse
    assert not CountingMonoid(A.MEAN.monoid).exact_inverse


def test_a_users_inverse_is_exact_unless_declared_otherwise():
    assert INT_SUM.monoid.exact_inverse
    approx = Monoid(operator.add, 0.0, inverse=operator.sub, exact_inverse=False)
    assert approx.inverse is operator.sub and not approx.exact_inverse
    assert not Monoid(operator.add, 0).exact_inverse  # nothing to be exact
    with pytest.raises(TypeError, match="exact_inverse must be True or False"):
        Monoid(operator.add, 0, inverse=operator.sub, exact_inverse="yes")


# -- what the planners pick ----------------------------------------------------

def _finals(agg, plan="auto"):
    qs = [Query("last10", agg, range=10), Query("every5", agg, range=10, slide=5)]
    return [g.final for g in SharedWindows(qs, time=_time, plan=plan).plan.groups]


@pytest.mark.parametrize("plan", ["auto", "weaveshare", "triweave", "panes", "cutty"])
def test_planners_subtract_only_where_the_inverse_is_exact(plan):
    """The same queries: an exact sum keeps the subtracting finals (they are
    the cheapest here), a float-valued one never gets them."""
    for agg in (INT_SUM, A.COUNT):
        assert set(_finals(agg, plan)) <= set(INVERTIBLE_FINALS), (agg, plan)
    for agg in (A.SUM, A.MEAN, A.GEOMEAN, A.VARIANCE, product(A.SUM, A.COUNT)):
        assert not set(_finals(agg, plan)) & set(INVERTIBLE_FINALS), (agg, plan)


def test_named_subtracting_finals_run_and_auto_answers_right():
    """Ten 1.0 after a 1e17 (or an inf) that has left the window sum to
    10.0: auto's choice says so; a subtracting final, named, still runs
    (with the errors docs/multi-query.md states: 1.0, or NaN)."""
    for big in (1e17, math.inf):
        stream = [(0, big)] + [(t, 1.0) for t in range(1, 40)]
        for plan in ("cutty+rint", "cutty+slickdeque-inv", "auto"):
            agg = A.SUM.on(_value)
            qs = [Query("last10", agg, range=10), Query("every5", agg, range=10, slide=5)]
            shared = SharedWindows(qs, time=_time, plan=plan)
            last = [r.value for raw in stream for r in shared.push(raw) if r.query == "last10"][-1]
            if plan == "auto":
                assert last == 10.0, (big, shared.plan)
            else:
                assert [g.final for g in shared.plan.groups] == [plan.split("+")[1]]


def test_the_slickdeque_alias_takes_inv_only_for_an_exact_inverse():
    qs = [Query("s", A.SUM, range=4, slide=2)]
    with pytest.raises(ValueError, match="name 'slickdeque-inv' to run it anyway"):
        SharedWindows(qs, time=_time, plan="cutty+slickdeque")
    assert _finals(INT_SUM, "cutty+slickdeque") == ["slickdeque-inv"]
    assert _finals(A.SUM, "cutty+slickdeque-inv") == ["slickdeque-inv"]
    assert _finals(A.MAX, "cutty+slickdeque") == ["slickdeque-noninv"]


# -- the Results against exact arithmetic --------------------------------------

def _exact_sum(values):
    """The window's sum over exact Fractions, IEEE's inf and NaN rules."""
    if any(math.isnan(v) for v in values) or {math.inf, -math.inf} <= set(values):
        return math.nan
    for v in values:
        if math.isinf(v):
            return v
    return float(sum(map(Fraction, values)))


def _exact_mean(values):
    return _exact_sum(values) / len(values) if values else None


ORACLES = {"sum": (A.SUM, _exact_sum), "mean": (A.MEAN, _exact_mean)}

#: small integers (exact in any grouping), the poisons, and large values
#: that cancel a running aggregate's small ones once they have left
floats = st.one_of(st.integers(-3, 3).map(float), st.sampled_from([math.inf, -math.inf, math.nan, 1e17, 1e300]))


@st.composite
def query_sets(draw, agg, max_queries=4):
    queries = []
    for i in range(draw(st.integers(1, max_queries))):
        width = draw(st.integers(1, 9))
        kw = {"rows": width} if draw(st.booleans()) else {"range": width}
        slide = draw(st.one_of(st.none(), st.integers(1, 7), st.just(width)))
        queries.append(Query(f"q{i}", agg, slide=slide, lag=draw(st.sampled_from([0, 0, 1, 3])), **kw))
    return queries


def _same(got, want) -> bool:
    if want is None or got is None:
        return got is want
    if math.isnan(want):
        return math.isnan(got)
    # only the grouping of a window's values differs between plans and the oracle
    return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)


def _check(got, want, where) -> None:
    assert [(r.query, r.end) for r in got] == [(r.query, r.end) for r in want], where
    for g, w in zip(got, want):
        assert _same(g.value, w.value), (where, g, w)


@pytest.mark.parametrize("plan", ["auto", "weaveshare", "triweave", "cutty"])
@pytest.mark.parametrize("name", sorted(ORACLES))
@sane_settings(60)
@given(data=st.data())
def test_float_sums_match_exact_arithmetic(name, plan, data):
    """Whatever a planner picks for a float sum answers every window as the
    exact sum of its values: an inf that has left no longer counts, nor
    does a 1e17 that has left."""
    agg, lower = ORACLES[name]
    agg = agg.on(_value)
    queries = data.draw(query_sets(agg), label="queries")
    exact = Aggregator(A.COLLECT.monoid, lambda raw: (raw[1],), lower)
    oracle = MultiOracle([Query(q.name, exact, slide=q.slide, lag=q.lag,
                                **({"rows": q.rows} if q.by_rows else {"range": q.range})) for q in queries],
                         time=_time)
    shared = SharedWindows(queries, time=_time, plan=plan)
    t = 0
    for step, op in enumerate(data.draw(operations(floats, max_ops=40), label="ops")):
        where = f"step {step} {op!r}"
        if op[0] == "push":
            t += op[1]
            _check(shared.push((t, op[2])), oracle.push((t, op[2])), where)
        elif op[0] == "query":
            q = queries[op[1] % len(queries)].name
            assert _same(shared.query(q), oracle.query(q)), where
        else:
            until = None if op[1] is None else t + op[1]
            _check(shared.flush(until), oracle.flush(until), where)
    _check(shared.flush(), oracle.flush(), "final flush")

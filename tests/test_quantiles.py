"""Holistic quantiles: B-INT-QNT (exact, mta.multi.quantiles) through
SharedWindows and the log-bucket sketch (mta.sketches), against brute-force
sorted windows.  The quantile monoids are commutative (a bag of elements),
so there is no non-commutative variant to run; the exact one has no
element equal to its identity (the empty bag)."""

from __future__ import annotations

import math
import operator
import random
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mta.amortized_mta import AmortizedMTA
from mta.baselines.subtract_on_evict import SubtractOnEvict
from mta import CountingMonoid
from mta.multi import Query, Result, SharedWindows
from mta.multi.quantiles import SORTED_RUNS, median, quantile, select_rank
from mta.sketches import QUANTILES, approx_median, approx_quantile, quantile_sketch
from stores import open_store
from tests.multi_oracle import MultiOracle
from tests.strategies import sane_settings
from tests.test_multi_queries import Spec, operations, query_sets, run


def nearest_rank(values, phi):
    """The element of rank ``max(1, ceil(phi * n))``, ``phi`` read as the
    decimal it prints as (0.14 is 14/100, not the double's binary value)."""
    s = sorted(values)
    return s[max(1, math.ceil(Fraction(str(phi)) * len(s))) - 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-20, 20), min_size=0, max_size=12), min_size=1, max_size=8), st.data())
def test_select_rank_matches_sorting(runs, data):
    runs = [sorted(r) for r in runs]
    everything = sorted(x for r in runs for x in r)
    if not everything:
        return
    rank = data.draw(st.integers(1, len(everything)))
    assert select_rank(runs, rank) == everything[rank - 1]


# -- B-INT-QNT through SharedWindows ------------------------------------------

_value = operator.itemgetter(1)


def _time(raw):
    return raw[0]


# quantiles of one field share a tree whatever their phi (one lift)
QNT_AGGS = [median(on=_value), quantile(0.0, on=_value), quantile(0.9, on=_value), quantile(1.0, on=_value),
            quantile(0.25, on=_value)]
# few distinct values: ties everywhere; 0 is not special (the identity is the empty bag)
QNT_SPEC = Spec("quantile", QNT_AGGS, st.integers(-3, 3))


@pytest.mark.parametrize("plan", ["panes+bint", "pairs+bint", "cutty+bint", "auto", "weaveshare", "triweave",
                                  "separate"])
@sane_settings(60)
@given(data=st.data())
def test_exact_quantiles_against_oracle(plan, data):
    """Random quantile query sets (time and rows, per-element and periodic,
    historical, equal times, bursts, empty periods) against the brute-force
    oracle, which sorts every window from scratch."""
    queries = data.draw(query_sets(QNT_AGGS), label="queries")
    ops = data.draw(operations(QNT_SPEC.values), label="ops")
    run(queries, ops, QNT_SPEC, plan)


@pytest.mark.parametrize("plan", ["cutty+bint", "panes+bint"])
@sane_settings(30)
@given(data=st.data())
def test_exact_quantiles_on_a_store(plan, data):
    """B-INT-QNT's sorted arrays in a store's level queues, tiny buffers."""
    queries = data.draw(query_sets(QNT_AGGS), label="queries")
    ops = data.draw(operations(QNT_SPEC.values, max_ops=40), label="ops")
    run(queries, ops, QNT_SPEC, plan, store=open_store("memory://"), window_id="q", buffer_size=1, cache_size=1)


def test_quantiles_share_one_bint_tree_and_lookups_never_merge():
    """Five quantiles of one field, any phi: one tree, B-Int.  Its sorted
    arrays are built by merges at append (on average one per partial, as
    B-Int's update); a lookup merges nothing: it selects over the O(log W)
    runs of the cover (B-INT-QNT's LOOKUP)."""
    m = CountingMonoid(SORTED_RUNS)
    aggs = [quantile(phi, on=_value, monoid=m) for phi in (0.1, 0.5, 0.9, 0.99, 1.0)]
    qs = [Query(f"q{i}", a, rows=(i + 1) * 100, slide=10) for i, a in enumerate(aggs)]
    qs.append(Query("med", median(on=_value, monoid=m), rows=64))
    assert all(g.final == "bint" for g in SharedWindows(qs, plan="auto").plan.groups)
    shared = SharedWindows(qs, plan="cutty+bint")
    assert len(shared.plan.groups) == 1
    # the oracle folds with an uncounted copy of each aggregator
    oracle = MultiOracle([Query(q.name, quantile(q.aggregator.phi, on=_value), rows=q.rows, slide=q.slide)
                          for q in qs])
    rng = random.Random(3)
    values = [rng.randrange(1000) for _ in range(3000)]
    for i, x in enumerate(values):
        assert shared.push((None, x)) == oracle.push((None, x))
    appended = m.reset()
    assert appended <= 2 * len(values)  # the open partial's merge plus ~one base interval per partial
    for q in qs:
        assert shared.query(q.name) == oracle.query(q.name)
    assert m.calls == 0


def test_exact_quantile_arguments_and_refusals():
    with pytest.raises(ValueError, match="phi"):
        quantile(1.5)
    with pytest.raises(ValueError, match="phi"):
        quantile(True)
    with pytest.raises(TypeError, match="on="):
        quantile(0.5, on=3)
    qs = [Query("m", median(), rows=5)]
    with pytest.raises(ValueError, match="B-Int only"):
        SharedWindows(qs, plan="cutty+naive")
    with pytest.raises(ValueError, match="B-Int only"):
        SharedWindows(qs, plan=("pairs", "flatfat"))
    shared = SharedWindows(qs, plan="pairs")
    assert shared.plan.groups[0].final == "bint"
    shared.push(2.0)
    with pytest.raises(ValueError, match="NaN"):
        shared.push(float("nan"))
    assert len(shared) == 1 and shared.push(1.0) == [Result("m", 1, 1.0)]  # the refusal changed nothing
    # an empty window: None
    assert SharedWindows(qs).query("m") is None


def test_exact_quantile_in_an_engine():
    """Outside SharedWindows the aggregator is an ordinary monoid: exact,
    each combine a merge."""
    agg = quantile(0.75)
    eng = AmortizedMTA(agg.monoid)
    rng = random.Random(5)
    values = [rng.randrange(50) for _ in range(300)]
    for i, x in enumerate(values):
        eng.insert(agg.lift(x))
        if i >= 20:
            eng.evict()
        assert agg.lower(eng.query()) == nearest_rank(values[max(0, i - 19):i + 1], 0.75)


# -- the sketch -------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=60), st.floats(0, 1), st.sampled_from([0.001, 0.01, 0.05, 0.2]))
@example(values=[float(i) for i in range(1, 101)], phi=0.14, alpha=0.001)  # 0.14 * 100 is 14.000000000000002
def test_sketch_error_bound(values, phi, alpha):
    agg = quantile_sketch(alpha)
    sk = agg.aggregate(values)
    exact = nearest_rank(values, phi)
    assert sk.count == len(values)
    assert abs(sk.quantile(phi) - exact) <= alpha * abs(exact) * (1 + 1e-9) + 1e-300


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(finite, max_size=8), min_size=3, max_size=3))
def test_sketch_monoid_laws(parts):
    agg = QUANTILES
    m = agg.monoid
    a, b, c = (m.fold(agg.lift(x) for x in p) for p in parts)
    assert m.combine(m.combine(a, b), c) == m.combine(a, m.combine(b, c))
    assert m.combine(a, b) == m.combine(b, a)
    assert m.combine(m.identity, a) == a == m.combine(a, m.identity)
    assert m.inverse(m.combine(a, b), a) == b


def test_sketch_in_engines_and_shared_windows():
    rng = random.Random(7)
    values = [rng.lognormvariate(0, 2) * rng.choice([-1, 1]) for _ in range(400)]
    for engine in (AmortizedMTA, SubtractOnEvict):
        eng = engine(QUANTILES.monoid)
        for i, x in enumerate(values):
            eng.insert(QUANTILES.lift(x))
            if i >= 50:
                eng.evict()
            got = QUANTILES.lower(eng.query()).median
            exact = nearest_rank(values[max(0, i - 49):i + 1], 0.5)
            assert abs(got - exact) <= 0.01 * abs(exact) * (1 + 1e-9)
    qs = [Query("a", QUANTILES, rows=64, slide=8), Query("b", QUANTILES, rows=16, slide=4)]
    sw = SharedWindows(qs, plan="auto")
    for i, x in enumerate(values):
        for r in sw.push(x):
            rows = 64 if r.query == "a" else 16
            exact = nearest_rank(values[max(0, r.end + 1 - rows):r.end + 1], 0.9)
            assert abs(r.value.quantile(0.9) - exact) <= 0.01 * abs(exact) * (1 + 1e-9)


# -- approx_quantile: the sketch as a ready aggregator -------------------------

APPROX_PHIS = (0.0, 0.3, 0.5, 0.9, 1.0)


def _within(got, exact, alpha) -> bool:
    if exact is None:
        return got is None
    return abs(got - exact) <= alpha * abs(exact) * (1 + 1e-9)


def _compare(got: list, want: list, alpha: float, where: str) -> None:
    assert [(r.query, r.end) for r in got] == [(r.query, r.end) for r in want], where
    for g, w in zip(got, want):
        assert _within(g.value, w.value, alpha), (where, g, w)


@pytest.mark.parametrize("plan", ["auto", "cutty+slickdeque-inv", "pairs+rint", "panes+bint", "separate"])
@pytest.mark.parametrize("alpha", [0.01, 0.2])
@sane_settings(40)
@given(data=st.data())
def test_approx_quantile_bound_against_exact(plan, alpha, data):
    """approx_quantile queries (any phi, one shared tree) through
    SharedWindows, each result within relative error alpha of the exact
    nearest-rank quantile the oracle sorts out of the same window; values
    include 0, negatives and ties."""
    aggs = [approx_quantile(phi, alpha, on=_value) for phi in APPROX_PHIS]
    queries = data.draw(query_sets(aggs), label="queries")
    exact = [Query(q.name, quantile(APPROX_PHIS[aggs.index(q.aggregator)], on=_value),
                   **({"rows": q.rows} if q.by_rows else {"range": q.range}), slide=q.slide, lag=q.lag)
             for q in queries]
    values = st.one_of(st.integers(-50, 50), st.floats(-1e6, 1e6, allow_nan=False))
    ops = data.draw(operations(values), label="ops")
    shared = SharedWindows(queries, time=_time, plan=plan)
    oracle = MultiOracle(exact, time=_time)
    t = 0
    for step, op in enumerate(ops):
        if op[0] == "push":
            t += op[1]
            _compare(shared.push((t, op[2])), oracle.push((t, op[2])), alpha, f"step {step}")
        elif op[0] == "query":
            name = queries[op[1] % len(queries)].name
            assert _within(shared.query(name), oracle.query(name), alpha), step
        else:
            until = None if op[1] is None else t + op[1]
            _compare(shared.flush(until), oracle.flush(until), alpha, f"step {step}")
    _compare(shared.flush(), oracle.flush(), alpha, "final flush")


def test_approx_quantiles_share_a_tree_and_arguments():
    qs = [Query(f"p{phi}", approx_quantile(phi, on=_value), rows=100, slide=10) for phi in (0.5, 0.9, 0.99)]
    qs.append(Query("m", approx_median(on=_value), rows=50, slide=10))
    assert len(SharedWindows(qs, plan="cutty+slickdeque-inv").plan.groups) == 1
    assert approx_quantile(0.5).monoid is approx_median().monoid is quantile_sketch().monoid
    assert approx_quantile(0.5, 0.05).monoid is not approx_quantile(0.5).monoid  # another grid
    assert approx_quantile(0.5).aggregate([]) is None
    assert approx_quantile(0.5).aggregate([3, 0, -7]) == 0.0  # zero is exact
    assert abs(approx_quantile(1.0).aggregate([3, 0, -7]) - 3) <= 0.01 * 3
    for bad in (-0.1, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match="phi"):
            approx_quantile(bad)
    for bad in (0, 1, 2, -0.5, True):
        with pytest.raises(ValueError, match="alpha"):
            approx_quantile(0.5, bad)
    with pytest.raises(TypeError, match="on="):
        approx_quantile(0.5, on="x")
    with pytest.raises(ValueError, match="NaN"):
        approx_quantile(0.5).lift(float("nan"))


@sane_settings(40)
@given(data=st.data())
def test_exact_quantiles_behind_a_shared_slicer(data):
    """B-INT-QNT trees fed fragments by TriWeave's shared slicer (the open
    fragment is one more sorted run of the lookup)."""
    from tests.test_multi_queries import shared_slicer_plans

    queries = data.draw(query_sets(QNT_AGGS, max_queries=6), label="queries")
    groups = data.draw(shared_slicer_plans(queries), label="groups")
    ops = data.draw(operations(QNT_SPEC.values, max_ops=40), label="ops")
    run(queries, ops, QNT_SPEC, groups)

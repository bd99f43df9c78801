"""The compiled execution of shared plans (mta/_native_multi.h via
mta.multi.compiled) against the brute-force oracle and against the
pure-Python path it mirrors.

The compiled core runs rows= queries with a slide and no lag over ready
monoids; here every such plan (Panes, Pairs, Cutty with the naive final,
R-Int, FlatFIT, SlickDeque (Non-Inv)) replays random streams with
``flush(until)``, ``flush()`` and ``query(name)`` interleaved, on the
compiled core, on the pure-Python trees and on the oracle: the results are
the oracle's and, type for type, the pure path's.  The monoids: sum over
ints (invertible, 0 the identity), max and min with None (the selective
identity) and equal values of different types (ties visible), tuple
concatenation with ``operator.add`` (non-commutative, () the identity) and
the moments of variance (compared with the pure path only: float rounding).
Then the refusals: what the core does not run goes to the pure path, and
user code raising leaves the object intact or failed.
"""

from __future__ import annotations

import gc
import operator
import sys
import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import Aggregator, CountingMonoid, EngineFailedError, Monoid, Query, SharedWindows
from mta import aggregators as A
from mta.multi import compiled
from tests.multi_oracle import MultiOracle
from tests.strategies import sane_settings, shared_operations

needs_core = pytest.mark.skipif(compiled._core_type() is None,
                                reason=f"compiled core not in use: {compiled.why_not([], [], [])}")
pytestmark = needs_core

_value = operator.itemgetter(1)
TUPLES = Monoid(operator.add, (), name="tuple-concat")

_scalars = st.sampled_from([0, 0.0, 1, 1.0, -1, 2, 2.5, -3])
#: name -> (aggregator, values, finals, compare with the oracle)
CASES = {
    "sum": (Aggregator(A.SUM.monoid, _value), st.integers(-3, 3), ["naive", "rint", "flatfit"], True),
    "max": (Aggregator(A.MAX.monoid, _value), st.one_of(st.none(), _scalars),
            ["naive", "flatfit", "slickdeque-noninv"], True),
    "min": (Aggregator(A.MIN.monoid, _value), st.one_of(st.none(), _scalars),
            ["naive", "flatfit", "slickdeque-noninv"], True),
    "tuples": (Aggregator(TUPLES, _value), st.lists(st.integers(0, 9), max_size=2).map(tuple),
               ["naive", "flatfit"], True),
    "variance": (A.variance().on(_value), st.integers(-5, 5), ["naive", "rint", "flatfit"], False),
}


def _params():
    return [pytest.param(name, f"{partial}+{final}", id=f"{name}-{partial}+{final}")
            for name, (_, _, finals, _) in CASES.items()
            for partial in ("panes", "pairs", "cutty") for final in finals]


@st.composite
def rows_queries(draw, agg, max_queries: int = 5):
    """rows= queries with a slide and no lag; twins (equal windows) likely."""
    n = draw(st.integers(1, max_queries))
    out = []
    for i in range(n):
        width = draw(st.integers(1, 9))
        slide = draw(st.one_of(st.integers(1, 7), st.just(width)))
        out.append(Query(f"q{i}", agg, rows=width, slide=slide))
    return out


def _typed(results):
    return [repr(r) for r in results]  # 1 and 1.0 differ


def replay(queries, ops, plan, check_oracle: bool) -> None:
    """The ops on the compiled core, the pure path and the oracle."""
    fast = SharedWindows(queries, plan=plan)
    assert fast._core is not None, fast.compiled_why_not
    compiled.USE = False
    try:
        pure = SharedWindows(queries, plan=plan)
    finally:
        compiled.USE = True
    assert pure._core is None
    oracle = MultiOracle(queries) if check_oracle else None
    for step, op in enumerate(ops):
        where = f"step {step} {op!r}"
        if op[0] == "push":
            raw = (step, op[1])
            got, want = fast.push(raw), pure.push(raw)
            expected = oracle and oracle.push(raw)
        elif op[0] == "query":
            name = queries[op[1] % len(queries)].name
            got, want, expected = [fast.query(name)], [pure.query(name)], oracle and [oracle.query(name)]
        else:
            until = None if op[1] is None else len(pure) + op[1]
            got, want, expected = fast.flush(until), pure.flush(until), oracle and oracle.flush(until)
        assert _typed(got) == _typed(want), where
        if oracle:
            assert got == expected, where
            assert fast.late == oracle.late, where
        assert len(fast) == len(pure)
        assert fast.late == pure.late, where
    assert _typed(fast.flush()) == _typed(pure.flush())
    for q in queries:
        assert repr(fast.query(q.name)) == repr(pure.query(q.name)), q.name
    held = [len(ex.final) for ex in fast._executors]
    assert held == [len(ex.final) for ex in pure._executors]


@pytest.mark.parametrize(("case", "plan"), _params())
@sane_settings(40)
@given(data=st.data())
def test_compiled_against_oracle_and_pure_path(case, plan, data):
    agg, values, _, check_oracle = CASES[case]
    queries = data.draw(rows_queries(agg), label="queries")
    ops = data.draw(shared_operations(values, max_ops=60, timed=False), label="ops")
    replay(queries, ops, plan, check_oracle)


@pytest.mark.parametrize("plan", ["panes", "cutty+rint", "pairs+naive", "cutty+flatfit", "panes+slickdeque-noninv"])
def test_long_streams_evict_and_agree(plan):
    """Thousands of pushes (evictions, dropped prefixes) on the MQO
    workload's shape: compiled and pure results equal, type for type."""
    import random

    rng = random.Random(7)
    slides = [1, 2, 4, 5, 8, 10, 20, 25, 40, 50]
    agg = Aggregator(A.MAX.monoid if plan.endswith("noninv") else A.SUM.monoid, _value)
    queries = [Query(f"q{i}", agg, rows=s * rng.randint(1, 6), slide=s) for i, s in
               enumerate(rng.choice(slides) for _ in range(20))]
    ops = [("push", rng.randint(-9, 9)) for _ in range(3000)]
    ops[1200:1200] = [("flush", 5), ("query", 3)]
    replay(queries, ops, plan, check_oracle=False)


def test_what_the_core_does_not_run_goes_to_the_pure_path():
    rows = [Query("a", A.SUM, rows=4, slide=2), Query("b", A.SUM, rows=6, slide=3)]
    assert SharedWindows(rows, plan="cutty+rint")._core is not None
    counting = Aggregator(CountingMonoid(A.SUM.monoid), name="sum")
    cases = {
        "no native combine": ([Query("a", counting, rows=4, slide=2)], {}, "cutty+rint"),
        "not a rows= query": ([Query("a", A.SUM, range=4, slide=2)], {"time": lambda r: r}, "cutty+rint"),
        "no lag": ([Query("a", A.SUM, rows=4, slide=2, lag=1)], {}, "pairs+rint"),
        "with a slide": ([Query("a", A.SUM, rows=4)], {}, "cutty+rint"),
        "not compiled": (rows, {}, "cutty+bint"),
        "own engine": (rows, {}, "separate"),
        "lift their values": ([rows[0], Query("c", A.SUM.on(lambda r: -r), rows=4, slide=2)], {}, "cutty+rint"),
    }
    for why, (queries, kw, plan) in cases.items():
        sw = SharedWindows(queries, plan=plan, **kw)
        assert sw._core is None and why in sw.compiled_why_not, (why, sw.compiled_why_not)
    compiled.USE = False
    try:
        assert "USE is False" in SharedWindows(rows, plan="cutty+rint").compiled_why_not
    finally:
        compiled.USE = True


def test_counting_monoid_counts_the_same_plan():
    """The counting run of a benchmark takes the pure path; its count is
    what the plan does (one combine per element and per closed partial's
    prefix here), whichever path the timed run takes."""
    counting = CountingMonoid(A.SUM.monoid)
    qs = [Query("a", Aggregator(counting), rows=4, slide=2)]
    sw = SharedWindows(qs, plan="panes+naive")
    assert sw._core is None
    for v in range(40):
        sw.push(v)
    assert counting.calls > 0


def test_lift_raising_leaves_it_intact_lower_raising_fails_it():
    def lift(raw):
        if raw == "bad":
            raise ValueError("bad element")
        return raw

    calls = []

    def lower(v):
        calls.append(v)
        if len(calls) == 5:
            raise RuntimeError("lower failed")
        return v

    qs = [Query("a", Aggregator(A.SUM.monoid, lift, lower), rows=3, slide=1)]
    sw = SharedWindows(qs, plan="cutty+rint")
    assert sw._core is not None
    assert sw.push(1) == [("a", 0, 1)]
    with pytest.raises(ValueError, match="bad element"):
        sw.push("bad")
    assert len(sw) == 1 and sw.push(2) == [("a", 1, 3)]  # nothing changed
    sw.push(3)
    sw.push(4)
    with pytest.raises(RuntimeError, match="lower failed"):
        sw.push(5)
    with pytest.raises(EngineFailedError, match="lower failed"):
        sw.push(6)
    with pytest.raises(EngineFailedError):
        sw.flush()


def test_combine_raising_fails_it():
    sw = SharedWindows([Query("a", A.SUM, rows=3, slide=1)], plan="cutty+rint")
    sw.push(1)
    with pytest.raises(TypeError):
        sw.push("x")
    with pytest.raises(EngineFailedError):
        sw.query("a")


@pytest.mark.parametrize("plan", ["cutty+rint", "panes+flatfit", "pairs+naive", "cutty+slickdeque-noninv"])
def test_references_released(plan):
    """Every value the core held is released when it is dropped."""
    values = [10 ** 30 + i for i in range(400)]  # no cached ints
    before = [sys.getrefcount(v) for v in values]
    agg = A.MAX if plan.endswith("noninv") else A.SUM
    sw = SharedWindows([Query("a", agg, rows=7, slide=3), Query("b", agg, rows=20, slide=5)], plan=plan)
    assert sw._core is not None
    out = [sw.push(v) for v in values]
    out.append(sw.flush())
    ref = weakref.ref(sw)
    del sw, out
    assert ref() is None  # no reference cycle: freed without the collector
    gc.collect()
    assert [sys.getrefcount(v) for v in values] == before


@pytest.mark.parametrize("until", [2.5, 10 ** 30, -4, 0])
def test_flush_until_then_more_pushes(until):
    """A flush far ahead (ends past any push), fractional or behind the
    stream, then more pushes: the same results on both paths."""
    agg = Aggregator(A.SUM.monoid, _value)
    queries = [Query("a", agg, rows=5, slide=2), Query("b", agg, rows=3, slide=3), Query("c", agg, rows=4, slide=4)]
    ops = [("push", v) for v in range(7)] + [("flush", None)] + [("push", v) for v in range(5)]
    replay(queries, ops, "cutty+rint", check_oracle=True)
    fast = SharedWindows(queries, plan="panes+naive")
    compiled.USE = False
    try:
        pure = SharedWindows(queries, plan="panes+naive")
    finally:
        compiled.USE = True
    for sw in (fast, pure):
        for v in range(6):
            sw.push((v, v))
    assert _typed(fast.flush(until)) == _typed(pure.flush(until))
    for v in range(6, 20):
        assert _typed(fast.push((v, v))) == _typed(pure.push((v, v))), v
    assert _typed(fast.flush()) == _typed(pure.flush())

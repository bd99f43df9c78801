"""Holistic quantiles: B-INT-QNT (exact, mta.multi.quantiles) and the
log-bucket sketch (mta.sketches) against brute-force sorted windows."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mta.amortized_mta import AmortizedMTA
from mta.baselines.subtract_on_evict import SubtractOnEvict
from mta.multi import Query, SharedWindows
from mta.multi.quantiles import BaseIntervalRuns, QuantileWindows, median, quantile, select_rank
from mta.sketches import QUANTILES, quantile_sketch


def nearest_rank(values, phi):
    s = sorted(values)
    return s[max(1, math.ceil(phi * len(s))) - 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-20, 20), min_size=0, max_size=12), min_size=1, max_size=8), st.data())
def test_select_rank_matches_sorting(runs, data):
    runs = [sorted(r) for r in runs]
    everything = sorted(x for r in runs for x in r)
    if not everything:
        return
    rank = data.draw(st.integers(1, len(everything)))
    assert select_rank(runs, rank) == everything[rank - 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=300),
       st.lists(st.tuples(st.floats(0, 1), st.integers(1, 80), st.one_of(st.none(), st.integers(1, 7))),
                min_size=1, max_size=5))
def test_bint_qnt_is_exact(values, specs):
    qs = [quantile(f"q{i}", phi, rows, slide) for i, (phi, rows, slide) in enumerate(specs)]
    w = QuantileWindows(qs)
    for n, x in enumerate(values, 1):
        got = w.push(x)
        due = [q for q in qs if q.slide is None or n % q.slide == 0]
        assert [r.query for r in got] == [q.name for q in due]
        for r, q in zip(got, due):
            assert r.end == n - 1
            assert r.value == nearest_rank(values[max(0, n - q.rows):n], q.phi)
        # one structure, sized by the longest window (not the sum of them)
        assert w.held <= max(q.rows for q in qs)
    for q in qs:
        assert w.query(q.name) == nearest_rank(values[-q.rows:], q.phi)


def test_median_and_runs_by_hand():
    w = QuantileWindows([median("m", 3), quantile("max", 1.0, 5, slide=2)])
    out = [w.push(x) for x in [5, 1, 4, 2, 3]]
    assert [r.value for r in out[2]] == [4]  # median of 5 1 4; the max query is due at even counts
    assert [r.value for r in out[3]] == [2, 5]  # median of 1 4 2; max of 5 1 4 2
    runs = BaseIntervalRuns()
    for x in [3, 1, 2, 0]:
        runs.append(x)
    assert runs.levels[2][0] == (0, 1, 2, 3)  # the level-2 base interval [0, 4) sorted
    assert runs.runs(1, 4) == [(1,), (0, 2)]


def test_quantile_query_arguments():
    with pytest.raises(ValueError):
        quantile("q", 1.5, 10)
    with pytest.raises(ValueError):
        median("m", 0)
    with pytest.raises(ValueError):
        QuantileWindows([median("a", 3), median("a", 4)])


# -- the sketch -------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=60), st.floats(0, 1), st.sampled_from([0.001, 0.01, 0.05, 0.2]))
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

"""spark_ops.columnar (the batch jobs' NumPy engine) against brute force
and against the MTA path it stands in for.

No Spark: a ColumnarWindow is driven as a batch task drives it, with one
key's sorted rows cut into Arrow-batch-sized pieces at random points, for
count and time windows over times with bursts (equal times), gaps longer
than the window and fractional steps; values include the identities of
max and min (-inf, +inf, the int64 bounds) and both zeros (a max or min of
zero must be the window's oldest zero, as Python's ``max`` and the MTA
give).  The same rows also go through ``spark_ops.sorted_window.SortedWindow`` (the
MTA path), including windows emptied by a range too small for the times.
``reduce_ranges`` is also run with a non-commutative monoid (string
concatenation), so an ordering mistake in the block decomposition shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_ops.columnar import AGGREGATIONS, ColumnarWindow, ineligible, reduce_ranges
from spark_ops.sorted_window import SortedWindow
from spark_ops.spec import WindowSpec
from tests.strategies import sane_settings
from tests.test_sorted_window import brute, steps

INT64 = np.iinfo(np.int64)
floats = st.one_of(st.integers(-5, 5).map(float), st.sampled_from([-math.inf, math.inf, -0.0, 0.0, 1e300]))
ints = st.one_of(st.integers(-5, 5), st.sampled_from([INT64.min, INT64.max]))


@st.composite
def key_rows(draw, values):
    deltas = draw(st.lists(steps, min_size=1, max_size=150))
    times, t = [], draw(st.floats(-1e6, 1e6, allow_nan=False))
    for d in deltas:
        t += d
        times.append(t)
    vals = draw(st.lists(values, min_size=len(times), max_size=len(times)))
    cuts = sorted(draw(st.lists(st.integers(0, len(times)), max_size=6)))
    return times, vals, cuts


def expect(name, window):
    if not window:
        return None
    return {"max": max, "min": min, "count": len, "first": lambda w: w[0], "last": lambda w: w[-1],
            "sum": _sum, "mean": lambda w: _sum(w) / len(w)}[name](window)


def _sum(w):
    return math.fsum(w) if all(map(math.isfinite, w)) else sum(w)  # fsum refuses inf + -inf


def run(window, times, values, cuts, dtype):
    got = [[] for _ in window.names]
    for lo, hi in zip([0] + cuts, cuts + [len(times)]):  # Arrow batches, some empty
        results = window.push(np.array(times[lo:hi], dtype=np.float64), np.array(values[lo:hi], dtype=dtype))
        for column, (a, null) in zip(got, results):
            assert len(a) == hi - lo
            column += [None if null is not None and null[i] else a[i].item() for i in range(hi - lo)]
    return got


def same(name, got, want) -> bool:
    if want is None or got is None:
        return got is want
    if name in ("sum", "mean") and math.isfinite(want):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    if want == 0 and isinstance(want, float):  # the sign of a zero counts
        return got == 0 and math.copysign(1, got) == math.copysign(1, want)
    return got == want and type(got) is type(want)


@sane_settings(150)
@given(data=key_rows(floats), span=st.sampled_from([0.5, 1.0, 7.0, 30.0]), rows=st.sampled_from([None, 1, 2, 5, 33]))
def test_float_values(data, span, rows):
    times, values, cuts = data
    names = list(AGGREGATIONS)
    window = ColumnarWindow(names, rows=rows, range=None if rows else span)
    got = run(window, times, values, cuts, np.float64)
    windows = brute(times, values, range=None if rows else span, rows=rows)
    for name, column in zip(names, got):
        for i, (w, g) in enumerate(zip(windows, column)):
            want = expect(name, w)
            if name in ("sum", "mean") and want is not None and math.isnan(want):
                assert math.isnan(g), (name, i, w, g)  # inf + -inf
                continue
            assert same(name, g, want), (name, i, w, g, want)


@sane_settings(150)
@given(data=key_rows(ints), span=st.sampled_from([0.5, 1.0, 7.0, 30.0]), rows=st.sampled_from([None, 1, 3, 17]))
def test_integral_values_are_exact(data, span, rows):
    times, values, cuts = data
    names = ["max", "min", "count", "first", "last"]
    window = ColumnarWindow(names, rows=rows, range=None if rows else span)
    got = run(window, times, values, cuts, np.int64)
    windows = brute(times, values, range=None if rows else span, rows=rows)
    for name, column in zip(names, got):
        assert column == [expect(name, w) for w in windows], name


@sane_settings(100)
@given(data=key_rows(floats), span=st.sampled_from([0.5, 1.0, 7.0]), rows=st.sampled_from([None, 1, 4]),
       far=st.booleans())
def test_same_results_as_the_mta_path(data, span, rows, far):
    """ColumnarWindow and SortedWindow (the MTA path) give the same results,
    null where the MTA gives None, 0 for count and sum of an empty window.
    ``far``: the times moved to about 1e17, where t - range == t for these
    ranges, so that every window is empty."""
    times, values, cuts = data
    if far:
        times = [1e17 + 4096 * i for i in range(len(times))]
    names = list(AGGREGATIONS)
    size = dict(rows=rows) if rows else dict(range=span)
    got = run(ColumnarWindow(names, **size), times, values, cuts, np.float64)
    mta = SortedWindow(WindowSpec.build(key="k", time="t", value="v", aggs=names, **size), "k", "run")
    want = [[] for _ in names]
    for lo, hi in zip([0] + cuts, cuts + [len(times)]):
        lifted, _ = mta.lift(values[lo:hi])
        for column, results in zip(want, mta.slide(times[lo:hi], lifted)):
            column += results
    for name, g_column, w_column in zip(names, got, want):
        for g, w in zip(g_column, w_column):
            if name in ("sum", "mean") and w is not None and math.isnan(w):
                assert math.isnan(g)
            elif name == "sum" and w == 0:
                assert g == 0, (name, g, w)  # the sign of a zero sum depends on the grouping
            else:
                assert same(name, g, float(w) if name in ("sum", "mean") and w is not None else w), (name, g, w)


def test_a_count_beyond_int64_is_every_row():
    window = ColumnarWindow(["count", "first"], rows=2**63 + 1)
    (count, _), (first, _) = window.push(np.array([1.0, 2.0, 3.0]), np.array([7.0, 8.0, 9.0]))
    assert count.tolist() == [1, 2, 3] and first.tolist() == [7.0, 7.0, 7.0]


@sane_settings(150)
@given(words=st.lists(st.sampled_from(["a", "b", "c", ""]), min_size=1, max_size=70), data=st.data())
def test_reduce_ranges_keeps_order_of_a_non_commutative_monoid(words, data):
    x = np.array(words, dtype=object)
    n = len(words)
    bounds = data.draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, n)), min_size=1, max_size=30))
    lo = np.array([min(a, b) for a, b in bounds])
    hi = np.array([max(a, b) for a, b in bounds])
    concat = np.frompyfunc(lambda a, b: a + b, 2, 1)
    got = reduce_ranges(concat, x, lo, hi, identity="")
    assert list(got) == ["".join(words[a:b]) for a, b in zip(lo, hi)]


@pytest.mark.parametrize("kwargs, floating, reason", [
    (dict(aggs=["max", "mean"], rows=5), True, None),
    (dict(aggs=["max", "count", "first", "last", "min"], range=3.0), False, None),
    (dict(aggs=["max"], rows=5, store="memory://"), True, "in a store"),
    (dict(aggs=["stddev"], rows=5), True, "'stddev' is not one the columnar engine computes"),
    (dict(aggs=["sum"], rows=5), False, "'sum' of an integral column"),
])
def test_which_jobs_are_columnar(kwargs, floating, reason):
    spec = WindowSpec.build(key="k", time="t", value="v", integral=not floating, **kwargs)
    why = ineligible(spec, floating)
    assert (why is None) if reason is None else (reason in why), why


def test_kernels_are_ready_aggregations_with_their_declared_empty_result():
    """The columnar engine's eligibility comes from its kernel table: each
    kernel computes a ready aggregation (mta.aggregators.READY), an empty
    window gives what that declaration says, and a user aggregation under
    a ready name is not eligible."""
    from mta import Aggregator, aggregators

    assert set(AGGREGATIONS) <= set(aggregators.READY)
    window = ColumnarWindow(list(AGGREGATIONS), range=1.0)
    results = window.push(np.array([1e17, 1e17 + 4096]), np.array([3.0, 4.0]))  # t - 1 == t: every window empty
    for name, (values, null) in zip(AGGREGATIONS, results):
        empty = aggregators.READY[name].empty
        if empty is None:
            assert null is not None and null.all(), name
        else:
            assert null is None and values.tolist() == [empty, empty], name
    renamed = WindowSpec.build(key="k", time="t", value="v", aggs=[("max", Aggregator(aggregators.MAX.monoid))],
                               rows=3)
    assert "'max' is not one the columnar engine computes" in ineligible(renamed, True)

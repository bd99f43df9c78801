"""spark_ops.columnar (the batch jobs' NumPy engine) against brute force.

No Spark: a ColumnarWindow is driven as a batch task drives it, with one
key's sorted rows cut into Arrow-batch-sized pieces at random points, for
count and time windows over times with bursts (equal times), gaps longer
than the window and fractional steps; values include the identities of
max and min (-inf, +inf, the int64 bounds).  ``reduce_ranges`` is also run
with a non-commutative monoid (string concatenation), so an ordering
mistake in the block decomposition shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_ops.columnar import AGGREGATIONS, ColumnarWindow, ineligible, reduce_ranges
from spark_ops.spec import WindowSpec
from tests.strategies import sane_settings
from tests.test_sorted_window import brute, steps

INT64 = np.iinfo(np.int64)
floats = st.one_of(st.integers(-5, 5).map(float), st.sampled_from([-math.inf, math.inf, -0.0, 1e300]))
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
        if lo == hi:
            continue
        arrays, empty = window.push(np.array(times[lo:hi], dtype=np.float64), np.array(values[lo:hi], dtype=dtype))
        for column, a in zip(got, arrays):
            assert len(a) == hi - lo
            column += [None if empty is not None and empty[i] else a[i].item() for i in range(hi - lo)]
    return got


def same(name, got, want) -> bool:
    if want is None or got is None:
        return got is want
    if name in ("sum", "mean") and math.isfinite(want):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
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


def test_a_range_too_small_for_the_times_gives_empty_windows():
    """At 1e17, t - 1 == t in floating point: the row's own time is not newer
    than the cut-off, so its window is empty (as in the MTA's batch path)."""
    window = ColumnarWindow(["max", "count"], range=1.0)
    arrays, empty = window.push(np.array([1.0, 2.0, 1e17]), np.array([3.0, 4.0, 5.0]))
    assert empty.tolist() == [False, False, True]
    assert arrays[0][:2].tolist() == [3.0, 4.0] and arrays[1][:2].tolist() == [1, 1]


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

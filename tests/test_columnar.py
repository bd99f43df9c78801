"""spark_ops.columnar and spark_ops.kernels (the batch jobs' NumPy engine)
against brute force and against the MTA path it stands in for.

No Spark: a ColumnarWindow is driven as a batch task drives it, with one
key's sorted rows cut into Arrow-batch-sized pieces at random points, for
count and time windows over times with bursts (equal times), gaps longer
than the window and fractional steps; values include the identities of
max and min (-inf, +inf, the int64 bounds) and both zeros (a max or min of
zero must be the window's oldest zero, as Python's ``max`` and the MTA
give).  The same rows also go through ``spark_ops.sorted_window.SortedWindow`` (the
MTA path), including windows emptied by a range too small for the times.
``reduce_ranges`` is also run with a non-commutative monoid (string
concatenation), so an ordering mistake in the block decomposition shows;
``reduce_blocked`` (a block's suffix and the next one's prefix) against
Python's ``max``, ``min`` and exact integer sums over any non-empty ranges,
sliding count windows among them.

The spreads (variance, stddev, var_pop, stddev_pop) are checked against
exact rational arithmetic (Fractions) on the finite values, NaN for a
window holding an infinite value (as the MTA gives), and inf where the sum
of squared deviations leaves the float range; geomean against
``exp(fsum(log))`` over positive values, and, through the per-key window
interface, against the MTA's rejection of values <= 0 (same rows, same
reason).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mta import native, policies
from spark_ops.carried import Carried
from spark_ops.columnar import AGGREGATIONS, ColumnarKeyWindow, ColumnarWindow, ineligible
from spark_ops.kernels import (MOMENTS_IDENTITY, CarriedStacks, moments_combine, reduce_blocked, reduce_ranges,
                               reduce_ranges_of, reduce_sliding, reduce_windows, window_moments)
from spark_ops.sorted_window import SortedWindow
from spark_ops.spec import WindowSpec
from tests.strategies import sane_settings
from tests.test_sorted_window import brute, steps

INT64 = np.iinfo(np.int64)
floats = st.one_of(st.integers(-5, 5).map(float), st.sampled_from([-math.inf, math.inf, -0.0, 0.0, 1e300]))
ints = st.one_of(st.integers(-5, 5), st.sampled_from([INT64.min, INT64.max]))
positive_floats = st.one_of(st.integers(1, 9).map(float), st.sampled_from([math.inf, 5e-324, 1e300, 0.5]))
positive_ints = st.one_of(st.integers(1, 9), st.just(INT64.max))
#: Every kernel but geomean, which takes positive values only (the window rejects the others).
SIGNED = [name for name in AGGREGATIONS if name != "geomean"]
SPREADS = {"variance": (1, False), "stddev": (1, True), "var_pop": (0, False), "stddev_pop": (0, True)}
#: Results compared up to rounding (the engines add in different orders).
ROUNDED = ("sum", "mean", "geomean", *SPREADS)


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
    if name in SPREADS:
        return _spread(name, window)
    if not window:
        return None
    return {"max": max, "min": min, "count": len, "first": lambda w: w[0], "last": lambda w: w[-1],
            "sum": _sum, "mean": lambda w: _sum(w) / len(w),
            "geomean": lambda w: math.exp(math.fsum(map(math.log, w)) / len(w))}[name](window)


def _exact_m2(w) -> Fraction:
    """The sum of squared deviations of finite values, in rationals."""
    xs = [Fraction(v) for v in w]
    mean = sum(xs) / len(xs)
    return sum((v - mean) ** 2 for v in xs)


def _spread(name, w):
    ddof, root = SPREADS[name]
    if len(w) <= ddof:
        return None
    if not all(map(math.isfinite, w)):
        return math.nan  # the spread of a window holding an infinite value is undefined
    m2 = _exact_m2(w)
    if m2 > Fraction(np.finfo(np.float64).max):
        return math.inf  # beyond the float range on the way, as in the MTA
    var = float(m2 / (len(w) - ddof))
    return math.sqrt(var) if root else var


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
    if name in ROUNDED and math.isnan(want):
        return math.isnan(got)
    if name in ROUNDED and math.isfinite(want):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    if want == 0 and isinstance(want, float):  # the sign of a zero counts
        return got == 0 and math.copysign(1, got) == math.copysign(1, want)
    return got == want and type(got) is type(want)


@sane_settings(150)
@given(data=key_rows(floats), span=st.sampled_from([0.5, 1.0, 7.0, 30.0]), rows=st.sampled_from([None, 1, 2, 5, 33]))
def test_float_values(data, span, rows):
    times, values, cuts = data
    window = ColumnarWindow(SIGNED, rows=rows, range=None if rows else span)
    got = run(window, times, values, cuts, np.float64)
    windows = brute(times, values, range=None if rows else span, rows=rows)
    for name, column in zip(SIGNED, got):
        for i, (w, g) in enumerate(zip(windows, column)):
            assert same(name, g, expect(name, w)), (name, i, w, g, expect(name, w))


@sane_settings(100)
@given(data=key_rows(positive_floats), span=st.sampled_from([0.5, 7.0, 30.0]), rows=st.sampled_from([None, 1, 5]))
def test_geomean_of_positive_values(data, span, rows):
    times, values, cuts = data
    names = ["geomean", "sum", "mean", "stddev"]  # geomean's carried logs beside sum's carried values
    window = ColumnarWindow(names, rows=rows, range=None if rows else span)
    got = run(window, times, values, cuts, np.float64)
    windows = brute(times, values, range=None if rows else span, rows=rows)
    for name, column in zip(names, got):
        assert all(same(name, g, expect(name, w)) for w, g in zip(windows, column)), name


@sane_settings(150)
@given(data=key_rows(ints), span=st.sampled_from([0.5, 1.0, 7.0, 30.0]), rows=st.sampled_from([None, 1, 3, 17]))
def test_integral_values_are_exact(data, span, rows):
    times, values, cuts = data
    names = ["max", "min", "count", "first", "last"]
    window = ColumnarWindow(names + list(SPREADS), rows=rows, range=None if rows else span)
    got = run(window, times, values, cuts, np.int64)
    windows = brute(times, values, range=None if rows else span, rows=rows)
    for name, column in zip(names, got):
        assert column == [expect(name, w) for w in windows], name
    for name, column in zip(SPREADS, got[len(names):]):  # in floating point, as the MTA's
        assert all(same(name, g, expect(name, w)) for w, g in zip(windows, column)), name


@sane_settings(60)
@given(data=key_rows(positive_ints), rows=st.sampled_from([1, 4]))
def test_geomean_of_an_integral_column(data, rows):
    times, values, cuts = data
    got = run(ColumnarWindow(["geomean"], rows=rows), times, values, cuts, np.int64)[0]
    assert all(same("geomean", g, expect("geomean", w)) for w, g in zip(brute(times, values, rows=rows), got))


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
    names = SIGNED
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
            if name == "sum" and w == 0:
                assert g == 0, (name, g, w)  # the sign of a zero sum depends on the grouping
            else:
                assert same(name, g, float(w) if name in ROUNDED and w is not None else w), (name, g, w)


@sane_settings(100)
@given(data=key_rows(st.one_of(positive_floats, floats)), integral=st.booleans(),
       rows=st.sampled_from([None, 1, 3]), span=st.sampled_from([0.5, 7.0]))
def test_key_window_rejects_what_the_mta_rejects(data, integral, rows, span):
    """Through the per-key window interface, with ``on_bad_row="flag"``: the
    columnar engine rejects the rows the MTA's geomean cannot take (values
    <= 0), with the MTA's reason, and agrees on every other row."""
    times, values, cuts = data
    if integral:
        values = [int(v) if abs(v) < 2**62 else INT64.max if v > 0 else INT64.min for v in values]
    names = ["geomean", "max", "variance", "count"]
    size = dict(rows=rows) if rows else dict(range=span)
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=names, on_bad_row="flag", integral=integral,
                            **size)
    arrow_type = pa.int64() if integral else pa.float64()
    columnar, mta = ColumnarKeyWindow(spec, "k"), SortedWindow(spec, "k", "run")
    for lo, hi in zip([0] + cuts, cuts + [len(times)]):
        t, v = pa.array(times[lo:hi], pa.float64()), pa.array(values[lo:hi], arrow_type)
        got = [c.to_pylist() for c in columnar.push(t, v, None)]
        want = [c.to_pylist() for c in mta.push(t, v, None)]
        assert got[-1] == want[-1]  # the rejected rows and their reasons
        for name, g_column, w_column in zip(names, got, want):
            assert all(same(name, g, w) for g, w in zip(g_column, w_column)), (name, g_column, w_column)


@sane_settings(150)
@given(values=st.lists(st.one_of(floats, st.floats(-1e6, 1e6)), min_size=1, max_size=70), data=st.data())
def test_moments_of_ranges_combine_blocks_in_order_with_an_exact_identity(values, data):
    """``reduce_ranges_of`` over the moments monoid against the blocks
    combined one value at a time, left to right, from the identity: an
    empty range is the identity, and the identity never changes a value."""
    x = np.array(values)
    n = len(values)
    bounds = data.draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, n)), min_size=1, max_size=30))
    lo = np.array([min(a, b) for a, b in bounds])
    hi = np.array([max(a, b) for a, b in bounds])
    lifted = (np.ones(n), x, np.where(np.isfinite(x), 0.0, np.nan))
    count, mean, m2 = reduce_ranges_of(moments_combine, lifted, lo, hi, MOMENTS_IDENTITY)
    for i, (a, b) in enumerate(zip(lo, hi)):
        acc = tuple(np.array([e]) for e in MOMENTS_IDENTITY)
        for j in range(a, b):
            acc = moments_combine(acc, tuple(c[j : j + 1] for c in lifted))
        assert count[i] == acc[0][0] == b - a
        for got, want in ((mean[i], acc[1][0]), (m2[i], acc[2][0])):
            assert (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
        if b - a == 1:  # identity combined with a value is exactly the value
            assert (mean[i], m2[i]) == (x[a], lifted[2][a]) or math.isnan(m2[i]) and math.isnan(lifted[2][a])


@st.composite
def sliding(draw, n: int):
    """Windows ``[start[i], end[i]]`` over n values whose ends never move
    back (a batch's windows), some of one value, some of all."""
    end, start, m = [], [], draw(st.integers(1, 60))
    e = s = 0
    for _ in range(m):
        e = min(n - 1, e + draw(st.integers(0, 3)))
        s = min(e, s + draw(st.integers(0, 3)))
        end.append(e)
        start.append(s)
    return np.array(start, dtype=np.int64), np.array(end, dtype=np.int64)


def _sliding_or_shuffled(data, n: int) -> tuple:
    """:func:`sliding` windows over n values, or the same windows shuffled,
    which then do not slide (unless they still do): the compiled code
    hands those back to NumPy."""
    start, end = data.draw(sliding(n))
    if data.draw(st.booleans()):
        order = np.array(data.draw(st.permutations(range(len(start)))), dtype=np.int64)
        start, end = start[order], end[order]
    return start, end


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@sane_settings(150)
@given(values=st.lists(st.one_of(floats, st.floats(-1e6, 1e6), st.integers(-3, 3).map(lambda d: 1e9 + d)),
                       min_size=1, max_size=70),
       data=st.data())
def test_window_moments_of_sliding_windows_are_the_exact_spreads(compiled, values, data):
    """``window_moments`` (the compiled Two-Stacks, or NumPy's aligned blocks
    without it) against exact rational arithmetic, values near 1e9 among
    them (a sum of squares would cancel there), and windows that do not
    slide, which the compiled code hands to NumPy."""
    if compiled and native.window_moments is None:
        pytest.skip(f"the compiled core has no window_moments ({native.WHY_NOT or 'an older build'})")
    x = np.array(values)
    start, end = _sliding_or_shuffled(data, len(values))
    with pytest.MonkeyPatch.context() as patch:
        if not compiled:
            patch.setattr(native, "window_moments", None)
        count, mean, m2 = window_moments(x, start, end)
    for i, (a, b) in enumerate(zip(start, end)):
        window = values[a : b + 1]
        assert count[i] == len(window)
        assert _m2_within_rounding(m2[i], window), (window, m2[i])
        if all(map(math.isfinite, window)):
            assert math.isclose(mean[i], float(sum(map(Fraction, window)) / len(window)), rel_tol=1e-12,
                                abs_tol=1e-12 * max(map(abs, window)))  # rounding is relative to the values


def _m2_within_rounding(got: float, window: list) -> bool:
    """M2 against its exact value: NaN with an infinite value, inf beyond
    the float range, else within the rounding of Chan's formula, which
    grows with how far the values sit from 0 against their spread
    (n eps max|x| (max - min)), where a sum of squares would lose
    n eps max|x|^2, or within underflow."""
    if not all(map(math.isfinite, window)):
        return math.isnan(got)
    xs, exact = [Fraction(v) for v in window], _exact_m2(window)
    if exact > Fraction(np.finfo(np.float64).max):
        return got == math.inf
    if not math.isfinite(got):
        return False
    eps = Fraction(np.finfo(np.float64).eps)
    underflow = len(xs) * Fraction(np.finfo(np.float64).tiny)  # squares of values near 1e-160 and below
    slack = max(16 * len(xs) * eps * max(map(abs, xs)) * (max(xs) - min(xs)), exact / 10**9, underflow)
    return abs(Fraction(got) - exact) <= slack


@pytest.mark.parametrize("name", ["window_moments", "window_extreme"])
def test_compiled_sliding_windows_refuse_windows_that_do_not_slide(name):
    """Both compiled kernels hand back windows that do not slide (False),
    and refuse windows outside the values, other index types and outputs
    of another length."""
    fn = getattr(native, name)
    if fn is None:
        pytest.skip(f"the compiled core has no {name} ({native.WHY_NOT or 'an older build'})")
    x = np.array([3.0, 1.0, 4.0, 1.0])

    def call(s, e, *, index=np.int64, n=None):
        s, e, n = np.array(s, dtype=index), np.array(e), len(s) if n is None else n
        return fn(x, s, e, np.empty(n), np.empty(n)) if name == "window_moments" else fn(x, s, e, np.empty(n), True)

    assert call([0, 1], [1, 3]) is True
    assert call([1, 0], [2, 3]) is False  # a start moves back
    assert call([0, 0], [2, 1]) is False  # an end moves back
    assert call([0, 2], [1, 1]) is False  # an empty window
    with pytest.raises(ValueError, match="outside"):
        call([0, 1], [1, 4])
    with pytest.raises(TypeError, match="int64"):
        call([0, 1], [1, 3], index=np.int32)
    with pytest.raises(ValueError, match="length"):
        call([0, 1], [1, 3], n=1)


def test_compiled_window_moments_and_extremes_of_two_windows():
    if native.window_moments is None or native.window_extreme is None:
        pytest.skip(f"the compiled core has no window_moments or window_extreme ({native.WHY_NOT or 'an older build'})")
    x, start, end = np.array([3.0, 1.0, 4.0, 1.0]), np.array([0, 1]), np.array([1, 3])
    mean, m2, top = np.empty(2), np.empty(2), np.empty(2)
    assert native.window_moments(x, start, end, mean, m2) and list(mean) == [2.0, 2.0] and list(m2) == [2.0, 6.0]
    assert native.window_extreme(x, start, end, top, True) and list(top) == [3.0, 4.0]
    assert native.window_extreme(x, start, end, top, False) and list(top) == [1.0, 1.0]
    with pytest.raises(TypeError, match="float64"):  # an extreme's out is of the values' kind
        native.window_extreme(x, start, end, np.empty(2, np.int64), True)


def test_a_count_beyond_int64_is_every_row():
    window = ColumnarWindow(["count", "first"], rows=2**63 + 1)
    (count, _), (first, _) = window.push(np.array([1.0, 2.0, 3.0]), np.array([7.0, 8.0, 9.0]))
    assert count.tolist() == [1, 2, 3] and first.tolist() == [7.0, 7.0, 7.0]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@sane_settings(150)
@given(data=st.data(), ufunc=st.sampled_from([np.maximum, np.minimum, np.add]), floating=st.booleans())
def test_reduce_sliding_equals_brute_force(compiled, data, ufunc, floating):
    """``reduce_sliding`` (max and min by the compiled monotonic deque, or
    NumPy's blocks without it; sums always by the blocks) over sliding
    windows and windows that do not slide, which the compiled code hands
    back: each the reduction of its values, NaN wherever a window holds a
    NaN (as NumPy's maximum and minimum give it)."""
    if compiled and native.window_extreme is None:
        pytest.skip(f"the compiled core has no window_extreme ({native.WHY_NOT or 'an older build'})")
    values = data.draw(st.lists(st.one_of(floats, st.just(math.nan)) if floating else ints, min_size=1,
                                max_size=70))
    x = np.array(values, dtype=np.float64 if floating else np.int64)
    start, end = _sliding_or_shuffled(data, len(values))
    with pytest.MonkeyPatch.context() as patch:
        if not compiled:
            patch.setattr(native, "window_extreme", None)
        with np.errstate(over="ignore"):
            got = reduce_sliding(ufunc, x, start, end + 1)
    for g, a, b in zip(got.tolist(), start, end):
        window = x[a : b + 1]
        with np.errstate(over="ignore", invalid="ignore"):  # inf + -inf is NaN
            want = ufunc.reduce(window).item()
        if ufunc is np.add and floating:  # order of additions differs: inf - inf, rounding
            assert (math.isnan(g) and (math.isnan(want) or math.inf in window)) or g == want or \
                math.isclose(g, want, rel_tol=1e-9, abs_tol=1e-280), (g, want, window)
        else:
            assert g == want or (math.isnan(g) and math.isnan(want)), (ufunc, g, want, window)


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


@sane_settings(200)
@given(data=st.data(), ufunc=st.sampled_from([np.maximum, np.minimum, np.add]), floating=st.booleans())
def test_reduce_blocked_equals_brute_force(data, ufunc, floating):
    values = data.draw(st.lists(floats if floating else st.integers(-5, 5), min_size=1, max_size=80))
    x = np.array(values, dtype=np.float64 if floating else np.int64)
    n = len(values)
    if data.draw(st.booleans()):  # sliding count windows of w rows, from some row on
        w, first = data.draw(st.integers(1, n + 2)), data.draw(st.integers(0, n - 1))
        hi = np.arange(first + 1, n + 1)
        lo = np.maximum(hi - w, 0)
    else:
        bounds = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)), min_size=1, max_size=30))
        lo = np.array([min(a, b - 1) for a, b in bounds])
        hi = np.array([max(a + 1, b) for a, b in bounds])
    got = reduce_blocked(ufunc, x, lo, hi)
    reduce = {np.maximum: max, np.minimum: min, np.add: sum}[ufunc]
    for g, a, b in zip(got.tolist(), lo, hi):
        want = reduce(values[a:b])
        if ufunc is np.add and floating:  # order of additions differs: inf - inf, rounding
            assert (math.isnan(g) and (math.isnan(want) or math.inf in values[a:b])) or g == want or \
                math.isclose(g, want, rel_tol=1e-9, abs_tol=1e-280), (g, want, values[a:b])
        else:
            assert g == want or (math.isnan(g) and math.isnan(want)), (g, want, values[a:b])


def _squared(values):
    """A lift for the test below: exact on int64 (wraps alike), and no
    reduction commutes with it, so lifting after reducing would show."""
    return values * values


@sane_settings(200)
@given(data=st.data(), ufunc=st.sampled_from([np.maximum, np.minimum, np.add]),
       lift=st.sampled_from([None, _squared]), with_stacks=st.booleans())
def test_reductions_carried_from_batch_to_batch_equal_brute_force(data, ufunc, lift, with_stacks):
    """reduce_windows with or without a key's CarriedStacks, driven as
    ColumnarWindow drives it (each push carries the rows from its last
    window's start on), over windows of any shape that start anywhere at or
    after the previous one, many far back among the carried rows: each
    equals the reduction of its rows, lifted first when a lift is given
    (geomean's logs); int64 values, so sums are exact and wrap alike."""
    values = data.draw(st.lists(ints, min_size=1, max_size=120))
    x_all = np.array(values, dtype=np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(values)), max_size=12)))
    stacks, base, carried_values, start = CarriedStacks(ufunc) if with_stacks else None, 0, x_all[:0], 0
    lifted_all = x_all if lift is None else lift(x_all)
    for lo, hi in zip([0] + cuts, cuts + [len(values)]):
        x = np.concatenate((carried_values, x_all[lo:hi]))
        carried = len(carried_values)
        starts = []
        for own in range(lo, hi):  # each row's window starts at or after the previous row's
            start = data.draw(st.integers(start, own))
            starts.append(start - base)
        got = reduce_windows(ufunc, x, np.array(starts, dtype=np.int64), np.arange(carried, len(x)), carried,
                             stacks, base, lift)
        reduce = {np.maximum: np.maximum.reduce, np.minimum: np.minimum.reduce, np.add: np.add.reduce}[ufunc]
        with np.errstate(over="ignore"):
            want = [reduce(lifted_all[base + s: own + 1]) for s, own in zip(starts, range(lo, hi))]
        assert got.tolist() == [int(w) for w in want], (starts, base, carried)
        keep = starts[-1] if starts else 0
        carried_values, base = x[keep:], base + keep


@pytest.mark.parametrize("kwargs, floating, reason", [
    (dict(aggs=["max", "mean"], rows=5), True, None),
    (dict(aggs=["max", "count", "first", "last", "min"], range=3.0), False, None),
    (dict(aggs=["max", "stddev", "geomean"], rows=5, store="memory://"), True, None),
    (dict(aggs=["variance", "var_pop", "stddev_pop", "stddev"], range=2.0), False, None),
    (dict(aggs=["max"], policy=policies.Count(3)), True, "custom slide policy"),
    (dict(aggs=["sum"], rows=5), False, "'sum' of an integral column"),
    (dict(aggs=["mean"], rows=5), False, "'mean' of an integral column"),
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


@pytest.mark.parametrize("dtype", [np.float64, np.int64, [("v0", np.float64), ("v1", np.int64)]], ids=str)
@settings(max_examples=150, deadline=None, database=None)
@given(steps=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 60)), max_size=30))
def test_carried_rows_then_the_batch_as_a_list_keeps_them(dtype, steps):
    """``Carried`` against a list: each append gives the kept rows then the
    batch, whether the buffer grows, moves its rows to its front or neither."""
    carried, model, counter = Carried(), [], 0
    for n, drop in steps:
        batch = np.zeros(n, dtype=dtype)
        for name in batch.dtype.names or [None]:
            column = batch if name is None else batch[name]
            column[:] = np.arange(counter, counter + n)
        counter += n
        model += batch.tolist()
        assert carried.append(batch).tolist() == model
        carried.keep_from(drop)
        model = model[drop:]
        assert len(carried) == len(model)
    carried.clear()
    assert len(carried) == 0 and carried.append(np.zeros(0, dtype=dtype)).tolist() == []


def test_carried_rows_of_two_types_come_as_numpy_makes_both_and_a_batch_alone_as_its_own():
    carried = Carried()
    assert carried.append(np.array([1.5, 2.5])).dtype == np.float64
    mixed = carried.append(np.array([3, 4], dtype=np.int64))
    assert mixed.dtype == np.float64 and mixed.tolist() == [1.5, 2.5, 3.0, 4.0]
    carried.keep_from(4)
    alone = carried.append(np.array([5, 6], dtype=np.int64))
    assert alone.dtype == np.int64 and alone.tolist() == [5, 6]

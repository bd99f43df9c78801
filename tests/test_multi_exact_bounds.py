"""Exact window bounds in SharedWindows, against the brute-force oracle
(tests/multi_oracle.py, which places every element with exact Fractions).

Float times, ranges, slides and lags: a float is the binary number it holds,
and every window bound is computed from those numbers without rounding, so a
push, a flush, ``query(name)`` and the late count agree with the oracle on
which window an element lies in.  Also: NumPy integers as ints, sizes beyond
the compiled core's 64-bit integers, and the exact quantile's rank.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mta import Query, SharedWindows
from mta.aggregators import COLLECT, SUM
from mta.multi import compiled
from mta.multi.quantiles import median, quantile
from tests.multi_oracle import MultiOracle
from tests.strategies import sane_settings

#: Plans with a final technique taking any monoid and any lag (COLLECT is
#: not invertible), one per partial technique, the baseline and the planners.
PLANS = ["separate", "cutty+naive", "pairs+bint", "panes+flatfat", "cutty+lint", "auto", "triweave"]


def _time(raw):
    return raw


def _replay(queries, ops, plan) -> None:
    """``ops`` on SharedWindows and on the oracle: every push (at the time
    it gives), query and flush (until an offset from the newest time)
    equal, and the late counts."""
    shared = SharedWindows(queries, time=_time, plan=plan)
    oracle = MultiOracle(queries, time=_time)
    t = None
    for step, op in enumerate(ops):
        where = f"step {step} {op!r}"
        if op[0] == "push":
            t = op[1]
            assert shared.push(t) == oracle.push(t), where
        elif op[0] == "query":
            name = queries[op[1] % len(queries)].name
            assert shared.query(name) == oracle.query(name), where
        elif t is not None:
            until = None if op[1] is None else t + op[1]
            assert shared.flush(until) == oracle.flush(until), where
        assert shared.late == oracle.late, where
    assert shared.flush() == oracle.flush(), "final flush"
    for q in queries:
        assert shared.query(q.name) == oracle.query(q.name), q.name


# ---------------------------------------------------------------------------
# float windows (bugs: a lagged periodic window skipped, per-element bounds
# rounded so that push and query disagreed)

_sizes = st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.7, 1.1])


@st.composite
def float_queries(draw):
    """One to three time queries given in decimal-looking floats (none of
    them is the decimal it prints as), per-element or periodic, with lags."""
    queries = []
    for i in range(draw(st.integers(1, 3))):
        width = draw(_sizes)
        slide = draw(st.one_of(st.none(), st.sampled_from([0.05, 0.1, 0.3]), st.just(width)))
        lag = draw(st.sampled_from([0, 0.1, 0.2, 0.3, 0.7]))
        queries.append(Query(f"q{i}", COLLECT, range=width, slide=slide, lag=lag))
    return queries


@st.composite
def float_ops(draw):
    """Pushes at float times (a start far from 0 and decimal steps, summed
    in floats as a stream's clock would), queries and flushes."""
    t = draw(st.sampled_from([0.0, 0.1, 1.0, 1.35, 1.6, 1000.0, 1e6]))
    ops = [("push", t)]
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["push", "push", "push", "query", "flush", "flush-until"]))
        if kind == "push":
            t += draw(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.1, 0.2, 0.3, 0.7]))
            ops.append(("push", t))
        elif kind == "query":
            ops.append(("query", draw(st.integers(0, 2))))
        elif kind == "flush":
            ops.append(("flush", None))
        else:
            ops.append(("flush", draw(st.sampled_from([-0.3, 0.0, 0.1, 0.25, 1.0]))))
    return ops


@pytest.mark.parametrize("plan", PLANS)
@sane_settings(40)
@given(queries=float_queries(), ops=float_ops())
@example(queries=[Query("q0", COLLECT, range=0.3, slide=0.05, lag=0.3)], ops=[("push", 1.6), ("push", 2.0)])
@example(queries=[Query("q0", COLLECT, range=0.2, lag=0.1)], ops=[("push", 0.1), ("push", 0.4), ("query", 0)])
@example(queries=[Query("q0", COLLECT, range=0.05)],
         ops=[("push", t) for t in (1000.02, 1000.05, 1000.06, 1000.0699999999999)])
def test_float_windows_against_exact_oracle(plan, queries, ops):
    _replay(queries, ops, plan)


@st.composite
def mixed_ops(draw):
    """Pushes at times given as floats, ints (some beyond 2**53, which no
    double equals) and Fractions, in order exactly; queries and flushes."""
    exact = draw(st.sampled_from([Fraction(0), Fraction(1), Fraction(2**54 + 1), Fraction(10**6)]))
    newest = None
    ops = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["push", "push", "push", "query", "flush-until"]))
        if kind == "push" or newest is None:
            exact += Fraction(draw(st.sampled_from([0, 1, 3, 5, 7, 10])), draw(st.sampled_from([10, 3])))
            form = draw(st.sampled_from(["float", "float", "fraction", "int"]))
            t = float(exact) if form == "float" else int(exact) if form == "int" else exact
            if newest is not None and t < newest:
                t = newest
            newest = t
            ops.append(("push", t))
        elif kind == "query":
            ops.append(("query", draw(st.integers(0, 2))))
        else:
            ops.append(("flush", draw(st.sampled_from([-0.3, 0.0, 0.25]))))
    return ops


@pytest.mark.parametrize("plan", ["separate", "cutty+naive", "pairs+bint"])
@sane_settings(40)
@given(queries=float_queries(), ops=mixed_ops())
@example(queries=[Query("q0", COLLECT, range=0.2, lag=0.1)],
         ops=[("push", Fraction(0)), ("push", 0.1), ("push", 0.4), ("query", 0)])
def test_mixed_time_types_against_exact_oracle(plan, queries, ops):
    """Float bounds rounded to doubles only while every key held is a
    double: a Fraction or a wide int among the keys keeps them exact."""
    _replay(queries, ops, plan)


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
@example(0.4, 0.30000000000000004)
@example(1000.0699999999999, 0.05)
@example(5e-324, -5e-324)
@example(-1.7e308, 1.7e308)
def test_minus_down_is_the_double_below_the_exact_difference(t, d):
    from mta.multi.schedule import minus_down

    got, want = minus_down(t, d), Fraction(t) - Fraction(d)
    if got is None:  # overflow
        assert max(abs(t), abs(d)) > 2.0**1022
        return
    assert math.isfinite(got) and Fraction(got) <= want
    up = math.nextafter(got, math.inf)
    assert math.isinf(up) or Fraction(up) > want


@pytest.mark.parametrize("plan", ["separate", "cutty+naive", "pairs+bint"])
def test_lagged_window_of_the_first_element_is_reported(plan):
    """range=0.3, slide=0.05, lag=0.3: the window ending at ``e = 38 *
    0.05``, ``[e - 0.6, e - 0.3)`` exactly, holds 1.6: it is the first
    window reported with 1.6, whether 1.6 is the first element or not."""
    q = Query("q", COLLECT, range=0.3, slide=0.05, lag=0.3)
    e = 38 * Fraction(0.05)
    assert e - Fraction(0.3) - Fraction(0.3) <= Fraction(1.6) < e - Fraction(0.3)  # the oracle's reason
    for stream in ([1.6, 2.0], [1.35, 1.6, 2.0]):
        shared = SharedWindows([q], time=_time, plan=plan)
        out = [r for t in stream for r in shared.push(t)] + shared.flush()
        holding = [r.end for r in out if 1.6 in r.value]
        assert holding[0] == float(e), (stream, holding)


@pytest.mark.parametrize("plan", ["separate", "cutty+naive", "pairs+bint"])
def test_per_element_push_and_query_agree(plan):
    """(0.4 - 0.1 - 0.2, 0.4 - 0.1] does not hold 0.1 exactly: neither the
    Result of push(0.4) nor query() has it; at 1000.0699999999999 a range of
    0.05 reaches back past 1000.02 exactly, so both hold it."""
    assert not Fraction(0.4) - Fraction(0.1) - Fraction(0.2) < Fraction(0.1)
    shared = SharedWindows([Query("q", COLLECT, range=0.2, lag=0.1)], time=_time, plan=plan)
    shared.push(0.1)
    assert shared.push(0.4)[0].value == () == shared.query("q")
    t = 1000.0699999999999
    assert Fraction(t) - Fraction(0.05) < Fraction(1000.02)
    shared = SharedWindows([Query("q", COLLECT, range=0.05)], time=_time, plan=plan)
    for x in (1000.02, 1000.05, 1000.06):
        shared.push(x)
    assert shared.push(t)[0].value == (1000.02, 1000.05, 1000.06, t) == shared.query("q")


# ---------------------------------------------------------------------------
# NumPy numbers: integers stay ints, other reals are exact


def test_numpy_integer_sizes_are_ints():
    q = Query("q", SUM, range=np.int64(10), slide=np.int64(5), lag=np.int64(2))
    assert [type(x) for x in (q.exact_width, q.exact_slide, q.exact_lag)] == [int, int, int]
    assert (q.exact_width, q.exact_slide, q.exact_lag) == (10, 5, 2)


@pytest.mark.parametrize("plan", ["separate", "cutty+naive"])
def test_numpy_integer_times_are_exact_ints(plan):
    """A range wider than int64 over NumPy int64 times: the bounds are ints,
    not int64 arithmetic (which overflows)."""
    queries = [Query("wide", COLLECT, range=2**64, lag=2**63), Query("p", COLLECT, range=10, slide=5)]
    shared = SharedWindows(queries, time=_time, plan=plan)
    oracle = MultiOracle(queries, time=_time)
    for t in (np.int64(5), np.int64(12), np.int64(12), np.int64(31)):
        assert shared.push(t) == oracle.push(t)
    assert shared.flush(20) == oracle.flush(20)


def test_numpy_float32_sizes_are_exact():
    q = Query("q", COLLECT, range=np.float32(0.1))
    assert q.exact_width == Fraction(*np.float32(0.1).as_integer_ratio())
    shared = SharedWindows([q], time=_time, plan="cutty+naive")
    oracle = MultiOracle([q], time=_time)
    for t in (0.0, 0.1, 0.1 + 1e-9, 0.2):
        assert shared.push(t) == oracle.push(t)


# ---------------------------------------------------------------------------
# rows beyond the compiled core's integers run on the pure-Python path


def test_huge_rows_and_slides(monkeypatch):
    """Rows or slides of 2**62 and more are valid: the compiled core says
    why it does not run them, and the pure-Python path answers."""
    monkeypatch.setattr(compiled, "USE", True)
    if compiled._core_type() is None:
        pytest.skip(f"compiled core not in use: {compiled.why_not([], [], [])}")
    for rows, slide, native in [(2**62 - 1, 1, True), (2**62, 1, False), (2**63, 1, False), (2**70, 3, False),
                                (3, 2**63, False)]:
        queries = [Query("q", SUM, rows=rows, slide=slide)]
        shared = SharedWindows(queries, plan="cutty+naive")
        assert (shared.compiled_why_not == "") == native, (rows, slide)
        if not native:
            assert "64-bit" in shared.compiled_why_not
        oracle = MultiOracle(queries)
        for x in range(1, 8):
            assert shared.push(x) == oracle.push(x)
        assert shared.flush(12) == oracle.flush(12)
        assert shared.query("q") == oracle.query("q")


# ---------------------------------------------------------------------------
# the exact quantile's nearest rank: phi as written


def _rank(phi, n):
    """max(1, ceil(phi * n)) with phi the decimal it is written as."""
    return max(1, math.ceil(Fraction(str(phi)) * n))


def test_quantile_rank_of_every_percent():
    """Every phi = k / 100 over sorted windows of 1 to 200 elements (0.14 *
    100 is 14.000000000000002 in floats, rank 15)."""
    values = tuple(range(1, 201))
    for k in range(101):
        agg = quantile(k / 100)
        for n in range(1, 201):
            assert agg.lower(values[:n]) == _rank(k / 100, n), (k, n)


@pytest.mark.parametrize("plan", ["separate", "cutty+bint", "pairs+bint"])
def test_quantile_rank_in_shared_windows(plan):
    for phi, n in [(0.14, 100), (0.57, 100), (0.29, 100), (0.7, 10), (0.3, 10), (0.6, 5)]:
        agg = quantile(phi)
        shared = SharedWindows([Query("p", agg, rows=n, slide=n)], plan=plan)
        out = [r.value for x in range(n, 0, -1) for r in shared.push(x)]
        assert out == [_rank(phi, n)], (phi, n)
        assert agg.aggregate(range(n, 0, -1)) == _rank(phi, n), (phi, n)


def test_quantile_of_a_fraction_is_exact():
    """A Fraction phi is taken exactly: 14/100 and 1/3 (no float near it)."""
    assert quantile(Fraction(14, 100)).aggregate(range(1, 101)) == 14
    assert quantile(Fraction(1, 3)).aggregate(range(1, 10)) == 3
    assert quantile(Fraction(1, 3)).aggregate(range(1, 11)) == 4
    assert quantile(Fraction(1, 3)).name == "quantile(1/3)"
    assert median().aggregate(range(1, 11)) == 5
    with pytest.raises(ValueError, match="0 <= phi <= 1"):
        quantile(Fraction(4, 3))

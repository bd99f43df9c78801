"""slide= with on_bad_row="flag" (spark_ops.excluded): every bad row is left
out of the windows and counted, none silently.

Checked against a brute-force oracle over the good rows (every window
``[end - range, end)`` at the multiples of the slide that holds one), with
``joined``, a non-commutative user aggregation that shows a row lost,
repeated or reordered, on the columnar kernels and on the monoids; the
count of left-out rows equals the number of bad rows put in (null or NaN
key, time or value, an infinite time, a time beyond the microseconds the
windows count in, a value geomean cannot lift, a null in one of several
value columns).
"""

from __future__ import annotations

import math
import random
import sys

import pytest

from spark_ops import sliding_window
from spark_ops.excluded import rejected_rows
from spark_ops.rows import BEYOND_MICROS
from tests.spark_fixtures import ORACLE, SCHEMA, _close, as_tuples, joined, random_rows, ship_by_value

ship_by_value(sys.modules[__name__])

RANGE, SLIDE = 10, 5


def windows_oracle(rows, outputs: dict, value=lambda r: r["v"]) -> dict:
    """(key, window end) -> {output column: value} over ``rows`` (the good
    ones, in arrival order): ``outputs`` maps a column to its function of
    the window's values in (time, arrival) order."""
    out = {}
    for k in {r["k"] for r in rows}:
        mine = sorted(((r["t"], i, value(r)) for i, r in enumerate(rows) if r["k"] == k), key=lambda x: x[:2])
        e = math.floor(mine[0][0] / SLIDE) * SLIDE
        while e <= mine[-1][0] + RANGE:
            window = [v for t, _, v in mine if e - RANGE <= t < e]
            if window:
                out[(k, float(e))] = {c: f(window) for c, f in outputs.items()}
            e += SLIDE
    return out


def _bad_rows(first_id: int) -> list[dict]:
    """One of each bad row a window cannot take."""
    bad = [dict(k=None, t=3.0, v=2.0), dict(k=float("nan"), t=4.0, v=2.0), dict(k="k01", t=None, v=2.0),
           dict(k="k01", t=float("nan"), v=2.0), dict(k="k02", t=float("inf"), v=2.0),
           dict(k="k02", t=7.0, v=None), dict(k="k03", t=8.0, v=float("nan")), dict(k="k01", t=1e13, v=2.0),
           dict(k="k02", t=-1e300, v=0.0), dict(k="k03", t=9.0, v=-4.0)]
    return [dict(r, id=first_id + i, k=None if r["k"] is None or r["k"] != r["k"] else r["k"])
            for i, r in enumerate(bad)]


@pytest.mark.parametrize("aggs, engine", [(["max", "sum", "count", "geomean", "first", "last"], "auto"),
                                          (["max", "count", "geomean", "joined"], "auto"),
                                          (["sum", "mean", "geomean"], "lmta"),
                                          (["max", "sum", "count", "first"], "auto"),
                                          (["min", "joined"], "amta")])
def test_bad_rows_are_left_out_of_the_windows_and_counted(spark, aggs, engine):
    """geomean makes -4.0 a bad row (its lift rejects it), the other
    aggregations take it; the good rows' windows equal the oracle's, and
    the counter grows by the bad rows."""
    rng = random.Random(51)
    good = random_rows(rng, keys=6, per_key=(10, 40))
    bad = _bad_rows(len(good))
    taken = [] if "geomean" in aggs else [bad.pop()]  # -4.0: only geomean rejects it
    rows = good[:]
    for r in bad + taken:
        rows.insert(rng.randrange(len(rows) + 1), r)
    good += taken
    df = spark.createDataFrame(as_tuples(rows), "id long, k string, t double, v double")
    argument = [("joined", joined(), "string") if a == "joined" else a for a in aggs]
    before = rejected_rows(spark)
    got = sliding_window(df, key="k", time="t", value="v", aggs=argument, range=RANGE, slide=SLIDE, engine=engine,
                         on_bad_row="flag").collect()
    assert rejected_rows(spark) - before == len(bad)
    assert got[0].__fields__ == ["k", "window_end", *aggs]
    want = windows_oracle([r for r in rows if r in good], {a: ORACLE[a] for a in aggs})
    by_window = {(g.k, g.window_end): g.asDict() for g in got}
    assert len(by_window) == len(got) and set(by_window) == set(want)
    wrong = [(w, a, by_window[w][a], want[w][a]) for w in want for a in aggs if not _close(by_window[w][a], want[w][a])]
    assert not wrong, wrong[:5]


def test_several_value_columns(spark):
    """value=["cpu", "mem"]: a null or NaN in either column leaves the row out."""
    from tests.values_oracle import SCHEMA as VALUES_SCHEMA, bad, random_rows as usage_rows

    rows = usage_rows(random.Random(52), keys=4, nulls=0.15)
    df = spark.createDataFrame([(r["id"], r["k"], r["t"], r["cpu"], r["mem"]) for r in rows], VALUES_SCHEMA)
    before = rejected_rows(spark)
    got = sliding_window(df, key="k", time="t", value=["cpu", "mem"], aggs=["max(cpu)", "sum(mem)", "count(mem)"],
                         range=RANGE, slide=SLIDE, on_bad_row="flag").collect()
    assert rejected_rows(spark) - before == sum(map(bad, rows)) > 0
    want = windows_oracle([r for r in rows if not bad(r)],
                          {"max_cpu": lambda w: max(c for c, _ in w), "sum_mem": lambda w: sum(m for _, m in w),
                           "count_mem": len}, value=lambda r: (r["cpu"], r["mem"]))
    by_window = {(g.k, g.window_end): g.asDict() for g in got}
    assert set(by_window) == set(want)
    assert all(by_window[w][c] == want[w][c] for w in want for c in want[w])  # sum of longs: exact


def test_error_mode_still_names_the_row(spark):
    df = spark.createDataFrame([(0, "a", 1.0, 2.0), (1, "a", 2.0, None)], SCHEMA)
    with pytest.raises(Exception, match=r"row rejected \(null or NaN value\): k='a', t=2.0"):
        sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=RANGE, slide=SLIDE).collect()


@pytest.mark.parametrize("aggs, engine", [(["max", "count"], "auto"), (["max", "first"], "auto"),
                                          (["max", "count"], "amta")])
@pytest.mark.parametrize("t", [1.7e18, -9.3e12])
def test_a_time_beyond_microseconds_is_named_not_overflowed(spark, aggs, engine, t):
    """A time whose microseconds overflow an int64 (an epoch in nanoseconds
    given as seconds) fails naming the row, on panes, on the kernels and on
    the monoids, where it gave windows ending near -2**63 / 1e6 or Spark's
    CAST_OVERFLOW."""
    df = spark.createDataFrame([(0, "a", 1.0, 2.0), (1, "a", t, 3.0)], SCHEMA)
    with pytest.raises(Exception) as info:
        sliding_window(df, key="k", time="t", value="v", aggs=aggs, range=RANGE, slide=SLIDE,
                       engine=engine).collect()
    assert f"row rejected ({BEYOND_MICROS}): k='a', t={t!r}, v=3.0" in str(info.value), str(info.value)[:2000]


@pytest.mark.parametrize("engine", ["auto", "amta", "lmta"])
@pytest.mark.parametrize("v", [-1.0, 0.0])
def test_a_value_geomean_cannot_take_fails_the_job_naming_the_row(spark, engine, v):
    """geomean of a value <= 0 with slide=: on the columnar kernels as on
    the monoids, the job fails naming the row and the lift's reason (never a
    NaN or 0 window), as without slide=."""
    df = spark.createDataFrame([(0, "a", 1.0, 4.0), (1, "a", 2.0, v), (2, "a", 3.0, 9.0)], SCHEMA)
    with pytest.raises(Exception, match=r"row rejected \(the aggregations cannot take the value: ValueError: "
                                        rf"geomean: inputs must be positive, got {v}\): k='a', t=2.0"):
        sliding_window(df, key="k", time="t", value="v", aggs=["max", "geomean"], range=RANGE, slide=SLIDE,
                       engine=engine).collect()

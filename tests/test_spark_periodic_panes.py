"""Periodic output (slide=) by panes (spark_ops.periodic_panes): Spark's
partial aggregation per (key, pane), the windows combined from the panes.
Against the brute-force oracle over the raw rows, Spark's own
groupBy(key, window(ts, range, slide)), and the row plan (engine="amta",
the aggregators' monoids, which keep the older of two equal values)."""

from __future__ import annotations

import datetime as dt
import math
import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pyspark.sql import functions as F

from spark_ops import sliding_window
from spark_ops.rows import BEYOND_MICROS
from tests.spark_fixtures import ORACLE, _close, key_times, session_conf, ship_by_value

ship_by_value(sys.modules[__name__])

PANE_AGGS = ["max", "min", "count", "sum", "mean"]


def _rows(rng, keys, per_key, value):
    """Shuffled rows (k, t, v): per key non-decreasing times with ties,
    bursts and gaps longer than any window; the list order is the input's."""
    rows = []
    for k in range(keys):
        for t in key_times(rng, rng.randint(*per_key), start=rng.randint(-30, 30)):
            rows.append((f"k{k}", float(t), value(rng)))
    rng.shuffle(rows)
    return rows


def _oracle(rows, aggs, sizes: dict, slide, key=lambda r: r[0]):
    """(key, window end) -> {column: value}: every multiple e of the slide
    whose widest window [e - size, e) holds a row of the key, by brute force;
    a smaller size's empty window gives 0 for count and sum, else None.
    Columns ``<aggregation>_<label>``, as several sizes name them."""
    widest = max(sizes.values())
    out = {}
    for k in {key(r) for r in rows}:
        mine = [(r[-2], r[-1]) for r in rows if key(r) == k]
        ends = {(math.floor(t / slide) + j) * slide for t, _ in mine for j in range(1, widest // slide + 1)}
        for e in ends:
            row = {}
            for label, size in sizes.items():
                window = [v for t, v in sorted(mine) if e - size <= t < e]
                for a in aggs:
                    row[f"{a}_{label}"] = ORACLE[a](window) if window else (0 if a in ("count", "sum") else None)
            out[(k, e)] = row
    return out


def _assert_same(got: dict, want: dict):
    assert set(got) == set(want), (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])
    bad = [(key, c, got[key][c], v) for key, w in want.items() for c, v in w.items() if not _close(got[key][c], v)]
    assert not bad, bad[:10]


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("integral", [False, True])
def test_panes_equal_the_oracle_several_sizes(spark, integral):
    """Float and integer values, two sizes: every window of every size
    equals brute force over the raw rows; integer max and min stay integers."""
    rng = random.Random(7 + integral)
    rows = _rows(rng, 6, (5, 60), (lambda r: r.randint(-9, 9)) if integral else (lambda r: r.uniform(-50, 50)))
    aggs = ["max", "min", "count"] + ([] if integral else ["sum", "mean"])
    df = spark.createDataFrame(rows, f"k string, t double, v {'int' if integral else 'double'}")
    out = sliding_window(df, key="k", time="t", value="v", aggs=aggs, range={"s": 6, "l": 18}, slide=3)
    assert "partial_max" in _plan(out)
    got = {(g.k, g.window_end): g.asDict() for g in out.collect()}
    _assert_same(got, _oracle(rows, aggs, {"s": 6, "l": 18}, 3))
    if integral:
        assert all(isinstance(g["max_l"], int) for g in got.values())


def test_panes_equal_spark_hopping_windows_composite_key(spark):
    """Timestamps, a composite key, two value columns: Spark's own
    groupBy(dc, host, window(ts, 20, 5)) gives the same rows."""
    rng = random.Random(3)
    epoch = dt.datetime(2024, 5, 1, 12, 0, 0)
    rows = [(f"dc{i % 2}", i // 2, epoch + dt.timedelta(seconds=t, microseconds=rng.choice([0, 1, 999_999])),
             rng.uniform(0, 9), float(rng.randint(0, 5)))
            for i in range(5) for t in key_times(rng, rng.randint(10, 60))]
    rng.shuffle(rows)
    df = spark.createDataFrame(rows, "dc string, host int, ts timestamp, cpu double, mem double")
    out = sliding_window(df, key=["dc", "host"], time="ts", value=["cpu", "mem"],
                         aggs=["max(cpu)", "min(mem)", "count(cpu)", "sum(mem)", "mean(cpu)"], range=20, slide=5)
    assert "partial_max" in _plan(out)
    got = {(g.dc, g.host, g.window_end): g.asDict() for g in out.collect()}
    assert list(next(iter(got.values()))) == ["dc", "host", "window_end", "max_cpu", "min_mem", "count_cpu",
                                              "sum_mem", "mean_cpu"]
    spark_rows = (df.groupBy("dc", "host", F.window("ts", "20 seconds", "5 seconds"))
                  .agg(F.max("cpu").alias("max_cpu"), F.min("mem").alias("min_mem"),
                       F.count("cpu").alias("count_cpu"), F.sum("mem").alias("sum_mem"),
                       F.avg("cpu").alias("mean_cpu"))
                  .select("dc", "host", F.col("window.end").alias("window_end"), "max_cpu", "min_mem", "count_cpu",
                          "sum_mem", "mean_cpu").collect())
    _assert_same(got, {(w.dc, w.host, w.window_end): {c: w[c] for c in ("max_cpu", "min_mem", "count_cpu",
                                                                        "sum_mem", "mean_cpu")}
                       for w in spark_rows})


def test_the_rule_picks_the_plan(spark):
    """max/min/count/sum/mean run on panes (Spark's partial aggregation, no
    arrival number, no sort of the raw rows); first, a spread, a user
    monoid or engine="amta" keep the row plan (sorted raw rows, mapInArrow)."""
    from spark_ops.periodic_panes import PANE_AGGREGATIONS
    from tests.spark_fixtures import joined

    df = spark.createDataFrame(_rows(random.Random(5), 3, (5, 20), lambda r: r.random()), "k string, t double, v double")
    common = dict(key="k", time="t", value="v", range=10, slide=5)
    panes = _plan(sliding_window(df, aggs=list(PANE_AGGREGATIONS), **common))
    assert "partial_max" in panes and "__mta_arrival" not in panes
    for aggs, engine in ((["max", "first"], "auto"), (["stddev"], "auto"), ([("j", joined(), "string")], "auto"),
                         (["max"], "amta")):
        rows_plan = _plan(sliding_window(df, aggs=aggs, engine=engine, **common))
        assert "__mta_arrival" in rows_plan and "partial_" not in rows_plan, (aggs, engine)


def _bits(x):
    return None if x is None else (x, math.copysign(1.0, x)) if isinstance(x, float) else x


def test_signed_zeros_as_the_row_plan(spark):
    """Zeros of both signs (never at one key's equal time): a max or min of
    0 keeps the sign of the window's oldest zero and a sum of -0.0s is -0.0,
    exactly as the row plan on the aggregators' monoids gives them."""
    rng = random.Random(9)
    rows = []
    for k in range(4):
        for t in sorted(rng.sample(range(60), 40)):
            rows.append((f"k{k}", float(t), rng.choice([0.0, -0.0, -0.0, 0.0, -1.0 if k % 2 else 1.0])))
    rng.shuffle(rows)
    df = spark.createDataFrame(rows, "k string, t double, v double")
    common = dict(key="k", time="t", value="v", aggs=["max", "min", "sum"], range=9, slide=3)
    panes = sorted(tuple(_bits(x) for x in r) for r in sliding_window(df, **common).collect())
    monoids = sorted(tuple(_bits(x) for x in r) for r in sliding_window(df, engine="amta", **common).collect())
    assert panes == monoids


@pytest.mark.parametrize("aggs, engine", [(["max", "count"], "auto"), (["max", "count", "first"], "auto"),
                                          (["max", "count"], "amta")])
def test_a_key_of_both_zeros_is_one_window_keyed_0_0_on_every_plan(spark, aggs, engine):
    """Keys -0.0 and 0.0 are one key; its window's key is 0.0, as Spark's
    groupBy(window()) gives it, on panes, on the kernels and on the monoids
    (whichever zero comes first)."""
    df = spark.createDataFrame([(-0.0, 1.0, 1.0), (0.0, 2.0, 2.0), (-0.0, 3.0, 3.0)], "k double, t double, v double")
    got = sliding_window(df, key="k", time="t", value="v", aggs=aggs, range=10, slide=10, engine=engine).collect()
    assert [(math.copysign(1.0, r["k"]), r["k"], r["count"]) for r in got] == [(1.0, 0.0, 3)]
    native = df.groupBy("k", F.window(F.timestamp_seconds("t"), "10 seconds")).count().collect()
    assert [(math.copysign(1.0, r["k"]), r["count"]) for r in native] == [(1.0, 3)]


@pytest.mark.parametrize("bad, reason", [(("k1", 7.0, None), "null or NaN value"),
                                         (("k1", 7.0, float("nan")), "null or NaN value"),
                                         ((None, 7.0, 1.0), "null or NaN key"),
                                         (("k1", None, 1.0), "null or NaN time"),
                                         (("k1", float("-inf"), 1.0), "infinite time"),
                                         # a zero's sign is read at its time: never converted for a bad one
                                         (("k1", float("inf"), 0.0), "infinite time"),
                                         (("k1", float("nan"), -0.0), "null or NaN time"),
                                         (("k1", 1e13, 0.0), BEYOND_MICROS),
                                         (("k1", -1e300, 1.0), BEYOND_MICROS)])
def test_bad_row_is_named_not_dropped(spark, bad, reason):
    rows = _rows(random.Random(11), 3, (5, 15), lambda r: r.random())
    rows.insert(len(rows) // 2, bad)
    df = spark.createDataFrame(rows, "k string, t double, v double")
    with pytest.raises(Exception) as info:
        sliding_window(df, key="k", time="t", value="v", aggs=["max", "count"], range=6, slide=3).collect()
    assert f"row rejected ({reason}): k={bad[0]!r}, t={bad[1]!r}, v={bad[2]!r}" in str(info.value), \
        str(info.value)[:2000]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.tuples(st.integers(0, 2), st.integers(-20, 40), st.integers(-3, 3)), min_size=1,
                     max_size=40),
       slide=st.sampled_from([1, 2, 5]), widths=st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True))
def test_property_panes_equal_brute_force(spark, data, slide, widths):
    """Any rows (ties, negative times, empty panes between them), any slide
    and sizes of 1 to 4 panes: the windows equal brute force."""
    rows = [(f"k{k}", float(t), float(v)) for k, t, v in data]
    sizes = {str(w * slide): w * slide for w in widths}
    df = spark.createDataFrame(rows, "k string, t double, v double")
    out = sliding_window(df, key="k", time="t", value="v", aggs=PANE_AGGS, range=sizes,
                         slide=slide).collect()
    _assert_same({(g.k, g.window_end): g.asDict() for g in out}, _oracle(rows, PANE_AGGS, sizes, slide))


@pytest.mark.parametrize("year", [1500, 2026, 2500, 9000])
def test_timestamps_far_from_1970_fall_in_spark_windows(spark, year):
    """Times 1 and 3 microseconds around a window end, in years whose
    microseconds a double cannot all hold (beyond 2^53 us from 1970): each
    plan (panes, the columnar rows, the monoids) puts every row in the
    windows Spark's window() puts it in."""
    base = (dt.datetime(year, 1, 1) - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    df = (spark.createDataFrame([("a", float(i), base + off) for i, off in enumerate((-1, 1, -3, 3))],
                                "k string, v double, tu long").withColumn("ts", F.expr("timestamp_micros(tu)")))
    windows = (df.groupBy("k", F.window("ts", "2 seconds", "1 second"))
               .agg(F.count("v").alias("count"), F.max("v").alias("max"), F.min("v").alias("min"),
                    F.min_by("v", "ts").alias("first")))
    want = {r.end - base: r for r in windows.select(F.expr("unix_micros(window.end)").alias("end"), "*").collect()}
    assert sorted(want) == [0, 1_000_000, 2_000_000]
    for aggs, engine in ((["count", "max", "min"], "auto"), (["count", "max", "first"], "auto"),
                         (["count", "max", "first"], "amta")):
        out = sliding_window(df, key="k", time="ts", value="v", aggs=aggs, range="2 seconds", slide="1 second",
                             engine=engine)
        got = {r.end - base: r for r in out.select(F.expr("unix_micros(window_end)").alias("end"), *aggs).collect()}
        assert {e: tuple(r[a] for a in aggs) for e, r in got.items()} == \
            {e: tuple(r[a] for a in aggs) for e, r in want.items()}, (aggs, engine, _plan(out))


@pytest.mark.parametrize("aggs, engine", [(["max", "count"], "auto"), (["max", "count", "first"], "auto"),
                                          (["max", "count"], "amta")], ids=["panes", "kernels", "monoids"])
def test_keys_across_batches_and_partitions_on_every_plan(spark, aggs, engine):
    """Each plan's per-partition loop (panes, the kernels' rows, the
    monoids): Arrow batches of 7 rows, so a batch holds several keys and a
    key spans batches; one partition for every key, then more partitions
    than keys (empty ones); a bad row inside a batch fails naming its key."""
    rng = random.Random(13)
    rows = [(f"k{k}", float(t), rng.uniform(-9, 9)) for k in range(4)
            for t in sorted(rng.sample(range(-20, 40), rng.randint(3, 25)))]  # distinct times: first is defined
    rng.shuffle(rows)
    schema = "k string, t double, v double"
    common = dict(key="k", time="t", value="v", aggs=aggs, range={"s": 3, "l": 9}, slide=3, engine=engine)
    for partitions in ("1", "9"):
        with session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": "7",
                                  "spark.sql.shuffle.partitions": partitions}):
            got = sliding_window(spark.createDataFrame(rows, schema), **common).collect()
            bad = rows[:len(rows) // 2] + [("k2", 5.5, None)] + rows[len(rows) // 2:]
            with pytest.raises(Exception) as info:
                sliding_window(spark.createDataFrame(bad, schema), **common).collect()
        _assert_same({(g.k, g.window_end): g.asDict() for g in got}, _oracle(rows, aggs, {"s": 3, "l": 9}, 3))
        assert "row rejected (null or NaN value): k='k2', t=5.5, v=None" in str(info.value), str(info.value)[:2000]


def test_a_window_sum_beyond_long_names_the_window_end(spark):
    """An integral sum leaving int64 fails the job naming the window by its
    end (the output's window_end), not as a row's time."""
    df = spark.createDataFrame([("a", 1.0, 2**62), ("a", 2.0, 2**62)], "k string, t double, v long")
    out = sliding_window(df, key="k", time="t", value="v", aggs=["sum"], range=10, slide=5)
    with pytest.raises(Exception) as info:
        out.collect()
    assert f"sum overflows long (int64) at k='a', window_end=5.0: the exact result is {2**63}" in str(info.value)

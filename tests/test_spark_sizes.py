"""Several window sizes in one sliding_window call, and periodic output
(slide=), on a real local Spark against the brute-force oracle and, for
slide=, against Spark's own groupBy(key, window(ts, range, slide))."""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import sqlite3
import sys
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_ops import SlidingWindowError, sliding_window
from spark_ops.spec import WindowSpec
from tests.spark_fixtures import (SCHEMA, _close, as_tuples, assert_outputs, expected, random_rounds, random_rows,
                                  read_sink, run_available_now, ship_by_value, split_by_key,
                                  stream_source, write_parquet)

ship_by_value(sys.modules[__name__])

AGGS = ["max", "mean", "count", "first", "stddev"]


def _frame(spark, rows):
    return spark.createDataFrame(as_tuples(rows), SCHEMA)


def _expected_sizes(rows, aggs, labelled: dict, kind: str) -> dict[int, dict]:
    """The oracle per size, its columns renamed ``<aggregation>_<label>``."""
    out: dict[int, dict] = {}
    for label, size in labelled.items():
        for rid, results in expected(rows, aggs, **{kind: size}).items():
            row = out.setdefault(rid, {"rejected": None})
            for a in aggs:
                row[f"{a}_{label}"] = results[a]
    return out


def _names(aggs, labels):
    return [f"{a}_{label}" for a in aggs for label in labels]


# -- several sizes, per-row output ------------------------------------------------------
@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_range_list_dict_and_durations_both_engines(spark, tmp_path, engine):
    """A list (labels: the numbers as given), a dict of labels and duration
    text give one column per aggregation and size, each equal to the oracle
    at that size; amta keeps its windows in the file store and deletes them."""
    rows = random_rows(random.Random(11), keys=6, per_key=(10, 40))
    store = dict(store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2) if engine == "amta" else {}
    df = _frame(spark, rows)
    got = sliding_window(df, key="k", time="t", value="v", aggs=AGGS, range=[3, 10, 25], engine=engine,
                         **store).collect()
    labelled = {"3": 3, "10": 10, "25": 25}
    assert_outputs(got, rows, _expected_sizes(rows, AGGS, labelled, "range"), _names(AGGS, labelled))
    assert got[0].__fields__[:4] == ["id", "k", "t", "v"]
    assert got[0].__fields__[4:] == _names(AGGS, labelled)

    got = sliding_window(df, key="k", time="t", value="v", aggs=AGGS, range={"short": "3s", "long": "0.5 minutes"},
                         engine=engine, **store).collect()
    labelled = {"short": 3, "long": 30}
    assert_outputs(got, rows, _expected_sizes(rows, AGGS, labelled, "range"), _names(AGGS, labelled))
    if engine == "amta":
        conn = sqlite3.connect(os.path.join(tmp_path, "store", "mta.sqlite3"))
        try:
            assert conn.execute("SELECT count(*) FROM pairs").fetchone()[0] == 0
        finally:
            conn.close()


@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_count_sizes(spark, tmp_path, engine):
    """Count sizes, one larger than any key's rows; amta in the file store."""
    rows = random_rows(random.Random(12), keys=5, per_key=(5, 40))
    store = dict(store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2) if engine == "amta" else {}
    got = sliding_window(_frame(spark, rows), key="k", time="t", value="v", aggs=AGGS, rows=[1, 4, 100],
                         engine=engine, **store).collect()
    labelled = {"1": 1, "4": 4, "100": 100}
    assert_outputs(got, rows, _expected_sizes(rows, AGGS, labelled, "count"), _names(AGGS, labelled))


def test_renamed_ready_aggregation_stays_on_the_columnar_engine(spark):
    """A ready aggregator under another column name (("peak", max's
    aggregator)) runs on the columnar engine (engine="columnar" raises
    otherwise), per row with several sizes and with slide=."""
    from mta import aggregators

    peak = ("peak", aggregators.READY["max"].aggregator, "double")
    rows = random_rows(random.Random(14), keys=4, per_key=(5, 30))
    df = _frame(spark, rows)
    got = sliding_window(df, key="k", time="t", value="v", aggs=[peak, "count"], range=[3, 10],
                         engine="columnar").collect()
    want = _expected_sizes(rows, ["max", "count"], {"3": 3, "10": 10}, "range")
    want = {rid: {c.replace("max_", "peak_"): v for c, v in w.items()} for rid, w in want.items()}
    assert_outputs(got, rows, want, _names(["peak", "count"], ["3", "10"]))
    got = sliding_window(df, key="k", time="t", value="v", aggs=[peak], range=6, slide=3).collect()
    want = {key: {"peak": w["max"]} for key, w in _periodic_oracle(rows, ["max"], 6, 3).items()}
    _assert_same({(g.k, g.window_end): g.asDict() for g in got}, want, ["peak"])


def test_single_size_keeps_names_and_fingerprint():
    """One size: today's column names and fingerprint (streaming restarts);
    several: the fingerprint names them, and changes with them."""
    one = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=10)
    assert [n for n, _ in one.output_columns] == ["max"]
    assert one.fingerprint() == "max=max; range=10; auto; key=k, time=t, value=v"
    two = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=[10, 20])
    three = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=[10, 30])
    assert len({one.fingerprint(), two.fingerprint(), three.fingerprint()}) == 3


def test_streaming_several_sizes(spark, tmp_path):
    """Two availableNow runs: each key's windows of every size resume from
    the file store and the sink equals the oracle at each size (the plan
    with Spark's state: tests/test_spark_event_time.py)."""
    rounds = random_rounds(random.Random(13), 2, keys=6, per_key=(10, 30))
    source, sink, ckpt = (str(tmp_path / d) for d in ("in", "out", "ckpt"))
    os.makedirs(source)
    aggs = ["max", "sum", "count"]
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=aggs,
                         range={"a": 4, "b": "12s"}, store=f"file://{tmp_path}/store", buffer_size=2,
                         cache_size=2, name=f"s-{uuid.uuid4().hex[:8]}")
    for batch in rounds:
        for part in split_by_key(batch, 2):
            write_parquet(source, part)
        run_available_now(out, sink, ckpt)
    rows = [r for batch in rounds for r in batch]
    labelled = {"a": 4, "b": 12}
    assert_outputs(read_sink(spark, sink), rows, _expected_sizes(rows, aggs, labelled, "range"),
                   _names(aggs, labelled))


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.lists(st.integers(0, 6), min_size=1, max_size=4),
                                st.one_of(st.none(), st.integers(0, 3))), min_size=1, max_size=7),
       by_step=st.booleans())
def test_sizes_whose_attempts_die_between_checkpoints_resume_exactly(steps, by_step):
    """An attempt that dies between its sizes' checkpoints leaves their
    versions apart.  A key's windows of three sizes, resumed by micro-batch
    (the plan without Spark state) or by the one version Spark's state
    commits per key (the plans with it: a dead attempt commits nothing), go
    on after attempts that die after any number of the sizes' checkpoints
    (3: all of them, before Spark commits); each committed attempt's counts
    equal brute force over the committed rows, and its label is given back
    to the next."""
    import pyarrow as pa

    import stores
    from spark_ops.windows import open_key_window

    sizes = [2, 5, 100]
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=sizes,
                            store=f"memory://sizes-{uuid.uuid4().hex}")
    before, version, t = [], None, 0.0
    for step, (gaps, dies_after) in enumerate(steps):
        times = []
        for gap in gaps:
            t += gap
            times.append(t)
        for dies in ([dies_after, None] if dies_after is not None else [None]):
            resume = stores.Before("q", step) if by_step else (version if version is not None else False)
            window = open_key_window(spec, "k1", "run", streaming=True, resume=resume)
            try:
                assert window.resumed_label == ("label" if before else None)
                out = window.push(pa.array(times), pa.array([1.0] * len(times)), None)
                if dies == len(sizes):
                    window.checkpoint("label")  # every size checkpointed; the attempt dies before Spark commits
                elif dies is not None:  # dies after some sizes' checkpoints, in the order the window makes them
                    order = window.windows if by_step else window.windows[1:]
                    for one in order[:dies]:
                        one.checkpoint()
                else:
                    version = window.checkpoint("label")
            finally:
                window.close()
        rows = before + times
        want = [[sum(1 for s in rows[:len(before) + i + 1] if s > now - size) for i, now in enumerate(times)]
                for size in sizes]
        assert [column.to_pylist() for column in out] == want
        before = rows
    stores.pooled_store(spec.store).close()


def test_sizes_resumed_by_version_from_a_record_without_their_versions(monkeypatch):
    """Size 0's checkpoint without a label (a record written before the
    label carried the other sizes' versions): every size resumes that
    version, and goes on as brute force says.  With a label of another
    shape: a StoreError naming it (not an error of the clean-up), and size
    0's window, opened first, is closed again."""
    import pyarrow as pa

    import stores
    from spark_ops import windows
    from spark_ops.windows import open_key_window

    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=[2, 100],
                            store=f"memory://sizes-{uuid.uuid4().hex}")
    window = open_key_window(spec, "k1", "run", streaming=True, resume=False)
    window.push(pa.array([1.0, 2.0]), pa.array([1.0, 1.0]), None)
    versions = {one.checkpoint() for one in window.windows}  # each size on its own, as before labels
    window.close()
    (version,) = versions
    window = open_key_window(spec, "k1", "run", streaming=True, resume=version)
    out = window.push(pa.array([3.5]), pa.array([1.0]), None)
    times = [1.0, 2.0, 3.5]
    assert [column.to_pylist() for column in out] == [[sum(1 for t in times if t > 3.5 - size)] for size in (2, 100)]
    window.windows[1].checkpoint()
    version = window.windows[0].checkpoint("a label, no versions")
    window.close()
    closed = []
    real_close = windows.PolicyWindow.close

    def close_then_fail(self):
        closed.append(self)
        real_close(self)
        raise RuntimeError("a close that fails too")

    monkeypatch.setattr(windows.PolicyWindow, "close", close_then_fail)
    with pytest.raises(stores.StoreError, match="carries no versions of the other 1 sizes"):  # the opening's error
        open_key_window(spec, "k1", "run", streaming=True, resume=version)
    assert len(closed) == 1
    stores.pooled_store(spec.store).close()


def test_a_refused_expiry_of_size_0_deletes_no_other_size(tmp_path):
    """An idle key's expiry deletes every size's window, fenced as size 0's
    delete is (its checkpoint label names the other sizes' versions): when
    a newer attempt has claimed size 0 since this one opened the key, and
    is about to open the other sizes, the delete is refused and they are
    kept: the newer attempt resumes every size at that version and goes on
    as brute force says."""
    import pyarrow as pa

    import stores
    from spark_ops.windows import PolicyWindow, open_key_window, size_run

    sizes = [2.0, 100.0]
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=sizes, store=f"file://{tmp_path}")
    window = open_key_window(spec, "k1", "run", streaming=True, resume=False)
    window.push(pa.array([1.0, 2.0]), pa.array([1.0, 1.0]), None)
    version = window.checkpoint("label")
    window.close()
    stale = open_key_window(spec, "k1", "run", streaming=True, resume=version)
    newer = PolicyWindow(spec.one_size(sizes[0]), "k1", size_run("run", 0), resume=version, keep=True)
    with pytest.raises(stores.StoreError):
        stale.expire()
    newer.close()
    window = open_key_window(spec, "k1", "run", streaming=True, resume=version)
    out = window.push(pa.array([3.5]), pa.array([1.0]), None)
    window.close()
    times = [1.0, 2.0, 3.5]
    assert [column.to_pylist() for column in out] == [[sum(1 for t in times if t > 3.5 - size)] for size in sizes]
    stores.pooled_store(spec.store).close()


# -- periodic output --------------------------------------------------------------------
def _periodic_oracle(rows, aggs, r, s):
    """(k, window end) -> {aggregation: value}: every multiple e of s with a
    row of k in [e - r, e), by brute force over the raw rows."""
    from tests.spark_fixtures import ORACLE

    out = {}
    for k in {row["k"] for row in rows}:
        mine = sorted((row["t"], i, row["v"]) for i, row in enumerate(rows) if row["k"] == k)
        lo, hi = min(t for t, _, _ in mine), max(t for t, _, _ in mine)
        e = math.floor(lo / s) * s
        while e <= hi + r:
            window = [v for t, _, v in mine if e - r <= t < e]
            if window:
                out[(k, e)] = {a: ORACLE[a](window) for a in aggs}
            e += s
    return out


def _assert_same(got: dict, want: dict, columns):
    assert set(got) == set(want), (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])
    bad = [(key, c, got[key][c], want[key][c]) for key in want for c in columns
           if not _close(got[key][c], want[key][c])]
    assert not bad, bad[:10]


@pytest.mark.parametrize("r,s", [(10, 2), (6, 6)])
def test_slide_equals_spark_hopping_windows(spark, r, s):
    """A timestamp time column: the output equals Spark's groupBy(key,
    window(ts, r, s)) (window_end = window.end) for hopping and tumbling
    (s == r) windows; the data has gaps longer than the range, so some
    periods hold no row and give no window."""
    from pyspark.sql import functions as F

    rows = random_rows(random.Random(20 + r), keys=5, per_key=(10, 40))
    epoch = dt.datetime(2024, 5, 1, 12, 0, 0)
    df = spark.createDataFrame([(row["k"], epoch + dt.timedelta(seconds=row["t"]), row["v"]) for row in rows],
                               "k string, ts timestamp, v double")
    got = sliding_window(df, key="k", time="ts", value="v", aggs=["max", "min", "sum", "count", "mean", "stddev"],
                         range=f"{r} seconds", slide=s).collect()
    assert got and got[0].__fields__ == ["k", "window_end", "max", "min", "sum", "count", "mean", "stddev"]
    spark_rows = (df.groupBy("k", F.window("ts", f"{r} seconds", f"{s} seconds"))
                  .agg(F.max("v").alias("max"), F.min("v").alias("min"), F.sum("v").alias("sum"),
                       F.count("v").alias("count"), F.avg("v").alias("mean"), F.stddev("v").alias("stddev"))
                  .select("k", F.col("window.end").alias("window_end"), "max", "min", "sum", "count", "mean",
                          "stddev").collect())
    columns = ["max", "min", "sum", "count", "mean", "stddev"]
    _assert_same({(g.k, g.window_end): g.asDict() for g in got},
                 {(w.k, w.window_end): w.asDict() for w in spark_rows}, columns)


def test_slide_composite_key_equals_spark_hopping_windows(spark):
    """key= two columns with slide=: one row per (dc, host) and window, the
    key's columns first, as Spark's groupBy(dc, host, window(ts, r, s))."""
    from pyspark.sql import functions as F

    rows = random_rows(random.Random(41), keys=6, per_key=(10, 30))
    epoch = dt.datetime(2024, 5, 1, 12, 0, 0)
    df = spark.createDataFrame([(f"dc{int(row['k'][1:]) % 2}", int(row["k"][1:]) // 2,
                                 epoch + dt.timedelta(seconds=row["t"]), row["v"]) for row in rows],
                               "dc string, host int, ts timestamp, v double")
    got = sliding_window(df, key=["dc", "host"], time="ts", value="v", aggs=["max", "count"], range=10,
                         slide=5).collect()
    assert got and got[0].__fields__ == ["dc", "host", "window_end", "max", "count"]
    spark_rows = (df.groupBy("dc", "host", F.window("ts", "10 seconds", "5 seconds"))
                  .agg(F.max("v").alias("max"), F.count("v").alias("count"))
                  .select("dc", "host", F.col("window.end").alias("window_end"), "max", "count").collect())
    _assert_same({(g.dc, g.host, g.window_end): g.asDict() for g in got},
                 {(w.dc, w.host, w.window_end): w.asDict() for w in spark_rows}, ["max", "count"])


def test_slide_numeric_time_several_sizes_against_the_oracle(spark):
    """A numeric time column (window_end numeric too), two sizes: the widest
    decides which windows exist; a smaller size's window without rows is
    null (count: 0)."""
    rows = random_rows(random.Random(30), keys=5, per_key=(10, 40))
    aggs = ["max", "count", "first", "last"]
    got = sliding_window(_frame(spark, rows), key="k", time="t", value="v", aggs=aggs,
                         range={"s": 4, "l": 12}, slide=4).collect()
    assert got[0].__fields__ == ["k", "window_end"] + _names(aggs, ["s", "l"])
    wide, small = _periodic_oracle(rows, aggs, 12, 4), _periodic_oracle(rows, aggs, 4, 4)
    want = {key: {**{f"{a}_l": v for a, v in res.items()},
                  **{f"{a}_s": small.get(key, {}).get(a, 0 if a == "count" else None) for a in aggs}}
            for key, res in wide.items()}
    _assert_same({(g.k, g.window_end): g.asDict() for g in got}, want, _names(aggs, ["s", "l"]))


def test_slide_integral_time_column(spark):
    rows = random_rows(random.Random(31), keys=3, per_key=(5, 20))
    df = spark.createDataFrame([(r["k"], int(r["t"]), r["v"]) for r in rows], "k string, t long, v double")
    got = sliding_window(df, key="k", time="t", value="v", aggs=["sum"], range=6, slide=3).collect()
    assert all(isinstance(g.window_end, int) for g in got)
    _assert_same({(g.k, g.window_end): g.asDict() for g in got}, _periodic_oracle(rows, ["sum"], 6, 3), ["sum"])


@pytest.mark.parametrize("bad, reason", [(("k01", 6.0, None), "null or NaN value"),
                                         (("k01", float("inf"), 4.0), "infinite time")])
def test_slide_bad_row_error_names_the_row(spark, bad, reason):
    rows = random_rows(random.Random(32), keys=3, per_key=(5, 10))
    rows.insert(len(rows) // 2, {"id": 999, "k": bad[0], "t": bad[1], "v": bad[2]})
    with pytest.raises(Exception) as info:
        sliding_window(_frame(spark, rows), key="k", time="t", value="v", aggs=["sum"], range=6, slide=3).collect()
    message = str(info.value)
    assert f"row rejected ({reason}): k='k01', t={bad[1]!r}, v={bad[2]!r}" in message, message[:2000]


def _pieces(rng, n):
    cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(0, 5)))) if n > 1 else []
    return list(zip([0] + cuts, cuts + [n]))


@pytest.mark.parametrize("seed", range(20))
def test_windows_pushed_in_pieces_equal_brute_force(seed):
    """Without Spark, a key's rows cut into random pushes (as Arrow batches
    cut them): the columnar engine's several sizes and the periodic windows
    equal brute force over the whole run."""
    import numpy as np

    from spark_ops.columnar import ColumnarWindow
    from spark_ops.periodic import PeriodicWindow
    from tests.spark_fixtures import ORACLE, key_times

    rng = random.Random(seed)
    times = np.array(key_times(rng, rng.randint(1, 80)))
    values = np.array([float(rng.randint(1, 9)) for _ in times])
    names, sizes = ["max", "count", "first"], [3, 7, 40]
    window = ColumnarWindow(names, range=sizes)
    got = [[] for _ in range(len(names) * len(sizes))]
    for a, b in _pieces(rng, len(times)):
        for column, (result, null) in zip(got, window.push(times[a:b], values[a:b])):
            column += [None if null is not None and null[i] else result[i].item() for i in range(len(result))]
    for i, t in enumerate(times):
        for a, name in enumerate(names):
            for s, size in enumerate(sizes):
                want = ORACLE[name]([v for u, v in zip(times[: i + 1], values) if u > t - size])
                assert got[a * len(sizes) + s][i] == want, (i, name, size)

    slide, ranges = 2, [4, 10]
    periodic = PeriodicWindow(names, [r * 1_000_000 for r in ranges], slide * 1_000_000)
    found: dict = {}

    def collect(ends, results):
        for j, end in enumerate(ends):
            found[end // 1_000_000] = [None if null is not None and null[j] else result[j].item()
                                       for result, null in results]

    for a, b in _pieces(rng, len(times)):
        collect(*periodic.push(np.round(times[a:b] * 1_000_000).astype(np.int64), values[a:b]))
    collect(*periodic.close())
    want = {}
    for end in range(0, int(times.max()) + max(ranges) + slide + 1, slide):
        if any(end - max(ranges) <= t < end for t in times):
            want[end] = [ORACLE[n](w) if (w := [v for t, v in zip(times, values) if end - r <= t < end])
                         else (0 if n == "count" else None) for n in names for r in ranges]
    assert found == want


# -- errors ----------------------------------------------------------------------------
def _explodes(batches):
    raise AssertionError("sliding_window ran a Spark job on a misconfigured call")
    yield  # pragma: no cover


def test_errors_raise_before_any_job(spark, tmp_path):
    from pyspark.sql import functions as F

    from tests.spark_fixtures import joined

    df = spark.range(1).mapInArrow(_explodes, "id long, k string, t double, v double, n long")
    os.makedirs(tmp_path / "in")
    stream = stream_source(spark, str(tmp_path / "in"), "id long, k string, t double, v double")
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    ok = dict(key="k", time="t", value="v", aggs=["max"])
    calls = [
        (df, dict(ok, range={"a": 3, "b": 3}), "the size 3 twice"),
        (df, dict(ok, range=[300, "5m"]), "the size 300 twice"),
        (df, dict(ok, range=["1h", "1h"]), "'1h' comes twice"),
        (df, dict(ok, range=[]), "at least one size"),
        (df, dict(ok, range=[3, "5 parsecs"]), "unknown unit"),
        (df, dict(ok, range=[3], rows=[10]), "exactly one of"),
        (df, dict(ok, rows=[3, 2.5]), "rows must be a positive int"),
        (df, dict(ok, range={"": 3}), "labels must be non-empty"),
        (df, dict(ok, aggs=["max", ("max_a", joined(), "string")], range={"a_b": 3, "b": 5}), "would come twice"),
        (df.withColumnRenamed("n", "max_5"), dict(ok, range=[5, 10]), "has the name of an output column"),
        (df, dict(ok, rows=10, slide=5), "slide= is for time windows"),
        (df, dict(ok, range=10, slide=4), "slide= must divide the range"),
        (df, dict(ok, range=10, slide=20), "slide= must divide the range"),
        (df, dict(ok, range=[300, 600], slide=200), "slide= must divide the range '300'"),
        (df, dict(ok, range={"5m": 300, "10m": 600}, slide=120), "slide= must divide the range '5m'"),
        (df, dict(ok, range=3e12, slide=1e12), "longer than a slide= window can be (2,305,843,009,213 seconds)"),
        (df.withColumn("d", F.to_date(F.lit("2026-11-27"))), dict(ok, time="d", range=86400, slide=3600),
         "cast it to a timestamp"),
        (df.withColumn("f", F.col("t").cast("float")), dict(ok, time="f", range=10, slide=5), "is float"),
        (df.withColumn("c", F.col("t").cast("decimal(12,3)")), dict(ok, time="c", range=10, slide=5),
         "is decimal(12,3)"),
        (df.withColumn("window_end", F.col("k")), dict(ok, key="window_end", range=10, slide=5),
         "key column 'window_end'"),
        (df, dict(ok, range=10, slide=5, frame="sql"), "frame= is for"),
        (df, dict(ok, aggs=[("joined", joined(), "string")], range=10, slide=5, engine="columnar"),
         "engine='columnar' cannot run this job"),
        (df, dict(ok, time="n", range=10, slide=2.5), "whole seconds"),
        (df, dict(ok, aggs=["max", "window_end"], range=10, slide=5), "unknown aggregation"),
        (stream, dict(ok, range=10, slide=5, name="n"), "needs a watermark"),
        (stream, dict(ok, range=10, slide=5, store=f"file://{tmp_path}", name="n"), "store= would never be used"),
        (df, dict(ok, range=10, slide=5, store=f"file://{tmp_path}"), "store= would never be used"),
        (df, dict(ok, range=6e-6, slide=1.5e-6), "slide= 1.5e-06 seconds is not a whole number of microseconds"),
        (df, dict(ok, range=[4e-6, 3.5e-6], slide=1e-6), "range 3.5e-06 seconds is not a whole number"),
        (stream, dict(ok, range=10, slide=5), "F.timestamp_seconds('t')).withWatermark('ts'"),
    ]
    for frame, kwargs, words in calls:
        with pytest.raises(SlidingWindowError) as info:
            sliding_window(frame, **kwargs)
            pytest.fail(f"no error for {kwargs}")
        assert words in str(info.value), (kwargs, str(info.value))
    assert set(tracker.getJobIdsForGroup()) == jobs_before
    assert not spark.streams.active


@pytest.mark.parametrize("kind,near_top", [("tinyint", 120), ("int", 2147483640)])
def test_slide_window_ends_past_an_integral_time_type_are_refused_naming_the_cast(spark, kind, near_top):
    """window_end has the time column's type, and a window ends after its
    rows: an int column of epoch seconds just before 2038 gives ends past
    its largest value.  Both periodic plans (panes: count; rows: first) fail
    naming the cast, and with the column cast to bigint the ends are the
    multiples of the slide after the row."""
    from pyspark.sql import functions as F

    from spark_ops import sliding_window

    df = spark.createDataFrame([("a", near_top, 1.0)], "k string, t long, v double") \
        .selectExpr("k", f"CAST(t AS {kind}) AS t", "v")
    for aggs in (["count"], ["first"]):
        with pytest.raises(Exception) as info:
            sliding_window(df, key="k", time="t", value="v", aggs=aggs, range=10, slide=5).collect()
        top = {"tinyint": 127, "int": 2**31 - 1}[kind]
        assert f"past {top}, the largest value of the time column's type" in str(info.value), str(info.value)[:2000]
        assert "cast the time column to bigint" in str(info.value), str(info.value)[:2000]
        wide = df.withColumn("t", F.col("t").cast("bigint"))
        got = sliding_window(wide, key="k", time="t", value="v", aggs=aggs, range=10, slide=5).orderBy("window_end")
        assert [r["window_end"] for r in got.collect()] == [(near_top // 5 + 1) * 5, (near_top // 5 + 2) * 5]


# -- the command line -----------------------------------------------------------------
@pytest.mark.parametrize("option,value,labelled,kind", [
    ("--range", "3s,0.25m", {"3s": 3, "0.25m": 15}, "range"),
    ("--rows", "2,10", {"2": 2, "10": 10}, "count"),
])
def test_cli_several_sizes(spark, tmp_path, option, value, labelled, kind):
    """mta-spark run --range 3s,0.25m (labels as typed) and --rows 2,10."""
    from spark_ops import cli

    rows = random_rows(random.Random(40), keys=4, per_key=(5, 30))
    src = tmp_path / "in.csv"
    with open(src, "w") as f:
        f.write("id,k,t,v\n" + "".join(f"{r['id']},{r['k']},{r['t']!r},{r['v']!r}\n" for r in rows))
    out = tmp_path / "out"
    aggs = ["max", "count"]
    assert cli.main(["run", "--input", str(src), "--output", str(out), "--key", "k", "--time", "t", "--value", "v",
                     "--agg", ",".join(aggs), option, value], spark=spark) == 0
    got = spark.read.parquet(str(out)).collect()
    assert got[0].__fields__ == ["k", "t", "v"] + _names(aggs, labelled)
    # the CLI keeps key, time and value only: identify rows by (k, t, v) as test_cli does
    want = _expected_sizes(rows, aggs, labelled, kind)
    by_row: dict = {}
    for r in rows:
        by_row.setdefault((r["k"], r["t"], r["v"]), []).append(want[r["id"]])
    for g in got:
        options = by_row[(g.k, g.t, g.v)]
        assert any(all(_close(g[c], w[c]) for c in _names(aggs, labelled)) for w in options), g

"""Periodic output (slide=) on the aggregators' monoids: user aggregations in
batch jobs, and streaming queries that emit each window once the watermark
passes its end.

Every output is checked against a brute-force oracle over the raw rows
(every window ``[end - range, end)`` at the multiples of the slide that
holds a row, exactly once), with ``joined``, a NON-commutative user
aggregation (the window's values in order) that shows a row lost, counted
twice or out of order; streaming outputs also against Spark's own batch
``groupBy(key, window(ts, range, slide))`` over the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sys

import pytest
from hypothesis import given, settings, strategies as st

from mta import Aggregator, Monoid
from spark_ops import SlidingWindowError, sliding_window
from spark_ops.panes import PaneWindows
from tests.spark_fixtures import (ORACLE, FailFirstAttempt, _close, as_tuples, joined, random_rows, read_sink,
                                  run_available_now, ship_by_value)
from tests.test_spark_event_time import (BASE, DELAY, Stream as EventTimeStream, aggs, at, closing_row, out_of_order,
                                         write_files)

ship_by_value(sys.modules[__name__])

SCHEMA = "id long, k string, t double, ts timestamp, v double"
READY_AGGS = ["sum", "count", "max", "mean", "first", "last"]
NAMES = READY_AGGS + ["joined"]
RANGE, SLIDE = 10, 5


#: A failed task is tried again (the retry test).
SPARK_MASTER = "local[2,3]"


def periodic_oracle(rows: list[dict], aggs, r, s) -> dict:
    """(key, window end in seconds) -> {aggregation: value}, by brute force:
    every multiple e of s with a row of the key in [e - r, e), the rows in
    (time, arrival) order (``rows`` in arrival order)."""
    out = {}
    for k in {row["k"] for row in rows}:
        mine = sorted(((row["t"], i, row["v"]) for i, row in enumerate(rows) if row["k"] == k), key=lambda x: x[:2])
        e = (min(t for t, _, _ in mine) // s) * s
        while e <= max(t for t, _, _ in mine) + r:
            window = [v for t, _, v in mine if e - r <= t < e]
            if window:
                out[(k, e)] = {a: ORACLE[a](window) for a in aggs}
            e += s
    return out


def assert_windows(got: dict, want: dict, aggs) -> None:
    assert set(got) == set(want), (sorted(set(got) - set(want))[:5], sorted(set(want) - set(got))[:5])
    bad = [(key, a, got[key][a], want[key][a]) for key in want for a in aggs if not _close(got[key][a], want[key][a])]
    assert not bad, bad[:10]


def by_window(out_rows, time_of=lambda end: end) -> dict:
    """Output rows as (key, window end) -> row; a window emitted twice fails."""
    got = {}
    for g in out_rows:
        key = (g["k"], time_of(g["window_end"]))
        assert key not in got, f"window {key} emitted twice"
        got[key] = g.asDict()
    return got


def seconds(end: dt.datetime) -> float:
    """A timestamp from Spark (naive, Python's local zone) as seconds after BASE."""
    return end.timestamp() - BASE.timestamp()


# -- the pane windows alone (no Spark) ------------------------------------------------------
def _concat(a, b):
    return a + b


def _lift(v):
    return "" if v == 0 else f"{v},"  # 0 lifts to the identity


NON_COMMUTATIVE = Aggregator(Monoid(_concat, ""), lift=_lift, name="joined0")


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 3, 7, 19]), st.integers(0, 4)), max_size=40),
       slide=st.integers(1, 3), widths=st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True),
       cuts=st.lists(st.integers(1, 6), max_size=12), resume=st.lists(st.booleans(), max_size=12))
def test_pane_windows_equal_brute_force(steps, slide, widths, cuts, resume):
    """Rows (times in microseconds, values some of which lift to the
    identity) pushed in random pieces, the windows emitted up to each
    piece's last time, the state saved and resumed between pieces: every
    window holding a row comes out once, each size's value the brute-force
    concatenation of its rows in order (a smaller size's empty window the
    identity)."""
    ranges = [w * slide for w in widths]
    rows, t = [], 0
    for i, (step, v) in enumerate(steps):
        t += step
        rows.append((t, v))
    windows, out, at_ = PaneWindows(NON_COMMUTATIVE, ranges, slide), {}, 0
    for piece, again in zip(cuts + [len(rows)], resume + [False] * (len(cuts) + 1)):
        for tt, v in rows[at_:at_ + piece]:
            windows.push(tt, v)
        at_ = min(len(rows), at_ + piece)
        ends, results = windows.emit(rows[at_ - 1][0] if at_ else None)
        for e, r in zip(ends, results):
            assert e not in out
            out[e] = r
        if again:
            windows = PaneWindows(NON_COMMUTATIVE, ranges, slide, windows.state())
        if at_ == len(rows):
            break
    ends, results = windows.emit(None)
    for e, r in zip(ends, results):
        assert e not in out
        out[e] = r
    want = {}
    for e in range(0, (rows[-1][0] if rows else 0) + max(ranges) + slide + 1, slide):
        if any(e - max(ranges) <= tt < e for tt, _ in rows):
            want[e] = ["".join(_lift(v) for tt, v in rows if e - w <= tt < e) for w in ranges]
    assert out == want
    assert windows.state() is None


def test_pane_state_is_encoded_data_never_pickle():
    """The panes' state (kept in Spark's state store) is the store codec's
    data: a state that is not (a pickle, a truncated blob) is refused with
    what to do, a value of a type the codec does not know is refused when
    the state is written, naming register_codec."""
    import pickle

    windows = PaneWindows(NON_COMMUTATIVE, [4], 2)
    windows.push(1, 3)
    state = windows.state()
    assert PaneWindows(NON_COMMUTATIVE, [4], 2, state).emit(None) == windows.emit(None)
    for bad in (pickle.dumps((1, None, [[0, "3"]])), state[:-2]):
        with pytest.raises(ValueError, match="new checkpoint location"):
            PaneWindows(NON_COMMUTATIVE, [4], 2, bad)

    class Opaque:
        pass

    odd = PaneWindows(Aggregator(Monoid(lambda a, b: b, None), lift=lambda v: Opaque()), [4], 2)
    odd.push(1, 3)
    with pytest.raises(TypeError, match="register_codec"):
        odd.state()


# -- batch -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2])
def test_batch_user_monoid_equals_brute_force(spark, seed):
    """A user non-commutative aggregation with slide=, beside ready ones:
    the job runs on the monoids (the columnar kernels cannot compute it)
    and equals brute force; values 0 (the identity's lift in joined0) included."""
    rows = random_rows(random.Random(seed), keys=5, per_key=(10, 40),
                       values=lambda rng: rng.choice([0, 0, rng.randint(1, 9)]))
    df = spark.createDataFrame(as_tuples(rows), "id long, k string, t double, v double")
    got = sliding_window(df, key="k", time="t", value="v", range=RANGE, slide=SLIDE,
                         aggs=["sum", "max", "first", ("joined", joined(), "string")]).collect()
    want = periodic_oracle(rows, ["sum", "max", "first", "joined"], RANGE, SLIDE)
    assert_windows(by_window(got), want, ["sum", "max", "first", "joined"])
    zero = sliding_window(df, key="k", time="t", value="v", range=RANGE, slide=SLIDE,
                          aggs=[("j0", NON_COMMUTATIVE, "string")]).collect()
    assert {(g.k, g.window_end): g.j0 for g in zero} == {
        key: "".join(_lift(v) for v in _window_values(rows, *key)) for key in want}


def _window_values(rows, k, e):
    return [v for t, _, v in sorted((r["t"], i, r["v"]) for i, r in enumerate(rows)
                                    if r["k"] == k and e - RANGE <= r["t"] < e)]


@pytest.mark.parametrize("engine", ["amta", "lmta"])
def test_batch_mta_engine_equals_the_columnar_one(spark, engine):
    """engine='amta'/'lmta' with slide= runs the ready aggregations on
    their monoids, two sizes included: the same windows and values as the
    columnar kernels (and the oracle)."""
    rows = random_rows(random.Random(7), keys=4, per_key=(10, 30))
    df = spark.createDataFrame(as_tuples(rows), "id long, k string, t double, v double")
    kw = dict(key="k", time="t", value="v", aggs=["max", "count", "mean"], range={"s": 5, "l": 10}, slide=5)
    mta = by_window(sliding_window(df, engine=engine, **kw).collect())
    columnar = by_window(sliding_window(df, **kw).collect())
    assert_windows(mta, columnar, ["max_s", "max_l", "count_s", "count_l", "mean_s", "mean_l"])
    wide = periodic_oracle(rows, ["max", "count", "mean"], 10, 5)
    assert_windows({key: {a: g[f"{a}_l"] for a in ("max", "count", "mean")} for key, g in mta.items()}, wide,
                   ["max", "count", "mean"])


# -- streaming -------------------------------------------------------------------------------
class Stream(EventTimeStream):
    """A watermarked slide= query over a file source (one micro-batch per
    file), run with availableNow from its checkpoint, again as files come."""

    def windows(self, df, directory, aggs, **kw):
        return sliding_window(df, key="k", time="ts", value="v", aggs=aggs, range=RANGE, slide=SLIDE, **kw)


def spark_hopping(spark, rows) -> dict:
    """Spark's batch groupBy(k, window(ts, RANGE, SLIDE)) over ``rows``."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([tuple(r[c] for c in ("id", "k", "t", "ts", "v")) for r in rows], SCHEMA)
    out = (df.groupBy("k", F.window("ts", f"{RANGE} seconds", f"{SLIDE} seconds"))
           .agg(F.sum("v").alias("sum"), F.count("v").alias("count"), F.max("v").alias("max"), F.avg("v").alias("mean"))
           .select("k", F.col("window.end").alias("window_end"), "sum", "count", "max", "mean").collect())
    return by_window(out, seconds)


def test_out_of_order_rows_give_every_window_once(spark, tmp_path):
    """Rows of many keys shuffled within the delay over a dozen
    micro-batches: the appended windows (union over micro-batches) are the
    oracle's, each once, and Spark's batch hopping windows over the same
    rows; windows the watermark has not passed (the closing row's) wait."""
    rows = out_of_order(11)
    stream = Stream(spark, str(tmp_path))
    got = by_window(stream.run(rows + [closing_row(rows, len(rows))]), seconds)
    want = periodic_oracle(rows, NAMES, RANGE, SLIDE)
    assert_windows(got, want, NAMES)
    assert_windows({key: g for key, g in got.items()}, spark_hopping(spark, rows), ["sum", "count", "max", "mean"])
    assert stream.dropped_by_spark() == 0
    assert len(stream.progress) > 10, "the rows must come in many micro-batches"
    # every key but the closing row's has written all its windows: its state is gone
    assert stream.progress[-1]["stateOperators"][0]["numRowsTotal"] == 1


def test_several_sizes_in_one_stream(spark, tmp_path):
    """range={"s": 5, "l": 10}: the widest size decides which windows come
    out; each size's columns are the oracle's at that size, a smaller
    size's window without rows the aggregation's empty value (count 0,
    joined "", the others null)."""
    rows = out_of_order(16, keys=4)
    source = os.path.join(str(tmp_path), "in")
    write_files(source, rows + [closing_row(rows, len(rows))], 12)
    df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)
          .withWatermark("ts", f"{DELAY} seconds"))
    out = sliding_window(df, key="k", time="ts", value="v", aggs=aggs(), range={"s": 5, "l": 10}, slide=SLIDE)
    run_available_now(out, os.path.join(str(tmp_path), "out"), os.path.join(str(tmp_path), "ckpt"))
    got = by_window(read_sink(spark, os.path.join(str(tmp_path), "out")), seconds)
    wide, small = periodic_oracle(rows, NAMES, 10, SLIDE), periodic_oracle(rows, NAMES, 5, SLIDE)
    empty = {"count": 0, "sum": 0, "joined": ""}
    want = {key: {**{f"{a}_l": v for a, v in res.items()},
                  **{f"{a}_s": small.get(key, {}).get(a, empty.get(a)) for a in NAMES}}
            for key, res in wide.items()}
    assert_windows(got, want, [f"{a}_{label}" for a in NAMES for label in ("s", "l")])
    assert any(key not in small for key in wide), "some smaller window must be empty"


def test_restart_with_another_slide_is_refused(spark, tmp_path):
    """The panes in a query's state are the slide's: the same checkpoint
    with another slide fails naming the key instead of mixing them."""
    rows = out_of_order(15, keys=2)
    stream = Stream(spark, str(tmp_path))
    stream.run(rows)
    df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(stream.source)
          .withWatermark("ts", f"{DELAY} seconds"))
    write_files(stream.source, [closing_row(rows, len(rows))], 1, stream.files)
    other = sliding_window(df, key="k", time="ts", value="v", aggs=aggs(), range=RANGE, slide=RANGE)
    with pytest.raises(Exception) as info:
        run_available_now(other, stream.sink, stream.ckpt)
    assert "built by another job" in str(info.value), str(info.value)[:3000]


def test_restart_with_open_windows_and_a_failed_task(spark, tmp_path, tmp_path_factory):
    """The query stops with windows open and rows waiting (in Spark's state,
    in its checkpoint), restarts from the checkpoint; in the restarted run a
    task's first attempt fails half-way.  Every window comes out once, as in
    a failure-free run and as the oracle says."""
    rows = out_of_order(4)  # as the per-row test: a task lifts rows of other keys before the marker
    cut = len(rows) // 2
    marker = rows[cut + 10]
    marker["v"] = 12345.0  # the lift fails at it in the first attempt
    tail = rows[cut:] + [closing_row(rows, len(rows))]
    want = periodic_oracle(rows, NAMES, RANGE, SLIDE)

    clean = Stream(spark, str(tmp_path_factory.mktemp("clean")))
    assert_windows(by_window(clean.run(rows + tail[-1:]), seconds), want, NAMES)

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    stream = Stream(spark, str(tmp_path / "run"), lift=FailFirstAttempt({marker["v"]}, str(evidence)))
    first = by_window(stream.run(rows[:cut]), seconds)
    assert 0 < len(first) < len(want), "windows must be open when the query stops"
    got = stream.run(tail)
    (failure,) = [json.load(open(evidence / f)) for f in os.listdir(evidence)]
    assert failure["lifted_before"] > 0, failure
    assert_windows(by_window(got, seconds), want, NAMES)
    assert sorted(map(tuple, got)) == sorted(map(tuple, read_sink(spark, clean.sink)))


def test_late_row_fails_the_query_naming_it(spark, tmp_path):
    rows = out_of_order(13, keys=3)
    newest = max(r["t"] for r in rows)
    late = at(newest - DELAY - 1, len(rows), rows[-1]["k"], 8.0)
    stream = Stream(spark, str(tmp_path))
    stream.run(rows)
    with pytest.raises(Exception) as info:
        stream.run([late])
    message = str(info.value)
    assert "is behind the watermark" in message and f"k={late['k']!r}" in message, message[:3000]
    assert "pass on_bad_row='flag' to leave such rows out of the windows" in message, message[:3000]
    # as the message says: the query restarted from its checkpoint with on_bad_row="flag" runs on
    flagged = Stream.__new__(Stream)
    flagged.__dict__.update(stream.__dict__)
    df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(stream.source)
          .withWatermark("ts", f"{DELAY} seconds"))
    flagged.out = flagged.windows(df, str(tmp_path), aggs(), on_bad_row="flag")
    got = by_window(flagged.run([closing_row(rows, len(rows) + 1)]), seconds)
    assert_windows(got, periodic_oracle(rows, NAMES, RANGE, SLIDE), NAMES)


def test_a_row_exactly_at_the_watermark_is_on_time_as_in_spark_window(spark, tmp_path):
    """A row that arrives at exactly the watermark belongs to windows that
    end after it, none of them written yet: Spark's ``window()`` counts it
    and so does ``slide=`` (behind by a microsecond it is late); every
    window is Spark's batch hopping windows' over all the rows."""
    rows = out_of_order(19, keys=3)
    stream = Stream(spark, str(tmp_path))
    stream.run(rows)
    mark = dt.datetime.fromisoformat(stream.progress[-1]["eventTime"]["watermark"].replace("Z", "+00:00"))
    t = (mark - BASE).total_seconds()
    edge = at(t, len(rows), rows[0]["k"], 7.5)
    assert edge["ts"] == mark
    got = by_window(stream.run([edge, closing_row(rows, len(rows) + 1)]), seconds)
    assert_windows(got, spark_hopping(spark, rows + [edge]), ["sum", "count", "max", "mean"])
    assert_windows(got, periodic_oracle(rows + [edge], NAMES, RANGE, SLIDE), NAMES)
    with pytest.raises(Exception, match="is behind the watermark"):
        stream.run([at(t - 1e-6, len(rows) + 2, rows[1]["k"], 1.0)])


def test_flag_leaves_late_and_bad_rows_out_counted_and_the_query_runs_on(spark, tmp_path):
    """on_bad_row="flag": a late row (behind the watermark when it arrives),
    a row with a null value and one with a null key are left out of every
    window and counted, and the query runs on through them (a restart from
    the checkpoint included): every window is the oracle's over the other
    rows, each once."""
    from spark_ops.excluded import rejected_rows

    rows = out_of_order(17, keys=3)
    cut = len(rows) // 2
    newest = max(r["t"] for r in rows[:cut])
    bad = [at(newest - DELAY - 1, len(rows), rows[0]["k"], 8.0),  # late: the first run's watermark is past it
           {**at(newest, len(rows) + 1, rows[1]["k"], 1.0), "v": None},
           {**at(newest, len(rows) + 2, rows[2]["k"], 1.0), "k": None}]
    stream = Stream(spark, str(tmp_path), on_bad_row="flag")
    before = rejected_rows(spark)
    stream.run(rows[:cut])
    got = by_window(stream.run(bad + rows[cut:] + [closing_row(rows, len(rows) + 3)]), seconds)
    assert rejected_rows(spark) - before == len(bad)
    assert_windows(got, periodic_oracle(rows, NAMES, RANGE, SLIDE), NAMES)


def test_timestamps_far_from_1970_give_spark_windows(spark, tmp_path):
    """Rows of the year 2500 microseconds around a window end, the later
    times first (the release's double seconds merge these times): every
    window is Spark's batch hopping window over the same rows."""
    far = BASE.replace(year=2500)
    rows = [{"id": i, "k": "a", "t": 0.0, "ts": far + dt.timedelta(microseconds=off), "v": float(i + 1)}
            for i, off in enumerate((3, 1, -1, -3))]
    closing = {"id": 4, "k": "zz", "t": 0.0, "ts": far + dt.timedelta(seconds=10 * DELAY), "v": 0.0}
    stream = Stream(spark, str(tmp_path))
    got = by_window(stream.run(rows + [closing], per_file=len(rows)), seconds)
    want = spark_hopping(spark, rows)
    assert sorted(got) == sorted(want) and all(got[w][a] == want[w][a] for w in want for a in ("count", "max"))
    # ending 3 us after the first row's time, 5 s later, 5 s later again: the earliest row first in each
    assert [(got[w]["count"], got[w]["first"], got[w]["last"]) for w in sorted(got)] == \
        [(2, 4.0, 3.0), (4, 4.0, 1.0), (2, 2.0, 1.0)]


def test_null_key_fails_the_query_naming_it(spark, tmp_path):
    """A row with a null key has no window to enter: the query fails naming
    it (never a window of key None)."""
    rows = out_of_order(14, keys=2)
    rows[5] = {**rows[5], "k": None}
    stream = Stream(spark, str(tmp_path))
    with pytest.raises(Exception) as info:
        stream.run(rows)
    message = str(info.value)
    assert "row rejected (null or NaN key): k=None" in message, message[:3000]


def test_streaming_configuration_errors(spark, tmp_path):
    source = spark.readStream.schema(SCHEMA).parquet(str(tmp_path))
    ok = dict(key="k", time="ts", value="v", aggs=["sum"], range=10, slide=5)
    calls = [
        (source, ok, "needs a watermark on the time column"),
        (source.withWatermark("ts", "1 minute"), dict(ok, expire_after="1h"), "expire_after"),
        (source.withWatermark("ts", "1 minute"), dict(ok, engine="columnar"), "engine='columnar' is for batch"),
    ]
    for df, kwargs, words in calls:
        with pytest.raises(SlidingWindowError, match=words):
            sliding_window(df, **kwargs)
    assert not spark.streams.active


@pytest.mark.parametrize("kind", ["timestamp", "timestamp_ntz", "double"])
def test_the_missing_watermark_error_names_a_call_spark_takes(spark, tmp_path, kind):
    """Without a watermark the error suggests one for the time column's type
    (Spark puts watermarks on TIMESTAMP columns alone: a TIMESTAMP_NTZ or a
    number of seconds needs a column made first), and the suggestion, run
    as written, gives a query that starts."""
    from pyspark.sql import functions as F  # noqa: F401 - the suggestion's F

    source = spark.readStream.schema(f"k string, t {kind}, v double").parquet(str(tmp_path))
    with pytest.raises(SlidingWindowError, match="needs a watermark on the time column") as info:
        sliding_window(source, key="k", time="t", value="v", aggs=["sum"], range=10, slide=5)
    message = str(info.value)
    call = message[message.index("df."):].split(" (")[0]
    call, _, time = call.partition(" and time=")
    df = eval(call, {"F": F, "df": source})  # noqa: S307 - the message's own suggestion
    query = sliding_window(df, key="k", time=eval(time) if time else "t", value="v", aggs=["sum"], range=10,
                           slide=5).writeStream.format("noop").start()
    query.stop()
    assert ("cast('timestamp')" in message) == (kind == "timestamp_ntz")

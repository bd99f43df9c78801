"""spark_ops.sliding_window on a real local Spark (local[2]) against a brute-force oracle.

Every test compares Spark's output with :func:`tests.spark_fixtures.expected`,
pure Python over the raw rows (independent of ``mta``): one output row per
input row; a row's window holds the rows of its key at or before it in
(time, arrival) order with time in ``(t - range, t]`` (or the newest N of
them); arrival is the input order in batch.  The data has 20 keys, bursts
of equal times (ties broken by input order), gaps longer than the window,
and is given to Spark shuffled.  The aggregations are every ready one of
``spark_ops.READY`` plus a user monoid that is NOT commutative ("joined": the
window's values as a comma-joined string), so any ordering mistake shows.

* batch: time and count windows, in process memory, in the file store with a
  tiny buffer and cache (nearly every pair goes through SQLite) and in
  Redis, with a timestamp time column and an integer value column; a custom
  slide policy (the paper's "sum at most B"), in batch and streaming;
* batch on the columnar engine (``engine="columnar"``, NumPy, built-in
  aggregations only) with Arrow batches of 13 rows, so that windows reach
  back across batches; the other batch tests run on the MTA (their
  aggregations include a user monoid, or a store);
* streaming: a parquet file source that grows between
  ``trigger(availableNow=True)`` runs of one query restarted from its
  checkpoint each time: the union of the sink equals the oracle over all rows,
  also with adaptive execution coalescing shuffle partitions by size over
  micro-batches of one row and of thousands;
* bad rows: ``on_bad_row="error"`` names the row, ``"flag"`` passes it through
  with null aggregations and a ``rejected`` reason, other rows unaffected;
  in streaming a row older than its key's newest time from an earlier
  micro-batch is rejected (flag) or fails the query (error);
* configuration errors raise SlidingWindowError before any Spark job runs.

One SparkSession (local[2]) serves the whole module.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sqlite3
import sys
import uuid

import pytest
import redis

from mta import policies
from spark_ops import READY, SlidingWindowError, sliding_window
from spark_ops.columnar import AGGREGATIONS as COLUMNAR
from tests.spark_fixtures import (SCHEMA, as_tuples, assert_outputs, expected, is_bad, joined, random_rounds,
                                  random_rows, read_sink, run_available_now, session_conf, ship_by_value,
                                  spark_session, split_by_key, stream_source, write_parquet)

ship_by_value(sys.modules[__name__])

ALL_AGGS = list(READY) + [("joined", joined(), "string")]
ALL_NAMES = list(READY) + ["joined"]


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def _run_batch(spark, data, schema=SCHEMA, **kw):
    df = spark.createDataFrame(as_tuples(data), schema)
    return sliding_window(df, key="k", time="t", value="v", **kw).collect()


# -- batch ------------------------------------------------------------------------
def test_batch_time_window_every_aggregation_in_memory(spark):
    rows = random_rows(random.Random(1))
    got = _run_batch(spark, rows, aggs=ALL_AGGS, range=10)
    assert_outputs(got, rows, expected(rows, ALL_NAMES, range=10), ALL_NAMES)


def test_batch_count_window_file_store_tiny_buffer(spark, tmp_path):
    """rows=7 in the file store with buffer and cache of 2 pairs, so the
    windows' pairs are written to and read back from SQLite; the LogMTA
    engine.  Batch windows are deleted from the store when done."""
    rows = random_rows(random.Random(2), per_key=(10, 80))
    url = f"file://{tmp_path}/store"
    got = _run_batch(spark, rows, aggs=ALL_AGGS, rows=7, store=url, buffer_size=2, cache_size=2,
                     engine="lmta")
    assert_outputs(got, rows, expected(rows, ALL_NAMES, count=7), ALL_NAMES)
    conn = sqlite3.connect(os.path.join(tmp_path, "store", "mta.sqlite3"))
    try:
        assert conn.execute("SELECT count(*) FROM pairs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM meta").fetchone()[0] == 0
    finally:
        conn.close()


def test_batch_redis_timestamp_time_integer_values(spark, redis_url):
    """Time as a timestamp column (range in seconds), integer values, Redis
    with a small buffer and cache."""
    rows = random_rows(random.Random(3), values=lambda r: r.randint(1, 50))
    epoch = dt.datetime(2024, 5, 1, 12, 0, 0)
    aggs = ["max", "mean", "variance", "first", "last", "count", ("joined", joined(), "string")]
    names = [a if isinstance(a, str) else a[0] for a in aggs]
    df = spark.createDataFrame([(r["id"], r["k"], epoch + dt.timedelta(seconds=r["t"]), int(r["v"]))
                                for r in rows], "id long, k string, ts timestamp, v long")
    got = sliding_window(df, key="k", time="ts", value="v", aggs=aggs, range=10, store=redis_url,
                         buffer_size=2, cache_size=4, engine="amta").collect()
    got = [{**g.asDict(), "t": (g.ts - epoch).total_seconds()} for g in got]
    assert_outputs(got, rows, expected(rows, names, range=10), names)
    # batch windows are deleted when done (the fixture flushed Redis before the test)
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.dbsize() == 0, sorted(client.scan_iter(count=1000))[:5]
    finally:
        client.close()


def test_batch_redis_connections_are_pooled_per_worker(spark, redis_url):
    """40 keys, every one its own window (opened, used, deleted) in Redis:
    the executors' Python workers connect a handful of times (one pooled
    store per worker process, its connections reused), not once per key."""
    rows = random_rows(random.Random(13), keys=40, per_key=(5, 15))
    client = redis.Redis.from_url(redis_url)
    try:
        before = int(client.info("stats")["total_connections_received"])
        got = _run_batch(spark, rows, aggs=["sum"], rows=3, store=redis_url, buffer_size=1, cache_size=1,
                         engine="amta")
        connections = int(client.info("stats")["total_connections_received"]) - before - 1  # minus ours
    finally:
        client.close()
    assert_outputs(got, rows, expected(rows, ["sum"], count=3), ["sum"])
    workers = 2  # local[2]: two concurrent tasks, each in a Python worker
    assert connections <= workers * 4, f"{connections} connections for 40 windows"


#: A value geomean cannot take, and the reason its row is rejected with.
NEGATIVE = -3.0
CANNOT_TAKE = "the aggregations cannot take the value: ValueError: geomean: inputs must be positive, got -3.0"


def _with_bad_rows(rng, rows):
    """Rows with a null/NaN value, a null/NaN/infinite time, a null key and a
    value geomean cannot take mixed in."""
    bad = [("k03", None, 1.0), ("k03", 7.0, None), ("k05", float("nan"), 2.0), ("k05", 3.0, float("nan")),
           (None, 4.0, 5.0), ("k07", 0.0, None), ("k05", float("inf"), 1.0), ("k06", 5.0, NEGATIVE)]
    rows = list(rows)
    for i, (k, t, v) in enumerate(bad):
        rows.insert(rng.randrange(len(rows) + 1), {"id": 10_000 + i, "k": k, "t": t, "v": v})
    return rows


def test_batch_bad_rows_flag(spark, tmp_path):
    """on_bad_row="flag": a null key, time or value (or NaN, or an infinite
    time, or a value an aggregation cannot take) gives the row null
    aggregations and the reason in ``rejected``; the other rows' windows are
    as if it were not there.  In the file store."""
    rng = random.Random(4)
    rows = _with_bad_rows(rng, random_rows(rng, keys=8))
    got = _run_batch(spark, rows, aggs=ALL_AGGS, range=6, on_bad_row="flag", store=f"file://{tmp_path}",
                     engine="amta")
    want = expected(rows, ALL_NAMES, range=6, rejected={r["id"]: CANNOT_TAKE for r in rows if r["v"] == NEGATIVE})
    assert sum(w["rejected"] is not None for w in want.values()) == 8
    assert_outputs(got, rows, want, ALL_NAMES, flag=True)


@pytest.mark.parametrize("engine", ["amta", "columnar"])
@pytest.mark.parametrize("bad, reason", [(("k03", 6.0, None), "null or NaN value"),
                                         (("k03", None, 4.0), "null or NaN time"),
                                         (("k03", float("inf"), 4.0), "infinite time")])
def test_batch_bad_row_error_names_the_row(spark, bad, reason, engine):
    rows = random_rows(random.Random(5), keys=4, per_key=(5, 10))
    rows.insert(len(rows) // 2, {"id": 999, "k": bad[0], "t": bad[1], "v": bad[2]})
    aggs = ["sum", ("joined", joined(), "string")] if engine == "amta" else ["sum", "max"]
    with pytest.raises(Exception) as info:
        _run_batch(spark, rows, aggs=aggs, rows=3, engine=engine)
    message = str(info.value)
    assert f"row rejected ({reason}): k='k03', t={bad[1]!r}, v={bad[2]!r}" in message, message[:2000]


@pytest.fixture
def small_arrow_batches(spark):
    """Arrow batches of 13 rows, so most keys' rows span several batches."""
    conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(conf)
    spark.conf.set(conf, "13")
    yield
    spark.conf.set(conf, before)


@pytest.mark.parametrize("size", [dict(rows=7), dict(range=10), dict(rows=1)])
def test_batch_columnar_engine(spark, small_arrow_batches, size):
    """engine="columnar" (which raises unless the job runs on it): every
    aggregation it computes, count and time windows, each key's rows cut
    into batches of 13 so that windows reach back over batch boundaries."""
    rows = random_rows(random.Random(21), per_key=(20, 90))
    got = _run_batch(spark, rows, aggs=list(COLUMNAR), engine="columnar", **size)
    oracle = dict(count=size["rows"]) if "rows" in size else size
    assert_outputs(got, rows, expected(rows, list(COLUMNAR), **oracle), list(COLUMNAR))


def test_batch_columnar_engine_bad_rows_flag_and_integral_values(spark, small_arrow_batches):
    """The columnar engine with bad rows flagged (null key, time or value,
    NaN, infinite time, a value geomean cannot take, with the MTA's
    reason), on a double and on a long value column."""
    rng = random.Random(22)
    rows = _with_bad_rows(rng, random_rows(rng, keys=8))
    names = list(COLUMNAR)
    got = _run_batch(spark, rows, aggs=names, range=6, on_bad_row="flag", engine="columnar")
    negative = {r["id"]: CANNOT_TAKE for r in rows if r["v"] == NEGATIVE}
    assert_outputs(got, rows, expected(rows, names, range=6, rejected=negative), names, flag=True)
    rows = [{**r, "v": None if r["v"] is None or r["v"] != r["v"] else int(r["v"])} for r in rows]
    names = [n for n in COLUMNAR if n not in ("sum", "mean")]  # integral sums stay on the MTA
    got = _run_batch(spark, rows, "id long, k string, t double, v long", aggs=names, rows=4, on_bad_row="flag",
                     engine="columnar")
    negative = {r["id"]: CANNOT_TAKE.replace(repr(NEGATIVE), repr(r["v"])) for r in rows
                if is_bad(r) is None and r["v"] <= 0}  # 0.5 became 0: geomean cannot take it either
    assert_outputs(got, rows, expected(rows, names, count=4, rejected=negative), names, flag=True)


def test_batch_with_a_store_runs_columnar_unless_an_mta_is_asked_for(spark, tmp_path):
    """engine="auto" with a store: the columnar engine, its windows in
    executor memory (the store is never opened), and the reason says how
    to keep them in the store; engine="amta" keeps a window there once it
    outgrows buffer_size + cache_size rows, and in memory until then."""
    from spark_ops.api import choose_engine
    from spark_ops.spec import WindowSpec

    rows = random_rows(random.Random(23), keys=4)
    names = ["max", "mean", "stddev"]
    url = f"file://{tmp_path}/store"
    df = spark.createDataFrame(as_tuples(rows), SCHEMA)
    job = dict(key="k", time="t", value="v", aggs=names, range=8, store=url)
    engine, why = choose_engine(WindowSpec.build(**job), df)
    assert engine == "columnar" and "engine='amta'" in why and url in why
    got = sliding_window(df, **job).collect()
    assert_outputs(got, rows, expected(rows, names, range=8), names)
    assert not os.path.exists(tmp_path / "store")
    engine, why = choose_engine(WindowSpec.build(**job, engine="amta"), df)
    assert engine == "amta" and f"moving to the store {url} if it outgrows 1024 rows" in why
    got = sliding_window(df, **job, engine="amta").collect()
    assert_outputs(got, rows, expected(rows, names, range=8), names)
    assert not os.path.exists(tmp_path / "store")  # every window stayed under 1024 rows
    got = sliding_window(df, **job, engine="amta", buffer_size=1, cache_size=1).collect()
    assert_outputs(got, rows, expected(rows, names, range=8), names)
    assert os.path.exists(tmp_path / "store" / "mta.sqlite3")


def _value(record):
    return record[1]


def test_batch_custom_policy_user_and_ready_aggregations(spark, tmp_path):
    """policy= a SlidePolicy over the (time, value) records: keep the newest
    rows whose values sum to at most 150 (the paper's section 3.2 policy),
    with a user monoid and every ready aggregation, in the file store."""
    rows = random_rows(random.Random(11), keys=8)
    got = _run_batch(spark, rows, aggs=ALL_AGGS, policy=policies.SumAtMost(150, value=_value),
                     store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2)
    want = expected(rows, ALL_NAMES, sum_at_most=150)
    assert any(w["count"] == 0 for w in want.values())  # values above the bound empty the window
    assert_outputs(got, rows, want, ALL_NAMES)


def test_streaming_custom_policy(spark, tmp_path, redis_url):
    """The same policy on a stream (Redis): windows resumed across micro-batches."""
    rounds = random_rounds(random.Random(12), 3, keys=8)
    source = str(tmp_path / "in")
    os.makedirs(source)
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v",
                         aggs=["count", "sum", "first", ("joined", joined(), "string")],
                         policy=policies.SumAtMost(150, value=_value), store=redis_url, buffer_size=1,
                         cache_size=1, name=f"s-{uuid.uuid4().hex[:8]}")
    got = _stream_rounds(spark, tmp_path, out, rounds)
    rows = [r for batch in rounds for r in batch]
    names = ["count", "sum", "first", "joined"]
    assert_outputs(got, rows, expected(rows, names, sum_at_most=150), names)


# -- configuration errors ---------------------------------------------------------------
def _explodes(batches):
    raise AssertionError("sliding_window ran a Spark job on a misconfigured call")
    yield  # pragma: no cover


def test_configuration_errors_raise_before_any_job(spark, tmp_path):
    """Missing columns, unknown aggregations, non-numeric value or time
    columns, a streaming call without a store: SlidingWindowError at the
    call, and no Spark job ran (the input would fail if evaluated)."""
    schema = "id long, k string, t double, v double, s string"
    df = spark.range(1).mapInArrow(_explodes, schema)
    os.makedirs(tmp_path / "in")
    stream = stream_source(spark, str(tmp_path / "in"), schema)
    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup())
    ok = dict(key="k", time="t", value="v", aggs=["max"], range=5)
    calls = [
        (df, dict(ok, key="nope"), "no column 'nope'"),
        (df, dict(ok, time="nope"), "no column 'nope'"),
        (df, dict(ok, value="nope"), "no column 'nope'"),
        (df, dict(ok, aggs=["max", "median"]), "unknown aggregation 'median'"),
        (df, dict(ok, aggs=[]), "at least one aggregation"),
        (df, dict(ok, value="s"), "value column 's' is string, not numeric"),
        (df, dict(ok, time="s"), "time column 's' is string"),
        (df, dict(ok, rows=3), "exactly one of"),
        (df, dict(ok, range=-1), "range must be positive"),
        (df, dict(ok, on_bad_row="skip"), "on_bad_row"),
        (df, dict(ok, aggs=["max", "max"]), "unique"),
        (df.withColumnRenamed("s", "max"), dict(ok), "has the name of an output column"),
        (df.withColumnRenamed("s", "__mta_time"), dict(ok), "uses internally"),
        (df, dict(ok, name="a/b"), "name must be"),
        (df, dict(ok, buffer_size=0), "buffer_size must be a positive int"),
        (df, dict(ok, expire_after=60), "expire_after is for streaming"),
        (stream, dict(ok, store=f"file://{tmp_path}", name="n", expire_after=-1), "expire_after must be"),
        (stream, dict(ok), "needs store="),
        (stream, dict(ok, store=f"file://{tmp_path}"), "needs name="),
        (df, dict(ok, store="file://remote-host/dir"), "bad store URL"),
        (stream, dict(ok, value="s", store=f"file://{tmp_path}"), "not numeric"),
        (df, dict(ok, engine="columnar", range=None, policy=policies.Count(3)),
         "engine='columnar' cannot run this job: it has a custom slide policy"),
        (df, dict(ok, engine="columnar", aggs=["max", ("joined", joined(), "string")]),
         "'joined' is not one the columnar engine computes"),
        (stream, dict(ok, engine="columnar", store=f"file://{tmp_path}", name="n"), "for batch jobs"),
        (df, dict(ok, engine="fast"), "unknown engine 'fast'"),
    ]
    for frame, kwargs, words in calls:
        with pytest.raises(SlidingWindowError) as info:
            sliding_window(frame, **kwargs)
        assert words in str(info.value), (kwargs, str(info.value))
    assert set(tracker.getJobIdsForGroup()) == jobs_before
    assert not spark.streams.active


def test_long_values_keep_their_type_and_exactness(spark):
    """An integral value column: sum, min, max, first and last are longs,
    exact beyond 2^53 (nanosecond timestamps, byte counters); mean is a double."""
    big = 1_700_000_000_000_000_001
    df = spark.createDataFrame([(1, "a", 1.0, big), (2, "a", 2.0, 3), (3, "a", 3.0, big + 2)],
                               "id long, k string, t double, v long")
    out = sliding_window(df, key="k", time="t", value="v", aggs=["max", "min", "first", "last", "count", "mean"],
                         rows=2)
    types = dict(out.dtypes)
    assert [types[c] for c in ("max", "min", "first", "last", "count", "mean")] == ["bigint"] * 5 + ["double"]
    got = sorted((r.id, r.max, r.min, r.first, r.last, r["count"]) for r in out.collect())
    assert got == [(1, big, big, big, big, 1), (2, big, 3, big, 3, 2), (3, big + 2, 3, 3, big + 2, 2)]


def test_nan_keys_are_rejected_like_null_keys(spark):
    rows = [(1, 1.0, 1.0, 5.0), (2, float("nan"), 2.0, 6.0), (3, 1.0, 3.0, 7.0), (4, float("nan"), 4.0, 8.0)]
    df = spark.createDataFrame(rows, "id long, k double, t double, v double")
    out = sliding_window(df, key="k", time="t", value="v", aggs=["sum"], rows=5, on_bad_row="flag").collect()
    assert sorted((r.id, r.sum, r.rejected) for r in out) == [
        (1, 5.0, None), (2, None, "null or NaN key"), (3, 12.0, None), (4, None, "null or NaN key")]


def test_decimal_value_column_is_aggregated_or_refused_up_front(spark):
    """A decimal(10,2) value column passes the "numeric" check, so it must
    either be aggregated or refused with SlidingWindowError at the call."""
    import decimal

    df = spark.createDataFrame([(1, "a", 1.0, decimal.Decimal("1.50")), (2, "a", 2.0, decimal.Decimal("2.25"))],
                               "id long, k string, t double, v decimal(10,2)")
    try:
        out = sliding_window(df, key="k", time="t", value="v", aggs=["sum", "max"], range=5)
    except SlidingWindowError:
        return
    got = sorted((r.id, r.sum, r.max) for r in out.collect())
    assert got == [(1, 1.5, 1.5), (2, 3.75, 2.25)]


def test_timestamp_ntz_time_column_is_windowed_or_refused_up_front(spark):
    """A timestamp_ntz time column passes the time-type check, so it must
    either be windowed or refused with SlidingWindowError at the call."""
    t0 = dt.datetime(2024, 1, 1)
    df = spark.createDataFrame([(1, "a", t0, 1.0), (2, "a", t0 + dt.timedelta(seconds=2), 2.0),
                                (3, "a", t0 + dt.timedelta(seconds=9), 4.0)],
                               "id long, k string, ts timestamp_ntz, v double")
    try:
        out = sliding_window(df, key="k", time="ts", value="v", aggs=["sum"], range=5)
    except SlidingWindowError:
        return
    assert sorted((r.id, r.sum) for r in out.collect()) == [(1, 1.0), (2, 3.0), (3, 4.0)]


# -- streaming ------------------------------------------------------------------------------
def _stream_rounds(spark, tmp_path, out_df, rounds, files_per_round=3):
    """Add each round's rows to the source (keys split over files) and run the
    query with availableNow from its checkpoint; returns the sink's rows."""
    source, sink, ckpt = (str(tmp_path / d) for d in ("in", "out", "ckpt"))
    for batch in rounds:
        for part in split_by_key(batch, files_per_round):
            write_parquet(source, part)
        run_available_now(out_df, sink, ckpt)
    return read_sink(spark, sink)


def test_streaming_file_source_grows_between_runs(spark, tmp_path):
    """Three availableNow runs of one query (restarted from its checkpoint),
    files added before each: windows span the micro-batches (resumed from the
    file store, tiny buffer and cache) and the sink's union equals the oracle
    over all rows, every aggregation."""
    rounds = random_rounds(random.Random(6), 3)
    source = str(tmp_path / "in")
    os.makedirs(source)
    df = stream_source(spark, source)
    out = sliding_window(df, key="k", time="t", value="v", aggs=ALL_AGGS, range=10,
                         store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2,
                         name=f"s-{uuid.uuid4().hex[:8]}")
    got = _stream_rounds(spark, tmp_path, out, rounds)
    rows = [r for batch in rounds for r in batch]
    assert_outputs(got, rows, expected(rows, ALL_NAMES, range=10), ALL_NAMES)


def test_streaming_restart_with_another_job_is_refused(spark, tmp_path):
    """The same checkpoint location and name= restarted with other
    aggregations (or window): the keys' windows were built by the first job,
    so the query fails naming both jobs instead of resuming them."""
    rounds = random_rounds(random.Random(8), 2)
    source = str(tmp_path / "in")
    os.makedirs(source)
    df = stream_source(spark, source)
    common = dict(key="k", time="t", value="v", store=f"file://{tmp_path}/store", name="same-name")
    first = sliding_window(df, aggs=["max"], range=10, **common)
    _stream_rounds(spark, tmp_path, first, rounds[:1])
    changed = sliding_window(df, aggs=["max"], range=20, **common)
    with pytest.raises(Exception) as info:
        _stream_rounds(spark, tmp_path, changed, rounds[1:])
    message = str(info.value)
    assert "built by another job (max=max; range=10; amta; key=k, time=t, value=v)" in message, message[:3000]
    assert "not by this one (max=max; range=20; amta; key=k, time=t, value=v)" in message


#: Adaptive execution coalescing a shuffle's partitions by size, the sizes
#: so small that a micro-batch of one row is one task and one of thousands
#: of rows several.
_COALESCING = {"spark.sql.adaptive.enabled": "true",
               "spark.sql.adaptive.coalescePartitions.enabled": "true",
               "spark.sql.adaptive.advisoryPartitionSizeInBytes": "2k",
               "spark.sql.adaptive.coalescePartitions.minPartitionSize": "1k",
               "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
               "spark.sql.shuffle.partitions": "8"}


def test_streaming_with_adaptive_coalescing_runs_every_task_of_every_micro_batch(spark, tmp_path):
    """Adaptive execution coalescing shuffle partitions (Spark's default,
    and local_session's), micro-batches of one row and of thousands over
    200 keys in turn: a shuffle by key alone runs the one row as one task
    and the thousands as several (shown on this session first), which the
    tasks' progress records would take for a lost or rolled-back store.
    Every micro-batch runs the same 8 tasks (each record stamped by the
    last one, with that count), and the sink's union equals the oracle over
    all rows, a non-commutative aggregation among them."""
    import stores

    big = random_rounds(random.Random(11), 2, keys=200, per_key=(20, 40))
    solo = [{"id": 100_000 + i, "k": "solo", "t": float(i), "v": 1.0 + i} for i in range(2)]
    rounds = [solo[:1], big[0], solo[1:], big[1]]
    aggs = ["sum", "count", "max", "first", "last", ("joined", joined(), "string")]
    names = [a if isinstance(a, str) else a[0] for a in aggs]
    source, store, name = str(tmp_path / "in"), f"file://{tmp_path}/store", f"s-{uuid.uuid4().hex[:8]}"
    os.makedirs(source)
    with session_conf(spark, _COALESCING):
        tasks = [spark.createDataFrame(as_tuples(r), SCHEMA).repartition("k").rdd.getNumPartitions()
                 for r in rounds[:2]]
        assert tasks[0] == 1 < tasks[1], f"adaptive execution did not coalesce by size: {tasks} tasks"
        out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=aggs, range=10,
                             store=store, name=name)
        got = _stream_rounds(spark, tmp_path, out, rounds, files_per_round=1)
    rows = [r for batch in rounds for r in batch]
    assert_outputs(got, rows, expected(rows, names, range=10), names)
    opened = stores.open_store(store)
    try:
        records = [opened.read_meta(f"mta/{name}/~task-{p}")[0] for p in range(8)]
        stamps = [None if r is None else (stores.decode(r)["step"], stores.decode(r)["tasks"]) for r in records]
        assert stamps == [(3, 8)] * 8
    finally:
        opened.close()


class _TimedOutState:
    """Spark's GroupState of a key whose processing-time timeout fired."""

    hasTimedOut = exists = True

    def __init__(self, version: int) -> None:
        self.get = (version, 5.0, None)
        self.removed = False

    def remove(self) -> None:
        self.removed = True


@pytest.mark.parametrize("size", [10, [3, 10]], ids=["one size", "two sizes"])
def test_an_expiry_replayed_after_a_failure_finds_the_window_gone_and_goes_on(size):
    """expire_after's timeout deletes the key's windows; when the task dies
    before Spark commits the state's removal, the replay (the same state,
    the same version) finds them deleted already, and goes on instead of
    failing the query on every retry."""
    import pyarrow as pa
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    import stores
    from spark_ops import passthrough
    from spark_ops.spec import WindowSpec
    from spark_ops.streaming import key_windows
    from spark_ops.windows import open_key_window

    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=size,
                            store=f"memory://expiry-{uuid.uuid4().hex}")
    window = open_key_window(spec, "k1", "run", streaming=True, resume=False)
    window.push(pa.array([1.0, 2.0]), pa.array([1.0, 1.0]), None)
    version = window.checkpoint()
    window.close()
    store = stores.pooled_store(spec.store)
    names = [spec.window_id("k1", f"run~{i}") for i in range(2)] if isinstance(size, list) \
        else [spec.window_id("k1", "run")]
    assert all(store.read_meta(name)[0] is not None for name in names)
    group_keys = passthrough.GroupKeys(StructType([StructField("k", StringType()), StructField("t", DoubleType()),
                                                   StructField("v", DoubleType())]), ["k"])
    per_key = key_windows(spec, "run", ["k", "t", "v"], group_keys, 60.0)
    for attempt in range(2):  # the second: a replay of the first, whose state removal Spark never committed
        state = _TimedOutState(version)
        assert list(per_key(("k1",), iter([]), state)) == []
        assert state.removed, attempt
        assert all(store.read_meta(name)[0] is None for name in names), attempt
    store.close()


class _State:
    """Spark's GroupState of one key, as the per-key function uses it."""

    def __init__(self, value=None, timed_out: bool = False) -> None:
        self.get, self.exists, self.hasTimedOut, self.removed = value, value is not None, timed_out, False

    def update(self, value) -> None:
        self.get, self.exists = value, True

    def remove(self) -> None:
        self.removed, self.exists = True, False

    def setTimeoutDuration(self, ms) -> None:
        pass


@pytest.mark.parametrize("size", [10, [3, 10]], ids=["one size", "two sizes"])
def test_a_stale_expiry_keeps_the_window_a_later_micro_batch_made_anew(size, monkeypatch):
    """Micro-batch 2 expires an idle key (its retry, which Spark commits),
    micro-batch 3 gives the key rows again (a new window), and only then
    does a stale attempt of micro-batch 2 (a task left running on a lost
    executor) run the same expiry: it keeps the new window, and micro-batch
    4 goes on from it as if the stale attempt never ran."""
    import pyarrow as pa
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    from spark_ops import passthrough, streaming
    from spark_ops.plan import ARRIVAL, PACKED, TIME, VALUE
    from spark_ops.spec import WindowSpec

    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count", "sum"], range=size,
                            store=f"memory://stale-expiry-{uuid.uuid4().hex}")
    group_keys = passthrough.GroupKeys(StructType([StructField("k", StringType()), StructField("t", DoubleType()),
                                                   StructField("v", DoubleType())]), ["k"])
    per_key = streaming.key_windows(spec, "run", ["k", "t", "v"], group_keys, 60.0)

    def micro_batch(step, state, rows=()):
        monkeypatch.setattr(streaming, "micro_batch", lambda: step)
        table = pa.table({"k": ["k1"] * len(rows), "t": [t for t, _ in rows], "v": [v for _, v in rows],
                          TIME: [t for t, _ in rows], VALUE: [v for _, v in rows],
                          ARRIVAL: pa.array(range(len(rows)), pa.int64())},
                         schema=pa.schema([("k", pa.string()), ("t", pa.float64()), ("v", pa.float64()),
                                           (TIME, pa.float64()), (VALUE, pa.float64()), (ARRIVAL, pa.int64())]))
        frames = iter([passthrough.frame(passthrough.pack(table))] if rows else [])
        out = [passthrough.unpack(f[PACKED]) for f in per_key(("k1",), frames, state)]
        wide = ["count", "sum"] if size == 10 else ["count_10", "sum_10"]  # every row within 10 seconds
        return [tuple(r.values()) for t in out for r in t.select(["t"] + wide).to_pylist()]

    first = _State()
    micro_batch(1, first, [(1.0, 10.0), (2.0, 20.0)])
    committed = _State(first.get, timed_out=True)
    micro_batch(2, committed)
    assert committed.removed
    again = _State()
    assert micro_batch(3, again, [(100.0, 1.0), (101.0, 2.0)]) == [(100.0, 1, 1.0), (101.0, 2, 3.0)]
    stale = _State(first.get, timed_out=True)
    micro_batch(2, stale)
    assert stale.removed  # the stale attempt's own state goes; the window stays
    assert micro_batch(4, again, [(102.0, 4.0)]) == [(102.0, 3, 7.0)]


@pytest.mark.parametrize("key", [None, float("nan"), (1.0, None)], ids=["null", "NaN", "null in a composite"])
def test_a_null_or_nan_keys_streaming_rows_are_flagged_without_a_window(key, monkeypatch):
    """A null or NaN key (a null in any column of a composite one) has no
    streaming window: open_key_window's takes no row and puts nothing in
    the store however it is resumed, checkpointed and closed, and
    window_names names none (a task tells its batch none to claim).  In the
    per-key function of a query with expire_after, its rows come out
    flagged, Spark's state keeps no version for it, and its expiry finds
    nothing to delete."""
    import pyarrow as pa
    from pyspark.sql.types import DoubleType, StructField, StructType

    import stores
    from spark_ops import passthrough, streaming
    from spark_ops.plan import ARRIVAL, PACKED, TIME, VALUE
    from spark_ops.spec import WindowSpec
    from spark_ops.windows import open_key_window, window_names

    columns = ["a", "b"] if isinstance(key, tuple) else ["k"]
    parts = key if isinstance(key, tuple) else (key,)
    spec = WindowSpec.build(key=columns if len(columns) > 1 else "k", time="t", value="v", aggs=["count", "sum"],
                            range=10, on_bad_row="flag", store=f"memory://null-key-{uuid.uuid4().hex}")
    store = stores.pooled_store(spec.store)
    assert window_names(spec, key, "run") == []
    for step, resume in enumerate([False, True, stores.Before("q", 1)]):
        window = open_key_window(spec, key, "run", streaming=True, resume=resume, durable=False)
        pushed = window.push(pa.array([1.0, 2.0]), pa.array([3.0, 4.0]), None)
        window.checkpoint(["job", 2.0])
        window.close()
        assert [a.to_pylist() for a in pushed] == [[None, None], [None, None], ["null or NaN key"] * 2], step
    assert store.window_names() == []

    fields = [StructField(c, DoubleType()) for c in columns + ["t", "v"]]
    group_keys = passthrough.GroupKeys(StructType(fields), columns)
    per_key = streaming.key_windows(spec, "run", columns + ["t", "v"], group_keys, 60.0)
    monkeypatch.setattr(streaming, "micro_batch", lambda: 1)
    table = pa.table({**{c: pa.array([p, p], pa.float64()) for c, p in zip(columns, parts)},
                      "t": [1.0, 2.0], "v": [3.0, 4.0], TIME: [1.0, 2.0], VALUE: [3.0, 4.0],
                      ARRIVAL: pa.array([0, 1], pa.int64())})
    state = _State()
    out = [passthrough.unpack(f[PACKED]) for f in per_key(parts, iter([passthrough.frame(passthrough.pack(table))]),
                                                          state)]
    assert [(r["t"], r["count"], r["rejected"]) for t in out for r in t.to_pylist()] == [
        (1.0, None, "null or NaN key"), (2.0, None, "null or NaN key")]
    assert state.get[0] is None and store.window_names() == []
    expired = _State(state.get, timed_out=True)
    assert list(per_key(parts, iter([]), expired)) == [] and expired.removed
    assert store.window_names() == []
    store.close()


def test_streaming_expire_after_deletes_idle_windows(spark, tmp_path):
    """expire_after= (a query with a processing-time trigger): keys without
    rows for that long have their windows deleted from the store and their
    Spark state dropped; their later rows start new windows."""
    import time as clock

    source, store = str(tmp_path / "in"), tmp_path / "store"
    os.makedirs(source)
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=["count", "sum"],
                         range=1000, store=f"file://{store}", name="expiring", expire_after=10.0)
    sink = str(tmp_path / "out")
    query = (out.writeStream.format("parquet").option("path", sink).option("checkpointLocation", str(tmp_path / "c"))
             .trigger(processingTime="200 milliseconds").start())

    def wait_for(condition, what):
        deadline = clock.monotonic() + 120
        while not condition():
            assert query.isActive, query.exception()
            assert clock.monotonic() < deadline, f"timed out waiting for {what}"
            clock.sleep(0.1)

    def processed():
        return sum(p["numInputRows"] for p in query.recentProgress)

    def windows():
        if not os.path.exists(store / "mta.sqlite3"):
            return set()
        conn = sqlite3.connect(str(store / "mta.sqlite3"))
        try:
            return {w for (w,) in conn.execute("SELECT window FROM meta")}
        finally:
            conn.close()

    try:
        # a first micro-batch starts the Python workers (the timeout counts from a batch's start)
        write_parquet(source, [{"id": 0, "k": "warm-up", "t": 0.0, "v": 0.0}])
        wait_for(lambda: processed() == 1, "the warm-up file")
        write_parquet(source, [{"id": 1, "k": "a", "t": 1.0, "v": 1.0}, {"id": 2, "k": "b", "t": 1.0, "v": 1.0}])
        wait_for(lambda: processed() == 3, "the first file")
        write_parquet(source, [{"id": 3, "k": "a", "t": 2.0, "v": 2.0}])
        wait_for(lambda: processed() == 4, "the second file")
        assert {"mta/expiring/'a'", "mta/expiring/'b'"} <= windows()
        wait_for(lambda: not windows(), "every key to expire")  # no rows for 10 s
        write_parquet(source, [{"id": 4, "k": "a", "t": 3.0, "v": 4.0}])
        wait_for(lambda: processed() == 5, "the third file")
        wait_for(lambda: len(read_sink(spark, sink)) == 5, "the sink")
    finally:
        query.stop()
    got = sorted((r.id, r["count"], r["sum"]) for r in read_sink(spark, sink))
    assert got == [(0, 1, 0.0), (1, 1, 1.0), (2, 1, 1.0), (3, 2, 3.0), (4, 1, 4.0)]  # a's window started afresh


def _newest_of_round(batch):
    """A key of ``batch`` and its newest time there."""
    key = min(r["k"] for r in batch if r["k"] is not None)
    return key, max(r["t"] for r in batch if r["k"] == key)


def _late_and_bad(rounds):
    """Add to round 1: a row older than its key's newest time of round 0, a
    row at exactly that newest time (accepted), a null value and a null key.
    Returns {id: reason} of the rows to reject."""
    key, newest = _newest_of_round(rounds[0])
    extra = [{"id": 20_000, "k": key, "t": newest - 1, "v": 5.0},
             {"id": 20_001, "k": key, "t": newest, "v": 6.0},
             {"id": 20_002, "k": "k04", "t": 10.0, "v": None},
             {"id": 20_003, "k": None, "t": 10.0, "v": 1.0}]
    rounds[1][:0] = extra  # the late rows first in round 1's order
    return {20_000: f"time {newest - 1} is older than the key's newest time {newest} (out of order)"}


def test_streaming_bad_rows_flag(spark, tmp_path, redis_url):
    """on_bad_row="flag" in streaming (Redis, count window): a row older than
    its key's newest time from an earlier micro-batch, a null value and a null
    key come out with null aggregations and the reason; a row at exactly the
    newest time is accepted; the other rows are unaffected.  The null key
    gets no window in the store: it holds the other keys' and the tasks'
    progress records only."""
    import stores

    rounds = random_rounds(random.Random(7), 2, keys=8, per_key=(10, 30))
    rejected = _late_and_bad(rounds)
    source = str(tmp_path / "in")
    os.makedirs(source)
    name = f"s-{uuid.uuid4().hex[:8]}"
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=ALL_AGGS, rows=5,
                         store=redis_url, buffer_size=2, cache_size=2, on_bad_row="flag", name=name)
    got = _stream_rounds(spark, tmp_path, out, rounds, files_per_round=2)
    rows = [r for batch in rounds for r in batch]
    want = expected(rows, ALL_NAMES, count=5, rejected=rejected)
    assert sorted(i for i, w in want.items() if w["rejected"]) == [20_000, 20_002, 20_003]
    assert_outputs(got, rows, want, ALL_NAMES, flag=True)
    store = stores.open_store(redis_url)
    try:
        held = [w for w in store.window_names() if w.startswith(f"mta/{name}/") and "/~task-" not in w]
    finally:
        store.close()
    assert sorted(held) == sorted({f"mta/{name}/{r['k']!r}" for r in rows if r["k"] is not None})


def test_streaming_late_row_error_fails_the_query_naming_it(spark, tmp_path):
    rounds = random_rounds(random.Random(8), 2, keys=4, per_key=(5, 15))
    key, newest = _newest_of_round(rounds[0])
    rounds[1].append({"id": 30_000, "k": key, "t": newest - 1, "v": 5.0})
    source = str(tmp_path / "in")
    os.makedirs(source)
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=["sum"], range=30,
                         store=f"file://{tmp_path}/store", name=f"s-{uuid.uuid4().hex[:8]}")
    with pytest.raises(Exception) as info:
        _stream_rounds(spark, tmp_path, out, rounds, files_per_round=1)
    message = str(info.value)
    assert (f"row rejected (time {newest - 1} is older than the key's newest time {newest} (out of order)): "
            f"k={key!r}, t={newest - 1!r}, v=5.0") in message, message[:3000]


def test_streaming_late_row_of_a_timestamp_column_is_named_in_its_times(spark, tmp_path):
    """A timestamp time column: the out-of-order reason and the row's text
    write the times as timestamps (UTC), not as the seconds the windows hold."""
    import pandas as pd
    from pyspark.sql import functions as F

    epoch = 1_767_225_600  # 2026-01-01 00:00:00 UTC
    rounds = random_rounds(random.Random(8), 2, keys=4, per_key=(5, 15))
    key, newest = _newest_of_round(rounds[0])
    rounds[1].append({"id": 30_000, "k": key, "t": newest - 0.5, "v": 5.0})
    source = str(tmp_path / "in")
    os.makedirs(source)
    df = stream_source(spark, source).withColumn("ts", F.timestamp_seconds(F.col("t") + epoch)).drop("t")
    out = sliding_window(df, key="k", time="ts", value="v", aggs=["sum"], range=30,
                         store=f"file://{tmp_path}/store", name=f"s-{uuid.uuid4().hex[:8]}")
    with pytest.raises(Exception) as info:
        _stream_rounds(spark, tmp_path, out, rounds, files_per_round=1)
    message = str(info.value)

    def utc(seconds):
        return f"{pd.Timestamp(seconds + epoch, unit='s')} UTC"

    assert (f"row rejected (time {utc(newest - 0.5)} is older than the key's newest time {utc(newest)} "
            f"(out of order)): k={key!r}, ts={utc(newest - 0.5)}, v=5.0") in message, message[:3000]

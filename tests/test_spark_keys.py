"""Composite keys (``key=["a", "b"]``) and a ``date`` time column, on a real
local Spark against the brute-force oracle of :mod:`tests.spark_fixtures`.

The oracle groups rows by the tuple of the key columns' values (a row with
a null in any of them is a bad row, as a null key is).  The key pairs are
chosen so that joining the parts with a separator would merge distinct keys
(``("x,y", "z")`` and ``("x", "y,z")``, quotes, slashes, ``|``), and the first
key column is an integer and the second a string, so a plan that grouped by
one column, or named windows by joined text, gives other results.  The
aggregations include a non-commutative user monoid ("joined") wherever the
engine takes it, so any ordering or mixing of keys' rows shows.

* batch: the columnar engine (windows in executor memory, Arrow batches of
  13 rows so keys' runs cross batches) and ``engine="amta"`` with a file
  store (every pair through SQLite);
* streaming: two runs of one query from its checkpoint, file store, two
  string key columns (one window per pair in the store);
* a date time column (dates across a daylight-saving change in the
  session's zone: a date is midnight UTC whatever the zone);
* configuration errors before any Spark job.

One SparkSession (local[2]) serves the module.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sys
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_ops import SlidingWindowError, sliding_window
from tests.spark_fixtures import (assert_outputs, expected, joined, read_sink, run_available_now, ship_by_value,
                                  spark_session, write_parquet)

ship_by_value(sys.modules[__name__])

SCHEMA = "id long, a long, b string, t double, v double"
#: Pairs that a separator-joined name would merge, and ordinary ones.
PAIRS = [(1, "x,y"), (1, "x"), (1, "x|y"), (1, "x'"), (1, "'"), (1, "a/b"), (12, "3"), (1, "23"), (2, "z")]
AGGS = ["max", "mean", "first", "last", "count", ("joined", joined(), "string")]
NAMES = [a if isinstance(a, str) else a[0] for a in AGGS]
COLUMNAR = ["max", "min", "mean", "sum", "count", "first", "last"]


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def keyed_rows(rng: random.Random, n: int = 160, *, start: float = 0.0, first_id: int = 0,
               pairs=PAIRS) -> list[dict]:
    """Rows over ``pairs`` with times in ``[start, start + 60)``, in
    arrival order (shuffled), bursts of equal times included."""
    out = []
    for i in range(n):
        a, b = rng.choice(pairs)
        t = start + (rng.randrange(30) * 2.0 if rng.random() < 0.3 else round(rng.uniform(0, 60), 3))
        out.append({"id": first_id + i, "a": a, "b": b, "t": t, "v": float(rng.randint(-20, 50))})
    return out


def oracle_rows(rows: list[dict]) -> list[dict]:
    """The rows as the oracle takes them: ``k`` the key tuple, ``None`` when
    a key column is null (a bad row)."""
    return [{"id": r["id"], "k": None if r["a"] is None or r["b"] is None else (r["a"], r["b"]),
             "t": r["t"], "v": r["v"]} for r in rows]


def as_oracle_output(got) -> list[dict]:
    """Spark's output rows with ``k`` as the oracle names the key, after
    checking that the key columns came through unchanged."""
    out = []
    for r in got:
        d = r.asDict()
        out.append({**d, "k": None if d["a"] is None or d["b"] is None else (d["a"], d["b"])})
    return out


def _tuples(rows):
    return [(r["id"], r["a"], r["b"], r["t"], r["v"]) for r in rows]


# -- batch --------------------------------------------------------------------------
def test_batch_columnar_composite_key(spark):
    """Columnar engine, Arrow batches of 13 rows: each (a, b) pair its own
    window, a row with a null in one key column flagged as a null key."""
    rows = keyed_rows(random.Random(1))
    rows += [{"id": 900, "a": None, "b": "x", "t": 5.0, "v": 1.0},
             {"id": 901, "a": 1, "b": None, "t": 5.0, "v": 2.0}]
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "13")
    try:
        df = spark.createDataFrame(_tuples(rows), SCHEMA)
        got = sliding_window(df, key=["a", "b"], time="t", value="v", aggs=COLUMNAR, range=10,
                             engine="columnar", on_bad_row="flag").collect()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    want = expected(oracle_rows(rows), COLUMNAR, range=10)
    assert want[900]["rejected"] == want[901]["rejected"] == "null or NaN key"
    assert_outputs(as_oracle_output(got), oracle_rows(rows), want, COLUMNAR, flag=True)


def test_batch_amta_file_store_composite_key(spark, tmp_path):
    """engine="amta" with the file store, buffer and cache of 2 pairs (the
    windows' pairs go through SQLite, named per key): count window, every
    aggregation including the non-commutative "joined"."""
    rows = keyed_rows(random.Random(2))
    df = spark.createDataFrame(_tuples(rows), SCHEMA)
    got = sliding_window(df, key=["a", "b"], time="t", value="v", aggs=AGGS, rows=4, engine="amta",
                         store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2).collect()
    assert_outputs(as_oracle_output(got), oracle_rows(rows), expected(oracle_rows(rows), NAMES, count=4), NAMES)


def test_batch_null_key_column_is_an_error_naming_every_key_column(spark):
    rows = keyed_rows(random.Random(3), 20) + [{"id": 900, "a": 7, "b": None, "t": 5.0, "v": 1.0}]
    df = spark.createDataFrame(_tuples(rows), SCHEMA)
    with pytest.raises(Exception) as info:
        sliding_window(df, key=["a", "b"], time="t", value="v", aggs=["max"], range=10).collect()
    assert "row rejected (null or NaN key): a=7, b=None, t=5.0, v=1.0" in str(info.value)


def test_single_key_in_a_list_is_the_key_alone(spark):
    """``key=["b"]`` runs exactly as ``key="b"`` (same output)."""
    rows = keyed_rows(random.Random(4), 60)
    df = spark.createDataFrame(_tuples(rows), SCHEMA)
    one = sliding_window(df, key="b", time="t", value="v", aggs=AGGS, range=10).collect()
    listed = sliding_window(df, key=["b"], time="t", value="v", aggs=AGGS, range=10).collect()
    assert sorted(map(tuple, one)) == sorted(map(tuple, listed))
    by_b = [{**r, "k": r["b"]} for r in rows]
    assert_outputs([{**r.asDict(), "k": r["b"]} for r in one], by_b, expected(by_b, NAMES, range=10), NAMES)


# -- streaming ----------------------------------------------------------------------
#: Two string columns: pairs that text joined with a separator (or none)
#: would merge, each of which must keep a window of its own in the store.
STRING_PAIRS = [("x,y", "z"), ("x", "y,z"), ("x','y", "z"), ("x'", "'y', 'z"), ("a/b", "c"), ("a", "b/c"),
                ("", "xy"), ("xy", ""), ("x|y", "z"), ("x", "y|z")]


def test_streaming_composite_key_file_store(spark, tmp_path):
    """Two availableNow runs of one query from its checkpoint (file store,
    tiny buffer and cache), keyed by two string columns whose joined text
    would collide: windows per (a, b) span the runs, one window in the
    store per key; a null key column is flagged; the sink's union equals
    the oracle over all rows."""
    import sqlite3

    import pyarrow as pa

    rng = random.Random(5)
    rounds = [keyed_rows(rng, 80, pairs=STRING_PAIRS),
              keyed_rows(rng, 80, start=100.0, first_id=1000, pairs=STRING_PAIRS)]
    rounds[1].append({"id": 2000, "a": None, "b": "x,y", "t": 120.0, "v": 3.0})
    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.string()), ("t", pa.float64()),
                        ("v", pa.float64())])
    source, sink, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    os.makedirs(source)
    name = f"s-{uuid.uuid4().hex[:8]}"
    out = sliding_window(spark.readStream.schema("id long, a string, b string, t double, v double").parquet(source),
                         key=["a", "b"], time="t", value="v", aggs=AGGS, range=30,
                         store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2, on_bad_row="flag",
                         name=name)
    for batch in rounds:
        write_parquet(source, batch, schema)
        run_available_now(out, sink, ckpt)
    rows = [r for batch in rounds for r in batch]
    want = expected(oracle_rows(rows), NAMES, range=30)
    assert want[2000]["rejected"] == "null or NaN key"
    assert_outputs(as_oracle_output(read_sink(spark, sink)), oracle_rows(rows), want, NAMES, flag=True)
    conn = sqlite3.connect(os.path.join(tmp_path, "store", "mta.sqlite3"))
    try:
        windows = {w for (w,) in conn.execute("SELECT window FROM meta")}
    finally:
        conn.close()
    keys = {(r["a"], r["b"]) for r in rows if r["a"] is not None}
    assert {f"mta/{name}/{k!r}" for k in keys} <= windows


#: Timestamps across the whole range Spark holds, most outside pandas' nanosecond
#: range (1677-2262), which the state API's grouping key crosses.
FAR_TIMES = [dt.datetime(1, 1, 1), dt.datetime(1600, 6, 1, 12, 0, 0, 1), dt.datetime(2026, 3, 29, 1, 30),
             dt.datetime(2300, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]


@pytest.mark.parametrize("nested", [False, True])
def test_streaming_timestamp_keys_across_the_whole_range(spark, tmp_path, nested):
    """A streaming query keyed by a ``timestamp`` and a ``timestamp_ntz``
    column (``nested``: a struct holding the one, an array holding the
    other), with key values from year 1 to 9999 (pandas, which the state
    API's grouping key crosses, holds 1677-2262): two runs from the
    checkpoint, each key's window spanning them, equal to the oracle; the
    key columns pass through unchanged."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    rng = random.Random(9)
    pairs = [(a.replace(tzinfo=dt.timezone.utc), b) for a in FAR_TIMES for b in rng.sample(FAR_TIMES, 2)]
    rounds = [keyed_rows(rng, 70, pairs=pairs), keyed_rows(rng, 70, start=100.0, first_id=1000, pairs=pairs)]
    schema = pa.schema([("id", pa.int64()), ("a", pa.timestamp("us", tz="UTC")), ("b", pa.timestamp("us")),
                        ("t", pa.float64()), ("v", pa.float64())])
    source, sink, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ckpt")
    os.makedirs(source)
    stream = spark.readStream.schema("id long, a timestamp, b timestamp_ntz, t double, v double").parquet(source)
    if nested:
        stream = stream.withColumn("sk", F.struct(F.col("a").alias("at"))).withColumn("ak", F.array("b"))
    out = sliding_window(stream, key=["sk", "ak"] if nested else ["a", "b"], time="t", value="v", aggs=AGGS,
                         range=30, store=f"file://{tmp_path}/store", name=f"ts-{uuid.uuid4().hex[:8]}")
    for batch in rounds:
        write_parquet(source, batch, schema)
        run_available_now(out, sink, ckpt)
    rows = [r for batch in rounds for r in batch]
    got = spark.read.parquet(sink).toArrow().to_pylist()  # Arrow: no session time zone in the way
    assert {(g["a"], g["b"]) for g in got} == {(r["a"], r["b"]) for r in rows}
    if nested:
        assert all(g["sk"] == {"at": g["a"]} and g["ak"] == [g["b"]] for g in got)
    assert_outputs(as_oracle_output([_Row(g) for g in got]), oracle_rows(rows),
                   expected(oracle_rows(rows), NAMES, range=30), NAMES)


class _Row(dict):
    def asDict(self) -> dict:
        return dict(self)


#: Timestamp keys (microseconds since the epoch): two instants an hour apart
#: that Los Angeles' 2024 fall-back makes one wall-clock time there, each
#: also at 30 minutes, and '9999-12-31 23:59:59' in Los Angeles, which is
#: past year 9999 in UTC (no Python datetime holds it).
FOLD_KEYS = [round(dt.datetime(2024, 11, 3, h, m, tzinfo=dt.timezone.utc).timestamp() * 1e6)
             for h in (8, 9) for m in (0, 30)] + [(253402300799 + 8 * 3600) * 10**6]


@pytest.mark.parametrize("key, micros", [("k", "unix_micros(k)"), (["z", "k"], "unix_micros(k)"),
                                         ("sk", "unix_micros(sk.t)")])
@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_timestamp_keys_are_instants_whatever_the_session_zone(spark, engine, key, micros):
    """With the session in Los Angeles, keys one hour apart at its fall-back
    fold are two keys (not one wall-clock time), alone, beside a struct key
    column (which Arrow cannot compare) and inside a struct, and a key past
    year 9999 in UTC is one like any other: per-row and slide= windows
    equal the oracle's over the keys' microseconds, and the key columns
    come out unchanged."""
    from pyspark.sql import functions as F

    rng = random.Random(17)
    rows = [{"id": i, "k": rng.choice(FOLD_KEYS), "t": float(rng.randrange(40)), "v": float(rng.randint(-9, 9))}
            for i in range(120)]
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = (spark.createDataFrame([(r["id"], r["k"], r["t"], r["v"]) for r in rows], "id long, us long, t double, "
                                    "v double").withColumn("k", F.timestamp_micros("us"))
              .withColumn("z", F.struct(F.lit(1).alias("z"))).withColumn("sk", F.struct(F.col("k").alias("t"))))
        out = sliding_window(df, key=key, time="t", value="v", aggs=AGGS, range=10, engine=engine)
        got = out.withColumn("k", F.expr(micros)).drop("sk").collect()  # year 10000 has no datetime
        periodic = (sliding_window(df, key=key, time="t", value="v", aggs=["count", "max"], range=10, slide=5,
                                   engine=engine).withColumn("k", F.expr(micros)).drop("sk").collect())
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    assert all(g["k"] == g["us"] for g in got)  # the key column unchanged
    assert_outputs(got, rows, expected(rows, NAMES, range=10), NAMES)
    want = {}
    for r in rows:
        for end in range(int(r["t"]) // 5 * 5 + 5, int(r["t"]) + 11, 5):
            want.setdefault((r["k"], float(end)), []).append(r["v"])
    assert {(g["k"], g["window_end"]): (g["count"], g["max"]) for g in periodic} == \
        {w: (len(vs), max(vs)) for w, vs in want.items()}


@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_keys_holding_nan_inside_are_one_key_as_spark_groups_them(spark, engine):
    """A struct or array key with a NaN inside (Python's NaN is not equal to
    itself) is one key, as Spark's window functions and groupBy take it:
    per-row counts equal Spark's own, and slide= gives one window per key."""
    df = spark.sql("SELECT id, named_struct('a', IF(id % 3 = 0, double('NaN'), double(id % 3))) AS sk, "
                   "array(IF(id % 3 = 0, double('NaN'), 1.0D), 2.0D) AS ak, double(id) AS t, 1.0D AS v FROM range(30)")
    df.createOrReplaceTempView("nan_keys")
    for key in ("sk", "ak"):
        spark_counts = [r[0] for r in spark.sql(f"SELECT count(*) OVER (PARTITION BY {key} ORDER BY t RANGE BETWEEN 9 "
                                                 "PRECEDING AND CURRENT ROW) FROM nan_keys ORDER BY id").collect()]
        got = sliding_window(df, key=key, time="t", value="v", aggs="count", range=10, engine=engine)
        assert [r["count"] for r in got.orderBy("id").collect()] == spark_counts, key
        windows = sliding_window(df, key=key, time="t", value="v", aggs="count", range=40, slide=40,
                                 engine=engine).collect()
        assert sorted(r["count"] for r in windows) == sorted(r["count"] for r in df.groupBy(key).count().collect()), key


# -- the SQL table function ------------------------------------------------------------
def test_sql_function_composite_key(spark):
    """``key => array('a', 'b')``: the oracle's rows (the function
    partitions its table by both key columns itself)."""
    from spark_ops.sql import register_sql

    register_sql(spark)
    rows = keyed_rows(random.Random(8), 80)
    spark.createDataFrame(_tuples(rows), SCHEMA).createOrReplaceTempView("keyed")
    aggs = ["max", "mean", "first", "last", "count"]

    got = spark.sql(f"""SELECT * FROM mta_sliding_window(TABLE(keyed), order => 'id',
                        key => array('a', 'b'), time => 't', value => 'v', aggs => '{','.join(aggs)}',
                        range => 10)""").collect()
    assert_outputs(as_oracle_output(got), oracle_rows(rows), expected(oracle_rows(rows), aggs, range=10), aggs)


# -- a date time column ------------------------------------------------------------
def test_date_time_column_is_midnight_utc(spark):
    """Dates around New York's 2024 spring change with the session in that
    zone: a range of 2 days holds the dates (t - 2 days, t] counted in UTC
    days (a local midnight would make the day before the change 23 hours).
    The date column comes out unchanged."""
    rng = random.Random(6)
    day0 = dt.date(2024, 3, 1)
    rows = [{"id": i, "k": rng.choice("pq"), "d": day0 + dt.timedelta(days=rng.randrange(20)),
             "v": float(rng.randint(0, 9))} for i in range(80)]
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.createDataFrame([(r["id"], r["k"], r["d"], r["v"]) for r in rows],
                                   "id long, k string, d date, v double")
        got = sliding_window(df, key="k", time="d", value="v", aggs=AGGS, range="2 days").collect()
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    epoch = dt.date(1970, 1, 1)
    seconds = [{**r, "t": (r["d"] - epoch).days * 86400.0} for r in rows]
    by_id = {r["id"]: r for r in rows}
    assert all(g["d"] == by_id[g["id"]]["d"] for g in got)
    assert_outputs([{**g.asDict(), "t": (g["d"] - epoch).days * 86400.0} for g in got], seconds,
                   expected(seconds, NAMES, range=2 * 86400), NAMES)


# -- configuration errors -------------------------------------------------------------
@pytest.mark.parametrize("key, message", [
    ([], "key= needs a column"),
    (["a", "b", "a"], "key column 'a' given more than once"),
    (["a", "t"], "column 't' is both a key column and the time column"),
    (["v", "b"], "column 'v' is both a key column and the value column"),
    (["a", "nope"], "no column 'nope' in the input"),
    (["a", 3], "key= takes column names"),
])
def test_bad_key_lists_are_clear_errors_before_any_job(spark, key, message):
    df = spark.createDataFrame([(1, 1, "x", 1.0, 1.0)], SCHEMA)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(None)
    with pytest.raises(SlidingWindowError, match=message):
        sliding_window(df, key=key, time="t", value="v", aggs=["max"], range=10)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(None) == jobs


@pytest.mark.parametrize("column", ["b COLLATE UTF8_LCASE", "named_struct('x', b COLLATE UNICODE_CI)",
                                    "array(b COLLATE UTF8_LCASE)"])
def test_a_collated_string_key_is_refused_naming_the_fix(spark, column):
    """Spark sorts and groups a collated string by its collation ('a' and
    'A' one key in UTF8_LCASE) where the windows compare bytes: refused,
    at any depth, in the DataFrame call and the SQL function."""
    from spark_ops.sql import register_sql

    df = spark.createDataFrame([(1, 1, "a", 1.0, 1.0), (2, 1, "A", 2.0, 1.0)], SCHEMA).selectExpr(
        "id", f"{column} AS c", "t", "v")
    fix = r"F.lower\('c'\).cast\('string'\)"
    with pytest.raises(SlidingWindowError, match=r"key column 'c' is .*collate (UTF8_LCASE|UNICODE_CI).*" + fix):
        sliding_window(df, key="c", time="t", value="v", aggs=["count"], range=10)
    register_sql(spark)
    df.createOrReplaceTempView("collated")
    with pytest.raises(Exception, match="whose equal strings can differ in bytes"):
        spark.sql("SELECT * FROM mta_sliding_window(TABLE(collated), key => 'c', time => 't', value => 'v', "
                  "aggs => 'count', range => 10)").collect()
    if column.startswith("b "):  # the fix the message names: 'a' and 'A' one key, as Spark had them
        from pyspark.sql import functions as F

        fixed = df.withColumn("c", F.lower("c").cast("string"))
        assert [r["count"] for r in sliding_window(fixed, key="c", time="t", value="v", aggs=["count"], range=10)
                .orderBy("id").collect()] == [1, 2]


# -- mta-spark run ----------------------------------------------------------------------
def test_cli_run_composite_key_keep_columns_option_schema(spark, tmp_path, capsys):
    """``--key dc,host`` over a CSV read with ``--schema`` (host as text:
    inferred, "01" and "1" would be one integer key) and ``--option
    nullValue=n/a`` (such a value is null, a flagged bad row, not text);
    ``--keep-columns`` keeps the other column.  Against the oracle grouping
    by (dc, host)."""
    from tests.test_cli import oracle, run_cli

    rng = random.Random(7)
    rows, seen = [], set()
    while len(rows) < 120:
        v = round(rng.uniform(-50, 50), 2)
        if v not in seen:
            seen.add(v)
            rows.append((rng.choice(["eu", "us"]), rng.choice(["01", "1", "2"]), rng.randint(0, 80) / 2, v))
    src = tmp_path / "in.csv"
    with open(src, "w") as f:
        f.write("dc,host,t,v,note\n")
        for i, (dc, host, t, v) in enumerate(rows):
            f.write(f"{dc},{host},{t!r},{v!r},n{i}\n")
        f.write("eu,01,3.0,n/a,bad\n")
    aggs = ["max", "mean", "count", "first", "last"]
    out = tmp_path / "out"
    assert run_cli(spark, "run", "--input", src, "--output", out, "--key", "dc,host", "--time", "t", "--value", "v",
                   "--agg", ",".join(aggs), "--range", 10, "--on-bad-row", "flag", "--keep-columns",
                   "--option", "nullValue=n/a", "--schema", "dc STRING, host STRING, t DOUBLE, v DOUBLE, note STRING"
                   ) == 0
    assert "per dc, host" in capsys.readouterr().err
    result = spark.read.parquet(str(out))
    assert result.columns == ["dc", "host", "t", "v", "note", *aggs, "rejected"]
    got = result.collect()
    (bad,) = [r for r in got if r["note"] == "bad"]
    assert bad["v"] is None and bad["rejected"] == "null or NaN value" and bad["max"] is None
    good = [r for r in got if r["note"] != "bad"]
    assert sorted(int(r["note"][1:]) for r in good) == list(range(len(rows)))
    want = oracle([((dc, host), t, v) for dc, host, t, v in rows], aggs, range=10)
    for r in good:
        assert (r["dc"], r["host"], r["t"], r["v"]) == rows[int(r["note"][1:])]
        w = want[((r["dc"], r["host"]), r["t"], r["v"])]
        for a in aggs:
            assert r[a] == pytest.approx(w[a], rel=1e-9, abs=1e-9), (r, a)


def test_cli_run_without_keep_columns_writes_the_window_columns(spark, tmp_path):
    src = tmp_path / "in.csv"
    with open(src, "w") as f:
        f.write("dc,host,t,v,note\neu,a,1.0,2.0,x\neu,a,2.0,4.0,y\n")
    from tests.test_cli import run_cli

    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "out", "--key", "host,dc", "--time", "t",
                   "--value", "v", "--agg", "sum", "--rows", 2) == 0
    result = spark.read.parquet(str(tmp_path / "out"))
    assert result.columns == ["host", "dc", "t", "v", "sum"]
    assert sorted(r["sum"] for r in result.collect()) == [2.0, 6.0]


def test_cli_stream_composite_key_with_reader_option(spark, tmp_path, capsys):
    """``mta-spark stream --key dc,host`` over semicolon-separated files
    (``--option sep=;``, so a host may hold a comma) in two available-now
    runs, the second file's times after the first's: the output equals the
    oracle grouping by (dc, host) over all rows."""
    from tests.test_cli import oracle, run_cli

    rng = random.Random(9)
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    values = iter(rng.sample(range(-5000, 5000), 120))
    parts = [[(rng.choice(["eu", "us"]), rng.choice(["a,b", "a"]), start + rng.randint(0, 60) / 2, next(values) / 10)
              for _ in range(60)] for start in (0.0, 40.0)]
    aggs = ["max", "count", "last"]
    args = ["stream", "--input", incoming, "--output", out, "--checkpoint", tmp_path / "ckpt",
            "--store", f"file:{tmp_path / 'state'}", "--key", "dc,host", "--time", "t", "--value", "v",
            "--agg", ",".join(aggs), "--range", 8, "--option", "sep=;",
            "--schema", "dc STRING, host STRING, t DOUBLE, v DOUBLE"]
    for i, part in enumerate(parts):
        with open(incoming / f"part-{i}.csv", "w") as f:
            f.write("dc;host;t;v\n" + "".join(f"{dc};{host};{t!r};{v!r}\n" for dc, host, t, v in part))
        assert run_cli(spark, *args) == 0
    rows = [r for part in parts for r in part]
    result = spark.read.parquet(str(out))
    assert result.columns == ["dc", "host", "t", "v", *aggs]
    got = result.collect()
    assert len(got) == len(rows)
    want = oracle([((dc, host), t, v) for dc, host, t, v in rows], aggs, range=8)
    for r in got:
        w = want[((r["dc"], r["host"]), r["t"], r["v"])]
        for a in aggs:
            assert r[a] == pytest.approx(w[a], rel=1e-9, abs=1e-9), (r, a)


@pytest.mark.parametrize("key, extra, message", [
    ("dc,dc", (), "key column 'dc' given more than once"),
    ("dc,", (), "key= takes column names"),
    ("dc,t", (), "column 't' is both a key column and the time column"),
    ("dc,nope", (), "no column 'nope' in the input"),
    ("dc", ("--schema", "dc STRING, t DOUBLE, v"), "bad --schema"),
    ("dc", ("--option", "nullValue"), "expected KEY=VALUE"),
])
def test_cli_key_and_reader_errors(spark, tmp_path, capsys, key, extra, message):
    from tests.test_cli import one_error_line, run_cli

    src = tmp_path / "in.csv"
    with open(src, "w") as f:
        f.write("dc,t,v\neu,1.0,2.0\n")
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "out", "--key", key, "--time", "t",
                   "--value", "v", "--agg", "max", "--range", 10, *extra) == 2
    assert message in one_error_line(capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "out")


# -- names without Spark -----------------------------------------------------------------
def test_single_key_names_unchanged_and_composite_names_distinct():
    """A single key's window id and fingerprint are those streaming queries
    before composite keys wrote (a restarted query finds its windows);
    composite keys that text joining would merge get distinct ids."""
    from spark_ops.spec import WindowSpec

    one = WindowSpec.build(key="host", time="ts", value="mem", aggs=["max"], range=60)
    assert one.fingerprint() == "max=max; range=60; auto; key=host, time=ts, value=mem"
    assert one.window_id("web-1", "q") == "mta/q/'web-1'"
    assert WindowSpec.build(key=["host"], time="ts", value="mem", aggs=["max"], range=60) == one
    two = WindowSpec.build(key=["dc", "host"], time="ts", value="mem", aggs=["max"], range=60)
    assert two.fingerprint() != WindowSpec.build(key=["host", "dc"], time="ts", value="mem", aggs=["max"],
                                                 range=60).fingerprint()
    ids = {two.window_id(k, "q") for a, b in STRING_PAIRS for k in [(a, b)]}
    assert len(ids) == len(STRING_PAIRS)
    assert two.key_text(("eu", None)) == "dc='eu', host=None"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2, float("nan"), None]), max_size=12), st.booleans())
def test_runs_of_one_numeric_key_column(cells, integral):
    """Runs of one key column: a new run where the key changes, each null
    or NaN a run of its own, whatever path finds them (NumPy for a numeric
    column without nulls, Arrow else)."""
    import pyarrow as pa

    from spark_ops.batch import runs

    if integral:
        cells = [c for c in cells if c is None or c == c]
    column = pa.array(cells, pa.int64() if integral else pa.float64())
    starts = [i for i, c in enumerate(cells) if i == 0 or c is None or c != c or cells[i - 1] is None
              or c != cells[i - 1]]
    assert runs(column) == list(zip(starts, starts[1:] + [len(cells)]))


def test_runs_and_trailing_peers_over_several_key_columns():
    """Runs break where any key column changes; a null in one column is a
    run of its own; peers share every key column and the time."""
    import pyarrow as pa

    from spark_ops.batch import runs
    from spark_ops.frames import trailing_peers

    a = pa.array([1, 1, 1, 1, None, None, 2])
    b = pa.array(["x", "x", "y", "y", "y", "y", "y"])
    assert runs([a, b]) == [(0, 2), (2, 4), (4, 5), (5, 6), (6, 7)]
    times = pa.array([1.0, 2.0, 2.0, 2.0], pa.float64())
    assert trailing_peers([pa.array([1, 2, 2, 2]), pa.array(["x", "x", "y", "y"])], times) == 2

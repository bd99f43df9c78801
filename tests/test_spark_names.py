"""Column names as Spark resolves them, on a real local Spark.

* Names with a dot or a backtick (``host.name`` from a CSV header, a JSON
  export's flattened fields), which PySpark's ``mapInArrow`` and
  ``applyInPandasWithState`` cannot look up by name: per-row windows
  against the brute-force oracle of :mod:`tests.spark_fixtures`; ``slide=``
  and streaming plans against the same job over the columns renamed plain;
  the CLI over a CSV whose header has them.
* Names equal but for case, which Spark resolves as one name: an input
  column like an output or internal column, or two output columns, is an
  error before any job (an internal one was silently replaced, an output one
  left two columns a later ``select`` cannot tell apart).

One SparkSession (local[2]) serves the module.
"""

from __future__ import annotations

import os
import random
import sys
import uuid

import pytest

from spark_ops import SlidingWindowError, sliding_window
from tests.spark_fixtures import (assert_outputs, expected, run_available_now, ship_by_value, spark_session,
                                  write_parquet)

ship_by_value(sys.modules[__name__])

#: The oracle's columns and the awkward names they take in the input.
AWKWARD = {"k": "host.name", "t": "t`s", "v": "v.x`y", "id": "row.id"}
AGGS = ["max", "mean", "count", "first"]


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def rows_(seed: int, n: int = 150, start: float = 0.0, first_id: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = [{"id": first_id + i, "k": rng.choice(["a.b", "c", "d`e"]), "t": start + float(rng.randrange(40)),
             "v": float(rng.randint(-9, 9))} for i in range(n)]
    rows[3]["v"] = None  # a bad row: flagged with on_bad_row="flag"
    return rows


def awkward_frame(spark, rows):
    df = spark.createDataFrame([(r["id"], r["k"], r["t"], r["v"], r["k"] + "!") for r in rows],
                               "id long, k string, t double, v double, extra string")
    return df.toDF(AWKWARD["id"], AWKWARD["k"], AWKWARD["t"], AWKWARD["v"], "extra.col")


def plain(rows_out) -> list[dict]:
    back = {v: k for k, v in AWKWARD.items()}
    return [{back.get(c, c): x for c, x in r.asDict().items()} for r in rows_out]


@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_per_row_windows_over_awkward_names(spark, engine):
    """Key, time, value and a passed-through column named with dots and
    backticks: every input row once, the columns under their own names,
    windows equal to the oracle's; flagged bad rows too."""
    rows = rows_(1)
    out = sliding_window(awkward_frame(spark, rows), key=AWKWARD["k"], time=AWKWARD["t"], value=AWKWARD["v"],
                         aggs=AGGS, range=10, engine=engine, on_bad_row="flag")
    assert out.columns == [AWKWARD["id"], AWKWARD["k"], AWKWARD["t"], AWKWARD["v"], "extra.col", *AGGS, "rejected"]
    got = plain(out.collect())
    assert all(g["extra.col"] == g["k"] + "!" for g in got)
    assert_outputs(got, rows, expected(rows, AGGS, range=10), AGGS, flag=True)


@pytest.mark.parametrize("engine, on_bad_row", [("auto", "error"), ("amta", "error"), ("auto", "flag")])
def test_slide_over_awkward_names(spark, engine, on_bad_row):
    """``slide=`` (Spark's panes, the kernels' plan, the monoids' plan, and
    bad rows left out first) over awkward names gives the windows of the
    same job over plain names."""
    rows = [r for r in rows_(2) if r["v"] is not None or on_bad_row == "flag"]
    df = awkward_frame(spark, rows)
    kw = dict(aggs=["max", "count"], range=10, slide=5, engine=engine, on_bad_row=on_bad_row)
    got = sliding_window(df, key=AWKWARD["k"], time=AWKWARD["t"], value=AWKWARD["v"], **kw)
    want = sliding_window(df.toDF("id", "k", "t", "v", "extra"), key="k", time="t", value="v", **kw)
    assert got.columns == [AWKWARD["k"], *want.columns[1:]]
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, want.collect()))


@pytest.mark.parametrize("watermark", [False, True])
def test_streaming_over_awkward_names(spark, tmp_path, watermark):
    """A streaming query (without a watermark: per task; with one: Spark's
    state keyed by the awkward key column) over awkward names, two runs from
    its checkpoint, equal to the oracle."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    rounds = [rows_(3, 80, start=1.0), rows_(4, 80, start=100.0, first_id=1000)]  # the epoch is Spark's first watermark
    for r in rounds:
        r[3]["v"] = 1.0
    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()), ("v", pa.float64())])
    source, sink, ckpt = (str(tmp_path / n) for n in ("in", "out", "ckpt"))
    os.makedirs(source)
    stream = spark.readStream.schema("id long, k string, t double, v double").parquet(source)
    stream = stream.toDF(AWKWARD["id"], AWKWARD["k"], AWKWARD["t"], AWKWARD["v"])
    time = AWKWARD["t"]
    if watermark:
        stream = stream.withColumn("ts.c", F.timestamp_seconds(F.col(f"`{time.replace('`', '``')}`")))
        stream, time = stream.withWatermark("`ts.c`", "0 seconds"), "ts.c"
    out = sliding_window(stream, key=AWKWARD["k"], time=time, value=AWKWARD["v"], aggs=AGGS, rows=5,
                         store=f"file://{tmp_path}/store", name=f"aw-{uuid.uuid4().hex[:8]}")
    if watermark:  # a row far ahead moves the watermark past every other row
        rounds.append([{"id": 9999, "k": "zz", "t": 5000.0, "v": 0.0}])
    for batch in rounds:
        write_parquet(source, batch, schema)
        run_available_now(out, sink, ckpt)
    run_available_now(out, sink, ckpt)
    rows = [r for batch in rounds for r in batch if r["id"] != 9999]
    got = [g for g in plain(spark.read.parquet(sink).collect()) if g["id"] != 9999]
    assert_outputs(got, rows, expected(rows, AGGS, count=5), AGGS)


def test_streaming_slide_over_awkward_names(spark, tmp_path):
    """A streaming ``slide=`` query keyed by an awkward column gives the
    windows of the batch job over plain names once the watermark passes."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    rows = [r for r in rows_(5, 120) if r["v"] is not None]
    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()), ("v", pa.float64())])
    source, sink, ckpt = (str(tmp_path / n) for n in ("in", "out", "ckpt"))
    os.makedirs(source)
    stream = (spark.readStream.schema("id long, k string, t double, v double").parquet(source)
              .withColumn("ts", F.timestamp_seconds("t")).toDF(AWKWARD["id"], AWKWARD["k"], "t", "v", "ts")
              .withWatermark("ts", "0 seconds"))
    kw = dict(value="v", aggs=["max", "count"], range=10, slide=5)
    out = sliding_window(stream, key=AWKWARD["k"], time="ts", name=f"as-{uuid.uuid4().hex[:8]}", **kw)
    write_parquet(source, rows, schema)
    write_parquet(source, [{"id": 9999, "k": "z", "t": 1000.0, "v": 0.0}], schema)  # moves the watermark past
    for _ in range(2):
        run_available_now(out, sink, ckpt)
    got = {tuple(r) for r in spark.read.parquet(sink).collect() if r[0] != "z"}
    batch = spark.createDataFrame([(r["k"], r["t"], r["v"]) for r in rows], "k string, t double, v double")
    want = sliding_window(batch.withColumn("ts", F.timestamp_seconds("t")), key="k", time="ts", **kw).collect()
    assert got == {tuple(r) for r in want}


@pytest.mark.parametrize("column, message", [
    ("MAX", "has the name of an output column"), ("Rejected", "has the name of an output column"),
    ("__MTA_ARRIVAL", "uses internally"), ("__Mta_Value", "uses internally")])
def test_names_equal_but_for_case_are_refused(spark, column, message):
    """An input column named like an output or an internal column but for
    case is refused before any job, naming it (Spark resolves it as the
    same name: an internal one was replaced, an output one came twice)."""
    df = spark.createDataFrame([(1, 1.0, 2.0, 3.0)], "k long, t double, v double, x double").toDF("k", "t", "v",
                                                                                                   column)
    with pytest.raises(SlidingWindowError, match=message) as err:
        sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=10, on_bad_row="flag")
    assert repr(column) in str(err.value)


@pytest.mark.parametrize("kw, message", [
    (dict(aggs=["max"], range={"5m": 300, "5M": 60}), "would come twice"),
    (dict(aggs={"Peak": "max", "peak": "min"}, range=10), "would come twice"),
    (dict(aggs=["max"], range=10, slide=5, key="Window_End"), "slide='s output column")])
def test_output_names_equal_but_for_case_are_refused(spark, kw, message):
    df = spark.createDataFrame([(1, 1.0, 2.0)], "Window_End long, t double, v double")
    with pytest.raises(SlidingWindowError, match=message):
        sliding_window(df, **{"key": "Window_End", "time": "t", "value": "v", **kw})


def test_an_aggregation_named_like_slides_window_end_is_named_as_such(spark):
    """With ``slide=`` the output has a ``window_end`` column of the job's
    own: an aggregation of that name (but for case) is refused as clashing
    with it, not with an input column the input does not have."""
    df = spark.createDataFrame([("a", 1.0, 2.0)], "k string, t double, v double")
    with pytest.raises(SlidingWindowError, match="the column 'window_end' this job adds") as err:
        sliding_window(df, key="k", time="t", value="v", aggs={"Window_End": "max"}, range=10, slide=5)
    assert "input column" not in str(err.value)


@pytest.mark.parametrize("header, given, keys", [
    (("host.name", "t", "v"), ("host.name", "t", "v"), None),
    (("Host", "TS", "Mem"), ("host", "ts", "mem"), {"a.b": "007", "c": "7", "d`e": "x"})])
def test_cli_csv_header_names(spark, tmp_path, header, given, keys):
    """``mta-spark run`` over a CSV whose header has a dotted key column, or
    names the arguments give but for case (``--key host`` for ``Host``; the
    key still read as text, "007" and "7" two keys): the output's windows
    equal the oracle's, under the header's names."""
    from spark_ops import cli

    rows = [r for r in rows_(6, 60) if r["v"] is not None]
    for r in rows:
        r["k"] = keys[r["k"]] if keys else r["k"]
    src = tmp_path / "in.csv"
    src.write_text(",".join(header) + "\n" + "".join(f"{r['k']},{r['t']},{r['v']}\n" for r in rows))
    out = tmp_path / "out"
    assert cli.main(["run", "--input", str(src), "--output", str(out), "--key", given[0], "--time", given[1],
                     "--value", given[2], "--rows", "4", "--agg", "max"], spark=spark) == 0
    got = spark.read.parquet(str(out))
    assert got.columns == [*header, "max"]
    want = expected(rows, ["max"], count=4)
    assert sorted(tuple(g) for g in got.collect()) == sorted((r["k"], r["t"], r["v"], want[r["id"]]["max"])
                                                            for r in rows)


#: The oracle's columns as a user's input may spell them, and as the user
#: names them in a call (equal but for case: Spark's ``df["host"]``).
CASED = {"id": "ID", "k": "Host", "t": "TS", "v": "Mem"}
CALLED = {"k": "host", "t": "ts", "v": "MEM"}


def cased_rows(spark, rows):
    df = spark.createDataFrame([(r["id"], r["k"], r["t"], r["v"]) for r in rows], "id long, k string, t double, "
                               "v double")
    return df.toDF(*(CASED[c] for c in ("id", "k", "t", "v")))


def uncased(rows_out) -> list[dict]:
    back = {v: k for k, v in CASED.items()}
    return [{back.get(c, c): x for c, x in r.asDict().items()} for r in rows_out]


@pytest.mark.parametrize("engine, kw", [("auto", {}), ("amta", {}), ("auto", {"ties": "any"})])
def test_names_taken_as_spark_resolves_them(spark, engine, kw):
    """Key, time and value named but for case (``key="host"`` for a column
    ``Host``) are the input's columns, as Spark's own ``df["host"]``: the
    output keeps the input's names and equals the oracle's windows."""
    rows = rows_(7)
    out = sliding_window(cased_rows(spark, rows), key=CALLED["k"], time=CALLED["t"], value=CALLED["v"],
                         aggs=AGGS, range=10, engine=engine, on_bad_row="flag", **kw)
    assert out.columns == ["ID", "Host", "TS", "Mem", *AGGS, "rejected"]
    assert_outputs(uncased(out.collect()), rows, expected(rows, AGGS, range=10), AGGS, flag=True)


def test_value_columns_and_their_aggregations_as_spark_resolves_them(spark):
    """Several value columns and the ones ``max(...)`` names, but for case:
    the output columns carry the input's spelling."""
    rows = [r for r in rows_(8) if r["v"] is not None]
    df = spark.createDataFrame([(r["id"], r["k"], r["t"], r["v"], -r["v"]) for r in rows],
                               "ID long, Host string, TS double, Cpu double, mem double")
    out = sliding_window(df, key="HOST", time="ts", value=["cpu", "MEM"], aggs=["max(CPU)", "min(Mem)"], rows=3)
    assert out.columns == ["ID", "Host", "TS", "Cpu", "mem", "max_Cpu", "min_mem"]
    want = expected(rows, ["max", "min"], count=3)
    got = {r["ID"]: (r["max_Cpu"], r["min_mem"]) for r in out.collect()}
    assert got == {r["id"]: (want[r["id"]]["max"], -want[r["id"]]["max"]) for r in rows}


def test_a_name_two_columns_answer_to_is_refused(spark):
    """Where the session tells names apart by case and two columns answer to
    the name given (``HOST`` for ``host`` and ``Host``), neither is guessed:
    the error says the name matches both and must be spelled exactly, in
    the DataFrame call (key or value) and in SQL."""
    from pyspark.errors import AnalysisException

    from spark_ops.sql import register_sql

    ambiguous = "column 'HOST' matches 'host' and 'Host' (equal but for case, which this session tells apart); " \
                "spell it exactly"
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        df = spark.createDataFrame([("a", "b", 1.0, 2.0, 3.0)],
                                   "host string, Host string, t double, cpu double, CPU double")
        with pytest.raises(SlidingWindowError) as err:
            sliding_window(df, key="HOST", time="t", value="cpu", aggs=["max"], range=10)
        assert str(err.value) == ambiguous
        with pytest.raises(SlidingWindowError, match=r"^column 'Cpu' matches 'cpu' and 'CPU' .*; spell it exactly$"):
            sliding_window(df, key="host", time="t", value=["Cpu"], aggs=["max"], range=10)
        register_sql(spark)
        df.createOrReplaceTempView("two_hosts")
        with pytest.raises(AnalysisException, match=r"column 'HOST' matches 'host' and 'Host' \(equal but for"):
            spark.sql("SELECT * FROM mta_sliding_window(TABLE(two_hosts), key => 'HOST', time => 't', "
                      "value => 'cpu', aggs => 'max', range => 10)").collect()
        got = sliding_window(df, key="Host", time="t", value="CPU", aggs=["max"], range=10).collect()
        assert [tuple(r) for r in got] == [("a", "b", 1.0, 2.0, 3.0, 3.0)]
    finally:
        spark.conf.unset("spark.sql.caseSensitive")


def test_sql_names_taken_as_spark_resolves_them(spark):
    """The SQL table function takes ``key => 'host'`` for a column ``Host``
    (and ``order =>`` likewise), like any other name in Spark SQL."""
    from spark_ops.sql import register_sql

    rows = [r for r in rows_(9) if r["v"] is not None]
    register_sql(spark)
    cased_rows(spark, rows).createOrReplaceTempView("cased_readings")
    out = spark.sql("SELECT * FROM mta_sliding_window(TABLE(cased_readings), key => 'host', time => 'ts', "
                    "value => 'MEM', aggs => 'max,count', range => 10, order => 'id')")
    assert out.columns == ["ID", "Host", "TS", "Mem", "max", "count"]
    assert_outputs(uncased(out.collect()), rows, expected(rows, ["max", "count"], range=10), ["max", "count"])

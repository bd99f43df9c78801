"""The SQL table function ``mta_sliding_window`` (spark_ops.sql): its rows
equal the brute-force oracle (tests/spark_fixtures.expected) and the
DataFrame call's, value for value, on every engine; its mistakes are
errors that name the fix."""

from __future__ import annotations

import datetime as dt
import math
import random
import sys

import pytest

from spark_ops import READY, SlidingWindowError, sliding_window
from spark_ops.sql import register_sql
from tests.spark_fixtures import (SCHEMA, as_tuples, assert_outputs, canonical, expected, random_rows, ship_by_value,
                                  spark_session)

ship_by_value(sys.modules[__name__])

NAMES = list(READY)


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    register_sql(session)
    yield session
    session.stop()


def _call(table: str, *, order: str | None = "id", **arguments) -> str:
    """The function over ``table``, rows of equal time ordered by ``order``
    (the ids: the arrival order), ``arguments`` as constants."""
    arguments = {**arguments, "order": order} if order else arguments
    args = ", ".join(f"{name} => {value!r}" for name, value in arguments.items())
    return f"SELECT * FROM mta_sliding_window(TABLE({table}), {args})"


def _table(spark, rows, name="readings", schema=SCHEMA):
    spark.createDataFrame(as_tuples(rows), schema).createOrReplaceTempView(name)
    return name


@pytest.mark.parametrize("engine", ["auto", "amta", "lmta"])
def test_time_window_every_ready_aggregation(spark, engine):
    """Ties ordered by order => 'id': the ids are the arrival order, which
    is the oracle's (and the DataFrame call's) order of equal times."""
    rows = random_rows(random.Random(11))
    got = spark.sql(_call(_table(spark, rows), key="k", time="t", value="v", aggs=",".join(NAMES), range=10,
                          engine=engine)).collect()
    assert_outputs(got, rows, expected(rows, NAMES, range=10), NAMES)


def test_count_window_in_the_file_store_with_bad_rows_flagged(spark, tmp_path):
    rows = random_rows(random.Random(12), per_key=(5, 40))
    rows += [{"id": 10_000, "k": "k01", "t": 3.0, "v": None}, {"id": 10_001, "k": None, "t": 2.0, "v": 1.0},
             {"id": 10_002, "k": "k02", "t": None, "v": 4.0}, {"id": 10_003, "k": "k02", "t": 1.0, "v": float("nan")}]
    aggs = ["max", "first", "last", "sum", "stddev"]
    got = spark.sql(_call(_table(spark, rows), key="k", time="t", value="v", aggs=",".join(aggs), rows=4,
                          engine="amta", store=f"file://{tmp_path}/store", on_bad_row="flag")).collect()
    assert_outputs(got, rows, expected(rows, aggs, count=4), aggs, flag=True)
    assert sum(g.rejected is not None for g in got) == 4


@pytest.mark.parametrize("time_type", ["timestamp", "timestamp_ntz"])
def test_same_rows_as_the_dataframe_call(spark, time_type):
    """Timestamps for time, 64-bit integers beyond 2^53 for values, a passed
    column of another type: both calls give the same rows, exactly."""
    rng = random.Random(13)
    epoch = dt.datetime(2025, 3, 1, 8, 0, 0)
    rows = [(i, f"h{rng.randrange(4)}", epoch + dt.timedelta(seconds=i * 7 + rng.randrange(7)),
             rng.choice([2**53 + 1, -(2**62), 2**62, rng.randrange(-5, 5)]), f"note {i}") for i in range(400)]
    df = spark.createDataFrame(rows, f"id long, host string, ts {time_type}, n long, note string")
    df.createOrReplaceTempView("counts")
    aggs = ["max", "min", "first", "last", "count", "mean"]
    sql = spark.sql(_call("counts", key="host", time="ts", value="n",
                          aggs=",".join(aggs), range=60)).collect()
    frame = sliding_window(df, key="host", time="ts", value="n", aggs=aggs, range=60).collect()
    assert sql[0].__fields__ == frame[0].__fields__
    assert canonical(sql) == canonical(frame)
    assert {type(r.max) for r in sql} == {int}


@pytest.mark.parametrize("sizes, labels, values", [
    ("'5,12.5'", ["5", "12.5"], None), ("array(5, 12.5)", ["5", "12.5"], None),
    ("map('short', '5s', 'long', '12.5 seconds')", ["short", "long"], [5.0, 12.5]),
    # Spark hands a map over in no set order: its sizes come smallest first, however written
    ("map('long', '12.5 seconds', 'mid', '8s', 'short', '5s')", ["short", "mid", "long"], [5.0, 8.0, 12.5]),
    ("map('r10', '10s', 'r3', '3s')", ["r3", "r10"], [3.0, 10.0]),
    ("'3,2'", ["3", "2"], None),
    ("array(INTERVAL '5' SECOND, INTERVAL '12.5' SECOND)", ["5", "12.5"], None)])
def test_several_sizes_in_one_call(spark, sizes, labels, values):
    """range => several sizes: one column per aggregation and size, each
    equal to the oracle over its own size, and to the DataFrame call."""
    rows = random_rows(random.Random(15), keys=4)
    aggs = ["max", "count", "first"]
    table = _table(spark, rows)
    got = spark.sql(f"SELECT * FROM mta_sliding_window(TABLE({table}), order => 'id', key => 'k', "
                    f"time => 't', value => 'v', aggs => 'max,count,first', range => {sizes})").collect()
    assert list(got[0].__fields__)[4:] == [f"{a}_{label}" for a in aggs for label in labels]
    for label, size in zip(labels, values or [float(v) for v in labels]):
        want = expected(rows, aggs, range=size)
        assert_outputs([{**{c: g[c] for c in ("id", "k", "t", "v")}, **{a: g[f"{a}_{label}"] for a in aggs}}
                        for g in got], rows, want, aggs)
    df = spark.table(table)
    frame = sliding_window(df, key="k", time="t", value="v", aggs=aggs,
                           range=dict(zip(labels, values)) if values else [v.strip() for v in labels])
    assert canonical(got) == canonical(frame.collect())


def test_a_size_given_twice_in_an_array_is_named(spark):
    """array(5, 5.0) is two decimals of one value: the size twice, as the
    DataFrame call says, not one column."""
    from pyspark.errors import AnalysisException

    table = _table(spark, random_rows(random.Random(3), keys=2))
    with pytest.raises(AnalysisException, match="comes twice"):
        spark.sql(f"SELECT * FROM mta_sliding_window(TABLE({table}), key => 'k', time => 't', value => 'v', "
                  "aggs => 'max', range => array(5, 5.0))")


def test_counts_as_text_and_an_interval_range(spark):
    """rows => '3,10' (counts typed as text, as the command line's --rows)
    and range => INTERVAL '10' SECOND: each equals the oracle."""
    rows = random_rows(random.Random(19), keys=3)
    table = _table(spark, rows)
    got = spark.sql(f"SELECT * FROM mta_sliding_window(TABLE({table}), order => 'id', key => 'k', time => 't', "
                    "value => 'v', aggs => 'count,max', rows => '3,10')").collect()
    for n in (3, 10):
        picked = [{**{c: g[c] for c in ("id", "k", "t", "v")}, "count": g[f"count_{n}"], "max": g[f"max_{n}"]}
                  for g in got]
        assert_outputs(picked, rows, expected(rows, ["count", "max"], count=n), ["count", "max"])
    got = spark.sql(f"SELECT * FROM mta_sliding_window(TABLE({table}), order => 'id', key => 'k', time => 't', "
                    "value => 'v', aggs => 'count,max', range => INTERVAL '10' SECOND)").collect()
    assert_outputs(got, rows, expected(rows, ["count", "max"], range=10), ["count", "max"])


def test_a_fractional_range_literal(spark):
    """A SQL literal such as 2.5 is a decimal; the range takes it as seconds."""
    rows = random_rows(random.Random(14), keys=3)
    got = spark.sql(_call(_table(spark, rows), key="k", time="t", value="v", aggs="max,count", range=2.5)).collect()
    assert_outputs(got, rows, expected(rows, ["max", "count"], range=2.5), ["max", "count"])


@pytest.mark.parametrize("partitions", [1, 3])
def test_the_function_partitions_and_orders_its_table_itself(spark, partitions):
    """However the table is partitioned (one key spread over several
    partitions, rows in no order), each key's rows reach one instance in
    time order: the oracle's rows (distinct times: without order => ties
    come in any order).  A call with its own PARTITION BY is refused by
    Spark, naming the clause."""
    rng = random.Random(15)
    rows = [{"id": i, "k": "k0", "t": i + rng.random() / 2, "v": float(rng.randrange(100))} for i in range(70)]
    shuffled = random.Random(1).sample(rows, len(rows))
    spark.createDataFrame(as_tuples(shuffled), SCHEMA).repartition(partitions).createOrReplaceTempView("one_key")
    got = spark.sql(_call("one_key", order=None, key="k", time="t", value="v", aggs="count,max", range=5)).collect()
    assert_outputs(got, rows, expected(rows, ["count", "max"], range=5), ["count", "max"])
    with pytest.raises(Exception, match="PARTITION BY clause; please remove"):
        spark.sql("SELECT * FROM mta_sliding_window(TABLE(one_key) PARTITION BY k ORDER BY t, key => 'k', "
                  "time => 't', value => 'v', aggs => 'max', range => 5)").collect()


@pytest.mark.parametrize("arguments, message", [
    (dict(key="k", time="t", value="v", aggs="max", range=5, rnge=3), "no argument 'rnge'"),
    (dict(key="k", time="t", value="v", range=5), "needs aggs =>"),
    (dict(key="k", time="t", value="nope", aggs="max", range=5), "no column 'nope'"),
    (dict(key="k", time="t", value="v", aggs="max"), "needs exactly one of range => (seconds, or a duration such "
     "as '1h') or rows => (a count); got neither"),
    (dict(key="k", time="t", value="v", aggs="max", range=5, rows=3), "got range => and rows =>"),
    (dict(key="k", time="t", value="v", aggs="max,maximum", range=5), "aggs => names 'maximum', not a ready "
     "aggregation; ready ones are sum, count"),
    (dict(key="k", time="t", value="k", aggs="max", range=5), "not numeric"),
    (dict(key="k", time="t", value="v", aggs="max", range=5, order="id,seq"), "order => names 'seq'"),
    (dict(key="k", time="t", value="v", aggs=5, range=5), "aggs => takes a string or an array of strings, got 5"),
    (dict(key="k", time="t", value="v", aggs="max", range=5, order=5), "order => takes a string or an array"),
    (dict(key=5, time="t", value="v", aggs="max", range=5), "key => takes a string or an array of strings"),
    (dict(key="k", time=5, value="v", aggs="max", range=5), "time= takes one column's name (a string), got 5"),
])
def test_bad_arguments_fail_at_analysis(spark, arguments, message):
    from pyspark.errors import AnalysisException

    rows = random_rows(random.Random(16), keys=2)
    with pytest.raises(AnalysisException) as info:
        spark.sql(_call(_table(spark, rows), **arguments))
    assert message in str(info.value)
    assert "policy" not in str(info.value) and "Aggregator" not in str(info.value)  # what SQL cannot give


def test_a_store_url_its_backend_refuses_fails_at_analysis(spark):
    """A Redis URL with an unknown parameter is refused before any row is
    read (the store is never opened), naming the URL with no password."""
    from pyspark.errors import AnalysisException

    rows = random_rows(random.Random(16), keys=2)
    with pytest.raises(AnalysisException) as info:
        spark.sql(_call(_table(spark, rows), key="k", time="t", value="v", aggs="max", range=5, engine="amta",
                        store="redis://:S3cr3tPW@127.0.0.1:1/0?bogus=1"))
    assert "bad store URL redis://:***@127.0.0.1:1/0?bogus=1: unknown Redis URL parameter 'bogus'" in str(info.value)
    assert "S3cr3tPW" not in str(info.value)


def test_an_argument_must_be_a_constant(spark):
    from pyspark.errors import AnalysisException

    _table(spark, random_rows(random.Random(17), keys=2))
    with pytest.raises(AnalysisException) as info:
        spark.sql("SELECT * FROM mta_sliding_window(TABLE(readings), key => 'k', "
                  "time => 't', value => 'v', aggs => 'max', range => rand())")
    assert "range => must be a constant" in str(info.value)


def test_frame_sql_with_ties_across_chunks(spark):
    """frame => 'sql': rows of equal time are peers, also when a run of them
    straddles the function's chunks (CHUNK rows); equals the DataFrame
    call, which tests/test_spark_frame.py holds to Spark's rangeBetween."""
    from spark_ops.sql import CHUNK

    rng = random.Random(18)
    rows = [(i, f"k{i % 2}", float(i // 14), float(rng.randrange(-50, 50))) for i in range(2 * CHUNK + 500)]
    rows.append((len(rows), "k0", rows[-1][2], 7.0))
    df = spark.createDataFrame(rows, SCHEMA)
    df.createOrReplaceTempView("ties")
    aggs = ["max", "sum", "count", "first", "last"]
    sql = spark.sql(_call("ties", key="k", time="t", value="v", aggs=",".join(aggs), range=3,
                          frame="sql")).collect()
    frame = sliding_window(df, key="k", time="t", value="v", aggs=aggs, range=3, frame="sql").collect()
    assert canonical(sql) == canonical(frame)
    peers = {}
    for r in sql:
        peers.setdefault((r.k, r.t), set()).add(tuple(r[a] for a in aggs))
    assert all(len(outputs) == 1 for outputs in peers.values())  # one output per time


# -- several value columns ------------------------------------------------------------------
VALUE_AGGS = ["max(cpu)", "mean(cpu)", "min(mem)", "count(mem)", "sum(mem)", "stddev(mem)", "first(mem)",
              "last(cpu)"]


def _values_table(spark, rows, name="usage"):
    from tests.values_oracle import SCHEMA as VALUES_SCHEMA

    df = spark.createDataFrame([(r["id"], r["k"], r["t"], r["cpu"], r["mem"]) for r in rows], VALUES_SCHEMA)
    df = df.selectExpr("*", "named_struct('cpu', cpu, 'mem', mem) AS s")
    df.createOrReplaceTempView(name)
    return df


def _same_rows(sql, frame):
    """Row for row, value for value (repr: NaN equals NaN, 2^53 + 1 is not 2^53)."""
    assert sql and sql[0].__fields__ == frame[0].__fields__
    assert sorted(map(repr, map(tuple, sql))) == sorted(map(repr, map(tuple, frame)))


@pytest.mark.parametrize("value, engine", [("'cpu,mem'", "auto"), ("array('cpu', 'mem')", "amta"),
                                           ("' cpu , mem '", "lmta")])
def test_several_value_columns_equal_the_oracle_and_the_dataframe_call(spark, value, engine):
    """value => 'cpu,mem' or array('cpu', 'mem'), aggs naming their column
    ('max(cpu)'): columns max_cpu, ...; each row equals the brute-force
    oracle over (cpu, mem) tuples (a null or NaN in either column flags the
    row) and the DataFrame call with value=['cpu', 'mem'], integers exact."""
    from tests.values_oracle import assert_rows, expected as values_expected, names_of, random_rows as usage_rows

    rows = usage_rows(random.Random(31), nulls=0.1)
    df = _values_table(spark, rows)
    sql = spark.sql("SELECT * FROM mta_sliding_window(TABLE(usage), order => 'id', key => 'k', "
                    f"time => 't', value => {value}, aggs => '{','.join(VALUE_AGGS)}', range => 7, "
                    f"engine => '{engine}', on_bad_row => 'flag')").collect()
    names = names_of(VALUE_AGGS)
    assert list(sql[0].__fields__) == ["id", "k", "t", "cpu", "mem", "s", *names, "rejected"]
    assert_rows(sql, rows, values_expected(rows, names, range=7), names, flag=True)
    assert any(r.rejected for r in sql) and {type(r.min_mem) for r in sql if r.rejected is None} == {int}
    frame = sliding_window(df, key="k", time="t", value=["cpu", "mem"], aggs=VALUE_AGGS, range=7,
                           engine=engine, on_bad_row="flag").collect()
    _same_rows(sql, frame)


def test_struct_value_and_several_sizes(spark):
    """value => a struct column (its fields are the value columns), aggs
    as an array, two sizes: equals the oracle per size and the DataFrame
    call."""
    from pyspark.sql import Row

    from tests.values_oracle import assert_rows, expected as values_expected, random_rows as usage_rows

    rows = usage_rows(random.Random(32), keys=4)
    df = _values_table(spark, rows)
    sql = spark.sql("SELECT * FROM mta_sliding_window(TABLE(usage), order => 'id', key => 'k', "
                    "time => 't', value => 's', aggs => array('max(cpu)', 'min(mem)'), "
                    "rows => array(3, 10))").collect()
    assert list(sql[0].__fields__)[-4:] == ["max_cpu_3", "max_cpu_10", "min_mem_3", "min_mem_10"]
    outputs = {"max_cpu": "max(cpu)", "min_mem": "min(mem)"}
    for count in (3, 10):
        got = [Row(**{c: g[c] for c in ("id", "k", "t")}, **{o: g[f"{o}_{count}"] for o in outputs}) for g in sql]
        assert_rows(got, rows, values_expected(rows, outputs, count=count), outputs)
    frame = sliding_window(df, key="k", time="t", value="s", aggs=["max(cpu)", "min(mem)"], rows=[3, 10]).collect()
    _same_rows(sql, frame)


@pytest.mark.parametrize("arguments, message", [
    (dict(value="cpu,mem", aggs="max"), "aggregation 'max' does not say which value column it reads"),
    (dict(value="cpu,mem", aggs="max(disk)"), "reads column 'disk', which is not a value column"),
    (dict(value="cpu,nope", aggs="max(cpu)"), "no column 'nope'"),
    (dict(value="cpu,k", aggs="max(cpu)"), "value column 'k' is string, not numeric"),
    (dict(value="cpu,cpu", aggs="max(cpu)"), "given more than once"),
    (dict(value="cpu,mem", aggs={"peak": "max(cpu)"}), "not a map"),
])
def test_several_value_columns_mistakes_fail_at_analysis(spark, arguments, message):
    from pyspark.errors import AnalysisException

    from tests.values_oracle import random_rows as usage_rows

    _values_table(spark, usage_rows(random.Random(33), keys=2))
    with pytest.raises(AnalysisException) as info:
        if isinstance(arguments["aggs"], dict):
            spark.sql("SELECT * FROM mta_sliding_window(TABLE(usage), key => 'k', "
                      "time => 't', value => 'cpu,mem', aggs => map('peak', 'max(cpu)'), range => 5)")
        spark.sql(_call("usage", key="k", time="t", range=5, **arguments))
    assert message in str(info.value)


#: Run in a fresh process whose Python workers live in Los Angeles (the TZ
#: they inherit), the session in UTC: the function's rows equal the
#: DataFrame call's for timestamps outside the repeated hour of the 2024
#: fall-back, and a timestamp inside it fails naming the column and the fix.
_WORKERS_IN_A_ZONE_WITH_DST = r"""
import datetime as dt, os, sys, time
os.environ["TZ"] = "America/Los_Angeles"; time.tzset()
sys.path.insert(0, os.getcwd())
from spark_ops import sliding_window
from spark_ops.sql import register_sql
from tests.spark_fixtures import spark_session
spark = spark_session("local[2]")
spark.conf.set("spark.sql.session.timeZone", "UTC")
register_sql(spark)
UTC = dt.timezone.utc
def run(hours):
    rows = [(i, dt.datetime(2024, 11, 3, hours[i % 2], 30, tzinfo=UTC), float(i), float(i % 3)) for i in range(6)]
    spark.createDataFrame(rows, "id long, k timestamp, t double, v double").createOrReplaceTempView("r")
    sql = spark.sql("SELECT id, unix_micros(k) AS k, count, max FROM mta_sliding_window(TABLE(r), key => 'k', "
                    "time => 't', value => 'v', aggs => 'count,max', range => 100) ORDER BY id").collect()
    frame = (sliding_window(spark.table("r"), key="k", time="t", value="v", aggs="count,max", range=100)
             .selectExpr("id", "unix_micros(k) AS k", "count", "max").orderBy("id").collect())
    assert [tuple(r) for r in sql] == [tuple(r) for r in frame] and len({r.k for r in sql}) == 2, (sql, frame)
run((6, 12))  # 23:30 and 05:30 local: no repeated hour
try:
    run((8, 9))  # 01:30 local twice
except Exception as e:
    print("FAILED:", e)
try:  # the same instants inside a struct key
    spark.sql("SELECT * FROM mta_sliding_window(TABLE(SELECT id, named_struct('ts', k) AS s, t, v FROM r), "
              "key => 's', time => 't', value => 'v', aggs => 'count', range => 100)").collect()
except Exception as e:
    print("FAILED:", e)
"""


def test_a_zone_that_once_repeated_an_hour_is_checked(monkeypatch):
    """Sao Paulo has no daylight saving now (time.daylight is 0) but
    repeated 23:00-24:00 on 2018-02-17: a timestamp in that hour, at any
    depth, is refused; one outside it is not."""
    import time

    from spark_ops.sql import SlidingWindowFunction, _Analyzed

    monkeypatch.setenv("TZ", "America/Sao_Paulo")
    time.tzset()
    try:
        function = SlidingWindowFunction(_Analyzed(schema=None, run="r", zoned=((0, "k"), (1, "s"))))
        function._check_zoned((dt.datetime(2018, 2, 18, 1, 30), {"x": [dt.datetime(2018, 2, 17, 22, 30)]}))
        for row in ((dt.datetime(2018, 2, 17, 23, 30), None), (None, {"x": [dt.datetime(2018, 2, 17, 23, 30)]})):
            with pytest.raises(SlidingWindowError, match=r"holds 2018-02-17T23:30:00 .* in an hour their time zone "
                                                         "repeats"):
                function._check_zoned(row)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_workers_in_a_zone_with_daylight_saving_refuse_the_repeated_hour():
    """PySpark hands a Python UDTF timestamps as naive datetimes of the
    workers' zone: two instants of the hour a daylight-saving change
    repeats compare equal and come back as one.  Such a row fails naming the
    column and the fix; other timestamps give the DataFrame call's rows."""
    import os
    import subprocess
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", _WORKERS_IN_A_ZONE_WITH_DST], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], env={**os.environ, "TZ": "America/Los_Angeles"},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "FAILED:" in done.stdout, done.stdout[-2000:]
    for column in ("k", "s"):
        assert (f"column {column!r} holds 2024-11-03T01:30:00 (local time of the Python workers), in an hour their "
                "time zone repeats" in done.stdout), done.stdout[-2000:]
    assert "TZ=UTC" in done.stdout


def test_blanks_around_a_name_belong_to_the_column_that_has_them(spark):
    """A column `` v`` beside ``v`` (a CSV header's blanks): ``value => ' v'``
    reads `` v``, as the DataFrame call's ``value=' v'`` does, and ``' k, t'``
    style blanks are dropped only where no column has them, for ``time =>``
    as for the others; ``array(...)`` takes each name as given."""
    rows = [(1, "a", 1.0, 100.0, 1.0), (2, "a", 2.0, 200.0, 2.0), (3, "b", 3.0, 400.0, 4.0)]
    spark.createDataFrame(rows, "id long, k string, t double, ` v` double, v double").createOrReplaceTempView(
        "blanks")

    def sums(key, time, value, *, arrays=False):
        quote = (lambda n: f"array('{n}')") if arrays else (lambda n: f"'{n}'")
        got = spark.sql(f"SELECT * FROM mta_sliding_window(TABLE(blanks), key => {quote(key)}, time => '{time}', "
                        f"value => {quote(value)}, aggs => 'sum', range => 10, order => 'id')").collect()
        return [r["sum"] for r in sorted(got, key=lambda r: r["id"])]

    df = spark.table("blanks")
    frame = sliding_window(df, key="k", time="t", value=" v", aggs="sum", range=10).collect()
    assert [r["sum"] for r in sorted(frame, key=lambda r: r["id"])] == [100.0, 300.0, 400.0]
    assert sums("k", "t", " v") == sums("k", "t", " v", arrays=True) == [100.0, 300.0, 400.0]
    assert sums(" k ", " t ", "v ") == sums("k", "t", "v", arrays=True) == [1.0, 3.0, 4.0]


def test_a_struct_key_with_a_floating_field_is_refused_at_analysis(spark):
    """PySpark would start an instance per row of a struct key holding a
    NaN (NaN != NaN in Python): each row a window of its own.  Refused,
    naming the column and the remedy; keyed by to_json of it, the rows of
    the NaN key share one window, as in the DataFrame call."""
    from pyspark.errors import AnalysisException

    spark.createDataFrame([((math.nan,), float(t), 1.0) for t in range(6)], "k struct<a: double>, t double, v double"
                          ).createOrReplaceTempView("nan_keys")
    with pytest.raises(AnalysisException) as info:
        spark.sql(_call("nan_keys", order=None, key="k", time="t", value="v", aggs="count", rows=100)).collect()
    assert "key column 'k' is struct<a:double>: a NaN inside it would make each of its rows a key" in str(info.value)
    spark.sql("SELECT to_json(k) AS k, t, v FROM nan_keys").createOrReplaceTempView("json_keys")
    got = spark.sql(_call("json_keys", order=None, key="k", time="t", value="v", aggs="count", rows=100)).collect()
    assert sorted(r["count"] for r in got) == [1, 2, 3, 4, 5, 6]
    frame = sliding_window(spark.table("nan_keys"), key="k", time="t", value="v", aggs=["count"], rows=100)
    assert sorted(r["count"] for r in frame.collect()) == [1, 2, 3, 4, 5, 6]

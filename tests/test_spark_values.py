"""Several value columns (value= a list of columns or a struct column,
spark_ops.values) on a real local Spark against the brute-force oracle of
tests/values_oracle.py: ready aggregations naming their column
("max(cpu)") on the columnar engine and the MTA, several sizes, slide=,
streaming (with and without a watermark), user aggregators whose lift
takes the row's values as a tuple (a VWAP, and a non-commutative join),
nulls in one of the value columns (flag and error), and the errors naming
a missing column or a missing "(col)".  tests/test_values.py drives the
per-key windows without Spark under hypothesis.
"""

from __future__ import annotations

import random
import sys
import uuid

import pyarrow as pa
import pytest

from mta import policies
from spark_ops import SlidingWindowError, sliding_window
from tests.spark_fixtures import (_close, read_sink, run_available_now, ship_by_value,
                                  stream_source, write_parquet)
from tests.values_oracle import (BIG, SCHEMA, assert_rows, bad, expected, joined, names_of, oracle_of,
                                 random_rows, vwap)

ship_by_value(sys.modules[__name__])

def _frame(spark, rows):
    return spark.createDataFrame([(r["id"], r["k"], r["t"], r["cpu"], r["mem"]) for r in rows], SCHEMA)


READY_AGGS = ["max(cpu)", "mean(cpu)", "min(mem)", "count(mem)", "stddev(mem)", "first(mem)", "last(cpu)"]


# -- batch ----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_list_of_columns_ready_aggregations_several_sizes(spark, tmp_path, engine):
    """value=["cpu", "mem"] and "max(cpu)"-style aggregations: columns
    max_cpu_<label>, each equal to the oracle at its size; integral
    results stay exact longs (2^53 + 1)."""
    rows = random_rows(random.Random(3))
    store = dict(store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2) if engine == "amta" else {}
    aggs = READY_AGGS + (["sum(mem)"] if engine == "amta" else [])
    out = sliding_window(_frame(spark, rows), key="k", time="t", value=["cpu", "mem"], aggs=aggs,
                         range={"s": 3, "l": 20}, engine=engine, **store)
    names = names_of(aggs)
    assert out.columns == ["id", "k", "t", "cpu", "mem"] + [f"{n}_{lb}" for n in names for lb in ("s", "l")]
    assert dict(out.dtypes)["min_mem_s"] == "bigint" and dict(out.dtypes)["max_cpu_l"] == "double"
    got = out.collect()
    for label, size in (("s", 3), ("l", 20)):
        want = expected(rows, names, range=size)
        assert_rows([_renamed(g, label) for g in got], rows, want, names)


def _renamed(row, label):
    from pyspark.sql import Row

    d = row.asDict()
    return Row(**{(k[: -len(label) - 1] if k.endswith("_" + label) else k): v for k, v in d.items()})


@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_struct_value_with_nulls_flagged(spark, engine):
    """value="s" (a struct of cpu and mem): its fields are the value
    columns; a null or NaN in either is a bad row, flagged, in no window."""
    rows = random_rows(random.Random(5), nulls=0.15)
    df = _frame(spark, rows).selectExpr("id", "k", "t", "cpu", "mem", "named_struct('cpu', cpu, 'mem', mem) AS s")
    out = sliding_window(df, key="k", time="t", value="s", aggs=READY_AGGS, rows=4, engine=engine,
                         on_bad_row="flag").collect()
    names = names_of(READY_AGGS)
    want = expected(rows, names, count=4)
    assert any(w["rejected"] for w in want.values())
    assert_rows(out, rows, want, names, flag=True)


def test_null_in_one_value_column_is_an_error_naming_the_columns(spark):
    rows = [{"id": 0, "k": "a", "t": 1.0, "cpu": 1.0, "mem": 3}, {"id": 1, "k": "a", "t": 2.0, "cpu": 2.0, "mem": None}]
    for engine in ("columnar", "amta"):
        with pytest.raises(Exception, match=r"null or NaN value\): k='a', t=2.0, cpu=2.0, mem=None"):
            sliding_window(_frame(spark, rows), key="k", time="t", value=["cpu", "mem"], aggs=["max(cpu)"],
                           range=10, engine=engine).collect()


@pytest.mark.parametrize("shape", ["sizes", "one", "policy"])
def test_user_aggregators_get_the_rows_tuple(spark, tmp_path, shape):
    """A dict of output columns: a VWAP and a non-commutative join over the
    (cpu, mem) tuple, beside a ready "max(cpu)", on the MTA (batch sorted
    windows of one or several sizes, and a policy window), nulls flagged."""
    rows = random_rows(random.Random(7), nulls=0.1)
    aggs = {"vwap": vwap(), "joined": (joined(), "string"), "peak": "max(cpu)"}
    outputs = {"vwap": "vwap", "joined": "joined", "peak": "max(cpu)"}
    df = _frame(spark, rows)
    common = dict(key="k", time="t", value=["cpu", "mem"], aggs=aggs, on_bad_row="flag")
    if shape == "policy":
        got = sliding_window(df, policy=policies.Count(3), **common).collect()
        assert_rows(got, rows, expected(rows, outputs, count=3), outputs, flag=True)
    elif shape == "one":
        got = sliding_window(df, range=7, store=f"file://{tmp_path}/s", engine="amta", buffer_size=2,
                             cache_size=2, **common).collect()
        assert_rows(got, rows, expected(rows, outputs, range=7), outputs, flag=True)
    else:
        got = sliding_window(df, rows=[2, 5], **common).collect()
        for label, size in (("2", 2), ("5", 5)):
            assert_rows([_renamed(g, label) for g in got], rows, expected(rows, outputs, count=size), outputs,
                        flag=True)


@pytest.mark.parametrize("engine", ["auto", "amta", "user"])
def test_slide_with_several_value_columns(spark, engine):
    """slide= over value=["cpu", "mem"]: each window [end - range, end)
    ending at a multiple of the slide that holds rows, per key, equals the
    oracle over its rows; on the columnar kernels (auto), on the monoids'
    panes (amta), and with user aggregators over the row's tuple (a VWAP,
    the non-commutative join: the panes' order is time, then arrival)."""
    rows = [r for r in random_rows(random.Random(9)) if not bad(r)]
    aggs = ["max(cpu)", "count(mem)", "mean(cpu)", "min(mem)"]
    names = names_of(aggs)
    if engine == "user":
        aggs = {"peak": "max(cpu)", "vwap": vwap(), "joined": (joined(), "string"), "n": "count(mem)"}
        names = {"peak": "max(cpu)", "vwap": "vwap", "joined": "joined", "n": "count(mem)"}
    got = sliding_window(_frame(spark, rows), key="k", time="t", value=["cpu", "mem"], aggs=aggs, range=10,
                         slide=5, engine="auto" if engine == "user" else engine).collect()
    want = {}
    for r in rows:
        for j in range(1, 3):
            end = (r["t"] // 5 + j) * 5
            want.setdefault((r["k"], end), [])
    for (k, end), window in want.items():
        window += [(r["cpu"], r["mem"]) for r in sorted(rows, key=lambda r: (r["t"], r["id"]))
                   if r["k"] == k and end - 10 <= r["t"] < end]
    want = {key: w for key, w in want.items() if w}
    assert sorted((g["k"], g["window_end"]) for g in got) == sorted(want)
    for g in got:
        window = want[(g["k"], g["window_end"])]
        for column, agg in names.items():
            if agg.startswith(("max", "min", "mean", "vwap", "joined")):
                assert _close(g[column], oracle_of(agg)(window)), (g, column)
            else:
                assert g[column] == len(window)


# -- streaming ---------------------------------------------------------------------------
def test_streaming_keeps_tuples_exact(spark, tmp_path):
    """Two input files (the second continuing each key's times) through a
    streaming query with the file store: ready and user aggregations equal
    the oracle; the long column's 2^53 + 1 comes back exact."""
    rows = sorted(random_rows(random.Random(13), keys=3, per_key=(6, 12), nulls=0.1, strict=True),
                  key=lambda r: (r["k"], r["t"]))
    for j, r in enumerate(rows):
        r["id"] = j
    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()), ("cpu", pa.float64()),
                        ("mem", pa.int64())])
    source = str(tmp_path / "in")
    by_key = {}
    for r in rows:
        by_key.setdefault(r["k"], []).append(r)
    first = [r for rs in by_key.values() for r in rs[: len(rs) // 2]]
    second = [r for rs in by_key.values() for r in rs[len(rs) // 2:]]
    write_parquet(source, first, schema)
    aggs = {"vwap": vwap(), "joined": (joined(), "string"), "peak": "max(cpu)", "top": "max(mem)",
            "total": "sum(mem)"}
    outputs = {"vwap": "vwap", "joined": "joined", "peak": "max(cpu)", "top": "max(mem)", "total": "sum(mem)"}
    sink, checkpoint = str(tmp_path / "out"), str(tmp_path / "cp")
    name = f"values-{uuid.uuid4().hex[:8]}"

    def run():
        out = sliding_window(stream_source(spark, source, SCHEMA), key="k", time="t", value=["cpu", "mem"],
                             aggs=aggs, range=6, store=f"file://{tmp_path}/store", name=name, on_bad_row="flag")
        run_available_now(out, sink, checkpoint)

    run()
    write_parquet(source, second, schema)
    run()
    got = read_sink(spark, sink)
    assert_rows(got, rows, expected(rows, outputs, range=6), outputs, flag=True)
    assert any(g["top"] == BIG for g in got) or all(r["mem"] != BIG for r in rows)


# -- errors --------------------------------------------------------------------------------
def test_errors_name_the_problem(spark):
    df = _frame(spark, [{"id": 0, "k": "a", "t": 1.0, "cpu": 1.0, "mem": 3}])
    call = dict(key="k", time="t", value=["cpu", "mem"], range=10)
    with pytest.raises(SlidingWindowError, match=r"'max' does not say which value column.*'max\(column\)'.*cpu, mem"):
        sliding_window(df, aggs=["max"], **call)
    with pytest.raises(SlidingWindowError, match=r"reads column 'disk', which is not a value column; the value "
                                                 r"columns are cpu, mem"):
        sliding_window(df, aggs=["max(disk)"], **call)
    with pytest.raises(SlidingWindowError, match=r"no column 'disk' in the input"):
        sliding_window(df, aggs=["max(cpu)"], **{**call, "value": ["cpu", "disk"]})
    with pytest.raises(SlidingWindowError, match=r"value column 'k' is string, not numeric"):
        sliding_window(df, aggs=["max(cpu)"], **{**call, "value": ["cpu", "k"]})
    with pytest.raises(SlidingWindowError, match=r"reads column 'cpu', which is not a value column; the value "
                                                 r"column is mem"):
        sliding_window(df, aggs=["max(cpu)"], **{**call, "value": "mem"})
    with pytest.raises(SlidingWindowError, match=r"given more than once in value="):
        sliding_window(df, aggs=["max(cpu)"], **{**call, "value": ["cpu", "cpu"]})
    with pytest.raises(SlidingWindowError, match=r"dict value for 'x' is a ready aggregation"):
        sliding_window(df, aggs={"x": 3}, **call)
    with pytest.raises(SlidingWindowError, match=r"input column 'max_cpu' has the name of an output column"):
        sliding_window(df.withColumnRenamed("mem", "max_cpu"), aggs=["max(cpu)"],
                       **{**call, "value": ["cpu", "max_cpu"]})
    with pytest.raises(SlidingWindowError, match=r"aggregation 'vwap' is not one the columnar engine computes"):
        sliding_window(df, aggs={"vwap": vwap()}, engine="columnar", **call)
    from mta.aggregators import READY as ready
    with pytest.raises(SlidingWindowError, match=r"aggregation 'peak' reads every value column"):
        sliding_window(df, aggs={"peak": ready["max"].aggregator}, engine="columnar", **call)
    struct = df.selectExpr("k", "t", "named_struct('cpu', cpu, 'host', k) AS s")
    with pytest.raises(SlidingWindowError, match=r"value field s.host is string, not numeric"):
        sliding_window(struct, key="k", time="t", value="s", aggs=["max(cpu)"], range=10)


def test_one_value_column_keeps_itsnames_of(spark):
    """A single column (or a list of one) keeps today's names; naming the
    column is allowed and gives max_<column>."""
    df = _frame(spark, [{"id": 0, "k": "a", "t": 1.0, "cpu": 1.5, "mem": 3}])
    assert sliding_window(df, key="k", time="t", value=["cpu"], aggs=["max"], range=10).columns[-1] == "max"
    out = sliding_window(df, key="k", time="t", value="cpu", aggs=["max(cpu)", "max"], range=10).collect()
    assert (out[0]["max_cpu"], out[0]["max"]) == (1.5, 1.5)




def test_event_time_streaming_with_several_values(spark, tmp_path):
    """A watermarked stream whose rows arrive out of order within the delay,
    one micro-batch per file: the rows wait, then enter the windows in time
    order, so the output equals the oracle over the rows in time order (a
    VWAP, the non-commutative join, ready aggregations; nulls flagged)."""
    import datetime as dt
    import os

    import pyarrow.parquet as pq

    base, delay, rng = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), 6, random.Random(17)
    rows = []
    for i in range(3):
        t = 0.0
        for _ in range(rng.randint(8, 16)):
            t += rng.choice([1, 2, 3, 9])
            cpu = None if rng.random() < 0.08 else float(rng.randint(1, 9))
            rows.append({"k": f"k{i}", "t": t, "cpu": cpu, "mem": rng.choice([rng.randint(1, 9), BIG]),
                         "lag": rng.uniform(0, delay * 0.9)})
    rows.sort(key=lambda r: r["t"] + r.pop("lag"))
    assert any(a["k"] == b["k"] and a["t"] > b["t"] for i, a in enumerate(rows) for b in rows[i + 1:]), \
        "rows must arrive out of order within their keys"
    closing = {"k": "zz", "t": max(r["t"] for r in rows) + 10 * delay, "cpu": 1.0, "mem": 1}
    for j, r in enumerate(rows + [closing]):
        r["id"], r["ts"] = j, base + dt.timedelta(seconds=r["t"])
    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()),
                        ("ts", pa.timestamp("us", tz="UTC")), ("cpu", pa.float64()), ("mem", pa.int64())])
    source = str(tmp_path / "in")
    os.makedirs(source)
    everything = rows + [closing]
    for n, start in enumerate(range(0, len(everything), 8)):
        table = pa.Table.from_pylist([{f.name: r[f.name] for f in schema} for r in everything[start:start + 8]],
                                     schema=schema)
        path = os.path.join(source, f"part-{n:05d}.parquet")
        pq.write_table(table, path + ".tmp")
        os.utime(path + ".tmp", (1_700_000_000 + n, 1_700_000_000 + n))
        os.rename(path + ".tmp", path)
    df = (spark.readStream.schema("id long, k string, t double, ts timestamp, cpu double, mem long")
          .option("maxFilesPerTrigger", 1).parquet(source).withWatermark("ts", f"{delay} seconds"))
    aggs = {"vwap": vwap(), "joined": (joined(), "string"), "peak": "max(cpu)", "total": "sum(mem)"}
    outputs = {"vwap": "vwap", "joined": "joined", "peak": "max(cpu)", "total": "sum(mem)"}
    out = sliding_window(df, key="k", time="ts", value=["cpu", "mem"], aggs=aggs, range=10, on_bad_row="flag",
                         store=f"file://{tmp_path}/store", name=f"vals-{uuid.uuid4().hex[:8]}")
    run_available_now(out, str(tmp_path / "out"), str(tmp_path / "cp"))
    got = [g for g in read_sink(spark, str(tmp_path / "out")) if g["k"] != "zz"]
    in_time_order = sorted(rows, key=lambda r: r["t"])
    assert_rows(got, in_time_order, expected(in_time_order, outputs, range=10), outputs, flag=True)


def test_sql_function_takes_a_struct_value(spark):
    """The SQL table function takes a struct value column as the DataFrame
    call does (tests/test_sql.py holds it to the oracle)."""
    from spark_ops.sql import register_sql

    register_sql(spark)
    rows = random_rows(random.Random(8), keys=2)
    df = _frame(spark, rows).selectExpr("id", "k", "t", "named_struct('cpu', cpu, 'mem', mem) AS s")
    df.createOrReplaceTempView("values_struct")
    sql = spark.sql("SELECT * FROM mta_sliding_window(TABLE(values_struct), order => 'id', "
                    "key => 'k', time => 't', value => 's', aggs => 'max(cpu),sum(mem)', range => 10)").collect()
    frame = sliding_window(df, key="k", time="t", value="s", aggs=["max(cpu)", "sum(mem)"], range=10).collect()
    assert sql and sorted(map(repr, map(tuple, sql))) == sorted(map(repr, map(tuple, frame)))


@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_decimal_value_columns_are_taken_as_doubles(spark, engine):
    """A decimal field is taken as a double (as a single decimal value
    column is), an integral one stays a long."""
    rows = [r for r in random_rows(random.Random(19), keys=2, per_key=(5, 15)) if not bad(r)]
    df = _frame(spark, rows).selectExpr("id", "k", "t", "cpu", "mem",
                                        "named_struct('cpu', CAST(cpu AS DECIMAL(12, 2)), 'mem', mem) AS s")
    aggs = ["max(cpu)", "min(mem)", "count(cpu)"]
    out = sliding_window(df, key="k", time="t", value="s", aggs=aggs, range=5, engine=engine)
    types = dict(out.dtypes)
    assert (types["max_cpu"], types["min_mem"], types["count_cpu"]) == ("double", "bigint", "bigint")
    names = names_of(aggs)
    assert_rows(out.collect(), rows, expected(rows, names, range=5), names)

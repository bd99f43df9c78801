"""What a user hands ``sliding_window`` and ``mta-spark``, on a real local
Spark: arguments in the forms Spark and Python users write them, user
aggregations' declared types, a one-field struct value, and mistakes
reported on the driver, naming the argument, before any job.

Windows are checked against the brute-force oracle of
:mod:`tests.spark_fixtures`.  One SparkSession (local[2]) serves the module.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import random
import sys

import numpy as np
import pytest

from mta import Aggregator, Monoid
from spark_ops import SlidingWindowError, durations, sliding_window
from tests.spark_fixtures import assert_outputs, expected, ship_by_value, spark_session

ship_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def readings(n: int = 120, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": i, "k": rng.choice("abc"), "t": float(rng.randrange(60)), "v": float(rng.randint(-9, 9))}
            for i in range(n)]


def frame(spark, rows):
    return spark.createDataFrame([(r["id"], r["k"], r["t"], r["v"]) for r in rows],
                                 "id long, k string, t double, v double")


@pytest.mark.parametrize("given, seconds", [
    ("INTERVAL '5' MINUTE", 300), ("interval '1 hour'", 3600), ("INTERVAL 5 MINUTES", 300),
    (dt.timedelta(minutes=2, seconds=30), 150), (np.int64(20), 20), (np.float32(2.5), 2.5),
    (decimal.Decimal("1.5"), 1.5)])
def test_durations_in_the_forms_users_write(given, seconds):
    """Spark SQL's interval literals (quoted numbers too), ``timedelta`` and
    NumPy's or ``decimal``'s numbers are seconds like Python's own."""
    got = durations.seconds(given, "range")
    assert got == seconds and type(got) in (int, float)


@pytest.mark.parametrize("given", [decimal.Decimal("NaN"), dt.timedelta(0), -dt.timedelta(seconds=1), True,
                                   "INTERVAL '1:30' HOUR TO MINUTE"])
def test_durations_refused(given):
    with pytest.raises(ValueError, match="^range must be"):
        durations.seconds(given, "range")


@pytest.mark.parametrize("given, message", [
    pytest.param(10 ** 400, "range must be positive and finite, got a number beyond a float's range", id="10**400"),
    pytest.param(10 ** 5000, "range must be positive and finite, got a number beyond a float's range",
                 id="10**5000"),
    ("-5 minutes", "range must be positive, got '-5 minutes'"),
    ("INTERVAL '-10' MINUTE", "range must be positive, got \"INTERVAL '-10' MINUTE\""),
    (decimal.Decimal("sNaN"), "range must be positive and finite, got Decimal('sNaN')"),
    ("\u0663 minutes", "range must be a number of seconds or a duration such as")])
def test_durations_refused_saying_why(given, message):
    """A number beyond a float's range is the documented error (a
    ``SlidingWindowError`` from ``range=``), not an ``OverflowError``; a
    negative duration is told to be positive; a signalling NaN names the
    parameter too; digits are ASCII ones."""
    from spark_ops.spec import WindowSpec

    with pytest.raises(ValueError) as err:
        durations.seconds(given, "range")
    assert str(err.value).startswith(message)
    with pytest.raises(SlidingWindowError) as err:
        WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=given)
    assert str(err.value).startswith(message)


def test_a_duration_that_becomes_microseconds_is_at_least_one():
    """A watermark delay (a Spark interval, in microseconds) under one
    microsecond is refused, as ``slide=`` is, not made zero."""
    import argparse

    from spark_ops.cli.options import interval
    from spark_ops.spec import WindowSpec

    with pytest.raises(ValueError, match=r"^watermark must be at least one microsecond, got 4e-07$"):
        durations.spark_interval(4e-7, "watermark")
    assert durations.spark_interval(6e-7, "watermark") == "1 microseconds"
    assert durations.spark_interval(durations.seconds("10m")) == "600000000 microseconds"
    with pytest.raises(argparse.ArgumentTypeError, match="at least one microsecond"):
        interval("0.0000004")
    assert interval("1us") == 1e-6
    with pytest.raises(SlidingWindowError, match=r"^slide= must be at least one microsecond, got 4e-07$"):
        WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=1, slide=4e-7)
    assert WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=1, slide="1us").slide == 1e-6


def test_numpy_and_timedelta_sizes_give_the_windows(spark):
    """``range=timedelta``, ``rows=np.int64`` and ``slide=`` as a quoted
    interval literal give the windows of the plain numbers."""
    rows = readings()
    df = frame(spark, rows)
    got = sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=dt.timedelta(seconds=10)).collect()
    assert_outputs(got, rows, expected(rows, ["max"], range=10), ["max"])
    got = sliding_window(df, key="k", time="t", value="v", aggs=["max"], rows=np.int64(3)).collect()
    assert_outputs(got, rows, expected(rows, ["max"], count=3), ["max"])
    periodic = sliding_window(df, key="k", time="t", value="v", aggs=["count"], range=10,
                              slide="INTERVAL '5' SECOND").collect()
    plain = sliding_window(df, key="k", time="t", value="v", aggs=["count"], range=10, slide=5).collect()
    assert sorted(map(tuple, periodic)) == sorted(map(tuple, plain))


@pytest.mark.parametrize("slide", [0, "-5m", "abc"])
def test_a_bad_slide_is_named_slide(spark, slide):
    df = frame(spark, readings(5))
    with pytest.raises(SlidingWindowError, match="^slide must"):
        sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=10, slide=slide)


@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_an_unknown_store_scheme_fails_on_the_driver(spark, engine):
    """A store URL no backend opens is refused when the job is defined,
    naming the scheme, whichever engine would run it (the columnar one
    never opens the store)."""
    df = frame(spark, readings(5))
    with pytest.raises(SlidingWindowError, match="unknown store URL scheme 's3'"):
        sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=10, store="s3://bucket/x",
                       engine=engine)


def _sum() -> Aggregator:
    return Aggregator(Monoid(lambda a, b: a + b, 0), lift=lambda v: int(v))


@pytest.mark.parametrize("declared, python", [("int", int), ("smallint", int), ("float", float),
                                              ("decimal(10,2)", decimal.Decimal), ("array<int>", list)])
@pytest.mark.parametrize("slide", [None, 5])
def test_user_aggregation_of_a_declared_type(spark, declared, python, slide):
    """A user aggregation declared ``int``, ``float``, ``decimal(p,s)`` or an
    array of ints comes out in that Spark type, per row and with
    ``slide=``, with the oracle's values."""
    from pyspark.sql.types import _parse_datatype_string

    rows = readings()
    agg = _sum() if declared != "array<int>" else Aggregator(Monoid(lambda a, b: a + b, 0),
                                                              lift=lambda v: int(v), lower=lambda s: [s, -s])
    out = sliding_window(frame(spark, rows), key="k", time="t", value="v", aggs=[("s", agg, declared)], range=10,
                         slide=slide)
    assert out.schema["s"].dataType == _parse_datatype_string(declared)
    got = out.collect()
    assert all(isinstance(r["s"], python) for r in got)
    if slide is None:
        want = expected(rows, ["sum"], range=10)
        for r in got:
            value = r["s"][0] if declared == "array<int>" else r["s"]
            assert float(value) == want[r["id"]]["sum"]


def test_user_aggregation_type_mistakes(spark):
    """A type Spark cannot parse, a type that is not a string, a result
    that is not the declared type and one outside a small integer type are
    errors naming the aggregation."""
    df = frame(spark, readings(20))
    kw = dict(key="k", time="t", value="v", range=10)
    with pytest.raises(SlidingWindowError, match="'s' declares Spark type 'strng'"):
        sliding_window(df, aggs=[("s", _sum(), "strng")], **kw)
    with pytest.raises(SlidingWindowError, match="DDL string"):
        sliding_window(df, aggs=[("s", _sum(), 7)], **kw)
    text = Aggregator(Monoid(lambda a, b: a + b, ""), lift=lambda v: str(v))
    with pytest.raises(Exception, match="aggregation 's' returned a result that is not double"):
        sliding_window(df, aggs=[("s", text)], **kw).collect()
    big = Aggregator(Monoid(lambda a, b: a + b, 0), lift=lambda v: 1000)
    with pytest.raises(Exception, match="s overflows its type tinyint"):
        sliding_window(df, aggs=[("s", big, "tinyint")], **kw).collect()


@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_ready_aggregators_under_declared_types_give_them_on_every_engine(spark, engine):
    """Ready aggregators under names of one's own: ``count`` as ``int`` and
    ``max`` as ``float`` (fused on the MTA) come out as declared, as the
    brute-force windows give them; ``max`` as ``long`` of non-integral
    values fails naming the column rather than truncating."""
    from mta.aggregators import READY

    df = spark.createDataFrame([("a", 1.0, 2.5), ("a", 2.0, 3.5), ("a", 3.0, 1.25)], "k string, t double, v double")
    aggs = [("c", READY["count"].aggregator, "int"), ("m", READY["max"].aggregator, "float")]
    out = sliding_window(df, "k", "t", "v", aggs, rows=2, engine=engine)
    assert out.schema.simpleString() == "struct<k:string,t:double,v:double,c:int,m:float>"
    assert [(r.c, r.m) for r in out.orderBy("t").collect()] == [(1, 2.5), (2, 3.5), (2, 3.5)]
    with pytest.raises(Exception, match="aggregation 'peak' returned a result that is not long"):
        sliding_window(df, "k", "t", "v", [("peak", READY["max"].aggregator, "long")], rows=2,
                       engine=engine).collect()


def test_user_aggregation_declared_as_a_pyspark_type(spark):
    from pyspark.sql.types import IntegerType

    rows = readings()
    out = sliding_window(frame(spark, rows), key="k", time="t", value="v", aggs=[("s", _sum(), IntegerType())],
                         range=10)
    assert out.schema["s"].dataType == IntegerType()
    want = expected(rows, ["sum"], range=10)
    assert all(r["s"] == want[r["id"]]["sum"] for r in out.collect())


@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_a_struct_of_one_field_with_a_bare_aggregation(spark, engine):
    """``value=`` a struct of one field and ``aggs=["max"]``: the field's max,
    in the column ``max`` (as ``"max(cpu)"`` gives ``max_cpu``)."""
    from pyspark.sql import functions as F

    rows = readings()
    df = frame(spark, rows).withColumn("s", F.struct(F.col("v").alias("cpu")))
    out = sliding_window(df, key="k", time="t", value="s", aggs=["max", "min(cpu)"], range=10, engine=engine)
    assert out.columns[-2:] == ["max", "min_cpu"]
    want = expected(rows, ["max", "min"], range=10)
    assert all((r["max"], r["min_cpu"]) == (want[r["id"]]["max"], want[r["id"]]["min"]) for r in out.collect())


@pytest.mark.parametrize("key", ["map('a', 1)", "named_struct('m', map('a', 1))"])
def test_a_map_key_is_refused_naming_it(spark, key):
    df = spark.sql(f"SELECT {key} AS km, 1.0 AS t, 2.0 AS v")
    with pytest.raises(SlidingWindowError, match="key column 'km' is .*map"):
        sliding_window(df, key="km", time="t", value="v", aggs=["max"], range=10)


def test_cli_run_that_fails_leaves_no_output(spark, tmp_path):
    """``mta-spark run`` failing on a bad row leaves no output directory, so
    the same command runs once the input is fixed."""
    from spark_ops import cli

    src, out = tmp_path / "in.csv", tmp_path / "out"
    src.write_text("k,t,v\na,1,2\na,2,n/a\n")
    argv = ["run", "--input", str(src), "--output", str(out), "--key", "k", "--time", "t", "--value", "v",
            "--range", "10", "--agg", "max", "--option", "nullValue=n/a"]  # a null value: the windows' job fails
    assert cli.main(argv, spark=spark) == 2
    assert not os.path.exists(out) and os.listdir(tmp_path) == ["in.csv"]
    src.write_text("k,t,v\na,1,2\na,2,3\n")
    assert cli.main(argv, spark=spark) == 0
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == [("a", 1, 2.0, 2.0),
                                                                                ("a", 2, 3.0, 3.0)]

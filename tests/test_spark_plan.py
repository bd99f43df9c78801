"""The batch plans ship only what the windows need (``spark_ops.plan.lean_columns``).

* The time a worker computes from the input's own column
  (``spark_ops.plan.seconds``, in Arrow) is, bit for bit, the double Spark
  computes with ``spark_ops.plan.time_sql`` (the oracle: Spark's own SQL
  over the same rows), for every time type the plans take as they are:
  every number type, dates and both timestamps, from year 1 to 9999,
  longs to their limits, negative zero and infinities.
* A plain time and value column reach the worker as they are: the plan
  adds no copy of them; a decimal time or value, or several value columns,
  get the converted column the engines read.
* The arrival number orders rows of equal time in the sort and is dropped
  before Python: the worker's input has the input's columns alone.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_ops import sliding_window
from spark_ops.plan import ARRIVAL, TIME, VALUE, plain_time, time_sql
from tests.spark_fixtures import ship_by_value, spark_session

ship_by_value(sys.modules[__name__])

LONG = 2 ** 63 - 1
SECOND = dt.timedelta(seconds=1)
timestamps = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30, 23, 59, 59, 999999))
TYPES = {
    "double": st.floats(allow_nan=False),
    "float": st.floats(allow_nan=False, width=32),
    "tinyint": st.integers(-128, 127),
    "smallint": st.integers(-2 ** 15, 2 ** 15 - 1),
    "int": st.integers(-2 ** 31, 2 ** 31 - 1),
    "bigint": st.one_of(st.integers(-LONG - 1, LONG), st.integers(2 ** 53 - 5, 2 ** 53 + 5)),
    "date": st.dates(),
    "timestamp": timestamps.map(lambda t: t.replace(tzinfo=dt.timezone.utc)),
    "timestamp_ntz": timestamps,
}


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", **{"spark.sql.session.timeZone": "America/New_York"})
    yield session
    session.stop()


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _in_worker(batches):
    """The worker's conversion beside Spark's, per row."""
    import pyarrow as pa

    from spark_ops.plan import seconds

    for batch in batches:
        yield pa.RecordBatch.from_arrays([seconds(batch.column(0)), batch.column(1)], names=["got", "want"])


@pytest.mark.parametrize("kind", sorted(TYPES))
def test_worker_seconds_equal_spark_sql_bit_for_bit(spark, kind):
    from pyspark.sql import functions as F
    from pyspark.sql.types import _parse_datatype_string

    data_type = _parse_datatype_string(kind)
    assert plain_time(data_type)

    @settings(max_examples=8, deadline=None, database=None)
    @given(st.lists(TYPES[kind], min_size=1, max_size=40))
    def check(values):
        df = spark.createDataFrame([(v,) for v in values], f"t {kind}")
        both = df.select("t", F.expr(time_sql("t", data_type)).alias("want"))
        rows = both.mapInArrow(_in_worker, "got double, want double").collect()
        assert len(rows) == len(values)
        for row in rows:
            assert _bits(row.got) == _bits(row.want) or (math.isnan(row.got) and math.isnan(row.want)), row

    check()


def _shipped(df, **kw) -> str:
    """The optimized plan of a sliding_window call, as text."""
    out = sliding_window(df, key="k", time="t", aggs=["max"], rows=3, **kw)
    return out._jdf.queryExecution().optimizedPlan().toString()


def test_plain_columns_ship_as_they_are(spark):
    df = spark.createDataFrame([(1, dt.datetime(2024, 1, 1) + i * SECOND, float(i)) for i in range(5)],
                               "k int, t timestamp, v double")
    plan = _shipped(df, value="v")
    assert ARRIVAL in plan and TIME not in plan and VALUE not in plan


def _line(plan: str, node: str) -> str:
    (line,) = [ln for ln in plan.splitlines() if ln.lstrip("+-: ").startswith(node + " ")]
    return line


@pytest.mark.parametrize("kw", [{"rows": 2}, {"range": 4, "slide": 2, "engine": "amta"}], ids=["per-row", "periodic"])
def test_the_arrival_number_orders_the_sort_and_stays_in_the_jvm(spark, kw):
    # ten rows at each time, more than the test sessions' spill threshold, so the sort spills and merges
    n = 300
    df = spark.createDataFrame([(1, float(i // 10), float(i)) for i in range(n)], "k int, t double, v double")
    out = sliding_window(df, key="k", time="t", value="v", aggs=["first"], **kw)
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert ARRIVAL in _line(plan, "Sort")
    assert ARRIVAL not in _line(plan, "MapInArrow")
    if "rows" in kw:  # each row's window: the row before it in (time, arrival) order, and itself
        assert [r["first"] for r in out.orderBy("v").collect()] == [0.0] + [float(i - 1) for i in range(1, n)]


def test_decimal_time_and_value_ship_converted(spark):
    df = spark.createDataFrame([(1, decimal.Decimal(i), decimal.Decimal(i) / 4) for i in range(5)],
                               "k int, t decimal(10,0), v decimal(10,2)")
    plan = _shipped(df, value="v")
    assert TIME in plan and VALUE in plan
    got = [r["max"] for r in sliding_window(df, key="k", time="t", value="v", aggs=["max"], rows=3)
           .orderBy("t").collect()]
    assert got == [max(i / 4 for i in range(max(0, j - 2), j + 1)) for j in range(5)]


# -- ties="any": no arrival number --------------------------------------------------------
@pytest.mark.parametrize("kw", [{"rows": 2}, {"range": 4, "slide": 2, "engine": "amta"}], ids=["per-row", "periodic"])
def test_ties_in_any_order_sort_on_key_and_time_alone(spark, kw):
    df = spark.createDataFrame([(1, float(i // 10), float(i)) for i in range(30)], "k int, t double, v double")
    plan = sliding_window(df, key="k", time="t", value="v", aggs=["first"], ties="any", **kw) \
        ._jdf.queryExecution().optimizedPlan().toString()
    assert ARRIVAL not in plan and "monotonically_increasing_id" not in plan.lower()
    sort = _line(plan, "Sort")
    assert [c.split("#")[0] for c in sort[sort.index("[") + 1: sort.index("]")].split(", ")] == ["k", "t"], sort


def _windows(rows, kind, size, slide=None):
    """Brute force: ``{(key, time or window end): [values]}``, each key's
    rows taken in time order (the times are distinct)."""
    out = {}
    for key in {k for k, _, _ in rows}:
        mine = sorted((t, v) for k, t, v in rows if k == key)
        if slide is not None:
            ends = {e for t, _ in mine for e in range(int(t // slide) * slide + slide, int(t) + size + 1, slide)}
            out.update({(key, e): [v for t, v in mine if e - size <= t < e] for e in ends})
        for i, (t, _) in enumerate(mine if slide is None else []):
            picked = mine[max(0, i - size + 1): i + 1] if kind == "rows" else [x for x in mine[:i + 1] if x[0] > t - size]
            out[(key, t)] = [v for _, v in picked]
    return out


@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_ties_in_any_order_on_distinct_times_equal_brute_force(spark, engine):
    """With every key's times distinct the order is the time's alone, so
    ``ties="any"`` gives every frame its exact answer: per-row count and
    time windows and ``slide=`` windows of ``first`` and ``last`` (not
    commutative), and of ``sum`` over values that include its identity."""
    aggs = {"max": max, "sum": sum, "first": lambda w: w[0], "last": lambda w: w[-1], "count": len}

    @settings(max_examples=12, deadline=None, database=None)
    @given(cells=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-3, 3)), min_size=1,
                          max_size=40),
           window=st.sampled_from([("rows", 1, None), ("rows", 3, None), ("range", 3, None), ("range", 8, None),
                                   ("range", 4, 2)]),
           order=st.randoms(use_true_random=False))
    def check(cells, window, order):
        rows = [(k, float(i), float(v)) for i, (k, v) in enumerate(cells)]
        order.shuffle(rows)
        kind, size, slide = window
        df = spark.createDataFrame(rows, "k string, t double, v double").repartition(3)
        out = sliding_window(df, key="k", time="t", value="v", aggs=list(aggs), engine=engine, ties="any",
                             slide=slide, **{kind: size}).collect()
        want = _windows(rows, kind, size, slide)
        got = {(r["k"], r["window_end"] if slide else r["t"]): [r[a] for a in aggs] for r in out}
        assert len(out) == len(got) == len(want)
        assert got == {at: [f(w) for f in aggs.values()] for at, w in want.items()}

    check()

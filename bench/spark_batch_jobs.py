"""The jobs of :mod:`bench.spark_batch`: each method's DataFrame over the
readings ``(k, t, v)``, for a window of ``w`` rows or seconds, summed by
the benchmark over its result column."""

from __future__ import annotations

import contextlib

from spark_ops.session import ARROW_BATCH_CONF

#: The setting this project's sessions give Int.MaxValue (Spark's Arrow byte check off).
BYTE_LIMIT = next(iter(ARROW_BATCH_CONF))


# -- the user monoid: the two largest values ----------------------------------------
def _top2_combine(a, b):
    x = sorted(a + b, reverse=True)
    return tuple(x[:2])


def _top2_lift(v):
    return (v,)


def _top2_lower(a):
    return a[1] if len(a) == 2 else None


def top2():
    from mta import Aggregator, Monoid

    return Aggregator(Monoid(_top2_combine, (), name="top2", commutative=True), _top2_lift, _top2_lower,
                      name="top2")


# -- methods --------------------------------------------------------------------------
def plan_floor(df):
    """sliding_window's batch plan, its worker's function returning the
    values as the result column as they are (no copy, no window)."""
    from spark_ops import worker_gc

    def values_as_they_are(batches):
        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_arrays(batch.columns + [batch.column(2)], names=batch.schema.names + ["max"])

    return plan_without_windows(df, worker_gc.settling(values_as_they_are))


def pandas_floor(df):
    """The pandas method without rolling: each key's rows sorted by time,
    the values as the result column."""
    def sorted_values(frame):
        frame = frame.sort_values("t", kind="stable")
        frame["max"] = frame["v"]
        return frame

    return df.groupBy("k").applyInPandas(sorted_values, "k int, t double, v double, max double")


def sliding(df, w, frame, aggs, store=None, engine="amta", ties="input"):
    from spark_ops import sliding_window

    size = {"rows": w} if frame == "rows" else {"range": w}
    return sliding_window(df, key="k", time="t", value="v", aggs=aggs, store=store, engine=engine, ties=ties,
                          **size)


def sql(spark, df, w, frame, segment_tree: bool):
    spark.conf.set("spark.sql.window.segmentTree.enabled", str(segment_tree).lower())
    df.createOrReplaceTempView("readings")
    unit = "ROWS" if frame == "rows" else "RANGE"
    return spark.sql(f"SELECT k, t, v, max(v) OVER (PARTITION BY k ORDER BY t {unit} BETWEEN {w - 1} "
                     "PRECEDING AND CURRENT ROW) AS max FROM readings")


def pandas_rolling(df, w, frame_kind="rows", ties: bool = False):
    """Pandas rolling max per key in ``applyInPandas`` (:func:`rolling_max`);
    with ``ties``, the rows numbered before the shuffle."""
    from pyspark.sql import functions as F

    numbered = df.withColumn("n", F.monotonically_increasing_id()) if ties else df
    return numbered.groupBy("k").applyInPandas(lambda frame: rolling_max(frame, w, frame_kind, ties),
                                               "k int, t double, v double, max double")


def rolling_max(frame, w, frame_kind: str, ties: bool):
    """One key's rows with their rolling max over the newest ``w`` rows
    (``frame_kind="rows"``) or ``w`` seconds, sorted by time; with
    ``ties``, rows of equal time in the order of their number ``n``
    (dropped), as ``sliding_window`` orders them."""
    import pandas as pd

    frame = frame.sort_values(["t", "n"] if ties else "t", kind="stable")
    if ties:
        frame = frame.drop(columns="n")
    if frame_kind == "rows":
        frame["max"] = frame["v"].rolling(w, min_periods=1).max()
    else:
        by_time = pd.Series(frame["v"].to_numpy(), index=pd.to_timedelta(frame["t"].to_numpy(), unit="s"))
        frame["max"] = by_time.rolling(f"{w}s").max().to_numpy()
    return frame


def plan_without_windows(df, fn):
    """sliding_window's batch plan (rows numbered, shuffled by key, sorted
    on ``(key, time, arrival)``) with ``fn`` as its ``mapInArrow`` function."""
    from spark_ops.plan import key_time_ordered, number_rows

    return key_time_ordered(number_rows(df), ["k"], "t").mapInArrow(fn, "k int, t double, v double, max double")


def pipeline(df):
    """sliding_window's batch plan with the windows left out."""
    def values_as_results(batches):
        import pyarrow as pa

        for batch in batches:
            yield pa.RecordBatch.from_arrays(batch.columns + [pa.array(batch.column(2).to_pylist(), pa.float64())],
                                             names=batch.schema.names + ["max"])

    return plan_without_windows(df, values_as_results)


@contextlib.contextmanager
def spark_byte_check(spark):
    """The session with ``spark.sql.execution.arrow.maxBytesPerBatch`` at
    Spark's default while the block runs (Spark then measures each Arrow
    batch after every row it writes to it)."""
    before = spark.conf.get(BYTE_LIMIT, None)
    spark.conf.unset(BYTE_LIMIT)
    try:
        yield
    finally:
        if before is not None:
            spark.conf.set(BYTE_LIMIT, before)

"""Sub-second ``range=`` over timestamp and decimal times equals Spark SQL's
``RANGE BETWEEN`` over the column itself, on the columnar and MTA engines.

Two oracles, each independent of the engines: Spark SQL's own window over
the time column (``INTERVAL 'R' SECOND PRECEDING`` on a timestamp, ``R
PRECEDING`` on a decimal(20,6)), and a brute-force count in the rows' integer
microseconds; they are checked against each other too.  Each key's times
are distinct, so the default frame ``(t - R, t]`` is Spark's ``RANGE``
frame one microsecond shorter.  The rows: every 100 ms, every 0.7 s (from
times where double seconds put the row exactly ``R`` earlier on the wrong
side of ``t - R``), and steps of the ranges and a microsecond either side.
"""

from __future__ import annotations

import random
import sys

import pytest

from spark_ops import sliding_window
from tests.spark_fixtures import ship_by_value, spark_session

ship_by_value(sys.modules[__name__])

RANGES = {"a": ("100ms", 100_000), "b": (0.3, 300_000), "c": (0.7, 700_000)}
T0 = 1_732_926_873_293_315  # 2024-11-30 00:34:33.293315 UTC, in microseconds
T1 = 1_766_813_256_159_645  # 2025-12-27 05:27:36.159645


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", **{"spark.sql.session.timeZone": "UTC",
                                           "spark.sql.execution.arrow.maxRecordsPerBatch": "7"})
    yield session
    session.stop()


def micro_rows() -> list[tuple]:
    """``(id, k, us, v)``: distinct times per key, in microseconds."""
    rng = random.Random(3)
    keys = {"every-100ms": [T0 + 100_000 * i for i in range(40)], "every-700ms": [T1 + 700_000 * i for i in range(12)]}
    t, mixed = T0 - 5_000_000, []
    for _ in range(80):
        t += rng.choice([100_000, 300_000, 700_000, 99_999, 100_001, 299_999, 700_001, 1, rng.randint(1, 900_000)])
        mixed.append(t)
    keys["mixed"] = mixed
    rows = [(k, us) for k, times in keys.items() for us in times]
    rng.shuffle(rows)
    return [(i, k, us, float(i % 7 + 1)) for i, (k, us) in enumerate(rows)]


def brute(rows, span_us: int, frame: str) -> dict:
    """id -> (count, sum) of the rows of its key at ``us`` in ``(t - R, t]`` or ``[t - R, t]``."""
    low = 1 if frame == "default" else 0
    out = {}
    for i, k, t, _ in rows:
        window = [v for _, k2, s, v in rows if k2 == k and t - span_us + low <= s <= t]
        out[i] = (len(window), sum(window))
    return out


def with_time(spark, rows, kind: str):
    df = spark.createDataFrame(rows, "id long, k string, us long, v double")
    if kind == "timestamp":
        return df.selectExpr("id", "k", "timestamp_micros(us) AS t", "v")
    return df.selectExpr("id", "k", "CAST(CAST(us AS DECIMAL(20, 0)) / 1000000 AS DECIMAL(20, 6)) AS t", "v")


def spark_sql_says(df, kind: str, span_us: int, frame: str) -> dict:
    """id -> (count, sum) by Spark SQL's RANGE frame over ``t`` itself."""
    bound_us = span_us - (1 if frame == "default" else 0)  # distinct times: (t - R, t] is [t - (R - 1us), t]
    text = f"{bound_us // 1_000_000}.{bound_us % 1_000_000:06d}"
    bound = f"INTERVAL '{text}' SECOND" if kind == "timestamp" else text
    over = f"OVER (PARTITION BY k ORDER BY t RANGE BETWEEN {bound} PRECEDING AND CURRENT ROW)"
    return {r.id: (r.c, r.s) for r in df.selectExpr("id", f"count(v) {over} AS c", f"sum(v) {over} AS s").collect()}


@pytest.mark.parametrize("engine", ["columnar", "amta"])
@pytest.mark.parametrize("frame", ["default", "sql"])
@pytest.mark.parametrize("kind", ["timestamp", "decimal"])
def test_sub_second_range_equals_spark_sql_range_between(spark, kind, frame, engine):
    rows = micro_rows()
    df = with_time(spark, rows, kind)
    several = sliding_window(df, key="k", time="t", value="v", aggs=["count", "sum"], frame=frame, engine=engine,
                             range={label: size for label, (size, _) in RANGES.items()}).collect()
    one = {r.id: (r["count"], r["sum"]) for r in
           sliding_window(df, key="k", time="t", value="v", aggs=["count", "sum"], frame=frame, engine=engine,
                          range=0.3).collect()}
    for label, (_, span_us) in RANGES.items():
        want = brute(rows, span_us, frame)
        assert spark_sql_says(df, kind, span_us, frame) == want, "the two oracles agree"
        got = {r.id: (r[f"count_{label}"], r[f"sum_{label}"]) for r in several}
        wrong = sorted((i, got[i], want[i]) for i in want if got[i] != want[i])
        assert not wrong, f"range {label}: {len(wrong)} rows differ (id, ours, oracle): {wrong[:5]}"
    assert one == brute(rows, 300_000, frame)

"""The rules of a row a window cannot take (spark_ops.rows): the row-at-a-time
check (check_row), the Arrow check of a batch (check_columns) and the Spark
SQL conditions (column_rules_sql) give every row the same reason, the first
rule of rows.COLUMN_RULES (rows.MICROS_RULES for plans counting time in
microseconds) that applies, on a table of bad rows (and good ones that look
close: an infinite value, a NaN-free integer column, a time just within the
microsecond range)."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_ops import rows

NAN, INF = float("nan"), float("inf")
#: The first double past the times a microsecond plan takes, and the last before.
BEYOND = rows.MICROS_TIME_LIMIT
WITHIN = math.nextafter(BEYOND, 0.0)

#: (k, k2, t, v, v2): a composite key (a string and a double column) and two
#: value columns, each bad row bad for one reason or for several (the first
#: rule in COLUMN_RULES' order names it).
TABLE = [
    ("a", 1.0, 1.0, 2.0, 3.0),       # good
    ("a", 1.0, 2.0, INF, -INF),      # good: an infinite value is a number
    ("a", -0.0, -1.5, 0.0, -0.0),    # good
    (None, 1.0, 3.0, 2.0, 3.0),      # null key
    ("a", NAN, 3.0, 2.0, 3.0),       # NaN in the key's second column
    ("a", None, 3.0, 2.0, 3.0),      # null in the key's second column
    ("a", 1.0, None, 2.0, 3.0),      # null time
    ("a", 1.0, NAN, 2.0, 3.0),       # NaN time
    ("a", 1.0, INF, 2.0, 3.0),       # infinite time
    ("a", 1.0, -INF, 2.0, 3.0),      # -infinite time
    ("a", 1.0, 4.0, None, 3.0),      # null value
    ("a", 1.0, 4.0, NAN, 3.0),       # NaN value
    ("a", 1.0, 4.0, 2.0, None),      # null in the second value column
    ("a", 1.0, 4.0, 2.0, NAN),       # NaN in the second value column
    (None, NAN, None, None, NAN),    # all bad: the key's rule comes first
    ("a", 1.0, NAN, None, 3.0),      # time before value
    ("a", 1.0, INF, NAN, 3.0),       # infinite time before value
    ("a", 1.0, WITHIN, 2.0, 3.0),    # good
    ("a", 1.0, -WITHIN, 2.0, 3.0),   # good
    ("a", 1.0, BEYOND, 2.0, 3.0),    # beyond microseconds (micros plans; else good)
    ("a", 1.0, -1e300, 2.0, 3.0),    # beyond microseconds (micros plans; else good)
    ("a", 1.0, BEYOND, NAN, 3.0),    # beyond microseconds before value (else NaN value)
    (None, 1.0, BEYOND, 2.0, 3.0),   # key before time
]


def _row_reasons(table, composite: bool, several: bool, micros: bool = False) -> list:
    return [rows.check_row((k, k2) if composite else k, t, (v, v2) if several else v, None, micros=micros)
            for k, k2, t, v, v2 in table]


def _rule_reasons(micros: bool) -> set:
    return {reason for _, _, reason in (rows.MICROS_RULES if micros else rows.COLUMN_RULES)}


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize("micros", [False, True])
def test_check_columns_agrees_with_check_row(composite, several, micros):
    k, k2, t, v, v2 = (list(c) for c in zip(*TABLE))
    keys = [pa.array(k, pa.string()), pa.array(k2, pa.float64())] if composite else pa.array(k, pa.string())
    values = (pa.StructArray.from_arrays([pa.array(v, pa.float64()), pa.array(v2, pa.float64())], ["v0", "v1"])
              if several else pa.array(v, pa.float64()))
    got = rows.check_columns(keys, pa.array(t, pa.float64()), values, micros=micros)
    want = _row_reasons(TABLE, composite, several, micros)
    assert got == want
    assert {r for r in want if r is not None} == _rule_reasons(micros)  # the table tries every rule


def test_microsecond_plans_reject_what_they_cannot_count():
    """A time at or past the limit, either side of 1970, is bad only for a
    plan counting microseconds, and its window ends then fit an int64."""
    for t in (BEYOND, -BEYOND, 1e300, -1e300):
        assert rows.check_row("a", t, 1.0, None) is None
        assert rows.check_row("a", t, 1.0, None, micros=True) == rows.BEYOND_MICROS
    assert rows.check_row("a", WITHIN, 1.0, None, micros=True) is None
    assert rows.check_columns(pa.array([1, 2]), pa.array([-(2**62 // 10**6), 2**62 // 10**6 + 1], pa.int64()),
                              pa.array([1.0, 1.0]), micros=True) == [None, rows.BEYOND_MICROS]
    from spark_ops.spec import MICROS_SPAN

    assert round(WITHIN * 1e6) + 2 * MICROS_SPAN <= 2**63 - 1  # a time, the longest window and its slide


def test_check_columns_integer_columns_have_no_nan_or_inf():
    """An integer column is never NaN or infinite: only its nulls are bad."""
    got = rows.check_columns(pa.array([1, None, 3], pa.int64()), pa.array([1, 2, None], pa.int64()),
                             pa.array([None, 5, 6], pa.int32()))
    assert got == [rows.NULL_VALUE, rows.NULL_KEY, rows.NULL_TIME]
    assert rows.check_columns(pa.array([1], pa.int64()), pa.array([1], pa.int64()), pa.array([7], pa.int64())) is None


#: One column's cells: numbers, then the ones a rule reads (NaN, +-inf, null).
CELLS = st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from([NAN, INF, -INF, None]),
                  st.sampled_from([BEYOND, -BEYOND, WITHIN, 1e300]))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(*[st.lists(CELLS, min_size=n, max_size=n)] * 5)),
       st.booleans(), st.booleans(), st.booleans())
def test_check_columns_agrees_with_check_row_on_any_cells(table, composite, several, micros):
    """Batches that are clean, or bad in one place only (a NaN without a
    null beside it, an infinite time alone) get the rows' own reasons: the
    check that finds a batch clean without building masks misses none."""
    k, k2, t, v, v2 = table
    keys = [pa.array(k, pa.float64()), pa.array(k2, pa.float64())] if composite else pa.array(k, pa.float64())
    values = (pa.StructArray.from_arrays([pa.array(v, pa.float64()), pa.array(v2, pa.float64())], ["v0", "v1"])
              if several else pa.array(v, pa.float64()))
    want = _row_reasons(list(zip(k, k2, t, v, v2)), composite, several, micros)
    assert rows.check_columns(keys, pa.array(t, pa.float64()), values, micros=micros) == (want if any(want) else None)


def test_check_row_names_a_value_that_is_not_a_number():
    """The rule only check_row has: typed columns cannot hold a non-number
    (sliding_window refuses such a column before any row)."""
    assert rows.check_row("a", 1.0, "7", None) == rows.not_a_number("7")
    assert rows.check_row("a", 1.0, (1.0, True), None) == rows.not_a_number(True)
    assert rows.check_columns(pa.array(["a"]), pa.array([1.0]), pa.array([7.0])) is None


#: Microseconds from 1970 of pandas' first and last timestamps (the oracle's range).
PANDAS_MICROS = st.integers(min_value=-9_223_285_636_854_775 + 1, max_value=9_223_372_036_854_775 - 1)


@given(PANDAS_MICROS)
def test_shown_time_writes_a_time_as_its_column_does(us):
    """Double seconds (what the windows hold) written as the input's
    timestamp, timestamp without a zone or date; pandas is the oracle."""
    import pandas as pd

    t = us / 1e6
    stamp = str(pd.Timestamp(round(t * 1e6), unit="us"))
    assert rows.shown_time(t, "timestamp") == stamp + " UTC"
    assert rows.shown_time(t, "timestamp_ntz") == stamp
    assert rows.shown_time(t, "") == str(t)
    days = us // 86_400_000_000
    assert rows.shown_time(days * 86400.0, "date") == str(pd.Timestamp(days, unit="D").date())


def test_shown_time_leaves_a_number_the_calendar_cannot_write():
    for t in (1e13, -1e13, NAN, INF, None):
        assert rows.shown_time(t, "timestamp") == str(t)
        assert rows.shown_time(t, "date") == str(t)


def test_an_out_of_order_row_names_its_times_as_the_input_writes_them():
    """check_row's reasons write the row's and the key's newest time in the
    input's own terms; the rejected row's text writes its time as the input
    gave it (a timestamp with a zone in UTC)."""
    import datetime as dt

    newest, t = 1767225606.0, 1767225604.5
    assert rows.check_row("a", t, 1.0, newest, clock="timestamp") == rows.out_of_order(
        "2026-01-01 00:00:04.500000 UTC", "2026-01-01 00:00:06 UTC")
    assert rows.check_row("a", newest, 1.0, newest, emitted=newest, clock="timestamp_ntz") == rows.peers_emitted(
        "2026-01-01 00:00:06")
    assert rows.check_row("a", t, 1.0, newest) == rows.out_of_order(str(t), str(newest))
    paris = dt.datetime(2026, 1, 1, 1, 0, 4, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert rows.input_text(paris) == "2026-01-01 00:00:04 UTC"
    assert rows.input_text(paris.replace(tzinfo=None)) == "2026-01-01 01:00:04"
    assert rows.input_text(dt.date(2026, 1, 1)) == "2026-01-01"
    assert rows.input_text(4.5) == "4.5"


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize("micros", [False, True])
def test_sql_conditions_agree_with_check_row(spark, composite, several, micros):
    from spark_ops.plan import quoted, time_sql
    from pyspark.sql.types import DoubleType

    df = spark.createDataFrame([(i,) + r for i, r in enumerate(TABLE)],
                               "id long, k string, k2 double, t double, v double, v2 double")
    keys = [(quoted("k"), False)] + ([(quoted("k2"), True)] if composite else [])
    values = [(quoted("v"), True)] + ([(quoted("v2"), True)] if several else [])
    rules = rows.column_rules_sql(keys, time_sql("t", DoubleType()), values, micros=micros)
    assert [reason for _, reason in rules] == [reason for _, _, reason in
                                              (rows.MICROS_RULES if micros else rows.COLUMN_RULES)]
    case = "CASE " + " ".join(f"WHEN {condition} THEN '{reason}'" for condition, reason in rules) + " END"
    got = [r.reason for r in df.selectExpr("id", f"{case} AS reason").orderBy("id").collect()]
    assert got == _row_reasons(TABLE, composite, several, micros)


def test_sql_integer_columns_have_no_nan_or_inf(spark):
    df = spark.createDataFrame([(0, 1, 1, 5), (1, None, 2, 6), (2, 3, None, 7), (3, 4, 4, None)],
                               "id long, k long, t long, v long")
    rules = rows.column_rules_sql([("k", False)], "CAST(t AS DOUBLE)", [("v", False)])
    case = "CASE " + " ".join(f"WHEN {condition} THEN '{reason}'" for condition, reason in rules) + " END"
    got = [r.reason for r in df.selectExpr("id", f"{case} AS reason").orderBy("id").collect()]
    assert got == [None, rows.NULL_KEY, rows.NULL_TIME, rows.NULL_VALUE]

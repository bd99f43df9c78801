"""Every value leaves ``sliding_window`` exactly as it came, and integer
aggregations are exact, on every engine, batch and streaming.

A hypothesis property over rows with every column type a user may pass
through (``long``, ``double``, ``decimal(38,18)``, ``timestamp``,
``timestamp_ntz``, ``string``, a struct with an array of doubles), nulls
mixed in and extreme values: int64 min and max, 2^53 + 1, subnormal,
negative-zero, infinite and NaN doubles, timestamps up to 9999-12-31.  The
value column is a ``long`` (with nulls beside the numbers) or a ``double``.

* passed-through columns equal the input bit for bit (doubles compared by
  their bytes, timestamps by their microseconds, decimals by their digits);
* ``min``, ``max``, ``first``, ``last``, ``count`` (and for a ``long`` value,
  ``sum`` and ``mean``) equal a brute-force oracle in Python integers;
* a ``sum`` outside int64 fails the job naming the column and key (the
  overflow rule, docs/operations.md), even with ``on_bad_row="flag"``.

Batch runs on the columnar engine, both MTAs and a custom policy's window;
streaming on both MTAs, over two micro-batches.  Inputs are parquet files
(one per batch job or micro-batch, so arrival order is the file's), outputs
are read as Arrow.  ``MTA_SPARK_EXAMPLES`` sets the examples per test (a
small default keeps CI fast: each streaming example runs two queries).
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import shutil
import struct
import sys
import tempfile
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mta import policies
from spark_ops import sliding_window
from tests.spark_fixtures import run_available_now, ship_by_value, spark_session, write_parquet

ship_by_value(sys.modules[__name__])

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
EXAMPLES = int(os.environ.get("MTA_SPARK_EXAMPLES", "3"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def arrow_schema(value_type):
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()), ("v", value_type),
                      ("i", pa.int64()), ("f", pa.float64()), ("d", pa.decimal128(38, 18)),
                      ("ts", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("s", pa.string()),
                      ("nest", pa.struct([("a", pa.int64()), ("b", pa.list_(pa.float64()))]))])


def ddl(value: str) -> str:
    return (f"id long, k string, t double, v {value}, i long, f double, d decimal(38,18), ts timestamp, "
            "ntz timestamp_ntz, s string, nest struct<a:long,b:array<double>>")


PASSED = ("id", "k", "t", "v", "i", "f", "d", "ts", "ntz", "s", "nest")

# -- values ----------------------------------------------------------------------------
EXTREME_INTS = [INT64_MIN, INT64_MAX, (1 << 53) + 1, -(1 << 53) - 1, 1152921504606846977, 0, -1]
ints = st.one_of(st.sampled_from(EXTREME_INTS), st.integers(INT64_MIN, INT64_MAX), st.integers(-9, 9))
EXTREME_FLOATS = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                  -1.7976931348623157e308, float("inf"), float("-inf"), 2.0 ** 53 + 2, 0.1]
floats = st.one_of(st.sampled_from(EXTREME_FLOATS), st.floats(allow_nan=False))
decimals = st.one_of(st.sampled_from([decimal.Decimal("99999999999999999999.999999999999999999"),
                                      decimal.Decimal("-0.000000000000000001"), decimal.Decimal(0)]),
                     st.decimals(min_value=-10 ** 19, max_value=10 ** 19, places=18, allow_nan=False))
MIN_TS, MAX_TS = dt.datetime(1900, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
stamps = st.one_of(st.just(MAX_TS), st.datetimes(min_value=MIN_TS, max_value=MAX_TS))
texts = st.text(max_size=6)
nested = st.builds(lambda a, b: {"a": a, "b": b}, st.none() | ints,
                   st.lists(st.one_of(floats, st.just(float("nan"))), max_size=3))


def _maybe(strategy):
    return st.one_of(st.none(), strategy, strategy)


@dataclass
class Case:
    """Rows (dicts, in arrival order), cut into micro-batches for streaming."""

    integral: bool
    rows: list
    rounds: list  # (start, end) of each micro-batch in ``rows``
    count: int  # rows=count windows; range windows use it as the range in seconds

    def __repr__(self) -> str:
        return f"Case(integral={self.integral}, count={self.count}, rounds={self.rounds}, rows={self.rows!r})"


@st.composite
def cases(draw):
    integral = draw(st.booleans())
    values = _maybe(ints) if integral else st.one_of(st.none(), st.just(float("nan")), floats, floats)
    keys = draw(st.lists(st.one_of(st.sampled_from(["a", "b", "c"]), st.none()), min_size=1, max_size=4, unique=True))
    rounds = [[], []]
    for k in keys:  # each key's times never go back, across micro-batches too
        t = 0.0
        for r in range(2):
            for _ in range(draw(st.integers(0, 4))):
                t += draw(st.sampled_from([0, 0, 1, 2, 5]))
                rounds[r].append({"k": k, "t": t, "v": draw(values)})
    rows = []
    for batch in rounds:
        batch = draw(st.permutations(batch))  # the order within a batch is the arrival order
        rows += [{**r, "i": draw(_maybe(ints)), "f": draw(_maybe(st.one_of(floats, st.just(float("nan"))))),
                  "d": draw(_maybe(decimals)), "ts": draw(_maybe(stamps)), "ntz": draw(_maybe(stamps)),
                  "s": draw(_maybe(texts)), "nest": draw(_maybe(nested))} for r in batch]
    for n, r in enumerate(rows):
        r["id"] = n
    cut = len(rounds[0])
    return Case(integral, rows, [(0, cut), (cut, len(rows))], draw(st.integers(1, 4)))


def _issue_case() -> Case:
    """The issue's report: a long value column with a null in the micro-batch."""
    big = 1152921504606846977
    rows = [{"id": i, "k": "a", "t": float(i), "v": v, "i": v, "f": None, "d": None, "ts": None, "ntz": None,
             "s": None, "nest": None} for i, v in enumerate([big, None, big + 4, (1 << 53) + 1])]
    return Case(True, rows, [(0, 4), (4, 4)], 3)


# -- the oracle, in Python integers ----------------------------------------------------
def _bad(r) -> str | None:
    v = r["v"]
    if r["k"] is None:
        return "null or NaN key"
    if v is None or v != v:
        return "null or NaN value"
    return None


def oracle(case: Case, aggs, window: str) -> dict:
    """Row id -> {aggregation: value, "rejected": reason}, by brute force;
    ``window``: ``"rows"`` (the newest ``count``) or ``"range"`` (times in
    ``(t - count, t]``).  Ties in time go by arrival (the rows' order)."""
    fns = {"sum": sum, "count": len, "min": min, "max": max, "first": lambda xs: xs[0],
           "last": lambda xs: xs[-1], "mean": lambda xs: sum(xs) / len(xs)}
    out, by_key = {}, {}
    for arrival, r in enumerate(case.rows):
        reason = _bad(r)
        if reason:
            out[r["id"]] = {**{a: None for a in aggs}, "rejected": reason}
        else:
            by_key.setdefault(r["k"], []).append((r["t"], arrival, r))
    for items in by_key.values():
        items.sort(key=lambda x: x[:2])
        for pos, (t, _, r) in enumerate(items):
            before = items[: pos + 1]
            chosen = before[-case.count:] if window == "rows" else [x for x in before if x[0] > t - case.count]
            xs = [x[2]["v"] for x in chosen]
            out[r["id"]] = {**{a: fns[a](xs) for a in aggs}, "rejected": None}
    return out


def overflows(want: dict) -> bool:
    return any(w.get("sum") is not None and not INT64_MIN <= w["sum"] <= INT64_MAX for w in want.values())


# -- comparing -------------------------------------------------------------------------
def canon(v):
    """A value as a comparable key that tells apart what ``==`` does not
    (-0.0 and 0.0, NaN and NaN, 1 and 1.0, decimal scales)."""
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, int) and not isinstance(v, bool):
        return ("int", v)
    if isinstance(v, decimal.Decimal):
        return ("decimal", v.as_tuple())
    if isinstance(v, (list, tuple)):
        return ("list", tuple(map(canon, v)))
    if isinstance(v, dict):
        return ("dict", tuple((k, canon(x)) for k, x in sorted(v.items())))
    return (type(v).__name__, v)


def by_id(table) -> dict:
    """Arrow rows by id, timestamps as their microseconds."""
    import pyarrow as pa

    columns = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        columns[name] = col.to_pylist()
    return {row["id"]: row for row in (dict(zip(columns, values)) for values in zip(*columns.values()))}


def check(case: Case, got, want: dict, aggs, value_type) -> None:
    import pyarrow as pa

    sent = by_id(pa.Table.from_pylist(case.rows, schema=arrow_schema(value_type)))
    got = by_id(got)
    assert sorted(got) == sorted(sent), "an input row is missing or came out twice"
    for rid, row in got.items():
        for c in PASSED:
            assert canon(row[c]) == canon(sent[rid][c]), (rid, c, row[c], sent[rid][c])
        w = want[rid]
        for a in aggs:
            assert canon(row[a]) == canon(w[a]), (rid, a, row[a], w[a], case.rows[rid])
        assert (row["rejected"] is None) == (w["rejected"] is None) and (
            w["rejected"] is None or w["rejected"] in row["rejected"]), (rid, row["rejected"], w["rejected"])


def aggs_for(case: Case, engine: str) -> list:
    if case.integral and engine != "columnar":  # the columnar engine leaves integral sums to the MTA
        return ["sum", "min", "max", "first", "last", "count", "mean"]
    return ["min", "max", "first", "last", "count"]


def window_args(case: Case, engine: str, window: str) -> dict:
    if engine == "policy":  # a custom policy: the batch PolicyWindow, one row at a time
        return dict(policy=policies.Count(case.count), engine="amta")
    return {window: case.count, "engine": engine}


# -- the tests -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def _parquet_dir(case: Case, value_type, rounds) -> str:
    directory = tempfile.mkdtemp(prefix="mta-exact-")
    os.makedirs(f"{directory}/in")
    for a, b in rounds:
        if b > a:
            write_parquet(f"{directory}/in", case.rows[a:b], arrow_schema(value_type))
    return directory


def _value_types(case: Case):
    import pyarrow as pa

    return (pa.int64(), "long") if case.integral else (pa.float64(), "double")


@pytest.mark.parametrize("engine", ["columnar", "amta", "lmta", "policy"])
@SETTINGS
@given(case=cases(), window=st.sampled_from(["rows", "range"]))
@example(case=_issue_case(), window="rows")
def test_batch_values_leave_exactly_as_they_came(spark, engine, case, window):
    if engine == "policy":
        window = "rows"
    value_type, value_ddl = _value_types(case)
    aggs = aggs_for(case, engine)
    want = oracle(case, aggs, window)
    directory = _parquet_dir(case, value_type, [(0, len(case.rows))])
    try:
        df = spark.read.schema(ddl(value_ddl)).parquet(f"{directory}/in")
        out = sliding_window(df, key="k", time="t", value="v", aggs=aggs, on_bad_row="flag",
                             **window_args(case, engine, window))
        if overflows(want):
            with pytest.raises(Exception, match=r"sum overflows long \(int64\) at k="):
                out.toArrow()
            return
        check(case, out.toArrow(), want, aggs, value_type)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("engine", ["amta", "lmta"])
@SETTINGS
@given(case=cases(), window=st.sampled_from(["rows", "range"]))
@example(case=_issue_case(), window="rows")
def test_streaming_values_leave_exactly_as_they_came(spark, engine, case, window):
    value_type, value_ddl = _value_types(case)
    aggs = aggs_for(case, engine)
    want = oracle(case, aggs, window)
    directory = _parquet_dir(case, value_type, [])
    try:
        df = spark.readStream.schema(ddl(value_ddl)).parquet(f"{directory}/in")
        out = sliding_window(df, key="k", time="t", value="v", aggs=aggs, on_bad_row="flag",
                             store=f"file://{directory}/store", name=f"x-{uuid.uuid4().hex[:8]}",
                             **window_args(case, engine, window))
        failed = None
        for a, b in case.rounds:  # one micro-batch per round, windows resumed from the store
            if b > a:
                write_parquet(f"{directory}/in", case.rows[a:b], arrow_schema(value_type))
            try:
                run_available_now(out, f"{directory}/out", f"{directory}/ckpt")
            except Exception as exc:  # noqa: BLE001 - checked below against the overflow rule
                failed = exc
                break
        if overflows(want):
            assert failed is not None and "sum overflows long (int64) at k=" in str(failed), failed
            return
        assert failed is None, failed
        check(case, spark.read.schema(out.schema).parquet(f"{directory}/out").toArrow(), want, aggs, value_type)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_overflow_error_names_column_key_and_time(spark):
    """The overflow rule on its own: int64 max plus 1 in one window fails the
    batch job naming the column, the key and the row's time, though the
    rows are flagged rather than failed."""
    df = spark.createDataFrame([(1, "a", 1.0, INT64_MAX), (2, "a", 2.0, 1)], "id long, k string, t double, v long")
    out = sliding_window(df, key="k", time="t", value="v", aggs=["sum"], rows=2, on_bad_row="flag")
    with pytest.raises(Exception) as info:
        out.collect()
    assert f"sum overflows long (int64) at k='a', t=2.0: the exact result is {INT64_MAX + 1}" in str(info.value)
    assert "spark_ops.spec.SlidingWindowError" in str(info.value)


# -- packing, without Spark --------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.sampled_from([1.0, -0.0, 0.0, float("nan")])), max_size=30),
       pack_rows=st.integers(1, 5))
def test_packs_carry_each_keys_rows_exactly(keys, pack_rows):
    """pack_by_key: every row in exactly one pack, under a key equal to its
    own (nulls and NaNs together), in input order, bit for bit; big groups
    cut into packs of at most PACK_ROWS rows."""
    import pyarrow as pa

    from spark_ops import passthrough

    values = [INT64_MIN + i if i % 2 else (1 << 53) + i for i in range(len(keys))]
    batch = pa.record_batch({"k": pa.array(keys, pa.float64()), "v": pa.array(values, pa.int64())})
    seen = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passthrough, "PACK_ROWS", pack_rows)
        packed = list(passthrough.pack_by_key("k")(iter([batch])))
    for out in packed:
        for key, blob in zip(out.column("k").to_pylist(), out.column(passthrough.PACKED).to_pylist()):
            rows = passthrough.unpack([blob])
            assert 1 <= rows.num_rows <= pack_rows
            assert all(k == key or (k is None) == (key is None) and k != k and key != key
                       for k in rows.column("k").to_pylist())
            seen.append(rows.column("v").to_pylist())
    for order in seen:  # input order within a pack
        assert order == [v for v in values if v in set(order)]
    assert sorted(v for pack in seen for v in pack) == sorted(values)


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.sampled_from(["a", "b", None]), max_size=20), cut=st.integers(0, 20),
       partition=st.integers(0, 5))
def test_numbered_packs_carry_each_rows_arrival(keys, cut, partition):
    """pack_by_key(numbered=True) over a task's batches: each row carries
    its arrival number, the task's partition then its position among the
    task's rows (across batches), as a batch plan's monotonically_increasing_id
    numbers them."""
    import pyarrow as pa

    from spark_ops import passthrough
    from spark_ops.plan import ARRIVAL

    position = list(range(len(keys)))
    table = pa.table({"k": pa.array(keys, pa.string()), "i": pa.array(position, pa.int64())})
    batches = [b for part in (table.slice(0, cut), table.slice(cut)) for b in part.to_batches()]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passthrough, "_partition", lambda: partition)
        packed = list(passthrough.pack_by_key("k", numbered=True)(iter(batches)))
    rows = [r for out in packed for r in passthrough.unpack(out.column(passthrough.PACKED).to_pylist()).to_pylist()]
    assert sorted(r["i"] for r in rows) == position
    assert all(r[ARRIVAL] == (partition << 33) + r["i"] for r in rows)


def test_nested_keys_are_grouped_on_their_values():
    """Key types Arrow cannot group (structs, arrays) are grouped on their
    Python values as Spark groups them: equal structs and arrays together,
    every NaN together, -0.0 with 0.0; each pack holds its key's rows in
    input order."""
    import pyarrow as pa

    from spark_ops import passthrough

    nan = float("nan")
    keys = [{"a": 1.0}, {"a": nan}, {"a": 1.0}, {"a": nan}, {"a": -0.0}, {"a": 0.0}, None]
    batch = pa.record_batch({"k": pa.array(keys), "v": pa.array(range(len(keys)))})
    (out,) = passthrough.pack_by_key("k")(iter([batch]))
    packs = [passthrough.unpack([blob]).column("v").to_pylist() for blob in out.column(passthrough.PACKED).to_pylist()]
    assert sorted(packs) == [[0, 2], [1, 3], [4, 5], [6]]
    arrays = pa.record_batch({"k": pa.array([[1, 2], [1], [1, 2], None, [1]]), "v": pa.array(range(5))})
    assert sorted(passthrough.key_groups(arrays, ["k"])) == [[0, 2], [1, 4], [3]]


def test_every_row_of_a_key_group_names_the_same_key():
    """The key a group's window is named by (``first_key``) is the same
    whichever of its rows comes first: ``-0.0`` and ``0.0`` at any depth
    (a double, a struct's field, an array's item), NaNs of any bits."""
    import struct

    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    from spark_ops import passthrough

    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    for column in (pa.array([-0.0, 0.0]), pa.array([{"x": -0.0}, {"x": 0.0}]), pa.array([[1.0, -0.0], [1.0, 0.0]]),
                   pa.array([float("nan"), other_nan])):
        table = pa.table({"k": column, "t": pa.array([1.0, 2.0])})
        keys = passthrough.GroupKeys(from_arrow_schema(table.schema), ["k"])
        (group,) = passthrough.key_groups(table, ["k"])
        names = {repr(passthrough.first_key(table.take(pa.array(order)), keys)) for order in (group, group[::-1])}
        assert len(names) == 1, (column, names)

"""Several value columns (value= a list of columns or a struct column,
spark_ops.values) against a brute-force oracle written here in plain
Python over each row's window: ready aggregations naming their column
("max(cpu)") on the columnar engine and the MTA, several sizes, slide=,
streaming, user aggregators whose lift takes the row's values as a tuple
(a VWAP, and a non-commutative one that joins the tuples in order), nulls
in one of the value columns (flag and error), and the errors naming a
missing column or a missing "(col)".  The per-key windows are also driven
without Spark under hypothesis, the columnar engine and the MTA on the
same random rows cut into random pushes.
"""

from __future__ import annotations

import math
import random
import sys
import uuid

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import Aggregator, Monoid, policies
from spark_ops import SlidingWindowError, sliding_window
from spark_ops.columnar import ColumnarKeyWindow
from spark_ops.sorted_window import SizesSortedWindow, SortedWindow
from spark_ops.spec import WindowSpec
from spark_ops.windows import PolicyWindow
from tests.spark_fixtures import (_close, read_sink, run_available_now, ship_by_value, spark_session,
                                  stream_source, write_parquet)
from tests.strategies import sane_settings

ship_by_value(sys.modules[__name__])

SCHEMA = "id long, k string, t double, cpu double, mem long"
BIG = 2 ** 53 + 1  # a long that a double would round: values must stay exact


# -- the oracle ------------------------------------------------------------------------
def _mean(xs):
    return math.fsum(xs) / len(xs)


def _stddev(xs):
    if len(xs) < 2:
        return None
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


READY = {"max": max, "min": min, "sum": sum, "count": len, "mean": _mean, "first": lambda xs: xs[0],
         "last": lambda xs: xs[-1], "stddev": _stddev}
COLUMNS = ("cpu", "mem")


def vwap_oracle(window):
    volume = sum(m for _, m in window)
    return math.fsum(c * m for c, m in window) / volume if volume else None


def joined_oracle(window):
    return ";".join(f"{c!r}/{m!r}" for c, m in window)


USER = {"vwap": vwap_oracle, "joined": joined_oracle}


def oracle_of(agg: str):
    """The brute-force function of an output column's aggregation over a
    window of (cpu, mem) tuples: "max(cpu)", or a user one by name."""
    if agg in USER:
        return USER[agg]
    name, column = agg[:-1].split("(")
    at = COLUMNS.index(column)
    return lambda window: READY[name]([row[at] for row in window])


def bad(row) -> bool:
    return any(row[c] is None or (isinstance(row[c], float) and math.isnan(row[c])) for c in COLUMNS)


def expected(rows, outputs: dict, *, range=None, count=None) -> dict:
    """Row id -> {output column: value}: ``outputs`` maps each output
    column to its aggregation ("max(cpu)", "vwap"); a row's window is its
    key's rows at or before it in (time, arrival) order, with time in
    ``(t - range, t]`` or the newest ``count``; rows with a null or NaN in
    either value column get None and are in no window."""
    by_key, out = {}, {}
    for arrival, r in enumerate(rows):
        if bad(r):
            out[r["id"]] = {**{c: None for c in outputs}, "rejected": "null or NaN value"}
        else:
            by_key.setdefault(r["k"], []).append((r["t"], arrival, (r["cpu"], r["mem"]), r["id"]))
    for items in by_key.values():
        items.sort(key=lambda x: (x[0], x[1]))
        for pos, (t, _, _, rid) in enumerate(items):
            before = items[: pos + 1]
            window = [x[2] for x in (before[-count:] if count is not None else before if range is None
                                     else [x for x in before if x[0] > t - range])]
            out[rid] = {**{c: oracle_of(a)(window) for c, a in outputs.items()}, "rejected": None}
    return out


def random_rows(rng, *, keys=5, per_key=(10, 40), nulls=0.0, strict=False):
    rows = []
    for i in range(keys):
        t = 0.0
        for _ in range(rng.randint(*per_key)):
            t += rng.choice([1, 2, 3, 7, 20]) if strict else rng.choice([0, 0, 1, 2, 3, 7, 20])
            cpu = rng.choice([rng.randint(-3, 9) * 1.0, round(rng.uniform(0.5, 99), 2)])
            mem = rng.choice([rng.randint(1, 9), BIG, rng.randint(1, 1000)])
            if rng.random() < nulls:
                if rng.random() < 0.5:
                    cpu = rng.choice([None, float("nan")])
                else:
                    mem = None
            rows.append({"k": f"k{i}", "t": t, "cpu": cpu, "mem": mem})
    rng.shuffle(rows)
    for j, r in enumerate(rows):
        r["id"] = j
    return rows


def assert_rows(got, rows, want, outputs, *, flag=False):
    inputs = {r["id"]: r for r in rows}
    got = [g.asDict() for g in got]
    assert sorted(g["id"] for g in got) == sorted(inputs)
    wrong = []
    for g in got:
        w = want[g["id"]]
        for c in list(outputs) + (["rejected"] if flag else []):
            if c == "rejected":
                ok = (g[c] is None) == (w[c] is None) and (w[c] is None or w[c] in g[c])
            else:
                ok = _close(g[c], w[c]) and (type(w[c]) is not int or g[c] == w[c])
            if not ok:
                wrong.append((g["id"], g["k"], g["t"], c, g[c], w[c]))
    assert not wrong, f"{len(wrong)} mismatches, first (id, k, t, column, got, want): {wrong[:8]}"


# -- user aggregators over the row's tuple ------------------------------------------------
def vwap() -> Aggregator:
    """sum(price * volume) / sum(volume), over (price, volume) tuples."""
    return Aggregator(Monoid(lambda a, b: (a[0] + b[0], a[1] + b[1]), (0.0, 0), name="pv"),
                      lambda row: (row[0] * row[1], row[1]), lambda s: s[0] / s[1] if s[1] else None, name="vwap")


def joined() -> Aggregator:
    """The window's tuples joined in order: not commutative, so a reordered,
    lost or repeated row shows."""
    return Aggregator(Monoid(lambda a, b: a + ";" + b if a and b else a or b, "", name="join"),
                      lambda row: f"{row[0]!r}/{row[1]!r}", name="joined")


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    yield session
    session.stop()


def _frame(spark, rows):
    return spark.createDataFrame([(r["id"], r["k"], r["t"], r["cpu"], r["mem"]) for r in rows], SCHEMA)


READY_AGGS = ["max(cpu)", "mean(cpu)", "min(mem)", "count(mem)", "stddev(mem)", "first(mem)", "last(cpu)"]


def _names(aggs):
    return {a.replace("(", "_").rstrip(")"): a for a in aggs}


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
    names = _names(aggs)
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
    names = _names(READY_AGGS)
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


def test_slide_with_several_value_columns(spark):
    """slide= over value=["cpu", "mem"]: each window [end - range, end)
    ending at a multiple of the slide that holds rows, per key, equals the
    oracle over its rows."""
    rows = [r for r in random_rows(random.Random(9)) if not bad(r)]
    aggs = ["max(cpu)", "count(mem)", "mean(cpu)", "min(mem)"]
    names = _names(aggs)
    got = sliding_window(_frame(spark, rows), key="k", time="t", value=["cpu", "mem"], aggs=aggs, range=10,
                         slide=5).collect()
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
            if agg.startswith(("max", "min", "mean")):  # order-free: the slide's windows are time sets
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


def test_one_value_column_keeps_its_names(spark):
    """A single column (or a list of one) keeps today's names; naming the
    column is allowed and gives max_<column>."""
    df = _frame(spark, [{"id": 0, "k": "a", "t": 1.0, "cpu": 1.5, "mem": 3}])
    assert sliding_window(df, key="k", time="t", value=["cpu"], aggs=["max"], range=10).columns[-1] == "max"
    out = sliding_window(df, key="k", time="t", value="cpu", aggs=["max(cpu)", "max"], range=10).collect()
    assert (out[0]["max_cpu"], out[0]["max"]) == (1.5, 1.5)


def test_cli_refuses_several_value_columns():
    from spark_ops.cli.errors import CLIError
    from spark_ops.cli.window import window_spec

    class Args:
        key, time, value, agg, range, rows, on_bad_row, frame = "k", "t", "cpu,mem", "max", 10, None, "error", \
            "default"

    with pytest.raises(CLIError, match="one --value column"):
        window_spec(Args)
    Args.value, Args.agg = "cpu", "max(cpu)"
    with pytest.raises(CLIError, match="one --value column"):
        window_spec(Args)


# -- the per-key windows without Spark, under hypothesis -----------------------------------------
cpu_values = st.one_of(st.integers(-5, 9).map(float), st.sampled_from([0.5, -0.0, 1e300]))
mem_values = st.one_of(st.integers(1, 9), st.just(BIG))


@st.composite
def key_rows(draw):
    n = draw(st.integers(1, 60))
    steps = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 5.0]), min_size=n, max_size=n))
    times = [math.fsum(steps[: i + 1]) for i in range(n)]
    cpu = draw(st.lists(cpu_values, min_size=n, max_size=n))
    mem = draw(st.lists(st.one_of(mem_values, st.none()) if draw(st.booleans()) else mem_values,
                        min_size=n, max_size=n))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=4))))
    return times, cpu, mem, cuts


def _push_all(window, times, cpu, mem, cuts):
    """The key's rows pushed in pieces as a batch task pushes them."""
    out = None
    bounds = [0, *[c for c in cuts if c < len(times)], len(times)]
    for a, b in zip(bounds, bounds[1:]):
        if a == b:
            continue
        values = pa.StructArray.from_arrays([pa.array(cpu[a:b], pa.float64()), pa.array(mem[a:b], pa.int64())],
                                            names=["v0", "v1"])
        problems = [None if m is not None else "null or NaN value" for m in mem[a:b]]
        piece = window.push(pa.array(times[a:b], pa.float64()), values,
                            problems if any(problems) else None)
        out = piece if out is None else [pa.concat_arrays([x, y]) for x, y in zip(out, piece)]
    return [c.to_pylist() for c in out]


@sane_settings(80)
@given(data=key_rows(), size=st.sampled_from([1.0, 3.0, 8.0]), count=st.sampled_from([None, 1, 4]))
def test_key_windows_against_the_oracle(data, size, count):
    """The columnar engine (ready aggregations, one field each), the MTA's
    sorted windows and the policy window (a VWAP and the non-commutative
    join over the tuples) against the oracle, on the same rows and pushes."""
    times, cpu, mem, cuts = data
    rows = [{"id": i, "k": "a", "t": t, "cpu": c, "mem": m} for i, (t, c, m) in enumerate(zip(times, cpu, mem))]
    size_kw = dict(rows=count) if count is not None else dict(range=size)
    oracle_kw = dict(count=count) if count is not None else dict(range=size)
    ready = ["max(cpu)", "min(mem)", "count(cpu)", "first(mem)", "last(cpu)", "stddev(mem)", "mean(cpu)"]
    names = _names(ready)
    want = expected(rows, {**names, **{"vwap": "vwap", "joined": "joined"}}, **oracle_kw)
    common = dict(key="k", time="t", value=("cpu", "mem"), on_bad_row="flag", integral=(False, True))

    spec = WindowSpec.build(aggs=ready, engine="columnar", **common, **size_kw)
    spec.kernels = tuple(a.split("(")[0] for a in ready)
    got = _push_all(ColumnarKeyWindow(spec, "a"), times, cpu, mem, cuts)
    _check(got, names, want)

    user = {"vwap": vwap(), "joined": (joined(), "string"), **{n: a for n, a in names.items()}}
    spec = WindowSpec.build(aggs=user, engine="amta", **common, **size_kw)
    for window in (SortedWindow(spec, "a", "run"), PolicyWindow(spec, "a", "run")):
        got = _push_all(window, times, cpu, mem, cuts)
        _check(got, list(user), want)
    spec = WindowSpec.build(aggs=user, engine="amta", **common,
                            **({"rows": [count, count + 2]} if count is not None else {"range": [size, size * 2]}))
    got = _push_all(SizesSortedWindow(spec, "a", "run"), times, cpu, mem, cuts)
    _check([got[i] for i in range(0, len(got) - 1, 2)] + [got[-1]], list(user), want)


def _check(columns, names, want):
    for j, name in enumerate(names):
        for i, value in enumerate(columns[j]):
            w = want[i][name]
            assert _close(value, w) and (type(w) is not int or value == w), (name, i, value, w)
    rejected = columns[-1]
    assert [r is not None for r in rejected] == [want[i]["rejected"] is not None for i in range(len(rejected))]


def test_geomean_rejects_a_column_it_reads_as_the_mta_does():
    """geomean(cpu) over several value columns: a row whose cpu is not
    positive is rejected by the columnar engine with the reason the MTA's
    lift gives, and a non-positive mem (which geomean does not read) is not."""
    times = [1.0, 2.0, 3.0, 4.0]
    cpu, mem = [2.0, -1.0, 8.0, 0.0], [1, -5, 0, 3]
    common = dict(key="k", time="t", value=("cpu", "mem"), range=10, on_bad_row="flag", integral=(False, True))
    aggs = ["geomean(cpu)", "max(mem)"]
    spec = WindowSpec.build(aggs=aggs, engine="columnar", **common)
    spec.kernels = ("geomean", "max")
    columnar = _push_all(ColumnarKeyWindow(spec, "a"), times, cpu, mem, [])
    mta = _push_all(SortedWindow(WindowSpec.build(aggs=aggs, engine="amta", **common), "a", "run"), times, cpu,
                    mem, [])
    assert columnar[-1] == mta[-1]
    assert [r is not None for r in columnar[-1]] == [False, True, False, True]
    assert "cannot take the value" in columnar[-1][1]
    for got in (columnar, mta):
        assert _close(got[0][2], 4.0) and got[1][2] == 1 and got[1][0] == 1


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

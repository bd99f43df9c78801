"""Several value columns without Spark (spark_ops.values): the per-key
windows driven as a batch task drives them, under hypothesis, against the
brute-force oracle of tests/values_oracle.py: the columnar engine (ready
aggregations, one column each, from a structured array), the MTA's sorted
windows of one and several sizes and the policy window (a VWAP and a
non-commutative join over the row's tuples), nulls flagged; geomean over
one column; the CLI's refusal of several value columns.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_ops.columnar import ColumnarKeyWindow
from spark_ops.sorted_window import SizesSortedWindow, SortedWindow
from spark_ops.spec import WindowSpec
from spark_ops.windows import PolicyWindow
from tests.spark_fixtures import _close
from tests.strategies import sane_settings
from tests.values_oracle import BIG, expected, joined, names_of, vwap

def test_cli_window_spec_of_several_value_columns():
    """--value cpu,mem and --agg (repeated, comma-separated) build the
    DataFrame call's spec, by the same column rule (spec.split_columns);
    an aggregation without its column is an error naming the fix."""
    from spark_ops.cli.errors import CLIError
    from spark_ops.cli.window import window_spec

    class Args:
        key, time, value, range, rows, on_bad_row, frame = "k", "t", " cpu, mem", 10, None, "error", "default"
        agg = ["max(cpu)", "mean(mem),min(cpu)"]

    spec = window_spec(Args)
    assert spec.value == ("cpu", "mem") and spec.value_fields == ("cpu", "mem") and spec.reads == (0, 1, 0)
    assert [n for n, _ in spec.output_columns] == ["max_cpu", "mean_mem", "min_cpu"]
    Args.agg = ["max"]
    with pytest.raises(CLIError, match="does not say which value column it reads"):
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
    names = names_of(ready)
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


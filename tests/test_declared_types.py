"""A declared ``spark_type`` is one rule on every engine
(:func:`spark_ops.aggregations.arrow_column`): a result that is not of the
type fails naming the column, never truncated; the columnar engine, the
MTA's fused arrays and its Python values give the same column or the same
error.

The oracle: the aggregation computed here by brute force over each row's
window (``rows=2``), then converted by the definition in Python: an integer
type takes an integral number within its range, a decimal an integer that
fits its precision, a ``double`` or ``float`` any number (rounded), other
types none of these.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta.aggregators import READY
from spark_ops import SlidingWindowError, aggregations
from spark_ops.columnar import ColumnarKeyWindow, kernel_names
from spark_ops.sorted_window import SortedWindow
from spark_ops.spec import WindowSpec
from tests.strategies import sane_settings

BITS = {"long": 64, "int": 32, "short": 16, "byte": 8}
DECLARED = [*BITS, "double", "decimal(5,1)", "decimal(20,0)", "string"]


def converted(v, declared: str):
    """``v`` (an int or a float) as a value of ``declared``, or ``None`` when it is not one."""
    if declared in BITS:
        half = 1 << (BITS[declared] - 1)
        return int(v) if float(v).is_integer() and -half <= v < half else None
    if declared == "double":
        return float(v) if isinstance(v, float) or abs(v) <= 1 << 53 else None
    if declared.startswith("decimal"):
        digits = 4 if declared == "decimal(5,1)" else 20
        return decimal.Decimal(v) if isinstance(v, int) and abs(v) < 10 ** digits else None
    return None


def windows_max(values, n=2):
    return [max(values[max(0, i - n + 1): i + 1]) for i in range(len(values))]


def engines(spec):
    spec.kernels = tuple(kernel_names(spec))
    return {"columnar": ColumnarKeyWindow(spec, "k"), "amta": SortedWindow(spec, "k", "r")}


def outcome(window, values, arrow):
    try:
        return window.push(pa.array([float(i) for i in range(len(values))]), pa.array(values, arrow), None)
    except SlidingWindowError as exc:
        return exc


NUMBERS = st.one_of(st.integers(-300, 300), st.integers(-(1 << 62), 1 << 62),
                    st.sampled_from([2.5, -3.9, 2.0, 1e3 + 0.5, 3e10, 1e19, 126.0, -0.0]),
                    st.floats(-1e6, 1e6, allow_nan=False))


@sane_settings(150)
@given(values=st.lists(NUMBERS, min_size=1, max_size=6), declared=st.sampled_from(DECLARED), fused=st.booleans())
def test_engines_agree_with_the_definition(values, declared, fused):
    """``max`` (and ``count``, which fuses with it on the MTA) under a name
    of one's own and a declared type, over a long or a double column."""
    floating = any(isinstance(v, float) for v in values)
    values = [float(v) for v in values] if floating else values
    aggs = [("peak", READY["max"].aggregator, declared)]
    if fused:
        aggs.append(("n", READY["count"].aggregator, "int"))
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, rows=2, integral=not floating)
    want = [converted(v, declared) for v in windows_max(values)]
    for name, window in engines(spec).items():
        got = outcome(window, values, pa.float64() if floating else pa.int64())
        if any(w is None for w in want):
            assert isinstance(got, SlidingWindowError), (name, got)
            assert "'peak'" in str(got) or "peak overflows" in str(got), (name, got)
        else:
            assert not isinstance(got, Exception), (name, got)
            assert got[0].to_pylist() == want, name
            if fused:
                assert got[1].type == pa.int32() and got[1].to_pylist() == [min(i + 1, 2) for i in range(len(values))]


@pytest.mark.parametrize("results, spark", [([2.7, -3.9], "long"), ([2.5], "int"), ([1e3 + 0.5], "short"),
                                            ([float("nan")], "long"), ([True, False], "long"), (["x"], "long"),
                                            ([2.5], "decimal(5,1)"), ([2.5], "string")])
def test_a_result_that_is_not_of_the_type_is_refused(results, spark):
    """Python values (a user aggregator's) and Arrow arrays (the kernels',
    the fused results) alike."""
    with pytest.raises(aggregations.NotOfType):
        aggregations.arrow_column(results, spark)
    if not isinstance(results[0], str):
        with pytest.raises(aggregations.NotOfType):
            aggregations.arrow_column(pa.array(results), spark)


def test_integral_results_convert_and_overflows_name_the_row():
    assert aggregations.arrow_column([2.0, None, -3.0], "int").to_pylist() == [2, None, -3]
    assert aggregations.arrow_column(pa.array([2.0, None]), "short").type == pa.int16()
    assert aggregations.arrow_column(pa.array([20, 3]), "decimal(5,1)").to_pylist() == [decimal.Decimal(20),
                                                                                         decimal.Decimal(3)]
    assert aggregations.arrow_column(pa.array([2.5]), "float").type == pa.float32()
    for results in ([1, 2, 1 << 40], pa.array([1, 2, 1 << 40])):
        with pytest.raises(aggregations.OutOfRange) as info:
            aggregations.arrow_column(results, "int")
        assert (info.value.index, info.value.value) == (2, 1 << 40)

"""A job's aggregations: ready ones by name (declared once, in
:data:`mta.aggregators.READY`) or the user's own ``(column, Aggregator,
spark_type)``, the Spark and Arrow types of their output columns, and the
overflow rule.

The overflow rule: the MTAs aggregate integers as Python integers, so a
``sum`` (or a user aggregation of Spark type ``long``) is exact however
large it grows inside the window; a result that does not fit a ``long``
(int64) fails the job with a :class:`~spark_ops.spec.SlidingWindowError`
naming the column, the key and the row's time, as Spark's ANSI mode
does, on every engine, batch and streaming (:func:`arrow_column`, called
for every window's results by :class:`spark_ops.key_window.RowWindow`).
It is not a bad row: ``on_bad_row="flag"`` does not turn it into one,
because the input row is valid and no value of the declared type is right.
"""

from __future__ import annotations

import functools
import operator
import re

from mta import Aggregator, aggregators, fused


#: The names of the ready aggregations over the value column.
READY = tuple(aggregators.READY)


def spark_type(result: str, integral: bool) -> str:
    """The Spark type of a ready aggregation's column, from its result kind
    (:class:`mta.aggregators.Ready`); ``integral``: the value column holds integers."""
    return "long" if result == "count" or (integral and result == "value") else "double"


@functools.cache  # called for every key's window
def arrow_type(spark: str):
    """The Arrow type of an output column of Spark type ``spark``: numbers,
    ``string``, ``boolean``, ``binary``, ``date``, ``decimal(p, s)`` and arrays
    of them, as Spark writes these types (``None`` for others, structs and
    maps: Arrow infers it from the values).  Workers have no Spark parser."""
    import pyarrow as pa

    name = "".join(spark.split()).lower()
    if name.startswith("array<") and name.endswith(">"):
        item = arrow_type(name[len("array<"):-1])
        return None if item is None else pa.list_(item)
    decimal = re.fullmatch(r"decimal\((\d+),(\d+)\)", name)
    if decimal:
        return pa.decimal128(int(decimal[1]), int(decimal[2]))
    return {"double": pa.float64(), "float": pa.float32(), "real": pa.float32(), "long": pa.int64(),
            "bigint": pa.int64(), "int": pa.int32(), "integer": pa.int32(), "short": pa.int16(),
            "smallint": pa.int16(), "byte": pa.int8(), "tinyint": pa.int8(), "string": pa.string(),
            "boolean": pa.bool_(), "binary": pa.binary(), "date": pa.date32(),
            "decimal": pa.decimal128(10, 0)}.get(name)


def unknown(names) -> list[str]:
    """The aggregations of ``names`` (``"max"``, ``"max(cpu)"``) that are
    not ready ones, for a surface that takes names alone (``--agg``, SQL)."""
    return [a for a in names if a.split("(")[0].strip().lower() not in aggregators.READY]


def resolve_one(agg, integral: bool) -> tuple[str, Aggregator, str]:
    """``"max"`` or ``(column, Aggregator[, spark type])`` (a job's list of
    them: :func:`spark_ops.values.resolve`); ``integral``: the value column
    the ready aggregation reads holds integers."""
    from .spec import SlidingWindowError

    if isinstance(agg, str):
        ready = aggregators.READY.get(agg.strip().lower())
        if ready is None:
            raise SlidingWindowError(
                f"unknown aggregation {agg!r}; ready ones are {', '.join(READY)}, "
                "or pass (column, Aggregator, spark_type) for your own")
        return ready.name, ready.aggregator, spark_type(ready.result, integral)
    if isinstance(agg, tuple) and len(agg) in (2, 3) and isinstance(agg[1], Aggregator):
        declared = agg[2] if len(agg) == 3 else "double"
        if hasattr(declared, "simpleString"):  # a pyspark DataType
            declared = declared.simpleString()
        if not isinstance(declared, str):
            raise SlidingWindowError(f"aggregation {agg[0]!r}: its Spark type is a DDL string such as 'double' "
                                     f"or a pyspark DataType, got {declared!r}")
        return agg[0], agg[1], declared
    raise SlidingWindowError(
        f"an aggregation is a name such as 'max' or a tuple (column, Aggregator, spark_type), got {agg!r}")


def value_aggregator(aggs: list, reads: tuple) -> Aggregator | None:
    """The aggregators ``aggs`` (each over the value column ``reads``
    names, :func:`spark_ops.values.on_columns`) as one fused aggregator over
    shared moments (:func:`mta.fused.fuse`: one lift per row and one
    combine per merge, rather than a product's one per aggregation), or
    ``None`` when they do not fuse: fewer than two, one that is not a
    fusable ready aggregation, or two reading different columns."""
    if len(aggs) < 2 or len(set(reads)) > 1:
        return None
    one = fused.fuse(aggs)
    if one is None or not reads or reads[0] is None:
        return one
    return one.on(operator.itemgetter(reads[0]))


def fused_arrow_columns(names: tuple, results: list) -> list:
    """The Arrow columns of the fused aggregations ``names``
    (:func:`mta.fused.fused_names`) from their window aggregates
    ``results`` (:data:`mta.fused.IDENTITY`-shaped tuples of a floating
    value column), computed over NumPy arrays rather than value by value:
    the same arithmetic as the per-value lowers of :data:`mta.fused.FUSABLE`
    (IEEE division and square root), the same nulls (an empty window; a
    variance below ``ddof + 1`` values).  O(n k) for n results, k names."""
    import numpy as np
    import pyarrow as pa

    moments = np.array(results, dtype=np.float64).reshape(len(results), len(fused.IDENTITY))
    n = moments[:, 0]
    empty = n == 0
    columns = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in names:
            if name == "count":
                columns.append(pa.array(n.astype(np.int64)))
                continue
            if name == "sum":
                column, null = moments[:, 1], None
            elif name in ("min", "max"):
                column, null = moments[:, 3 if name == "min" else 4], empty
            elif name == "mean":
                column, null = moments[:, 1] / n, empty
            else:
                ddof = 0 if name.endswith("_pop") else 1
                column, null = moments[:, 2] / (n - ddof), n <= ddof
                if name.startswith("stddev"):
                    column = np.sqrt(column)
            columns.append(pa.array(column, mask=null if null is not None and null.any() else None))
    return columns


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class OutOfRange(Exception):
    """A result does not fit its column's type: the ``index``-th of the
    results, ``value``."""

    def __init__(self, index: int, value) -> None:
        super().__init__(index, value)
        self.index, self.value = index, value


def arrow_column(results, spark: str):
    """One aggregation's results (a list of Python values, or an Arrow
    array) as an Arrow array of Spark type ``spark``, by one rule for every
    engine: a number becomes one of a declared number type only when it is
    one exactly (an integer type takes integers, and floats only when
    integral, within its range; a ``double`` integers within 2^53; a
    ``decimal`` integers and ``Decimal`` values that fit, not floats); a
    ``float`` column takes any double, rounded; other types as Arrow
    converts Python values to them.  Raises :class:`OutOfRange` for the
    first integer outside the column's integer type, :class:`NotOfType` for
    a result that is not of the type."""
    import pyarrow as pa

    arrow = arrow_type(spark)
    if isinstance(results, pa.Array):
        if arrow is None or results.type == arrow:
            return results
        if not (_number(results.type) and _number(arrow)):
            results = results.to_pylist()  # Arrow casts a number into a decimal or a string unchecked
    if not isinstance(results, pa.Array):
        if arrow is None or not pa.types.is_integer(arrow):
            return _converted(results, arrow)
        # Arrow truncates a Python float into an integer type: the results' own type first, then a checked cast
        results = _converted(results, None, arrow)
        if results.type == arrow:
            return results
        if not _number(results.type) and results.type != pa.null():
            raise NotOfType(f"its results are {results.type}")
    try:
        return results.cast(arrow, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        if pa.types.is_integer(arrow) and pa.types.is_integer(results.type):
            _out_of_range(results.to_pylist(), arrow)
        raise NotOfType(str(exc)) from None


def _number(kind) -> bool:
    """An Arrow integer or floating-point type, which Arrow casts between checking every value."""
    import pyarrow as pa

    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _converted(results: list, arrow, integer=None):
    """``pa.array(results, type=arrow)``, Arrow's failure as
    :class:`OutOfRange` (an integer outside ``integer``, the column's
    integer type, or ``arrow``'s) or :class:`NotOfType`."""
    import pyarrow as pa

    try:
        return pa.array(results, type=arrow)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        integer = integer or arrow
        if integer is not None and pa.types.is_integer(integer):
            _out_of_range(results, integer)
        raise NotOfType(str(exc)) from None


def _out_of_range(results: list, integer) -> None:
    """Raise :class:`OutOfRange` for the first int of ``results`` outside
    the Arrow integer type ``integer``, if one is."""
    low, high = -(1 << (integer.bit_width - 1)), (1 << (integer.bit_width - 1)) - 1
    for i, v in enumerate(results):
        if isinstance(v, int) and not low <= v <= high:
            raise OutOfRange(i, v)


class NotOfType(Exception):
    """Results that are not of their column's declared type (Arrow's reason)."""


def not_of_type(column: str, spark: str, reason: str):
    """The error for a user aggregation ``column`` whose results are not its
    declared Spark type ``spark``."""
    from .spec import SlidingWindowError

    return SlidingWindowError(f"aggregation {column!r} returned a result that is not {spark} ({reason}); declare "
                              "its type as the third item of (column, Aggregator, spark_type)")


def overflow_error(spec, key, column: str, t, value, spark: str = "long", at: str | None = None):
    """The error that fails a job whose ``column`` (of Spark type ``spark``)
    left its integer type at ``key``'s row of time ``t`` (see the module's
    overflow rule); ``at``: the output column ``t`` is in, if not the time
    column (a ``slide=`` window's end)."""
    from .spec import SlidingWindowError

    where = f"{spec.key_text(key)}, {at or spec.time}={t!r}"
    if spark == "long":
        return SlidingWindowError(
            f"{column} overflows long (int64) at {where}: the exact result is "
            f"{value}, outside [{INT64_MIN}, {INT64_MAX}]; cast the value column to double for a wider, rounded sum")
    return SlidingWindowError(f"{column} overflows its type {spark} at {where}: the result is {value}; declare a "
                              "wider type")

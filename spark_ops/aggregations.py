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

from mta import Aggregator, aggregators


#: The names of the ready aggregations over the value column.
READY = tuple(aggregators.READY)


def spark_type(result: str, integral: bool) -> str:
    """The Spark type of a ready aggregation's column, from its result kind
    (:class:`mta.aggregators.Ready`); ``integral``: the value column holds integers."""
    return "long" if result == "count" or (integral and result == "value") else "double"


@functools.cache  # called for every key's window
def arrow_type(spark: str):
    """The Arrow type of an output column of Spark type ``spark`` (``None``:
    let Arrow infer it from the values)."""
    import pyarrow as pa

    return {"double": pa.float64(), "long": pa.int64(), "string": pa.string(),
            "array<double>": pa.list_(pa.float64())}.get(spark)


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
        return agg[0], agg[1], agg[2] if len(agg) == 3 else "double"
    raise SlidingWindowError(
        f"an aggregation is a name such as 'max' or a tuple (column, Aggregator, spark_type), got {agg!r}")


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class OutOfRange(Exception):
    """A result does not fit its column's type: the ``index``-th of the
    results, ``value``."""

    def __init__(self, index: int, value) -> None:
        super().__init__(index, value)
        self.index, self.value = index, value


def arrow_column(results, spark: str):
    """One aggregation's results (a list of Python values, or an Arrow array
    as is) as an Arrow array of Spark type ``spark``; raises
    :class:`OutOfRange` for the first integer outside a ``long``."""
    import pyarrow as pa

    if isinstance(results, pa.Array):
        return results
    arrow = arrow_type(spark)
    try:
        return pa.array(results, type=arrow)
    except (OverflowError, pa.ArrowInvalid):
        if arrow is not None and pa.types.is_integer(arrow):
            for i, v in enumerate(results):
                if isinstance(v, int) and not INT64_MIN <= v <= INT64_MAX:
                    raise OutOfRange(i, v) from None
        raise


def overflow_error(spec, key, column: str, t, value):
    """The error that fails a job whose ``column`` left int64 at ``key``'s
    row of time ``t`` (see the module's overflow rule)."""
    from .spec import SlidingWindowError

    return SlidingWindowError(
        f"{column} overflows long (int64) at {spec.key_text(key)}, {spec.time}={t!r}: the exact result is {value}, "
        f"outside [{INT64_MIN}, {INT64_MAX}]; cast the value column to double for a wider, rounded sum")

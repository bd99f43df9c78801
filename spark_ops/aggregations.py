"""A job's aggregations: ready ones by name (declared once, in
:data:`mta.aggregators.READY`) or the user's own ``(column, Aggregator,
spark_type)``, and the Spark and Arrow types of their output columns."""

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


def resolve(aggs, integral: bool) -> list[tuple[str, Aggregator, str]]:
    """``aggs`` (a list, or names separated by commas) as ``(column,
    Aggregator, spark type)``, one per output column."""
    from .spec import SlidingWindowError  # the error of a job's spec, whose build calls this

    if isinstance(aggs, str):
        aggs = [a.strip() for a in aggs.split(",") if a.strip()]
    if not aggs:
        raise SlidingWindowError("aggs= needs at least one aggregation, e.g. ['max', 'mean']")
    resolved = [_resolve_one(a, integral) for a in aggs]
    names = [name for name, _, _ in resolved]
    if len(set(names)) != len(names):
        raise SlidingWindowError(f"aggregation output columns must be unique, got {names}")
    return resolved


def _resolve_one(agg, integral: bool) -> tuple[str, Aggregator, str]:
    """``"max"`` or ``(column, Aggregator[, spark type])``."""
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

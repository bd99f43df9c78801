"""Counts a session's window jobs make on the executors and read on the
driver: one Spark accumulator per SparkContext, created on the driver when
a job first needs one (store round trips, :mod:`spark_ops.traffic`; bad rows
left out of periodic windows, :mod:`spark_ops.excluded`)."""

from __future__ import annotations

__all__ = ["SessionCounter"]


class SessionCounter:
    """An integer count per SparkContext."""

    def __init__(self) -> None:
        self._by_context: dict = {}  # id(SparkContext) -> (context, accumulator)

    def accumulator(self, spark):
        """The count's accumulator in ``spark``'s context (driver side)."""
        sc = spark.sparkContext
        found = self._by_context.get(id(sc))
        if found is None or found[0] is not sc:
            found = self._by_context[id(sc)] = (sc, sc.accumulator(0))
        return found[1]

    def value(self, spark) -> int:
        """The count so far in ``spark``'s context (0 before its first job)."""
        found = self._by_context.get(id(spark.sparkContext))
        return found[1].value if found is not None and found[0] is spark.sparkContext else 0

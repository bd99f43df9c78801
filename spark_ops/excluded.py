"""Bad rows left out of periodic windows: ``slide=`` with ``on_bad_row="flag"``.

Periodic output has a row per key and window, not per input row, so no
output row can carry a bad row's ``rejected`` flag.  In a batch job
``on_bad_row="flag"`` then means: each bad row (the rules of
:mod:`spark_ops.rows`: a null or NaN key, a null, NaN or infinite time, a
time beyond the microseconds the windows count, a null or NaN value in
any value column, a value the aggregations cannot lift) is left out of
every window, counted in a Spark accumulator of the session that
:func:`rejected_rows` reads on the driver (``mta-spark`` prints it), and
logged at WARNING by the task that found it, naming its
first bad row.  Nothing is dropped unseen.

:func:`exclude` puts one ``mapInArrow`` pass before the periodic plan: the
rows are checked a batch at a time with :func:`spark_ops.rows.check_columns`
and, when an aggregation may reject a number (``geomean``, a user
aggregator), each remaining row's value is lifted once by the job's
aggregations (O(rows) lifts; a pass the error mode does not make).  In
streaming the same pass runs on each micro-batch, and a late row (behind
the watermark when it arrives: windows it belongs to may be written
already) is left out of every window, counted and logged by the per-key
function (:func:`left_out`), so a query runs on through late data.  As with
any accumulator updated in a transformation, a task that runs again (a
retry, a speculative attempt, a micro-batch replayed after a restart)
counts its rows again.
"""

from __future__ import annotations

import logging

from .counters import SessionCounter

__all__ = ["accumulator", "exclude", "left_out", "rejected_rows"]

_REJECTED = SessionCounter()

_log = logging.getLogger("spark_ops")


def accumulator(spark):
    """The rejected-rows accumulator of ``spark``'s context (driver side)."""
    return _REJECTED.accumulator(spark)


def rejected_rows(spark) -> int:
    """The bad rows that ``slide=`` jobs run in ``spark``'s context left out
    of their windows so far (0 before the first such job)."""
    return _REJECTED.value(spark)


def left_out(count, found: int, first: str) -> None:
    """``found`` bad rows left out of the windows: counted in ``count``
    (:func:`accumulator`) and logged at WARNING naming ``first`` (its
    :func:`spark_ops.rows.rejected_text`)."""
    count.add(found)
    _log.warning("sliding_window slide=: %d bad row%s left out of the windows (on_bad_row='flag'), first: %s",
                 found, "s" * (found != 1), first)


def exclude(df, spec):
    """``df`` without its bad rows, each counted and the first of each task
    logged (``spec``: a batch ``slide=`` job with ``on_bad_row="flag"``).
    Rows keep their order within each partition, so the periodic plan's
    arrival order is the input's.  O(rows)."""
    from pyspark.sql import functions as F

    from . import columnar, rows, values
    from .keys import key_reader
    from .names import map_in_arrow
    from .plan import TIME, VALUE, time_sql

    types = {f.name: f.dataType for f in df.schema.fields}
    checked = (df.withColumn(TIME, F.expr(time_sql(spec.time, types[spec.time])))
                 .withColumn(VALUE, F.expr(values.value_sql(spec.value, spec.value_fields, types))))
    names = checked.columns
    key_columns, key_of = key_reader([names.index(k) for k in spec.keys])
    time_at, value_at, shown_at = names.index(TIME), names.index(VALUE), names.index(spec.time)
    count = accumulator(df.sparkSession)
    # a ready aggregation lifts every number but geomean (positive ones only): lift only when one may raise
    lifting = any(name in (None, "geomean") for name in columnar.kernel_names(spec))

    def keep_good(batches):
        import pyarrow as pa

        lift = spec.value_aggregator().lift
        first = None
        found = 0
        for batch in batches:
            keys, times, taken = key_columns(batch), batch.column(time_at), batch.column(value_at)
            problems = rows.check_columns(keys, times, taken, micros=True)
            if problems is None and not lifting:
                yield batch
                continue
            problems = problems or [None] * batch.num_rows
            python = values.python_values(taken) if lifting else None
            for i, problem in enumerate(problems if lifting else ()):
                if problem is None:
                    try:
                        lift(python[i])
                    except Exception as exc:  # noqa: BLE001 - the row is rejected with the reason
                        problems[i] = rows.cannot_lift(exc)
            bad = [i for i, p in enumerate(problems) if p is not None]
            if bad:
                found += len(bad)
                if first is None:
                    i = bad[0]
                    value = python[i] if python is not None else values.python_values(taken.slice(i, 1))[0]
                    first = rows.rejected_text(spec, problems[i], key_of(keys, i), batch.column(shown_at)[i].as_py(),
                                               value)
                batch = batch.filter(pa.array([p is None for p in problems]))
            yield batch
        if found:
            left_out(count, found, first)

    return map_in_arrow(checked, keep_good, checked.schema).drop(TIME, VALUE)

"""Event time in streaming: rows wait for the input's watermark.

A streaming input with a watermark on its time column
(``df.withWatermark("ts", "10 minutes")``) may deliver a key's rows in any
order within the delay.  Each key's rows then wait in Spark's own state
(its state store, checkpointed with the query: a replayed micro-batch finds
the same rows waiting) until the watermark passes their time, and enter the
key's window in ``(time, arrival)`` order, earlier micro-batches first at
equal times: a row's output is the batch output over the same rows,
whatever their arrival order and micro-batch boundaries.

The watermark is Spark's (``GroupState.getCurrentWatermarkMs``): a row at
time ``t`` waits while ``t > watermark``, and Spark's event-time timeout
calls the key again once the watermark passes its oldest waiting row, in a
micro-batch with no rows for it if need be.  A row that arrives with
``t <= watermark`` is late: rows of that time may already have entered
the window, so it cannot; it follows ``on_bad_row`` (error, or flagged in
the output with the reason), as do rows that no window can take (a null
or NaN key, time or value), which leave at once.  Times and the
watermark are compared in the time column's exact microseconds, as Spark
compares them (double seconds would merge microseconds far from 1970).

When no row waits, a time window's key (``range=``) gets a timeout at its
newest row plus the range (:func:`expiry_ms`): past it, no row still to
come can share a window with the key's rows, so the timed-out call deletes
the window and drops the key's state (a later row starts a new window,
with the output the old one would have given).  A key left with nothing
(its rows all late, or none a window could take) keeps neither window nor
state.

Spark drops rows behind the watermark before an event-time timeout
operator sees them, silently, when its input carries the watermarked
column.  The plan's input to that operator is the key and the packed rows
(:mod:`spark_ops.passthrough`) plus :data:`MARKER`, a column that carries
the watermark's metadata (so Spark gives the operator its watermark and
timeouts) but holds no time (null), which Spark's late-row filter
(``time <= watermark``) never matches: every late row reaches the per-key
function (:func:`spark_ops.streaming.event_time_windows`) and is reported,
whatever the times (years 1 to 9999).
"""

from __future__ import annotations

import math

from . import rows
from .plan import ARRIVAL, TIME, VALUE, micros
from .spec import SlidingWindowError

#: Where Spark records a column's watermark delay (in milliseconds).
DELAY_KEY = "spark.watermarkDelayMs"
#: The column that carries the watermark to the stateful operator (see the module).
MARKER = "__mta_watermark"


def watermark_delay(df, time: str) -> float | None:
    """The watermark delay (seconds) of ``df``'s time column, ``None`` when
    the input has no watermark; an error when its watermark is on another
    column (the windows would not wait for it)."""
    delay = df.schema[time].metadata.get(DELAY_KEY)
    if delay is not None:
        return delay / 1000
    others = [f.name for f in df.schema.fields if DELAY_KEY in f.metadata]
    if others:
        raise SlidingWindowError(
            f"the input's watermark is on column {others[0]!r}, not on the time column {time!r}: each key's rows "
            f"wait for a watermark on the time that orders them; {watermark_hint(df, time, 'delay')}")
    return None


def watermark_hint(df, time: str, delay: str = "'10 minutes'") -> str:
    """How to put a watermark on ``df``'s time column, which Spark allows
    on a ``TIMESTAMP`` alone: the call, or the column to make first."""
    from pyspark.sql.types import TimestampNTZType, TimestampType

    kind = df.schema[time].dataType
    if isinstance(kind, TimestampType):
        return f"use df.withWatermark({time!r}, {delay})"
    make = (f"F.col({time!r}).cast('timestamp')" if isinstance(kind, TimestampNTZType)
            else f"F.timestamp_seconds({time!r})")
    read = " (its wall clock read in the session's time zone)" if isinstance(kind, TimestampNTZType) else ""
    return (f"Spark puts watermarks on TIMESTAMP columns only, so make one of {time!r}{read}: "
            f"df.withColumn('ts', {make}).withWatermark('ts', {delay}) and time='ts'")


def with_marker(packed, delay: float):
    """``packed`` (the key and its packed rows) with :data:`MARKER`."""
    from pyspark.sql import functions as F

    marker = F.lit(None).cast("timestamp").alias(MARKER, metadata={DELAY_KEY: int(round(delay * 1000))})
    return packed.select("*", marker)


def split(new, waiting, watermark_ms: int, time: str, null_key: bool = False, peers: bool = False,
          at_watermark: bool = False):
    """The rows that leave now and the rows that wait.

    ``new``: this micro-batch's rows of the key (an Arrow table with the
    plan's columns; no rows when the key timed out); ``waiting``: the rows
    that waited so far (``None`` for none), in order; ``watermark_ms``:
    Spark's; ``time``: the time column (a timestamp: Spark's watermarks are
    on timestamps), compared and ordered in its exact microseconds
    (:func:`spark_ops.plan.micros`), as a batch job sorts on it;
    ``null_key``: the key is null or NaN (its rows leave at once, as a null
    time's do); ``peers``: rows the windows take as of one time (equal
    double seconds, ``frame="sql"``) leave together, so the due rows that
    share the first waiting row's double wait with it; ``at_watermark``:
    a row exactly at the watermark is on time, as Spark's ``window()``
    takes it (no row of a later time has entered, and no window it belongs
    to has ended), else late.  Returns ``(leaving, problems, ready, waiting)``: the rows
    that leave at once with their problems (late, or no window can take
    them), the rows whose time the watermark passed in ``(time, arrival)``
    order (earlier micro-batches first at equal times), and the rows that
    still wait, in that order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = new.num_rows
    keys = pa.nulls(n, pa.int8()) if null_key else pa.repeat(pa.scalar(0, pa.int8()), n)
    problems = rows.check_columns(keys, new.column(TIME), new.column(VALUE), micros=True)
    problems = list(problems) if problems is not None else [None] * n
    watermark_us = watermark_ms * 1000
    for i, t in enumerate(micros(new.column(time)).tolist() if n else ()):
        if problems[i] is None and (t < watermark_us or t == watermark_us and not at_watermark):
            problems[i] = rows.behind_watermark(rows.utc(t), rows.utc(watermark_us),
                                                first=watermark_us == 0 and t <= 0, at=t == watermark_us)
    leaves = pa.array([p is not None for p in problems], type=pa.bool_())
    leaving = new.filter(leaves)
    kept = new.filter(pc.invert(leaves))
    kept = kept.take(pc.sort_indices(kept, [(time, "ascending"), (ARRIVAL, "ascending")]))
    if waiting is not None and waiting.num_rows:
        # a stable sort by time keeps earlier micro-batches' rows first at equal times
        both = pa.concat_tables([waiting, kept.select(waiting.column_names).cast(waiting.schema)])
        kept = both.take(pc.sort_indices(both, [(time, "ascending")]))
    due = micros(kept.column(time)) <= watermark_us
    if peers and 0 < due.sum() < len(due):  # due is a prefix: its tail may share the next row's double
        seconds = kept.column(TIME).to_numpy()
        due &= seconds != seconds[int(due.sum())]
    due = pa.array(due, type=pa.bool_())
    return (leaving, [p for p in problems if p is not None], kept.filter(due), kept.filter(pc.invert(due)))


def pack_waiting(waiting) -> bytes | None:
    """The waiting rows as the key's state holds them: one Arrow IPC stream
    (``None`` for none)."""
    import pyarrow as pa

    if waiting is None or not waiting.num_rows:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, waiting.schema) as writer:
        writer.write_table(waiting)
    return sink.getvalue().to_pybytes()


def unpack_waiting(blob: bytes | None):
    """The waiting rows from the key's state (``None`` for none)."""
    import pyarrow as pa

    return pa.ipc.open_stream(blob).read_all().combine_chunks() if blob else None


def timeout_ms(waiting, time: str) -> int:
    """The event-time timeout that calls the key once the watermark reaches
    its oldest waiting row (``time``: the time column; Spark times a
    timeout out when the watermark passes it; the result is at least the
    current watermark, which is below every waiting row's time)."""
    return reached_ms(int(micros(waiting.column(time)).min()))


def reached_ms(us: int) -> int:
    """The event-time timeout (ms) at which Spark calls a key once the
    watermark reaches ``us`` (microseconds): Spark times a key out when the
    watermark passes the timeout, and its watermark is in whole ms.  At
    least 1: Spark takes only positive timestamps, and whatever waits is
    after the first watermark (0).  O(1)."""
    return max(-(-us // 1000) - 1, 1)


def expiry_ms(newest: float, size: float, watermark: float) -> int:
    """The event-time timeout after which a time window whose newest row is
    at ``newest`` (seconds; ``size``, the largest window's) holds none of
    its rows for any row still to come, so the key's window and state can
    go: a row is accepted only after the watermark, and once the watermark
    is past ``newest + size`` every such row's window starts after
    ``newest``.  At least the current watermark (``watermark``, seconds),
    which Spark requires."""
    return max(math.floor((newest + size) * 1000) + 1, math.floor(watermark * 1000) + 1, 1)

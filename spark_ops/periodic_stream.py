"""Periodic output (``slide=``) on the aggregators' monoids, batch and streaming.

Batch jobs whose aggregations the columnar kernels compute keep running on
them (:class:`spark_ops.periodic.PeriodicWindow`); every other batch
``slide=`` job (a user :class:`mta.Aggregator`, ``engine="amta"`` or
``"lmta"``) and every streaming one runs each key's windows on
:class:`MonoidPeriodicWindow`: panes of the slide over the product of the
job's aggregators (:mod:`spark_ops.panes`).

Streaming (:func:`periodic_streaming_plan`) needs a watermark on the time
column.  Each key's rows wait for it as the per-row output's do (one
release rule, :func:`spark_ops.event_time.split`), enter the key's panes in
``(time, arrival)`` order, and each window whose end the watermark has
reached (``end <= watermark``) is emitted once, in append mode.  A row that
arrives behind the watermark (late: windows it belongs to may be written
already; one exactly at it is on time, as Spark's ``window()`` takes it)
is a bad row: ``on_bad_row="error"`` fails the query naming it,
``"flag"`` leaves it out of every window, counted and logged, as the other
bad rows (:mod:`spark_ops.excluded`), and the query runs on.

Exactly once: the key's open windows (their panes, O(largest range /
slide) values) and its waiting rows are the key's state in Spark's own
state store, which Spark versions with each micro-batch's commit: a
micro-batch replayed after a failed task or a restart from the checkpoint
starts from the state the previous micro-batch committed, so it emits the
same windows again in place of the failed attempt's, never twice in the
sink's committed output.  No window lives in ``store=`` (which such a job
does not need); the state of a key is dropped once it has no window left to
emit and no row waiting, so no expiry is needed (``expire_after``, which
counts processing time, is refused with a watermark).
"""

from __future__ import annotations

from mta import LiftError, product

from . import event_time, excluded, passthrough, periodic, rows, worker_gc
from .names import map_in_arrow
from .plan import PACKED, TIME, VALUE, column, micros, output_arrow_schema, with_time_and_value
from .panes import PaneWindows
from .spec import MICROS, SlidingWindowError, WindowSpec
from .streaming import _check_job, key_value
from .values import on_columns, python_values

#: Spark's state per key: the job's fingerprint, its open windows
#: (:meth:`spark_ops.panes.PaneWindows.state`) and the rows waiting for the
#: watermark (an Arrow IPC stream, :mod:`spark_ops.event_time`).
STATE_SCHEMA = "job string, windows binary, waiting binary"
#: What a bad row's error tells to do in a streaming ``slide=`` query.
REMEDY = ("pass on_bad_row='flag' to leave such rows out of the windows, counted and logged (a restart runs the "
          "micro-batch again, which fails again without it)")


class MonoidPeriodicWindow:
    """One key's periodic windows of every aggregation and size of ``spec``
    on :class:`~spark_ops.panes.PaneWindows` (one product aggregator, so a
    row is lifted once), with :class:`~spark_ops.periodic.PeriodicWindow`'s
    interface: ``push`` and ``close`` give ``(ends_us, results)``, results
    per aggregation and size (aggregation-major) as lists of Python values."""

    def __init__(self, spec: WindowSpec, key, ranges_us: list[int], slide_us: int, state: bytes | None = None,
                 remedy: str = rows.FLAG_IT):
        self.spec, self.key, self.remedy = spec, key, remedy  # remedy: what a bad row's error tells to do
        self.panes = PaneWindows(product(*on_columns([agg for _, agg, _ in spec.aggs], spec.reads)),
                                 ranges_us, slide_us, state)
        self._sizes = len(ranges_us)

    def push(self, t_us, values, shown=None):
        """:meth:`add` the rows, then the windows they complete: those ending
        at or before the last row's time (a batch key's rows come sorted)."""
        self.add(t_us, values, shown)
        if not len(t_us):
            return [], self._columns([])
        return self.emit(int(t_us[-1]))

    def add(self, t_us, values, shown=None) -> None:
        """The rows in ``(time, arrival)`` order: their times in integer
        microseconds (:func:`spark_ops.plan.micros`), their values and
        times as the input has them, for messages (Arrow arrays).  A value
        no aggregation can lift fails the job naming the row.  O(rows)
        lifts and combines."""
        panes = self.panes
        for i, (t, v) in enumerate(zip(t_us.tolist(), python_values(values))):
            try:
                panes.push(t, v)
            except LiftError as exc:
                raise rows.rejected(self.spec, rows.cannot_lift(exc), self.key,
                                    shown[i].as_py() if shown is not None else t / MICROS, v, self.remedy) from None

    def emit(self, until_us: int | None):
        """The windows ending at or before ``until_us`` not emitted yet
        (every one left for ``None``)."""
        ends, results = self.panes.emit(until_us)
        return ends, self._columns(results)

    def close(self):
        """The key's rows are done: every window left."""
        return self.emit(None)

    def _columns(self, results: list) -> list:
        """Per window, per size, a tuple per aggregation -> per aggregation
        and size (aggregation-major), a list over the windows."""
        width = len(self.spec.aggs)
        return [[window[s][a] for window in results] for a in range(width) for s in range(self._sizes)]


def periodic_streaming_plan(df, spec: WindowSpec):
    """A streaming ``df``'s windows as rows ``(key, window_end, one column
    per aggregation and size)``, each once, when the watermark passes its
    end (append mode)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    delay = event_time.watermark_delay(df, spec.time)
    if delay is None:
        raise SlidingWindowError("slide= in streaming emits a window once the watermark passes its end: the input "
                                 "needs a watermark on the time column; "
                                 f"{event_time.watermark_hint(df, spec.time)} (the delay: how late a row may arrive)")
    types = {f.name: f.dataType for f in df.schema.fields}
    schema = periodic.output_schema(spec, types)
    target = output_arrow_schema(df.sparkSession, schema)
    ordered = with_time_and_value(df, spec).select(*[column(c) for c in spec.keys], column(spec.time), TIME, VALUE)
    group_keys = passthrough.GroupKeys(ordered.schema, list(spec.keys))
    packed = map_in_arrow(ordered, passthrough.pack_by_key(group_keys, numbered=True),
                          f"{group_keys.ddl}, {PACKED} binary")
    packed = event_time.with_marker(packed, delay)
    count = excluded.accumulator(df.sparkSession) if spec.on_bad_row == "flag" else None
    return (packed.groupBy(*[column(c) for c in group_keys.names])
                  .applyInPandasWithState(worker_gc.settling(_windows_of_key(spec, target, group_keys, count)),
                                          f"{PACKED} binary", STATE_SCHEMA, "append",
                                          GroupStateTimeout.EventTimeTimeout)
                  .mapInArrow(passthrough.unpack_batches(target), schema))


def _windows_of_key(spec: WindowSpec, target, group_keys: passthrough.GroupKeys, count=None):
    """The per-key function: this micro-batch's rows join the waiting ones,
    those the watermark passed enter the panes, the windows it passed leave.
    ``count``: with ``on_bad_row="flag"``, the accumulator of the rows left
    out (late ones: the others never reach the function), else ``None``."""
    fingerprint = f"{spec.fingerprint()}; slide={spec.slide!r}"  # the panes' length is the slide
    slide_us, ranges_us = periodic.slide_and_ranges_us(spec)

    def windows_of_key(key, frames, state):
        import pandas as pd

        k = key_value(spec, group_keys.value(key))
        job, windows, blob = state.get if state.exists else (None, None, None)
        _check_job(spec, k, job, fingerprint)
        waiting = event_time.unpack_waiting(blob)
        blobs = [b for frame in frames for b in frame[PACKED]]
        watermark_ms = state.getCurrentWatermarkMs()
        window = MonoidPeriodicWindow(spec, k, ranges_us, slide_us, windows, REMEDY)
        new = passthrough.unpack(blobs) if blobs else waiting.slice(0, 0) if waiting is not None else None
        if new is not None:
            if new.num_rows and rows.null_key(k):
                raise rows.rejected(spec, rows.NULL_KEY, k, new.column(spec.time)[0].as_py(),
                                    new.column(VALUE)[0].as_py(), REMEDY)
            leaving, problems, ready, waiting = event_time.split(new, waiting, watermark_ms, spec.time,
                                                                 at_watermark=True)
            if leaving.num_rows:
                first = (problems[0], k, leaving.column(spec.time)[0].as_py(), leaving.column(VALUE)[0].as_py())
                if count is None:
                    raise rows.rejected(spec, *first, REMEDY)
                excluded.left_out(count, leaving.num_rows, rows.rejected_text(spec, *first))
            window.add(micros(ready.column(spec.time)), ready.column(VALUE), ready.column(spec.time))
        ends, results = window.emit(watermark_ms * 1000)
        windows = window.panes.state()
        if windows is None and (waiting is None or not waiting.num_rows):
            state.remove()
        else:
            state.update((fingerprint, windows, event_time.pack_waiting(waiting)))
            state.setTimeoutTimestamp(_timeout_ms(window, waiting, spec.time))
        if ends:
            batch = periodic.windows_batch(spec, target, k, ends, results)
            for blob in passthrough.pack(batch):
                yield pd.DataFrame({PACKED: [blob]})

    return windows_of_key


def _timeout_ms(window: MonoidPeriodicWindow, waiting, time: str) -> int:
    """When Spark calls the key without rows: once the watermark reaches
    its next window's end or passes its oldest waiting row (Spark times a
    key out when the watermark passes the timestamp)."""
    at = []
    end_us = window.panes.next_end_us()
    if end_us is not None:
        at.append(event_time.reached_ms(end_us))
    if waiting is not None and waiting.num_rows:
        at.append(event_time.timeout_ms(waiting, time))
    return min(at)

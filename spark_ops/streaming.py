"""The streaming plans that need Spark's state (a watermark: rows waiting
for it; ``expire_after``: processing-time timeouts):
``applyInPandasWithState``, one call per key and micro-batch.  Without
either, :mod:`spark_ops.task_stream` runs the query without Spark state.

The rows reach the per-key function and leave it as Arrow IPC bytes
(:mod:`spark_ops.passthrough`): pandas, which the state API goes through,
would otherwise change them (an integer column with a null becomes
float64), so every value, and every aggregation's input, stays exact.

Each key's level queues stay in the shared store between micro-batches
(with a watermark, until no row to come can share a window with them,
:func:`spark_ops.event_time.expiry_ms`); Spark's own state holds only the
key's checkpoint version, newest time and the job's fingerprint.  A
micro-batch replayed after a failure resumes that version (retained by the
store even if the failed attempt checkpointed past it), so nothing is lost
or counted twice.
"""

from __future__ import annotations

from . import event_time, passthrough, rows, traffic, worker_gc
from .names import map_in_arrow
from .plan import (ARRIVAL, INTERNAL, PACKED, ROW_ORDER, TIME, VALUE, InputTimes, column, output_arrow_schema,
                   output_schema, with_time_and_value)
from .spec import SlidingWindowError, WindowSpec
from .windows import open_key_window

#: Spark's state per key: the checkpoint version of its window in the
#: store, its newest time, and the job that built it (WindowSpec.fingerprint).
STATE_SCHEMA = "version long, newest double, job string"

#: The task property naming the micro-batch a streaming query's task runs for.
BATCH_ID = "streaming.sql.batchId"


def streaming_plan(df, spec: WindowSpec, run: str, expire_after: float | None):
    """``df`` with the windows' output columns; ``run``: the query's name."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    ordered = with_time_and_value(df, spec)
    schema = output_schema(ordered, spec)
    target = output_arrow_schema(df.sparkSession, schema)
    passed = [c for c in ordered.columns if c not in INTERNAL]
    count = traffic.accumulator(df.sparkSession)

    timeout = GroupStateTimeout.NoTimeout if expire_after is None else GroupStateTimeout.ProcessingTimeTimeout
    group_keys = passthrough.GroupKeys(ordered.schema, list(spec.keys))
    windows_of_key = key_windows(spec, run, passed, group_keys, expire_after, count)
    packed = map_in_arrow(ordered, passthrough.pack_by_key(group_keys, numbered=True),
                          f"{group_keys.ddl}, {PACKED} binary")
    delay = event_time.watermark_delay(df, spec.time)
    if delay is None:
        per_key, state_schema = windows_of_key, STATE_SCHEMA
    else:
        if expire_after is not None:
            raise SlidingWindowError("expire_after counts processing time, and a query with a watermark waits for "
                                     "event time: use one or the other")
        packed = event_time.with_marker(packed, delay)
        per_key, state_schema = event_time_windows(spec, run, passed, group_keys, count), EVENT_TIME_STATE_SCHEMA
        timeout = GroupStateTimeout.EventTimeTimeout
    return (packed.groupBy(*[column(c) for c in group_keys.names])
                  .applyInPandasWithState(worker_gc.settling(per_key), f"{PACKED} binary", state_schema, "append",
                                          timeout)
                  .mapInArrow(passthrough.unpack_batches(target), schema))


def key_windows(spec: WindowSpec, run: str, passed: list[str], group_keys: passthrough.GroupKeys,
                expire_after: float | None, count=None):
    """The per-key function of a query without a watermark: the key's rows
    of this micro-batch through its window, resumed at the version in
    Spark's state and checkpointed after them."""
    fingerprint = spec.fingerprint()

    def one_key(key, frames, state):
        k = key_value(spec, group_keys.value(key))
        if state.hasTimedOut:  # no rows for expire_after: the window goes
            _expire(spec, k, run)
            state.remove()
            return
        rows = _in_order(passthrough.unpack(blob for frame in frames for blob in frame[PACKED]))
        version, newest, job = state.get if state.exists else (None, None, None)
        _check_job(spec, k, job, fingerprint)
        window = _resume(spec, k, run, version, newest)
        try:
            result = _pushed(window, rows, None, spec, passed)
            version = window.checkpoint(micro_batch())
        finally:
            window.close()
        state.update((version, window.newest, fingerprint))
        if expire_after is not None:
            state.setTimeoutDuration(int(expire_after * 1000))
        yield passthrough.frame(passthrough.pack(result))

    return _counted(one_key, spec, count)


#: Spark's state per key with a watermark: :data:`STATE_SCHEMA` and the
#: rows waiting for the watermark (an Arrow IPC stream, :mod:`spark_ops.event_time`).
EVENT_TIME_STATE_SCHEMA = STATE_SCHEMA + ", waiting binary"


def event_time_windows(spec: WindowSpec, run: str, passed: list[str], group_keys: passthrough.GroupKeys,
                       count=None):
    """The per-key function of a query with a watermark: this micro-batch's
    rows join the waiting ones; those the watermark passed enter the window
    (:mod:`spark_ops.event_time`)."""
    fingerprint = spec.fingerprint()

    def one_key(key, frames, state):
        k = key_value(spec, group_keys.value(key))
        version, newest, job, blob = state.get if state.exists else (None, None, None, None)
        _check_job(spec, k, job, fingerprint)
        waiting = event_time.unpack_waiting(blob)
        blobs = [blob for frame in frames for blob in frame[PACKED]]
        if not blobs and waiting is None:  # timed out with nothing waiting: the window's rows are all too old
            if spec.range is not None and state.exists:  # for any row still to come (event_time.expiry_ms)
                _expire(spec, k, run)
                state.remove()
            return
        new = passthrough.unpack(blobs) if blobs else waiting.slice(0, 0)
        watermark_ms = state.getCurrentWatermarkMs()
        watermark = watermark_ms / 1000
        leaving, problems, ready, waiting = event_time.split(new, waiting, watermark_ms, spec.time, rows.null_key(k),
                                                             spec.peers)
        results = []
        if leaving.num_rows or ready.num_rows:
            window = _resume(spec, k, run, version, newest)
            try:
                for part, part_problems in ((leaving, problems), (ready, None)):
                    if part.num_rows:
                        results.append(_pushed(window, part, part_problems, spec, passed))
                if ready.num_rows and (version is not None or window.newest is not None):
                    # else no row entered: nothing to keep
                    version, newest = window.checkpoint(micro_batch()), window.newest
            except BaseException:
                window.close()
                raise
            if version is None:  # opened afresh for rows that all left flagged: no window to keep
                window.expire()
            else:
                window.close()
        if version is None and not waiting.num_rows:  # nothing of the key's to keep (a late row of a gone key)
            if state.exists:
                state.remove()
        else:
            state.update((version, newest, fingerprint, event_time.pack_waiting(waiting)))
            if waiting.num_rows:
                # a peer held back at the watermark (event_time.split's peers) is not below it
                state.setTimeoutTimestamp(max(event_time.timeout_ms(waiting, spec.time), watermark_ms))
            elif spec.range is not None and newest is not None:
                state.setTimeoutTimestamp(event_time.expiry_ms(newest, spec.range, watermark))
        for result in results:
            yield passthrough.frame(passthrough.pack(result))

    return _counted(one_key, spec, count)


def key_value(spec: WindowSpec, values: tuple):
    """The key as the windows take it from the key columns' Python values
    (:meth:`spark_ops.passthrough.GroupKeys.value`): the one column's
    value, or a tuple of a composite key's."""
    return values if isinstance(spec.key, tuple) else values[0]


def _counted(one_key, spec: WindowSpec, count):
    """The per-key function ``one_key`` with the store traffic of its calls
    counted into ``count`` (:func:`spark_ops.traffic.counted`)."""
    def windows_of_key(key, frames, state):
        with traffic.counted(count, spec):
            yield from one_key(key, frames, state)

    return windows_of_key


def micro_batch() -> int | None:
    """The micro-batch this task runs for (Spark's task property), or None
    outside a streaming query's task.  The state plans label each
    checkpoint with it, for :func:`_expire`."""
    from pyspark import TaskContext

    context = TaskContext.get()
    step = context.getLocalProperty(BATCH_ID) if context else None
    return None if step is None else int(step)


def _expire(spec: WindowSpec, k, run: str) -> None:
    """Delete key ``k``'s window, its Spark state having timed out, unless
    a later micro-batch than this task's made it anew: a stale attempt (a
    task left running on a lost executor) whose expiry comes after the key
    got new rows keeps their window.  The window is claimed at its newest
    checkpoint, whatever version the state holds: a replayed expiry finds
    it deleted already (an empty window, deleted again).  The claim, the
    check of the checkpoint's micro-batch and the delete are one fenced
    chain: a checkpoint landing in between fails the delete's
    compare-and-set.  O(levels) pairs read."""
    step = micro_batch()
    window = open_key_window(spec, k, run, streaming=True, resume=True)
    made_by = window.resumed_label
    if step is not None and isinstance(made_by, int) and made_by > step:
        window.close()
        return
    window.expire()


def _resume(spec: WindowSpec, k, run: str, version, newest):
    """Key ``k``'s window at the checkpoint ``version`` Spark's state holds
    for it, or a new one (no version yet)."""
    return open_key_window(spec, k, run, streaming=True, resume=version if version is not None else False,
                           newest=newest)


def _pushed(window, rows, problems, spec: WindowSpec, passed: list[str]):
    """``rows`` (in time order) through ``window``: their ``passed`` columns
    with the windows' outputs appended."""
    outputs = window.push(rows.column(TIME).combine_chunks(), rows.column(VALUE).combine_chunks(), problems,
                          shown=InputTimes(rows.column(spec.time)))
    return _with_outputs(rows.select(passed), spec, outputs)


def _check_job(spec: WindowSpec, k, job, fingerprint: str) -> None:
    if job is not None and job != fingerprint:
        raise SlidingWindowError(
            f"{spec.key_text(k)}: the query's windows were built by another job ({job}), not by this one "
            f"({fingerprint}); restart a changed query with a new checkpoint location (and a new name= if it "
            "has one)")


def _in_order(rows):
    """``rows`` in ``(time, arrival)`` order: as they are when they already
    are (a key's rows of a micro-batch usually come in time order), else
    sorted; a null or NaN time always takes the sort, which places it.
    O(n) to check, O(n log n) to sort."""
    import numpy as np
    import pyarrow.compute as pc

    if rows.num_rows > 1:
        t, a = rows.column(TIME).to_numpy(), rows.column(ARRIVAL).to_numpy()
        if not np.all((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (a[1:] > a[:-1]))):
            return rows.take(pc.sort_indices(rows, ROW_ORDER))
    return rows


def _with_outputs(table, spec: WindowSpec, outputs):
    for (name, _), output in zip(spec.output_columns, outputs):
        table = table.append_column(name, output)
    return table

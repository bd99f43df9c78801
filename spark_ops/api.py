"""``sliding_window``: per-key sliding windows on batch and streaming DataFrames.

Batch: rows are numbered in input order (their arrival), repartitioned by
key, sorted within partitions by ``(key, time, arrival)`` and streamed
through one window per key with ``mapInArrow``; executor memory holds one
Arrow batch and each open window's O(log n) state, whatever the window's
length.  A retried task recomputes its partition from the start: batch
windows never resume, so a retry's output equals a run without failure.

Streaming: ``applyInPandasWithState``.  Each key's level queues stay in the
shared store between micro-batches; Spark's own state holds only the key's
checkpoint version, newest time and the job's fingerprint.  A micro-batch replayed after a failure
resumes that version (retained by the store even if the failed attempt
checkpointed past it), so nothing is lost or counted twice.
"""

from __future__ import annotations

import uuid

from mta import Window

from .spec import SlidingWindowError, SortedWindow, WindowSpec, push_rows

ARRIVAL = "__mta_arrival"
TIME = "__mta_time"
VALUE = "__mta_value"
INTERNAL = (ARRIVAL, TIME, VALUE)


def sliding_window(df, key: str, time: str, value: str, aggs, *, range=None, rows=None, policy=None,
                   store: str | None = None, store_options: dict | None = None, engine: str = "amta",
                   buffer_size: int = 512, cache_size: int = 512, on_bad_row: str = "error",
                   name: str | None = None):
    """The input's columns plus one column per aggregation, one row per input row.

    ``aggs``: names (``"max"``, ``"mean"``, ... see :data:`spark_ops.spec.READY`)
    or ``(column, Aggregator, spark_type)`` for user monoids.  Exactly one of
    ``range`` (seconds; the time column may be numeric or a timestamp),
    ``rows`` (count) or ``policy`` (an :class:`mta.SlidePolicy` over
    ``(time, value)`` records).  ``store``: a store URL (``file:...``,
    ``redis://...``, ``couchbase://...``) for the windows' level queues, or
    ``None`` for process memory (batch only).  ``on_bad_row``: ``"error"``
    raises naming the row (null key, time or value, a non-numeric value, or
    in streaming a time older than the newest time of its key in earlier
    micro-batches); ``"flag"`` passes such rows through with null
    aggregations and the reason in a ``rejected`` column.  ``name`` names the
    windows in the store: required for streaming, where a restarted query
    finds its windows by it, and each query needs its own.
    """
    _check_columns(df, key, time, value)
    spec = WindowSpec.build(key=key, time=time, value=value, aggs=aggs, range=range, rows=rows,
                            policy=policy, store=store, store_options=store_options, engine=engine,
                            buffer_size=buffer_size, cache_size=cache_size, on_bad_row=on_bad_row)
    if df.isStreaming:
        if not store:
            raise SlidingWindowError("a streaming sliding_window needs store= (the windows live there "
                                     "between micro-batches), e.g. store='file:/tmp/mta-state'")
        if not name:
            raise SlidingWindowError("a streaming sliding_window needs name= (its windows in the store are "
                                     "found by it when the query restarts; give every query its own)")
        return _streaming(df, spec, name)
    return _batch(df, spec, name or f"batch-{uuid.uuid4().hex[:12]}")


def _check_columns(df, *columns) -> None:
    from pyspark.sql.types import NumericType, TimestampNTZType, TimestampType

    fields = {f.name: f.dataType for f in df.schema.fields}
    for c in columns:
        if c not in fields:
            raise SlidingWindowError(f"no column {c!r} in the input; it has {', '.join(fields)}")
    key, time, value = columns
    if not isinstance(fields[time], (NumericType, TimestampType, TimestampNTZType)):
        raise SlidingWindowError(f"time column {time!r} is {fields[time].simpleString()}, "
                                 "not a number of seconds or a timestamp")
    if not isinstance(fields[value], NumericType):
        raise SlidingWindowError(f"value column {value!r} is {fields[value].simpleString()}, not numeric")


def _with_order_columns(df, spec: WindowSpec):
    """Add the arrival number (input order: partition, then position), the
    time as double seconds and the value as the engine takes it (decimals
    as doubles, like the aggregations' outputs)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, TimestampNTZType

    if not df.isStreaming:
        numbered = df.withColumn(ARRIVAL, F.monotonically_increasing_id())
    else:  # monotonically_increasing_id is not allowed on streams: same scheme by hand
        schema = ", ".join([f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields]
                           + [f"{ARRIVAL} long"])

        def number_rows(batches):
            import pyarrow as pa
            from pyspark import TaskContext

            n = TaskContext.get().partitionId() << 33
            for batch in batches:
                ids = pa.array(range(n, n + batch.num_rows), pa.int64())
                n += batch.num_rows
                yield pa.RecordBatch.from_arrays(batch.columns + [ids], names=batch.schema.names + [ARRIVAL])

        numbered = df.mapInArrow(number_rows, schema)
    types = {f.name: f.dataType for f in df.schema.fields}
    time = F.col(f"`{spec.time}`")
    if isinstance(types[spec.time], TimestampNTZType):  # no zone: seconds since the epoch's wall clock
        time = F.timestamp_diff("MICROSECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), time) / 1e6
    value = F.col(f"`{spec.value}`")
    if isinstance(types[spec.value], DecimalType):
        value = value.cast("double")
    return numbered.withColumn(TIME, time.cast("double")).withColumn(VALUE, value)


def _output_schema(df, spec: WindowSpec, *, internal: bool) -> str:
    fields = [f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields
              if internal or f.name not in INTERNAL]
    return ", ".join(fields + [f"`{n}` {t}" for n, t in spec.output_columns])


# -- batch ---------------------------------------------------------------------
def _batch(df, spec: WindowSpec, run: str):
    ordered = _with_order_columns(df, spec)
    schema = _output_schema(ordered, spec, internal=True)
    columns = ordered.columns
    names = columns + [n for n, _ in spec.output_columns]
    key_at, time_at, value_at = (columns.index(c) for c in (spec.key, TIME, VALUE))

    def windows_of_partition(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        # each task attempt has windows of its own: a speculative or retried
        # attempt never deletes the windows another attempt is using
        attempt = f"{run}/{TaskContext.get().taskAttemptId()}"
        current, window, last_time = _NO_KEY, None, None
        for batch in batches:
            keys = batch.column(key_at)
            problems = _problems(keys, batch.column(time_at), batch.column(value_at))
            times = batch.column(time_at).to_pylist()
            values = batch.column(value_at).to_pylist()
            out = [[] for _ in spec.output_columns]
            for start, end in _runs(keys):
                key = keys[start].as_py()
                if key is None or not key == current:
                    _close(window)
                    current, window, last_time = key, None, None
                    if key is not None:
                        window = (SortedWindow(spec, key, attempt) if spec.policy is None
                                  else spec.open_window(key, attempt, resume=False))
                run_problems = problems[start:end] if problems else None
                if window is None:  # null keys: every row is rejected
                    _push_rejected(spec, key, times[start:end], values[start:end], run_problems, out)
                elif spec.policy is None:
                    _push_sorted(spec, window, key, times[start:end], values[start:end], run_problems, out)
                else:
                    last_time = push_rows(spec, window, key, times[start:end], values[start:end], last_time, out)
            arrays = batch.columns + [pa.array(col, type=_arrow_type(t)) for col, (_, t)
                                      in zip(out, spec.output_columns)]
            yield pa.RecordBatch.from_arrays(arrays, names=names)
        _close(window)

    out = (ordered.repartition(spec.key)
                  .sortWithinPartitions(spec.key, TIME, ARRIVAL)
                  .mapInArrow(windows_of_partition, schema))
    return out.drop(*INTERNAL)


class _NoKey:
    def __eq__(self, other):
        return False


_NO_KEY = _NoKey()


def _close(window) -> None:
    """A batch window is done: delete its data from the store."""
    if window is not None:
        window.close(delete=True) if isinstance(window, Window) else window.close()


def _runs(keys) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal keys in an Arrow array (each null
    key a run of its own)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(keys)
    if n < 2:
        return [(0, n)] if n else []
    try:
        change = pc.fill_null(pc.not_equal(keys.slice(1), keys.slice(0, n - 1)), True)
        starts = [0] + [i + 1 for i in pc.indices_nonzero(change).to_pylist()]
    except pa.ArrowNotImplementedError:  # key types Arrow cannot compare: in Python
        values = keys.to_pylist()
        starts = [0] + [i for i in range(1, n) if values[i] is None or values[i] != values[i - 1]]
    return list(zip(starts, starts[1:] + [n]))


def _problems(keys, times, values) -> list | None:
    """Per row, why it cannot enter a window (null key, null or NaN time or
    value), or ``None`` when every row of the batch can."""
    import pyarrow.compute as pc

    reasons = None
    for column, reason, nan in ((keys, "null key", False), (times, "null time", True),
                                (values, "null value", True)):
        mask = pc.is_null(column, nan_is_null=nan)
        if pc.any(mask).as_py():
            reasons = reasons or [None] * len(keys)
            for i in pc.indices_nonzero(mask).to_pylist():
                reasons[i] = reasons[i] or reason
    return reasons


def _push_rejected(spec, key, times, values, problems, out) -> None:
    """Rows that no window takes: raise naming the first, or flag them all."""
    for t, v, problem in zip(times, values, problems):
        spec.reject(problem, key, t, v)
    for column in out[: len(spec.aggs)]:
        column.extend([None] * len(times))
    out[-1].extend(problems)


def _push_sorted(spec, window: SortedWindow, key, times, values, problems, out) -> None:
    """A run of one key's rows, sorted by time, through its SortedWindow
    (rejected rows get null aggregations, and their reason when flagged)."""
    if problems is None or not any(problems):
        for column, results in zip(out, window.push(times, values)):
            column.extend(results)
        if spec.on_bad_row == "flag":
            out[-1].extend([None] * len(times))
        return
    for t, v, problem in zip(times, values, problems):
        if problem is not None:
            spec.reject(problem, key, t, v)
    good = [i for i, p in enumerate(problems) if p is None]
    pushed = window.push([times[i] for i in good], [values[i] for i in good])
    for column, results in zip(out, pushed):
        full = [None] * len(times)
        for i, r in zip(good, results):
            full[i] = r
        column.extend(full)
    out[-1].extend(problems)


def _arrow_type(spark_type: str):
    import pyarrow as pa

    return {"double": pa.float64(), "long": pa.int64(), "string": pa.string(),
            "array<double>": pa.list_(pa.float64())}.get(spark_type)


# -- streaming -------------------------------------------------------------------
#: Spark's state per key: the checkpoint version of its window in the
#: store, its newest time, and the job that built it (WindowSpec.fingerprint).
STATE_SCHEMA = "version long, newest double, job string"


def _streaming(df, spec: WindowSpec, run: str):
    from pyspark.sql.streaming.state import GroupStateTimeout

    ordered = _with_order_columns(df, spec)
    schema = _output_schema(ordered, spec, internal=False)
    passthrough = [c for c in ordered.columns if c not in INTERNAL]
    fingerprint = spec.fingerprint()

    def windows_of_key(key, frames, state):
        import pandas as pd

        rows = pd.concat(list(frames), ignore_index=True).sort_values([TIME, ARRIVAL], kind="stable")
        k = key[0]
        version, newest, job = state.get if state.exists else (None, None, None)
        if job is not None and job != fingerprint:
            raise SlidingWindowError(
                f"{spec.key}={k!r}: the query's windows were built by another job ({job}), not by this one "
                f"({fingerprint}); restart a changed query with a new name= and checkpoint location")
        window = spec.open_window(k, run, resume=version if version is not None else False)
        out = [[] for _ in spec.output_columns]
        newest = push_rows(spec, window, k, rows[TIME].tolist(), rows[VALUE].tolist(), newest, out)
        version = window.checkpoint()
        window.close()
        state.update((version, newest, fingerprint))
        result = rows[passthrough].reset_index(drop=True)
        for (name, _), col in zip(spec.output_columns, out):
            result[name] = col
        yield result

    return (ordered.groupBy(spec.key)
                   .applyInPandasWithState(windows_of_key, schema, STATE_SCHEMA, "append",
                                           GroupStateTimeout.NoTimeout))

"""``sliding_window``: per-key sliding windows on batch and streaming DataFrames.

Batch: rows are numbered in input order (their arrival), repartitioned by
key, sorted within partitions by ``(key, time, arrival)`` and streamed
through one window per key with ``mapInArrow``: an MTA (row by row; with a
store, executor memory holds one Arrow batch and each open window's
O(log n) state, whatever the window's length) or, for the built-in
aggregations it computes, the columnar engine (a batch at a time in NumPy,
:mod:`spark_ops.columnar`).  A retried task recomputes its partition from
the start: batch windows never resume, so a retry's output equals a run
without failure.

Streaming: ``applyInPandasWithState``.  Each key's level queues stay in the
shared store between micro-batches; Spark's own state holds only the key's
checkpoint version, newest time and the job's fingerprint.  A micro-batch replayed after a failure
resumes that version (retained by the store even if the failed attempt
checkpointed past it), so nothing is lost or counted twice.
"""

from __future__ import annotations

import dataclasses
import re
import uuid

from mta import Window

from . import columnar
from .spec import SlidingWindowError, SortedWindow, WindowSpec, push_rows

ARRIVAL = "__mta_arrival"
TIME = "__mta_time"
VALUE = "__mta_value"
INTERNAL = (ARRIVAL, TIME, VALUE)


def sliding_window(df, key: str, time: str, value: str, aggs, *, range=None, rows=None, policy=None,
                   store: str | None = None, store_options: dict | None = None, engine: str = "auto",
                   buffer_size: int = 512, cache_size: int = 512, on_bad_row: str = "error",
                   name: str | None = None, expire_after: float | None = None):
    """The input's columns plus one column per aggregation, one row per input row.

    ``aggs``: names (``"max"``, ``"mean"``, ... see :data:`spark_ops.spec.READY`;
    ``sum``, ``min``, ``max``, ``first`` and ``last`` are ``long`` for an
    integral value column, the others ``double``) or ``(column, Aggregator,
    spark_type)`` for user monoids.  Exactly one of ``range`` (seconds; the
    time column may be numeric or a timestamp), ``rows`` (count) or
    ``policy`` (an :class:`mta.SlidePolicy` over ``(time, value)`` records).
    ``store``: a store URL (``file:...``, ``redis://...``,
    ``couchbase://...``) for the windows' level queues, or ``None`` for
    process memory (batch only).

    ``engine``: ``"amta"`` (Amortized MTA) or ``"lmta"`` (Log MTA) run each
    row through the window; ``"columnar"`` (batch jobs in executor memory
    with built-in aggregations only, see :mod:`spark_ops.columnar`)
    computes a batch of rows at a time in NumPy; ``"auto"`` (the default)
    is columnar where it can run and the Amortized MTA elsewhere.

    ``on_bad_row``: ``"error"`` raises naming the row; ``"flag"`` passes it
    through with null aggregations and the reason in a ``rejected`` column.
    Bad rows: a null or NaN key; a null, NaN or infinite time; a null or NaN
    value; a value the aggregations cannot take (``geomean`` of a value
    <= 0); and in streaming a time older than its key's newest time in an
    earlier micro-batch (rows are ordered within a micro-batch, not across
    them: there is no watermark).

    ``name`` names the windows in the store: required for streaming, where
    a restarted query finds its windows by it, and each query needs its own.
    ``expire_after`` (streaming): seconds of processing time, counted from
    the start of the last micro-batch with rows for a key, after which the
    key's window is deleted from the store and its Spark state dropped
    (default: kept forever); rows arriving later start a new window.  Spark
    then runs a micro-batch every trigger interval to expire keys, so use it
    with a processing-time trigger: an ``availableNow`` or ``once`` query
    would not stop.
    """
    _check_columns(df, key, time, value)
    from pyspark.sql.types import IntegralType

    spec = WindowSpec.build(key=key, time=time, value=value, aggs=aggs, range=range, rows=rows,
                            policy=policy, store=store, store_options=store_options, engine=engine,
                            buffer_size=buffer_size, cache_size=cache_size, on_bad_row=on_bad_row,
                            integral=isinstance(df.schema[value].dataType, IntegralType))
    clash = sorted({n for n, _ in spec.output_columns} & set(df.columns))
    if clash:
        raise SlidingWindowError(f"input column {', '.join(map(repr, clash))} has the name of an output column; "
                                 "rename it (or name a user aggregation differently)")
    if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
        raise SlidingWindowError(f"name must be 1 to 40 letters, digits, '.', '_' or '-', got {name!r}")
    if expire_after is not None and not (isinstance(expire_after, (int, float)) and expire_after > 0):
        raise SlidingWindowError(f"expire_after must be a positive number of seconds, got {expire_after!r}")
    if df.isStreaming:
        if not store:
            raise SlidingWindowError("a streaming sliding_window needs store= (the windows live there "
                                     "between micro-batches), e.g. store='file:/tmp/mta-state'")
        if not name:
            raise SlidingWindowError("a streaming sliding_window needs name= (its windows in the store are "
                                     "found by it when the query restarts; give every query its own)")
        if spec.engine == "columnar":
            raise SlidingWindowError("engine='columnar' is for batch jobs; a streaming query keeps its windows "
                                     "in the store with engine='amta' or 'lmta'")
        if spec.engine == "auto":
            spec = dataclasses.replace(spec, engine="amta")
        return _streaming(df, spec, name, expire_after)
    if expire_after is not None:
        raise SlidingWindowError("expire_after is for streaming queries; a batch job's windows are deleted "
                                 "when it is done")
    return _batch(df, spec, name or f"batch-{uuid.uuid4().hex[:12]}")


#: The reason of a row whose key is null (or NaN): no window takes it.
NULL_KEY = "null or NaN key"
#: What a run's name may be (it becomes part of every window's name in the store).
_NAME = re.compile(r"[A-Za-z0-9._-]{1,40}")


def _check_columns(df, *columns) -> None:
    from pyspark.sql.types import NumericType, TimestampNTZType, TimestampType

    fields = {f.name: f.dataType for f in df.schema.fields}
    for c in columns:
        if c not in fields:
            raise SlidingWindowError(f"no column {c!r} in the input; it has {', '.join(fields)}")
    internal = sorted(set(fields) & set(INTERNAL))
    if internal:
        raise SlidingWindowError(f"input column {', '.join(map(repr, internal))} has a name sliding_window "
                                 "uses internally; rename it")
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


def _output_schema(df, spec: WindowSpec) -> str:
    """The input's columns (without the internal ones) and the outputs."""
    fields = [f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields if f.name not in INTERNAL]
    return ", ".join(fields + [f"`{n}` {t}" for n, t in spec.output_columns])


# -- batch ---------------------------------------------------------------------
def _batch(df, spec: WindowSpec, run: str):
    from pyspark.sql.types import FractionalType

    ordered = _with_order_columns(df, spec)
    schema = _output_schema(ordered, spec)  # the internal columns do not come back
    columns = ordered.columns
    passed = [i for i, c in enumerate(columns) if c not in INTERNAL]
    names = [columns[i] for i in passed] + [n for n, _ in spec.output_columns]
    key_at, time_at, value_at, shown_at = (columns.index(c) for c in (spec.key, TIME, VALUE, spec.time))
    floating = isinstance(ordered.schema[VALUE].dataType, FractionalType)
    use_columnar = _columnar(spec, floating)
    agg_names = [n for n, _, _ in spec.aggs]

    def windows_of_partition(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        # each task attempt has windows of its own: a speculative or retried
        # attempt never deletes the windows another attempt is using
        attempt = f"{run}/{TaskContext.get().taskAttemptId()}"
        current, window, last_time = _NO_KEY, None, None
        try:  # the open window is deleted however the task ends (error, early stop)
            for batch in batches:
                keys = batch.column(key_at)
                problems = _problems(keys, batch.column(time_at), batch.column(value_at))
                if use_columnar:  # Arrow arrays, and the output in pieces of Arrow arrays
                    times, values = batch.column(time_at), batch.column(value_at)
                else:
                    times, values = batch.column(time_at).to_pylist(), batch.column(value_at).to_pylist()
                out = [[] for _ in spec.output_columns]
                for start, end in _runs(keys):
                    key = keys[start].as_py()
                    if key is None or not key == current:
                        _close(window)
                        current, window, last_time = key, None, None
                        if problems is None or problems[start] != NULL_KEY:
                            window = (columnar.ColumnarWindow(agg_names, rows=spec.rows, range=spec.range)
                                      if use_columnar
                                      else SortedWindow(spec, key, attempt) if spec.policy is None
                                      else spec.open_window(key, attempt, resume=False))
                    span = slice(start, end)
                    span_problems = problems[span] if problems else None
                    shown = _InputTimes(batch.column(shown_at), start, end)
                    if use_columnar:
                        _push_columnar(spec, window, key, times[span], values[span], span_problems, out, shown)
                    elif window is None:  # null keys: every row is rejected
                        _push_rejected(spec, key, shown, values[span], span_problems, out)
                    elif spec.policy is None:
                        _push_sorted(spec, window, key, times[span], values[span], span_problems, out, shown)
                    else:
                        last_time = push_rows(spec, window, key, times[span], values[span], last_time, out, shown)
                if use_columnar:
                    arrays = [pa.concat_arrays(pieces) if pieces else pa.array([], type=_arrow_type(t))
                              for pieces, (_, t) in zip(out, spec.output_columns)]
                else:
                    arrays = [pa.array(col, type=_arrow_type(t)) for col, (_, t) in zip(out, spec.output_columns)]
                yield pa.RecordBatch.from_arrays([batch.column(i) for i in passed] + arrays, names=names)
        finally:
            _close(window)

    key = _column(spec.key)
    return (ordered.repartition(key)
                   .sortWithinPartitions(key, TIME, ARRIVAL)
                   .mapInArrow(windows_of_partition, schema))


def _columnar(spec: WindowSpec, floating: bool) -> bool:
    """Whether the batch job runs on the columnar engine (``engine="auto"``:
    where it can; ``"columnar"``: it must, else a clear error)."""
    if spec.engine not in ("auto", "columnar"):
        return False
    why_not = columnar.ineligible(spec, floating)
    if why_not is not None and spec.engine == "columnar":
        raise SlidingWindowError(f"engine='columnar' cannot run this job: {why_not}; use engine='auto' or an MTA")
    return why_not is None


def _column(name: str):
    """A top-level column by its exact name (a name with dots is not a path)."""
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


class _InputTimes:
    """Rows ``[start, end)`` of the input's time column as Python values,
    converted only if a message about a rejected row needs them."""

    def __init__(self, column, start: int, end: int) -> None:
        self._column, self._start, self._end = column, start, end
        self._values = None

    def _list(self) -> list:
        if self._values is None:
            self._values = self._column.slice(self._start, self._end - self._start).to_pylist()
        return self._values

    def __getitem__(self, i):
        return self._list()[i]

    def __iter__(self):
        return iter(self._list())


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
    or NaN key a run of its own)."""
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
    """Per row, why it cannot enter a window (the rules of
    :func:`spark_ops.spec.check_row` that Arrow can check for a whole batch),
    or ``None`` when every row of the batch can."""
    import pyarrow as pa
    import pyarrow.compute as pc

    checks = [(pc.is_null(keys, nan_is_null=pa.types.is_floating(keys.type)), NULL_KEY),
              (pc.is_null(times, nan_is_null=True), "null or NaN time"), (pc.is_inf(times), "infinite time"),
              (pc.is_null(values, nan_is_null=pa.types.is_floating(values.type)), "null or NaN value")]
    reasons = None
    for mask, reason in checks:
        if pc.any(mask).as_py():
            reasons = reasons or [None] * len(keys)
            for i in pc.indices_nonzero(pc.fill_null(mask, False)).to_pylist():
                reasons[i] = reasons[i] or reason
    return reasons


def _push_rejected(spec, key, shown, values, problems, out) -> None:
    """Rows that no window takes: raise naming the first, or flag them all."""
    for t, v, problem in zip(shown, values, problems):
        spec.reject(problem, key, t, v)
    for column in out[: len(spec.aggs)]:
        column.extend([None] * len(values))
    out[-1].extend(problems)


def _push_columnar(spec, window, key, times, values, problems, out, shown) -> None:
    """A run of one key's rows (Arrow arrays, sorted by time) through its
    ColumnarWindow, or rejected whole when the key is null; each output
    column gets one Arrow array (null where a row is rejected)."""
    import numpy as np
    import pyarrow as pa

    n = len(times)
    types = [_arrow_type(t) for _, t in spec.output_columns]
    good = None
    if problems is not None and any(problems):
        shown_values = values.to_pylist()
        for t, v, problem in zip(shown, shown_values, problems):
            if problem is not None:
                spec.reject(problem, key, t, v)
        good = np.array([p is None for p in problems])
        keep = pa.array(good)
        times, values = times.filter(keep), values.filter(keep)
    if window is None or not len(times):
        results = [pa.nulls(n, type=t) for t in types[: len(spec.aggs)]]
    else:
        dtype = np.float64 if pa.types.is_floating(values.type) else np.int64
        results = []
        for (a, null), t in zip(window.push(times.to_numpy(), values.to_numpy().astype(dtype, copy=False)), types):
            if good is not None:  # back to the run's rows, null where rejected
                a, null = _scatter(a, good), ~good if null is None else ~good | _scatter(null, good)
            results.append(pa.array(a, mask=null, type=t))
    for column, result in zip(out, results):
        column.append(result)
    if spec.on_bad_row == "flag":
        out[-1].append(pa.array(problems, type=pa.string()) if problems else pa.nulls(n, type=pa.string()))


def _scatter(values, good):
    """``values`` placed at the True positions of ``good`` (the others: zero)."""
    import numpy as np

    full = np.zeros(len(good), dtype=values.dtype)
    full[good] = values
    return full


def _push_sorted(spec, window: SortedWindow, key, times, values, problems, out, shown) -> None:
    """A run of one key's rows, sorted by time, through its SortedWindow
    (rejected rows get null aggregations, and their reason when flagged)."""
    lifted, lift_problems = window.lift(values)
    if lift_problems is not None:
        problems = [p or q for p, q in zip(problems or lift_problems, lift_problems)]
    if problems is None or not any(problems):
        for column, results in zip(out, window.push(times, lifted)):
            column.extend(results)
        if spec.on_bad_row == "flag":
            out[-1].extend([None] * len(times))
        return
    for t, v, problem in zip(shown, values, problems):
        if problem is not None:
            spec.reject(problem, key, t, v)
    good = [i for i, p in enumerate(problems) if p is None]
    pushed = window.push([times[i] for i in good], [lifted[i] for i in good])
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


def _streaming(df, spec: WindowSpec, run: str, expire_after: float | None):
    from pyspark.sql.streaming.state import GroupStateTimeout

    ordered = _with_order_columns(df, spec)
    schema = _output_schema(ordered, spec)
    passthrough = [c for c in ordered.columns if c not in INTERNAL]
    fingerprint = spec.fingerprint()

    def windows_of_key(key, frames, state):
        import pandas as pd

        k = key[0].item() if hasattr(key[0], "item") else key[0]  # numpy scalars as Python values
        if state.hasTimedOut:  # no rows for expire_after: the window goes
            version = state.get[0]
            spec.open_window(k, run, resume=version).close(delete=True)
            state.remove()
            return
        rows = pd.concat(list(frames), ignore_index=True).sort_values([TIME, ARRIVAL], kind="stable")
        version, newest, job = state.get if state.exists else (None, None, None)
        if job is not None and job != fingerprint:
            raise SlidingWindowError(
                f"{spec.key}={k!r}: the query's windows were built by another job ({job}), not by this one "
                f"({fingerprint}); restart a changed query with a new name= and checkpoint location")
        window = spec.open_window(k, run, resume=version if version is not None else False)
        try:
            out = [[] for _ in spec.output_columns]
            newest = push_rows(spec, window, k, rows[TIME].tolist(), rows[VALUE].tolist(), newest, out,
                               rows[spec.time].tolist())
            version = window.checkpoint()
        finally:
            window.close()
        state.update((version, newest, fingerprint))
        if expire_after is not None:
            state.setTimeoutDuration(int(expire_after * 1000))
        result = rows[passthrough].reset_index(drop=True)
        for (name, _), col in zip(spec.output_columns, out):
            result[name] = col
        yield result

    timeout = GroupStateTimeout.NoTimeout if expire_after is None else GroupStateTimeout.ProcessingTimeTimeout
    return (ordered.groupBy(_column(spec.key))
                   .applyInPandasWithState(windows_of_key, schema, STATE_SCHEMA, "append", timeout))

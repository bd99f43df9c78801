"""``sliding_window``: per-key sliding windows on batch and streaming DataFrames.

The call checks its arguments (a :class:`~spark_ops.spec.WindowSpec` and
the input's columns), chooses the engine and builds the plan: batch jobs
(:mod:`spark_ops.batch`) stream each key's sorted rows through one window
with ``mapInArrow``: for the ready aggregations it computes, the columnar
engine (a batch at a time in NumPy, :mod:`spark_ops.columnar`, the windows
in executor memory), else an MTA, row by row; an MTA asked for by name
with a store keeps the windows there (executor memory then holds one Arrow
batch and each open window's O(log n) state, whatever the window's length).
Streaming queries (:mod:`spark_ops.streaming`) keep each key's window in
the store between micro-batches.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid

from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

import stores

from . import columnar, durations, event_time, excluded, names, periodic, values
from .batch import batch_plan
from .periodic import periodic_plan
from .names import clashes
from .periodic_stream import periodic_streaming_plan
from .plan import INTERNAL, clock_of, holds, micro_time
from .spec import ENGINES, SlidingWindowError, WindowSpec, key_columns
from .streaming import streaming_plan
from .task_stream import task_streaming_plan


def sliding_window(df, key: str | list[str], time: str, value: str | list[str], aggs, *, range=None, rows=None,
                   policy=None,
                   store: str | None = None, store_options: dict | None = None, engine: str = "auto",
                   buffer_size: int = DEFAULT_BUFFER_SIZE, cache_size: int = DEFAULT_CACHE_SIZE,
                   on_bad_row: str = "error", name: str | None = None, expire_after: float | None = None,
                   frame: str = "default", slide=None, ties: str = "input"):
    """The input's columns plus one column per aggregation, one row per input row.

    ``aggs``: names (``"max"``, ``"mean"``, ... see :data:`spark_ops.READY`;
    ``sum``, ``min``, ``max``, ``first`` and ``last`` are ``long`` for an
    integral value column, exact, the others ``double``; a ``long`` result
    outside int64 fails the job, see :mod:`spark_ops.aggregations`) or
    ``(column, Aggregator, spark_type)`` for user monoids; or a dict of
    output column to a ready name, an ``Aggregator`` (``double``) or
    ``(Aggregator, spark_type)``.  Every input column leaves unchanged.

    ``value``: a numeric column, or several: a list of numeric columns or
    a struct column of numeric fields (:mod:`spark_ops.values`).  Ready
    aggregations then name the column they read, ``"max(cpu)"``, output
    column ``max_cpu`` (``max_cpu_<label>`` with several sizes); a user
    aggregator's ``lift`` gets the row's values as a tuple, in ``value=``
    order; a null or NaN in any value column makes the row a bad row.

    ``key``: a column, or a list of columns (``["dc", "host"]``): each
    distinct combination of their values gets its own window (named in the
    store by the repr of the tuple of values), and a row with a null or NaN
    in any of them is a bad row; messages name every key column
    (``dc='eu', host='web-1'``).  ``time``: seconds (a number), a
    timestamp, or a date (its midnight UTC, whatever the session's zone).
    Exactly one of ``range`` (seconds), ``rows`` (count) or
    ``policy`` (an :class:`mta.SlidePolicy` over ``(time, value)`` records).
    A key's rows are ordered by time, then arrival (input order in batch,
    the order within a micro-batch in streaming).  ``ties="any"`` drops
    the second half in batch jobs: rows of equal time come in whatever
    order the shuffle leaves them, as with Spark's window functions and
    pandas, and the plan ships and sorts one column less
    (:mod:`spark_ops.frames`: which outputs the order of ties can change).

    ``frame``: which rows a window holds (:mod:`spark_ops.frames`).
    ``"default"``: for ``range=R`` the rows of the key with time in ``(t -
    R, t]`` that come at or before the row in that order: rows of equal
    time in arrival order, each seeing those that arrived before it, as
    pandas' ``rolling`` does.  ``"sql"``: Spark SQL's ``rangeBetween(-R,
    0)``, the rows with time in ``[t - R, t]``, rows of equal time peers
    that share one output (the aggregate over all of them); in streaming
    a row whose time equals one an earlier micro-batch gave outputs for is
    then a bad row.  The edge is decided as ``rangeBetween`` decides it
    over the column: for a timestamp, a date or a decimal of at most 6
    places in whole microseconds (``R`` rounded to one; exact within 2^33
    seconds of 1970), for a number of seconds in doubles.  For ``rows=N`` both are the newest N rows in that
    order (``rowsBetween(-(N - 1), 0)``); a ``policy`` takes the default.
    ``store``: a store URL (``file:...``, ``redis://...``,
    ``couchbase://...``) for the windows' level queues (streaming; batch
    with an MTA engine), or ``None`` for process memory (batch only).

    ``engine``: ``"amta"`` (Amortized MTA) or ``"lmta"`` (Log MTA) run each
    row through the window; ``"columnar"`` (batch jobs with ready
    aggregations only, by name or a ready aggregator under a column name
    of your own, see :mod:`spark_ops.columnar`) computes a batch of
    rows at a time in NumPy, the windows in executor memory; ``"auto"``
    (the default) is columnar where it can run and the Amortized MTA
    elsewhere.  A batch job's windows go to ``store`` only on an MTA:
    ``engine="amta"`` or ``"lmta"`` (for windows larger than executor
    memory), or the one ``"auto"`` falls back to; :func:`choose_engine`
    says which engine a job gets and why.

    ``on_bad_row``: ``"error"`` raises naming the row; ``"flag"`` passes it
    through with null aggregations and the reason in a ``rejected`` column.
    Bad rows: a null or NaN key; a null, NaN or infinite time; a null or NaN
    value; a value the aggregations cannot take (``geomean`` of a value
    <= 0); in streaming without a watermark, a time older than its key's
    newest time in an earlier micro-batch (rows are ordered within a
    micro-batch, not across them); with one, a late row: a time at or behind
    the watermark (with ``slide=``, behind it: a row at the watermark is on
    time, as in Spark's ``window()``, its windows all ending after it).

    Event time (streaming): when the time column carries a watermark
    (``df.withWatermark(time, "10 minutes")``), rows may arrive in any
    order within the delay.  Each key's rows wait in Spark's state until
    the watermark passes their time, then enter the window in time order
    (earlier micro-batches first at equal times), so the output equals the
    batch output of the same rows whatever their arrival order; a row's
    output comes in the micro-batch after the one that moves the watermark
    past it (:mod:`spark_ops.event_time`).

    Several sizes: ``range=`` and ``rows=`` take a list (``range=[300,
    "1h"]``: columns ``max_300``, ``max_1h``, each labelled by the size as
    given) or a dict of labels (``range={"5m": 300, "1h": 3600}``:
    ``max_5m``, ``max_1h``); one size keeps the plain names (``max``).  All
    sizes come from one shuffle, one sort and one pass per key.

    ``slide`` (seconds or a duration; ``range=`` only): periodic
    output instead of one row per input row, Spark's ``window(time, range,
    slide)``: windows end at the multiples of the slide and hold the rows
    with time in ``[end - range, end)``; one row per key and window that
    holds rows, with the key, ``window_end`` (the time column's type) and
    one column per aggregation and size (:mod:`spark_ops.periodic`).  The
    slide must divide the range.  Batch jobs run on the columnar kernels
    where they can, else (user aggregations, ``engine="amta"`` or
    ``"lmta"``) on the aggregators' monoids over panes of the slide.  In
    streaming the input needs a watermark on the time column: a window is
    emitted once the watermark reaches its end, once (append mode); its
    state lives in Spark's state store, so ``store=`` and ``name=`` are not
    needed, and a late row (behind the watermark when it arrives) is a bad
    row (:mod:`spark_ops.periodic_stream`).  With ``slide=`` no output row
    can carry a flag: ``on_bad_row="flag"`` leaves each bad row (a late
    one too) out of every window, counts it
    (:func:`spark_ops.excluded.rejected_rows`) and logs the count at
    WARNING (:mod:`spark_ops.excluded`).

    ``name`` names the windows in the store: required for streaming, where
    a restarted query finds its windows by it, and each query needs its own.
    ``range`` and ``expire_after`` take seconds or a duration (``"1h"``,
    ``"10 minutes"``, :mod:`spark_ops.durations`).
    ``expire_after`` (streaming, no watermark): processing time, counted from
    the start of the last micro-batch with rows for a key, after which the
    key's window is deleted from the store and its Spark state dropped
    (default: kept forever); rows arriving later start a new window.  Spark
    then runs a micro-batch every trigger interval to expire keys, so use it
    with a processing-time trigger: an ``availableNow`` or ``once`` query
    would not stop.
    """
    key, time, value = (names.spelled(c, df.columns) for c in (key, time, value))
    fields, types = check_columns(df.schema, key, time, value)
    from pyspark.sql.types import IntegralType

    spec = WindowSpec.build(key=key, time=time, value=value, aggs=aggs, range=range, rows=rows,
                            policy=policy, store=store, store_options=store_options, engine=engine,
                            buffer_size=buffer_size, cache_size=cache_size, on_bad_row=on_bad_row,
                            frame=frame, slide=slide, ties=ties,
                            integral=values.per_column(types, IntegralType), value_fields=fields,
                            micros=micro_time(df.schema[time].dataType), clock=clock_of(df.schema[time].dataType))
    check_output_names(spec, [*spec.keys] if spec.slide is not None else df.columns,
                       added=[periodic.WINDOW_END] if spec.slide is not None else [])
    check_output_types(spec)
    if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
        raise SlidingWindowError(f"name must be 1 to 40 letters, digits, '.', '_' or '-', got {name!r}")
    if expire_after is not None:
        try:
            expire_after = durations.seconds(expire_after, "expire_after")
        except ValueError as exc:
            raise SlidingWindowError(str(exc)) from None
    if spec.slide is not None:
        return _periodic(df, spec, name, expire_after)
    if df.isStreaming:
        if not store:
            raise SlidingWindowError("a streaming sliding_window needs store= (the windows live there "
                                     "between micro-batches), e.g. store='file:/tmp/mta-state'")
        if not name:
            raise SlidingWindowError("a streaming sliding_window needs name= (its windows in the store are "
                                     "found by it when the query restarts; give every query its own)")
        spec = _with_engine(spec, df)
        if runs_as_tasks(df, spec, expire_after):
            return task_streaming_plan(df, spec, name)  # nothing for Spark's state to do
        return streaming_plan(df, spec, name, expire_after)
    if expire_after is not None:
        raise SlidingWindowError("expire_after is for streaming queries; a batch job's windows are deleted "
                                 "when it is done")
    return batch_plan(df, _with_engine(spec, df), name or f"batch-{uuid.uuid4().hex[:12]}")


def runs_as_tasks(df, spec: WindowSpec, expire_after: float | None) -> bool:
    """Whether ``sliding_window`` runs ``df`` on
    :func:`~spark_ops.task_stream.task_streaming_plan`, whose micro-batches
    run as the count of tasks its progress records keep: streaming, one row
    per input row (no ``slide``), neither ``expire_after`` nor a watermark on
    the time column.  ``mta-spark stream`` asks before it builds the plan, to
    resume the count the query ran as."""
    return (df.isStreaming and spec.slide is None and expire_after is None
            and event_time.watermark_delay(df, spec.time) is None)


def _periodic(df, spec: WindowSpec, name, expire_after):
    """The plan of ``slide=``: batch jobs on the columnar engine's kernels
    (:mod:`spark_ops.periodic`) where they can run, else, and in streaming,
    on the aggregators' monoids (:mod:`spark_ops.periodic_stream`)."""
    from pyspark.sql.types import FractionalType

    if expire_after is not None:
        raise SlidingWindowError("expire_after is for per-row streaming queries without a watermark; a slide= "
                                 "query drops a key's state once the watermark has passed its windows")
    periodic.window_end_type(spec, df.schema[spec.time].dataType)  # checked before any job
    if clashes(spec.keys, [periodic.WINDOW_END]):
        raise SlidingWindowError(f"key column {periodic.WINDOW_END!r} has the name (case aside) of slide='s "
                                 "output column of the windows' ends; rename it")
    if spec.on_bad_row == "flag":
        df = excluded.exclude(df, spec)  # streaming: late rows are left out by the per-key function
    why_not = columnar.ineligible(spec, _per_value_column(df, spec, FractionalType))
    if df.isStreaming:
        if spec.engine == "columnar":
            raise SlidingWindowError("engine='columnar' is for batch jobs; a streaming slide= query computes its "
                                     "windows on the aggregators' monoids (engine='auto')")
        spec = dataclasses.replace(spec, engine="amta" if spec.engine == "auto" else spec.engine)
        _log.info("sliding_window: slide= in streaming, windows on the aggregators' monoids in Spark's state")
        return periodic_streaming_plan(df, spec)
    run = name or f"batch-{uuid.uuid4().hex[:12]}"
    if spec.engine in ("auto", "columnar") and why_not is None:
        _log.info("sliding_window: slide= on the columnar engine")
        return periodic_plan(df, dataclasses.replace(spec, engine="columnar",
                                                     kernels=tuple(columnar.kernel_names(spec))), run)
    if spec.engine == "columnar":
        raise SlidingWindowError(f"engine='columnar' cannot run this job: {why_not}; use engine='auto'")
    _log.info("sliding_window: slide= on the aggregators' monoids (%s)",
              why_not or f"engine={spec.engine!r} asked for")
    return periodic_plan(df, dataclasses.replace(spec, engine="amta" if spec.engine == "auto" else spec.engine), run)


#: What a run's name may be (it becomes part of every window's name in the store).
_NAME = re.compile(r"[A-Za-z0-9._-]{1,40}")


def check_columns(schema, key, time: str, value) -> tuple[tuple, list]:
    """The input (a ``StructType``) has the key (one column or a list),
    time and value columns (one, a list, or a struct), of types a window
    takes, and no column named like an internal one; returns the value
    columns and their types (:func:`spark_ops.values.fields_of`)."""
    from pyspark.sql.types import (DateType, MapType, NumericType, StringType, TimestampNTZType, TimestampType,
                                   VariantType)

    keys = key_columns(key)
    if not isinstance(time, str) or not time:
        raise SlidingWindowError(f"time= takes one column's name (a string), got {time!r}")
    columns = (*(keys if isinstance(keys, tuple) else (keys,)), time)
    fields = {f.name: f.dataType for f in schema.fields}
    for c in columns:
        if c not in fields:
            raise SlidingWindowError(names.missing_columns([c], list(fields)))
    for c in keys if isinstance(keys, tuple) else (keys,):
        if holds(fields[c], lambda t: isinstance(t, (MapType, VariantType))):
            raise SlidingWindowError(f"key column {c!r} is {fields[c].simpleString()}: Spark cannot group or sort "
                                     "by a map or a variant; key by a column derived from it (e.g. one of its "
                                     "values, or to_json of it)")
        if _collated(fields[c]):
            raise SlidingWindowError(f"key column {c!r} is {fields[c].simpleString()}, whose equal strings can "
                                     "differ in bytes, which the windows compare: give a key both compare alike, "
                                     f"F.lower({c!r}).cast('string') (or only the cast, to tell 'a' and 'A' apart)")
    internal = clashes(fields, INTERNAL)
    if internal:
        raise SlidingWindowError(f"input column {', '.join(map(repr, internal))} has a name sliding_window "
                                 "uses internally (Spark's names ignore case); rename it")
    if not isinstance(fields[time], (NumericType, TimestampType, TimestampNTZType, DateType)):
        hint = (f": parse it first, df.withColumn({time!r}, F.to_timestamp({time!r})) (or .cast('double') "
                "for seconds)") if isinstance(fields[time], StringType) else ""
        raise SlidingWindowError(f"time column {time!r} is {fields[time].simpleString()}, "
                                 f"not a number of seconds, a timestamp or a date{hint}")
    return values.fields_of(schema, value)


def _collated(data_type) -> bool:
    """Whether ``data_type`` holds strings of a collation other than bytes'
    (``UTF8_BINARY``), at any depth."""
    from pyspark.sql.types import StringType

    return holds(data_type, lambda t: isinstance(t, StringType) and
                 getattr(t, "collation", "UTF8_BINARY") != "UTF8_BINARY")


def _per_value_column(df, spec: WindowSpec, kind) -> bool | tuple:
    """Whether ``df``'s value columns are of ``kind`` (:func:`spark_ops.values.per_column`)."""
    return values.per_column(values.types_of(df.schema, spec), kind)


def check_output_names(spec: WindowSpec, columns, added=()) -> None:
    """No input column kept in the output (``columns``), nor one the plan
    adds (``added``: ``slide=``'s ``window_end``), has the name of one of
    ``spec``'s output columns.  O(columns + outputs)."""
    outputs = [n for n, _ in spec.output_columns]
    taken = clashes(outputs, added)
    if taken:
        raise SlidingWindowError(f"output column {', '.join(map(repr, taken))} has the name of the column "
                                 f"{', '.join(map(repr, added))} this job adds (Spark's names ignore case); "
                                 "name the aggregation differently")
    clash = clashes(columns, outputs)
    if clash:
        raise SlidingWindowError(f"input column {', '.join(map(repr, clash))} has the name of an output column "
                                 "(Spark's names ignore case); rename it (or name a user aggregation differently)")


def check_output_types(spec: WindowSpec) -> None:
    """Spark parses every output column's type (a user aggregation's
    ``spark_type``), checked before any job."""
    from pyspark.sql.types import _parse_datatype_string

    for name, declared in spec.output_columns:
        try:
            _parse_datatype_string(declared)
        except Exception as exc:  # noqa: BLE001 - Spark's parse errors have no common class
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SlidingWindowError(f"aggregation {name!r} declares Spark type {declared!r}, which Spark "
                                     f"cannot parse ({reason})") from None


def _with_engine(spec: WindowSpec, df) -> WindowSpec:
    """``spec`` with the engine the job runs on (:func:`choose_engine`),
    which the ``spark_ops`` logger reports at INFO with the reason."""
    engine, why = choose_engine(spec, df)
    _log.info("sliding_window: engine %s: %s", engine, why)
    kernels = tuple(columnar.kernel_names(spec)) if engine == "columnar" else ()
    return dataclasses.replace(spec, engine=engine, kernels=kernels)


def choose_engine(spec: WindowSpec, df) -> tuple[str, str]:
    """The engine ``spec``'s job over ``df`` runs on, ``"columnar"``,
    ``"amta"`` or ``"lmta"``, and why, in a sentence.  ``"auto"``: the
    columnar engine where it can run, else the Amortized MTA; a batch job's
    store keeps its windows only on an MTA (``"amta"`` or ``"lmta"`` by
    name, for windows larger than executor memory, or ``"auto"``'s
    fallback).  ``"columnar"`` where it cannot run is an error."""
    from pyspark.sql.types import FractionalType

    return engine_for(spec, streaming=df.isStreaming, fractional=_per_value_column(df, spec, FractionalType))


def keeps_windows_in_store(engine: str) -> bool:
    """Whether a job on ``engine`` (as :func:`choose_engine` names it) may
    keep its windows in its store: an MTA's go there (a batch window may
    run in executor memory first, see :func:`engine_for`); the columnar
    engine's stay in executor memory, and it never opens the store."""
    return engine in ENGINES


def engine_for(spec: WindowSpec, *, streaming: bool, fractional: bool | tuple) -> tuple[str, str]:
    """:func:`choose_engine`'s rule for a streaming or batch job whose value
    column is ``fractional`` (floating point) or not (per value column for
    several)."""
    shown = spec.store and stores.redact_url(spec.store)
    where = f"its windows in the store {shown}" if spec.store else "its windows in executor memory"
    if spec.store and not streaming and spec.policy is None and not spec.sizes:  # a SortedWindow's rule
        where = (f"its windows in executor memory, each moving to the store {shown} if it outgrows "
                 f"{spec.spill_rows} rows (buffer_size + cache_size)")
    if streaming:
        if spec.engine == "columnar":
            raise SlidingWindowError("engine='columnar' is for batch jobs; a streaming query keeps its windows "
                                     "in the store with engine='amta' or 'lmta'")
        return ("amta" if spec.engine == "auto" else spec.engine), f"a streaming query, {where}"
    if spec.engine not in ("auto", "columnar"):
        return spec.engine, f"engine={spec.engine!r} asked for, {where}"
    why_not = columnar.ineligible(spec, fractional)
    if why_not is not None:
        if spec.engine == "columnar":
            raise SlidingWindowError(f"engine='columnar' cannot run this job: {why_not}; use engine='auto' or an MTA")
        return "amta", f"the columnar engine cannot run this job ({why_not}), {where}"
    if spec.store:
        return "columnar", (f"its windows in executor memory, not in the store {shown} (a batch job keeps "
                            "its windows in the store with engine='amta' or 'lmta', for windows larger than "
                            "executor memory)")
    return "columnar", where


_log = logging.getLogger("spark_ops")

"""Periodic output (``slide=``): one row per key and window instead of one
per input row.

The windows are Spark's ``window(time, range, slide)`` with no start
offset: they end at the multiples of the slide and hold the rows with time
in ``[end - range, end)``; a window is emitted only if it holds rows.  The
slide must divide the range (:func:`spark_ops.spec._slide`): Spark starts
its windows at the multiples of the slide, so only then do they end there
too.  Times are compared in whole microseconds, as Spark's timestamps are.

When every aggregation is one whose window result the panes' partial
results give (``max``, ``min``, ``count``, float ``sum`` and ``mean``),
the job runs on panes (:mod:`spark_ops.periodic_panes`: Spark aggregates
each key's rows per pane of the slide before its shuffle, and the panes go
through a :class:`PeriodicWindow` as rows would;
:func:`spark_ops.periodic_panes.ineligible` is the rule).  Otherwise the
plan is the batch plan's (one shuffle by key, one sort by ``(key,
time, arrival)``, one pass per key with ``mapInArrow``), shipping only the
key, time and value columns (the time and value as the input has them
where the engines take them so, :func:`spark_ops.plan.lean_columns`; the
arrival number is sorted on, not shipped); each key's rows go
through a :class:`PeriodicWindow`, which computes every window of every
size with the columnar engine's kernels (:mod:`spark_ops.kernels`), or,
for aggregations those kernels do not compute (a user aggregator) and
``engine="amta"`` or ``"lmta"``, through
:class:`spark_ops.periodic_stream.MonoidPeriodicWindow` (panes of the
slide on the aggregators' monoids).  A window is complete, and emitted,
once a row at or after its end has come (the rows come sorted by time) or
when the key's rows end.  Streaming ``slide=`` is
:mod:`spark_ops.periodic_stream`'s.
"""

from __future__ import annotations

import numpy as np

from mta import aggregators
from mta.markers import EMPTY

from . import aggregations, rows, worker_gc
from .columnar import aggregate, not_positive
from .durations import in_micros
from .batch import runs
from .kernels import KERNELS, Rows
from .keys import key_reader, positive_zero, same_key
from .names import map_in_arrow
from .plan import ARRIVAL, column, key_time_ordered, lean_columns, micros, output_arrow_schema, quoted, seconds
from .spec import MICROS, SlidingWindowError, WindowSpec
from .values import numpy_values

#: The output column holding each window's end.
WINDOW_END = "window_end"
#: The remedy for a time column ``window_end`` cannot take (``mta-spark`` respells it as its ``--schema``).
CAST_TIME = "cast it to a timestamp or a double of seconds for slide="


def window_end_type(spec: WindowSpec, time_type) -> str:
    """The Spark type of ``window_end``: the time column's type; an
    integral time column needs whole-second sizes and slide; a date,
    decimal or float (32-bit) time column is refused (a date holds no
    time of day, a decimal's scale is the input's, a float holds today's
    epoch seconds to about two minutes)."""
    from pyspark.sql.types import DateType, DecimalType, FloatType, IntegralType

    if isinstance(time_type, (DateType, DecimalType, FloatType)):
        raise SlidingWindowError(f"time column {spec.time!r} is {time_type.simpleString()}, which cannot hold the "
                                 f"windows' ends (window_end has the time column's type): {CAST_TIME}")
    if isinstance(time_type, IntegralType):
        whole = all(float(s).is_integer() for s in [*spec.size_values, spec.slide])
        if not whole:
            raise SlidingWindowError(f"time column {spec.time!r} is {time_type.simpleString()}: window ends "
                                     "must fit it, so give range= and slide= in whole seconds")
    return time_type.simpleString()


def output_schema(spec: WindowSpec, types: dict) -> str:
    """The Spark schema (DDL) of periodic rows: the key columns, ``window_end``
    and one column per aggregation and size; ``types``: the input's column types."""
    end_type = window_end_type(spec, types[spec.time])
    return ", ".join([f"{quoted(c)} {types[c].simpleString()}" for c in spec.keys] +
                     [f"{quoted(WINDOW_END)} {end_type}"] + [f"{quoted(n)} {t}" for n, t in spec.output_columns])


def windows_batch(spec: WindowSpec, arrow_schema, key, ends_us, results):
    """One key's windows as an Arrow record batch of ``arrow_schema``
    (:func:`output_schema`): ``ends_us`` their ends, ``results`` per
    aggregation and size (aggregation-major) a NumPy array and null mask
    (the kernels') or a list of Python values (a monoid's), each converted
    to its declared type by :func:`spark_ops.aggregations.arrow_column`."""
    import pyarrow as pa

    k = len(spec.keys)
    parts = key if k > 1 else (key,)
    key_columns = [pa.array([positive_zero(part)] * len(ends_us), type=arrow_schema.field(i).type)
                   for i, part in enumerate(parts)]  # one row per window: the key as Spark's window() gives it
    end_column = _ends_array(np.asarray(ends_us, dtype=np.int64), arrow_schema.field(k).type)
    arrays = []
    for i, ((name, _, spark), result) in enumerate(zip(spec.columns, results)):
        if not isinstance(result, list):  # the kernel's own type, converted to the declared one as a monoid's are
            result = pa.array(result[0], mask=result[1])
        try:
            arrays.append(aggregations.arrow_column(result, spark).cast(arrow_schema.field(k + 1 + i).type))
        except aggregations.OutOfRange as exc:
            end = end_column[exc.index].as_py()
            raise aggregations.overflow_error(spec, key, name, end, exc.value, spark, at=WINDOW_END) from None
        except aggregations.NotOfType as exc:
            raise aggregations.not_of_type(name, spark, str(exc)) from None
    return pa.RecordBatch.from_arrays(key_columns + [end_column] + arrays, schema=arrow_schema)


def slide_and_ranges_us(spec: WindowSpec) -> tuple[int, list[int]]:
    """``spec``'s slide and window lengths in whole microseconds, converted
    as ``spec`` checked that the slide divides each length
    (:func:`spark_ops.durations.in_micros`).  O(sizes)."""
    return in_micros(spec.slide), [in_micros(r) for r in spec.size_values]


def periodic_plan(df, spec: WindowSpec, run: str):
    """``df``'s windows as rows ``(key, window_end, one column per
    aggregation and size)``: on the columnar engine's kernels when
    ``spec.engine`` is ``"columnar"``, else on the aggregators' monoids
    (:class:`spark_ops.periodic_stream.MonoidPeriodicWindow`)."""
    from .periodic_stream import MonoidPeriodicWindow

    from . import periodic_panes

    types = {f.name: f.dataType for f in df.schema.fields}
    k = len(spec.keys)
    schema = output_schema(spec, types)
    arrow_schema = output_arrow_schema(df.sparkSession, schema)
    columnar = spec.engine == "columnar"
    if columnar and periodic_panes.ineligible(spec) is None:
        return periodic_panes.pane_plan(df, spec, schema, arrow_schema)
    numbered, time_column, value_column = lean_columns(df, spec)
    numbering = [ARRIVAL] if ARRIVAL in numbered.columns else []  # none with ties="any"
    shipped = list(dict.fromkeys([*spec.keys, spec.time, time_column, value_column, *numbering]))
    ordered = key_time_ordered(numbered.select(*[column(c) for c in shipped]), spec.keys, time_column)
    time_at, value_at, shown_at = (shipped.index(c) for c in (time_column, value_column, spec.time))
    key_columns, key_of = key_reader(list(range(k)))
    kernels = list(spec.kernels)
    slide_us, ranges_us = slide_and_ranges_us(spec)

    def checked(batches):
        for batch in batches:
            keys = key_columns(batch)
            times, values = seconds(batch.column(time_at)), batch.column(value_at)
            problems = rows.check_columns(keys, times, values, micros=True)
            if columnar and "geomean" in kernels:  # the monoids' lift finds these itself
                problems = not_positive(spec, kernels, values, problems)
            if problems and any(problems):
                i = next(i for i, p in enumerate(problems) if p)
                raise rows.rejected(spec, problems[i], key_of(keys, i), batch.column(shown_at)[i].as_py(),
                                    values[i].as_py())
            yield batch

    def open_window(key):
        if columnar:
            return PeriodicWindow(kernels, ranges_us, slide_us, spec.reads)
        return MonoidPeriodicWindow(spec, key, ranges_us, slide_us)

    def push(window, batch, start, end):
        n = end - start
        t_us, values = micros(batch.column(time_at).slice(start, n)), batch.column(value_at).slice(start, n)
        if columnar:
            return window.push(t_us, numpy_values(values))
        return window.push(t_us, values, batch.column(shown_at).slice(start, n))

    def windows_of_partition(batches):
        return windows_by_key(checked(batches), key_columns, key_of, open_window, push,
                              lambda key, ends_us, results: windows_batch(spec, arrow_schema, key, ends_us, results))

    return map_in_arrow(ordered, worker_gc.settling(windows_of_partition), schema)


def windows_by_key(batches, key_columns, key_of, open_window, push, output):
    """Both periodic plans' pass over a partition's batches, whose rows come
    by key: each batch cut into runs of one key (:func:`spark_ops.batch.runs`);
    a key's window opens at its first run (``open_window(key)``), takes each
    of its runs (``push(window, batch, start, end)``) and closes when the
    next key starts or the batches end.  What a push or a close returns,
    ``(ends_us, results)``, becomes an Arrow batch by ``output(key, ends_us,
    results)`` when some window ended; a batch's outputs are yielded once
    all its runs are pushed.  O(runs) beyond the callbacks."""
    current, window, out = EMPTY, None, []

    def emit(key, ends_us, results):
        if len(ends_us):
            out.append(output(key, ends_us, results))

    for batch in batches:
        keys = key_columns(batch)
        for start, end in runs(keys):
            key = key_of(keys, start)
            if window is None or not same_key(key, current):
                if window is not None:
                    emit(current, *window.close())
                current, window = key, open_window(key)
            emit(key, *push(window, batch, start, end))
        yield from out
        out.clear()
    if window is not None:
        emit(current, *window.close())
        yield from out


def _ends_array(ends_us: np.ndarray, arrow_type):
    """Window ends (integer microseconds) as an Arrow array of the output's
    ``window_end`` type: a timestamp, or a number of seconds."""
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type):
        return pa.array(ends_us, type=pa.int64()).cast(pa.timestamp("us", tz=arrow_type.tz)).cast(arrow_type)
    if pa.types.is_integer(arrow_type):
        ends = ends_us // MICROS
        top = np.iinfo(arrow_type.to_pandas_dtype()).max
        if len(ends) and ends.max() > top:  # a window ends after its rows: past the largest time the type holds
            raise SlidingWindowError(f"a window ends at {int(ends.max())} seconds, past {top}, the largest value "
                                     "of the time column's type, which window_end has: cast the time column to "
                                     "bigint or a timestamp")
        return pa.array(ends, type=arrow_type)
    return pa.array(ends_us / MICROS, type=arrow_type)


def _ends(t: np.ndarray, slide: int, widest: int) -> np.ndarray:
    """The ends of the windows holding a row of sorted times ``t`` (all
    integers, microseconds): a row at u is in the windows ending at ``slide
    * (u // slide + j)`` for j = 1 .. ``widest / slide``.  O(n + windows)."""
    per_row = widest // slide
    first = np.unique(t // slide + 1)
    reach = np.minimum(np.append(first[1:], first[-1] + per_row), first + per_row)  # up to the next row's
    lengths = reach - first
    offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return (np.repeat(first, lengths) + offsets) * slide


class PeriodicWindow:
    """One key's periodic windows, rows pushed in batches sorted by time.

    ``ranges_us``: the windows' lengths, ``slide_us``: the slide (integer
    microseconds, the slide dividing each length).  Between pushes the key
    keeps the rows that windows not yet emitted can still hold: O(largest
    window) rows."""

    def __init__(self, names, ranges_us: list[int], slide_us: int, reads: tuple = ()) -> None:
        self.names, self.ranges_us, self.slide_us = list(names), list(ranges_us), slide_us
        self.reads = reads  # several value columns: the field each kernel reads (spark_ops.values)
        self._kernels = [KERNELS[name] for name in self.names]
        self._empty = [aggregators.READY[name].empty for name in self.names]
        self._t = np.empty(0, dtype=np.int64)
        self._x = None
        self._done = None  # the last window end emitted (microseconds)

    def push(self, t_us: np.ndarray, values: np.ndarray):
        """The windows the rows (times in integer microseconds,
        :func:`spark_ops.plan.micros`) complete: their ends (microseconds)
        and per aggregation and size (aggregation-major) the results and
        null mask."""
        self._t = np.concatenate((self._t, t_us))
        self._x = values if self._x is None else np.concatenate((self._x, values))
        return self._windows(complete_before=int(t_us[-1]) if len(t_us) else None)

    def close(self):
        """The key's rows are done: every window still open."""
        out = self._windows(complete_before=None)
        self._t, self._x = np.empty(0, dtype=np.int64), None
        return out

    def _windows(self, complete_before):
        """Emit the windows ending at or before ``complete_before`` (every
        one when ``None``) and drop the rows no later window holds.
        O(m log n) for m windows over n kept rows, per size."""
        t, x, slide = self._t, self._x, self.slide_us
        if x is None or not len(t):
            return np.empty(0, dtype=np.int64), [(np.empty(0), None) for _ in self.names for _ in self.ranges_us]
        widest = max(self.ranges_us)
        ends = _ends(t, slide, widest)
        if self._done is not None:
            ends = ends[ends > self._done]
        if complete_before is not None:
            ends = ends[ends <= complete_before]
        stop = np.searchsorted(t, ends, side="left")  # rows before each end
        by_size = []
        for range_us in self.ranges_us:
            start = np.searchsorted(t, ends - range_us, side="left")
            by_size.append(self._results(x, start, stop - 1))
        results = [by_size[s][a] for a in range(len(self.names)) for s in range(len(self.ranges_us))]
        if len(ends):
            self._done = int(ends[-1])
        # the next windows end after _done: they hold rows from _done + slide - widest on
        if self._done is not None:
            keep = int(np.searchsorted(t, self._done + slide - widest, side="left"))
            self._t, self._x = t[keep:], x[keep:]
        return ends, results

    def _results(self, x, start, end) -> list:
        """Every aggregation over the windows ``x[start[i] : end[i] + 1]``;
        a smaller size's window may hold no row (its results: the
        aggregation's empty value, or null)."""
        empty = start > end
        if empty.any():
            start = np.where(empty, np.maximum(end, 0), start)
            end = np.maximum(end, 0)
        else:
            empty = None
        if not len(start):
            return [(np.empty(0, dtype=np.float64), None) for _ in self._kernels]
        return aggregate(self._kernels, self._empty, Rows(x, start, end, 0), empty, self.reads)

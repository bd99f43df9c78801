"""What a sliding-window job computes: :class:`WindowSpec`.

A spec is built and checked on the driver and shipped to executors with
the task (Spark pickles functions; window *data* in the store never is),
where :func:`spark_ops.windows.open_key_window` opens one window per key
from it.  Nothing here imports pyspark.

Semantics: one output row per input row.  A row's window holds the rows of
the same key whose time lies in ``(t - range, t]`` (or the newest ``rows``
rows, or what a custom policy keeps) and that come at or before it in
``(time, arrival)`` order; its outputs are the aggregations over that window.
``frame="sql"`` makes a time window Spark SQL's ``[t - range, t]`` with rows
of equal time as peers (:mod:`spark_ops.frames`).
In streaming, the order is that of each micro-batch: a row older than its
key's newest time in an earlier micro-batch cannot enter the window (it is
a bad row, see ``on_bad_row`` and :mod:`spark_ops.rows`).
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field, replace
from typing import Any

import stores
from mta import Aggregator, AmortizedMTA, LogMTA, SlidePolicy, policies, product
from mta.native import amortized_engine, log_engine
from mta.errors import MTAError
from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from . import durations, frames, values
from .aggregations import READY
from .names import repeated, trimmed

__all__ = ["BAD_ROW_RULES", "ENGINES", "ENGINE_CHOICES", "READY", "SlidingWindowError", "WindowSpec"]

ENGINES = {"amta": AmortizedMTA, "lmta": LogMTA}
#: What ``engine=`` takes: an MTA, the columnar engine of batch jobs
#: (:mod:`spark_ops.columnar`), or ``"auto"``: columnar where it can run, else
#: the Amortized MTA.
ENGINE_CHOICES = ("auto", "columnar", *ENGINES)
#: How rows that cannot enter a window are handled (see :func:`spark_ops.rows.settle`).
BAD_ROW_RULES = ("error", "flag")


class SlidingWindowError(MTAError, ValueError):
    """A sliding-window job was misconfigured, or met a row it cannot take
    (the message names the row)."""


@dataclass
class WindowSpec:
    """A sliding-window aggregation: columns, aggregations, policy, store."""

    #: One column's name, or a tuple of several (a composite key, whose
    #: values are tuples of the columns' values): see :func:`key_columns`.
    key: str | tuple
    time: str
    #: One column's name (a numeric column, or a struct of numeric fields),
    #: or a tuple of several: see :mod:`spark_ops.values`.
    value: str | tuple
    aggs: list = field(default_factory=list)  # [(column, Aggregator, spark type)]
    range: float | None = None
    rows: int | None = None
    policy: SlidePolicy | None = None
    # repr=False: the URL and options may hold credentials
    store: str | None = field(default=None, repr=False)
    store_options: dict = field(default_factory=dict, repr=False)
    engine: str = "auto"
    buffer_size: int = DEFAULT_BUFFER_SIZE
    cache_size: int = DEFAULT_CACHE_SIZE
    on_bad_row: str = "error"
    namespace: str = "mta"
    frame: str = "default"
    #: What orders rows of equal time: :data:`spark_ops.frames.TIES`.
    ties: str = "input"
    #: Several sizes (``range=`` or ``rows=`` a list or a dict): ``((label,
    #: size), ...)`` in the order given, and ``range`` or ``rows`` holds the
    #: largest, the window each key keeps; ``()`` for a single size.
    sizes: tuple = ()
    #: Periodic output (``slide=``, seconds): windows ``[end - range, end)``
    #: ending at the multiples of the slide, one output row per key and window.
    slide: float | None = None
    #: The ready aggregation whose columnar kernel computes each aggregation
    #: (:func:`spark_ops.columnar.kernel_names`), found on the driver when
    #: the job runs on the columnar engine: executors unpickle their own
    #: copies of the aggregators, so only the driver can recognise them.
    kernels: tuple = ()
    #: The value columns when there are several (a list's columns or a
    #: struct's fields, :func:`spark_ops.values.fields_of`); ``()`` for one
    #: numeric column, whose values come alone rather than in tuples.
    value_fields: tuple = ()
    #: Per aggregation, the position in :attr:`value_fields` of the column
    #: it reads, or ``None`` (the whole value); ``()`` when none names one.
    reads: tuple = ()
    #: The time column counts whole microseconds: range edges are decided in them (:func:`frames.range_edge`).
    micros: bool = False
    #: How the input writes its times, for messages (:func:`spark_ops.plan.clock_of`); ``""``: a number.
    clock: str = ""

    @classmethod
    def build(cls, *, key, time, value, aggs, range=None, rows=None, policy=None, store=None,
              store_options=None, engine="auto", buffer_size=DEFAULT_BUFFER_SIZE, cache_size=DEFAULT_CACHE_SIZE,
              on_bad_row="error", namespace="mta", frame="default", slide=None, ties="input",
              integral: bool | tuple = False, value_fields: tuple = (), micros=False, clock="") -> "WindowSpec":
        """Check the arguments of :func:`spark_ops.sliding_window`; ``integral``: the value column holds
        integers (per value column for several, :func:`spark_ops.values.per_column`); ``value_fields``: the
        value columns when there are several (a struct's fields); ``micros``: the time column counts
        microseconds (:func:`spark_ops.plan.micro_time`); ``clock``: :attr:`clock`."""
        given = [name for name, v in (("range", range), ("rows", rows), ("policy", policy)) if v is not None]
        if len(given) != 1:
            raise SlidingWindowError(
                "give exactly one of range= (seconds), rows= (count) or policy= "
                f"(a SlidePolicy over (time, value) records); got {given or 'none'}")
        sizes = ()
        if range is not None:
            range, sizes = _sizes(range, "range", lambda size: _range_size(size, micros=micros))
        if rows is not None:
            rows, sizes = _sizes(rows, "rows", _rows_size)
        if policy is not None and not isinstance(policy, SlidePolicy):
            raise SlidingWindowError(f"policy must be an mta SlidePolicy, got {type(policy).__name__}")
        why = frames.refused(frame, ties, policy)
        if why:
            raise SlidingWindowError(why)
        if engine not in ENGINE_CHOICES:
            raise SlidingWindowError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINE_CHOICES)}")
        if on_bad_row not in BAD_ROW_RULES:
            raise SlidingWindowError(f"on_bad_row must be one of {BAD_ROW_RULES}, got {on_bad_row!r}")
        for option, size in (("buffer_size", buffer_size), ("cache_size", cache_size)):
            if type(size) is not int or size < 1:
                raise SlidingWindowError(f"{option} must be a positive int (pairs per level), got {size!r}")
        key = key_columns(key)
        value = values.value_columns(value)
        if isinstance(value, tuple):
            value_fields = value
        value_names = value if isinstance(value, tuple) else (value,)
        for role, column in (("time", time), *(("value", v) for v in value_names)):
            if column in (key if isinstance(key, tuple) else (key,)):
                raise SlidingWindowError(f"column {column!r} is both a key column and the {role} column; "
                                         "a window's key cannot be its " + role)
        if slide is not None:
            slide = _slide(slide, range, rows, frame, sizes, store)
        resolved, reads = values.resolve(aggs, tuple(value_fields), integral,
                                         single=None if value_fields else value)
        spec = cls(key=key, time=time, value=value, value_fields=tuple(value_fields), reads=reads,
                   aggs=resolved, range=range, rows=rows, ties=ties,
                   policy=policy, store=_store_url(store), store_options=dict(store_options or {}),
                   engine=engine, buffer_size=buffer_size, cache_size=cache_size, on_bad_row=on_bad_row,
                   namespace=namespace, frame=frame, sizes=sizes, slide=slide, micros=micros, clock=clock)
        clash = repeated([name for name, _ in spec.output_columns])
        if clash:
            raise SlidingWindowError(f"output column {', '.join(map(repr, clash))} would come twice (names ignore "
                                     "case; an aggregation's name and a size's label make it); rename one")
        return spec

    @property
    def keys(self) -> tuple[str, ...]:
        """The key's columns (one or several)."""
        return self.key if isinstance(self.key, tuple) else (self.key,)

    def key_text(self, key: Any) -> str:
        """A key's value as messages name it: ``host='a'``, or for a composite key ``dc='x', host='y'``."""
        if not isinstance(self.key, tuple):
            return f"{self.key}={key!r}"
        return ", ".join(f"{name}={v!r}" for name, v in zip(self.key, key))

    @property
    def mta_engine(self):
        """The MTA for windows that run through one (``auto`` and ``columnar`` mean the Amortized MTA there): built as
        ``mta_engine(monoid, wsp, **options)``; either MTA through :mod:`mta.native` (its compiled core for an
        in-memory window, when built)."""
        engine = ENGINES.get(self.engine, AmortizedMTA)
        return log_engine if engine is LogMTA else amortized_engine

    @property
    def spill_rows(self) -> int:
        """Rows past which a batch MTA window (:class:`~spark_ops.sorted_window.SortedWindow`)
        moves from executor memory to the store: ``buffer_size + cache_size``,
        no more than the pairs per level a window in the store holds in
        memory anyway (its write buffer and read-ahead cache)."""
        return self.buffer_size + self.cache_size

    @property
    def peers(self) -> bool:
        """Rows of equal time share one output (``frame="sql"`` with ``range=``)."""
        return self.frame == "sql" and self.range is not None

    @property
    def columns(self) -> list[tuple[str, Aggregator, str]]:
        """``(column, Aggregator, spark type)`` per aggregation output
        column: :attr:`aggs` for one size; with several, one per
        aggregation and size, ``<aggregation>_<label>``, aggregation-major
        (``max_5m, max_1h, mean_5m, mean_1h``)."""
        if not self.sizes:
            return list(self.aggs)
        return [(f"{name}_{label}", agg, spark) for name, agg, spark in self.aggs for label, _ in self.sizes]

    @property
    def size_values(self) -> list:
        """The sizes of the windows (seconds for ``range=``, counts for
        ``rows=``), in :attr:`sizes` order; one for a single size."""
        return [size for _, size in self.sizes] if self.sizes else [self.range if self.range is not None
                                                                     else self.rows]

    def one_size(self, size) -> "WindowSpec":
        """This spec with the single size ``size`` (of the same kind), for one of several sizes' windows."""
        if self.range is not None:
            return replace(self, range=size, sizes=())
        return replace(self, rows=size, sizes=())

    @property
    def output_columns(self) -> list[tuple[str, str]]:
        cols = [(name, spark_type) for name, _, spark_type in self.columns]
        if self.slide is not None:
            return cols  # the key and window_end come first, see spark_ops.periodic
        if self.on_bad_row == "flag":
            cols.append(("rejected", "string"))
        return cols

    def slide_policy(self) -> SlidePolicy:
        if self.range is not None:
            edge = frames.range_edge(self.range, self.frame, self.micros)
            return policies.custom(policies.MAX_MONOID, _time_of, lambda total, prefix: prefix <= edge(total),
                                   name=f"TimeRange({self.range!r}, frame={self.frame})")
        if self.rows is not None:
            return policies.Count(self.rows)
        return self.policy

    def aggregator(self) -> Aggregator:
        """The aggregations over ``(time, value)`` records, as one product
        (each over the value column it reads, :attr:`reads`)."""
        return product(*values.on_columns([agg for _, agg, _ in self.aggs], self.reads)).on(_value_of)

    def value_aggregator(self) -> Aggregator:
        """The aggregations over the value alone: the aggregator itself when
        there is one, else one fused aggregator over shared moments when they
        fuse (:func:`spark_ops.aggregations.value_aggregator`), else their
        product (results as a tuple)."""
        from .aggregations import value_aggregator

        fused = value_aggregator([agg for _, agg, _ in self.aggs], self.reads)
        if fused is not None:
            return fused
        aggs = values.on_columns([agg for _, agg, _ in self.aggs], self.reads)
        return aggs[0] if len(aggs) == 1 else product(*aggs)

    def run_record(self, run: str, partition: int) -> str:
        """The store's name for the progress record of a streaming run's
        partition (:mod:`stores.runs`): ``<namespace>/<run>/~task-<partition>``,
        which no key's window name can be (:meth:`window_id` names a key by
        its repr, and no repr starts with ``~``)."""
        return f"{self.namespace}/{run}/~task-{partition}"

    def window_id(self, key: Any, run: str) -> str:
        """The store's name for one key's window, ``<namespace>/<run>/<key!r>``
        (a composite key's value is a tuple, whose repr quotes each part, so
        parts holding commas or quotes never make two keys one name):
        readable when the key's repr fits a store name (no braces or control
        characters, short), else a readable prefix and the SHA-1 of the
        whole repr, so that distinct keys never share a window."""
        readable = repr(key)
        text = f"{self.namespace}/{run}/{readable}"
        if len(text.encode("utf-8", "surrogatepass")) <= WINDOW_ID_BYTES and not _UNSAFE_IN_IDS.search(readable):
            return text
        import hashlib

        digest = hashlib.sha1(readable.encode("utf-8", "surrogatepass")).hexdigest()
        prefix = _UNSAFE_IN_IDS.sub("?", readable).encode("utf-8", "replace")[:32].decode("utf-8", "ignore")
        return f"{self.namespace}/{run}/{prefix}#{digest}"

    def fingerprint(self) -> str:
        """What a window's contents depend on: the columns, the aggregations,
        the slide and the engine (a restarted streaming query must not
        resume windows built by another job)."""
        aggs = ",".join(f"{name}={agg.name}" for name, agg, _ in self.aggs)
        slide = (f"range={self.range!r}" if self.range is not None else f"rows={self.rows}" if self.rows is not None
                 else f"policy={self.policy.name}")
        if self.sizes:  # appended so that a single size's fingerprint stays what it was
            slide += ", sizes=" + ",".join(f"{label}:{size!r}" for label, size in self.sizes)
        if self.frame != "default":
            slide += f", frame={self.frame}"
        key = self.key if isinstance(self.key, str) else list(self.key)
        value = self.value if not self.value_fields else f"{self.value}{list(self.value_fields)} reads={self.reads}"
        return f"{aggs}; {slide}; {self.engine}; key={key}, time={self.time}, value={value}"

    def storage_options(self, key: Any, run: str, *, resume: bool | int | stores.Before = False,
                        durable: bool = True, batch: stores.Batch | None = None) -> dict:
        """The engine options that put one key's window in the pooled store
        (``durable=False``: its checkpoints wait for the task's
        ``store.sync()``; ``batch``: for its ``commit()``)."""
        if not self.store:
            return {}
        store = stores.pooled_store(self.store, self.store_options)
        options = dict(store=store, window_id=self.window_id(key, run), buffer_size=self.buffer_size,
                       cache_size=self.cache_size, resume=resume, durable=durable)
        if batch is not None:
            options["batch"] = batch
        if isinstance(resume, stores.Before):
            options["retain"] = RETAIN_BY_STEP
        return options


#: Checkpoints a key's window resumed by micro-batch (stores.Before) keeps
#: besides those they started from: the newest.  Every attempt of a
#: micro-batch resumes the latest earlier one's checkpoint, which stays as
#: its parent, and all attempts leave the same window (the same rows), so
#: the next may resume any: two checkpoints, not three, a third less to
#: decode per claim.  A window resumed by version (Spark's state) keeps the
#: default: that state names one attempt's checkpoint, which must stay.
RETAIN_BY_STEP = 1


def key_columns(key) -> str | tuple:
    """``key=`` as :class:`WindowSpec` holds it (:func:`column_names`; a list of one runs as the name alone)."""
    return column_names(key, "key", " (a composite key)")


def column_names(given, argument: str, several: str = "") -> str | tuple:
    """``key=`` or ``value=`` (``argument``) as a spec holds it: one
    column's name (also for a list of one), or a tuple of several; a
    :class:`SlidingWindowError` for an empty list, a name that is not a
    string, or a name given twice (``several`` says what a list means)."""
    names = list(given) if isinstance(given, (list, tuple)) else [given]
    if not names:
        raise SlidingWindowError(f"{argument}= needs a column, or a list of columns{several}, got an empty list")
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise SlidingWindowError(f"{argument}= takes column names (a string or a list of strings), got {bad[0]!r}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SlidingWindowError(f"{argument} column {', '.join(map(repr, twice))} given more than once in "
                                 f"{argument}=")
    return names[0] if len(names) == 1 else tuple(names)


def split_columns(text: str, columns=None) -> list[str]:
    """Columns as a user types them in one string (``mta-spark --key``, ``--value``; SQL's ``key =>``,
    ``value =>``): ``"cpu,mem"`` is ``["cpu", "mem"]``, blanks around each name dropped (but where one of
    the input's ``columns``, if given, has them: :func:`~spark_ops.names.trimmed`; an empty name is left
    for :func:`column_names` to name).  A list or tuple (names already resolved) stays as it is."""
    if isinstance(text, (list, tuple)):
        return list(text)
    return [c.strip() if columns is None else trimmed(c, columns) for c in text.split(",")]


def _range_size(size, what: str = "range", micros: bool = False):
    """One ``range=`` (or ``slide=``: ``what``) size in seconds (:func:`spark_ops.durations.seconds`);
    ``micros``: of one microsecond or more (:func:`spark_ops.frames.span_micros`)."""
    try:
        seconds = durations.seconds(size, what)
        if micros:
            frames.span_micros(seconds)  # a span of no whole microsecond is refused
        return seconds
    except ValueError as exc:
        raise SlidingWindowError(str(exc)) from None


def _rows_size(size):
    """One ``rows=`` size, a count."""
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 1:
        raise SlidingWindowError(f"rows must be a positive int, got {size!r}")
    return int(size)


def _sizes(given, what: str, parse) -> tuple:
    """``range=`` or ``rows=`` as ``(largest size, sizes)``: one size gives
    ``(size, ())``; a list labels each size by its text as given (``300``,
    ``"5m"``), a dict by its keys.  O(k log k) for k sizes."""
    if isinstance(given, dict):
        labelled = list(given.items())
        for label, _ in labelled:
            if not isinstance(label, str) or not label or "`" in label:
                raise SlidingWindowError(f"{what}= labels must be non-empty strings without '`', got {label!r}")
    elif isinstance(given, (list, tuple)):
        labelled = [(str(size).strip(), size) for size in given]
    else:
        return parse(given), ()
    if not labelled:
        raise SlidingWindowError(f"{what}= needs at least one size, got {given!r}")
    sizes = tuple((label, parse(size)) for label, size in labelled)
    labels = [label for label, _ in sizes]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise SlidingWindowError(f"{what}= labels must be unique; {', '.join(map(repr, twice))} comes twice")
    values = [size for _, size in sizes]
    same = sorted({size for size in values if values.count(size) > 1})
    if same:
        raise SlidingWindowError(f"{what}= has the size {same[0]!r} twice (under labels "
                                 f"{', '.join(repr(lb) for lb, sz in sizes if sz == same[0])}); give it once")
    return max(values), sizes


#: Spark's timestamps count microseconds: windows of slide= are aligned on them.  The longest
#: slide= window (microseconds, about 73,000 years) and the times (seconds either side of 1970)
#: such plans take: any window's end then fits an int64.
MICROS, MICROS_SPAN, MICROS_TIME_LIMIT = 1_000_000, 2**61, 2**62 / 1_000_000


def _slide(slide, range, rows, frame: str, sizes: tuple = (), store=None):
    """``slide=`` in seconds, checked against each size of the window (see
    :mod:`spark_ops.periodic`; ``on_bad_row="flag"``: :mod:`spark_ops.excluded`)."""
    if range is None:
        raise SlidingWindowError("slide= is for time windows: give range= (the windows' length), not rows= or policy=")
    if store:
        raise SlidingWindowError("slide= keeps its windows in Spark's state (streaming) or in executor memory "
                                 "(batch), so store= would never be used: leave it out")
    slide = _range_size(slide, "slide")
    if frame != "default":
        raise SlidingWindowError("slide= windows are [end - range, end), as Spark's window(); frame= is for "
                                 "the per-row output")
    try:
        slide_us = durations.whole_micros(slide, "slide=")
        sizes_us = [(label, size, durations.whole_micros(size, "range")) for label, size in sizes or ((None, range),)]
    except ValueError as e:
        raise SlidingWindowError(str(e)) from None
    # Spark's window() starts windows at the multiples of the slide: they end there only if it divides the size
    for label, size, size_us in sizes_us:
        if size_us > MICROS_SPAN:
            raise SlidingWindowError(f"range {size!r} is longer than a slide= window can be "
                                     f"({MICROS_SPAN // MICROS:,} seconds)")
        if slide_us > size_us or size_us % slide_us:
            raise SlidingWindowError(f"slide= must divide the range{'' if label is None else f' {label!r}'} "
                                     "(windows end at the multiples of the slide and hold [end - range, end)); "
                                     f"got slide {slide!r} and range {size!r}")
    return slide


def _time_of(record):
    return record[0]


def _value_of(record):
    return record[1]


def _store_url(url: str | None) -> str | None:
    """File stores as absolute ``file://`` URLs (executors may not share the
    driver's working directory), other URLs unchanged; a bad one, or one no
    backend opens, is a :class:`SlidingWindowError`."""
    try:
        return stores.normalize_url(url and stores.check_url(url))
    except stores.StoreConfigError as e:
        raise SlidingWindowError(str(e)) from None


#: Longest readable window id, in UTF-8 bytes (stores take 160).
WINDOW_ID_BYTES = 120
#: What a key's repr cannot carry into a store name as is.
_UNSAFE_IN_IDS = re.compile(r"[{}\x00-\x1f\x7f]|[\ud800-\udfff]")

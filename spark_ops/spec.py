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

import math
import re
from dataclasses import dataclass, field
from typing import Any

import stores
from mta import Aggregator, AmortizedMTA, LogMTA, SlidePolicy, policies, product
from mta.errors import MTAError
from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from . import aggregations, durations, frames
from .aggregations import READY

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
    value: str
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

    @classmethod
    def build(cls, *, key, time, value, aggs, range=None, rows=None, policy=None, store=None,
              store_options=None, engine="auto", buffer_size=DEFAULT_BUFFER_SIZE,
              cache_size=DEFAULT_CACHE_SIZE,
              on_bad_row="error", namespace="mta", frame="default", integral: bool = False) -> "WindowSpec":
        """Check the arguments of :func:`spark_ops.sliding_window`;
        ``integral``: the value column holds integers."""
        given = [name for name, v in (("range", range), ("rows", rows), ("policy", policy)) if v is not None]
        if len(given) != 1:
            raise SlidingWindowError(
                "give exactly one of range= (seconds), rows= (count) or policy= "
                f"(a SlidePolicy over (time, value) records); got {given or 'none'}")
        if isinstance(range, str):
            try:
                range = durations.seconds(range, "range")
            except ValueError as exc:
                raise SlidingWindowError(str(exc)) from None
        if range is not None and not (isinstance(range, (int, float)) and not isinstance(range, bool)
                                      and range > 0 and math.isfinite(range)):
            raise SlidingWindowError(f"range must be a positive number of seconds or a duration such as '1h', "
                                     f"got {range!r}")
        if rows is not None and (type(rows) is not int or rows < 1):
            raise SlidingWindowError(f"rows must be a positive int, got {rows!r}")
        if policy is not None and not isinstance(policy, SlidePolicy):
            raise SlidingWindowError(f"policy must be an mta SlidePolicy, got {type(policy).__name__}")
        if frame not in frames.FRAMES:
            raise SlidingWindowError(f"frame must be one of {frames.FRAMES}, got {frame!r}")
        if frame != "default" and policy is not None:
            raise SlidingWindowError(f"frame={frame!r} is for range= and rows=; a custom policy decides its window "
                                     "itself, so it takes the default frame")
        if engine not in ENGINE_CHOICES:
            raise SlidingWindowError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINE_CHOICES)}")
        if on_bad_row not in BAD_ROW_RULES:
            raise SlidingWindowError(f"on_bad_row must be one of {BAD_ROW_RULES}, got {on_bad_row!r}")
        for option, size in (("buffer_size", buffer_size), ("cache_size", cache_size)):
            if type(size) is not int or size < 1:
                raise SlidingWindowError(f"{option} must be a positive int (pairs per level), got {size!r}")
        key = key_columns(key)
        for role, column in (("time", time), ("value", value)):
            if column in (key if isinstance(key, tuple) else (key,)):
                raise SlidingWindowError(f"column {column!r} is both a key column and the {role} column; "
                                         "a window's key cannot be its " + role)
        resolved = aggregations.resolve(aggs, integral)
        return cls(key=key, time=time, value=value, aggs=resolved, range=range, rows=rows,
                   policy=policy, store=_store_url(store), store_options=dict(store_options or {}),
                   engine=engine, buffer_size=buffer_size, cache_size=cache_size,
                   on_bad_row=on_bad_row, namespace=namespace, frame=frame)

    @property
    def keys(self) -> tuple[str, ...]:
        """The key's columns (one or several)."""
        return self.key if isinstance(self.key, tuple) else (self.key,)

    def key_text(self, key: Any) -> str:
        """A key's value as messages name it: ``host='a'``, or for a
        composite key ``dc='x', host='y'``."""
        if not isinstance(self.key, tuple):
            return f"{self.key}={key!r}"
        return ", ".join(f"{name}={v!r}" for name, v in zip(self.key, key))

    @property
    def mta_engine(self) -> type:
        """The MTA class for windows that run through one (``auto`` and
        ``columnar`` mean the Amortized MTA there)."""
        return ENGINES.get(self.engine, AmortizedMTA)

    @property
    def peers(self) -> bool:
        """Rows of equal time share one output (``frame="sql"`` with ``range=``)."""
        return self.frame == "sql" and self.range is not None

    @property
    def output_columns(self) -> list[tuple[str, str]]:
        cols = [(name, spark_type) for name, _, spark_type in self.aggs]
        if self.on_bad_row == "flag":
            cols.append(("rejected", "string"))
        return cols

    def slide_policy(self) -> SlidePolicy:
        if self.range is not None:
            edge = frames.range_edge(self.range, self.frame)
            return policies.custom(policies.MAX_MONOID, _time_of, lambda total, prefix: prefix <= edge(total),
                                   name=f"TimeRange({self.range!r}, frame={self.frame})")
        if self.rows is not None:
            return policies.Count(self.rows)
        return self.policy

    def aggregator(self) -> Aggregator:
        """The aggregations over ``(time, value)`` records, as one product."""
        return product(*[agg for _, agg, _ in self.aggs]).on(_value_of)

    def value_aggregator(self) -> Aggregator:
        """The aggregations over the value alone: the aggregator itself when
        there is one, else their product (results as a tuple)."""
        aggs = [agg for _, agg, _ in self.aggs]
        return aggs[0] if len(aggs) == 1 else product(*aggs)

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
        if self.frame != "default":
            slide += f", frame={self.frame}"
        key = self.key if isinstance(self.key, str) else list(self.key)
        return f"{aggs}; {slide}; {self.engine}; key={key}, time={self.time}, value={self.value}"

    def storage_options(self, key: Any, run: str, *, resume: bool | int = False) -> dict:
        """The engine options that put one key's window in the pooled store."""
        if not self.store:
            return {}
        store = stores.pooled_store(self.store, self.store_options)
        return dict(store=store, window_id=self.window_id(key, run), buffer_size=self.buffer_size,
                    cache_size=self.cache_size, resume=resume)


def key_columns(key) -> str | tuple:
    """``key=`` as :class:`WindowSpec` holds it: one column's name (also
    for a list of one, so that it runs exactly as the name alone), or a
    tuple of several; a :class:`SlidingWindowError` for an empty list, a
    name that is not a string, or a name given twice."""
    if isinstance(key, (list, tuple)):
        names = list(key)
    else:
        names = [key]
    if not names:
        raise SlidingWindowError("key= needs a column, or a list of columns (a composite key), got an empty list")
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise SlidingWindowError(f"key= takes column names (a string or a list of strings), got {bad[0]!r}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SlidingWindowError(f"key column {', '.join(map(repr, twice))} given more than once in key=")
    return names[0] if len(names) == 1 else tuple(names)


def _time_of(record):
    return record[0]


def _value_of(record):
    return record[1]


def _store_url(url: str | None) -> str | None:
    """File stores as absolute ``file://`` URLs (executors may not share the
    driver's working directory), other URLs unchanged; a bad one is a
    :class:`SlidingWindowError`."""
    try:
        return stores.normalize_url(url)
    except stores.StoreConfigError as e:
        raise SlidingWindowError(str(e)) from None


#: Longest readable window id, in UTF-8 bytes (stores take 160).
WINDOW_ID_BYTES = 120
#: What a key's repr cannot carry into a store name as is.
_UNSAFE_IN_IDS = re.compile(r"[{}\x00-\x1f\x7f]|[\ud800-\udfff]")

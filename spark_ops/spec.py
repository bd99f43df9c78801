"""What a sliding-window job computes, and how one key's rows go through it.

A :class:`WindowSpec` is built on the driver, shipped to executors with the
task (Spark pickles functions; window *data* in the store never is) and
turned there into one :class:`mta.Window` per key.  Nothing here imports
pyspark, so the per-row logic is testable on its own.

Semantics: one output row per input row.  A row's window holds the rows of
the same key whose time lies in ``(t - range, t]`` (or the newest ``rows``
rows, or what a custom policy keeps) and that come at or before it in
``(time, arrival)`` order; its outputs are the aggregations over that window.
In streaming, the order is that of each micro-batch: a row older than its
key's newest time in an earlier micro-batch cannot enter the window (it is
a bad row, see ``on_bad_row``).
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

from mta import (Aggregator, AmortizedMTA, LiftError, LogMTA, MemoryLevelQueue, SlidePolicy, Window, aggregators,
                 policies, product)
from mta.errors import MTAError
from mta.monoid import identity_function

#: Ready aggregations whose result is one of the values: typed like the
#: value column (``long`` for integral values), ``double`` otherwise.
VALUE_TYPED = ("sum", "min", "max", "first", "last")
#: Ready aggregations over the value column (see :data:`mta.aggregators.BY_NAME`).
READY = ("sum", "count", "min", "max", "mean", "geomean", "variance", "stddev",
         "var_pop", "stddev_pop", "first", "last")
ENGINES = {"amta": AmortizedMTA, "lmta": LogMTA}
#: What ``engine=`` takes: an MTA, the columnar engine of batch jobs
#: (:mod:`spark_ops.columnar`), or ``"auto"``: columnar where it can run, else
#: the Amortized MTA.
ENGINE_CHOICES = ("auto", "columnar", *ENGINES)
#: How rows that cannot enter a window are handled.
BAD_ROW_RULES = ("error", "flag")


class SlidingWindowError(MTAError, ValueError):
    """A sliding-window job was misconfigured, or met a row it cannot take
    (the message names the row)."""


@dataclass
class WindowSpec:
    """A sliding-window aggregation: columns, aggregations, policy, store."""

    key: str
    time: str
    value: str
    aggs: list = field(default_factory=list)  # [(column, Aggregator, spark type)]
    range: float | None = None
    rows: int | None = None
    policy: SlidePolicy | None = None
    store: str | None = None
    store_options: dict = field(default_factory=dict)
    engine: str = "auto"
    buffer_size: int = 512
    cache_size: int = 512
    on_bad_row: str = "error"
    namespace: str = "mta"

    @classmethod
    def build(cls, *, key, time, value, aggs, range=None, rows=None, policy=None, store=None,
              store_options=None, engine="auto", buffer_size=512, cache_size=512,
              on_bad_row="error", namespace="mta", integral: bool = False) -> "WindowSpec":
        """Check the arguments of :func:`spark_ops.sliding_window`;
        ``integral``: the value column holds integers."""
        given = [name for name, v in (("range", range), ("rows", rows), ("policy", policy)) if v is not None]
        if len(given) != 1:
            raise SlidingWindowError(
                "give exactly one of range= (seconds), rows= (count) or policy= "
                f"(a SlidePolicy over (time, value) records); got {given or 'none'}")
        if range is not None and not (isinstance(range, (int, float)) and range > 0 and math.isfinite(range)):
            raise SlidingWindowError(f"range must be a positive number of seconds, got {range!r}")
        if rows is not None and (type(rows) is not int or rows < 1):
            raise SlidingWindowError(f"rows must be a positive int, got {rows!r}")
        if policy is not None and not isinstance(policy, SlidePolicy):
            raise SlidingWindowError(f"policy must be an mta SlidePolicy, got {type(policy).__name__}")
        if engine not in ENGINE_CHOICES:
            raise SlidingWindowError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINE_CHOICES)}")
        if on_bad_row not in BAD_ROW_RULES:
            raise SlidingWindowError(f"on_bad_row must be one of {BAD_ROW_RULES}, got {on_bad_row!r}")
        for option, size in (("buffer_size", buffer_size), ("cache_size", cache_size)):
            if type(size) is not int or size < 1:
                raise SlidingWindowError(f"{option} must be a positive int (pairs per level), got {size!r}")
        if isinstance(aggs, str):
            aggs = [a.strip() for a in aggs.split(",") if a.strip()]
        if not aggs:
            raise SlidingWindowError("aggs= needs at least one aggregation, e.g. ['max', 'mean']")
        resolved = [_resolve_agg(a, integral) for a in aggs]
        names = [name for name, _, _ in resolved]
        if len(set(names)) != len(names):
            raise SlidingWindowError(f"aggregation output columns must be unique, got {names}")
        return cls(key=key, time=time, value=value, aggs=resolved, range=range, rows=rows,
                   policy=policy, store=absolute_store_url(store), store_options=dict(store_options or {}),
                   engine=engine, buffer_size=buffer_size, cache_size=cache_size,
                   on_bad_row=on_bad_row, namespace=namespace)

    @property
    def mta_engine(self) -> type:
        """The MTA class for windows that run through one (``auto`` and
        ``columnar`` mean the Amortized MTA there)."""
        return ENGINES.get(self.engine, AmortizedMTA)

    @property
    def output_columns(self) -> list[tuple[str, str]]:
        cols = [(name, spark_type) for name, _, spark_type in self.aggs]
        if self.on_bad_row == "flag":
            cols.append(("rejected", "string"))
        return cols

    def slide_policy(self) -> SlidePolicy:
        if self.range is not None:
            return policies.TimeRange(self.range, time=_time_of)
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
        """The store's name for one key's window, ``<namespace>/<run>/<key!r>``:
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
        return f"{aggs}; {slide}; {self.engine}; key={self.key}, time={self.time}, value={self.value}"

    def storage_options(self, key: Any, run: str, *, resume: bool | int = False) -> dict:
        """The engine options that put one key's window in the pooled store."""
        if not self.store:
            return {}
        return dict(store=pooled_store(self.store, self.store_options), window_id=self.window_id(key, run),
                    buffer_size=self.buffer_size, cache_size=self.cache_size, resume=resume)

    def open_window(self, key: Any, run: str, *, resume: bool | int = False) -> Window:
        """A fresh or resumed window for one key, in the pooled store if any."""
        options = self.storage_options(key, run, resume=resume)
        return Window(self.aggregator(), self.slide_policy(), engine=self.mta_engine, **options)

    def reject(self, problem: str, key, t, v) -> None:
        """A row cannot enter its window: raise naming it, unless flagged."""
        if self.on_bad_row != "flag":
            raise SlidingWindowError(
                f"row rejected ({problem}): {self.key}={key!r}, {self.time}={t!r}, "
                f"{self.value}={v!r}; fix the input or pass on_bad_row='flag'")


def _time_of(record):
    return record[0]


def _value_of(record):
    return record[1]


def _resolve_agg(agg, integral: bool) -> tuple[str, Aggregator, str]:
    """``"max"`` or ``(column, Aggregator[, spark type])``."""
    if isinstance(agg, str):
        name = agg.strip().lower()
        if name not in READY:
            raise SlidingWindowError(
                f"unknown aggregation {agg!r}; ready ones are {', '.join(READY)}, "
                "or pass (column, Aggregator, spark_type) for your own")
        typed = "long" if name == "count" or (integral and name in VALUE_TYPED) else "double"
        return name, aggregators.get(name), typed
    if isinstance(agg, tuple) and len(agg) in (2, 3) and isinstance(agg[1], Aggregator):
        return agg[0], agg[1], agg[2] if len(agg) == 3 else "double"
    raise SlidingWindowError(
        f"an aggregation is a name such as 'max' or a tuple (column, Aggregator, spark_type), got {agg!r}")


def absolute_store_url(url: str | None) -> str | None:
    """File stores as absolute ``file://`` URLs: executors may not share the
    driver's working directory.  Other URLs unchanged."""
    if not url:
        return url
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*):", url)
    if m is None or m.group(1).lower() == "file" or (len(m.group(1)) == 1 and "://" not in url):
        from stores.errors import StoreError
        from stores.sqlite_store import parse_file_url

        try:
            return "file://" + parse_file_url(url)
        except StoreError as e:
            raise SlidingWindowError(f"bad store URL {url}: {e}") from None
    return url


#: Longest readable window id, in UTF-8 bytes (stores take 160).
WINDOW_ID_BYTES = 120
#: What a key's repr cannot carry into a store name as is.
_UNSAFE_IN_IDS = re.compile(r"[{}\x00-\x1f\x7f]|[\ud800-\udfff]")


# -- one pooled store per executor process ------------------------------------
_pool: dict = {}
_pool_lock = threading.Lock()


def pooled_store(url: str, options: dict):
    """The process's store for ``url`` (one connection pool per executor process)."""
    import stores

    key = (url, tuple(sorted(options.items())))
    with _pool_lock:
        store = _pool.get(key)
        if store is None or store.closed:
            store = _pool[key] = stores.open_store(url, **options)
        return store


# -- rows ---------------------------------------------------------------------
def check_row(key, t, v, last_time) -> str | None:
    """Why a row cannot enter its key's window, or ``None``."""
    # null and NaN read the same: pandas (streaming) turns null doubles into NaN
    if key is None or (isinstance(key, float) and math.isnan(key)):
        return "null or NaN key"
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "null or NaN time"
    if isinstance(t, float) and math.isinf(t):
        return "infinite time"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "null or NaN value"
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return f"value of type {type(v).__name__}, not a number"
    if last_time is not None and t < last_time:
        return f"time {t} is older than the key's newest time {last_time} (out of order)"
    return None


def lift_problem(exc: BaseException) -> str:
    """A rejected row's reason when the aggregations cannot take its value."""
    cause = exc.__cause__ if isinstance(exc, LiftError) and exc.__cause__ is not None else exc
    return f"the aggregations cannot take the value: {type(cause).__name__}: {cause}"


def push_rows(spec: WindowSpec, window: Window, key, times, values, last_time, out: list[list], shown=None):
    """Push one key's rows, in order, appending each row's results to ``out``
    (one list per output column).  Returns the newest time pushed.
    ``shown``: the rows' times as the input has them, for messages."""
    flag = spec.on_bad_row == "flag"
    naggs = len(spec.aggs)
    for i, (t, v) in enumerate(zip(times, values)):
        problem = check_row(key, t, v, last_time)
        if problem is None:
            try:
                results = window.push((t, v))
            except LiftError as exc:  # raised before the window changed
                problem = lift_problem(exc)
        if problem is not None:
            spec.reject(problem, key, t if shown is None else shown[i], v)
            for column in out[:naggs]:
                column.append(None)
            out[naggs].append(problem)
            continue
        for column, result in zip(out, results):
            column.append(result)
        if flag:
            out[naggs].append(None)
        last_time = t
    return last_time


# -- batch: rows sorted by time ----------------------------------------------------
class SortedWindow:
    """One key's window in a batch job, whose rows come sorted by time.

    With the order known, which rows leave is known too, so the engine runs
    the aggregation alone, without the policy's dimension in its monoid: the
    rows of a batch go through ``engine.slide``, which inserts each row,
    evicts exactly the rows that left (singly in amortized O(1), or
    O(log n) for any number) and queries.  For ``rows=N`` the count decides; for
    ``range=`` a FIFO of the rows' times does (a level queue, in the store
    next to the engine's levels when there is a store, so the process still
    holds O(log n) of the window).  Custom policies use :class:`mta.Window`.
    """

    def __init__(self, spec: WindowSpec, key: Any, run: str) -> None:
        aggregator = spec.value_aggregator()
        self._lift, self._lower = aggregator.lift, aggregator.lower  # skipped when the identity
        self.width = len(spec.aggs)
        options = spec.storage_options(key, run)
        self.engine = spec.mta_engine(aggregator.monoid, None, **options)
        self.range, self.rows = spec.range, spec.rows
        self._times_storage = None
        self.times = None
        if self.range is not None:
            if options:
                self._times_storage = options["store"].open_window(
                    options["window_id"] + "~times", engine="TimeFIFO", mutable_tail=0,
                    buffer_size=spec.buffer_size, cache_size=spec.cache_size, resume=False)
                self.times = self._times_storage.new_level(0, 0)
            else:
                self.times = MemoryLevelQueue(0, 0)

    def lift(self, values: Sequence) -> tuple[list, list | None]:
        """The values lifted into the aggregations' monoid, and per value the
        reason it cannot be (``None`` for every value that can; ``None``
        instead of the list when all can)."""
        lift = self._lift
        if lift is identity_function:
            return list(values), None
        lifted, problems = [], None
        for i, v in enumerate(values):
            try:
                lifted.append(lift(v))
            except Exception as exc:  # noqa: BLE001 - the row is rejected with the reason
                problems = problems or [None] * len(values)
                problems[i] = lift_problem(exc)
                lifted.append(None)
        return lifted, problems

    def push(self, times: Sequence[float], lifted: Sequence) -> list[list]:
        """Push rows in order, their values lifted by :meth:`lift`; one list of
        results per aggregation."""
        results = self.engine.slide(lifted, self._evictions(times))
        if self._lower is not identity_function:
            results = list(map(self._lower, results))
        if self.width == 1:
            return [results]
        return [list(column) for column in zip(*results)] if results else [[] for _ in range(self.width)]

    def _evictions(self, times: Sequence[float]) -> list[int]:
        """How many of the oldest rows leave after each row's insert."""
        if self.rows is not None:
            room = max(self.rows - len(self.engine), 0)
            n = len(times)
            return [0] * min(room, n) + [1] * max(n - room, 0)
        fifo, span = self.times, self.range
        add_time = fifo.append
        out = []
        append = out.append
        for t in times:
            add_time(t)
            cutoff = t - span
            if fifo[fifo.lo] <= cutoff:
                gone = leading_at_most(fifo, cutoff)
                fifo.lo += gone
                append(gone)
            else:
                append(0)
        return out

    def close(self) -> None:
        """The key is done: delete its data from the store."""
        self.engine.close(delete=True)
        if self._times_storage is not None:
            self._times_storage.close([self.times], delete=True)


def leading_at_most(q, cutoff) -> int:
    """How many of the oldest elements of the non-decreasing level queue
    ``q`` are ``<= cutoff``: an exponential then binary search from the
    head, O(log k) reads for k elements."""
    lo, hi = q.lo, q.hi
    if lo == hi or q[lo] > cutoff:
        return 0
    good, step = lo, 1  # q[good] <= cutoff
    while True:
        probe = good + step
        if probe >= hi:
            bad = hi
            break
        if q[probe] > cutoff:
            bad = probe
            break
        good, step = probe, step << 1
    while bad - good > 1:
        mid = (good + bad) >> 1
        if q[mid] <= cutoff:
            good = mid
        else:
            bad = mid
    return good + 1 - lo

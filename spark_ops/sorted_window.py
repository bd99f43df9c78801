"""The batch window of the MTA engines, for rows that come sorted by time."""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Sequence

from mta import MemoryLevelQueue
from mta.fused import fused_names
from mta.monoid import identity_function

from . import aggregations, frames, rows
from .key_window import RowWindow
from .spec import WindowSpec
from .values import python_values


def result_columns(aggregator, width: int):
    """``columns(results)``: the engine's results as one lowered list per
    aggregation.  Several aggregations are their product
    (:meth:`WindowSpec.value_aggregator`) or one fused aggregator: a
    product's parts' lowers run column by column, no tuple per row; other
    results are lowered, and split when there are several aggregations.  One
    aggregation's results (a product of the user's own included) stay one
    column."""
    if width > 1 and aggregator.parts:
        getters = [(itemgetter(i), a.lower) for i, a in enumerate(aggregator.parts)]

        def by_part(results):
            return [list(map(get, results)) if lower is identity_function else list(map(lower, map(get, results)))
                    for get, lower in getters]
        return by_part
    lower = aggregator.lower

    def split(results):
        if lower is not identity_function:
            results = list(map(lower, results))
        if width == 1:
            return [results]
        return [list(column) for column in zip(*results)] if results else [[] for _ in range(width)]
    return split


class SortedWindow(RowWindow):
    """One key's window in a batch job, whose rows come sorted by time.

    With the order known, which rows leave is known too, so the engine runs
    the aggregation alone, without the policy's dimension in its monoid: the
    rows of a batch go through ``engine.slide``, which inserts each row,
    evicts exactly the rows that left (singly in amortized O(1), or
    O(log n) for any number) and queries.  For ``rows=N`` the count decides; for
    ``range=`` a FIFO of the rows' times does (a level queue, in the store
    next to the engine's levels when there is a store, so the process still
    holds O(log n) of the window).  Custom policies use
    :class:`spark_ops.windows.PolicyWindow`.

    With a store, the window starts in executor memory (the compiled core)
    and moves to the store, before the push that would take it past
    :attr:`WindowSpec.spill_rows` rows (``buffer_size + cache_size``: a window
    in the store holds that many pairs per level in memory anyway).  A
    batch window is never resumed, so below that size the store would only
    add writes; a key whose window never grows past it never opens the
    store.  Moving copies the window's lifted values, O(spill_rows), once.
    """

    def __init__(self, spec: WindowSpec, key: Any, run: str) -> None:
        super().__init__(spec, key)
        aggregator = spec.value_aggregator()
        self._lift = aggregator.lift  # skipped when the identity
        self._columns = result_columns(aggregator, len(spec.aggs))
        self._fused = fused_names(aggregator)
        self._floating = False  # the value column holds floats: fused results lower as arrays
        self.width = len(spec.aggs)
        self._monoid, self._run = aggregator.monoid, run
        self.engine = spec.mta_engine(aggregator.monoid, None)
        self.range, self.rows = spec.range, spec.rows
        self.times = None
        if self.range is not None:
            self._edge = frames.range_edge(spec.range, spec.frame, spec.micros)
            self.times = MemoryLevelQueue(0, 0)
        self._in_store = False
        self._fifo_chunk = 1 << 30
        # while in memory with a store named: the window's lifted values (from
        # _head on), what the store's engine starts from if the window outgrows memory
        self._spill_at = spec.spill_rows if spec.store else None
        self._kept: list | None = [] if spec.store else None
        self._head = 0

    def aggregate(self, times, values, problems: Sequence | None) -> tuple[list, Sequence | None]:
        import pyarrow as pa

        self._floating = pa.types.is_floating(values.type)
        times, values = times.to_pylist(), python_values(values)
        lifted, lift_problems = self.lift(values)
        if lift_problems is not None:
            problems = [p or q for p, q in zip(problems or lift_problems, lift_problems)]
        if problems is not None and any(problems):
            good = [i for i, p in enumerate(problems) if p is None]
            times, lifted = [times[i] for i in good], [lifted[i] for i in good]
        return self.slide(times, lifted), problems

    def lift(self, values: Sequence) -> tuple[list, list | None]:
        """The values lifted into the aggregations' monoid, and per value the
        reason it cannot be (``None`` for every value that can; ``None``
        instead of the list when all can).  When one cannot, the values are
        lifted again one by one to find which (a lift is a function of its
        value)."""
        lift = self._lift
        if lift is identity_function:
            return list(values), None
        try:
            return list(map(lift, values)), None
        except Exception:  # noqa: BLE001 - some value cannot be lifted: find which, row by row
            pass
        lifted, problems = [], None
        for i, v in enumerate(values):
            try:
                lifted.append(lift(v))
            except Exception as exc:  # noqa: BLE001 - the row is rejected with the reason
                problems = problems or [None] * len(values)
                problems[i] = rows.cannot_lift(exc)
                lifted.append(None)
        return lifted, problems

    def slide(self, times: Sequence[float], lifted: Sequence) -> list[list]:
        """Push rows in order, their values lifted by :meth:`lift`; one list of
        results per aggregation."""
        evictions = self._evictions(times)
        if self._kept is not None:
            self._keep(lifted, evictions)
        results = self.engine.slide(lifted, evictions)
        if self._fused is not None and self._floating:
            return aggregations.fused_arrow_columns(self._fused, results)
        return self._columns(results)

    def _keep(self, lifted: Sequence, evictions: Sequence[int]) -> None:
        """Before an in-memory push: move the window to the store if it would
        grow past the spill size during the push, else note the push in
        :attr:`_kept`.  O(rows pushed) in C (cumulative sum, list extend),
        plus the move, O(spill size), once."""
        import numpy as np

        if len(lifted):
            growth = np.cumsum(1 - np.asarray(evictions, dtype=np.int64))
            if len(self.engine) + int(growth.max()) > self._spill_at:
                self._spill()
                return
        kept = self._kept
        kept.extend(lifted)
        self._head += sum(evictions)
        if self._head > 1024 and 2 * self._head > len(kept):
            del kept[:self._head]
            self._head = 0

    def _spill(self) -> None:
        """Move the window into the store: a store engine built from the
        kept values (inserted in order, no query), the times FIFO copied.
        O(window) store-engine inserts."""
        spec = self.spec
        options = spec.storage_options(self.key, self._run)
        engine = spec.mta_engine(self._monoid, None, **options)
        insert = engine.insert
        for v in self._kept[self._head:]:
            insert(v)
        if self.times is not None:
            fifo = options["store"].open_fifo(options["window_id"] + "~times", buffer_size=spec.buffer_size,
                                             cache_size=spec.cache_size)
            old, step = self.times, 2 * spec.buffer_size  # a buffer at a time, as _evictions extends it
            for lo in range(old.lo, old.hi, step):
                fifo.extend([old[i] for i in range(lo, min(lo + step, old.hi))])
            self.times = fifo
        self.engine = engine
        self._kept = None
        self._in_store = True
        self._fifo_chunk = 2 * spec.buffer_size

    def _evictions(self, times: Sequence[float]) -> list[int]:
        """How many of the oldest rows leave after each row's insert.

        For ``range=``: the rows of earlier pushes that leave during the
        push are found by one O(log k) search from the head of the times
        FIFO (k rows in it) for the last row's cutoff, read together, and
        each row's cutoff is found among them by a binary search (NumPy), as
        are the new rows' cutoffs among the new times; only the new rows
        still in the window at the end enter the FIFO (the others never need
        their times again).  O(n log n + g) for n rows and g earlier rows
        leaving: each row's time is read from the FIFO once, when it leaves."""
        if self.rows is not None:
            room = max(self.rows - len(self.engine), 0)
            n = len(times)
            return [0] * min(room, n) + [1] * max(n - room, 0)
        import numpy as np

        fifo = self.times
        at = np.asarray(times, dtype=np.float64)
        n = len(at)
        cutoffs = self._edge(at)
        earlier = np.zeros(n, dtype=np.int64)  # rows of earlier pushes gone by each row's cutoff
        if fifo.lo < fifo.hi and n:
            reach = np.maximum.accumulate(cutoffs)  # the FIFO's head only moves forward
            gone = leading_at_most(fifo, float(reach[-1]))
            if gone:  # the rows leaving, read together: each row's time is read once, when it leaves
                leaving = np.asarray(fifo.span(fifo.lo, fifo.lo + gone), dtype=np.float64)
                earlier = np.searchsorted(leaving, reach, side="right")
                fifo.lo += gone
        # a row's cutoff is below its time, but not below a later row of equal time: only rows inserted count
        new = np.minimum(np.searchsorted(at, cutoffs, side="right"), np.arange(1, n + 1))
        total = earlier + new
        if n:
            staying = times[int(new[-1]):] if isinstance(times, list) else at[int(new[-1]):].tolist()
            step = self._fifo_chunk  # a FIFO in a store flushes a buffer at a time: memory stays bounded
            for lo in range(0, len(staying), step):
                fifo.extend(staying[lo:lo + step])
        return np.diff(total, prepend=0).tolist()

    def close(self) -> None:
        """The key is done: delete its data from the store (if it moved there)."""
        if self._in_store:
            self.engine.close(delete=True)
            if self.times is not None:
                self.times.close(delete=True)


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


class SizesSortedWindow(SortedWindow):
    """Several sizes of one key's batch window in one pass: an aggregating
    FIFO per size over one shared copy of the rows
    (:class:`mta.multi.sizes_two_stacks.SizesTwoStacks`: the rows' lifted
    values and their times in FIFOs, a B-Int over blocks of ``2 *
    cache_size`` rows, each size's front a few entries per block in a FIFO
    of its own, all in the store when there is a store).  Per row and size:
    amortized three monoid calls; the rows and times are written once
    whatever the number of sizes."""

    def __init__(self, spec: WindowSpec, key: Any, run: str) -> None:
        RowWindow.__init__(self, spec, key)
        from mta.multi.sizes_two_stacks import SizesTwoStacks

        aggregator = spec.value_aggregator()
        self._lift = aggregator.lift
        self._columns = result_columns(aggregator, len(spec.aggs))
        self.width = len(spec.aggs)
        self.sizes = spec.size_values
        self.range, self.rows = spec.range, spec.rows
        options = spec.storage_options(key, run)
        self._in_store = bool(options)
        self._fifos: list = []
        levels = {}
        if options:
            store, window_id = options["store"], options["window_id"]
            self._storage = store.open_window(window_id, engine="BInt", mutable_tail=0,
                                              buffer_size=spec.buffer_size, cache_size=spec.cache_size)
            levels["new_level"] = self._storage.new_level

            def new_fifo(name: str):
                fifo = store.open_fifo(f"{window_id}~{name}", buffer_size=spec.buffer_size,
                                       cache_size=spec.cache_size)
                self._fifos.append(fifo)
                return fifo

            levels["new_fifo"] = new_fifo
        else:
            self._storage = None
        if self.range is not None:
            self._edges = [frames.range_edge(size, spec.frame, spec.micros) for size in self.sizes]
            self.stacks = SizesTwoStacks(aggregator.monoid, len(self.sizes), tagged=True,
                                         chunk=2 * spec.cache_size, **levels)
        else:
            self.stacks = SizesTwoStacks(aggregator.monoid, len(self.sizes), counts=list(self.sizes),
                                         chunk=2 * spec.cache_size, **levels)

    def slide(self, times: Sequence[float], lifted: Sequence) -> list[list]:
        if self.range is None:
            by_size = self.stacks.slide(lifted)
        else:
            import numpy as np

            at = np.asarray(times, dtype=np.float64)
            by_size = self.stacks.slide(lifted, times, [edge(at).tolist() for edge in self._edges])
        split = [self._columns(results) for results in by_size]
        # columns: aggregation-major, then size (as spec.columns)
        return [split[s][a] for a in range(self.width) for s in range(len(self.sizes))]

    def close(self) -> None:
        """The key is done: delete its data from the store."""
        if self._storage is not None:
            self._storage.close(self.stacks.blocks.levels, delete=True)
        for fifo in self._fifos:
            fifo.close(delete=True)

"""The batch window of the MTA engines, for rows that come sorted by time."""

from __future__ import annotations

from typing import Any, Sequence

from mta import MemoryLevelQueue
from mta.monoid import identity_function

from . import frames, rows
from .key_window import RowWindow
from .spec import WindowSpec
from .values import python_values


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
    """

    def __init__(self, spec: WindowSpec, key: Any, run: str) -> None:
        super().__init__(spec, key)
        aggregator = spec.value_aggregator()
        self._lift, self._lower = aggregator.lift, aggregator.lower  # skipped when the identity
        self.width = len(spec.aggs)
        options = spec.storage_options(key, run)
        self.engine = spec.mta_engine(aggregator.monoid, None, **options)
        self.range, self.rows = spec.range, spec.rows
        self.times = None
        if self.range is not None:
            self._edge = frames.range_edge(spec.range, spec.frame)
            self.times = (options["store"].open_fifo(options["window_id"] + "~times", buffer_size=spec.buffer_size,
                                                   cache_size=spec.cache_size)
                          if options else MemoryLevelQueue(0, 0))
        self._in_store = bool(options)

    def aggregate(self, times, values, problems: Sequence | None) -> tuple[list, Sequence | None]:
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
                problems[i] = rows.cannot_lift(exc)
                lifted.append(None)
        return lifted, problems

    def slide(self, times: Sequence[float], lifted: Sequence) -> list[list]:
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
        fifo, edge = self.times, self._edge
        add_time = fifo.append
        out = []
        append = out.append
        for t in times:
            add_time(t)
            cutoff = edge(t)
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
        if self._in_store and self.times is not None:
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
    """Several sizes of one key's batch window from one window: the rows'
    lifted values in B-Int's level queues (:class:`mta.multi.bint.BInt`, in
    the store next to the times' FIFO when there is a store), which answer
    any range of the live rows.  The largest size decides what is evicted;
    each size keeps the position where its window starts and its result is
    the range from there to the row.  Per row: amortized O(1) monoid calls
    to append, O(log W) per size to answer, W the rows of the window."""

    def __init__(self, spec: WindowSpec, key: Any, run: str) -> None:
        RowWindow.__init__(self, spec, key)
        from mta.multi.bint import BInt

        aggregator = spec.value_aggregator()
        self._lift, self._lower = aggregator.lift, aggregator.lower
        self._identity = aggregator.monoid.identity
        self.width = len(spec.aggs)
        self.sizes = spec.size_values
        self.range, self.rows = spec.range, spec.rows
        options = spec.storage_options(key, run)
        self._in_store = bool(options)
        if options:
            store, window_id = options["store"], options["window_id"]
            self._storage = store.open_window(window_id, engine="BInt", mutable_tail=0,
                                              buffer_size=spec.buffer_size, cache_size=spec.cache_size)
            self.bint = BInt(aggregator.monoid, new_level=self._storage.new_level)
        else:
            self._storage = None
            self.bint = BInt(aggregator.monoid)
        self.times = None
        if self.range is not None:
            self._edges = [frames.range_edge(size, spec.frame) for size in self.sizes]
            self.times = (store.open_fifo(window_id + "~times", buffer_size=spec.buffer_size,
                                          cache_size=spec.cache_size)
                          if options else MemoryLevelQueue(0, 0))
        self._starts = [0] * len(self.sizes)  # where each size's window starts (absolute positions)

    def slide(self, times: Sequence[float], lifted: Sequence) -> list[list]:
        bint, starts, lower = self.bint, self._starts, self._lower
        fifo = self.times
        widest = max(range(len(self.sizes)), key=self.sizes.__getitem__)
        columns = [[] for _ in range(self.width * len(self.sizes))]
        for t, v in zip(times, lifted):
            bint.append(v)
            hi = bint.hi
            if self.rows is not None:
                for s, n in enumerate(self.sizes):
                    starts[s] = max(hi - n, starts[s])
            else:
                fifo.append(t)
                for s, edge in enumerate(self._edges):
                    cutoff, lo = edge(t), starts[s]
                    if s == widest:  # the largest window: search (O(log k) reads)
                        if fifo[lo] <= cutoff:
                            fifo.lo = lo
                            lo += leading_at_most(fifo, cutoff)
                    else:  # inside the window, near its newest rows: step
                        while lo < hi and fifo[lo] <= cutoff:
                            lo += 1
                    starts[s] = lo
            results = [lower(bint.range(lo, hi) if lo < hi else self._identity) for lo in starts]
            for s, result in enumerate(results):
                if self.width == 1:
                    columns[s].append(result)
                else:
                    for a in range(self.width):
                        columns[a * len(self.sizes) + s].append(result[a])
            oldest = min(starts)
            bint.evict(oldest)
            if fifo is not None:
                fifo.lo = oldest
        return columns

    def close(self) -> None:
        """The key is done: delete its data from the store."""
        if self._storage is not None:
            self._storage.close(self.bint.levels, delete=True)
        if self._in_store and self.times is not None:
            self.times.close(delete=True)

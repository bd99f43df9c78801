"""When each query answers: the report schedule of :class:`~.shared.SharedWindows`.

The queries of one executor (a shared tree, or a separate query's engine)
that ask for the same windows -- equal width, slide and lag, and the same
``lower`` -- form one :class:`Spec`: its window is looked up once and each
query gets its own :class:`~.query.Result` of the same value.

Periodic specs wait in a heap ordered by the end of their next window (then
by their first query's rank, so that reports come out nearly sorted), so
an element visits only the specs it completes: O(log specs) per reported
window instead of a pass over every query per element.  A spec's next end
only grows (windows are reported in order), so the heap entry of a spec is
exact between reports; a flush, which may move every spec, rebuilds it.
"""

from __future__ import annotations

from fractions import Fraction
from heapq import heapify, heapreplace

from ..markers import EMPTY
from ..monoid import identity_function
from .query import Result

_new = tuple.__new__


def next_multiple(x, s):
    """The smallest multiple of ``s`` strictly greater than ``x`` (exact)."""
    if not (isinstance(x, int) and isinstance(s, int)):
        x = Fraction(x)
    return (x // s + 1) * s


class Spec:
    """The queries of one executor with the same window; ``members`` are
    ``(rank, name)`` in the queries' order, ``query`` the first of them (its
    name selects a tree's per-range state)."""

    __slots__ = ("ex", "query", "members", "periodic", "by_rows", "slide", "lag", "width", "span", "lower",
                 "identity", "next", "suffix", "tree_spec")

    def __init__(self, ex, query, rank: int) -> None:
        """O(1)."""
        self.ex = ex
        self.query = query
        self.members = [(rank, query.name)]
        self.periodic = query.periodic
        self.by_rows = query.by_rows
        self.slide = query.exact_slide
        self.lag = query.exact_lag
        self.width = query.exact_width
        self.span = self.lag + self.width
        lower = query.aggregator.lower
        self.lower = None if lower is identity_function else lower  # None: the value is the answer
        self.identity = query.aggregator.monoid.identity
        self.next = None  # end of the next unreported window (periodic)
        # a periodic window without lag ends past every key when it is
        # reported: a tree answers it with one binary search (Tree.suffix)
        fast = self.periodic and self.lag == 0 and hasattr(ex, "suffix") and not ex.holistic
        self.suffix = ex.suffix if fast else None
        self.tree_spec = ex.spec[query.name] if fast else None

    def report(self, threshold, out: list) -> None:
        """Report the windows ending at ``e <= threshold`` (every window
        holding elements when None) that hold elements; skips runs of empty
        windows by jumping to the next element's first window.  One lookup
        per reported window, plus one per run of empty windows; one
        ``lower`` per window and one Result per member."""
        e = self.next
        if e is None:
            return
        ex, q, members, lower = self.ex, self.query, self.members, self.lower
        s, lag, w = self.slide, self.lag, self.width
        window, suffix, tree_spec = ex.window, self.suffix, self.tree_spec
        rows = self.by_rows
        while threshold is None or e <= threshold:
            if suffix is not None:
                value = suffix(e - w, tree_spec)
            else:
                value = window(q, e - lag - w, e - lag, True)
            if value is not EMPTY:
                end = e - 1 if rows else q.end_value(e)
                v = value if lower is None else lower(value)
                for rank, name in members:
                    out.append((end, rank, _new(Result, (name, end, v))))
                e += s
                continue
            cap = None if threshold is None else next_multiple(threshold, s)
            x = ex.first_key(e - lag - w)
            if x is None:
                if cap is not None:
                    e = cap
                break
            e = max(e + s, next_multiple(x + lag, s))
            if cap is not None and e > cap:
                e = cap
        self.next = e

    def answer(self, key, out: list) -> None:
        """A per-element spec's window ending at ``key``: one lookup, one
        ``lower``, one Result per member."""
        value = self.ex.window(self.query, key - self.span, key - self.lag, False)
        if value is EMPTY:
            value = self.identity
        v = value if self.lower is None else self.lower(value)
        for rank, name in self.members:
            out.append((key, rank, _new(Result, (name, key, v))))

    def floor(self, last):
        """The smallest key a future window (or lookup) of the spec may hold,
        ``last`` the newest key.  O(1), no monoid call."""
        if not self.periodic:
            return last - self.span
        e = next_multiple(last, self.slide)
        if self.next is not None and self.next < e:
            e = self.next
        return e - self.span


class Schedule:
    """The specs of every executor, and the heaps of the periodic ones (one
    for time queries, reported before an element enters; one for rows
    queries, reported after)."""

    def __init__(self, executors, order: dict) -> None:
        """Group each executor's queries into specs; O(queries)."""
        self.specs: list = []
        for ex in executors:
            by_window: dict = {}
            ex.specs = []
            for q in ex.queries:
                # _float: a window given in floats reports float ends
                key = (q.periodic, q.exact_width, q.exact_slide, q.exact_lag, q.aggregator.lower, q._float)
                spec = by_window.get(key)
                if spec is None:
                    spec = by_window[key] = Spec(ex, q, order[q.name])
                    ex.specs.append(spec)
                    self.specs.append(spec)
                else:
                    spec.members.append((order[q.name], q.name))
            ex.per_element_specs = [s for s in ex.specs if not s.periodic]
        self.per_element = [s for s in self.specs if not s.periodic]
        self._time_heap: list = []
        self._rows_heap: list = []

    def start(self, index: int, t) -> None:
        """At the first element (index ``index``, time ``t``): each periodic
        spec's first window is the one holding it.  O(specs)."""
        for spec in self.specs:
            if spec.periodic:
                key = index if spec.by_rows else t
                spec.next = next_multiple(key + spec.lag, spec.slide)
        self._rebuild()

    def _rebuild(self) -> None:
        """Heaps from the specs' next ends; O(specs)."""
        self._time_heap = [(s.next, s.members[0][0], s) for s in self.specs
                           if s.periodic and not s.by_rows and s.next is not None]
        self._rows_heap = [(s.next, s.members[0][0], s) for s in self.specs
                           if s.periodic and s.by_rows and s.next is not None]
        heapify(self._time_heap)
        heapify(self._rows_heap)

    def due(self, threshold, by_rows: bool, out: list) -> None:
        """Report every window ending at or before ``threshold`` of the time
        (or rows) specs; O(log specs) per spec that reports."""
        heap = self._rows_heap if by_rows else self._time_heap
        append = out.append
        while heap and heap[0][0] <= threshold:
            e, i, spec = heap[0]
            suffix = spec.suffix
            nxt = e + spec.slide
            if suffix is not None and nxt > threshold:
                # the common case, inlined: one window, ending past every key
                value = suffix(e - spec.width, spec.tree_spec)
                if value is not EMPTY:
                    end = e - 1 if spec.by_rows else spec.query.end_value(e)
                    lower = spec.lower
                    v = value if lower is None else lower(value)
                    for rank, name in spec.members:
                        append((end, rank, _new(Result, (name, end, v))))
                    spec.next = nxt
                    heapreplace(heap, (nxt, i, spec))
                    continue
            spec.report(threshold, out)
            heapreplace(heap, (spec.next, i, spec))

    def flush(self, until, out: list) -> None:
        """Report every periodic window ending at or before ``until`` (all
        holding elements when None); O(specs) plus the reports."""
        for spec in self.specs:
            if spec.periodic:
                threshold = None if until is None else (until + 1 if spec.by_rows else until)
                spec.report(threshold, out)
        self._rebuild()

    @staticmethod
    def floor(ex, last):
        """The smallest key a future window of ``ex``'s queries may hold.
        O(specs of ``ex``), no monoid call."""
        return min(spec.floor(last) for spec in ex.specs)

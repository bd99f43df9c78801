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

The window rules live in :class:`Spec` (:meth:`~Spec.first_end`,
:meth:`~Spec.ending_at`, :meth:`~Spec.answer`) and compute every bound
exactly from a key (:func:`~.query.exact`) and the exact window sizes, so
that a push, a flush, ``query(name)`` and the late test agree on each
window.  The executors hold float times as they are; while every key they
hold is a double, a per-element window's bounds after a float key are the
exact ones rounded down to doubles, found with float operations
(:func:`minus_down`): the same window, without Fraction arithmetic on
every push.
"""

from __future__ import annotations

import math
from heapq import heapify, heapreplace

from ..markers import EMPTY
from ..monoid import identity_function
from .query import Result, exact

_new = tuple.__new__


def as_double(x):
    """The float equal to the exact ``x``, or None when no double is."""
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if f == x else None


def is_double(key) -> bool:
    """Whether a key equals a double: a float, or an int of at most 53 bits
    (a Fraction may not).  :func:`minus_down`'s bounds hold for such keys."""
    return type(key) is float or (type(key) is int and -(1 << 53) <= key <= 1 << 53)


def minus_down(t: float, d: float):
    """The largest double at or below the exact ``t - d`` (two doubles), or
    None when the difference overflows.  The float difference and its
    rounding error (Knuth's TwoSum, exact in round-to-nearest) tell on
    which side of the exact difference the float one fell.  For any double
    ``k``, ``k > t - d`` exactly if and only if ``k > minus_down(t, d)``, and
    likewise for ``<=``."""
    s = t - d
    back = s - t
    err = (t - (s - back)) + (-d - back)
    if err != err:  # NaN: the difference (or its error term) overflowed
        return None
    if err < 0:
        s = math.nextafter(s, -math.inf)
    return None if s == -math.inf else s


def next_multiple(x, s):
    """The smallest multiple of ``s`` (exact) strictly greater than ``x``,
    computed exactly whatever real ``x`` is."""
    if type(x) is not int:
        x = exact(x)
    return (x // s + 1) * s


class Spec:
    """The queries of one executor with the same window; ``members`` are
    ``(rank, name)`` in the queries' order, ``query`` the first of them (its
    name selects a tree's per-range state)."""

    __slots__ = ("ex", "query", "members", "periodic", "by_rows", "slide", "lag", "width", "span", "lower",
                 "identity", "next", "suffix", "tree_spec", "span_f", "lag_f")

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
        self.span_f, self.lag_f = as_double(self.span), as_double(self.lag)  # None: not a double
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
        s, w, span = self.slide, self.width, self.span
        suffix, tree_spec = self.suffix, self.tree_spec
        rows = self.by_rows
        while threshold is None or e <= threshold:
            value = suffix(e - w, tree_spec) if suffix is not None else self.ending_at(e)
            if value is not EMPTY:
                end = e - 1 if rows else q.end_value(e)
                v = value if lower is None else lower(value)
                for rank, name in members:
                    out.append((end, rank, _new(Result, (name, end, v))))
                e += s
                continue
            cap = None if threshold is None else next_multiple(threshold, s)
            x = ex.first_key(e - span)
            if x is None:
                if cap is not None:
                    e = cap
                break
            e = max(e + s, self.first_end(x))
            if cap is not None and e > cap:
                e = cap
        self.next = e

    def first_end(self, key):
        """The end of the first periodic window holding ``key``: the first
        multiple of the slide past ``key + lag``, exactly."""
        return next_multiple(exact(key) + self.lag, self.slide)

    def ending_at(self, e):
        """The periodic window ``[e - lag - w, e - lag)``, unlowered (EMPTY
        when it holds nothing): one lookup."""
        return self.ex.window(self.query, e - self.span, e - self.lag, True)

    def answer(self, key, end, doubles: bool, out: list) -> None:
        """A per-element spec's window after ``key``, ``(key - lag - w, key
        - lag]`` exactly, reported with ``end`` (the element's own time, or
        its index): one lookup, one ``lower``, one Result per member.
        ``doubles``: every key the executor holds is a double, so that the
        bounds rounded down to doubles select the same keys."""
        a = None
        if doubles and type(key) is float and self.span_f is not None and self.lag_f is not None:
            a, b = minus_down(key, self.span_f), minus_down(key, self.lag_f)
        if a is None or b is None:
            if type(key) is not int:
                key = exact(key)
            a, b = key - self.span, key - self.lag
        value = self.ex.window(self.query, a, b, False)
        if value is EMPTY:
            value = self.identity
        v = value if self.lower is None else self.lower(value)
        for rank, name in self.members:
            out.append((end, rank, _new(Result, (name, end, v))))

    def floor(self, last):
        """The smallest key a future window (or lookup) of the spec may hold,
        ``last`` the newest key (exact).  O(1), no monoid call."""
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
        self.spec_of = {name: spec for spec in self.specs for _, name in spec.members}
        self._time_heap: list = []
        self._rows_heap: list = []

    def start(self, index: int, t) -> None:
        """At the first element (index ``index``, time ``t``): each periodic
        spec's first window is the one holding it.  O(specs)."""
        for spec in self.specs:
            if spec.periodic:
                spec.next = spec.first_end(index if spec.by_rows else t)
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
        if until is not None:
            until = exact(until)
        for spec in self.specs:
            if spec.periodic:
                threshold = None if until is None else (until + 1 if spec.by_rows else until)
                spec.report(threshold, out)
        self._rebuild()

    @staticmethod
    def floor(ex, last):
        """The smallest key a future window of ``ex``'s queries may hold,
        ``last`` the newest key (exact).  A Fraction floor is lowered to the
        double at or below it: evicting a little less is safe, and the float
        keys held compare with it fast.  O(specs of ``ex``), no monoid
        call."""
        floor = min(spec.floor(last) for spec in ex.specs)
        if type(floor) is int:
            return floor
        try:
            f = float(floor)
        except OverflowError:
            return floor
        return f if f <= floor else math.nextafter(f, -math.inf)

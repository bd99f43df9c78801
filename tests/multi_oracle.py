"""Brute-force oracle for many queries over one stream (mta.multi).

Computed directly from the window definitions of :mod:`mta.multi.query`,
independent of the package: every element is kept, every window is folded
from scratch with ``Aggregator.aggregate`` when it is reported.

* per-element query: after the element with key ``t`` (its time, or its
  0-based index for ``rows=``), the keys in ``(t - lag - w, t - lag]``,
  end ``t``, always reported;
* periodic query: for ``e = k * slide``, the keys in ``[e - lag - w, e -
  lag)``, reported if it holds an element: a time window when an element with
  time ``>= e`` arrives (before it is added) or at a flush, a rows window
  right after element ``e - 1`` (its end) or at a flush;
* ``flush(until)``: the windows with end ``<= until`` not reported yet;
  ``flush()`` every window holding elements; reported windows are final;
* ``late``: pushed elements with a key in a final window (``e <=
  done``) of some periodic query.

Every bound is computed from exact keys and sizes (ints, or the Fractions
of floats' binary values): a float time is the number it holds, and no
window edge is rounded.  A periodic time window's ``end`` is ``k * slide``,
a float (the exact product, rounded once) when the slide is one.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from mta.multi.query import Result


def _floor_div(x, s) -> int:
    return math.floor(Fraction(x) / Fraction(s))


def _x(x):
    """``x`` exactly: an int (any integral type), or the Fraction of its value."""
    if isinstance(x, numbers.Integral):
        return int(x)
    return Fraction(*x.as_integer_ratio())


class MultiOracle:
    def __init__(self, queries, time=None) -> None:
        self.queries = list(queries)
        self.time = time
        self.order = {q.name: i for i, q in enumerate(self.queries)}
        self.elements: list = []  # (time or None, index, raw)
        # periodic query -> every window with end e <= done[q] is final
        self.done = {q.name: None for q in self.queries if q.slide is not None}
        self.late = 0

    # -- helpers

    def _key(self, q, element):
        return element[1] if q.rows is not None else _x(element[0])

    def _reported_key(self, q, element):
        return element[1] if q.rows is not None else element[0]

    def _width(self, q):
        return _x(q.rows if q.rows is not None else q.range)

    def _members(self, q, lo, hi, left_closed, elements):
        out = []
        for el in elements:
            k = self._key(q, el)
            if (lo <= k < hi) if left_closed else (lo < k <= hi):
                out.append(el[2])
        return out

    def _periodic_value(self, q, k, elements):
        w, lag = self._width(q), _x(q.lag)
        e = k * _x(q.slide)
        return self._members(q, e - lag - w, e - lag, True, elements)

    def _end(self, q, k):
        if q.rows is not None:
            return k * q.slide - 1
        e = k * _x(q.slide)
        return float(e) if isinstance(q.slide, float) else e

    def _report_until(self, q, limit, elements, out) -> None:
        """Report q's windows with done < e <= limit holding elements; None:
        every window holding elements."""
        s, w, lag = _x(q.slide), self._width(q), _x(q.lag)
        if not elements:
            return
        first_key = self._key(q, elements[0])
        start_k = _floor_div(first_key + lag, s) + 1  # the first window able to hold an element
        if self.done[q.name] is not None:
            start_k = max(start_k, _floor_div(self.done[q.name], s) + 1)
        if limit is None:
            last_key = self._key(q, elements[-1])
            stop_k = _floor_div(last_key + lag + w, s) + 1
        else:
            stop_k = _floor_div(limit, s)
        last_reported = None
        for k in range(start_k, stop_k + 1):
            members = self._periodic_value(q, k, elements)
            if members:
                out.append((self._end(q, k), self.order[q.name],
                            Result(q.name, self._end(q, k), q.aggregator.aggregate(members))))
                last_reported = k * s
        if limit is None:
            if last_reported is not None:
                self.done[q.name] = max(self.done[q.name] if self.done[q.name] is not None else last_reported,
                                        last_reported)
        else:
            cur = self.done[q.name]
            self.done[q.name] = limit if cur is None else max(cur, limit)

    def _in_final_window(self, element) -> bool:
        """Whether some periodic query's final window holds the element:
        every window end ``e <= done`` from the element's key on is tried
        (a window ending at or before ``key + lag`` holds smaller keys)."""
        for q in self.queries:
            done = self.done.get(q.name)
            if done is None:
                continue
            key, w, lag, s = self._key(q, element), self._width(q), _x(q.lag), _x(q.slide)
            for k in range(_floor_div(key + lag, s), _floor_div(min(done, key + lag + w), s) + 1):
                if self._periodic_value(q, k, [element]):
                    return True
        return False

    # -- API

    def push(self, raw) -> list:
        t = self.time(raw) if self.time is not None else None
        index = len(self.elements)
        element = (t, index, raw)
        out: list = []
        for q in self.queries:
            if q.slide is not None and q.rows is None:
                self._report_until(q, t, self.elements, out)
        self.late += self._in_final_window(element)
        self.elements.append(element)
        for q in self.queries:
            if q.slide is not None and q.rows is not None:
                self._report_until(q, index + 1, self.elements, out)
            if q.slide is None:
                key, end, lag = self._key(q, element), self._reported_key(q, element), _x(q.lag)
                w = self._width(q)
                members = self._members(q, key - lag - w, key - lag, False, self.elements)
                out.append((end, self.order[q.name], Result(q.name, end, q.aggregator.aggregate(members))))
        out.sort(key=lambda r: (r[0], r[1]))
        return [r[2] for r in out]

    def flush(self, until=None) -> list:
        out: list = []
        for q in self.queries:
            if q.slide is not None:
                limit = None if until is None else (until + 1 if q.rows is not None else until)
                self._report_until(q, limit, self.elements, out)
        out.sort(key=lambda r: (r[0], r[1]))
        return [r[2] for r in out]

    def query(self, name):
        q = next(q for q in self.queries if q.name == name)
        if not self.elements:
            return q.aggregator.aggregate([])
        last = self._key(q, self.elements[-1])
        w = self._width(q)
        if q.slide is None:
            lag = _x(q.lag)
            members = self._members(q, last - lag - w, last - lag, False, self.elements)
        else:
            members = self._periodic_value(q, _floor_div(last, q.slide) + 1, self.elements)
        return q.aggregator.aggregate(members)

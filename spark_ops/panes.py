"""Periodic windows over any monoid: panes of the slide (:class:`PaneWindows`).

The windows of ``slide=`` (:mod:`spark_ops.periodic`) end at the multiples
of the slide ``S`` and hold ``[end - R, end)``, and ``S`` divides every
size ``R``: each window is the union of ``R / S`` consecutive *panes*
``[p S, (p + 1) S)``.  A key's rows, pushed in ``(time, arrival)`` order,
are combined into their pane as they come (one lift and one combine per
row, the monoid's order kept, so it need not be commutative); a window is
the panes inside it, combined oldest first.  Only the panes that a window
not yet emitted can hold are kept, O(largest R / S) values, which is what a
streaming key keeps in Spark's state between micro-batches
(:meth:`PaneWindows.state`, encoded by :mod:`stores.codec`, never
pickled: the state store is read back as data); nothing here imports
pyspark.

This is the path of aggregations the columnar kernels do not compute (a
user :class:`mta.Aggregator`, e.g. a non-commutative one) and of every
streaming ``slide=`` job; all of a job's aggregations and sizes go through
one product aggregator, so a row is lifted once.
"""

from __future__ import annotations

from mta import Aggregator, LiftError
from mta.markers import EMPTY
from stores.codec import decode, encode
from stores.errors import CorruptValue, FormatVersionError

#: The layout of :meth:`PaneWindows.state` (a change must be readable or refused).
STATE_FORMAT = 2


class PaneWindows:
    """One key's periodic windows of ``ranges_us`` (sizes, integer
    microseconds) every ``slide_us`` over ``aggregator``'s monoid.

    ``push(t_us, value)`` takes the rows in time order; ``emit(until_us)``
    gives the windows ending at or before ``until_us`` (every window left
    when ``None``) not emitted yet.  A window is emitted when its widest
    size holds a row; a smaller size's may hold none (its result is the
    aggregator's lowered identity)."""

    def __init__(self, aggregator: Aggregator, ranges_us: list[int], slide_us: int, state: bytes | None = None):
        if any(r % slide_us for r in ranges_us):
            raise ValueError(f"the slide {slide_us} us must divide every size {ranges_us}")
        self.aggregator = aggregator
        self.slide_us = slide_us
        self.widths = [r // slide_us for r in ranges_us]  # in panes
        self._widest = max(self.widths)
        self._lift, self._combine = aggregator.lift, aggregator.monoid.combine
        self._panes: list = []  # [pane index, combined value], by index
        self._done = None  # the pane index of the last window end emitted
        if state is not None:
            try:
                fmt, self._done, self._panes = decode(state)
            except (CorruptValue, FormatVersionError, TypeError, ValueError) as exc:
                raise ValueError(f"periodic window state this version cannot read ({exc}); restart the query "
                                 "from a new checkpoint location") from None
            if fmt != STATE_FORMAT:
                raise ValueError(f"periodic window state of format {fmt}, this version reads {STATE_FORMAT}; "
                                 "restart the query from a new checkpoint location")

    def state(self) -> bytes | None:
        """What a later :class:`PaneWindows` resumes from (``None`` when no
        window is left to emit).  The values are encoded by
        :func:`stores.codec.encode`, so a user aggregation's values are of
        its types or registered with :func:`stores.codec.register_codec`, as
        in a store's windows.  O(kept panes)."""
        if not self._panes:
            return None
        return encode((STATE_FORMAT, self._done, self._panes))

    def push(self, t_us: int, value) -> None:
        """One row, not older than the rows before it and after every window
        emitted (its end is past the row's time).  One lift, at most one
        combine.  A lift that raises leaves the windows unchanged and raises
        :class:`mta.LiftError` from it."""
        try:
            lifted = self._lift(value)
        except Exception as exc:
            raise LiftError.of(f"aggregator {self.aggregator.name}", value, exc) from exc
        p = t_us // self.slide_us
        panes = self._panes
        if panes and panes[-1][0] == p:
            panes[-1][1] = self._combine(panes[-1][1], lifted)
        else:
            panes.append([p, lifted])

    def next_end_us(self) -> int | None:
        """The end of the next window to emit (``None``: none left).  O(1)."""
        if not self._panes:
            return None
        first = self._panes[0][0] + 1
        if self._done is not None and self._done >= first:
            first = self._done + 1
        return first * self.slide_us

    def emit(self, until_us: int | None) -> tuple[list[int], list[list]]:
        """The windows ending at or before ``until_us`` (every one left when
        ``None``): their ends (microseconds) and, per window, the lowered
        results per size (the aggregator's result for each, in
        ``ranges_us`` order).  Panes no later window holds are dropped.
        O(m * R / S) combines for m windows of the widest size R."""
        panes, slide, widest = self._panes, self.slide_us, self._widest
        ends: list[int] = []
        results: list[list] = []
        if panes:
            last = None if until_us is None else until_us // slide  # the last end, in panes
            lower, identity = self.aggregator.lower, self.aggregator.monoid.identity
            i = 0  # the first pane a window ending at e may hold
            e = self.next_end_us() // slide
            while i < len(panes) and (last is None or e <= last):
                while i < len(panes) and panes[i][0] < e - widest:
                    i += 1
                if i == len(panes):
                    break
                if panes[i][0] >= e:  # no pane in this window: jump to the next pane's first one
                    e = panes[i][0] + 1
                    continue
                ends.append(e * slide)
                results.append([lower(identity if v is EMPTY else v) for v in self._window(i, e)])
                self._done = e
                e += 1
            if last is not None and (self._done is None or self._done < last):
                self._done = last  # every window up to until_us is out, emitted or empty
            floor = (self._done + 1) - widest if self._done is not None else None
            if floor is not None:
                keep = 0
                while keep < len(panes) and panes[keep][0] < floor:
                    keep += 1
                del panes[:keep]
        return ends, results

    def _window(self, i: int, e: int) -> list:
        """The combined values of each size's window ending at pane index
        ``e`` (EMPTY for none), folding the panes from ``e - 1`` back to
        ``i`` (newest first, so the monoid's order is kept: older values
        on the left).  O(R / S) combines."""
        panes, combine = self._panes, self._combine
        j = i
        while j < len(panes) and panes[j][0] < e:
            j += 1
        by_width = sorted(set(self.widths))
        acc, at = EMPTY, {}
        k = j - 1
        for w in by_width:
            while k >= i and panes[k][0] >= e - w:
                v = panes[k][1]
                acc = v if acc is EMPTY else combine(v, acc)
                k -= 1
            at[w] = acc
        return [at[w] for w in self.widths]

"""SlickDeque (Inv), multi-query (slickdeque-shein-edbt2018 section 3,
Algorithm 1; mqo-shein-chrysanthis-tkde section 2.2), for invertible
monoids: one running aggregate per distinct window specification (the
paper's ``answers`` map from range to answer), updated with ``+`` the
partials entering the range and ``-`` (``inverse``, removing from the front,
so order is kept) the partials leaving it.

Deviation: the paper's ranges are fixed numbers of partials, so every
running aggregate moves by one partial per slide.  Here a range is given by
positions (a time window holds a varying number of partials), so a running
aggregate moves from its last range to the asked one, and is rebuilt from
the partials when that is cheaper (the ranges no longer overlap, or it
would move backwards).
"""

from __future__ import annotations

from ..markers import EMPTY
from ._final import FinalAggregator, ListStore


class SlickDequeInv(FinalAggregator):
    """Append O(1), no monoid call.  A lookup costs one combine per partial
    that entered the range and one inverse per partial that left it since
    that specification's last lookup (2 per partial per distinct range when
    every range advances by one partial, the paper's Omega), at most
    ``hi - lo``.  Eviction removes the evicted partials from every running
    aggregate (one inverse each)."""

    NAME = "slickdeque-inv"
    NEEDS = "inverse"

    def __init__(self, monoid) -> None:
        """O(1)."""
        super().__init__(monoid)
        self._inverse = monoid.inverse
        self._partials = ListStore()
        self._runs: dict = {}  # spec -> [lo, hi, aggregate of [lo, hi) or EMPTY]

    def append(self, v) -> None:
        """O(1), no monoid call: the running aggregates move at lookups."""
        self._partials.append(v)
        self.hi += 1

    def _fold(self, lo: int, hi: int):
        """A running aggregate rebuilt: ``hi - lo - 1`` combines."""
        partials, combine = self._partials, self._combine
        if lo == hi:
            return EMPTY
        acc = partials[lo]
        for pos in range(lo + 1, hi):
            acc = combine(acc, partials[pos])
        return acc

    def range(self, lo: int, hi: int, spec=None):
        """Move ``spec``'s running aggregate to ``[lo, hi)`` (line 24 of Algorithm 1), or rebuild
        it when cheaper: O(partials entered + left), at most ``hi - lo``."""
        self._check(lo, hi)
        run = self._runs.get(spec)
        if run is None or lo < run[0] or hi < run[1] or (hi - run[1]) + (lo - run[0]) >= hi - lo:
            value = self._fold(lo, hi)
        else:
            partials, combine, inverse = self._partials, self._combine, self._inverse
            value = run[2]
            for pos in range(run[1], hi):
                v = partials[pos]
                value = v if value is EMPTY else combine(value, v)
            for pos in range(run[0], lo):
                value = inverse(value, partials[pos])
        self._runs[spec] = [lo, hi, value]
        return value

    def evict(self, lo: int) -> None:
        """Every running aggregate drops the partials before ``lo`` (so they
        can be forgotten): one inverse per partial and range."""
        if lo <= self.lo:
            return
        lo = min(lo, self.hi)
        partials, inverse = self._partials, self._inverse
        for spec, run in list(self._runs.items()):
            if run[0] >= lo:
                continue
            if run[1] <= lo:
                del self._runs[spec]
                continue
            value = run[2]
            for pos in range(run[0], lo):
                value = inverse(value, partials[pos])
            run[0], run[2] = lo, value
        self.lo = lo
        self._partials.drop_before(lo)

"""R-Int, running intervals (arasu-widom-vldb2004 section 3.2, Fig. 6), for
invertible ("subtractable") monoids.

Every range ``[lo, hi)`` is the difference of two running intervals: with
``P[i]`` the aggregate of the partials ``[0, i)``, its aggregate is
``inverse(P[hi], P[lo])`` (``inverse(a, b)`` removes ``b`` from the front
of ``a``, so order is kept for non-commutative groups).  Only the active
running intervals, ``P[lo..hi]``, are stored.

The running aggregates cover the whole stream, so values grow with it for
monoids whose values have a size (free groups), and float sums accumulate
rounding as in any running sum.
"""

from __future__ import annotations

from ..markers import EMPTY
from ._final import FinalAggregator, ListStore


class RInt(FinalAggregator):
    """Append 1 monoid call, lookup 1 inverse call, eviction O(1)."""

    NAME = "rint"
    NEEDS = "inverse"

    def __init__(self, monoid) -> None:
        """O(1)."""
        super().__init__(monoid)
        self._inverse = monoid.inverse
        self._prefix = ListStore()
        self._prefix.append(EMPTY)  # P[0]: no partial yet

    def append(self, v) -> None:
        """``P[hi + 1] = P[hi] + v``: one monoid call."""
        last = self._prefix[self.hi]
        self._prefix.append(v if last is EMPTY else self._combine(last, v))
        self.hi += 1

    def range(self, lo: int, hi: int, spec=None):
        """``P[hi] - P[lo]``: one inverse call."""
        if not self.lo <= lo <= hi <= self.hi:
            self._check(lo, hi)
        if lo == hi:
            return EMPTY
        prefix = self._prefix
        items, base = prefix.items, prefix.base
        before = items[lo - base]
        total = items[hi - base]
        return total if before is EMPTY else self._inverse(total, before)

    def evict(self, lo: int) -> None:
        """Drop the running intervals before ``P[lo]``; no monoid call."""
        if lo > self.lo:
            self.lo = min(lo, self.hi)
            self._prefix.drop_before(self.lo)

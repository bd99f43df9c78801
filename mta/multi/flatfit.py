"""FlatFIT multi-query (Shein, Chrysanthis and Labrinidis, SSDBM 2017;
mqo-shein-chrysanthis-tkde section 2.2, Fig. 7; slickdeque-shein-edbt2018
section 2.2): *Partials* and *Pointers*, where ``partials[i]`` aggregates the
positions ``[i, pointers[i])``.  A lookup from ``lo`` follows the pointers
to the newest partial, stacking the visited positions (*Positions*), then
pops them, storing each suffix aggregate back with a pointer to the newest
partial, so later lookups -- of this range or any other -- skip the stretch.

Deviation: positions are absolute in growing lists (no circular arrays of a
fixed window).  Only ranges ending at the newest partial are answered.
"""

from __future__ import annotations

from ..markers import EMPTY
from ._final import FinalAggregator, ListStore


class FlatFIT(FinalAggregator):
    """Append O(1), no monoid call; lookup amortized O(1) monoid calls
    (3 per slide and query on average, section 4.1 of the MQO paper), O(W)
    in the worst case; eviction O(1)."""

    NAME = "flatfit"
    SUFFIX_ONLY = True

    def __init__(self, monoid) -> None:
        """Empty arrays; O(1)."""
        super().__init__(monoid)
        self._partials = ListStore()
        self._pointers = ListStore()

    def append(self, v) -> None:
        """The new partial points past itself; O(1), no monoid call."""
        self._partials.append(v)
        self._pointers.append(self.hi + 1)
        self.hi += 1

    def range(self, lo: int, hi: int, spec=None):
        """Follow the pointers from ``lo``, then store every suffix aggregate back (path
        compression): amortized O(1), worst O(hi - lo) monoid calls."""
        if hi != self.hi or not self.lo <= lo <= hi:
            self._check(lo, hi)
        if lo == hi:
            return EMPTY
        # the stores' lists, indexed from their common base
        partials, pointers, combine = self._partials.items, self._pointers.items, self._combine
        base = self._partials.base
        positions = []
        i = lo - base
        top = hi - base
        while pointers[i] - base < top:
            positions.append(i)
            i = pointers[i] - base
        acc = partials[i]
        while positions:
            i = positions.pop()
            acc = combine(partials[i], acc)
            partials[i] = acc
            pointers[i] = hi
        return acc

    def evict(self, lo: int) -> None:
        """O(1) amortized, no monoid call."""
        if lo > self.lo:
            self.lo = min(lo, self.hi)
            self._partials.drop_before(self.lo)
            self._pointers.drop_before(self.lo)

"""SlickDeque (Non-Inv), multi-query (slickdeque-shein-edbt2018 section 3,
Algorithm 2, Fig. 10 of mqo-shein-chrysanthis-tkde), for selective monoids
(``combine(a, b)`` is always ``a`` or ``b``: max, min, first, last, argmax).

A deque of nodes ``(pos, val)``, positions increasing: ``val`` is the
aggregate from any position after the previous node up to ``pos`` through
the newest partial.  Appending pops the tail nodes that the new partial
beats (line 16); a range ``[lo, newest]`` is answered by the first node at
or after ``lo`` -- so one pass over the deque, ranges sorted from the
longest, answers every range (lines 21-41).

Deviations: positions are absolute (no modulo ``wSize``), so the answer
node is found by binary search from where the previous (longer) range's
search stopped instead of by stepping; a tie is decided by what ``combine``
returned (``is`` first), as in :mod:`mta.baselines.slickdeque`.  Only
ranges ending at the newest partial are answered (suffix windows).
"""

from __future__ import annotations

from bisect import bisect_left

from ..markers import EMPTY
from ._final import FinalAggregator


class SlickDequeNonInv(FinalAggregator):
    """Append amortized O(1) monoid calls (each partial is popped once);
    lookup O(log deque) comparisons and no monoid call; eviction O(1)
    amortized."""

    NAME = "slickdeque-noninv"
    NEEDS = "selective"
    SUFFIX_ONLY = True

    def __init__(self, monoid) -> None:
        """An empty deque; O(1)."""
        super().__init__(monoid)
        self._pos: list = []
        self._val: list = []
        self._head = 0  # nodes before it are gone

    def append(self, v) -> None:
        """Lines 16-19: pop the tail nodes ``v`` beats; amortized O(1) monoid calls."""
        pos, val, combine = self._pos, self._val, self._combine
        while len(pos) > self._head:
            tail = val[-1]
            r = combine(tail, v)
            if r is v or (r is not tail and r == v):
                pos.pop()
                val.pop()
            else:
                break
        pos.append(self.hi)
        val.append(v)
        self.hi += 1

    def range(self, lo: int, hi: int, spec=None):
        """The first node at or after ``lo``: O(log deque), no monoid call."""
        if hi != self.hi or not self.lo <= lo <= hi:
            self._check(lo, hi)
        if lo == hi:
            return EMPTY
        return self._val[bisect_left(self._pos, lo, self._head)]

    def ranges(self, starts) -> list:
        """Answers for the suffix ranges starting at ``starts`` (sorted
        ascending: longest first), in one pass over the deque."""
        out = []
        i = self._head
        pos, val = self._pos, self._val
        for lo in starts:
            self._check(lo, self.hi)
            if lo == self.hi:
                out.append(EMPTY)
                continue
            i = bisect_left(pos, lo, i)
            out.append(val[i])
        return out

    def evict(self, lo: int) -> None:
        """Line 13: drop the nodes before ``lo``; O(log deque) amortized, no monoid call."""
        if lo <= self.lo:
            return
        self.lo = min(lo, self.hi)
        pos = self._pos
        head = bisect_left(pos, self.lo, self._head)
        if head > 64 and 2 * head > len(pos):
            del pos[:head]
            del self._val[:head]
            head = 0
        self._head = head

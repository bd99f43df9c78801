"""B-Int, base intervals (arasu-widom-vldb2004 section 3.1.1, Definition 3.1,
Theorem 3.1, Fig. 3; mqo-shein-chrysanthis-tkde section 2.2, Fig. 6).

The level-``l`` base interval ``j`` is the partials ``[j * 2^l, (j+1) * 2^l)``.
They are kept in the MTA's level queues (:mod:`mta.level_queue`), whose
absolute positions are exactly these dyadic intervals: element ``j`` of
level ``l`` has children ``2j`` and ``2j + 1`` and parent ``j >> 1``.  Only
*active* base intervals are kept, those whose partials are all live: the
head of level ``l`` is ``ceil(lo / 2^l)``.

A lookup of any range ``[lo, hi)`` combines the O(log W) base intervals of
its dyadic decomposition, left pieces from the left, right pieces from the
right, so the monoid need not be commutative nor invertible; because the
decomposition never reads a level's tail past ``hi``, every range over the
live partials is answered, historical ones included.  With ``new_level`` a
store's level-queue factory (``stores.Store.open_window``), the levels live
in the store, as the MTA's do.
"""

from __future__ import annotations

from ..level_queue import MemoryLevelQueue
from ..markers import EMPTY
from ._final import FinalAggregator


def combine_dyadic(levels, lo: int, hi: int, combine):
    """The aggregate of positions ``[lo, hi)`` of level 0 from the dyadic
    intervals covering them: ``levels`` yields, level by level from 0, a
    mapping from a position ``j`` at that level to the aggregate of
    ``[j * 2^l, (j+1) * 2^l)`` (B-Int's level queues, or FlatFAT's flat tree,
    the same list at every level, where node ``j`` has children ``2j`` and
    ``2j + 1``).  Left pieces are combined from the left and right pieces
    from the right, so ``combine`` need not be commutative; EMPTY for an
    empty range.  O(log(hi - lo)) lookups and monoid calls, at most two a
    level."""
    left = right = EMPTY
    for q in levels:
        if lo >= hi:
            break
        if lo & 1:
            v = q[lo]
            left = v if left is EMPTY else combine(left, v)
            lo += 1
        if hi & 1:
            hi -= 1
            v = q[hi]
            right = v if right is EMPTY else combine(v, right)
        lo >>= 1
        hi >>= 1
    if lo < hi:
        raise IndexError("the levels ran out before the range was covered")
    if left is EMPTY:
        return right
    return left if right is EMPTY else combine(left, right)


class BInt(FinalAggregator):
    """Append amortized O(1) monoid calls (one per completed base interval,
    at most one per level, on average one); lookup O(log W) for a range of W
    partials (at most two per level); eviction O(levels), no monoid call."""

    NAME = "bint"

    def __init__(self, monoid, *, new_level=MemoryLevelQueue, levels=None) -> None:
        """The leaf level (``new_level(0, 0)``), or ``levels`` already built; O(1)."""
        super().__init__(monoid)
        self._new_level = new_level
        self._levels = levels or [new_level(0, 0)]
        q0 = self._levels[0]
        self.lo, self.hi = q0.lo, q0.hi

    @property
    def levels(self) -> list:
        """The level queues (a store checkpoints them)."""
        return self._levels

    def append(self, v) -> None:
        """Add the partial at ``hi`` and every base interval it completes
        (Fig. 3's UPDATE, computed from the level below)."""
        levels, combine = self._levels, self._combine
        q = levels[0]
        pos = q.hi
        q.append(v)
        self.hi = q.hi
        level = 0
        while pos & 1 and pos - 1 >= q.lo:
            value = combine(q[pos - 1], q[pos])
            level += 1
            pos >>= 1
            if level == len(levels):
                levels.append(self._new_level(level, pos))
            q = levels[level]
            if q.hi != pos:
                # the intervals before pos lost a partial to eviction: the
                # level restarts at pos
                q.discard()
                q = levels[level] = self._new_level(level, pos)
            q.append(value)

    def range(self, lo: int, hi: int, spec=None):
        """Theorem 3.1: the dyadic decomposition of ``[lo, hi)``, O(log W)."""
        self._check(lo, hi)
        return combine_dyadic(self._levels, lo, hi, self._combine)

    def runs(self, lo: int, hi: int) -> list:
        """The values of the base intervals covering ``[lo, hi)``, left to
        right, not combined (Theorem 3.1's decomposition; B-INT-QNT selects
        a rank over them, :mod:`.quantiles`).  O(log W), no monoid call."""
        self._check(lo, hi)
        levels = self._levels
        left, right = [], []
        level = 0
        while lo < hi:
            q = levels[level]
            if lo & 1:
                left.append(q[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                right.append(q[hi])
            lo >>= 1
            hi >>= 1
            level += 1
        left.extend(reversed(right))
        return left

    def evict(self, lo: int) -> None:
        """Forget the base intervals that are no longer active (Fig. 3, step
        6): level ``l`` starts at ``ceil(lo / 2^l)``."""
        if lo <= self.lo:
            return
        lo = min(lo, self.hi)
        self.lo = lo
        for level, q in enumerate(self._levels):
            head = -((-lo) >> level)
            if head > q.lo:
                q.lo = head if head < q.hi else q.hi

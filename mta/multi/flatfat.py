"""FlatFAT multi-query (Tangwongsan et al. 2015, as extended by Cutty to
partials; mqo-shein-chrysanthis-tkde section 2.2, Fig. 5;
slickdeque-shein-edbt2018 section 2.2): a pointer-less complete binary tree
in a flat array whose leaves are a circular buffer of partials; a lookup
combines the minimum set of nodes covering its leaves (Fig. 5's red
triangles), in order, for any range.

Deviations: capacity doubles when the leaves are full (rebuilding the tree,
amortized O(1) per partial); evicted leaves are not reset to the identity,
because a lookup only reads nodes whose leaves are all live and a node is
recomputed whenever one of its leaves is written.
"""

from __future__ import annotations

from itertools import repeat

from ..markers import EMPTY
from ._final import FinalAggregator
from .bint import combine_dyadic


class FlatFAT(FinalAggregator):
    """Append O(log capacity) monoid calls (leaf-to-root update); lookup
    O(log capacity), at most two covering sets when the range wraps around
    the leaves; eviction O(1), no monoid call."""

    NAME = "flatfat"

    def __init__(self, monoid) -> None:
        """Four empty leaves; O(1)."""
        super().__init__(monoid)
        self._cap = 4
        self._tree: list = [EMPTY] * 8

    def _rebuild(self, capacity: int) -> None:
        """The live partials on ``capacity`` leaves, every node recomputed: O(capacity) monoid
        calls."""
        old, old_cap = self._tree, self._cap
        tree = [EMPTY] * (2 * capacity)
        for pos in range(self.lo, self.hi):
            tree[capacity + pos % capacity] = old[old_cap + pos % old_cap]
        combine = self._combine
        for i in range(capacity - 1, 0, -1):
            a, b = tree[2 * i], tree[2 * i + 1]
            tree[i] = b if a is EMPTY else a if b is EMPTY else combine(a, b)
        self._tree, self._cap = tree, capacity

    def append(self, v) -> None:
        """Leaf write and leaf-to-root update: O(log capacity) monoid calls (a doubling rebuild,
        amortized O(1), when full)."""
        if self.hi - self.lo == self._cap:
            self._rebuild(2 * self._cap)
        tree, combine = self._tree, self._combine
        i = self._cap + self.hi % self._cap
        tree[i] = v
        while i > 1:
            i >>= 1
            a, b = tree[2 * i], tree[2 * i + 1]
            tree[i] = b if a is EMPTY else a if b is EMPTY else combine(a, b)
        self.hi += 1

    def range(self, lo: int, hi: int, spec=None):
        """Fig. 5's minimum covering set, split in two when the range wraps: O(log capacity)
        monoid calls.  Node ``j``'s children are ``2j`` and ``2j + 1``, so
        leaf ``capacity + i`` and its ancestors are dyadic intervals, the one
        tree serving every level of :func:`.bint.combine_dyadic`."""
        self._check(lo, hi)
        if lo == hi:
            return EMPTY
        tree, cap, combine = self._tree, self._cap, self._combine
        a = cap + lo % cap
        b = a + (hi - lo)
        if b <= 2 * cap:
            return combine_dyadic(repeat(tree), a, b, combine)
        return combine(combine_dyadic(repeat(tree), a, 2 * cap, combine),
                       combine_dyadic(repeat(tree), cap, b - cap, combine))

    def evict(self, lo: int) -> None:
        """O(1), no monoid call: evicted leaves are overwritten when reused."""
        if lo > self.lo:
            self.lo = min(lo, self.hi)

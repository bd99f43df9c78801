"""Naive final aggregation: Panes' own (mqo-shein-chrysanthis-tkde section
2.2, "Panes ... Naive"): every lookup folds the partials of its range."""

from __future__ import annotations

from ..markers import EMPTY
from ._final import FinalAggregator, ListStore


class Naive(FinalAggregator):
    """The partials in a list; O(1) append and eviction, O(W) monoid calls
    per lookup of W partials (W - 1 combines)."""

    NAME = "naive"

    def __init__(self, monoid) -> None:
        """O(1)."""
        super().__init__(monoid)
        self._partials = ListStore()

    def append(self, v) -> None:
        """O(1), no monoid call."""
        self._partials.append(v)
        self.hi += 1

    def range(self, lo: int, hi: int, spec=None):
        """O(hi - lo) monoid calls."""
        self._check(lo, hi)
        if lo == hi:
            return EMPTY
        partials, combine = self._partials, self._combine
        acc = partials[lo]
        for pos in range(lo + 1, hi):
            acc = combine(acc, partials[pos])
        return acc

    def evict(self, lo: int) -> None:
        """O(1) amortized, no monoid call."""
        if lo > self.lo:
            self.lo = min(lo, self.hi)
            self._partials.drop_before(self.lo)

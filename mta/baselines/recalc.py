"""Recalculate-from-scratch (DABA paper Fig. 20; the MTA paper's *Naive*)."""

from __future__ import annotations

from collections import deque

from ..markers import EMPTY
from ._enforce import SingleEvictionEnforce


class Recalc(SingleEvictionEnforce):
    """A deque of the values; ``query`` folds all of them, O(n).

    As in the MTA paper's Naive window (section 5), the result is cached
    until the window changes.  An insert extends a valid cache with one
    combine (``agg ⊕ v`` is exactly the new fold), so an insert that evicts
    nothing costs "a single monoid execution" as the MTA paper reports; an
    evict drops the cache and the next query folds the whole window again.
    """

    def __init__(self, monoid, wsp=None) -> None:
        super().__init__(monoid, wsp)
        self._vals: deque = deque()
        self._cache = EMPTY

    def insert(self, v) -> None:
        if self._cache is not EMPTY:
            self._cache = self._combine(self._cache, v) if self._vals else v
        self._vals.append(v)

    def _head(self):
        return self._vals[0]

    def _pop(self) -> None:
        self._vals.popleft()
        self._cache = EMPTY

    def query(self):
        if self._cache is EMPTY:
            self._cache = self.monoid.fold(self._vals)
        return self._cache

    def __len__(self) -> int:
        return len(self._vals)

"""Subtract-on-evict (DABA paper Fig. 19; Panes (Inv), R-Int)."""

from __future__ import annotations

from collections import deque

from ._enforce import SingleEvictionEnforce


class SubtractOnEvict(SingleEvictionEnforce):
    """A queue of values and a running aggregate; O(1) combines per operation.

    ``evict`` removes the oldest value from the *front* of the aggregate with
    ``monoid.inverse`` (``inverse(b ⊕ c, b) == c``), so the monoid need not be
    commutative, but it must declare an inverse.  When the window empties the
    aggregate is reset to the identity (no inverse call, no rounding residue).
    """

    def __init__(self, monoid, wsp=None) -> None:
        super().__init__(monoid, wsp)
        if monoid.inverse is None:
            raise TypeError(
                f"{type(self).__name__} needs an invertible monoid, but {monoid.name!r} "
                "declares no inverse; use a non-invertible engine (e.g. TwoStacks or DABA)"
            )
        self._inverse = monoid.inverse
        self._vals: deque = deque()
        self._agg = monoid.identity

    def insert(self, v) -> None:
        self._agg = self._combine(self._agg, v) if self._vals else v
        self._vals.append(v)

    def _head(self):
        return self._vals[0]

    def _pop(self) -> None:
        oldest = self._vals[0]
        agg = self._inverse(self._agg, oldest) if len(self._vals) > 1 else self._identity
        self._vals.popleft()
        self._agg = agg

    def query(self):
        return self._agg

    def __len__(self) -> int:
        return len(self._vals)

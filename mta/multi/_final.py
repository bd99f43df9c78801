"""What every final aggregator shares (mqo-shein-chrysanthis-tkde section
2.2): a sequence of partial aggregates at absolute positions, appended at
the tail, forgotten at the head, and range lookups over it.

A final aggregator is ``cls(monoid)`` with

* ``append(v)``: the next partial, at position ``hi``;
* ``range(lo, hi, spec)``: the aggregate of the partials ``[lo, hi)`` (both
  live), or :data:`mta.markers.EMPTY` when ``lo == hi``; ``spec`` names the
  window specification asking (techniques keeping per-range state, such as
  SlickDeque (Inv), use it);
* ``evict(lo)``: no range will start before ``lo`` again;
* ``lo``, ``hi``: the live positions ``[lo, hi)``.

``SUFFIX_ONLY`` techniques answer only ranges ending at ``hi`` (windows that
end at the newest partial); ``NEEDS`` is ``"inverse"``, ``"selective"`` or
``None``.
"""

from __future__ import annotations

from ..errors import MTAError

__all__ = ["FinalAggregator", "RangeRefused"]


class RangeRefused(MTAError, ValueError):
    """A range this technique cannot answer (a historical range on a
    suffix-only technique, or one starting before the live partials)."""


class FinalAggregator:
    """Base: the live positions and the argument checks of ``range``."""

    NAME = "?"
    SUFFIX_ONLY = False
    NEEDS: str | None = None

    def __init__(self, monoid) -> None:
        if self.NEEDS == "inverse" and monoid.inverse is None:
            raise TypeError(f"{self.NAME} needs an invertible monoid (inverse=...); {monoid.name!r} is not")
        if self.NEEDS == "selective" and not monoid.selective:
            raise TypeError(f"{self.NAME} needs a selective monoid (selective=True); {monoid.name!r} is not")
        self.monoid = monoid
        self._combine = monoid.combine
        self.lo = 0
        self.hi = 0

    def _check(self, lo: int, hi: int) -> None:
        if not self.lo <= lo <= hi <= self.hi:
            raise RangeRefused(f"{self.NAME}: range [{lo}, {hi}) outside the live partials [{self.lo}, {self.hi})")
        if self.SUFFIX_ONLY and hi != self.hi and lo != hi:
            raise RangeRefused(f"{self.NAME} answers only ranges ending at the newest partial ({self.hi}), "
                               f"not [{lo}, {hi})")

    def __len__(self) -> int:
        return self.hi - self.lo

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.monoid.name}, [{self.lo}, {self.hi}))"


class ListStore:
    """Values at absolute positions ``[lo, hi)`` in a Python list whose dead
    prefix is dropped once it outgrows the live part (amortized O(1))."""

    __slots__ = ("items", "base")

    def __init__(self, base: int = 0) -> None:
        self.items: list = []
        self.base = base

    def __getitem__(self, pos: int):
        return self.items[pos - self.base]

    def __setitem__(self, pos: int, value) -> None:
        self.items[pos - self.base] = value

    def append(self, value) -> None:
        self.items.append(value)

    def drop_before(self, lo: int) -> None:
        dead = lo - self.base
        if dead > 64 and 2 * dead > len(self.items):
            del self.items[:dead]
            self.base = lo

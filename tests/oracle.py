"""Brute-force oracles the tests compare every engine against.

Deliberately naive and independent of the package's engines: a Python list
holding the window, folded from scratch on every query.
"""

from __future__ import annotations

from mta.monoid import Monoid

#: Non-commutative monoid whose aggregate is the exact window contents, so any
#: lost, duplicated or reordered element shows.  Its identity ``()`` is also a
#: legal element: engines must treat it as an ordinary value.
CONCAT = Monoid(lambda a, b: a + b, (), name="concat")


class BruteForceWindow:
    """The reference semantics of the engine interface (mta.engine)."""

    def __init__(self, monoid: Monoid, wsp=None) -> None:
        self.monoid = monoid
        self.wsp = wsp
        self.items: list = []

    def fold(self, items) -> object:
        acc = self.monoid.identity
        for v in items:
            acc = self.monoid.combine(acc, v)
        return acc

    def insert(self, v) -> None:
        self.items.append(v)

    def evict(self) -> None:
        if not self.items:
            raise IndexError("evict from an empty window")
        del self.items[0]

    def bulk_evict(self, count: int) -> None:
        if count > len(self.items):
            raise IndexError("bulk_evict past the window")
        del self.items[:count]

    def slide(self, values, evictions) -> list:
        out = []
        for v, k in zip(values, evictions):
            self.insert(v)
            self.bulk_evict(k)
            out.append(self.query())
        return out

    def enforce(self) -> int:
        """Evict the longest prefix P with wsp(total, fold(P))."""
        if self.wsp is None or not self.items:
            return 0
        total = self.fold(self.items)
        longest = 0
        for k in range(1, len(self.items) + 1):
            if self.wsp(total, self.fold(self.items[:k])):
                longest = k
        del self.items[:longest]
        return longest

    def query(self):
        return self.fold(self.items)

    def push(self, v):
        self.insert(v)
        self.enforce()
        return self.query()

    def __len__(self) -> int:
        return len(self.items)

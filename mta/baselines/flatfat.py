"""FlatFAT, the Flat Fixed-sized Aggregator of the Reactive Aggregator.

Tangwongsan et al., VLDB 2015, as described in mqo-shein-chrysanthis-tkde
section 2.2 (Fig. 5) and slickdeque-shein-edbt2018 section 2.2 (Fig. 4): a
pointer-less complete binary tree stored in a flat array whose leaves form a
circular buffer; each internal node holds the aggregate of its two children.
"""

from __future__ import annotations

from ..markers import EMPTY
from ._enforce import SingleEvictionEnforce

_MIN_CAPACITY = 4


class FlatFAT(SingleEvictionEnforce):
    """Array tree ``tree[1:2c]``: node ``i`` has children ``2i``, ``2i + 1``; the
    ``c`` leaves ``tree[c:2c]`` hold the window circularly from ``front``.

    Free leaves hold the identity, so insert and evict are a leaf write plus
    an O(log n) leaf-to-root update.  When the window does not wrap around
    the end of the leaves, the root is its aggregate; when it wraps, the
    window is the leaves ``[front, c)`` followed by ``[0, front)`` and the
    query combines the two ranges in that (non-commutative) order.  The
    capacity ``c`` (a power of two) doubles when the leaves are full and
    halves when under a quarter is used; each resize rebuilds the tree in
    O(n) with the window starting at leaf 0 (amortized O(1)).
    """

    def __init__(self, monoid, wsp=None) -> None:
        super().__init__(monoid, wsp)
        self._size = 0
        self._front = 0
        self._rebuild(_MIN_CAPACITY, [])

    def _rebuild(self, capacity: int, window: list) -> None:
        identity, combine = self._identity, self._combine
        tree = [identity] * (2 * capacity)
        tree[capacity:capacity + len(window)] = window
        for i in range(capacity - 1, 0, -1):
            tree[i] = combine(tree[2 * i], tree[2 * i + 1])
        self._tree, self._cap, self._front = tree, capacity, 0

    def _window(self) -> list:
        leaves = self._tree[self._cap:]
        end = self._front + self._size
        return leaves[self._front:end] + leaves[:max(0, end - self._cap)]

    def _update(self, leaf: int, value) -> None:
        """Write leaf ``leaf`` and recompute its ancestors bottom-up."""
        tree, combine = self._tree, self._combine
        i = leaf + self._cap
        tree[i] = value
        while i > 1:
            i >>= 1
            tree[i] = combine(tree[2 * i], tree[2 * i + 1])

    def insert(self, v) -> None:
        if self._size == self._cap:
            self._rebuild(2 * self._cap, self._window())
        self._update((self._front + self._size) % self._cap, v)
        self._size += 1

    def _head(self):
        return self._tree[self._cap + self._front]

    def _pop(self) -> None:
        self._update(self._front, self._identity)
        self._front = (self._front + 1) % self._cap
        self._size -= 1
        if self._cap > _MIN_CAPACITY and 4 * self._size < self._cap:
            self._rebuild(self._cap // 2, self._window())

    def query(self):
        tree, cap, front = self._tree, self._cap, self._front
        if front + self._size <= cap:
            return tree[1]  # no wrap: every leaf outside the window is the identity
        # wrapped: suffix [front, cap) ⊕ prefix [0, front), both gathered on the
        # path from leaf `front` to the root (right siblings extend the suffix,
        # left siblings extend the prefix)
        combine = self._combine
        i = cap + front
        suffix, prefix = tree[i], EMPTY
        while i > 1:
            if i & 1:
                prefix = tree[i - 1] if prefix is EMPTY else combine(tree[i - 1], prefix)
            else:
                suffix = combine(suffix, tree[i + 1])
            i >>= 1
        return suffix if prefix is EMPTY else combine(suffix, prefix)

    def __len__(self) -> int:
        return self._size

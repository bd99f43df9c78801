"""FlatFIT, the Flat and Fast Index Traverser (Shein, Chrysanthis and
Labrinidis, SSDBM 2017), as described in mqo-shein-chrysanthis-tkde section
2.2 (Fig. 7) and slickdeque-shein-edbt2018 section 2.2."""

from __future__ import annotations

from ..markers import EMPTY
from ._enforce import SingleEvictionEnforce

_MIN_CAPACITY = 4


class FlatFIT(SingleEvictionEnforce):
    """Two circular arrays, *Partials* and *Pointers*, and a stack *Positions*.

    ``partials[i]`` is the aggregate of the positions ``[i, pointers[i])`` (in
    circular order), so ``pointers[i]`` says how far a traversal from ``i``
    can skip.  A new value at position ``b`` gets ``partials[b] = v`` and the
    previous back position points to ``b``.  ``query`` follows the pointers
    from the oldest position to the newest, pushing the visited positions on
    *Positions*; it then pops them, aggregating right to left, storing each
    suffix aggregate back into *Partials* with a pointer to the newest
    position, so later queries skip the whole stretch (amortized O(1),
    O(n) at a "window reset").

    Deviations: capacity doubles when full and halves when under a quarter
    is used (re-indexing the pointers; the paper pre-allocates a fixed
    window), and a third circular array keeps the raw values, because
    *Partials* overwrites them and ``enforce`` must read the oldest value.
    """

    def __init__(self, monoid, wsp=None) -> None:
        super().__init__(monoid, wsp)
        self._size = 0
        self._front = 0
        self._resize(_MIN_CAPACITY)

    def _resize(self, capacity: int) -> None:
        """Move the window to positions ``[0, size)`` of arrays of ``capacity``."""
        size, front = self._size, self._front
        vals, partials, pointers = [None] * capacity, [None] * capacity, [0] * capacity
        if size:
            old = len(self._vals)
            for k in range(size):
                i = (front + k) % old
                vals[k], partials[k] = self._vals[i], self._partials[i]
                pointers[k] = (self._pointers[i] - front) % old
        self._vals, self._partials, self._pointers = vals, partials, pointers
        self._front = 0

    def insert(self, v) -> None:
        cap = len(self._vals)
        if self._size == cap:
            self._resize(2 * cap)
            cap *= 2
        back = (self._front + self._size) % cap
        self._vals[back] = self._partials[back] = v
        if self._size:
            self._pointers[(back - 1) % cap] = back
        self._size += 1

    def _head(self):
        return self._vals[self._front]

    def _pop(self) -> None:
        front = self._front
        self._vals[front] = self._partials[front] = None
        self._front = (front + 1) % len(self._vals)
        self._size -= 1
        if len(self._vals) > _MIN_CAPACITY and 4 * self._size < len(self._vals):
            self._resize(len(self._vals) // 2)

    def query(self):
        if not self._size:
            return self._identity
        partials, pointers, combine = self._partials, self._pointers, self._combine
        back = (self._front + self._size - 1) % len(partials)
        positions = []
        i = self._front
        while i != back:
            positions.append(i)
            i = pointers[i]
        acc = EMPTY  # aggregate of [i, back), built right to left
        while positions:
            i = positions.pop()
            acc = partials[i] if acc is EMPTY else combine(partials[i], acc)
            partials[i] = acc
            pointers[i] = back
        return partials[back] if acc is EMPTY else combine(acc, partials[back])

    def __len__(self) -> int:
        return self._size

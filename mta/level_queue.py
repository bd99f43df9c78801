"""Level queues: one FIFO per tree level (section 4.1.1, Fig. 1b).

Positions are absolute: the element at position ``i`` of level ``l`` keeps
that position for its whole life, its sibling is ``i ^ 1`` (pairs are
``(2j, 2j + 1)``), its parent is position ``i >> 1`` of level ``l + 1`` and
its children are ``2i`` and ``2i + 1`` of level ``l - 1`` (Theorem 1).  A
pair ``<empty, *>`` at the head is simply ``lo`` odd; ``<*, empty>`` at the
tail is ``hi`` odd.  Because positions never shift, a store can key each
element by ``(window, level, position)`` and never rewrite it.

:class:`LevelQueue` is the interface the engines use; :class:`MemoryLevelQueue`
keeps the level in process memory.  Store-backed queues (package ``stores``)
implement the same interface.
"""

from __future__ import annotations

from typing import Any


class LevelQueue:
    """A FIFO of elements addressed by absolute position.

    ``lo`` and ``hi`` delimit the live positions ``[lo, hi)``.  Engines read
    and write near the head and the tail, append at the tail, and drop any
    number of elements from the head in O(1) by assigning ``lo`` (never
    backwards, never past ``hi``); implementations reclaim lazily.
    """

    __slots__ = ("level", "lo", "hi")

    def __init__(self, level: int, lo: int) -> None:
        self.level = level  # 0 for the leaves
        self.lo = lo
        self.hi = lo

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, i: int) -> Any:
        raise NotImplementedError

    def __setitem__(self, i: int, value: Any) -> None:
        raise NotImplementedError

    def append(self, value: Any) -> None:
        raise NotImplementedError

    def extend(self, values) -> None:
        """Append every value of the list ``values`` in order."""
        for value in values:
            self.append(value)

    def span(self, a: int, b: int) -> list:
        """The live elements ``[a, b)`` in order, read together (a store
        reads them in one round trip, leaving its head cache as it is)."""
        return [self[i] for i in range(a, b)]

    def discard(self) -> None:
        """Release everything the level holds (the level is being removed)."""
        self.lo = self.hi

    def local_size(self) -> int:
        """Elements held in process memory."""
        raise NotImplementedError


class MemoryLevelQueue(LevelQueue):
    """A level held in a Python list.

    Moving ``lo`` drops millions of elements in O(1), as the paper's
    ``remove_pairs`` (Algorithm 2).  Once the dead prefix outgrows the live
    part, the next append copies the live part to a fresh list and the
    old list goes to a graveyard that later appends (to any level; an extend
    counts as its elements' appends) free a few references at a time, so no
    single operation pays for deallocating a bulk eviction (the paper's
    background garbage collector, section 4.1.4); :func:`reclaim_all` frees
    the rest where no operation waits (the end of a Spark task).
    """

    __slots__ = ("_items", "_base")

    #: Dead elements tolerated before compaction is considered.
    COMPACT_AFTER = 1024

    def __init__(self, level: int = 0, lo: int = 0) -> None:
        super().__init__(level, lo)
        self._items: list = []
        self._base = lo  # absolute position of _items[0]

    def __getitem__(self, i: int) -> Any:
        return self._items[i - self._base]

    def __setitem__(self, i: int, value: Any) -> None:
        self._items[i - self._base] = value

    def span(self, a: int, b: int) -> list:
        return self._items[a - self._base : b - self._base]

    def append(self, value: Any) -> None:
        dead = self.lo - self._base
        if dead > self.COMPACT_AFTER and dead >= self.hi - self.lo:
            _graveyard.append(self._items)
            self._items = self._items[dead:]
            self._base = self.lo
        self._items.append(value)
        self.hi += 1
        if _graveyard:
            _reclaim()

    def extend(self, values) -> None:
        """O(len(values)): compaction as :meth:`append` does it, and as many
        references reclaimed as that many appends would (a caller pushing a
        batch at a time would otherwise free a grave sixteen references per
        batch, and the graves would pile up)."""
        if values:
            self.append(values[0])
            self._items += values[1:]
            self.hi += len(values) - 1
            if _graveyard and len(values) > 1:
                _reclaim(len(values) - 1)

    def discard(self) -> None:
        _graveyard.append(self._items)
        self._items = []
        self._base = self.lo = self.hi

    def local_size(self) -> int:
        return len(self._items)


#: Lists of dropped elements, freed a few references per append.
_graveyard: list[list] = []
_RECLAIM_PER_APPEND = 16


def _reclaim(appends: int = 1) -> None:
    """Free up to ``_RECLAIM_PER_APPEND`` references per append counted,
    newest grave first.  O(appends)."""
    # Shared by every engine of the process: another thread may empty or pop
    # the last grave between these lines, which only frees references sooner.
    budget = _RECLAIM_PER_APPEND * appends
    try:
        while budget > 0:
            grave = _graveyard[-1]
            step = min(budget, len(grave))
            if step:
                del grave[-step:]
                budget -= step
            if not grave:
                _graveyard.pop()
    except IndexError:
        pass


def reclaim_all() -> None:
    """Free every grave now, O(references waiting): for the end of a task,
    where no element waits on it, so that a process left idle (or running
    work that appends little) does not hold a finished window's dropped
    elements, nor walk them in every full garbage collection."""
    while _graveyard:
        try:
            _graveyard.pop()
        except IndexError:  # another thread took the last one
            break


def graveyard_size() -> int:
    """References waiting to be freed (memory accounting in benchmarks)."""
    return sum(map(len, _graveyard))

"""Log MTA: the binary tree of level queues (paper section 4.1).

The window's elements are the leaves in level 0; every pair of level ``l``
has its aggregate as parent in level ``l + 1`` (Invariants 1 and 2,
Theorem 1), up to a root level holding one element.  Positions are absolute
(see :mod:`mta.level_queue`), so the parent of position ``i`` is ``i >> 1``.

* :meth:`LogMTA.insert` is Algorithm 1: append the leaf and recompute the
  tail of every level up to the root, O(log n).
* :meth:`LogMTA.enforce` is Algorithm 2: :func:`bulk_search` walks root to
  leaf, evicting whole subtrees guided by the slide policy, then
  :func:`repair_heads` and :func:`recompute_spine` restore the leftmost
  branch.  O(log n) monoid calls however many elements leave.

The tree's pairs are fixed by position, so its height is the bit length of
``first ^ last`` position plus one: ``log2 n + 1`` on average over window
positions, more when a small window straddles a large power of two (at most
the log of the stream length).  The forest of the Amortized MTA
(:mod:`mta.amortized_mta`) has no such straddle cost.

The helpers here are shared with the Amortized MTA, which applies
Algorithm 2 to its forest (section 4.2.4).
"""

from __future__ import annotations

from typing import Any, Callable

from .engine import Engine
from .errors import EmptyWindowError
from .level_queue import LevelQueue, MemoryLevelQueue
from .monoid import Monoid

#: Private "no value" marker.  Never the monoid's identity: a value equal to
#: the identity is an ordinary element.
EMPTY: Any = type("EmptySlot", (), {"__repr__": lambda self: "<empty>", "__slots__": ()})()


def bulk_search(levels: list[LevelQueue], combine, wsp, total, acc) -> Any:
    """Algorithm 2, lines 1-20: evict the longest prefix the policy allows.

    Walks from the top level to the leaves.  At each level the head element
    is the aggregate of the oldest remaining subtree; while
    ``wsp(total, acc + head)`` holds, the whole subtree leaves (its level
    queue's ``lo`` moves, O(1)) and the search goes on with the next head.
    Descending, a level starts after the children of what left above.  The
    head of every level must hold the true aggregate of its live leaves.

    ``acc`` is the aggregate of what was already evicted in this enforcement
    (or :data:`EMPTY`); returns the new one.  Levels above the leaves are left
    with stale heads: call :func:`repair_heads` and :func:`recompute_spine`.
    """
    floor = 0  # first position at this level not under an evicted element above
    for l in range(len(levels) - 1, -1, -1):
        q = levels[l]
        lo, hi = q.lo, q.hi
        if floor > lo:
            lo = floor if floor < hi else hi
        while lo < hi:
            v = q[lo]
            cand = v if acc is EMPTY else combine(acc, v)
            if not wsp(total, cand):
                break
            acc = cand
            lo += 1
        q.lo = lo
        floor = lo << 1
    return acc


def repair_heads(levels: list[LevelQueue]) -> None:
    """Drop parents whose children have all left (after leaves left).

    The head of level ``m`` is the parent of the head of level ``m - 1``;
    a level above an empty level is empty.
    """
    below = levels[0]
    for q in levels[1:]:
        lo = below.lo >> 1 if below.lo < below.hi else q.hi
        if lo > q.lo:
            q.lo = lo if lo < q.hi else q.hi
        below = q


def recompute_spine(levels: list[LevelQueue], combine) -> None:
    """Algorithm 2, lines 21-27: recompute the leftmost branch bottom-up.

    Each head is set to the aggregate of its live children, so every head
    again holds the true aggregate of its subtree.  O(height) monoid calls.
    """
    below = levels[0]
    for q in levels[1:]:
        if q.lo == q.hi:
            break
        first = max(q.lo << 1, below.lo)
        if first + 1 < below.hi and first & 1 == 0:
            q[q.lo] = combine(below[first], below[first + 1])
        else:
            q[q.lo] = below[first]
        below = q


def parse_level_options(engine: str, options: dict) -> Callable[[int], LevelQueue]:
    """The level-queue factory for an engine's ``**options``."""
    level_queue = options.pop("level_queue", MemoryLevelQueue)
    if options:
        raise TypeError(f"{engine} got unexpected options: {', '.join(sorted(options))}")
    return level_queue


class LogMTA(Engine):
    """Section 4.1: O(log n) insertion, O(log n) bulk eviction."""

    def __init__(self, monoid: Monoid, wsp=None, **options) -> None:
        super().__init__(monoid, wsp)
        self._new_level = parse_level_options(type(self).__name__, options)
        self._combine = monoid.combine
        self._levels: list[LevelQueue] = [self._new_level(0)]

    def __len__(self) -> int:
        q = self._levels[0]
        return q.hi - q.lo

    def height(self) -> int:
        """Number of levels in use (1 for an empty window)."""
        return len(self._levels)

    def insert(self, v) -> None:
        """Algorithm 1: append a leaf and update each level's tail up to the root."""
        levels, combine = self._levels, self._combine
        below = levels[0]
        pos = below.hi
        below.append(v)
        m = 1
        while below.hi - below.lo > 1:  # not yet the root level
            parent = pos >> 1
            left = parent << 1
            if left >= below.lo and left + 1 < below.hi:
                value = combine(below[left], below[left + 1])
            else:
                value = below[pos]
            if m == len(levels):  # the old root level got a second element
                q = self._new_level(below.lo >> 1)
                levels.append(q)
                if q.lo < parent:  # the old root's pair differs from the new leaf's
                    q.append(below[below.lo])
            q = levels[m]
            if parent == q.hi:
                q.append(value)
            else:
                q[parent] = value
            below, pos, m = q, parent, m + 1

    def evict(self) -> None:
        """Remove the oldest element: O(log n), as a bulk eviction of one."""
        q = self._levels[0]
        if q.lo == q.hi:
            raise EmptyWindowError("evict() on an empty window")
        q.lo += 1
        self._restore()

    def enforce(self) -> int:
        """Algorithm 2: evict the longest prefix P with ``wsp(total, P)``."""
        q = self._levels[0]
        if self.wsp is None or q.lo == q.hi:
            return 0
        before = q.lo
        bulk_search(self._levels, self._combine, self.wsp, self._root(), EMPTY)
        if q.lo != before:
            self._restore()
        return q.lo - before

    def query(self):
        q = self._levels[0]
        return self.monoid.identity if q.lo == q.hi else self._root()

    def _root(self):
        top = self._levels[-1]
        return top[top.lo]

    def _restore(self) -> None:
        """After leaves left: drop orphaned parents, cut the levels above the
        new root, recompute the leftmost branch."""
        levels = self._levels
        repair_heads(levels)
        root = 0
        while levels[root].hi - levels[root].lo > 1:
            root += 1
        for q in levels[root + 1 :]:
            q.discard()
        del levels[root + 1 :]
        recompute_spine(levels, self._combine)

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
  branch.  O(log n) monoid calls however many elements leave;
  :meth:`LogMTA.bulk_evict` does the same for a known number of leaves.

The tree's pairs are fixed by position, so its height is the bit length of
``first ^ last`` position plus one: ``log2 n + 1`` on average over window
positions, more when a small window straddles a large power of two (at most
the log of the stream length).  The forest of the Amortized MTA
(:mod:`mta.amortized_mta`) has no such straddle cost.

Algorithm 2's search and the spine repair live in :mod:`mta.tree`, shared
with the Amortized MTA.

This module is the reference: :class:`mta.native.NativeLogMTA` runs the same
rules on a compiled core for an in-memory window, and
:func:`mta.native.log_engine` picks it when it is built (this engine
otherwise).
"""

from __future__ import annotations

from .engine import check_count
from .errors import EmptyWindowError
from .markers import EMPTY
from .tree import LevelEngine, bulk_search, recompute_spine, repair_heads

class LogMTA(LevelEngine):
    """Section 4.1: O(log n) insertion, O(log n) bulk eviction (in monoid
    calls; the levels walked follow stream positions, see the module doc).

    Options as :class:`mta.tree.LevelEngine` (``store``, ``window_id``, ...).
    """

    MUTABLE_TAIL = 1  # each level's last element changes until its pair is complete

    def __init__(self, monoid, wsp=None, **options) -> None:
        super().__init__(monoid, wsp, **options)
        if len(self._levels[0]):  # resumed: heads in the store may be stale
            recompute_spine(self._levels, self._combine)

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
                q = self._new_level(m, below.lo >> 1)
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

    def bulk_evict(self, count: int) -> None:
        """Remove the ``count`` oldest elements: Algorithm 2 with the prefix
        known by position (subtrees leave whole), O(log n)."""
        count = check_count(self, count)
        if count:
            self._levels[0].lo += count
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

"""Amortized MTA: the forest, the Stack and the Result Pair (paper section 4.2).

The levels are those of :mod:`mta.log_mta`, but a pair gets its parent only
once it is no longer the tail of its level, so the tail pair of every level
is the root of its own tree (Invariant 3).  The top level holds one pair:
the root of the leftmost (oldest) tree.  The Result Pair keeps
``R0 = aggregate(leftmost tree)`` and ``R1 = aggregate(the other trees)``;
the Stack holds ``R0`` minus its oldest leaf, minus its two oldest, ...,
one entry per full head pair of the leftmost tree.

* :meth:`AmortizedMTA.insert` is Algorithm 3: ``R1 += v`` and the leaf
  climbs only while it completes pairs; amortized O(1).
* :meth:`_split` is Algorithms 4 and 5 (``compute_left_result`` and
  ``compute_right_result``), run lazily: at most once per operation, and only
  when an eviction needs the Stack (section 5.2's coalescing).
* :meth:`_evict_one` is Algorithms 6 and 7: pop the Stack into ``R0``,
  unlink emptied pairs upward, push the new full head pairs; amortized O(1).
* :meth:`AmortizedMTA.enforce` is section 4.2.4: single evictions, and after
  ``log2 n`` of them Algorithm 2 (:func:`mta.tree.bulk_search`) on the forest.
* :meth:`AmortizedMTA.bulk_evict` removes a known number of oldest leaves
  the same way, by position.
* :meth:`AmortizedMTA.query` combines the Result Pair, cached until the
  window changes.
"""

from __future__ import annotations

from .engine import check_count
from .errors import EmptyWindowError
from .level_queue import LevelQueue
from .markers import EMPTY
from .tree import LevelEngine, bulk_search, recompute_spine, repair_heads


class AmortizedMTA(LevelEngine):
    """Section 4.2: amortized O(1) insert and eviction, O(log n) worst case
    and O(log n) bulk eviction.

    Options as :class:`mta.tree.LevelEngine` (``store``, ``window_id``, ...).
    """

    def __init__(self, monoid, wsp=None, **options) -> None:
        super().__init__(monoid, wsp, **options)
        self._r0 = EMPTY  # aggregate of the leftmost tree
        self._r1 = EMPTY  # aggregate of the other trees
        self._stack: list = []
        self._result = EMPTY  # cached query()
        self._split()  # R0, R1 and the Stack of a resumed window

    def local_size(self) -> int:
        return super().local_size() + len(self._stack) + 2

    def insert(self, v) -> None:
        """Algorithm 3."""
        r1 = self._r1
        self._r1 = v if r1 is EMPTY else self._combine(r1, v)
        self._result = EMPTY
        q = self._levels[0]
        pos = q.hi
        q.append(v)
        if pos & 1 or pos == q.lo:  # completes a pair, or starts an empty window
            if len(self._levels) == 1:  # ... at the top: the leftmost tree grew
                self._split_stale = True
        else:  # a new pair: the previous one is final and gets its parent
            self._climb(q, pos)

    def _climb(self, q: LevelQueue, pos: int) -> None:
        """Algorithm 3's loop: propagate final pairs' aggregates upward."""
        combine, levels = self._combine, self._levels
        m = 0
        while not pos & 1 and pos > q.lo:
            left = pos - 2
            value = combine(q[left], q[pos - 1]) if left >= q.lo else q[pos - 1]
            m += 1
            if m == len(levels):  # the leftmost tree's root pair got a parent
                levels.append(self._new_level(m, left >> 1))
            q = levels[m]
            pos = q.hi
            q.append(value)
        if pos & 1 and m == len(levels) - 1:  # completed the top pair
            self._split_stale = True

    def evict(self) -> None:
        q = self._levels[0]
        if q.lo == q.hi:
            raise EmptyWindowError("evict() on an empty window")
        self._evict_one()

    def bulk_evict(self, count: int) -> None:
        """Remove the ``count`` oldest elements as section 4.2.4 does: singly
        (amortized O(1) each) up to ``log2 n`` of them, else in one bulk step
        by position, O(log n)."""
        count = check_count(self, count)
        q = self._levels[0]
        if count < (q.hi - q.lo).bit_length():
            for _ in range(count):
                self._evict_one()
        else:
            q.lo += count
            self._after_bulk()

    def enforce(self) -> int:
        """Section 4.2.4: single evictions, then bulk after ``log2 n`` of them."""
        wsp = self.wsp
        q = self._levels[0]
        n = q.hi - q.lo
        if wsp is None or not n:
            return 0
        total = self._raw_query()
        acc = q[q.lo]
        if not wsp(total, acc):
            return 0
        combine = self._combine
        budget = n.bit_length()
        evicted = 0
        while True:
            self._evict_one()
            evicted += 1
            if q.lo == q.hi:
                return evicted
            if evicted == budget:
                return evicted + self._bulk_evict(total, acc)
            cand = combine(acc, q[q.lo])
            if not wsp(total, cand):
                return evicted
            acc = cand

    def query(self):
        result = self._result
        if result is EMPTY:
            r0, r1 = self._r0, self._r1
            if r0 is EMPTY:
                result = self.monoid.identity if r1 is EMPTY else r1
            else:
                result = r0 if r1 is EMPTY else self._combine(r0, r1)
            self._result = result
        return result

    def _evict_one(self) -> None:
        """Algorithms 6 and 7: remove the oldest leaf in amortized O(1)."""
        if self._split_stale:
            self._split()
        stack = self._stack
        self._r0 = stack.pop() if stack else EMPTY
        self._result = EMPTY
        levels = self._levels
        q = levels[0]
        pos = q.lo
        q.lo = pos + 1
        if not pos & 1 and pos + 1 < q.hi:
            return  # <e0, e1> became <empty, e1>: the parent stays (stale)
        # The pair is gone: unlink its parent, and so on up (Algorithm 6).
        new_heads = []  # e1 of each new full head pair, lowest level first
        top = len(levels) - 1
        m = 0
        while True:
            if pos & 1 and pos + 2 < q.hi:
                new_heads.append(q[pos + 2])
            if m == top:  # the leftmost tree is gone: the next one moves up
                if top:
                    levels.pop().discard()
                self._split_stale = True  # R0 is empty, R1 still right
                return
            m += 1
            pos >>= 1
            q = levels[m]
            q.lo = pos + 1
            if not pos & 1 and pos + 1 < q.hi:
                break
        combine = self._combine
        for e1 in reversed(new_heads):  # Algorithm 7
            stack.append(combine(e1, stack[-1]) if stack else e1)

    def _split(self) -> None:
        """Algorithms 4 and 5: R0 and the Stack from the leftmost tree's head
        pairs, R1 from the other trees' root (tail) pairs.  O(log n)."""
        combine = self._combine
        levels = self._levels
        stack = self._stack
        stack.clear()
        self._split_stale = False
        q0 = levels[0]
        if q0.lo == q0.hi:
            self._r0 = self._r1 = EMPTY
            return
        for q in reversed(levels):
            lo = q.lo
            if not lo & 1 and lo + 1 < q.hi:
                e1 = q[lo + 1]
                stack.append(combine(e1, stack[-1]) if stack else e1)
        leaf = q0[q0.lo]
        self._r0 = combine(leaf, stack[-1]) if stack else leaf
        r1 = EMPTY
        for q in reversed(levels[:-1]):
            start = (q.hi - 1) & ~1
            tree = combine(q[start], q[start + 1]) if start + 1 < q.hi else q[start]
            r1 = tree if r1 is EMPTY else combine(r1, tree)
        self._r1 = r1

    def _bulk_evict(self, total, acc) -> int:
        """Algorithm 2 on the forest, after restoring its leftmost branch."""
        levels = self._levels
        q0 = levels[0]
        before = q0.lo
        recompute_spine(levels, self._combine)
        bulk_search(levels, self._combine, self.wsp, total, acc)
        self._after_bulk()
        return q0.lo - before

    def _after_bulk(self) -> None:
        """Leaves left by position: drop emptied parents and levels, then
        rebuild the Result Pair and the Stack (the heads may stay stale)."""
        levels = self._levels
        repair_heads(levels)
        while len(levels) > 1 and levels[-1].lo == levels[-1].hi:
            levels.pop().discard()
        self._r0 = self._r1 = self._result = EMPTY
        self._split_stale = True
        if levels[0].lo < levels[0].hi:  # R0 + R1 must stay a valid query() before _split
            self._split()

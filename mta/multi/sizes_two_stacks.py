"""Several nested sliding windows ending at the newest element, each an
aggregating FIFO of its own over one shared element storage: Two-Stacks
(DABA paper section 4, Fig. 5; Tangwongsan, Hirzel and Schneider,
"Sliding-Window Aggregation Algorithms", Encyclopedia of Big Data
Technologies 2019) per window, with the flip reading the shared elements and
B-Int range lookups (:mod:`.bint`) instead of a private back stack.

Window ``s`` holds the positions ``[lo_s, hi)`` and splits them at its pivot
``p_s`` into a front ``[lo_s, p_s)`` and a back ``[p_s, hi)``:

* the back is one running aggregate ``B_s = v[p_s] (+) ... (+) v[hi - 1]``
  (one monoid call per inserted element);
* the front is a level queue ``F_s`` over the same absolute positions
  holding the suffix aggregates ``F_s[i] = v[i] (+) ... (+) v[p_s - 1]``
  (each after the element's tag, a time, when windows are decided by tags:
  position ``i``'s pair), so the oldest element's tag and the front's
  aggregate are both at its head;
* its result is ``F_s[lo_s] (+) B_s``: left to right, so the monoid need be
  neither commutative nor invertible.

When an eviction finds the front empty (``lo_s == p_s``) the window
*flips*: ``p_s`` becomes ``hi`` and ``F_s`` gets the suffix aggregates of
``[lo_s, hi)``.  Instead of a back stack of its own (one per window, the
whole window in memory), the flip reads the shared elements in chunks of
``chunk`` positions, oldest chunk first, so ``F_s`` is appended in position
order: a chunk ``[c0, c1)`` starts its backward scan from ``agg[c1, hi)``,
one B-Int lookup.  The elements (B-Int's levels) and the tags live in level
queues that may be a store's, so the process holds O(chunk + log W) per
window plus what the queues keep.

Per element and window: amortized 3 monoid calls (back, flip, query) plus
O(log W / chunk) for the flip's lookups, instead of a B-Int lookup's
2 log W per window; shared by all windows: B-Int's append (amortized one
monoid call) and its eviction.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..level_queue import MemoryLevelQueue
from ..markers import EMPTY
from .bint import BInt


def _memory_fifo(name: str) -> MemoryLevelQueue:
    return MemoryLevelQueue(0, 0)


class SizesTwoStacks:
    """``windows`` nested windows over one stream, all ending at the newest
    element.  A window ends its elements' stay either by count (``counts``,
    one per window: window ``s`` keeps the newest ``counts[s]``) or by tag
    (``tagged=True``: each element carries a non-decreasing tag and
    :meth:`slide` says per element and window up to which tag the oldest
    leave).

    ``new_level`` makes B-Int's level queues (:class:`.bint.BInt`) and
    ``new_fifo(name)`` the other queues (``"tags"`` and ``"front<s>"``);
    both default to process memory."""

    def __init__(self, monoid, windows: int, *, counts: Sequence[int] | None = None, tagged: bool = False,
                 new_level=MemoryLevelQueue, new_fifo: Callable = _memory_fifo, chunk: int = 1024) -> None:
        """O(windows) queues opened, no monoid call."""
        if windows < 1:
            raise ValueError(f"windows must be at least 1, got {windows}")
        if (counts is None) == (not tagged):
            raise ValueError("give counts= (one per window) or tagged=True, exactly one")
        if counts is not None and (len(counts) != windows or any(type(n) is not int or n < 1 for n in counts)):
            raise ValueError(f"counts must be {windows} positive ints, got {counts!r}")
        if type(chunk) is not int or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        self.monoid = monoid
        self._combine = monoid.combine
        self.windows = windows
        self.counts = list(counts) if counts is not None else None
        self.chunk = chunk
        self.bint = BInt(monoid, new_level=new_level)
        self.tags = new_fifo("tags") if tagged else None
        self.fronts = [new_fifo(f"front{s}") for s in range(windows)]
        self._lo = [0] * windows
        self._pivot = [0] * windows
        self._back = [EMPTY] * windows

    @property
    def hi(self) -> int:
        """Position of the next element."""
        return self.bint.hi

    def lo(self, s: int) -> int:
        """Position of window ``s``'s oldest element (``hi`` when empty)."""
        return self._lo[s]

    def slide(self, values: Sequence, tags: Sequence | None = None,
              cutoffs: Sequence[Sequence] | None = None) -> list[list]:
        """Append ``values`` in order; after each, window ``s`` drops its
        oldest elements while it has more than ``counts[s]``, or while their
        tag is ``<= cutoffs[s][i]`` (``tags[i]`` the element's own); returns
        per window the list of its aggregates after each element (the
        monoid's identity for an empty window).  Amortized O(windows) monoid
        calls per element (see the module doc).

        The elements are appended to the shared storage first, then each
        window runs over them on its own (its flips read only positions it
        has reached, and B-Int answers those ranges whatever came after), and
        the shared storage forgets what no window holds any more."""
        k = self.windows
        tagged = self.tags is not None
        if tagged and (tags is None or cutoffs is None or len(cutoffs) != k):
            raise ValueError(f"tagged windows need tags= and cutoffs= ({k} sequences, one per window)")
        bint = self.bint
        append = bint.append
        out = [[] for _ in range(k)]
        step = self.chunk  # elements appended ahead of the windows: the flips find them still in memory
        for a in range(0, len(values), step):
            part = values[a : a + step]
            start = bint.hi
            for v in part:
                append(v)
            if tagged:
                self.tags.extend(list(tags[a : a + step]))
            for s in range(k):
                out[s] += (self._run_tagged(s, part, start, cutoffs[s][a : a + step]) if tagged
                           else self._run_counted(s, part, start))
            oldest = min(self._lo)
            if oldest > bint.lo:
                bint.evict(oldest)
                if tagged:
                    self.tags.lo = oldest
        return out

    def _run_tagged(self, s: int, values: Sequence, hi: int, cutoffs: Sequence) -> list:
        """Window ``s`` over ``values`` (at positions from ``hi``), evicting
        by tag.  Its front keeps position ``i``'s tag and suffix aggregate at
        ``2i`` and ``2i + 1`` (a pair of the level queue)."""
        combine, identity, flip = self._combine, self.monoid.identity, self._flip
        front = self.fronts[s]
        lo, pivot, b = self._lo[s], self._pivot[s], self._back[s]
        if lo < pivot:  # the oldest element's tag and suffix aggregate
            tag, head = front[2 * lo], front[2 * lo + 1]
        else:
            tag = head = EMPTY
        results = []
        add = results.append
        for v, cut in zip(values, cutoffs):
            hi += 1
            b = v if b is EMPTY else combine(b, v)
            while True:
                if head is EMPTY:  # the front is empty
                    if lo == hi:
                        break
                    flip(front, lo, hi)
                    pivot, b = hi, EMPTY
                    tag, head = front[2 * lo], front[2 * lo + 1]
                if tag > cut:
                    break
                lo += 1
                front.lo = 2 * lo
                if lo < pivot:
                    tag, head = front[2 * lo], front[2 * lo + 1]
                else:
                    tag = head = EMPTY
            if head is EMPTY:
                add(identity if b is EMPTY else b)
            else:
                add(head if b is EMPTY else combine(head, b))
        self._lo[s], self._pivot[s], self._back[s] = lo, pivot, b
        return results

    def _run_counted(self, s: int, values: Sequence, hi: int) -> list:
        """Window ``s`` over ``values`` (at positions from ``hi``), keeping
        the newest ``counts[s]``."""
        combine, identity, flip = self._combine, self.monoid.identity, self._flip
        front, count = self.fronts[s], self.counts[s]
        lo, pivot, b = self._lo[s], self._pivot[s], self._back[s]
        results = []
        add = results.append
        for v in values:
            hi += 1
            b = v if b is EMPTY else combine(b, v)
            if lo < hi - count:
                while lo < hi - count:
                    if lo == pivot:
                        flip(front, lo, hi)
                        pivot, b = hi, EMPTY
                    lo += 1
                front.lo = lo
            if lo < pivot:
                f = front[lo]
                add(f if b is EMPTY else combine(f, b))
            else:
                add(identity if b is EMPTY else b)
        self._lo[s], self._pivot[s], self._back[s] = lo, pivot, b
        return results

    def _flip(self, front, a: int, hi: int) -> None:
        """The front ``[a, a)`` becomes ``[a, hi)``: suffix aggregates to
        ``hi`` (after their tags when tagged), a chunk at a time, oldest
        chunk first.  O(hi - a) monoid calls plus O(log W) per chunk;
        O(chunk) elements in memory."""
        tq = self.tags
        scale = 1 if tq is None else 2
        if front.hi != scale * a:
            raise AssertionError(f"flip of a front ending at {front.hi} from {a}")
        front.lo = scale * a
        combine, bint, chunk = self._combine, self.bint, self.chunk
        leaves = bint.levels[0]
        extend = front.extend
        for c0 in range(a, hi, chunk):
            c1 = min(c0 + chunk, hi)
            acc = bint.range(c1, hi) if c1 < hi else EMPTY
            values = leaves.span(c0, c1)
            suffixes = [None] * (c1 - c0)
            for j in range(c1 - c0 - 1, -1, -1):
                v = values[j]
                acc = v if acc is EMPTY else combine(v, acc)
                suffixes[j] = acc
            if tq is not None:  # interleaved: tag, aggregate, tag, ...
                entries = [None] * (2 * (c1 - c0))
                entries[0::2] = tq.span(c0, c1)
                entries[1::2] = suffixes
                suffixes = entries
            extend(suffixes)

    def local_size(self) -> int:
        """Elements the queues hold in process memory."""
        queues = list(self.bint.levels) + self.fronts + ([self.tags] if self.tags is not None else [])
        return sum(q.local_size() for q in queues)

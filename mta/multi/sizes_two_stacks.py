"""Several nested sliding windows ending at the newest element, each an
aggregating FIFO of its own over one shared element storage: Two-Stacks
(DABA paper section 4, Fig. 5; Tangwongsan, Hirzel and Schneider,
"Sliding-Window Aggregation Algorithms", Encyclopedia of Big Data
Technologies 2019) per window, whose front stack is kept one block at a
time, over blocks aggregated as in B-Int (:mod:`.bint`).

The elements (and their tags, times, when windows are decided by tags) are
kept once, in level queues that may be a store's; positions are absolute.
Positions ``[jC, (j+1)C)`` form block ``j`` (``C`` is ``chunk``); a B-Int
over the complete blocks' aggregates answers any run of whole blocks in
O(log(W / C)).

Window ``s`` holds ``[lo_s, hi)`` and splits it at its pivot ``p_s``:

* the back ``[p_s, hi)`` is one running aggregate ``B_s`` (one monoid call
  per element);
* the front ``[lo_s, p_s)`` is a sequence of *pieces*, the front's stretch
  of each block, each with ``S``, the aggregate from its end to ``p_s``
  (kept in a level queue of its own: two entries per piece, its start and
  ``S``).  The piece holding ``lo_s`` is *loaded*: its elements read in one
  go and their suffix aggregates ``v[i] (+) ... (+) v[end - 1] (+) S``
  computed backward, O(C) in memory;
* the window's result is ``suffix[lo_s] (+) B_s``, left to right, so the
  monoid need be neither commutative nor invertible.

When the front is empty and an element must leave, the window *flips*:
``p_s`` becomes ``hi`` and the front becomes ``[lo_s, hi)``, cut at the
block boundaries; the last piece's aggregate is folded from its elements
and every other piece's ``S`` is one B-Int lookup over the whole blocks
after it, so a flip costs O(C + (W / C) log(W / C)) monoid calls and writes
two entries per piece, not per element.

Per element and window: amortized three monoid calls (back, the loaded
piece's suffix, the result) plus the flip's share; shared by all windows:
one monoid call per element for the blocks, two queue entries (element and
tag).  Process memory: O(C) per window plus what the queues keep.
"""

from __future__ import annotations

from functools import reduce
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

    ``new_level`` makes the block B-Int's level queues (:class:`.bint.BInt`)
    and ``new_fifo(name)`` the other queues (``"values"``, ``"tags"`` and
    ``"front<s>"``); both default to process memory."""

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
        self.blocks = BInt(monoid, new_level=new_level)  # block j's aggregate at position j
        self._open = EMPTY  # aggregate of the incomplete block's elements
        self.values = new_fifo("values")
        self.tags = new_fifo("tags") if tagged else None
        self.fronts = [new_fifo(f"front{s}") for s in range(windows)]
        self._lo = [0] * windows
        self._pivot = [0] * windows
        self._back = [EMPTY] * windows
        # the loaded piece of each window: its start, suffix aggregates and tags
        self._start = [0] * windows
        self._suffixes: list[list] = [[] for _ in range(windows)]
        self._piece_tags: list[list] = [[] for _ in range(windows)]

    @property
    def hi(self) -> int:
        """Position of the next element."""
        return self.values.hi

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

        A block's worth of elements is stored first, then each window runs
        over them on its own (it reads only positions it has reached, and
        the blocks answer those whatever came after), then the storage
        forgets what no window holds any more."""
        k = self.windows
        tagged = self.tags is not None
        if tagged and (tags is None or cutoffs is None or len(cutoffs) != k):
            raise ValueError(f"tagged windows need tags= and cutoffs= ({k} sequences, one per window)")
        out = [[] for _ in range(k)]
        step = self.chunk
        for a in range(0, len(values), step):
            part = list(values[a : a + step])
            start = self.values.hi
            self._store(part)
            if tagged:
                self.tags.extend(list(tags[a : a + step]))
            for s in range(k):
                out[s] += (self._run_tagged(s, part, start, cutoffs[s][a : a + step]) if tagged
                           else self._run_counted(s, part, start))
            self._forget()
        return out

    def _store(self, part: list) -> None:
        """Append the elements and aggregate the blocks they complete."""
        chunk, combine, blocks = self.chunk, self._combine, self.blocks
        pos = self.values.hi
        self.values.extend(part)
        i = 0
        while i < len(part):
            take = min(chunk - pos % chunk, len(part) - i)
            acc = self._open
            piece = part[i : i + take]
            acc = reduce(combine, piece) if acc is EMPTY else reduce(combine, piece, acc)
            i += take
            pos += take
            if pos % chunk == 0:
                blocks.append(acc)
                acc = EMPTY
            self._open = acc

    def _forget(self) -> None:
        """Drop the elements, tags and blocks before every window's oldest."""
        oldest = min(self._lo)
        if oldest > self.values.lo:
            self.values.lo = oldest
            if self.tags is not None:
                self.tags.lo = oldest
            self.blocks.evict(-(-oldest // self.chunk))

    def _run_tagged(self, s: int, values: list, hi: int, cutoffs: Sequence) -> list:
        """Window ``s`` over ``values`` (at positions from ``hi``), evicting by tag."""
        combine, identity = self._combine, self.monoid.identity
        lo, pivot, b = self._lo[s], self._pivot[s], self._back[s]
        start, suffixes, piece_tags = self._start[s], self._suffixes[s], self._piece_tags[s]
        end = start + len(suffixes)
        results = []
        add = results.append
        for v, cut in zip(values, cutoffs):
            hi += 1
            b = v if b is EMPTY else combine(b, v)
            while True:
                if lo == end:  # the loaded piece is used up
                    if lo == hi:
                        break
                    if lo == pivot:
                        self._flip(s, lo, hi)
                        pivot, b = hi, EMPTY
                    start, suffixes, piece_tags = self._load(s, lo, pivot)
                    end = start + len(suffixes)
                if piece_tags[lo - start] > cut:
                    break
                lo += 1
            if lo == end:
                add(identity if b is EMPTY else b)
            else:
                f = suffixes[lo - start]
                add(f if b is EMPTY else combine(f, b))
        self._lo[s], self._pivot[s], self._back[s] = lo, pivot, b
        self._start[s], self._suffixes[s], self._piece_tags[s] = start, suffixes, piece_tags
        return results

    def _run_counted(self, s: int, values: list, hi: int) -> list:
        """Window ``s`` over ``values`` (at positions from ``hi``), keeping
        the newest ``counts[s]``."""
        combine, count = self._combine, self.counts[s]
        lo, pivot, b = self._lo[s], self._pivot[s], self._back[s]
        start, suffixes = self._start[s], self._suffixes[s]
        end = start + len(suffixes)
        results = []
        add = results.append
        for v in values:
            hi += 1
            b = v if b is EMPTY else combine(b, v)
            keep = hi - count  # below hi: the newest element stays
            while True:
                if lo == end:  # the loaded piece is used up
                    if lo == pivot:
                        self._flip(s, lo, hi)
                        pivot, b = hi, EMPTY
                    start, suffixes, _ = self._load(s, lo, pivot)
                    end = start + len(suffixes)
                if lo >= keep:
                    break
                lo += 1
            f = suffixes[lo - start]
            add(f if b is EMPTY else combine(f, b))
        self._lo[s], self._pivot[s], self._back[s] = lo, pivot, b
        self._start[s], self._suffixes[s] = start, suffixes
        return results

    def _flip(self, s: int, a: int, hi: int) -> None:
        """Window ``s``'s empty front becomes ``[a, hi)``: its pieces (cut at
        the block boundaries) and each one's ``S``.  O(C) monoid calls for the
        last piece, O(log(W / C)) per other piece."""
        front, chunk, combine = self.fronts[s], self.chunk, self._combine
        if front.lo != front.hi:
            raise AssertionError(f"window {s} flipped with pieces left in its front")
        last = max(a, (hi - 1) // chunk * chunk)  # the last piece's start
        tail = reduce(combine, self.values.span(last, hi)) if last > a else EMPTY
        for start in range(a, hi, chunk) if a % chunk == 0 else [a, *range(a // chunk * chunk + chunk, hi, chunk)]:
            after = start // chunk * chunk + chunk  # the next piece's start
            if after > last:
                front.extend([start, None])  # the last piece: nothing after it
            elif after == last:
                front.extend([start, tail])
            else:
                front.extend([start, combine(self.blocks.range(after // chunk, last // chunk), tail)])

    def _load(self, s: int, lo: int, pivot: int) -> tuple[int, list, list]:
        """Window ``s``'s next piece, which starts at ``lo``: its suffix
        aggregates (and tags).  O(C) monoid calls, one read per queue."""
        front = self.fronts[s]
        j = front.lo
        start, after = front[j], front[j + 1]
        end = front[j + 2] if j + 2 < front.hi else pivot
        front.lo = j + 2
        if start != lo:
            raise AssertionError(f"window {s}'s next piece starts at {start}, not at its oldest element {lo}")
        values = self.values.span(start, end)
        combine = self._combine
        acc = EMPTY if end == pivot else after
        suffixes = [None] * len(values)
        for i in range(len(values) - 1, -1, -1):
            v = values[i]
            acc = v if acc is EMPTY else combine(v, acc)
            suffixes[i] = acc
        return start, suffixes, (self.tags.span(start, end) if self.tags is not None else [])

    def local_size(self) -> int:
        """Elements held in process memory: the queues' and the loaded pieces'."""
        queues = [*self.blocks.levels, self.values, *self.fronts] + ([self.tags] if self.tags is not None else [])
        return sum(q.local_size() for q in queues) + sum(map(len, self._suffixes)) + sum(map(len, self._piece_tags))

"""The level machinery both MTA engines share (paper sections 4.1.4 and 4.1.5).

* :func:`bulk_search` is Algorithm 2's root-to-leaf search (lines 1-20);
  the Log MTA runs it on its tree, the Amortized MTA on its forest
  (section 4.2.4).
* :func:`repair_heads` and :func:`recompute_spine` restore the leftmost
  branch afterwards (Algorithm 2, lines 21-27).
* :class:`LevelEngine` owns the level queues and where they live: in
  process memory by default, or in a shared store (section 4.1.5), with
  checkpoints to resume a window in another process.

Store protocol: :mod:`mta.storage` (``mta`` never imports a store; an engine
built with ``store=s, window_id=w`` asks ``s.open_window`` for its
:class:`~mta.storage.WindowStorage`).
"""

from __future__ import annotations

from typing import Any

from .engine import Engine
from .errors import MTAError
from .level_queue import LevelQueue, MemoryLevelQueue
from .monoid import Monoid
from .markers import EMPTY
from .storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE



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



class LevelEngine(Engine):
    """Base of the two MTA engines: level queues, storage options, checkpoints.

    Options: ``store`` and ``window_id`` keep the level queues in a shared
    store (``buffer_size`` and ``cache_size`` pairs per level, default
    :data:`mta.storage.DEFAULT_BUFFER_SIZE` and ``DEFAULT_CACHE_SIZE``,
    as in the paper's section 5.1; further ``storage_options`` such as
    ``resume=`` and ``retain=`` go to ``store.open_window``);
    ``level_queue(level, lo)`` builds in-memory levels otherwise.
    """

    #: Trailing elements per level that the engine may still rewrite; a
    #: store-backed level keeps them in process memory until they are final.
    MUTABLE_TAIL = 0

    def __init__(
        self,
        monoid: Monoid,
        wsp=None,
        *,
        store=None,
        window_id: str | None = None,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        cache_size: int = DEFAULT_CACHE_SIZE,
        level_queue=MemoryLevelQueue,
        **storage_options,
    ) -> None:
        super().__init__(monoid, wsp)
        self._combine = monoid.combine
        name = type(self).__name__
        for option, value in (("buffer_size", buffer_size), ("cache_size", cache_size)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name}: {option} must be a positive int, got {value!r}")
        if store is None:
            if window_id is not None or storage_options:
                given = ", ".join(["window_id"] * (window_id is not None) + sorted(storage_options))
                raise TypeError(f"{name}: {given} need a store= to apply to")
            self._storage = None
            self._new_level = level_queue
            self._levels: list[LevelQueue] = [level_queue(0, 0)]
            return
        if not isinstance(window_id, str) or not window_id:
            raise TypeError(f"{name}: store= needs window_id=, a non-empty str (got {window_id!r})")
        self._storage = store.open_window(
            window_id,
            engine=name,
            mutable_tail=self.MUTABLE_TAIL,
            buffer_size=buffer_size,
            cache_size=cache_size,
            **storage_options,
        )
        self._new_level = self._storage.new_level
        self._levels = self._storage.levels or [self._new_level(0, 0)]

    def __len__(self) -> int:
        q = self._levels[0]
        return q.hi - q.lo

    def height(self) -> int:
        """Number of levels in use (1 for an empty window)."""
        return len(self._levels)

    def checkpoint(self, label: Any = None) -> int:
        """Make the window durable in its store and return the checkpoint's
        version: an engine built later with the same store and ``window_id``
        resumes exactly this state (``resume=version`` picks an older retained
        one) and finds ``label`` (a small value the store's codec encodes) in
        :attr:`resumed_label`.  Raises ``stores.FencingError`` if a newer
        owner took the window over (where the storage defers the write to a
        batch of windows, the batch's commit raises it)."""
        if self._storage is None:
            raise TypeError(f"{type(self).__name__}.checkpoint() needs an engine built with store=")
        self._check_usable()  # never make a half-updated window durable
        return self._storage.checkpoint(self._levels, label)

    @property
    def resumed_label(self) -> Any:
        """The label of the checkpoint this engine resumed (``None``: none,
        or the window started empty)."""
        return None if self._storage is None else self._storage.label

    def close(self, *, delete: bool = False) -> None:
        """Wait for the window's background store I/O (flushes, prefetches);
        with ``delete=True`` also remove the window's data from the store (a
        window that is done for good).  A store-backed engine is unusable
        afterwards (what was not checkpointed is not kept); an in-memory
        engine is left as it is."""
        if self._storage is not None and self._failed_in != "close":
            self._storage.close(self._levels, delete=delete)
            self._failure = MTAError("use a new engine (resume=True continues from the last checkpoint)")
            self._failed_in = "close"

    @property
    def store_stats(self):
        """The store's counters (``None`` for an in-memory engine)."""
        return None if self._storage is None else self._storage.stats

    def local_size(self) -> int:
        """Pairs' elements and values held in process memory: the levels'
        tails, buffers and caches plus the engine's own O(log n) state."""
        return sum(q.local_size() for q in self._levels) + len(self._levels)

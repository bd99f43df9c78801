"""A level's head cache: pairs read from the store ahead of the head.

The cache half of :class:`stores.level_queue.StoreLevelQueue` (see its
module for the level's other parts): the cache is refilled ahead of the
head in the background when less than one read-ahead remains (the paper
refills at half its cache; here one read-ahead stays ahead while the next is
read, since a background thread may wait a GIL switch interval before it
runs), synchronously on a miss (:data:`MISS_BATCH` pairs).

The read-ahead starts at :data:`MISS_BATCH` pairs and doubles with every
prefetch the head reaches, up to ``cache_size`` pairs: a long run settles
at ``cache_size`` pairs per read (O(1) round trips per element, as in the
paper), while a window opened for a few evictions (a streaming key's
micro-batch, resumed from its checkpoint with empty caches) reads a few
pairs per level instead of ``cache_size`` that its close would throw away.

A cache hit in ``[cache_lo, fast_end)`` needs no tending; the first hit at
or after ``check_at`` takes a finished prefetch, drops consumed pairs and
starts the next prefetch (:meth:`HeadCache._tend`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .background import ready

if TYPE_CHECKING:
    from .window import WindowStorage

__all__ = ["DRAIN_CHECKS", "MISS_BATCH", "HeadCache", "snapshot"]

#: Pairs read synchronously on a cache miss before the background refill.
MISS_BATCH = 8
#: Urgent refills of a level with no insert in between before its
#: prefetches start without waiting for the next insert (a draining window).
DRAIN_CHECKS = 8


class HeadCache:
    """The head cache of a :class:`stores.level_queue.StoreLevelQueue`
    (its slots hold the state: ``_cache``, ``_cache_lo``, ``_prefetch``,
    ``_check_at``, ``_fast_end``, ``_quiet``, ``_quiet_hi``, ``_ahead``: the
    read-ahead in pairs)."""

    __slots__ = ()

    _w: "WindowStorage"
    level: int
    lo: int
    stored: int
    _cache: list
    _cache_lo: int
    _prefetch: tuple[Any, int, int] | None
    _check_at: int
    _fast_end: int
    _quiet: int
    _quiet_hi: int
    _ahead: int
    segment_end: Any  # StoreLevelQueue.segment_end

    def _tend(self, i: int) -> None:
        """Take a finished prefetch, drop consumed pairs, start a prefetch
        when fewer than ``cache_size`` pairs are left ahead of ``i``; then
        decide when the next hit should do this again."""
        pf = self._prefetch
        # a prefetch is taken once its reply is in, or when the head gets near
        # (reading a reply can wait: after a bulk eviction it is often useless)
        self._take_prefetch(wait=pf is not None and self._end() - i < self._ahead)
        self._trim()
        self.prefetch_ahead()
        ahead = self._end() - i
        size = self._ahead
        if self._prefetch is None and ahead > 2 * size:
            self._check_at = i + ahead - 2 * size  # the refill point
        else:  # a prefetch in flight, or nothing more in the store yet: poll
            self._check_at = i + min(32, max(1, size >> 4))

    def _miss(self, i: int):
        """Position ``i`` is not in the cache: take the prefetch that holds
        it, or read it from the store (extending or restarting the cache)."""
        pf = self._prefetch
        if pf is not None:
            future, start, count = pf
            if ready(future):
                self._take_prefetch(wait=False)
            elif start <= i < start + 2 * count:  # on its way: wait for it
                self._w.counters.prefetch_waits += 1
                self._take_prefetch(wait=True)
            else:  # it does not hold i (a bulk eviction jumped ahead): let it go
                self._prefetch = None
                self._w.orphan(future)
        self._trim()
        c = i - self._cache_lo
        if 0 <= c < len(self._cache):
            self._w.counters.cache_hits += 1
        else:
            w = self._w
            w.counters.cache_misses += 1
            if w.heads_due:  # a resumed window's first miss: every level's head in one round trip
                w.read_heads()
            if not 0 <= i - self._cache_lo < len(self._cache):
                if i < self._cache_lo or i - self._cache_lo >= 4 * w.cache_size - 2:
                    # restart at i's pair (reading the gap would overgrow the cache)
                    self._cache, self._cache_lo = [], i & ~1
                end = (self._cache_lo + len(self._cache)) >> 1
                self._cache += self._fetch(end, self._to_group_end(end, max(MISS_BATCH, ((i >> 1) - end) + 1)))
        self.prefetch_ahead()
        self._check_at = self._fast_end = 0
        return self._cache[i - self._cache_lo]

    def head_range(self) -> tuple[int, int] | None:
        """``(first, count)``: the pairs a miss at the head would read now
        (from the head's pair, :data:`MISS_BATCH` of them to the end of
        their group, within one owner's segment), or ``None`` when the head
        is not in the store or the cache is in use.  O(segments)."""
        first = self.lo >> 1
        if self._cache or self._prefetch is not None or first >= self.stored:
            return None
        count = self._to_group_end(first, MISS_BATCH)
        end = self.segment_end(first)
        return first, min(count, end - first) if end is not None else count

    def adopt(self, cache_lo: int, values: list) -> None:
        """Take as the cache the elements ``values`` from position
        ``cache_lo`` that this level's cache held when the checkpoint it
        was restored from was taken (:func:`snapshot`), if they hold every
        pair :meth:`head_range` would read: the heads need no read then.
        Pairs are never rewritten once stored; a head the engine recomputed
        in its cache differs from the stored pair, and is what the engine
        would have gone on with (it recomputes heads before reading them,
        :mod:`stores.meta_cache`).  O(cache)."""
        wanted = self.head_range()
        if wanted is None:
            return
        first, count = wanted
        start = first << 1
        if cache_lo <= start and start + 2 * count <= cache_lo + len(values):
            self.fill_head(first, values[start - cache_lo:start - cache_lo + 2 * count])

    def fill_head(self, first: int, values: list) -> None:
        """The elements of the pairs from ``first`` read for
        :meth:`head_range` become the cache.  O(1)."""
        self._cache, self._cache_lo = values, first << 1
        self._check_at = self._fast_end = 0

    def _end(self) -> int:
        """First position after the cache."""
        return self._cache_lo + len(self._cache)

    def _to_group_end(self, first: int, count: int) -> int:
        """``count`` pairs from ``first``, rounded up to the end of their last
        group (which is read whole anyway), and not beyond the stored pairs."""
        size = self._w.group
        return min(-(-(first + count) // size) * size, self.stored) - first

    def _fetch(self, first: int, count: int) -> list:
        """Pairs ``[first, first + count)`` as a flat list of elements."""
        return self._w.read(self, first, count)

    def _trim(self) -> None:
        """Drop cached pairs behind the head's pair: the cache then starts at or
        after it, so it never extends into pairs evicted before being written."""
        head = (self.lo >> 1) << 1
        dead = head - self._cache_lo
        if dead > 0:
            self._fast_end = 0
            if dead >= len(self._cache):
                self._cache, self._cache_lo = [], head
            else:
                del self._cache[:dead]
                self._cache_lo = head

    def prefetch_ahead(self, now: bool = False) -> None:
        """Refill ahead of the head in the background when running low.

        The read is started at the engine's next insert (any level's
        ``append``), or ``now``: an eviction that reads many levels (a bulk
        eviction) thus sends no prefetch that its own jump would make
        useless, and the prefetch starts from where the head ended up.  An
        engine that keeps evicting without inserting (draining its window)
        would then refill by cache misses only: once a level has asked
        DRAIN_CHECKS times with fewer than ``cache_size / 2`` elements left
        and no insert since, its prefetches start at once."""
        w = self._w
        self._trim()  # the head may have moved since the cache was last used
        end = self._end()
        size = self._ahead
        if self._prefetch is None and end - self.lo < 2 * size and end < self.stored << 1:
            if not w.background:
                return  # without background I/O the next miss refills synchronously
            if not now and (end - self.lo >= size >> 1 or not self._draining()):
                w.want_prefetch(self)
                return
            count = self._to_group_end(end >> 1, size)
            self._prefetch = (w.start_read(self, end >> 1, count), end, count)

    def _draining(self) -> bool:
        """Counted in the engine's reads: no insert for DRAIN_CHECKS checks."""
        leaf = self._w.leaf
        hi = leaf.hi if leaf is not None else 0
        if hi != self._quiet_hi:
            self._quiet_hi, self._quiet = hi, 0
        self._quiet += 1
        return self._quiet > DRAIN_CHECKS

    def _take_prefetch(self, wait: bool) -> None:
        if self._prefetch is None:
            return
        future, start, _ = self._prefetch
        if not wait and not ready(future):
            return
        self._prefetch = None
        self._check_at = self._fast_end = 0
        values = future.result()
        if not self._cache:  # the head went past the cache: start over from the prefetch
            self._cache, self._cache_lo = values, start
            self._trim()
        elif start == self._cache_lo + len(self._cache):
            self._cache += values  # still contiguous with the cache
        else:
            return
        self._ahead = min(2 * self._ahead, self._w.cache_size)  # the head reached it: read further ahead


def snapshot(levels: list) -> dict:
    """``level -> (first position, elements)``: the pairs each level's cache
    holds from its head's pair on, as many as :meth:`HeadCache.adopt` takes
    when this state is resumed (:data:`MISS_BATCH` pairs to the end of their
    group), for the levels whose cache holds them all.  O(levels x group)."""
    heads = {}
    for q in levels:
        cache, first = q._cache, q.lo >> 1
        start = 2 * first - q._cache_lo
        if cache and first < q.stored and 0 <= start:
            end = start + 2 * q._to_group_end(first, MISS_BATCH)
            if end <= len(cache):
                heads[q.level] = (q._cache_lo + start, cache[start:end])
    return heads

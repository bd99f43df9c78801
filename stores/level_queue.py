"""One level of a window in a store: recent elements and head cache in
process memory, the rest in the store (paper section 4.1.5, Fig. 3 and 4c).

Per level, :class:`StoreLevelQueue` keeps in process memory

* the *recent* elements: those not yet confirmed in the store, i.e. the
  tail (elements the engine may still rewrite) and the write buffer of final
  pairs, written in one round trip once ``buffer_size`` pairs are final, in
  the background when possible;
* the head *cache*: pairs read from the store ahead of the head,
  ``cache_size`` pairs at a time (:class:`stores.head_cache.HeadCache`).

A level talks to its window's storage (:class:`stores.window.WindowStorage`)
through the storage's public methods only: ``start_write``, ``start_read``,
``read``, ``opened``, ``closed``, ``discarded``, ``want_prefetch``,
``start_prefetches``, ``orphan``, ``note_written`` and its ``counters``;
the storage calls a level's ``prefetch_ahead``, ``settle``, ``elements``,
``take_hits``, ``record`` and ``restore``.
"""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any

from mta.level_queue import LevelQueue

from .codec import decode, encode
from .errors import CorruptValue, FormatVersionError, MissingData
from .head_cache import DRAIN_CHECKS, MISS_BATCH, HeadCache

if TYPE_CHECKING:
    from .window import WindowStorage

__all__ = ["DRAIN_CHECKS", "MISS_BATCH", "TAIL_KEPT", "StoreFifo", "StoreLevelQueue"]

#: Elements at the end of each level that stay in process memory (the tail).
TAIL_KEPT = 2


class StoreLevelQueue(HeadCache, LevelQueue):
    """One level: recent elements and head cache in memory, the rest in the store.

    Positions ``[2 * stored, hi)`` are *recent* (not confirmed in the store);
    ``[cache_lo, cache_lo + len(cache))`` is the cache, starting at or
    before ``lo``.  Pair ``j`` (elements ``2j, 2j + 1``) is final once
    ``2j + 1 < hi - mutable_tail``.
    """

    __slots__ = (
        "_w",
        "stored",
        "_recent",
        "_cache",
        "_cache_lo",
        "_flush",
        "_prefetch",
        "segments",
        "written",
        "_base",
        "_flush_at",
        "_check_at",
        "_fast_end",
        "_hits",
        "_quiet",
        "_quiet_hi",
        "_ahead",
    )

    def __init__(self, storage: "WindowStorage", level: int, lo: int) -> None:
        super().__init__(level, lo)
        self._w = storage
        self.stored = lo >> 1  # pairs below this index are in the store (or dead)
        self._recent: list = [None] * (lo & 1)  # elements from position 2 * stored
        self._cache: list = []
        self._cache_lo = 0
        self._flush: tuple[Any, int] | None = None  # (future or Pending, pairs in flight)
        self._prefetch: tuple[Any, int, int] | None = None  # (future or Pending, first position, pairs)
        self.segments: list[list[int]] = []  # [epoch, first pair] written by each owner
        self.written = self.stored  # pairs ever written up to here (for clean-up)
        self._hits = 0  # cache hits not yet added to the window's stats
        self._check_at = 0  # a cache hit at or after this position tends the cache
        self._fast_end = 0  # [cache_lo, fast_end): cache hits that need no tending
        self._quiet = 0  # urgent prefetch checks since the leaf level last grew
        self._quiet_hi = -1
        self._ahead = min(MISS_BATCH, storage.cache_size)  # pairs the next prefetch reads (it grows with use)
        self._rebase()
        storage.opened(self)

    def _rebase(self) -> None:
        """After ``stored`` or the flush in flight changed: where the recent
        elements start, and the ``hi`` at which ``append`` starts a flush
        (``buffer_size`` final pairs beyond those stored or in flight)."""
        self._base = self.stored << 1
        inflight = self._flush[1] if self._flush else 0
        self._flush_at = 2 * (self.stored + inflight + self._w.buffer_size) + self._w.mutable_tail

    # -- reads and writes -------------------------------------------------
    def __getitem__(self, i: int):
        lo = self._cache_lo
        if lo <= i < self._fast_end:  # the usual case: a cache hit
            self._hits += 1
            return self._cache[i - lo]
        base = self._base
        if i >= base:
            return self._recent[i - base]
        cache = self._cache
        c = i - lo
        if 0 <= c < len(cache):
            self._hits += 1
            value = cache[c]
            if i >= self._check_at:
                self._tend(i)
            self._fast_end = min(self._cache_lo + len(self._cache), self._check_at)
            return value
        return self._miss(i)

    def span(self, a: int, b: int) -> list:
        """Elements ``[a, b)``: recent and cached ones from memory, the rest
        in one read, which leaves the head cache as it is."""
        base, lo, cache = self._base, self._cache_lo, self._cache
        stop = min(b, base)
        out = cache[a - lo : min(stop, lo + len(cache)) - lo] if lo <= a < stop else []
        self._hits += len(out)
        a += len(out)
        if a < stop:  # in the store only
            first = a >> 1
            out += self._fetch(first, ((stop + 1) >> 1) - first)[a - 2 * first : stop - 2 * first]
            a = stop
        return out + self._recent[a - base : b - base] if a < b else out

    def __setitem__(self, i: int, value) -> None:
        base = self._base
        if i >= base:
            self._recent[i - base] = value
            return
        c = i - self._cache_lo
        if not 0 <= c < len(self._cache):
            self._miss(i)
            c = i - self._cache_lo
        self._cache[c] = value  # head recomputations stay local (see module doc)

    def append(self, value) -> None:
        self._recent.append(value)
        hi = self.hi = self.hi + 1
        if hi >= self._flush_at:  # buffer_size pairs became final
            self._start_flush((hi - self._w.mutable_tail) >> 1)
        if self._w.wanted:  # prefetches asked for while the engine was only reading
            self._w.start_prefetches()

    def extend(self, values) -> None:
        """Append every value of the list ``values``: one flush check."""
        if not values:
            return
        self._recent += values
        hi = self.hi = self.hi + len(values)
        if hi >= self._flush_at:
            self._start_flush((hi - self._w.mutable_tail) >> 1)
        if self._w.wanted:
            self._w.start_prefetches()

    def discard(self) -> None:
        # The level's I/O in flight is not waited for (a bulk eviction that
        # drops levels must not stall on their flushes or prefetches): the
        # window waits for it before its next checkpoint and on close.
        for pending in (self._flush, self._prefetch):
            if pending is not None:
                self._w.orphan(pending[0])
        self._flush = self._prefetch = None
        self._fast_end = 0
        self._w.discarded(self)
        self._w.closed(self)
        self.lo = self.hi
        self._recent = []
        self._cache = []

    def local_size(self) -> int:
        return len(self._recent) + len(self._cache)

    def take_hits(self) -> int:
        """Cache hits since the last call (folded into the window's stats)."""
        hits, self._hits = self._hits, 0
        return hits

    # -- write buffer -----------------------------------------------------
    def _start_flush(self, final: int) -> None:
        """Write the complete groups of final pairs not yet in the store, in
        the background."""
        if self._flush is not None:
            self._finish_flush()
        dead = min(self.lo >> 1, final) - self.stored
        if dead > 0:  # evicted before they were written: nothing to store
            del self._recent[: 2 * dead]
            self.stored += dead
            self._rebase()
        first = self.stored
        w = self._w
        size = w.group
        count = final - final % size - first
        if count <= 0:
            return
        recent = self._recent
        blobs = []
        start = first
        for g, end in enumerate(range(first - first % size + size, first + count + 1, size), first // size):
            value = (start, recent[2 * (start - first) : 2 * (end - first)])
            blobs.append(encode(value, bind=w.place(w.epoch, self.level, g)))
            start = end
        self._flush = (w.start_write(self.level, first // size, blobs, count), count)
        self._rebase()
        self._note_written(first, count)
        if not w.background:
            self._finish_flush()

    def _finish_flush(self) -> None:
        """The flushed pairs are confirmed: those at or after the head move to
        the cache (keeping head values the engine rewrote meanwhile)."""
        future, count = self._flush
        try:
            future.result()
        finally:
            self._flush = None
        start = self.stored << 1
        flushed = self._recent[: 2 * count]
        del self._recent[: 2 * count]
        self.stored += count
        self._rebase()
        self._check_at = self._fast_end = 0  # the cache may grow below: tend it at the next hit
        self._trim()
        if not self._cache:
            self._cache_lo = max(self._cache_lo, start)
        skip = self._cache_lo + len(self._cache) - start
        if 0 <= skip < len(flushed):  # contiguous with the cache
            room = 2 * self._w.cache_size - len(self._cache)
            self._cache += flushed[skip : skip + max(room, 0)]

    def flush_all(self) -> None:
        """Write every complete group of final pairs now (for a checkpoint,
        whose record keeps the rest)."""
        self._start_flush((self.hi - self._w.mutable_tail) >> 1)
        if self._flush is not None:
            self._finish_flush()

    def _note_written(self, first: int, count: int) -> None:
        epoch = self._w.epoch
        if not self.segments or self.segments[-1][0] != epoch:
            self.segments.append([epoch, first])
        self.written = first + count
        self._w.note_written(self.level, self.written)

    # -- groups read from the store -------------------------------------
    def elements(self, first: int, count: int, group: int, blobs: list, epoch: int) -> list:
        """The elements of pairs ``[first, first + count)`` from the blobs of
        groups ``group, group + 1, ...`` read from ``epoch``'s namespace
        (given by the reader: a background read is decoded after the head
        may have moved past its segment), checked: a missing group, a corrupt
        value, another format, a value that is not the expected group or, with
        ``element_arity``, elements of another shape is an error naming the
        window, the level and the group."""
        w = self._w
        size = w.group
        out: list = []
        for g, blob in enumerate(blobs, group):
            lo, hi = g * size, (g + 1) * size
            where = f"window {w.window!r} in {w.store.url}: group {g} (pairs {lo}..{hi - 1}) of level {self.level}"
            if blob is None:
                raise w.missing(where)
            try:
                start, items = decode(blob, bind=w.place(epoch, self.level, g))
            except (CorruptValue, FormatVersionError) as exc:
                raise type(exc)(f"{where}: {exc}") from exc
            except (TypeError, ValueError):
                start = items = None
            a, b = max(first, lo), min(first + count, hi)
            if (type(start) is not int or type(items) is not list or not lo <= start <= a
                    or len(items) != 2 * (hi - start)):
                raise CorruptValue(f"{where}: the value is not that group's pairs")
            if w.element_arity is not None:
                _check_elements(items, w.element_arity, 2 * start, where)
            out += items[2 * (a - start) : 2 * (b - start)]
        return out

    def settle(self) -> None:
        """Wait for background work on this level."""
        if self._flush is not None:
            self._finish_flush()
        if self._prefetch is not None:
            self._prefetch[0].exception()
            self._prefetch = None

    # -- checkpoint records -----------------------------------------------
    def record(self) -> dict:
        base = self.stored << 1
        return {
            "lo": self.lo,
            "hi": self.hi,
            "stored": self.stored,
            "tail": list(self._recent[max(0, self.lo - base) :]),
            "segments": [list(s) for s in self.segments],
        }

    @classmethod
    def restore(cls, storage: "WindowStorage", level: int, rec: dict) -> "StoreLevelQueue":
        q = cls(storage, level, rec["lo"])
        q.hi = rec["hi"]
        q.stored = rec["stored"]
        q._rebase()
        q.written = q.stored
        q.segments = [list(s) for s in rec["segments"]]
        base = q.stored << 1
        q._recent = [None] * max(0, q.lo - base) + list(rec["tail"])
        if len(q._recent) != q.hi - base:
            raise CorruptValue(
                f"window {storage.window!r} in {storage.store.url}: level {level} checkpoint record is inconsistent"
            )
        return q

    def segment_end(self, pair: int) -> int | None:
        """The first pair of the owner segment after ``pair``'s (``None``
        when ``pair``'s segment is the last): a read from ``pair`` stops
        there, each segment being under its own epoch.  O(segments)."""
        return next((first for _, first in self.segments if first > pair), None)

    def epoch_of(self, pair: int) -> int:
        """The epoch whose namespace holds ``pair``."""
        epoch = None
        for e, first in self.segments:
            if first > pair:
                break
            epoch = e
        if epoch is None:
            raise MissingData(f"window {self._w.window!r}: no owner wrote pair {pair} of level {self.level}")
        return epoch


_TUPLE = frozenset({tuple})


def _check_elements(items: list, arity: int, position: int, where: str) -> None:
    """Raise CorruptValue naming the first of a group's ``items`` (from
    ``position`` of its level) that is not a tuple of ``arity`` values:
    a group in a valid encoding, bound to its place, that another
    application or version wrote (the engine would fail on it with whatever
    its monoid raises).  The first may be None: a level whose head is odd
    when it starts or resumes holds None for the dead element before it,
    and writes it with its pair.  O(len(items)), at C speed when all fit."""
    if set(map(type, items)) == _TUPLE and set(map(len, items)) == {arity}:
        return
    for i, e in enumerate(items):
        if not (type(e) is tuple and len(e) == arity or i == 0 and e is None):
            raise CorruptValue(f"{where}: element {position + i} is {reprlib.repr(e)}, not a tuple of {arity} "
                               f"values (element_arity={arity}): not what the engine writes")


class StoreFifo(StoreLevelQueue):
    """A level queue of its own in the store, for values that leave in
    arrival order (a range window's times); see :meth:`stores.Store.open_fifo`."""

    __slots__ = ()

    #: The "engine" a FIFO's storage is claimed for: no engine resumes it.
    LAYOUT = "fifo"

    def close(self, *, delete: bool = False) -> None:
        """Wait for its background I/O; ``delete=True`` removes it from the store."""
        self._w.close([self], delete=delete)

"""A window's level queues in a store: tails, buffer and cache (paper section
4.1.5, Fig. 3 and 4c; section 5.1), checkpoints, fencing and clean-up.

Per level, :class:`StoreLevelQueue` keeps in process memory

* the *recent* elements: those not yet confirmed in the store, i.e. the
  tail (elements the engine may still rewrite) and the write buffer of final
  pairs, written in one round trip once ``buffer_size`` pairs are final, in
  the background when possible;
* the head *cache*: pairs read from the store, ``cache_size`` pairs at a
  time, refilled ahead of the head in the background when fewer than
  ``cache_size`` pairs remain (the paper refills at half its cache; here one
  cache-worth stays ahead while the next is read, since a background thread
  may wait a GIL switch interval, 5 ms, before it runs), synchronously on a
  miss.

Everything else lives in the store, in *groups*: the pairs ``[g G, (g + 1) G)``
of a level are one value under key ``g`` (``G`` = ``group_size``, 16 pairs by
default, fixed when the window is created), so that encoding, checksums and
the store's protocol cost one call per group rather than per pair.  Only
whole groups are written; a checkpoint keeps the pairs of the incomplete last
group in its record.  A group written after a jump of the head (pairs evicted
before they were stored) starts at its first live pair, so each value is
``(first pair, elements)``.  Process memory is bounded by levels x
(buffer + cache), whatever the window's length.

Durability and fencing.  Each group key is written once and never rewritten:
groups are only written when complete and final, and each owner writes under its own
*epoch*.  Opening a window claims it: the epoch in its metadata record is
raised by compare-and-set, and a former owner becomes stale.  A checkpoint
flushes the buffers, then commits the levels' bounds, their unflushed tails
and which epoch wrote which pairs, by compare-and-set on the metadata; a
stale owner's commit fails with :class:`FencingError`, and the pairs it
keeps writing sit under its old epoch, which no newer checkpoint reads.

The last ``retain`` checkpoints stay resumable, with the checkpoint each of
them started from (a Spark micro-batch replayed after a failure resumes the
checkpoint of the last *committed* batch, which may not be the newest, and
may be replayed more than once).  After a commit, pairs below every retained
checkpoint's head are deleted, and epochs that nothing references are
dropped whole, with whatever a dead owner wrote after its last checkpoint.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from mta.level_queue import LevelQueue
from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from .codec import decode, encode
from .errors import CasMismatch, CorruptValue, FencingError, FormatVersionError, MissingData, StoreError

#: Version of the metadata record layout (2: pairs stored in groups).
META_FORMAT = 2
#: Pairs per stored value, for new windows (capped by their buffer size).
GROUP_SIZE = 16
#: Pairs read synchronously on a cache miss before the background refill.
MISS_BATCH = 8
#: Urgent refills of a level with no insert in between before its
#: prefetches start without waiting for the next insert (a draining window).
DRAIN_CHECKS = 8
#: Elements at the end of each level that stay in process memory (the tail).
TAIL_KEPT = 2


@dataclass
class WindowStats:
    """Counters of one window's store traffic."""

    round_trips: int = 0
    pairs_written: int = 0
    pairs_read: int = 0
    pairs_deleted: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    #: misses that waited for the prefetch in flight (it held the position)
    prefetch_waits: int = 0
    checkpoints: int = 0


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _background() -> ThreadPoolExecutor:
    """One small pool per process for flushes, prefetches and deletes."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mta-store")
        return _executor


#: Background tasks submitted and not finished yet (see drain_background).
_inflight = 0
_idle = threading.Condition(threading.Lock())


def _submit(fn, *args) -> Future:
    """Run ``fn(*args)`` on the background pool, counted in ``_inflight``."""
    global _inflight
    with _idle:
        _inflight += 1
    try:
        return _background().submit(_counted, fn, args)
    except BaseException:
        _finished()
        raise


def _counted(fn, args):
    try:
        return fn(*args)
    finally:
        _finished()


def _finished() -> None:
    global _inflight
    with _idle:
        _inflight -= 1
        if not _inflight:
            _idle.notify_all()


def drain_background(timeout: float = 60.0) -> None:
    """Wait until every background task submitted so far (the flushes and
    prefetches of every engine in this process) has finished; returns at
    once when none is running.  Benchmarks use it to charge that work to the
    engine that queued it.  Raises ``TimeoutError`` after ``timeout`` s."""
    with _idle:
        if not _idle.wait_for(lambda: not _inflight, timeout):
            raise TimeoutError(f"background store I/O still running after {timeout} s")


class StoreLevelQueue(LevelQueue):
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
    )

    def __init__(self, storage: "WindowStorage", level: int, lo: int) -> None:
        super().__init__(level, lo)
        self._w = storage
        self.stored = lo >> 1  # pairs below this index are in the store (or dead)
        self._recent: list = [None] * (lo & 1)  # elements from position 2 * stored
        self._cache: list = []
        self._cache_lo = 0
        self._flush: tuple[Future, int] | None = None  # (future, pairs in flight)
        self._prefetch: tuple[Future, int, int] | None = None  # (future, first position, pairs)
        self.segments: list[list[int]] = []  # [epoch, first pair] written by each owner
        self.written = self.stored  # pairs ever written up to here (for clean-up)
        self._hits = 0  # cache hits not yet added to the window's stats
        self._check_at = 0  # a cache hit at or after this position tends the cache
        self._fast_end = 0  # [cache_lo, fast_end): cache hits that need no tending
        self._quiet = 0  # urgent prefetch checks since the leaf level last grew
        self._quiet_hi = -1
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

    def _tend(self, i: int) -> None:
        """Take a finished prefetch, drop consumed pairs, start a prefetch
        when fewer than ``cache_size`` pairs are left ahead of ``i``; then
        decide when the next hit should do this again."""
        pf = self._prefetch
        # a prefetch is taken once its reply is in, or when the head gets near
        # (reading a reply can wait: after a bulk eviction it is often useless)
        self._take_prefetch(wait=pf is not None and self._end() - i < self._w.cache_size)
        self._trim()
        self._prefetch_ahead()
        ahead = self._end() - i
        size = self._w.cache_size
        if self._prefetch is None and ahead > 2 * size:
            self._check_at = i + ahead - 2 * size  # the refill point
        else:  # a prefetch in flight, or nothing more in the store yet: poll
            self._check_at = i + min(32, max(1, size >> 4))

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
        for end in range(first - first % size + size, first + count + 1, size):
            blobs.append(encode((start, recent[2 * (start - first) : 2 * (end - first)])))
            start = end
        if w.background:
            future = w.start_write(self.level, first // size, blobs, count)
        else:
            future = Future()
            future.set_result(w.write(self.level, first // size, blobs, count))
        self._flush = (future, count)
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

    # -- head cache -------------------------------------------------------
    def _miss(self, i: int):
        """Position ``i`` is not in the cache: take the prefetch that holds
        it, or read it from the store (extending or restarting the cache)."""
        pf = self._prefetch
        if pf is not None:
            future, start, count = pf
            if _ready(future):
                self._take_prefetch(wait=False)
            elif start <= i < start + 2 * count:  # on its way: wait for it
                self._w._stats.prefetch_waits += 1
                self._take_prefetch(wait=True)
            else:  # it does not hold i (a bulk eviction jumped ahead): let it go
                self._prefetch = None
                self._w.orphan(future)
        self._trim()
        c = i - self._cache_lo
        if 0 <= c < len(self._cache):
            self._w._stats.cache_hits += 1
        else:
            w = self._w
            w._stats.cache_misses += 1
            if i < self._cache_lo or i - self._cache_lo >= 4 * w.cache_size - 2:
                # restart at i's pair (reading the gap would overgrow the cache)
                self._cache, self._cache_lo = [], i & ~1
            end = (self._cache_lo + len(self._cache)) >> 1
            self._cache += self._fetch(end, self._to_group_end(end, max(MISS_BATCH, ((i >> 1) - end) + 1)))
        self._prefetch_ahead()
        self._check_at = self._fast_end = 0
        return self._cache[i - self._cache_lo]

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

    def elements(self, first: int, count: int, group: int, blobs: list) -> list:
        """The elements of pairs ``[first, first + count)`` from the blobs of
        groups ``group, group + 1, ...``, checked: a missing group, a corrupt
        value, another format or a value that is not the expected group is an
        error naming the window, the level and the group."""
        w = self._w
        size = w.group
        out: list = []
        for g, blob in enumerate(blobs, group):
            lo, hi = g * size, (g + 1) * size
            where = f"window {w.window!r} in {w.store.url}: group {g} (pairs {lo}..{hi - 1}) of level {self.level}"
            if blob is None:
                raise MissingData(
                    f"{where} is missing from the store (was it restarted without "
                    "persistence?); resume from a store that kept the data"
                )
            try:
                start, items = decode(blob)
            except (CorruptValue, FormatVersionError) as exc:
                raise type(exc)(f"{where}: {exc}") from exc
            except (TypeError, ValueError):
                start = items = None
            a, b = max(first, lo), min(first + count, hi)
            if (type(start) is not int or type(items) is not list or not lo <= start <= a
                    or len(items) != 2 * (hi - start)):
                raise CorruptValue(f"{where}: the value is not that group's pairs")
            out += items[2 * (a - start) : 2 * (b - start)]
        return out

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

    def _prefetch_ahead(self, now: bool = False) -> None:
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
        if self._prefetch is None and end - self.lo < 2 * w.cache_size and end < self.stored << 1:
            if not w.background:
                return  # without background I/O the next miss refills synchronously
            if not now and (end - self.lo >= w.cache_size >> 1 or not self._draining()):
                w.want_prefetch(self)
                return
            count = self._to_group_end(end >> 1, w.cache_size)
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
        if not wait and not _ready(future):
            return
        self._prefetch = None
        self._check_at = self._fast_end = 0
        values = future.result()
        if not self._cache:  # the head went past the cache: start over from the prefetch
            self._cache, self._cache_lo = values, start
            self._trim()
        elif start == self._cache_lo + len(self._cache):
            self._cache += values  # still contiguous with the cache

    def _settle(self) -> None:
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
                f"window {storage.window!r}: level {level} checkpoint record is inconsistent"
            )
        return q

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


class StoreFifo(StoreLevelQueue):
    """A level queue of its own in the store, for values that leave in
    arrival order (a range window's times); see :meth:`stores.Store.open_fifo`."""

    __slots__ = ()

    #: The "engine" a FIFO's storage is claimed for: no engine resumes it.
    LAYOUT = "fifo"

    def close(self, *, delete: bool = False) -> None:
        """Wait for its background I/O; ``delete=True`` removes it from the store."""
        self._w.close([self], delete=delete)


class WindowStorage:
    """One window in one store: ownership (epochs), level queues, checkpoints.

    Built by ``Store.open_window``; the engines in :mod:`mta` use it through
    the protocol described in :mod:`mta.tree`.  ``resume`` is ``True`` for the
    newest checkpoint, a version number for that checkpoint, or ``False`` to
    start empty (the window's old data is cleaned up by later checkpoints).
    """

    def __init__(
        self,
        store,
        window: str,
        *,
        engine: str,
        mutable_tail: int,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        cache_size: int = DEFAULT_CACHE_SIZE,
        group_size: int = GROUP_SIZE,
        resume: bool | int = True,
        retain: int = 2,
        background: bool = True,
    ) -> None:
        if type(retain) is not int or retain < 1:
            raise ValueError(f"retain must be a positive int, got {retain!r}")
        self.store = store
        self.window = window
        self.engine = engine
        # Trailing elements kept in memory: what the engine may rewrite, and
        # at least the last pair, which both engines read on every insert
        # (the Log MTA's leaf pair, the Amortized MTA's tree roots, Invariant 3).
        self.mutable_tail = max(mutable_tail, TAIL_KEPT)
        self.buffer_size = buffer_size
        self.cache_size = cache_size
        self.retain = retain
        self.background = background
        self._stats = WindowStats()
        self._queues: list[StoreLevelQueue] = []  # live levels (their cache hits are counted there)
        self._orphans: list[Future] = []  # prefetches nobody needs any more, still running
        # requests sent now, replies read later (Redis): no background threads needed
        self._channel = store.deferred_channel() if background else None
        self.wanted: list[StoreLevelQueue] = []  # levels whose prefetch waits for the next insert
        self.leaf: StoreLevelQueue | None = None  # level 0 (its growth tells inserts happened)
        self.levels: list[StoreLevelQueue] | None = None
        self.version: int | None = None  # the checkpoint resumed, then the last committed
        self._written: dict[int, int] = {}  # level -> pairs written up to here by this owner
        self._claim(resume, max(1, min(group_size, buffer_size)))

    # -- ownership ----------------------------------------------------------
    def _claim(self, resume: bool | int, group: int) -> None:
        """Become the window's owner: raise its epoch by compare-and-set.

        The checkpoint to resume is chosen and checked first, so an open that
        is refused (no such checkpoint, another engine's levels) leaves the
        current owner in charge."""
        for _ in range(100):
            blob, token = self._call(self.store.read_meta, self.window)
            meta = self._decode_meta(blob) if blob is not None else None
            if meta is None:
                meta = {"format": META_FORMAT, "epoch": 0, "epochs": [], "group": group,
                        "version": 0, "checkpoints": [], "gc": []}
            checkpoint = self._checkpoint_to_resume(meta, resume)
            meta["epoch"] += 1
            meta["epochs"] = sorted(set(meta["epochs"]) | {meta["epoch"]})
            try:
                self._token = self._call(self.store.cas_meta, self.window, token, self._encode_meta(meta))
            except CasMismatch:
                continue  # another process claimed it meanwhile: claim above it
            break
        else:
            raise StoreError(f"window {self.window!r} in {self.store.url}: could not claim ownership")
        self.epoch = meta["epoch"]
        self.group = meta["group"]  # pairs per stored value, fixed for the window's life
        self.buffer_size = max(self.buffer_size, self.group)  # a group is written once complete
        self._meta = meta
        if checkpoint is not None:
            self.version, _, records, _ = checkpoint
            if records:
                self.levels = [StoreLevelQueue.restore(self, m, rec) for m, rec in enumerate(records)]

    def _checkpoint_to_resume(self, meta: dict, resume: bool | int) -> list | None:
        """The retained ``[version, parent, records, engine]`` that ``resume``
        asks for (``None``: start empty), or a StoreError saying why not."""
        if resume is False or (resume is True and not meta["checkpoints"]):
            return None
        version = meta["version"] if resume is True else resume
        found = [c for c in meta["checkpoints"] if c[0] == version]
        if not found:
            if not meta["checkpoints"]:
                raise StoreError(f"window {self.window!r} in {self.store.url} has no checkpoint {resume}")
            raise StoreError(
                f"window {self.window!r} in {self.store.url}: checkpoint {version} is not "
                f"retained (have {sorted(c[0] for c in meta['checkpoints'])}); raise retain= to keep more"
            )
        if found[0][3] != self.engine:
            raise StoreError(
                f"window {self.window!r} in {self.store.url}: checkpoint {version} was written by "
                f"{found[0][3]}, not {self.engine}: their level layouts differ (open it with "
                f"{found[0][3]}, or with resume=False to start the window afresh)"
            )
        return found[0]

    def new_level(self, level: int, lo: int) -> StoreLevelQueue:
        return StoreLevelQueue(self, level, lo)

    @property
    def stats(self) -> WindowStats:
        """The window's counters (cache hits are counted per level and added
        here when read; read them from the engine's thread)."""
        s = self._stats
        for q in self._queues:
            s.cache_hits += q.take_hits()
        return s

    def want_prefetch(self, q: StoreLevelQueue) -> None:
        if q not in self.wanted:
            self.wanted.append(q)

    def start_prefetches(self) -> None:
        wanted, self.wanted = self.wanted, []
        for q in wanted:
            if q in self._queues:  # not discarded meanwhile
                q._prefetch_ahead(now=True)

    def orphan(self, future: Future) -> None:
        """A prefetch whose result is not needed: forget it once finished
        (``close`` waits for those still running)."""
        self._orphans = [f for f in self._orphans if not _ready(f)]
        self._orphans.append(future)

    def _wait_orphans(self) -> None:
        for f in self._orphans:
            f.exception()  # wait; their data and errors are not needed
        self._orphans = []

    def opened(self, q: StoreLevelQueue) -> None:
        self._queues.append(q)
        if q.level == 0:
            self.leaf = q

    def closed(self, q: StoreLevelQueue) -> None:
        self._stats.cache_hits += q.take_hits()
        try:
            self._queues.remove(q)
        except ValueError:
            pass

    # -- checkpoint ---------------------------------------------------------
    def checkpoint(self, levels: list[StoreLevelQueue]) -> int:
        """Flush, commit the levels by compare-and-set, clean up; returns the
        checkpoint's version (pass it as ``resume=`` to go back to it)."""
        self._wait_orphans()  # no write of a dropped level may land after the clean-up
        for q in levels:
            q.flush_all()
        old = self._meta
        version = old["version"] + 1
        records = [q.record() for q in levels]
        everything = old["checkpoints"] + [[version, self.version, records, self.engine]]
        newest = everything[-self.retain :]
        keep = {c[0] for c in newest} | {c[1] for c in newest}
        checkpoints = [c for c in everything if c[0] in keep]
        meta = dict(old, version=version, checkpoints=checkpoints)
        try:
            token = self._call(self.store.cas_meta, self.window, self._token, self._encode_meta(meta))
        except CasMismatch:
            blob, _ = self._call(self.store.read_meta, self.window)
            now = self._decode_meta(blob) if blob is not None else {"epoch": "none (deleted)"}
            raise FencingError(
                f"window {self.window!r} in {self.store.url}: checkpoint refused, the window "
                f"is now owned by epoch {now['epoch']} and this engine holds epoch {self.epoch}; "
                "a newer owner took it over (this engine is stale and must stop)"
            ) from None
        self._token = token
        self._meta = meta
        self.version = version
        self._stats.checkpoints += 1
        self._collect_garbage(levels)
        return version

    def close(self, levels: list[StoreLevelQueue], delete: bool = False) -> None:
        """Wait for the levels' background I/O; with ``delete``, remove the
        window (metadata and every epoch's pairs) from the store."""
        for q in levels:
            q._settle()
        self._wait_orphans()
        if self._channel is not None:
            self._channel.close()
        if delete:
            self._call(self.store.delete_window, self.window)

    def _collect_garbage(self, levels: list[StoreLevelQueue]) -> None:
        """Delete pairs below the head of the live levels and of every
        retained checkpoint, and drop epochs nothing references.

        The clean-up is committed with the next checkpoint; repeating it
        after a crash is harmless (deleting a missing key is a no-op)."""
        meta = self._meta
        heads: dict[int, int] = {}  # level -> lowest pair anyone may still read
        live_epochs = {self.epoch}
        for q in levels:
            heads[q.level] = q.lo >> 1
            live_epochs.update(e for e, _ in q.segments)
        ends = dict(self._written)  # level -> pairs possibly written
        for _, _, records, _ in meta["checkpoints"]:
            for m, rec in enumerate(records):
                heads[m] = min(heads.get(m, rec["lo"] >> 1), rec["lo"] >> 1)
                ends[m] = max(ends.get(m, 0), rec["stored"])
                live_epochs.update(e for e, _ in rec["segments"])
        gc = list(meta["gc"])
        for m in range(max([len(gc)] + [m + 1 for m in ends])):
            if m == len(gc):
                gc.append(0)
            end = min(heads.get(m, ends.get(m, 0)), ends.get(m, 0))
            if gc[m] < end:
                first, stop = gc[m] // self.group, end // self.group  # groups wholly below end
                for epoch in meta["epochs"]:
                    if epoch in live_epochs and first < stop:
                        self._call(self.store.delete_pairs, self.window, epoch, m, first, stop - first)
                self._stats.pairs_deleted += end - gc[m]
                gc[m] = end
        # A zombie owner may have written again under an epoch this window
        # already dropped, so the store's own list is swept too; epochs above
        # ours belong to a newer owner and are never touched.
        known = set(meta["epochs"]) | set(self._call(self.store.list_epochs, self.window))
        for epoch in sorted(known):
            if epoch not in live_epochs and epoch < self.epoch:
                self._call(self.store.drop_epoch, self.window, epoch)
        meta["gc"] = gc
        meta["epochs"] = sorted(live_epochs)
        for q in levels:  # forget segments wholly below the head
            if q.written <= q.lo >> 1:  # the head is past every pair this level wrote
                q.segments.clear()
            while len(q.segments) > 1 and q.segments[1][1] <= gc[q.level]:
                del q.segments[0]

    def discarded(self, q: StoreLevelQueue) -> None:
        """A level was removed: remember how far it wrote, for the clean-up."""
        self.note_written(q.level, q.written)

    def note_written(self, level: int, end: int) -> None:
        if end > self._written.get(level, 0):
            self._written[level] = end

    # -- store calls --------------------------------------------------------
    def start_write(self, level: int, group: int, blobs: list, pairs: int):
        """Start writing the blobs of groups ``group, group + 1, ...``
        (``pairs`` pairs): a future-like object (result: None)."""
        if self._channel is not None:
            self._stats.round_trips += 1
            self._stats.pairs_written += pairs
            return self._channel.write_pairs(self.window, self.epoch, level, group, blobs)
        return _submit(self.write, level, group, blobs, pairs)

    def write(self, level: int, group: int, blobs: list, pairs: int) -> None:
        self._call(self.store.write_pairs, self.window, self.epoch, level, group, blobs)
        self._stats.pairs_written += pairs

    def start_read(self, q: StoreLevelQueue, first: int, count: int):
        """Start reading pairs for ``q``'s cache: a future-like object whose
        result is their elements."""
        nxt = [s[1] for s in q.segments if s[1] > first]
        if self._channel is not None and (not nxt or nxt[0] >= first + count):  # one epoch
            self._stats.round_trips += 1
            self._stats.pairs_read += count
            group, groups = self._groups(first, count)
            request = self._channel.read_pairs(self.window, q.epoch_of(first), q.level, group, groups)
            return _Decoded(request, q, first, count, group)
        return _submit(q._fetch, first, count)

    def read(self, q: StoreLevelQueue, first: int, count: int) -> list:
        """The elements of ``q``'s pairs ``[first, first + count)``."""
        out: list = []
        while count > 0:  # one round trip per epoch segment crossed
            epoch = q.epoch_of(first)
            nxt = [s[1] for s in q.segments if s[1] > first]
            n = min(count, nxt[0] - first) if nxt else count
            group, groups = self._groups(first, n)
            blobs = self._call(self.store.read_pairs, self.window, epoch, q.level, group, groups)
            out += q.elements(first, n, group, blobs)
            self._stats.pairs_read += n
            first += n
            count -= n
        return out

    def _groups(self, first: int, count: int) -> tuple[int, int]:
        """The first group holding pairs ``[first, first + count)``, and how many."""
        size = self.group
        group = first // size
        return group, (first + count - 1) // size - group + 1

    def _call(self, fn, *args):
        with _stats_lock:
            self._stats.round_trips += 1
        return fn(*args)

    def _encode_meta(self, meta: dict) -> bytes:
        return encode(meta)

    def _decode_meta(self, blob: bytes) -> dict:
        try:
            meta = decode(blob)
        except (CorruptValue, FormatVersionError) as exc:
            raise type(exc)(f"window {self.window!r} in {self.store.url}: metadata: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("format") != META_FORMAT:
            raise FormatVersionError(
                f"window {self.window!r} in {self.store.url}: metadata format "
                f"{meta.get('format') if isinstance(meta, dict) else '?'} is not {META_FORMAT}; "
                "it was written by an incompatible version"
            )
        missing = sorted(_META_FIELDS - meta.keys())
        if missing:
            raise CorruptValue(f"window {self.window!r} in {self.store.url}: metadata lacks {missing}")
        return meta


_stats_lock = threading.Lock()
#: Fields of a metadata record (format META_FORMAT).
_META_FIELDS = frozenset({"format", "epoch", "epochs", "group", "version", "checkpoints", "gc"})


def _ready(future) -> bool:
    """Whether ``future``'s result is in, without reading from the network
    (a deferred request's reply is read only when its result is asked for)."""
    ready = getattr(future, "ready", None)
    return ready() if ready is not None else future.done()


class _Decoded:
    """A deferred read whose blobs become a level's elements when taken."""

    __slots__ = ("request", "queue", "first", "count", "group", "value", "error", "taken")

    def __init__(self, request, queue: StoreLevelQueue, first: int, count: int, group: int) -> None:
        self.request, self.queue, self.first, self.count, self.group = request, queue, first, count, group
        self.value = self.error = None
        self.taken = False

    def done(self) -> bool:
        return self.taken or self.request.done()

    def ready(self) -> bool:
        return self.taken or self.request.ready()

    def result(self):
        if not self.taken:
            self.taken = True
            try:
                self.value = self.queue.elements(self.first, self.count, self.group, self.request.result())
            except BaseException as exc:
                self.error = exc
        if self.error is not None:
            raise self.error
        return self.value

    def exception(self):
        try:
            self.result()
        except BaseException as exc:
            return exc
        return None

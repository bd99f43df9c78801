"""A window's level queues in a store: tails, buffer and cache (paper section
4.1.5, Fig. 3 and 4c; section 5.1), checkpoints, fencing and clean-up.

Each level is a :class:`stores.level_queue.StoreLevelQueue`: recent
elements and a head cache in process memory, the rest in the store.

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
raised by compare-and-set, and a former owner becomes stale (a process
that wrote the record last claims it without reading it first: a
compare-and-set on the token and content it remembers, :mod:`stores.meta_cache`).  A checkpoint
flushes the buffers, then commits the levels' bounds, their unflushed tails
and which epoch wrote which pairs, by compare-and-set on the metadata; a
stale owner's commit fails with :class:`~stores.errors.FencingError`, and the pairs it
keeps writing sit under its old epoch, which no newer checkpoint reads.
The claim and the fencing are :mod:`stores.window_owner`'s, the packing of
the metadata record :mod:`stores.window_packing`'s.

The last ``retain`` checkpoints stay resumable, with the checkpoint each of
them started from (a Spark micro-batch replayed after a failure resumes the
checkpoint of the last *committed* batch, which may not be the newest, and
may be replayed more than once).  After a commit, pairs below every retained
checkpoint's head are deleted, and epochs that nothing references are
dropped whole, with whatever a dead owner wrote after its last checkpoint
(the store lists the epochs holding pairs in the checkpoint's own round
trip where it can, :meth:`stores.base.Store.cas_meta_epochs`).

Orphans.  Every open and checkpoint records in the metadata when it
happened (``used``, the store's wall ``clock``) and who opened the window
(``owner``, host and pid), so that windows nobody uses any more (a killed
batch attempt's, an abandoned streaming query's) can be found and deleted
by :mod:`stores.gc` (``mta-spark gc``).
"""

from __future__ import annotations

import struct
import threading
from typing import Any

from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from .background import Decoded, Pending, ready, submit
from .batch import Batch
from .checks import check_batch, check_window_options
from .errors import CasMismatch, StoreError
from .head_cache import snapshot
from .level_queue import TAIL_KEPT, StoreLevelQueue
from .meta_cache import cache_of
from .cleanup import collect_garbage, level_marks
from .codec import untrack
from .window_meta import META_FORMAT, clock_of, decode_meta, delete_fenced, new_meta, owner
from .window_owner import Ownership
from .window_packing import MetaPacking

__all__ = ["GROUP_SIZE", "META_FORMAT", "WindowStorage", "clock_of", "decode_meta", "delete_fenced", "group_place",
           "new_meta", "owner"]
from .stats import StoreStats
from .steps import Before, retained_tags

#: Pairs per stored value, for new windows (capped by their buffer size).
GROUP_SIZE = 16


class WindowStorage(Ownership, MetaPacking):
    """One window in one store: ownership (epochs), level queues, checkpoints.

    Built by ``Store.open_window``; the engines in :mod:`mta` use it through
    the protocol described in :mod:`mta.tree`.  ``resume`` is ``True`` for the
    newest checkpoint, a version number for that checkpoint, a
    :class:`stores.steps.Before` for the checkpoint of a run's latest earlier
    step, or ``False`` to start empty (the window's old data is cleaned up
    by later checkpoints).  ``durable=False``: checkpoints are not synced to
    disk one by one; the caller makes a batch of them durable with one
    ``store.sync()`` before relying on them (a Spark task, before it ends).
    ``batch``: a :class:`stores.batch.Batch` whose ``commit()`` writes this
    window's checkpoints, with other windows', in one round trip; a
    checkpoint then counts from that commit.  ``element_arity=k``: the
    engine's elements are tuples of ``k`` values, and a group read back
    holding another value is a ``CorruptValue``.  (``_claim_later``: built
    without its claim, which :class:`~stores.batch.Batch` makes by driving
    ``claiming(*claim_options)`` before any other use.)
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
        resume: bool | int | Before = True,
        retain: int = 2,
        background: bool = True,
        durable: bool = True,
        batch: Batch | None = None,
        element_arity: int | None = None,
        _claim_later: bool = False,
    ) -> None:
        check_window_options(group_size=group_size, retain=retain, resume=resume, background=background,
                             durable=durable, element_arity=element_arity)
        check_batch(batch, store, window)
        self.store = store
        self.window = window
        self.engine = engine
        # Trailing elements kept in memory: what the engine may rewrite, and
        # at least the last pair, which both engines read on every insert
        # (the Log MTA's leaf pair, the Amortized MTA's tree roots, Invariant 3).
        self.mutable_tail = max(mutable_tail, TAIL_KEPT)
        self.buffer_size = buffer_size
        self.cache_size = cache_size
        self.retain, self.element_arity = retain, element_arity
        self.background = background
        self.durable = durable
        self._batch = batch  # commits this window's checkpoints with others (stores.batch)
        self._waiting = False  # a checkpoint handed to the batch and not committed yet
        self._unknown: BaseException | None = None  # why a batch could not tell if its checkpoint landed
        self.counters = StoreStats()
        self._queues: list[StoreLevelQueue] = []  # live levels (their cache hits are counted there)
        self._orphans: list = []  # prefetches nobody needs any more, still running
        # requests sent now, replies read later (Redis): no background threads needed
        self._channel = store.deferred_channel() if background else None
        self.wanted: list[StoreLevelQueue] = []  # levels whose prefetch waits for the next insert
        self.leaf: StoreLevelQueue | None = None  # level 0 (its growth tells inserts happened)
        self.levels: list[StoreLevelQueue] | None = None
        self.heads_due = False  # resumed levels whose heads no read has fetched yet (read_heads)
        self._heads_ahead: dict = {}  # their blobs, read ahead by a batch (heads_ahead)
        self.version: int | None = None  # the checkpoint resumed, then the last committed
        self.label = None  # the resumed checkpoint's label (stores.steps)
        self._before = resume if isinstance(resume, Before) else None  # tags this opening's checkpoints
        self._written: dict[int, int] = {}  # level -> pairs written up to here by this owner
        self._packed: dict[int, tuple] = {}  # id(checkpoint entry) -> (entry, its msgpack payload)
        self._elements: dict[int, tuple] = {}  # id(tail element) -> (element, its payload), newest checkpoint's
        #: what :meth:`claiming` takes: ``(resume, pairs per stored value)``
        self.claim_options = (resume, max(1, min(group_size, buffer_size)))
        if not _claim_later:
            self._claim(*self.claim_options)

    # -- levels -------------------------------------------------------------
    def place(self, epoch: int, level: int, group: int) -> bytes:
        return group_place(self.window, epoch, level, group)

    def new_level(self, level: int, lo: int) -> StoreLevelQueue:
        return StoreLevelQueue(self, level, lo)

    @property
    def stats(self) -> StoreStats:
        """The window's counters (cache hits are counted per level and added
        here when read; read them from the engine's thread)."""
        self._count_hits()
        return self.counters

    def _count_hits(self) -> None:
        """Add the live levels' cache hits to the counters."""
        for q in self._queues:
            self.counters.cache_hits += q.take_hits()

    def want_prefetch(self, q: StoreLevelQueue) -> None:
        if q not in self.wanted:
            self.wanted.append(q)

    def start_prefetches(self) -> None:
        wanted, self.wanted = self.wanted, []
        for q in wanted:
            if q in self._queues:  # not discarded meanwhile
                q.prefetch_ahead(now=True)

    def orphan(self, future) -> None:
        """A prefetch whose result is not needed: forget it once finished
        (``close`` waits for those still running)."""
        self._orphans = [f for f in self._orphans if not ready(f)]
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
        self.counters.cache_hits += q.take_hits()
        try:
            self._queues.remove(q)
        except ValueError:
            pass

    # -- checkpoint ---------------------------------------------------------
    def checkpoint(self, levels: list[StoreLevelQueue], label: Any = None) -> int:
        """Flush, commit the levels by compare-and-set, clean up; returns the
        checkpoint's version (pass it as ``resume=`` to go back to it).
        ``label``: a small value (anything :mod:`stores.codec` encodes) kept
        with the checkpoint, :attr:`label` of whoever resumes it.  With a
        batch, the record is written (and cleaned up after) at the batch's
        commit, which this commits first if a checkpoint of this window
        waits in it."""
        if self._waiting:
            self._batch.commit()
        if self._unknown is not None:
            raise StoreError(f"window {self.window!r} in {self.store.url}: whether its last checkpoint was "
                             f"written is unknown ({self._unknown}); open the window again") from self._unknown
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
        meta = dict(old, version=version, checkpoints=checkpoints, used=clock_of(self.store)())
        tags = retained_tags(old, keep, version, self._before, label)
        if tags is not None:
            meta["tags"] = tags
        else:
            meta.pop("tags", None)
        value = self._encode_meta(meta)
        marks, written, heads = level_marks(levels), dict(self._written), snapshot(levels)

        def committed(token, listed: list[int]) -> None:
            self._waiting = False
            self._token, self._meta, self.version = token, meta, version
            self.counters.checkpoints += 1
            collect_garbage(self, marks, written, listed)
            self._remember(value, meta, heads)

        if self._batch is not None and self._batch.defers:
            # what the window held goes now, not at the commit, and what it will hold is
            # untracked now, as the cache untracks it: a task's windows waiting in a batch
            # would otherwise keep two records each alive, and the collector walking one
            cache_of(self.store).forget(self.window, self._token)
            untrack((meta, self._packed, self._elements, heads))
            self._waiting, self._meta = True, meta
            self._batch.defer(self.window, self._token, value, self.durable, committed, self._refused, self._lost)
            return version
        try:
            # the store's epochs come with the write (one round trip where it can) for the clean-up
            token, listed = self._call(self.store.cas_meta_epochs, self.window, self._token, value,
                                       durable=self.durable)
        except CasMismatch:
            raise self._refused() from None
        except BaseException as exc:  # the write may have landed or not
            self._lost(exc)
            raise
        committed(token, listed)
        return version

    def clean_pairs(self, epoch: int, level: int, first: int, count: int) -> None:
        """Delete groups ``[first, first + count)`` of a level's pairs for the clean-up: now, or with
        every window's of a batch's commit in one round trip (:meth:`stores.batch.Batch.commit`); if
        that fails, the window takes back its clean-up marks and the pairs it counted (set and counted
        by :func:`~stores.cleanup.collect_garbage` after this): its next clean-up does both again, once."""
        if self._batch is not None:
            meta, marks, counters = self._meta, list(self._meta["gc"]), self.counters
            counted = counters.pairs_deleted
            undo = lambda: (meta.__setitem__("gc", marks), setattr(counters, "pairs_deleted", counted))  # noqa: E731
            if self._batch.deleting((self.window, epoch, level, first, count), undo):
                return
        self._call(self.store.delete_pairs, self.window, epoch, level, first, count)

    def _refused(self) -> Exception:
        """The error of a checkpoint whose compare-and-set lost: another owner holds the window."""
        self._waiting = False
        cache_of(self.store).forget(self.window, self._token)
        return self._fenced("checkpoint")

    def _lost(self, error: BaseException) -> None:
        """The write of this window's checkpoint (its own, or a batch's commit) failed before it could
        tell whether it landed: no more checkpoints (opening the window again reads what its record holds)."""
        self._waiting, self._unknown = False, error

    def close(self, levels: list[StoreLevelQueue], delete: bool = False) -> None:
        """Wait for the levels' background I/O; with ``delete``, remove the
        window (metadata and every epoch's pairs) from the store.  A
        checkpoint waiting in a batch stays there (its clean-up reads only
        what it noted at the checkpoint), unless the window is deleted: the
        batch is committed first (and if that fails the window is closed
        without deleting it)."""
        try:
            try:
                if delete and self._waiting:
                    self._batch.commit()
            finally:
                for q in levels:
                    q.settle()
                self._wait_orphans()
                if self._channel is not None:
                    self._channel.close()
            if delete:
                self._delete()
        finally:
            self._release()

    def _release(self) -> None:
        """Let go of the levels (their cache hits counted first): a level
        refers to its storage, so the storage's references back make a cycle
        that only the garbage collector frees, and a task opening a window
        per key would leave it one per key to collect."""
        self._count_hits()
        self._queues, self.wanted, self.leaf, self.levels = [], [], None, None
        self._heads_ahead = {}

    def discarded(self, q: StoreLevelQueue) -> None:
        """A level was removed: remember how far it wrote, for the clean-up."""
        self.note_written(q.level, q.written)

    def note_written(self, level: int, end: int) -> None:
        if end > self._written.get(level, 0):
            self._written[level] = end

    # -- store calls --------------------------------------------------------
    def start_write(self, level: int, group: int, blobs: list, pairs: int):
        """Start writing the blobs of groups ``group, group + 1, ...``
        (``pairs`` pairs): a future or :class:`~stores.background.Pending` (result: None),
        written already without ``background``.  A checkpoint of this window
        waiting in a batch is committed first: its clean-up reads the levels
        as the checkpoint left them."""
        if self._waiting:
            self._batch.commit()
        if not self.background:
            return Pending.of(self.write, level, group, blobs, pairs)
        if self._channel is not None:
            self.counters.round_trips += 1
            self.counters.pairs_written += pairs
            return self._channel.write_pairs(self.window, self.epoch, level, group, blobs)
        return submit(self.write, level, group, blobs, pairs)

    def write(self, level: int, group: int, blobs: list, pairs: int) -> None:
        self._call(self.store.write_pairs, self.window, self.epoch, level, group, blobs)
        self.counters.pairs_written += pairs

    def start_read(self, q: StoreLevelQueue, first: int, count: int):
        """Start reading pairs for ``q``'s cache: a future-like object whose
        result is their elements (a future or a :class:`~stores.background.Pending`)."""
        end = q.segment_end(first)
        if self._channel is not None and (end is None or end >= first + count):  # one epoch
            self.counters.round_trips += 1
            self.counters.pairs_read += count
            group, groups = self._groups(first, count)
            epoch = q.epoch_of(first)
            request = self._channel.read_pairs(self.window, epoch, q.level, group, groups)
            return Decoded(request, q, first, count, group, epoch)
        return submit(self.read, q, first, count, self._reads(q, first, count))

    def read(self, q: StoreLevelQueue, first: int, count: int, reads: list | None = None) -> list:
        """The elements of ``q``'s pairs ``[first, first + count)``, one
        round trip per owner segment crossed (``reads``: :meth:`_reads`,
        worked out on the engine's thread for a read in the background,
        where a checkpoint's clean-up may trim the level's segments meanwhile)."""
        out: list = []
        for epoch, start, n in reads if reads is not None else self._reads(q, first, count):
            group, groups = self._groups(start, n)
            blobs = self._call(self.store.read_pairs, self.window, epoch, q.level, group, groups)
            out += q.elements(start, n, group, blobs, epoch)
            self.counters.pairs_read += n
        return out

    @staticmethod
    def _reads(q: StoreLevelQueue, first: int, count: int) -> list[tuple[int, int, int]]:
        """``(epoch, first pair, pairs)`` of each owner segment of ``q`` that
        pairs ``[first, first + count)`` cross.  O(segments)."""
        out = []
        while count > 0:
            end = q.segment_end(first)
            n = min(count, end - first) if end is not None else count
            out.append((q.epoch_of(first), first, n))
            first += n
            count -= n
        return out

    def read_heads(self) -> None:
        """At a resumed window's first cache miss, the head pairs of every
        level whose head is in the store and whose cache is empty
        (:meth:`~stores.head_cache.HeadCache.head_range`), in one round trip
        where the store reads several ranges at once
        (:meth:`stores.base.Store.read_pairs_many`), and none for those a
        batch read ahead (:meth:`heads_ahead`).  An engine resuming a
        window reads the fronts of most levels at its first eviction (the
        Amortized MTA's split walks them): a round trip per level otherwise,
        and a streaming key's window is resumed every micro-batch."""
        self.heads_due = False
        reads = self.head_reads()
        ahead, self._heads_ahead = self._heads_ahead, {}
        missing = [r for _, _, r in reads if r not in ahead]
        if missing:
            ahead.update(zip(missing, self._call(self.store.read_pairs_many, self.window, missing)))
            if not self.store.reads_ranges_at_once:
                with _stats_lock:
                    self.counters.round_trips += len(missing) - 1
        for q, (first, count), request in reads:
            epoch, _, group, _ = request
            q.fill_head(first, q.elements(first, count, group, ahead[request], epoch))
            self.counters.pairs_read += count

    def head_reads(self) -> list[tuple]:
        """What :meth:`read_heads` would read now, ``(level, (first pair,
        count), (epoch, level number, first group, groups))`` per level.
        O(levels)."""
        reads = []
        for q in self._queues:
            wanted = q.head_range()
            if wanted is not None:
                first, count = wanted
                reads.append((q, wanted, (q.epoch_of(first), q.level, *self._groups(first, count))))
        return reads

    def heads_ahead(self, blobs: dict) -> None:
        """``(epoch, level, first group, groups) -> blobs`` read for
        :meth:`head_reads` by a batch: :meth:`read_heads` decodes them when
        the window first needs them, instead of reading them (bytes wait,
        not objects the collector would walk).  O(1)."""
        self._heads_ahead = blobs

    def _groups(self, first: int, count: int) -> tuple[int, int]:
        """The first group holding pairs ``[first, first + count)``, and how many."""
        group = first // self.group
        return group, (first + count - 1) // self.group - group + 1

    def _call(self, fn, *args, **options):
        with _stats_lock:
            self.counters.round_trips += 1
        return fn(*args, **options)


def group_place(window: str, epoch: int, level: int, group: int) -> bytes:
    """The place a stored group is bound to (:mod:`stores.codec`): its key,
    so that a value copied from another window, epoch, level or index fails
    its checksum.  Window names hold no NUL, so the bytes are unambiguous."""
    return window.encode() + b"\0" + struct.pack(">QQQ", epoch, level, group)


_stats_lock = threading.Lock()

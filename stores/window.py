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
stale owner's commit fails with :class:`FencingError`, and the pairs it
keeps writing sit under its old epoch, which no newer checkpoint reads.

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

import logging
import struct
import threading

from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from .background import Decoded, ready, submit
from .codec import encode_map, packed, packed_items, packed_list, packed_map
from .errors import CasMismatch, FencingError, MissingData, StoreError
from .level_queue import TAIL_KEPT, StoreLevelQueue
from .meta_cache import Remembered, cache_of
from .cleanup import collect_garbage
from .window_meta import META_FORMAT, clock_of, decode_meta, delete_fenced, new_meta, owner

__all__ = ["GROUP_SIZE", "META_FORMAT", "WindowStorage", "clock_of", "decode_meta", "delete_fenced", "group_place",
           "new_meta", "owner"]
from .stats import StoreStats

#: Pairs per stored value, for new windows (capped by their buffer size).
GROUP_SIZE = 16

#: A stale engine's refused write, at WARNING (the ``stores`` package's logger).
_log = logging.getLogger(__name__)


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
        self.counters = StoreStats()
        self._queues: list[StoreLevelQueue] = []  # live levels (their cache hits are counted there)
        self._orphans: list = []  # prefetches nobody needs any more, still running
        # requests sent now, replies read later (Redis): no background threads needed
        self._channel = store.deferred_channel() if background else None
        self.wanted: list[StoreLevelQueue] = []  # levels whose prefetch waits for the next insert
        self.leaf: StoreLevelQueue | None = None  # level 0 (its growth tells inserts happened)
        self.levels: list[StoreLevelQueue] | None = None
        self.version: int | None = None  # the checkpoint resumed, then the last committed
        self._written: dict[int, int] = {}  # level -> pairs written up to here by this owner
        self._packed: dict[int, tuple] = {}  # id(checkpoint entry) -> (entry, its msgpack payload)
        self._elements: dict[int, tuple] = {}  # id(tail element) -> (element, its payload), newest checkpoint's
        self._claim(resume, max(1, min(group_size, buffer_size)))

    # -- ownership ----------------------------------------------------------
    def _claim(self, resume: bool | int, group: int) -> None:
        """Become the window's owner: raise its epoch by compare-and-set.

        The checkpoint to resume is chosen and checked first, so an open that
        is refused (no such checkpoint, another engine's levels) leaves the
        current owner in charge.  A record this process wrote last
        (:mod:`stores.meta_cache`) is swapped without reading it first while
        such swaps tend to succeed, and is not decoded again when read
        unchanged."""
        cache = cache_of(self.store)
        known = cache.get(self.window)  # the record as this process left it
        swap = known is not None and cache.swapping()
        judged = swap  # whether this claim told the cache if its record was current
        record = None  # (blob, token) a failed swap returned: no need to read it again
        for _ in range(100):
            if swap:
                blob, token = known.blob, known.token  # assumed; the swap checks both
            else:
                blob, token = record if record is not None else self._call(self.store.read_meta, self.window)
                record = None
                if not judged and known is not None:
                    cache.observed(token == known.token and blob == known.blob)
                    judged = True
            if known is not None and token == known.token and blob == known.blob:
                meta, self._packed, self._elements = dict(known.meta), known.packed, known.elements
            else:
                meta = self._decode_meta(blob) if blob is not None else None
                self._packed = {} if meta is None else dict(
                    _by_identity(meta["checkpoints"], packed_items(blob, "checkpoints")))
                if meta is None:
                    meta = new_meta(0, group)
            try:
                checkpoint = self._checkpoint_to_resume(meta, resume)
            except StoreError:
                if not swap:
                    raise
                swap = False  # what this process remembers may be outdated: the store's record decides
                continue
            meta["epoch"] += 1
            meta["epochs"] = sorted(set(meta["epochs"]) | {meta["epoch"]})
            meta.update(used=clock_of(self.store)(), owner=owner())
            value = self._encode_meta(meta)
            # not synced: a claim lost to a power loss goes with every write after it (the
            # store orders them), and the checkpoint that commits those writes syncs it too
            if swap:
                done = self._call(self.store.swap_meta, self.window, token, blob, value, durable=False)
                cache.observed(done.done)
                swap = False
                if not done.done:  # another process wrote the record since: claim above what it holds
                    record = (done.blob, done.token)
                    continue
                self._token = done.token
            else:
                try:
                    self._token = self._call(self.store.cas_meta, self.window, token, value, durable=False)
                except CasMismatch:
                    continue  # another process claimed it meanwhile: claim above it
            break
        else:
            raise StoreError(f"window {self.window!r} in {self.store.url}: could not claim ownership")
        self._remember(value, meta)
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
                raise StoreError(f"window {self.window!r} in {self.store.url} has no checkpoint {resume}: the store "
                                 "has lost the window since that checkpoint (replaced, restarted without persistence, "
                                 "its directory deleted, or swept by mta-spark gc); restart the query with a new "
                                 "checkpoint location")
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

    def place(self, epoch: int, level: int, group: int) -> bytes:
        return group_place(self.window, epoch, level, group)

    def new_level(self, level: int, lo: int) -> StoreLevelQueue:
        return StoreLevelQueue(self, level, lo)

    @property
    def stats(self) -> StoreStats:
        """The window's counters (cache hits are counted per level and added
        here when read; read them from the engine's thread)."""
        s = self.counters
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
        meta = dict(old, version=version, checkpoints=checkpoints, used=clock_of(self.store)())
        value = self._encode_meta(meta)
        try:
            # the store's epochs come with the write (one round trip where it can) for the clean-up
            token, listed = self._call(self.store.cas_meta_epochs, self.window, self._token, value)
        except CasMismatch:
            cache_of(self.store).forget(self.window, self._token)
            raise self._fenced("checkpoint") from None
        self._token = token
        self._meta = meta
        self.version = version
        self.counters.checkpoints += 1
        collect_garbage(self, levels, listed)
        self._remember(value, meta)
        return version

    def _remember(self, blob: bytes, meta: dict) -> None:
        """The record now holds ``blob`` (token ``self._token``): the next
        claim in this process may swap it without reading it.  ``meta`` (what
        the window holds, the clean-up's marks included) is never mutated
        after this."""
        self._meta = meta
        cache_of(self.store).put(self.window, Remembered(self._token, blob, meta, self._packed, self._elements))

    def close(self, levels: list[StoreLevelQueue], delete: bool = False) -> None:
        """Wait for the levels' background I/O; with ``delete``, remove the
        window (metadata and every epoch's pairs) from the store."""
        for q in levels:
            q.settle()
        self._wait_orphans()
        if self._channel is not None:
            self._channel.close()
        if delete:
            self._delete()

    def _delete(self) -> None:
        """Remove the window, fenced like a checkpoint: a stale engine must
        not delete what a newer owner took over (see :func:`delete_fenced`)."""
        # a window that never held a checkpoint (a batch window) has nothing durable to
        # protect: losing its emptied record to a power loss leaves at most a record
        # without checkpoints, which nothing resumes and stores.gc deletes as an orphan
        durable = bool(self._meta["checkpoints"])
        cache_of(self.store).forget(self.window, self._token)
        try:
            delete_fenced(self.store, self.window, self._meta, self._token, self._call, self._emptied,
                          durable=durable)
        except CasMismatch:
            raise self._fenced("delete") from None

    def _emptied(self, token, tombstone: dict) -> None:
        # a close(delete=True) retried after a failure part-way goes on from here
        self._token, self._meta = token, tombstone

    def missing(self, where: str) -> StoreError:
        """The error for a group that must exist but is gone: a FencingError
        when a newer owner holds the window (its clean-up may drop the stale
        engine's epochs), else MissingData (the store lost it)."""
        blob, _ = self._call(self.store.read_meta, self.window)
        meta = self._decode_meta(blob) if blob is not None else None
        if meta is not None and meta["epoch"] > self.epoch:
            return self._fenced("read", where)
        return MissingData(f"{where} is missing from the store (was it restarted without "
                           "persistence?); resume from a store that kept the data")

    def _fenced(self, what: str, where: str | None = None) -> FencingError:
        blob, _ = self._call(self.store.read_meta, self.window)
        now = self._decode_meta(blob) if blob is not None else {"epoch": "none (deleted)"}
        error = FencingError(
            f"{where or f'window {self.window!r} in {self.store.url}'}: {what} refused, the window "
            f"is now owned by epoch {now['epoch']} and this engine holds epoch {self.epoch}; "
            "a newer owner took it over (this engine is stale and must stop)")
        _log.warning("%s", error)
        return error

    def discarded(self, q: StoreLevelQueue) -> None:
        """A level was removed: remember how far it wrote, for the clean-up."""
        self.note_written(q.level, q.written)

    def note_written(self, level: int, end: int) -> None:
        if end > self._written.get(level, 0):
            self._written[level] = end

    # -- store calls --------------------------------------------------------
    def start_write(self, level: int, group: int, blobs: list, pairs: int):
        """Start writing the blobs of groups ``group, group + 1, ...``
        (``pairs`` pairs): a future or :class:`~stores.background.Pending` (result: None)."""
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
        nxt = [s[1] for s in q.segments if s[1] > first]
        if self._channel is not None and (not nxt or nxt[0] >= first + count):  # one epoch
            self.counters.round_trips += 1
            self.counters.pairs_read += count
            group, groups = self._groups(first, count)
            epoch = q.epoch_of(first)
            request = self._channel.read_pairs(self.window, epoch, q.level, group, groups)
            return Decoded(request, q, first, count, group, epoch)
        return submit(self.read, q, first, count)

    def read(self, q: StoreLevelQueue, first: int, count: int) -> list:
        """The elements of ``q``'s pairs ``[first, first + count)``."""
        out: list = []
        while count > 0:  # one round trip per epoch segment crossed
            epoch = q.epoch_of(first)
            nxt = [s[1] for s in q.segments if s[1] > first]
            n = min(count, nxt[0] - first) if nxt else count
            group, groups = self._groups(first, n)
            blobs = self._call(self.store.read_pairs, self.window, epoch, q.level, group, groups)
            out += q.elements(first, n, group, blobs, epoch)
            self.counters.pairs_read += n
            first += n
            count -= n
        return out

    def _groups(self, first: int, count: int) -> tuple[int, int]:
        """The first group holding pairs ``[first, first + count)``, and how many."""
        size = self.group
        group = first // size
        return group, (first + count - 1) // size - group + 1

    def _call(self, fn, *args, **options):
        with _stats_lock:
            self.counters.round_trips += 1
        return fn(*args, **options)

    def _encode_meta(self, meta: dict) -> bytes:
        """``encode(meta)``, re-packing only the checkpoints this storage has
        not packed or read yet: a retained checkpoint never changes, and
        packing its records (tuples, one extension each) dominates."""
        cache, parts = self._packed, []
        for c in meta["checkpoints"]:
            hit = cache.get(id(c))
            parts.append(hit[1] if hit is not None and hit[0] is c else self._pack_checkpoint(c))
        self._packed = dict(_by_identity(meta["checkpoints"], parts))  # a new dict: a remembered one is shared
        return encode_map([(k, packed_list(parts) if k == "checkpoints" else packed(v)) for k, v in meta.items()])

    def _pack_checkpoint(self, entry: list) -> bytes:
        """``packed(entry)`` of a checkpoint entry ``[version, parent,
        records, engine]``, each element of its levels' tails packed once:
        a window's consecutive checkpoints share most of them (the same
        objects while this process keeps the window, :mod:`stores.meta_cache`),
        and packing those tuples dominates.  O(elements in the tails) dict
        lookups, plus packing the new elements."""
        known, elements = self._elements, {}

        def element(e) -> bytes:
            hit = known.get(id(e))
            if hit is None or hit[0] is not e:
                hit = (e, packed(e))
            elements[id(e)] = hit  # the element is kept, so that its id is not reused while remembered
            return hit[1]

        version, parent, records, engine = entry
        levels = [packed_map([(k, packed_list([element(e) for e in v]) if k == "tail" else packed(v))
                              for k, v in rec.items()]) for rec in records]
        self._elements = elements  # a new dict: a remembered one is shared
        return packed_list([packed(version), packed(parent), packed_list(levels), packed(engine)])

    def _decode_meta(self, blob: bytes) -> dict:
        return decode_meta(blob, f"window {self.window!r} in {self.store.url}")


def _by_identity(entries: list, parts: list[bytes]):
    """``(id(entry), (entry, payload))`` pairs (the entry is kept so that its
    id cannot be reused while remembered)."""
    return ((id(c), (c, p)) for c, p in zip(entries, parts))


def group_place(window: str, epoch: int, level: int, group: int) -> bytes:
    """The place a stored group is bound to (:mod:`stores.codec`): its key,
    so that a value copied from another window, epoch, level or index fails
    its checksum.  Window names hold no NUL, so the bytes are unambiguous."""
    return window.encode() + b"\0" + struct.pack(">QQQ", epoch, level, group)


_stats_lock = threading.Lock()

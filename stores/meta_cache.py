"""What this process last wrote to each window's metadata record.

Opening a window claims it: read its record, raise the epoch, write it back
by compare-and-set (two round trips).  A streaming query opens every key's
window once per micro-batch, and Spark reuses its Python workers across
micro-batches, so a worker often opened the same window last time and
already knows the record.  This cache keeps, per store object, the record
each window was left with by this process: its token, its blob, and the
metadata as the window knew it after its clean-up (:class:`Remembered`).
The next claim tries its compare-and-set against the remembered record
directly (:meth:`stores.base.Store.swap_meta`, one round trip), which
compares the content as well as the token: a record changed by anyone else
(another owner's claim, a deletion, a store that lost it), or deleted and
created again at the same version, fails it, and the claim goes on from
the record the failed attempt returned.  Nothing here is trusted without
that compare-and-set, so fencing stays the store's.  While remembered
records are seldom current (:meth:`MetaCache.swapping`), claims read the
record first instead, and still skip decoding it when it is the one
remembered.

A record remembered from a checkpoint also keeps its levels' head caches
(:func:`stores.head_cache.snapshot`): a claim that finds the record current
and resumes that checkpoint takes them (:meth:`stores.head_cache.HeadCache.adopt`)
instead of reading every level's head, which a resumed window's first
eviction needs.  Stored pairs are never rewritten, so what the process read
(checked) or wrote then is what the store holds, but for a level's head
value the engine recomputed in its cache after a bulk eviction (never
written back): neither engine reads a head above level 0 without
recomputing it first (``mta.tree.recompute_spine``; the Amortized MTA's
split reads only the element after each head), so either value gives the
same results.  A pair damaged in the store since is found by the next
process that reads it.

Entries are never changed once stored: a claim copies the remembered
metadata before raising its epoch, and the checkpoint entries in it are
immutable lists (see :class:`stores.window.WindowStorage`).  So they are
untracked by the cyclic garbage collector (:func:`stores.codec.untrack`):
a reused PySpark worker runs a full collection after every task, which
would otherwise walk every remembered record.  Bounded: the
:data:`SIZE` most recently used windows per store (least recently used
dropped first).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, NamedTuple, Optional

from .codec import untrack

#: Windows remembered per store object.  A remembered record costs its blob,
#: its decoded metadata and the payloads kept for re-encoding: about 15 KB
#: for a fresh window of the streaming benchmark (retain=2, three levels),
#: 55 KB for a full one (an hour of readings, six levels), whose levels'
#: head caches hold 30 KB more; so up to about 170 MB per store and Python
#: worker when full of such windows.
SIZE = 2048


class Remembered(NamedTuple):
    """A window's record as this process last wrote it."""

    token: Any  #: the record's token after the write
    blob: bytes  #: the record's content, as written
    meta: dict  #: the metadata the window holds (clean-up marks included); never mutated, but for
    #: the marks a batch's failed clean-up gives back (:meth:`stores.window.WindowStorage.clean_pairs`)
    packed: dict  #: id(checkpoint entry) -> (entry, its msgpack payload), for re-encoding
    elements: dict  #: id(tail element) -> (element, its payload): the newest checkpoint's, for the next one
    heads: Optional[dict] = None  #: the levels' head caches at the newest checkpoint (stores.head_cache.snapshot)


class MetaCache:
    """The remembered records of one store's windows (thread-safe, LRU)."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[str, Remembered] = OrderedDict()
        self._lock = threading.Lock()
        self._current = 1.0  # how often a remembered record was still current, lately (a moving average)

    def swapping(self) -> bool:
        """Whether a claim should swap a remembered record at once (one round
        trip when it is current, a wasted one when not) rather than read the
        record first: yes while at least half of the remembered records
        lately were current.  Spark hands a stateful partition to whichever
        Python worker is idle, so in some plans a worker's remembered record
        is nearly always another's by the key's next micro-batch.  O(1)."""
        return self._current >= 0.5

    def observed(self, current: bool) -> None:
        """A claim found a remembered record ``current`` (still the store's
        record) or not.  O(1)."""
        self._current += (float(current) - self._current) / 8

    def get(self, window: str) -> Optional[Remembered]:
        """The window's remembered record, or ``None``.  O(1)."""
        with self._lock:
            hit = self._entries.get(window)
            if hit is not None:
                self._entries.move_to_end(window)
            return hit

    def put(self, window: str, entry: Remembered) -> None:
        """Remember ``entry`` for ``window``, its metadata and payloads
        untracked by the cyclic garbage collector (:func:`stores.codec.untrack`:
        entries never change).  O(size of the entry)."""
        untrack((entry.meta, entry.packed, entry.elements, entry.heads))
        with self._lock:
            self._entries[window] = entry
            self._entries.move_to_end(window)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def forget(self, window: str, token: Any = None) -> None:
        """Forget the window (only if its remembered token is ``token``,
        when given: a stale engine must not drop what a newer one wrote).  O(1)."""
        with self._lock:
            hit = self._entries.get(window)
            if hit is not None and (token is None or hit.token == token):
                del self._entries[window]

    def __len__(self) -> int:
        return len(self._entries)


_caches: "weakref.WeakKeyDictionary[Any, MetaCache]" = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_of(store) -> MetaCache:
    """The cache of ``store`` (a store object: a store opened again starts
    with an empty one)."""
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = MetaCache()
        return cache

"""The store interface, shared validation, statistics and retries.

A store keeps two kinds of records for many *windows* (a window is one
sliding-window aggregation; its name is a ``str``):

* **pairs** -- opaque ``bytes`` blobs keyed by ``(window, epoch, level,
  index)``, written, read and deleted by contiguous ranges of indices
  ``[first, first + n)``.  The level queues (:mod:`stores.window`) store
  under index ``g`` the group ``g`` of a level's pairs (``group_size``
  pairs from absolute position ``2 g group_size``, see
  :mod:`mta.level_queue`): positions never shift, so a group is written
  once, when complete, and never rewritten.  To this interface a blob is
  one "pair"; its counters count blobs.  The *epoch* lets a recovered
  window write a fresh generation while the previous one is still readable,
  then drop the old one with one :meth:`Store.drop_epoch`.
* **metadata** -- one small blob per window, updated with compare-and-set
  (:meth:`Store.read_meta` returns an opaque token, :meth:`Store.cas_meta`
  succeeds only if the record still has that token).

Each data call is **one round trip** to the backend (pipelined or batched),
whatever the number of pairs; :attr:`Store.stats` counts them.

Backends subclass :class:`Store` and implement the underscore methods
(``_write_pairs`` ...); the public methods validate arguments, count
statistics and retry transient failures with bounded exponential backoff,
raising :class:`~stores.errors.StoreUnavailable` when retries run out.
The retries live in :mod:`stores.retry`, the argument checks in
:mod:`stores.checks`, the metadata methods in :mod:`stores.meta_cas`.

Names and numbers accepted everywhere (so a window valid on one backend is
valid on all): a window is a non-empty ``str`` of at most
:data:`MAX_WINDOW_BYTES` UTF-8 bytes, without control characters and
without ``{`` or ``}`` (they would break Redis Cluster hash tags); epochs,
levels and indices are ``int`` in ``[0, 2**63)`` (not ``bool``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, Sequence

from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from .checks import as_blobs, check_open_options, check_pairs, check_ranges, check_uint, check_window
from .codec import check_encodable
from .meta_cas import MetaCas, Swap, Token, cas_mismatch
from .retry import AUTH, CONFIG, TRANSIENT, Retrying
from .stats import StoreStats

__all__ = ["AUTH", "CONFIG", "STORE_OPTIONS", "TRANSIENT", "Store", "Swap", "Token", "cas_mismatch"]

#: Options every backend takes (the retry policy of :class:`Store`).
STORE_OPTIONS = frozenset({"retries", "backoff", "backoff_max", "timeout"})



class Store(Retrying, MetaCas):
    """Base class of every store.  See the module docstring.

    Options common to every backend (keyword arguments of
    :func:`stores.open_store`):

    * ``retries`` (default 5) -- attempts retried after a transient error
      (connection refused or dropped, timeout, database busy ...) before
      :class:`StoreUnavailable` is raised;
    * ``backoff`` (default 0.05 s) -- first delay; each retry doubles it,
      capped at ``backoff_max`` (default 2 s), with up to 50 % random jitter
      downwards.  With the defaults a dead backend is reported after about
      0.8 to 1.6 s of sleeping (plus connect timeouts);
    * ``timeout`` (default 6 s) -- the longest one operation may take,
      retries included: no retry starts once it has passed (an attempt in
      flight ends first; backends keep per-attempt timeouts below it).

    Stores are thread-safe and may be used from several threads at once.
    """

    #: URL scheme(s) of the backend, for messages.
    scheme = ""

    TAKES_ELEMENT_ARITY = True  #: :meth:`open_window` takes ``element_arity`` (:class:`mta.storage.WindowStore`)
    #: Whether the backend syncs metadata writes to disk, a cost that
    #: ``cas_meta(durable=False)`` can skip (its ``_cas_meta`` then takes
    #: ``durable``).
    SYNCS_META = False

    #: The wall clock windows record their last use by and :meth:`windows`
    #: and :meth:`sweep` measure ages with (tests set a fake one on a store).
    clock: Callable[[], float] = staticmethod(time.time)

    def __init__(self, url: str, *, retries: int = 5, backoff: float = 0.05,
                 backoff_max: float = 2.0, timeout: float = 6.0) -> None:
        self._retry_policy(retries, backoff, backoff_max, timeout)
        #: The store's URL with any password replaced by ``***``.
        self.url = url
        self.stats = StoreStats()
        self._closed = False

    # ----------------------------------------------------------- pairs

    def write_pairs(self, window: str, epoch: int, level: int, first: int, blobs: Sequence[bytes]) -> None:
        """Store ``blobs[k]`` at index ``first + k`` of ``(window, epoch,
        level)``, overwriting what is there.  One round trip."""
        check_window(window)
        check_uint("epoch", epoch)
        check_uint("level", level)
        check_uint("first", first)
        data = as_blobs(blobs)
        check_uint("first + len(blobs)", first + len(data))
        if not data:
            return
        self._run("write_pairs", window, self._write_pairs, window, epoch, level, first, data)
        self.stats.add(round_trips=1, pairs_written=len(data),
                       bytes_written=sum(map(len, data)))

    def read_pairs(self, window: str, epoch: int, level: int, first: int,
                   count: int) -> list[Optional[bytes]]:
        """The blobs at indices ``[first, first + count)``, ``None`` where a
        pair is missing.  One round trip."""
        check_pairs(window, epoch, level, first, count)
        if count == 0:
            return []
        out = self._run("read_pairs", window, self._read_pairs, window, epoch, level, first,
                        count)
        if type(out) is not list:
            out = list(out)
        self.stats.add(round_trips=1, pairs_read=len(out) - out.count(None),
                       bytes_read=sum(map(len, filter(None, out))))
        return out

    def read_pairs_many(self, window: str,
                        ranges: Sequence[tuple[int, int, int, int]]) -> list[list[Optional[bytes]]]:
        """For each ``(epoch, level, first, count)`` of ``ranges``, what
        :meth:`read_pairs` of it returns, in order.  One round trip where
        the backend reads several ranges at once (memory, file, redis),
        else one per range: a resumed window reads the heads of all its
        levels so (:meth:`stores.window.WindowStorage.read_heads`)."""
        ranges = [tuple(r) for r in ranges]
        for r in ranges:
            if len(r) != 4:
                raise TypeError(f"read_pairs_many takes (epoch, level, first, count) ranges, got {r!r}")
            check_pairs(window, *r)
        if self._read_pairs_many is None or len(ranges) < 2:
            return [self.read_pairs(window, *r) for r in ranges]
        out = [list(blobs) for blobs in self._run("read_pairs", window, self._read_pairs_many, window, ranges)]
        found = [b for blobs in out for b in blobs if b is not None]
        self.stats.add(round_trips=1, pairs_read=len(found), bytes_read=sum(map(len, found)))
        return out

    def read_ranges(self, ranges: Sequence[tuple[str, int, int, int, int]]) -> list[list[Optional[bytes]]]:
        """For each ``(window, epoch, level, first, count)`` of ``ranges``,
        what :meth:`read_pairs` of it returns, in order: one round trip
        where the backend reads many windows' pairs at once
        (:attr:`pipelines_windows`), else one per window
        (:meth:`read_pairs_many`).  O(pairs read)."""
        ranges = _checked_ranges("read_ranges", ranges)
        if not self.pipelines_windows or len({r[0] for r in ranges}) < 2:
            out, at = [None] * len(ranges), {}
            for i, r in enumerate(ranges):
                at.setdefault(r[0], []).append(i)
            for window, places in at.items():
                for i, blobs in zip(places, self.read_pairs_many(window, [ranges[i][1:] for i in places])):
                    out[i] = blobs
            return out
        out = [list(blobs) for blobs in self._run(f"read_pairs of {len(ranges)} ranges", None, self._read_ranges,
                                                  ranges)]
        found = [b for blobs in out for b in blobs if b is not None]
        self.stats.add(round_trips=1, pairs_read=len(found), bytes_read=sum(map(len, found)))
        return out

    def delete_ranges(self, ranges: Sequence[tuple[str, int, int, int, int]]) -> None:
        """:meth:`delete_pairs` of each ``(window, epoch, level, first,
        count)`` of ``ranges``: one round trip where the backend sends many
        windows' requests at once (:attr:`pipelines_windows`), else one per
        range.  Missing pairs are fine.  O(pairs)."""
        ranges = [r for r in _checked_ranges("delete_ranges", ranges) if r[4]]
        if not self.pipelines_windows or len(ranges) < 2:
            for r in ranges:
                self.delete_pairs(*r)
            return
        self._run(f"delete_pairs of {len(ranges)} ranges", None, self._delete_ranges, ranges)
        self.stats.add(round_trips=1, pairs_deleted=sum(r[4] for r in ranges))

    @property
    def pipelines_windows(self) -> bool:
        """Whether requests of many windows go to the backend in one round
        trip (:meth:`read_ranges`, :meth:`read_meta_many`,
        :meth:`swap_meta_many`): the file store (one transaction,
        :mod:`stores.sqlite_windows`) and standalone Redis."""
        return self._swap_meta_many is not None

    @property
    def reads_ranges_at_once(self) -> bool:
        """Whether :meth:`read_pairs_many` reads several ranges in one round trip."""
        return self._read_pairs_many is not None

    def delete_pairs(self, window: str, epoch: int, level: int, first: int,
                     count: int) -> None:
        """Delete indices ``[first, first + count)``; missing pairs are
        fine.  One round trip."""
        check_pairs(window, epoch, level, first, count)
        if count == 0:
            return
        self._run("delete_pairs", window, self._delete_pairs, window, epoch, level, first,
                  count)
        self.stats.add(round_trips=1, pairs_deleted=count)

    def drop_epoch(self, window: str, epoch: int,
                   ranges: Optional[Mapping[int, tuple[int, int]]] = None) -> None:
        """Delete every pair of ``(window, epoch)``, at any level.

        ``ranges`` (optional) maps level -> ``(first, end)``: the index
        ranges the caller knows to be in use.  Backends that can find their
        own pairs (memory, file, redis) ignore it; Couchbase, which cannot
        list keys, deletes exactly those ranges when given and otherwise the
        ranges it recorded while writing (see
        :class:`stores.couchbase_store.CouchbaseStore`).

        Round trips: 1 (memory, file), 2 (redis), about 4 for Couchbase (read
        the ranges record, remove -- one call per 4096 keys --, read and
        update the epochs record).  Deleting an epoch that has no pairs is
        fine.  Do not write to an epoch while dropping it.
        """
        check_window(window)
        check_uint("epoch", epoch)
        rng = check_ranges(ranges)
        trips = self._run("drop_epoch", window, self._drop_epoch, window, epoch, rng)
        self.stats.add(round_trips=trips or 1)

    def list_epochs(self, window: str) -> list[int]:
        """The epochs of ``window`` that may hold pairs, sorted (an epoch
        whose pairs were all deleted by delete_pairs may still be listed
        until drop_epoch).  One round trip."""
        check_window(window)
        out = self._run("list_epochs", window, self._list_epochs, window)
        self.stats.add(round_trips=1)
        return sorted(out)

    # --------------------------------------------------------- windows

    def deferred_channel(self) -> Any:
        """An object whose ``write_pairs`` / ``read_pairs`` send a request and
        return at once with a future-like result (``done()``, ``result()``,
        ``exception()``), the reply being read when asked for -- or ``None``
        when the backend has no such thing (the default): the level queues
        then overlap store I/O with background threads.  Redis has one
        (:class:`stores.redis_store.DeferredChannel`)."""
        return None

    #: ``check_value(value)``: raise TypeError when a window's value cannot be written (mta.storage)
    check_value = staticmethod(check_encodable)

    def open_window(self, window: str, **options: Any):
        """The storage of one engine's window (the protocol of :mod:`mta.tree`):
        claims ownership and resumes its checkpoint.  See
        :class:`stores.window.WindowStorage` for the options; with a
        ``batch`` that defers, the claim may have been made ahead, with
        other windows' (:meth:`stores.batch.Batch.open`)."""
        from .window import WindowStorage

        batch = check_open_options(options).get("batch")  # an unknown option is named before any claim
        if batch is not None and getattr(batch, "store", None) is self and batch.defers:
            return batch.open(check_window(window), options)
        return WindowStorage(self, check_window(window), **options)  # which refuses another store's batch

    def open_fifo(self, window: str, *, buffer_size: int = DEFAULT_BUFFER_SIZE,
                  cache_size: int = DEFAULT_CACHE_SIZE):
        """A fresh FIFO under the name ``window``: a level queue (``append``,
        ``q[i]``, ``q.lo`` moved forward to drop the oldest) whose middle lives
        in the store like an engine's levels, closed with ``close(delete=)``.
        It is never resumed: opening it starts it empty."""
        from .level_queue import StoreFifo
        from .window import WindowStorage

        storage = WindowStorage(self, check_window(window), engine=StoreFifo.LAYOUT, mutable_tail=0,
                                buffer_size=buffer_size, cache_size=cache_size, resume=False)
        return StoreFifo(storage, 0, 0)

    def delete_window(self, window: str) -> None:
        """Delete the window's metadata and every pair of every epoch
        (tests and administration; not atomic with concurrent writers)."""
        check_window(window)
        trips = self._run("delete_window", window, self._delete_window, window)
        self.stats.add(round_trips=trips or 1)

    def window_names(self) -> list[str]:
        """The name of every window with a metadata record or pairs, sorted.
        Round trips: 1 (memory, file; Couchbase reads its window index), Redis
        one SCAN per 1000 keys of the store (on every master of a Cluster)."""
        out = self._run("window_names", None, self._window_names)
        self.stats.add(round_trips=1)
        return sorted(set(out))

    def windows(self, older_than: Optional[float] = None, *, now: Optional[float] = None) -> list:
        """Every window, with its last use and whether a live owner may hold
        it (:class:`stores.gc.WindowInfo`).  See :func:`stores.gc.list_windows`."""
        from .gc import list_windows

        return list_windows(self, older_than, now=now)

    def sweep(self, older_than: float, *, dry_run: bool = False, now: Optional[float] = None,
              progress: Optional[Callable[[int, int], None]] = None):
        """Delete the windows not used for ``older_than`` seconds (every level
        of every epoch, then the record), fenced against owners that come
        back; a :class:`stores.gc.Sweep`.  See :func:`stores.gc.sweep`."""
        from .gc import sweep

        return sweep(self, older_than, dry_run=dry_run, now=now, progress=progress)

    def sync(self) -> None:
        """Make every write this store object has made durable, as a
        metadata write of its own would have been: the end of a batch of
        checkpoints made with ``durable=False`` (``open_window(...,
        durable=False)``).  One round trip where the backend syncs
        metadata (:attr:`SYNCS_META`: the file store fsyncs its log),
        none elsewhere (a server's durability is its own configuration)."""
        if self.SYNCS_META:
            self._run("sync", None, self._sync)
            self.stats.add(round_trips=1)

    def ping(self) -> None:
        """Check the backend answers (connecting if needed); raises
        :class:`StoreUnavailable` after the retries otherwise."""
        self._run("ping", None, self._ping)
        self.stats.add(round_trips=1)

    # -------------------------------------------------------- lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release connections.  Idempotent; later operations raise
        :class:`~stores.errors.StoreClosed`."""
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<{type(self).__name__} {self.url}{state}>"

    __str__ = __repr__

    # ----------------------------------------------- backend interface

    def _write_pairs(self, window: str, epoch: int, level: int, first: int,
                     blobs: list[bytes]) -> None:
        raise NotImplementedError

    def _read_pairs(self, window: str, epoch: int, level: int, first: int,
                    count: int) -> list[Optional[bytes]]:
        raise NotImplementedError

    def _delete_pairs(self, window: str, epoch: int, level: int, first: int,
                      count: int) -> None:
        raise NotImplementedError

    #: ``_read_pairs_many(window, ranges)``: ``_read_pairs`` of each
    #: ``(epoch, level, first, count)`` of ``ranges`` (at least two), in one
    #: round trip; ``None``: the backend has none, and
    #: :meth:`read_pairs_many` reads the ranges one by one.
    _read_pairs_many: Optional[Callable[[str, list], list]] = None

    def _drop_epoch(self, window: str, epoch: int,
                    ranges: Optional[dict[int, tuple[int, int]]]) -> Optional[int]:
        """Returns the number of round trips made (``None`` means 1)."""
        raise NotImplementedError

    def _list_epochs(self, window: str) -> list[int]:
        raise NotImplementedError

    def _read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        raise NotImplementedError

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool) -> Token:
        """Raise CasMismatch on a lost race.  ``retry`` is true when an
        earlier attempt of this same call failed in a way that may have
        applied it (see :meth:`cas_meta`)."""
        raise NotImplementedError

    #: ``_swap_meta(window, expected, value, retry, *, old, listing, durable)``:
    #: one round trip doing ``_cas_meta`` (``retry`` and ``durable`` as it
    #: takes them) that, when ``old`` is not ``None``, also requires the
    #: record's blob to be ``old``.  Returns ``(True, new token, epochs)``
    #: (``epochs``: as ``_list_epochs`` when ``listing``, else ``None``) or,
    #: without raising, ``(False, current token, blob)`` (``blob``: the
    #: record's current one when ``old`` was given, else ``None``; both
    #: ``None`` when the record is absent).  ``None``: the backend has none,
    #: and :meth:`swap_meta` and :meth:`cas_meta_epochs` make several calls.
    _swap_meta: Optional[Callable[..., tuple[bool, Token, Any]]] = None

    #: ``_swap_meta_many(calls, *, listing, durable)``: ``_swap_meta`` of each
    #: ``(window, expected, value, retry, old)`` of ``calls``, in one round
    #: trip; their results in order.  ``None``: the backend has none, and
    #: :meth:`swap_meta_many` makes one call per window.
    _swap_meta_many: Optional[Callable[..., list]] = None

    def _read_meta_many(self, windows: list[str]) -> list[tuple[Optional[bytes], Token]]:
        """``_read_meta`` of each window in one round trip, where
        :attr:`pipelines_windows` (a backend with ``_swap_meta_many``)."""
        raise NotImplementedError

    def _read_ranges(self, ranges: list[tuple[str, int, int, int, int]]) -> list[list[Optional[bytes]]]:
        """``_read_pairs`` of each ``(window, epoch, level, first, count)``
        in one round trip, where :attr:`pipelines_windows`."""
        raise NotImplementedError

    def _delete_ranges(self, ranges: list[tuple[str, int, int, int, int]]) -> None:
        """``_delete_pairs`` of each range in one round trip, where :attr:`pipelines_windows`."""
        raise NotImplementedError

    def _sync(self) -> None:
        """What :meth:`sync` does on a backend that syncs metadata writes."""
        raise NotImplementedError

    def _delete_meta(self, window: str, expected: Token) -> None:
        """Compare-and-delete of the metadata record (raise CasMismatch when
        its token is not ``expected``; an absent record is fine)."""
        raise NotImplementedError

    def _delete_window(self, window: str) -> Optional[int]:
        """Returns the number of round trips made (``None`` means 1)."""
        raise NotImplementedError

    def _window_names(self) -> list[str]:
        """Names of the windows with a record or pairs (duplicates allowed)."""
        raise NotImplementedError

    def _ping(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        pass


def _checked_ranges(name: str, ranges) -> list[tuple]:
    """``ranges`` as tuples, each a valid ``(window, epoch, level, first, count)``."""
    out = [tuple(r) for r in ranges]
    for r in out:
        if len(r) != 5:
            raise TypeError(f"{name} takes (window, epoch, level, first, count) ranges, got {r!r}")
        check_pairs(*r)
    return out

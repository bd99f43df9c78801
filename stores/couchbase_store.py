"""``couchbase://`` -- a store in Couchbase (Python SDK 4, the paper's KVS).

URLs: :mod:`stores.couchbase_url`.  Credentials: ``username`` / ``password`` options, else the URL's user info,
else the environment variables ``COUCHBASE_USERNAME`` /
``COUCHBASE_PASSWORD``.  The password never appears in ``url``, ``repr`` or
error messages.  Options: ``connect_timeout`` (s, default four fifths of the
store's ``timeout``, at most 10), ``kv_timeout`` (s, default half of it, at
most 2.5: an attempt ends before the store's ``timeout`` has passed, as the
Redis store's socket timeouts do), ``cluster_options`` (a dict of extra
``ClusterOptions`` arguments), ``collection`` (an already opened
Collection-like object: used as is, no connection made -- for tests and for
callers that manage their own Cluster), plus the common ``retries``,
``backoff`` and ``backoff_max``.

The SDK is imported lazily (the package imports without it) and the
connection is made by the first operation (``open_store`` does no I/O): a
cluster that is down makes that operation raise
:class:`~stores.errors.StoreUnavailable` after the retries.  Stores that
connect alike share one SDK ``Cluster`` (:mod:`stores.couchbase_connection`),
which waits for the key-value service only.  A store object used after
``fork`` notices the pid change and connects afresh in the child (the
parent's SDK connections are left alone).

Documents and the records of what was written: :mod:`stores.couchbase_layout`;
keeping the window index: :mod:`stores.couchbase_index`; what the SDK's
exceptions mean: :mod:`stores.couchbase_errors`.

``drop_epoch(window, epoch, ranges=None)``: every level goes, as the store
contract says: the recorded ranges (which may include indices already
deleted: removing a missing document is harmless but costs a request) and,
as a hint, ``ranges`` (level -> ``(first, end)``, e.g. the level queues'
``lo``/``hi`` from a checkpoint) for pairs a crashed writer never recorded.
The ranges document goes and the epoch leaves the epochs document.

Batches of more than :data:`CHUNK` keys are split into several SDK calls,
each counted as a round trip.  Compare-and-set: ``insert`` when the caller
expects no record (``DocumentExistsException`` -> CasMismatch), else
``replace`` with ``cas=`` (``CasMismatchException`` or
``DocumentNotFoundException`` -> CasMismatch).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Mapping, Optional

from . import codec
from .base import STORE_OPTIONS, Token, cas_mismatch
from . import couchbase_index as index
from . import couchbase_layout as layout
from .couchbase_connection import CouchbaseConnection
from .couchbase_errors import CAS, EXISTS, NOT_FOUND
from .couchbase_layout import EpochView, exc_kind
from .couchbase_url import parse_couchbase_url, redacted_url
from .errors import StoreConfigError, StoreError


#: Keys per SDK multi-operation call.
CHUNK = 4096

_NO_LOCK = contextlib.nullcontext()


class CouchbaseStore(CouchbaseConnection):
    scheme = "couchbase"

    def __init__(self, url: str, *, username: Optional[str] = None,
                 password: Optional[str] = None, collection: Any = None,
                 connect_timeout: Optional[float] = None, kv_timeout: Optional[float] = None,
                 cluster_options: Optional[Mapping[str, Any]] = None,
                 **options: Any) -> None:
        unknown = set(options) - STORE_OPTIONS
        if unknown:
            raise StoreConfigError(f"unknown option(s) for couchbase:// stores: "
                                   f"{', '.join(sorted(unknown))}")
        cfg = parse_couchbase_url(url)
        if username is not None:
            cfg["username"] = username
        elif cfg["username"] is None:
            cfg["username"] = os.environ.get("COUCHBASE_USERNAME") or None
        if password is not None:
            cfg["password"] = password
        elif cfg["password"] is None:
            cfg["password"] = os.environ.get("COUCHBASE_PASSWORD") or None
        super().__init__(redacted_url(cfg), **options)
        if connect_timeout is None:
            connect_timeout = min(10.0, 0.8 * self.timeout)
        if kv_timeout is None:
            kv_timeout = min(2.5, self.timeout / 2)
        self._connect_lazily(cfg, collection, connect_timeout, kv_timeout, cluster_options)
        self._lock = threading.Lock()
        self._views: dict[tuple[str, int], EpochView] = {}
        self._epochs: dict[str, set[int]] = {}
        self._epochs_lock = threading.RLock()

    # -------------------------------------------------------------- keys

    pair_key = staticmethod(layout.pair_key)
    meta_key = staticmethod(layout.meta_key)
    ranges_key = staticmethod(layout.ranges_key)
    epochs_key = staticmethod(layout.epochs_key)

    # ------------------------------------------------------ sdk helpers

    def _raise_errors(self, exceptions: Mapping[str, BaseException],
                      ignore_not_found: bool = False) -> None:
        for key, exc in exceptions.items():
            if ignore_not_found and NOT_FOUND in exc_kind(exc):
                continue
            raise exc

    def _get_multi(self, keys: list[str]) -> tuple[dict[str, bytes], int]:
        """Found documents by key; missing ones are absent.  Returns the
        number of SDK calls too."""
        coll = self._collection()
        found: dict[str, bytes] = {}
        calls = 0
        for start in range(0, len(keys), CHUNK):
            res = coll.get_multi(keys[start:start + CHUNK], return_exceptions=True,
                                 **self._kw())
            calls += 1
            self._raise_errors(res.exceptions, ignore_not_found=True)
            for key, r in res.results.items():
                found[key] = layout.as_bytes(r.value, key)
        return found, calls

    def _upsert_multi(self, docs: dict[str, bytes]) -> int:
        coll = self._collection()
        items = list(docs.items())
        calls = 0
        for start in range(0, len(items), CHUNK):
            res = coll.upsert_multi(dict(items[start:start + CHUNK]), return_exceptions=True,
                                    **self._kw())
            calls += 1
            self._raise_errors(res.exceptions)
            if not res.all_ok and not res.exceptions:  # pragma: no cover - defensive
                raise StoreError(f"store {self.url}: upsert_multi reported failure "
                                 f"without exceptions")
        return calls

    def _remove_multi(self, keys: list[str]) -> int:
        coll = self._collection()
        calls = 0
        for start in range(0, len(keys), CHUNK):
            res = coll.remove_multi(keys[start:start + CHUNK], return_exceptions=True)
            calls += 1
            self._raise_errors(res.exceptions, ignore_not_found=True)
        return calls

    def _get(self, key: str) -> tuple[Optional[bytes], Token]:
        try:
            r = self._collection().get(key, **self._kw())
        except Exception as exc:
            if NOT_FOUND in exc_kind(exc):
                return None, None
            raise
        return layout.as_bytes(r.value, key), r.cas

    # ------------------------------------------------------ range records

    def _decode_ranges(self, blob: Optional[bytes], key: str) -> dict[int, tuple[int, int]]:
        return layout.decode_ranges(blob, f"store {self.url}: document {key!r}")

    def _decode_epochs(self, blob: Optional[bytes], key: str) -> set[int]:
        return layout.decode_epochs(blob, f"store {self.url}: document {key!r}")

    def _load_view(self, window: str, epoch: int) -> tuple[EpochView, set[int], int]:
        """This object's view of (window, epoch) and of the window's epochs,
        reading the records the first time.  Returns the SDK calls made."""
        with self._lock:
            view = self._views.get((window, epoch))
            epochs = self._epochs.get(window)
        if view is not None and epochs is not None:
            return view, epochs, 0
        rk, ek = self.ranges_key(window, epoch), self.epochs_key(window)
        found, calls = self._get_multi([rk, ek])
        with self._lock:
            if (window, epoch) not in self._views:
                self._views[(window, epoch)] = EpochView(self._decode_ranges(found.get(rk), rk))
            if window not in self._epochs:
                self._epochs[window] = self._decode_epochs(found.get(ek), ek)
            return self._views[(window, epoch)], self._epochs[window], calls

    # ----------------------------------------------------------- backend

    def _write_pairs(self, window: str, epoch: int, level: int, first: int,
                     blobs: list[bytes]) -> None:
        view, epochs, calls = self._load_view(window, epoch)
        end = first + len(blobs)
        docs = {self.pair_key(window, epoch, level, i): b for i, b in enumerate(blobs, first)}
        rk, ek = self.ranges_key(window, epoch), self.epochs_key(window)
        # A new epoch also rewrites the epochs record: serialize those writes.
        epochs_lock = self._epochs_lock if epoch not in epochs else _NO_LOCK
        with epochs_lock, view.lock:
            with self._lock:
                old = view.ranges.get(level)
                new = (first, end) if old is None else (min(old[0], first), max(old[1], end))
                ranges = dict(view.ranges)
                ranges[level] = new
                changed = view.dirty or new != old
                view.dirty = False
                new_epoch = epoch not in epochs
            if changed:
                docs[rk] = codec.encode(ranges)
            if new_epoch:
                docs[ek] = codec.encode(sorted(epochs | {epoch}))
            try:
                calls += self._upsert_multi(docs)
            except BaseException:
                with self._lock:
                    view.dirty = view.dirty or changed
                raise
            with self._lock:
                cur = view.ranges.get(level)
                view.ranges[level] = (first, end) if cur is None else (min(cur[0], first),
                                                                       max(cur[1], end))
                if view.ranges != ranges:  # a concurrent delete moved a start
                    view.dirty = True
                epochs.add(epoch)
        self._extra_trips(calls)

    def _read_pairs(self, window: str, epoch: int, level: int, first: int,
                    count: int) -> list[Optional[bytes]]:
        keys = [self.pair_key(window, epoch, level, i) for i in range(first, first + count)]
        found, calls = self._get_multi(keys)
        self._extra_trips(calls)
        return [found.get(k) for k in keys]

    def _delete_pairs(self, window: str, epoch: int, level: int, first: int,
                      count: int) -> None:
        end = first + count
        calls = self._remove_multi([self.pair_key(window, epoch, level, i)
                                    for i in range(first, end)])
        with self._lock:
            view = self._views.get((window, epoch))
            if view is not None:
                rng = view.ranges.get(level)
                if rng is not None and first <= rng[0] < end:
                    view.ranges[level] = (min(end, rng[1]), rng[1])
                    view.dirty = True
        self._extra_trips(calls)

    def _drop_epoch(self, window: str, epoch: int,
                    ranges: Optional[dict[int, tuple[int, int]]]) -> int:
        rk, ek = self.ranges_key(window, epoch), self.epochs_key(window)
        # The given ranges are a hint (pairs never recorded); the recorded
        # ones go too, or levels the caller did not name would stay forever.
        found, calls = self._get_multi([rk])
        hint, ranges = ranges or {}, self._decode_ranges(found.get(rk), rk)
        with self._lock:
            view = self._views.get((window, epoch))
            mine = dict(view.ranges) if view is not None else {}  # this object's writes may be newer
        for extra in (mine, hint):
            for level, (a, b) in extra.items():
                old = ranges.get(level)
                ranges[level] = (a, b) if old is None else (min(a, old[0]), max(b, old[1]))
        keys = [self.pair_key(window, epoch, level, i)
                for level, (a, b) in sorted(ranges.items()) for i in range(a, b)]
        keys.append(rk)
        calls += self._remove_multi(keys)
        with self._epochs_lock:
            found, c = self._get_multi([ek])
            calls += c
            epochs = self._decode_epochs(found.get(ek), ek)
            if epoch in epochs:
                epochs.discard(epoch)
                if epochs:
                    calls += self._upsert_multi({ek: codec.encode(sorted(epochs))})
                else:  # the window's last epoch: no empty record stays behind
                    calls += self._remove_multi([ek])
            with self._lock:
                self._views.pop((window, epoch), None)
                known = self._epochs.get(window)
                if known is not None:  # update in place: writers hold this set
                    known.clear()
                    known.update(epochs)
        return calls

    def _list_epochs(self, window: str) -> list[int]:
        ek = self.epochs_key(window)
        found, calls = self._get_multi([ek])
        self._extra_trips(calls)
        return sorted(self._decode_epochs(found.get(ek), ek))

    def _read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        return self._get(self.meta_key(window))

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool) -> Token:
        coll = self._collection()
        key = self.meta_key(window)
        if expected is None:  # listed before it exists: a crash here leaves a name, not a record
            self.stats.add(round_trips=index.update(self, window, add=True))
        try:
            if expected is None:
                res = coll.insert(key, value, **self._kw())
            else:
                res = coll.replace(key, value, cas=expected, **self._kw())
            return res.cas
        except Exception as exc:
            names = exc_kind(exc)
            if not names & {EXISTS, CAS, NOT_FOUND}:
                raise
            current_blob, current = self._get(key)
            if retry and current_blob == value:
                # An earlier attempt of this call landed before its reply was lost.
                return current
            raise cas_mismatch(window, expected, current) from None

    def _delete_meta(self, window: str, expected: Token) -> None:
        key = self.meta_key(window)
        try:
            self._collection().remove(key, cas=expected, **self._kw())
        except Exception as exc:
            names = exc_kind(exc)
            if NOT_FOUND not in names:
                if not names & {EXISTS, CAS}:
                    raise
                raise cas_mismatch(window, expected, self._get(key)[1]) from None
        self._unindex(window)

    def _delete_window(self, window: str) -> int:
        ek = self.epochs_key(window)
        found, calls = self._get_multi([ek])
        epochs = self._decode_epochs(found.get(ek), ek)
        with self._lock:
            epochs |= {e for (w, e) in self._views if w == window}
        rkeys = [self.ranges_key(window, e) for e in sorted(epochs)]
        recorded, c = self._get_multi(rkeys) if rkeys else ({}, 0)
        calls += c
        keys: list[str] = []
        for e, rk in zip(sorted(epochs), rkeys):
            ranges = self._decode_ranges(recorded.get(rk), rk)
            with self._lock:
                view = self._views.get((window, e))
                if view is not None:
                    for level, (a, b) in view.ranges.items():
                        old = ranges.get(level)
                        ranges[level] = (a, b) if old is None else (min(a, old[0]),
                                                                    max(b, old[1]))
            keys.extend(self.pair_key(window, e, level, i)
                        for level, (a, b) in sorted(ranges.items()) for i in range(a, b))
            keys.append(rk)
        keys += [ek, self.meta_key(window)]
        calls += self._remove_multi(keys)
        with self._lock:
            for k in [k for k in self._views if k[0] == window]:
                del self._views[k]
            self._epochs.pop(window, None)
        self._unindex(window)
        return calls

    # ------------------------------------------------------ window index

    def _window_names(self) -> list[str]:
        found, calls = self._get_multi(layout.index_keys())
        self._extra_trips(calls)
        names: list[str] = []
        for key, blob in found.items():
            names.extend(layout.decode_index(blob, f"store {self.url}: document {key!r}"))
        return names

    #: Take a deleted window out of the index (:func:`stores.couchbase_index.unindex`).
    _unindex = index.unindex

    def _ping(self) -> None:
        self._collection()

    def _extra_trips(self, calls: int) -> None:
        if calls > 1:
            self.stats.add(round_trips=calls - 1)


__all__ = ["CouchbaseStore", "parse_couchbase_url", "exc_kind", "CHUNK"]

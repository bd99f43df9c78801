"""Couchbase stores' connections: the process's SDK clusters, shared by the
stores that connect alike, and a store's collection through them
(:class:`CouchbaseConnection`, the base of
:class:`stores.couchbase_store.CouchbaseStore`).

Connecting a ``Cluster`` costs most of a second, so one serves every store
of the process opened with the same connection string, credentials,
timeouts and ``cluster_options`` (:func:`cluster_key`); it is closed when
the last of them releases it.  After ``fork`` the child starts with no
entries and never closes the parent's clusters (kept referenced in
:data:`inherited`).  The SDK is imported only when a store connects
(:func:`bucket`) or makes its transcoder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from datetime import timedelta
from typing import Any, Mapping, Optional

from .base import Store
from .couchbase_errors import classify
from .couchbase_url import query_secrets
from .errors import StoreConfigError
from .options import seconds

#: Clusters inherited across fork, kept referenced so the child never closes them.
inherited: list = []


class SharedCluster:
    """One SDK Cluster and the stores using it (see :func:`acquire`)."""

    __slots__ = ("cluster", "users", "lock", "buckets")

    def __init__(self) -> None:
        self.cluster: Any = None
        self.users = 0
        self.lock = threading.Lock()  # connecting and opening buckets
        self.buckets: dict[str, Any] = {}  # opened, and the key-value service ready


#: The process's entries by :func:`cluster_key`.
clusters: dict[tuple, SharedCluster] = {}
_clusters_lock = threading.Lock()
_clusters_pid = os.getpid()


def acquire(key: tuple) -> SharedCluster:
    """The process's shared cluster entry for ``key``, counted as used (its
    ``cluster`` is None until the first user connects)."""
    global _clusters_pid
    with _clusters_lock:
        if _clusters_pid != os.getpid():
            # Forked: the entries' connections belong to the parent.
            inherited.extend(e.cluster for e in clusters.values() if e.cluster is not None)
            clusters.clear()
            _clusters_pid = os.getpid()
        entry = clusters.get(key)
        if entry is None:
            entry = clusters[key] = SharedCluster()
        entry.users += 1
        return entry


def release(key: tuple, entry: SharedCluster, pid: int) -> None:
    """One user less; the last one closes the cluster (in the process that
    acquired it only: a forked child never closes its parent's)."""
    with _clusters_lock:
        if pid != os.getpid() or _clusters_pid != pid:
            return
        entry.users -= 1
        if entry.users > 0:
            return
        if clusters.get(key) is entry:
            del clusters[key]
        cluster, entry.cluster = entry.cluster, None
    if cluster is not None:
        with contextlib.suppress(Exception):  # best effort: the store is closed either way
            cluster.close()


def cluster_key(cfg: Mapping[str, Any], password: Optional[str], connect_timeout: float,
                kv_timeout: float, cluster_options: Mapping[str, Any]) -> tuple:
    """What makes two stores' clusters interchangeable.  The password is held
    as a digest, so the key never shows it."""
    digest = hashlib.sha256((password or "").encode()).hexdigest()
    return (cfg["connstr"], cfg["username"], digest, connect_timeout, kv_timeout,
            repr(sorted(cluster_options.items())))


def bucket(entry: SharedCluster, cfg: Mapping[str, Any], password: str, bucket_name: str, *,
           connect_timeout: float, kv_timeout: float, transcoder: Any,
           cluster_options: Mapping[str, Any]) -> Any:
    """The bucket, through the shared cluster (connected by its first user),
    once the key-value service answers."""
    try:
        from couchbase.auth import PasswordAuthenticator
        from couchbase.cluster import Cluster
        from couchbase.diagnostics import ServiceType
        from couchbase.options import ClusterOptions, ClusterTimeoutOptions, WaitUntilReadyOptions
    except ImportError as exc:
        raise StoreConfigError(
            "couchbase:// stores need the Couchbase SDK: "
            "pip install 'mta-windows[couchbase]'") from exc
    with entry.lock:
        if entry.cluster is None:
            opts = ClusterOptions(
                PasswordAuthenticator(cfg["username"], password),
                timeout_options=ClusterTimeoutOptions(
                    bootstrap_timeout=timedelta(seconds=connect_timeout),
                    connect_timeout=timedelta(seconds=connect_timeout),
                    kv_timeout=timedelta(seconds=kv_timeout)),
                transcoder=transcoder, **cluster_options)
            entry.cluster = Cluster(cfg["connstr"], opts)
        opened = entry.buckets.get(bucket_name)
        if opened is None:
            opened = entry.cluster.bucket(bucket_name)
            # The bucket's key-value connections are what the store uses;
            # waiting for every service would let a degraded query,
            # search or analytics node hold up the first operations.
            entry.cluster.wait_until_ready(
                timedelta(seconds=connect_timeout),
                WaitUntilReadyOptions(service_types=[ServiceType.KeyValue]))
            entry.buckets[bucket_name] = opened
        return opened


class CouchbaseConnection(Store):
    """A Couchbase store's collection, opened through a shared cluster by
    the first operation and again in a forked child, its binary transcoder,
    and the cluster released on close."""

    def _connect_lazily(self, cfg: dict[str, Any], collection: Any, connect_timeout: float,
                        kv_timeout: float, cluster_options: Optional[Mapping[str, Any]]) -> None:
        """Connection settings from the parsed URL ``cfg`` (credentials
        settled); ``collection``: an opened Collection-like object to use as is."""
        self._cfg = cfg
        self._password = cfg["password"]
        self.bucket_name = cfg["bucket"]
        self.scope_name = cfg["scope"]
        self.collection_name = cfg["collection"]
        self.connect_timeout = seconds("connect_timeout", connect_timeout)
        self.kv_timeout = seconds("kv_timeout", kv_timeout)
        if cluster_options is not None and not isinstance(cluster_options, Mapping):
            # its type only: settings may hold credentials
            raise StoreConfigError(f"cluster_options must be a dict of ClusterOptions settings, "
                                   f"not {type(cluster_options).__name__}")
        self._cluster_options = dict(cluster_options or {})
        if "transcoder" in self._cluster_options:
            raise StoreConfigError("cluster_options must not set transcoder: the store reads and writes raw bytes "
                                   "(RawBinaryTranscoder), never values the SDK encodes")
        self._coll = collection
        self._cluster: Any = None
        self._owns_cluster = collection is None
        self._shared: Optional[SharedCluster] = None  # the entry this store uses
        self._shared_key = cluster_key(cfg, self._password, self.connect_timeout, self.kv_timeout,
                                       self._cluster_options)
        self._pid = os.getpid()
        self._conn_lock = threading.Lock()
        self._transcoder = self._make_transcoder()

    @staticmethod
    def _make_transcoder() -> Any:
        try:
            from couchbase.transcoder import RawBinaryTranscoder
        except ImportError:
            return None
        return RawBinaryTranscoder()

    def _kw(self) -> dict[str, Any]:
        return {} if self._transcoder is None else {"transcoder": self._transcoder}

    def _collection(self) -> Any:
        coll = self._coll
        if coll is not None and self._pid == os.getpid():
            return coll
        with self._conn_lock:
            if self._pid != os.getpid():
                # Forked: the SDK's connections belong to the parent.  Drop our
                # references without closing them and connect afresh.
                self._pid = os.getpid()
                if self._owns_cluster:
                    self._shared = None
                    self._cluster = self._coll = None
            if self._coll is None:
                if not self._cfg["username"] or not self._password:
                    raise StoreConfigError(
                        f"store {self.url}: no Couchbase credentials: pass username= and "
                        f"password= or set COUCHBASE_USERNAME and COUCHBASE_PASSWORD")
                entry = acquire(self._shared_key)
                try:
                    opened = bucket(
                        entry, self._cfg, self._password, self.bucket_name,
                        connect_timeout=self.connect_timeout, kv_timeout=self.kv_timeout,
                        transcoder=self._transcoder, cluster_options=self._cluster_options)
                    coll = opened.scope(self.scope_name).collection(self.collection_name)
                except BaseException:
                    release(self._shared_key, entry, os.getpid())
                    raise
                self._shared, self._cluster, self._coll = entry, entry.cluster, coll
            return self._coll

    def _secrets(self) -> tuple[str, ...]:
        return ((self._password,) if self._password else ()) + query_secrets(self._cfg)

    _classify = staticmethod(classify)

    def _close(self) -> None:
        entry, self._shared, self._cluster = self._shared, None, None
        if self._owns_cluster:
            self._coll = None
        if entry is not None:
            release(self._shared_key, entry, self._pid)

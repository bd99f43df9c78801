"""The process's Couchbase SDK clusters, shared by the stores that connect
alike (:class:`stores.couchbase_store.CouchbaseStore`).

Connecting a ``Cluster`` costs most of a second, so one serves every store
of the process opened with the same connection string, credentials,
timeouts and ``cluster_options`` (:func:`cluster_key`); it is closed when
the last of them releases it.  After ``fork`` the child starts with no
entries and never closes the parent's clusters (kept referenced in
:data:`inherited`).  The SDK is imported only by :func:`bucket`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from datetime import timedelta
from typing import Any, Mapping, Optional

from .errors import StoreConfigError

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

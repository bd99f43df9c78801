"""The one statistics class of the stores: counters of store traffic."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields


@dataclass
class StoreStats:
    """Counters of store traffic: a store object's (``store.stats``) or one
    window's (``engine.store_stats``); never shared between processes.

    * ``round_trips`` -- requests to the backend made by successful calls
      (a call that moves any number of pairs counts 1; a call with an empty
      range counts 0; a failed attempt that was retried is counted in
      ``retries`` instead);
    * ``pairs_written`` / ``pairs_read`` / ``pairs_deleted`` -- pairs passed
      to write_pairs / pairs found by read_pairs / pairs *requested* for
      deletion by delete_pairs (missing ones included);
    * ``bytes_written`` / ``bytes_read`` -- blob bytes of pairs and metadata;
    * ``meta_reads`` / ``meta_writes`` -- read_meta / successful cas_meta;
    * ``cas_failures`` -- cas_meta calls that raised CasMismatch;
    * ``retries`` -- attempts retried after a transient error;
    * ``cache_hits`` / ``cache_misses`` -- a window's head-cache lookups;
      ``prefetch_waits`` -- misses that waited for the prefetch in flight;
    * ``checkpoints`` -- a window's committed checkpoints.

    A window counts its pairs (not the store's values, one per group of
    pairs) and its own round trips; the store counts every request.
    """

    round_trips: int = 0
    pairs_written: int = 0
    pairs_read: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    pairs_deleted: int = 0
    meta_reads: int = 0
    meta_writes: int = 0
    cas_failures: int = 0
    retries: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    prefetch_waits: int = 0
    checkpoints: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False,
                                  compare=False)

    def add(self, **counts: int) -> None:
        """Add to several counters at once (thread-safe)."""
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self)
                    if not f.name.startswith("_")}

    def snapshot(self) -> "StoreStats":
        return StoreStats(**self.as_dict())

    def reset(self) -> None:
        with self._lock:
            for f in fields(self):
                if not f.name.startswith("_"):
                    setattr(self, f.name, 0)

    def __sub__(self, other: "StoreStats") -> "StoreStats":
        a, b = self.as_dict(), other.as_dict()
        return StoreStats(**{k: a[k] - b[k] for k in a})

    def __getstate__(self) -> dict:
        return self.as_dict()

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)


# ------------------------------------------------------------- validation

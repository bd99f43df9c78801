"""The documents of a Couchbase store, and the records of what it wrote.

Documents (binary, ``RawBinaryTranscoder``)::

    mta::<window>::meta                      metadata blob; token = document CAS
    mta::<window>::e<epoch>::l<level>::<i>   one pair
    mta::<window>::e<epoch>::ranges          {level: (first, end)} written so far
    mta::<window>::epochs                    the epochs that hold pairs

    mta::windows::<shard>                    window index: the names of windows with a
                                             record, shard = CRC-32 of the name mod 1024
                                             (a window's keys end in ::meta, ::epochs,
                                             ::ranges or ::e<E>::l<L>::<i>: none is one)

Couchbase cannot list keys (without the query service, which is not
assumed), so the store records what it writes: the
*ranges* document of an epoch holds, per level, the smallest index written
and the end of the highest range, and the *epochs* document lists the
epochs.  Both ride in the same ``upsert_multi`` as the pairs (one round
trip); a store object reads them once per window and epoch before its
first write there (one extra round trip, once).  delete_pairs from the head
of a level advances the recorded start on the next write.  The records
assume one writer per window (the fencing layer's job); with several, the
last writer's view wins.

The window index lets ``mta-spark gc`` find every window with the
key-value service only: a window's name is added (compare-and-set on its
shard) before its metadata record is created, and removed after the record
is deleted, so a crash in between leaves a name without a record (listed,
and swept) rather than a record nobody can find.  It costs two round trips
when a window is created (read the shard, write it back) and three when it
is deleted (the shard, then a check that nobody created the window again).  Names of windows whose
only trace is pairs a stale engine wrote after the window was deleted are
not in the index (the next delete of that window takes them).
"""

from __future__ import annotations

import threading
import zlib
from typing import Any, Optional

from . import codec
from .errors import CorruptValue


def exc_kind(exc: BaseException) -> set[str]:
    """Names of the exception's classes (SDK exceptions are matched by name,
    so no SDK import is needed to classify them)."""
    return {c.__name__ for c in type(exc).__mro__}


def pair_key(window: str, epoch: int, level: int, index: int) -> str:
    return f"mta::{window}::e{epoch}::l{level}::{index}"


def meta_key(window: str) -> str:
    return f"mta::{window}::meta"


def ranges_key(window: str, epoch: int) -> str:
    return f"mta::{window}::e{epoch}::ranges"


def epochs_key(window: str) -> str:
    return f"mta::{window}::epochs"


#: Documents the window index is spread over (a window creation rewrites one).
INDEX_SHARDS = 1024


def index_key(window: str) -> str:
    return f"mta::windows::{zlib.crc32(window.encode()) % INDEX_SHARDS}"


def index_keys() -> list[str]:
    return [f"mta::windows::{shard}" for shard in range(INDEX_SHARDS)]


def decode_index(blob: Optional[bytes], where: str) -> set[str]:
    """A shard of the window index: window names (empty if absent)."""
    if blob is None:
        return set()
    value = codec.decode(blob)
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise CorruptValue(f"{where} is not a window index")
    return set(value)


def decode_ranges(blob: Optional[bytes], where: str) -> dict[int, tuple[int, int]]:
    """An epoch's ranges record, ``{level: (first, end)}`` (empty if absent)."""
    if blob is None:
        return {}
    value = codec.decode(blob)
    if not isinstance(value, dict):
        raise CorruptValue(f"{where} is not a ranges record")
    return {int(k): (int(v[0]), int(v[1])) for k, v in value.items()}


def decode_epochs(blob: Optional[bytes], where: str) -> set[int]:
    """A window's epochs record (empty if absent)."""
    if blob is None:
        return set()
    value = codec.decode(blob)
    if not isinstance(value, list):
        raise CorruptValue(f"{where} is not an epochs record")
    return {int(e) for e in value}


class EpochView:
    """What this store object knows of the recorded ranges of one epoch.

    ``lock`` serializes this object's writes to the epoch, so that the
    ranges record each write carries includes every earlier write; ``dirty``
    means the record on the server lags behind ``ranges`` (a delete moved a
    start, or a write failed) and the next write must carry it."""

    __slots__ = ("ranges", "dirty", "lock")

    def __init__(self, ranges: dict[int, tuple[int, int]]) -> None:
        self.ranges = ranges
        self.dirty = False
        self.lock = threading.Lock()


def as_bytes(value: Any, key: str) -> bytes:
    """A document's value as the SDK returned it, which must be binary."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise CorruptValue(f"document {key!r} is not binary (got {type(value).__name__}); "
                       f"was it written by another application?")

"""The documents of a Couchbase store, and the records of what it wrote.

Documents (binary, ``RawBinaryTranscoder``)::

    mta::<window>::meta                      metadata blob; token = document CAS
    mta::<window>::e<epoch>::l<level>::<i>   one pair
    mta::<window>::e<epoch>::ranges          {level: (first, end)} written so far
    mta::<window>::epochs                    the epochs that hold pairs

Couchbase cannot list keys, so the store records what it writes: the
*ranges* document of an epoch holds, per level, the smallest index written
and the end of the highest range, and the *epochs* document lists the
epochs.  Both ride in the same ``upsert_multi`` as the pairs (one round
trip); a store object reads them once per window and epoch before its
first write there (one extra round trip, once).  delete_pairs from the head
of a level advances the recorded start on the next write.  The records
assume one writer per window (the fencing layer's job); with several, the
last writer's view wins.
"""

from __future__ import annotations

import threading
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

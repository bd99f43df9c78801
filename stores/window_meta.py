"""A window's metadata record: its layout, decoding, a new record, who
opened it and when, and the fenced delete of a window.

:class:`stores.window.WindowStorage` claims, checkpoints and cleans up
through these; :mod:`stores.gc` lists and sweeps windows with them.
"""

from __future__ import annotations

import os
import reprlib
import secrets
import socket
import time
from typing import Callable

from .codec import decode, encode
from .errors import CasMismatch, CorruptValue, FormatVersionError

#: Version of the metadata record layout (2: pairs stored in groups).
META_FORMAT = 2

#: Bits of the random epoch a window's new record starts from (:func:`epoch_base`).
EPOCH_BASE_BITS = 48


def decode_meta(blob: bytes, where: str) -> dict:
    """A window's metadata record (msgpack through :mod:`stores.codec`, never
    pickle), its fields of the types this code reads them as; CorruptValue or
    FormatVersionError naming ``where`` and the field otherwise: a record
    another application or a hand edit wrote in a valid encoding.
    O(checkpoints x levels)."""
    try:
        meta = decode(blob)
    except (CorruptValue, FormatVersionError) as exc:
        raise type(exc)(f"{where}: metadata: {exc}") from exc
    except TypeError as exc:  # not bytes
        raise CorruptValue(f"{where}: metadata: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT:
        raise FormatVersionError(
            f"{where}: metadata format {meta.get('format') if isinstance(meta, dict) else '?'} "
            f"is not {META_FORMAT}; it was written by an incompatible version")
    missing = sorted(_META_FIELDS - meta.keys())
    if missing:
        raise CorruptValue(f"{where}: metadata lacks {missing}")
    _check_fields(meta, where)
    return meta


def _check_fields(meta: dict, where: str) -> None:
    """Raise CorruptValue naming the first field of ``meta`` whose type or
    range is not the one records are written with."""
    def bad(field: str, value, want: str) -> CorruptValue:
        return CorruptValue(f"{where}: metadata field {field} is {reprlib.repr(value)}, not {want}")

    for name, least in (("epoch", 0), ("version", 0), ("group", 1)):  # group: a divisor
        if not _uint(meta[name], least):
            raise bad(name, meta[name], f"an int >= {least}")
    for name in ("epochs", "gc"):
        if type(meta[name]) is not list or not all(_uint(v) for v in meta[name]):
            raise bad(name, meta[name], "a list of ints >= 0")
    if type(meta["checkpoints"]) is not list:
        raise bad("checkpoints", meta["checkpoints"], "a list")
    for k, entry in enumerate(meta["checkpoints"]):
        if type(entry) is not list or len(entry) != 4 or not _uint(entry[0]) \
                or not (entry[1] is None or _uint(entry[1])) or type(entry[2]) is not list or type(entry[3]) is not str:
            raise bad(f"checkpoints[{k}]", entry, "[version, parent version or None, level records, engine]")
        for level, rec in enumerate(entry[2]):
            if not _level_record(rec):
                raise bad(f"checkpoints[{k}] level {level}", rec,
                          "{lo, hi, stored: ints >= 0, tail: a list, segments: a list of [epoch, first pair]}")
    tags = meta.get("tags", [])
    if type(tags) is not list or not all(type(t) is list and len(t) == 4 and _uint(t[0]) for t in tags):
        raise bad("tags", tags, "a list of [version, run, step, label]")


def _uint(value, least: int = 0) -> bool:
    return type(value) is int and value >= least


def _level_record(rec) -> bool:
    """Whether ``rec`` is a level's checkpoint record in form (what
    :meth:`stores.level_queue.StoreLevelQueue.restore` reads)."""
    return (type(rec) is dict and all(_uint(rec.get(k)) for k in ("lo", "hi", "stored"))
            and rec["lo"] <= rec["hi"] and type(rec.get("tail")) is list and type(rec.get("segments")) is list
            and all(type(s) is list and len(s) == 2 and _uint(s[0]) and _uint(s[1]) for s in rec["segments"]))


def new_meta(epoch: int, group: int) -> dict:
    """The metadata record of a window nobody has written yet."""
    return {"format": META_FORMAT, "epoch": epoch, "epochs": [], "group": group,
            "version": 0, "checkpoints": [], "gc": []}


def epoch_base() -> int:
    """The epoch a window's new record starts from (its first claim adds 1):
    random below ``2**EPOCH_BASE_BITS``, not 0.  A record is deleted with
    its window (``close(delete=True)``, a streaming key's expiry, ``mta-spark
    gc``) and a stale engine of that earlier life may still be writing
    pairs, which are not fenced; the window made anew under the name must
    not share its epochs, or those pairs would land on the keys the new
    window reads (a group's place binds window, epoch, level and index
    only).  Two lives overlap only if one's claims reach the other's random
    start (about claims / 2**48).  48 bits leave room for any number of
    claims below the stores' 2**63 limit, and stay exact as a double for
    tools that read them.  :mod:`secrets`, not :mod:`random`: forked workers
    share the ``random`` module's state and would draw the same base.
    A record already stored keeps its epochs, whatever they start from: a
    claim only ever raises them."""
    return secrets.randbits(EPOCH_BASE_BITS)


def owner() -> str:
    """Who opens a window, recorded in its metadata (``mta-spark gc`` lists it)."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def clock_of(store) -> Callable[[], float]:
    """The wall clock a window's ``used`` time is read from: the store's
    ``clock`` (tests give it a fake one), else :func:`time.time`."""
    return getattr(store, "clock", None) or time.time


def delete_fenced(store, window: str, meta: dict, token, call=None, emptied=None, *, durable: bool = True) -> None:
    """Delete ``window`` (record ``meta`` with token ``token``): every pair
    of every epoch up to the record's, then the record.

    The record is first emptied by compare-and-set: if it changed since
    ``token`` was read (a newer owner, or a checkpoint) that raises
    :class:`CasMismatch` and nothing is deleted.  An owner arriving after
    that claims above this epoch and starts empty, so dropping the epochs up
    to it never touches its pairs; the emptied record is then removed only
    if still the one written here.  ``token=None`` with ``meta`` a
    :func:`new_meta` fences a window that has pairs but no record: creating
    the emptied record fails if one appeared meanwhile.  ``emptied(token,
    record)`` is told the emptied record once it is written.  ``durable=False``
    (a record that holds no checkpoint): the emptied record is written like a
    claim, without the store's sync (``cas_meta(durable=False)``).

    Round trips: 3 (4 without a record), plus one ``drop_epoch`` per epoch
    (O(pairs) keys deleted)."""
    call = call or (lambda fn, *args, **options: fn(*args, **options))
    known = set(meta["epochs"])
    if token is None:  # no record: the emptied one must sit above every epoch left
        known |= set(call(store.list_epochs, window))
    epoch = max([meta["epoch"], *known])
    tombstone = dict(meta, epoch=epoch, checkpoints=[], epochs=[])
    token = call(store.cas_meta, window, token, encode(tombstone), **({} if durable else {"durable": False}))
    if emptied is not None:
        emptied(token, tombstone)
    # the store's own list too: a zombie may have written under an epoch the record no longer names
    for e in sorted(known | set(call(store.list_epochs, window))):
        if e <= epoch:
            call(store.drop_epoch, window, e)
    try:
        call(store.delete_meta, window, token)
    except CasMismatch:
        pass  # a newer owner claimed the (empty) window meanwhile: the record is its own


#: Fields every metadata record (format META_FORMAT) has.  ``used`` (the wall
#: clock of the last open or checkpoint) and ``owner`` (who last opened it) are
#: absent from records written before they existed, so they are optional.
_META_FIELDS = frozenset({"format", "epoch", "epochs", "group", "version", "checkpoints", "gc"})

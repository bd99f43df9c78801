"""Packing a window's metadata record (:class:`stores.window.WindowStorage`'s
packing half): a retained checkpoint never changes, so each checkpoint
entry is packed once and its payload reused, found by identity.  An entry
the codec packs in C is packed whole (:func:`stores.codec.packed_in_c`):
that costs less than finding which of its parts were packed before.
Others (a registered type or a big int in a window, or no C packer) pack
each tail element once, since consecutive checkpoints share most of them,
and a claim finds the payloads of the record it read
(:func:`checkpoint_payloads`).
"""

from __future__ import annotations

from .codec import encode_map, packed, packed_in_c, packed_list, packed_map
from .payload_reader import PayloadReader

__all__ = ["MetaPacking", "checkpoint_payloads", "claimed_payloads"]


class MetaPacking:
    """The record packing of a :class:`stores.window.WindowStorage` (which
    holds the payloads: ``_packed`` per checkpoint entry, ``_elements`` per
    tail element of the newest checkpoint)."""

    _packed: dict
    _elements: dict

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
        records, engine]``: in C, whole, O(entry); else each element of its
        levels' tails packed once: a window's consecutive checkpoints share
        most of them (the same objects while this process keeps the window,
        :mod:`stores.meta_cache`), and packing those tuples in Python
        dominates; O(elements in the tails) dict lookups, plus packing the
        new elements."""
        payload = packed_in_c(entry)
        if payload is not None:
            return payload
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


def _by_identity(entries: list, parts: list[bytes]):
    """``(id(entry), (entry, payload))`` pairs (the entry is kept so that its
    id cannot be reused while remembered)."""
    return ((id(c), (c, p)) for c, p in zip(entries, parts))


def claimed_payloads(blob: bytes, meta: dict, checkpoint: list | None) -> tuple[dict, dict]:
    """``(_packed, _elements)`` for a window claimed from the record
    ``blob`` (``meta``: its decoded form) to resume ``checkpoint``: its
    payload packed in C where it packs there (it stays retained, as the
    parent of the next checkpoint, which reuses it), else what the record
    holds (:func:`checkpoint_payloads`)."""
    payload = packed_in_c(checkpoint) if checkpoint is not None else None
    if payload is not None:
        return dict(_by_identity([checkpoint], [payload])), {}
    parts, elements = checkpoint_payloads(blob, meta, checkpoint and checkpoint[0])
    return dict(_by_identity(meta["checkpoints"], parts)), elements


def checkpoint_payloads(blob: bytes, meta: dict, version: int | None) -> tuple[list[bytes], dict]:
    """From the record ``blob`` (``meta``: its decoded form), in one walk:
    the payload of each checkpoint entry (in order; re-encoding reuses them,
    a retained checkpoint never changes), and the payloads of the tail
    elements of checkpoint ``version`` as ``_elements`` holds them
    (``id(element) -> (element, payload)``), so that a window resumed from a
    record another process wrote packs only the tail elements its next
    checkpoint changes, as the process that wrote it would.  The entries are
    skipped in msgpack's C unpacker, but for that checkpoint's tails:
    O(tail elements of that checkpoint) dict entries."""
    parts: list[bytes] = []
    elements: dict = {}
    reader = PayloadReader(blob)
    for _ in range(reader.map_header()):
        if reader.value() != "checkpoints":
            reader.skip()
            continue
        for entry in meta["checkpoints"][:reader.array_header()]:
            if entry[0] != version:
                parts.append(reader.skip())
                continue
            mark = reader.mark()
            reader.array_header()  # [version, parent, records, engine]
            reader.skip()
            reader.skip()
            for rec in entry[2][:reader.array_header()]:
                for _ in range(reader.map_header()):
                    if reader.value() != "tail":
                        reader.skip()
                        continue
                    for e in rec["tail"][:reader.array_header()]:
                        elements[id(e)] = (e, reader.skip())
            reader.skip()
            parts.append(reader.since(mark))
        break
    return parts, elements

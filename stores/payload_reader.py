"""Reading a stored blob's payload container by container, the bytes of
the parts it skips kept: a caller re-encoding a record
(:mod:`stores.window_packing`) reuses the parts that did not change."""

from __future__ import annotations

from typing import Any

import msgpack

from .codec import HEADER_SIZE, _ext_hook

__all__ = ["PayloadReader"]


class PayloadReader:
    """Walks the payload of a blob :func:`decode` has accepted, container by
    container, handing out the bytes of the items it skips: the payloads
    that :func:`encode_map`, :func:`packed_list` and :func:`packed_map`
    put together again, so a caller re-encoding a record reuses the parts
    that did not change without packing them.  Skipping is done by msgpack's
    C unpacker, without building the values."""

    def __init__(self, blob: bytes) -> None:
        self._payload = blob[HEADER_SIZE:]
        self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, ext_hook=_ext_hook)
        self._unpacker.feed(self._payload)

    def map_header(self) -> int:
        """Enter the map at the position: its number of items."""
        return self._unpacker.read_map_header()

    def array_header(self) -> int:
        """Enter the list at the position: its number of items."""
        return self._unpacker.read_array_header()

    def value(self) -> Any:
        """The value at the position, decoded (a map key, say)."""
        return self._unpacker.unpack()

    def skip(self) -> bytes:
        """The payload of the value at the position, which is passed."""
        start = self._unpacker.tell()
        self._unpacker.skip()
        return self._payload[start:self._unpacker.tell()]

    def mark(self) -> int:
        """The position, for :meth:`since`."""
        return self._unpacker.tell()

    def since(self, mark: int) -> bytes:
        """The payload from ``mark`` to the position: a value walked into
        (its headers read, its items skipped) rather than skipped whole."""
        return self._payload[mark:self._unpacker.tell()]

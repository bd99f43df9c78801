"""msgpack's own timestamp extension (code -1) in a stored value.

The codec never writes it, and its C decoder refuses it; msgpack decodes it
itself, past the codec's extension hook, so where msgpack decodes a value
(:func:`stores.codec.decode`'s fallback) :func:`unpackb` looks for
timestamps in what msgpack built, when the bytes hold a timestamp's header
at all.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import msgpack

__all__ = ["unpackb"]

#: The headers a timestamp (of 4, 8 or 12 bytes) can have.
_HEADER = re.compile(rb"[\xd6\xd7]\xff|\xc7[\x04\x08\x0c]\xff|\xc8\x00[\x04\x08\x0c]\xff"
                     rb"|\xc9\x00\x00\x00[\x04\x08\x0c]\xff")


def unpackb(data: bytes, ext_hook: Callable[[int, bytes], Any], corrupt: type[Exception]) -> Any:
    """``data`` decoded by msgpack with ``ext_hook``; raises ``corrupt`` if
    msgpack built a timestamp into it.  O(size), the search only when a
    header appears in ``data``."""
    options = dict(raw=False, strict_map_key=False, use_list=True)
    if _HEADER.search(data) is None:
        return msgpack.unpackb(data, ext_hook=ext_hook, **options)
    built: dict[int, Any] = {}  # the hook's values, held: not msgpack's, and their ids stay theirs

    def hook(code: int, ext: bytes) -> Any:
        value = ext_hook(code, ext)
        built[id(value)] = value
        return value

    value = msgpack.unpackb(data, ext_hook=hook, **options)
    if _holds_timestamp(value, built):
        raise corrupt("extension code -1 is msgpack's own (a timestamp), which the codec never writes")
    return value


def _holds_timestamp(value: Any, built: dict[int, Any]) -> bool:
    """Whether msgpack built a timestamp into ``value``: in the lists and
    dicts it built (not in the hook's values, ``built``)."""
    todo = [value]
    while todo:
        v = todo.pop()
        if id(v) in built:
            continue
        t = type(v)
        if t is msgpack.Timestamp:
            return True
        if t is list:
            todo.extend(v)
        elif t is dict:
            todo.extend(v)
            todo.extend(v.values())
    return False

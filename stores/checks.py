"""The arguments every store operation checks before it reaches a backend:
window names, epochs, levels and indices, pair blobs, and epoch ranges; and
the options a window is opened with."""

from __future__ import annotations

import numbers
import re
from typing import Any, Mapping, Optional, Sequence

#: Longest window name, in UTF-8 bytes (Couchbase keys are limited to 250).
MAX_WINDOW_BYTES = 160

#: Epochs, levels and indices (and range ends) are below this (SQLite INTEGER).
_INT_LIMIT = 1 << 63

#: What a window name must not hold: braces (Redis Cluster hash tags) and
#: control characters.  One regex scan: every store operation checks its
#: window name, so the check runs at C speed.
_FORBIDDEN = re.compile(r"[{}\x00-\x1f\x7f]")


def check_window(window: Any) -> str:
    if not isinstance(window, str):
        raise TypeError(f"window must be a str, not {type(window).__name__}")
    if not window:
        raise ValueError("window name must not be empty")
    try:
        encoded = window.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"window name {window!r} is not valid Unicode (lone surrogate)") \
            from None
    if len(encoded) > MAX_WINDOW_BYTES:
        raise ValueError(f"window name is longer than {MAX_WINDOW_BYTES} UTF-8 bytes")
    bad = _FORBIDDEN.search(window)
    if bad is not None:
        if bad.group() in "{}":
            raise ValueError(f"window name {window!r} must not contain '{{' or '}}'")
        raise ValueError(f"window name {window!r} must not contain control characters")
    return window


def check_uint(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if value >= _INT_LIMIT:
        raise ValueError(f"{name} must be < 2**63, got {value}")
    return value


def as_blobs(blobs: Sequence[Any]) -> list[bytes]:
    if type(blobs) is list and set(map(type, blobs)) <= {bytes}:
        return blobs  # the common case, checked at C speed
    if isinstance(blobs, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"pair blobs must be a sequence of bytes (one per pair), not one {type(blobs).__name__}")
    out = []
    for b in blobs:
        if type(b) is bytes:
            out.append(b)
        elif isinstance(b, (bytes, bytearray, memoryview)):
            out.append(bytes(b))
        else:
            raise TypeError(f"pair blobs must be bytes, not {type(b).__name__}")
    return out


def as_blob(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"metadata value must be bytes, not {type(value).__name__}")


def check_ranges(ranges: Optional[Mapping[int, tuple[int, int]]]) -> Optional[dict[int, tuple[int, int]]]:
    if ranges is None:
        return None
    if not isinstance(ranges, Mapping):
        raise TypeError(f"ranges must map a level to its (first, end) pair, not a {type(ranges).__name__}")
    out = {}
    for level, rng in ranges.items():
        check_uint("level", level)
        try:
            first, end = rng
        except (TypeError, ValueError):
            raise TypeError(f"ranges[{level}] must be a (first, end) pair, got {rng!r}") from None
        check_uint("first", first)
        check_uint("end", end)
        if end < first:
            raise ValueError(f"ranges[{level}] = {rng!r}: end < first")
        out[level] = (first, end)
    return out


# ------------------------------------------------------------------ store


def check_pairs(window: Any, epoch: Any, level: Any, first: Any, count: Any) -> None:
    """The arguments naming ``count`` pairs from ``first`` of one level."""
    check_window(window)
    check_uint("epoch", epoch)
    check_uint("level", level)
    check_uint("first", first)
    check_uint("count", count)
    check_uint("first + count", first + count)


# ------------------------------------------------------------------ window options


def check_open_options(options: dict) -> dict:
    """``options``, those of ``Store.open_window``: one that no window takes
    raises :class:`~stores.errors.UnknownWindowOption` naming the engine
    that passed it on and the options there are (the engines and
    ``mta.Window`` hand their unknown options down to here).  O(options)."""
    global _OPEN_OPTIONS
    if _OPEN_OPTIONS is None:
        import inspect

        from .window import WindowStorage

        params = inspect.signature(WindowStorage.__init__).parameters.values()
        _OPEN_OPTIONS = tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and not p.name.startswith("_"))
    unknown = [name for name in options if name not in _OPEN_OPTIONS]
    if unknown:
        from .errors import UnknownWindowOption

        engine = options.get("engine")
        # store= and window_id= are the engine's, the rest it passes on; engine= and mutable_tail= it sets itself
        accepted = ("store", "window_id", *(n for n in _OPEN_OPTIONS if n not in ("engine", "mutable_tail")))
        raise UnknownWindowOption(engine if isinstance(engine, str) else "Store.open_window", unknown, accepted)
    return options


#: The options of Store.open_window (WindowStorage's keyword-only ones), read at the first open.
_OPEN_OPTIONS: tuple[str, ...] | None = None


def check_window_options(*, group_size: Any, retain: Any, resume: Any, background: Any, durable: Any,
                         element_arity: Any) -> None:
    """The options of :class:`stores.window.WindowStorage`, checked before
    its claim: an open refused for a bad option leaves the window's owner in
    charge, and an option of the wrong type is never taken for another
    value (``durable="no"`` is no flag, ``group_size=0`` no size)."""
    from .steps import Before

    for name, value in (("group_size", group_size), ("retain", retain)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if element_arity is not None and (type(element_arity) is not int or element_arity < 1):
        raise ValueError(f"element_arity must be None or a positive int, got {element_arity!r}")
    for name, value in (("background", background), ("durable", durable)):
        if type(value) is not bool:
            raise ValueError(f"{name} must be True or False, got {value!r}")
    version = isinstance(resume, numbers.Integral) and not isinstance(resume, bool) and resume >= 1
    if not (version or isinstance(resume, (bool, Before))):
        raise ValueError(f"resume must be True (the newest checkpoint), False (start empty), a checkpoint "
                         f"version (an int >= 1) or a stores.Before, got {resume!r}")


def check_batch(batch: Any, store: Any, window: str) -> None:
    """A window's ``batch=``: ``None`` or a :class:`stores.Batch` of the window's own store."""
    from .batch import Batch

    if batch is not None and (not isinstance(batch, Batch) or batch.store is not store):
        given = f"one of {batch.store.url}" if isinstance(batch, Batch) else repr(batch)
        raise ValueError(f"window {window!r}: batch must be a stores.Batch of the window's own store "
                         f"({store.url}, this store object), got {given}")

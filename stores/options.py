"""The rules a store's options are checked by when it is opened, whether
they come from the URL's query or from ``open_store``'s keyword arguments:
a bad value raises :class:`~stores.errors.StoreConfigError` at once, naming
the option and the value (none of these options holds a credential), rather
than failing at the first operation or, worse, meaning something else (the
string ``"false"`` is true to ``bool()``)."""

from __future__ import annotations

import math
import numbers
from typing import Any

from .errors import StoreConfigError

__all__ = ["parse_bool", "seconds", "positive_int"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_bool(name: str, value: Any, kind: str = "option") -> bool:
    """``value`` of the boolean ``name``: a bool, or one of the strings a
    URL's boolean parameter takes (any case).  ``kind`` says where it came
    from ("option", "URL parameter") for the message."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    raise StoreConfigError(f"{kind} {name}={value!r} is not a boolean (True or False, or one of "
                           f"{', '.join(_TRUE + _FALSE)})")


def seconds(name: str, value: Any, *, zero: bool = False) -> float:
    """``value`` of the duration ``name`` as a float: a finite number of
    seconds > 0 (>= 0 with ``zero``); a duration that is not finite would
    make a wait unbounded, a negative one fails inside the client."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or not (value >= 0 if zero else value > 0):
        raise StoreConfigError(f"{name} must be a finite number of seconds {'>=' if zero else '>'} 0, "
                               f"got {value!r}")
    return float(value)


def positive_int(name: str, value: Any) -> int:
    """``value`` of the count ``name``: an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise StoreConfigError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)

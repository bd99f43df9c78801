"""The one "no value" marker of the engines and plans.

A slot, an accumulator or a cache that holds nothing holds :data:`EMPTY`.
It is never a monoid's identity nor ``None``: both are legal elements, so
"nothing" must be something no user value can be (compare with ``is``).
"""

from __future__ import annotations

__all__ = ["EMPTY"]


class _Empty:
    """Type of :data:`EMPTY`; copies and unpickles to the same object."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"

    def __reduce__(self) -> str:
        return "EMPTY"


#: "No value".
EMPTY = _Empty()

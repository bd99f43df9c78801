"""Window specifications of the multi-query API: :class:`Query` and :class:`Result`.

A query is an aggregate continuous query (ACQ, mqo-shein-chrysanthis-tkde
section 1) over one stream: a range (time units, ``range=``) or a number of
elements (``rows=``), an optional slide and an optional lag, which makes it
one of Arasu and Widom's historical windows (arasu-widom-vldb2004 section 2:
``S[X_L, X_R]`` with ``X_L = lag + range`` and ``X_R = lag``).

Every window is an interval of *keys*: an element's key is its time for a
``range=`` query and its 0-based index in the stream for a ``rows=`` query.
With ``w`` the range (or rows), ``L`` the lag and ``s`` the slide:

* per-element (``slide=None``): after the element with key ``t``, the keys
  in ``(t - L - w, t - L]``; the result's ``end`` is ``t``;
* periodic (``slide=s``): for every ``e = k * s``, the keys in
  ``[e - L - w, e - L)``.  A time window is reported when an element with
  time ``>= e`` arrives (before it is added) or at a flush, a rows window
  right after its ``e``-th element (key ``e - 1``); its ``end`` is ``e`` for
  time and ``e - 1`` (the index of that element) for rows.  Only windows
  holding at least one element are reported.
"""

from __future__ import annotations

import numbers
import operator
from fractions import Fraction
from typing import Any, NamedTuple

from ..errors import OperationRefused
from ..monoid import Aggregator


class OutOfOrderError(OperationRefused, ValueError):
    """An element older than the newest one: refused before any change."""


class Result(NamedTuple):
    """One reported window: the query's name, the window's end and the
    aggregate (lowered by the query's aggregator)."""

    query: str
    end: Any
    value: Any


def exact(x):
    """``x`` as the windows compute with it, never rounded: an int stays an
    int (any integral type, e.g. a NumPy integer, through ``__index__``), a
    Fraction stays itself, any other real (a float included) becomes the
    exact Fraction of its value.  Window bounds and times go through here
    before any sum or difference, so that no bound is computed in floats."""
    if type(x) is int:
        return x
    if isinstance(x, Fraction):
        return x
    if isinstance(x, float):
        return Fraction(x)
    if hasattr(type(x), "__index__"):
        return operator.index(x)
    ratio = getattr(x, "as_integer_ratio", None)  # a real Fraction() does not take, e.g. a NumPy float32
    return Fraction(*ratio()) if ratio is not None else Fraction(x)


def _positive(name: str, what: str, value, *, integer: bool, allow_zero: bool = False):
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral if integer else numbers.Real)):
        kind = "an int" if integer else "a real number"
        raise TypeError(f"Query {name!r}: {what} must be {kind}, got {type(value).__name__} {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"Query {name!r}: {what} must be finite, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"Query {name!r}: {what} must be {bound}, got {value!r}")
    return value


class Query:
    """``Query(name, aggregator, *, range=None, rows=None, slide=None, lag=0)``.

    Exactly one of ``range`` (time units, a positive real number) or
    ``rows`` (a positive int).  ``slide=None`` reports after every element;
    ``slide=s`` reports the windows ending at multiples of ``s`` (an int for
    ``rows``); ``slide == range`` is a tumbling window.  ``lag`` shifts the
    window that far into the past (an int for ``rows``).  See the module doc
    for the exact windows.
    """

    __slots__ = ("name", "aggregator", "range", "rows", "slide", "lag", "width", "by_rows",
                 "exact_width", "exact_slide", "exact_lag", "_float")

    def __init__(self, name: str, aggregator: Aggregator, *, range=None, rows=None, slide=None, lag=0) -> None:
        """Checks every argument before building anything; O(1)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"Query name must be a non-empty str, got {name!r}")
        if not isinstance(aggregator, Aggregator):
            raise TypeError(f"Query {name!r}: aggregator must be an mta.Aggregator, got {type(aggregator).__name__}")
        if (range is None) == (rows is None):
            raise ValueError(f"Query {name!r}: give exactly one of range= (time) or rows= (elements)")
        by_rows = rows is not None
        width = _positive(name, "rows" if by_rows else "range", rows if by_rows else range, integer=by_rows)
        if slide is not None:
            slide = _positive(name, "slide", slide, integer=by_rows)
        lag = _positive(name, "lag", lag, integer=by_rows, allow_zero=True)
        self.name = name
        self.aggregator = aggregator
        self.range = range
        self.rows = rows
        self.slide = slide
        self.lag = lag
        self.width = width
        self.by_rows = by_rows
        # the plans compute window bounds with these: ints, or exact Fractions
        # (floats included), never rounded
        self.exact_width = exact(width)
        self.exact_slide = None if slide is None else exact(slide)
        self.exact_lag = exact(lag)
        # a window given in floats (or another inexact real) reports float ends
        self._float = any(x is not None and not isinstance(x, numbers.Rational) for x in (width, slide, lag))

    @property
    def periodic(self) -> bool:
        """True with a slide; O(1)."""
        return self.slide is not None

    def end_value(self, e):
        """The ``end`` reported for the periodic window ``[e - L - w, e - L)``."""
        if self.by_rows:
            return int(e) - 1
        if isinstance(e, Fraction):
            if e.denominator == 1 and not self._float:
                return int(e)
            return float(e) if self._float else e
        return e

    def describe(self) -> str:
        """One line for ``str(plan)``; O(1)."""
        what = f"rows={self.rows}" if self.by_rows else f"range={self.range}"
        parts = [what, "per element" if self.slide is None else f"slide={self.slide}"]
        if self.lag:
            parts.append(f"lag={self.lag}")
        return f"{self.name}: {self.aggregator.name} " + ", ".join(parts)

    def __repr__(self) -> str:
        """O(1)."""
        args = [repr(self.name), repr(self.aggregator)]
        args.append(f"rows={self.rows!r}" if self.by_rows else f"range={self.range!r}")
        if self.slide is not None:
            args.append(f"slide={self.slide!r}")
        if self.lag:
            args.append(f"lag={self.lag!r}")
        return f"Query({', '.join(args)})"

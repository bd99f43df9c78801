"""Ready-made aggregators: map -> reduce -> map (section 3.3) for common jobs.

Every monoid value is plain immutable data (tuples, numbers, strings, None)
so windows can be serialized with msgpack; the monoids' functions are
module-level functions or ``functools.partial`` of them, so the aggregators
also pickle.  Each ``Monoid`` declares its flags truthfully: ``inverse``
removes the front of an aggregate, ``exact_inverse`` says whether it does
so exactly, ``commutative``, ``selective``.  The sums that take floats
(``sum``, ``mean``, ``geomean``, the moments of the variance) declare their
inverse approximate: on floats it rounds, and one inf or NaN poisons it;
those that count (``count``, ``countmin``) and ``collect`` are exact.

Result on an empty window (and below two values for the sample variance):

=========================  ==========================================
``sum``, ``count``         ``0``
``collect``                ``()``
``countmin``               a query answering ``0`` for everything
every other aggregator     ``None``
=========================  ==========================================

``min``, ``max``, ``first``, ``last``, ``argmax``, ``argmin`` and ``latest``
are selective monoids whose identity is ``None``; like SQL's MIN/MAX they
skip ``None`` inputs.  ``argmax``/``argmin``/``latest`` from :data:`BY_NAME`
read ``(label, value)`` records (e.g. ``(timestamp, reading)``); build others
with :func:`argmax`, :func:`argmin`, :func:`latest`.

The ready aggregations over one numeric value (what ``sliding_window`` and
``mta-spark`` take by name) are declared once, in :data:`READY`, with their
result kind, help text and empty result; :data:`BY_NAME` adds the others.
"""

from __future__ import annotations

import hashlib
import math
import operator
import struct
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Literal

from .monoid import Aggregator, Monoid

__all__ = [
    "READY", "Ready", "describe", "BY_NAME", "get", "variance", "stddev", "argmax", "argmin", "latest", "longest_run",
    "count_min", "CountMinQuery", "SUM", "COUNT", "MIN", "MAX", "MEAN", "GEOMEAN",
    "VARIANCE", "STDDEV", "VAR_POP", "STDDEV_POP", "FIRST", "LAST", "COLLECT", "ARGMAX",
    "ARGMIN", "LATEST", "LONGEST_RUN", "COUNT_MIN", "MOMENTS",
]


# -- additive monoids: sum, count, mean, geometric mean, sketches ------------

def _additive(name: str, exact: bool) -> Monoid:
    """``+`` with ``-`` as its inverse; ``exact`` only when the values are
    counts (a sum of floats subtracts up to rounding)."""
    return Monoid(operator.add, 0, name=name, inverse=operator.sub, exact_inverse=exact, commutative=True)


def _add_cells(a, b):
    return tuple(map(operator.add, a, b))


def _sub_cells(a, b):
    return tuple(map(operator.sub, a, b))


def _add_pairs(a, b):
    return (a[0] + b[0], a[1] + b[1])


def _sub_pairs(a, b):
    return (a[0] - b[0], a[1] - b[1])


def _cellwise(name: str, size: int, exact: bool) -> Monoid:
    """Element-wise sums of fixed-size tuples (invertible, commutative;
    ``exact`` as for :func:`_additive`); pairs, as (sum, count), without the
    loop."""
    if size == 2:
        return Monoid(_add_pairs, (0, 0), name=name, inverse=_sub_pairs, exact_inverse=exact, commutative=True)
    return Monoid(_add_cells, (0,) * size, name=name, inverse=_sub_cells, exact_inverse=exact, commutative=True)


def _one(_x) -> int:
    return 1


def _with_count(x):
    return (x, 1)


def _log_with_count(x):
    if not x > 0:
        raise ValueError(f"geomean: inputs must be positive, got {x!r}")
    return (math.log(x), 1)


def _ratio(v):
    return v[0] / v[1] if v[1] else None


def _exp_ratio(v):
    return math.exp(v[0] / v[1]) if v[1] else None


SUM = Aggregator(_additive("sum", False), name="sum")
COUNT = Aggregator(_additive("count", True), _one, name="count")
#: Mean as (sum, count), the paper's own example.
MEAN = Aggregator(_cellwise("mean", 2, False), _with_count, _ratio, name="mean")
#: Geometric mean as (sum of logs, count); lift raises ValueError on x <= 0.
GEOMEAN = Aggregator(_cellwise("geomean", 2, False), _log_with_count, _exp_ratio, name="geomean")


# -- variance: mergeable moments (count, mean, M2), Chan et al. ---------------

def _moments_combine(a, b):
    na, nb = a[0], b[0]
    if not na:
        return b
    if not nb:
        return a
    n = na + nb
    delta = b[1] - a[1]
    return (n, a[1] + delta * nb / n, a[2] + b[2] + delta * delta * na * nb / n)


def _moments_inverse(a, b):
    """Remove the front moments ``b`` from ``a`` (M2 clamped at 0 against rounding)."""
    n, nb = a[0], b[0]
    if not nb:
        return a
    nc = n - nb
    if not nc:
        return (0, 0, 0)
    mc = a[1] + (a[1] - b[1]) * nb / nc
    delta = mc - b[1]
    return (nc, mc, max(a[2] - b[2] - delta * delta * nb * nc / n, 0))


def _moments_lift(x):
    # the spread of a window holding an infinite value is undefined: NaN,
    # whatever order the engine combines the window in (x - x rather than
    # math.isfinite, which cannot take ints beyond a float's range)
    return (1, x, 0 if x - x == 0 else math.nan)


def _variance_lower(ddof: int, v):
    return v[2] / (v[0] - ddof) if v[0] > ddof else None


def _stddev_lower(ddof: int, v):
    var = _variance_lower(ddof, v)
    return None if var is None else math.sqrt(var)


#: (count, mean, sum of squared deviations): stable, unlike a sum of squares.
#: An infinite value lifts to a NaN M2, so a window holding one has a NaN
#: variance and standard deviation.
#: Its inverse can lose precision when most of the window is removed.
MOMENTS = Monoid(_moments_combine, (0, 0, 0), name="moments",
                 inverse=_moments_inverse, exact_inverse=False, commutative=True)


def variance(sample: bool = True) -> Aggregator:
    """Sample (n - 1) or population (n) variance; None below 2 (resp. 1) values."""
    return Aggregator(MOMENTS, _moments_lift, partial(_variance_lower, int(sample)),
                      name="variance" if sample else "var_pop")


def stddev(sample: bool = True) -> Aggregator:
    """Square root of :func:`variance`; same ``sample`` switch and empty results."""
    return Aggregator(MOMENTS, _moments_lift, partial(_stddev_lower, int(sample)),
                      name="stddev" if sample else "stddev_pop")


VARIANCE, STDDEV = variance(), stddev()
VAR_POP, STDDEV_POP = variance(sample=False), stddev(sample=False)


# -- selective monoids: min, max, first, last, argmax, argmin, latest --------

def _select(wins, a, b):
    """``b`` replaces ``a`` only if ``wins(b, a)``: ties keep the older ``a``."""
    if b is None:
        return a
    if a is None or wins(b, a):
        return b
    return a


def _never(b, a) -> bool:
    return False


def _always(b, a) -> bool:
    return True


def _key_gt(b, a) -> bool:
    return b[0] > a[0]


def _key_lt(b, a) -> bool:
    return b[0] < a[0]


def _selective(name: str, wins, commutative: bool) -> Monoid:
    return Monoid(partial(_select, wins), None, name=name, selective=True, commutative=commutative)


MIN = Aggregator(_selective("min", operator.lt, True), name="min")
MAX = Aggregator(_selective("max", operator.gt, True), name="max")
FIRST = Aggregator(_selective("first", _never, False), name="first")
LAST = Aggregator(_selective("last", _always, False), name="last")

_ARGMAX = _selective("argmax", _key_gt, False)
_ARGMIN = _selective("argmin", _key_lt, False)


def _keyed(key, x):
    return (key(x), x)


def _payload(v):
    return None if v is None else v[1]


def _arg(monoid: Monoid, key: Callable | None) -> Aggregator:
    return Aggregator(monoid, partial(_keyed, key or operator.itemgetter(1)), _payload,
                      name=monoid.name)


def argmax(key: Callable[[Any], Any] | None = None) -> Aggregator:
    """The input with the largest ``key(x)``; the oldest wins ties.

    The default key reads ``(label, value)`` records, so the result is the
    winning record: e.g. ``(index, value)`` or ``(timestamp, value)``.
    """
    return _arg(_ARGMAX, key)


def argmin(key: Callable[[Any], Any] | None = None) -> Aggregator:
    """Like :func:`argmax` for the smallest ``key(x)``; the oldest wins ties."""
    return _arg(_ARGMIN, key)


def latest(time: Callable[[Any], Any] | None = None) -> Aggregator:
    """The largest ``time(x)`` in the window (default: ``x[0]`` of records)."""
    return Aggregator(_selective("latest", operator.gt, True), time or operator.itemgetter(0),
                      name="latest")


ARGMAX, ARGMIN, LATEST = argmax(), argmin(), latest()


# -- collect ------------------------------------------------------------------

def _concat(a, b):
    return (*a, *b)


def _drop_front(a, b):
    return tuple(a[len(b):])


def _singleton(x):
    return (x,)


#: The window as a tuple, oldest first (O(n) combines: for checks and small windows).
COLLECT = Aggregator(Monoid(_concat, (), name="collect", inverse=_drop_front),
                     _singleton, name="collect")


# -- longest strictly increasing contiguous run (Experiment 3, "LIS") --------
# Value: (n, first key, last key, prefix run, suffix run, best length, best start),
# where the best run is the oldest longest one and its start is a position
# counted from the segment's first element.

def _run_lift(key, x):
    k = x if key is None else key(x)
    return (1, k, k, 1, 1, 1, 0)


def _run_combine(a, b):
    na, nb = a[0], b[0]
    if not na:
        return b
    if not nb:
        return a
    join = a[2] < b[1]
    pre, suf, best, start = a[3], b[4], a[5], a[6]
    if join:
        if pre == na:
            pre += b[3]
        if suf == nb:
            suf += a[4]
        if a[4] + b[3] > best:
            best, start = a[4] + b[3], na - a[4]
    if b[5] > best:
        best, start = b[5], na + b[6]
    return (na + nb, a[1], b[2], pre, suf, best, start)


def _run_lower(v):
    return (v[6], v[6] + v[5], v[5]) if v[0] else None


_RUNS = Monoid(_run_combine, (0, None, None, 0, 0, 0, 0), name="longest_run")


def longest_run(key: Callable[[Any], Any] | None = None) -> Aggregator:
    """The oldest longest strictly increasing contiguous run of ``key(x)``.

    Lowers to positions in the window ``(start, end, length)`` with
    ``window[start:end]`` the run (None when empty).  A slide policy keeping
    the run evicts a prefix ``p`` while ``p[0] <= total[6]`` (its start).
    """
    return Aggregator(_RUNS, partial(_run_lift, key), _run_lower, name="longest_run")


LONGEST_RUN = longest_run()


# -- Count-Min sketch -------------------------------------------------------

def _cm_rows(width: int, depth: int, x) -> tuple:
    """One cell index per row; blake2b of ``repr(x)``, so independent of PYTHONHASHSEED."""
    digest = hashlib.blake2b(repr(x).encode(), digest_size=4 * depth).digest()
    return tuple(r * width + h % width
                 for r, h in enumerate(struct.unpack(f"<{depth}I", digest)))


def _cm_lift(width: int, depth: int, x) -> tuple:
    cells = [0] * (width * depth)
    for i in _cm_rows(width, depth, x):
        cells[i] = 1
    return tuple(cells)


class CountMinQuery:
    """What a Count-Min window lowers to: ``q(x)`` never underestimates the
    count of ``x`` and exceeds it by at most ``e/width * q.total`` with
    probability ``1 - exp(-depth)``."""

    __slots__ = ("counts", "width", "depth")

    def __init__(self, width: int, depth: int, counts: tuple) -> None:
        self.counts, self.width, self.depth = counts, width, depth

    def __call__(self, x) -> int:
        return min(self.counts[i] for i in _cm_rows(self.width, self.depth, x))

    @property
    def total(self) -> int:
        """How many inputs the window holds."""
        return sum(self.counts[: self.width])

    def __repr__(self) -> str:
        return f"CountMinQuery(width={self.width}, depth={self.depth}, total={self.total})"


def count_min(width: int = 64, depth: int = 4) -> Aggregator:
    """A Count-Min sketch of the window: ``width * depth`` counters in one tuple.

    Inputs are told apart by ``repr`` (so ``1`` and ``1.0`` differ); it must
    be deterministic (numbers, strings, tuples of them; not sets).
    """
    if not (isinstance(width, int) and width >= 1 and isinstance(depth, int) and 1 <= depth <= 16):
        raise ValueError(f"count_min needs width >= 1 and 1 <= depth <= 16, got {width}, {depth}")
    return Aggregator(_cellwise(f"countmin{width}x{depth}", width * depth, True),
                      partial(_cm_lift, width, depth), partial(CountMinQuery, width, depth),
                      name="countmin")


COUNT_MIN = count_min()


# -- ready aggregations over one numeric value, declared once ---------------------

@dataclass(frozen=True)
class Ready:
    """A ready aggregation over one numeric value: what every user of it
    needs to know (the Spark integration's output types, the columnar
    engine's empty windows, the command line's help)."""

    name: str
    aggregator: Aggregator
    #: "value": one of the values, typed like the value column (integers for an
    #: integral column); "floating": a floating-point number; "count": an integer.
    result: Literal["value", "floating", "count"]
    help: str  # one line
    empty: Any = None  # what an empty window gives


#: The ready aggregations, by name; adding one is one line here (and its tests).
READY: dict[str, Ready] = {r.name: r for r in (
    Ready("sum", SUM, "value", "sum of the values", empty=0),
    Ready("count", COUNT, "count", "number of rows", empty=0),
    Ready("min", MIN, "value", "smallest value"),
    Ready("max", MAX, "value", "largest value"),
    Ready("mean", MEAN, "floating", "arithmetic mean"),
    Ready("geomean", GEOMEAN, "floating", "geometric mean (values must be > 0)"),
    Ready("variance", VARIANCE, "floating", "sample variance (n - 1; null below 2 rows)"),
    Ready("stddev", STDDEV, "floating", "sample standard deviation (n - 1; null below 2 rows)"),
    Ready("var_pop", VAR_POP, "floating", "population variance (n)"),
    Ready("stddev_pop", STDDEV_POP, "floating", "population standard deviation (n)"),
    Ready("first", FIRST, "value", "oldest value"),
    Ready("last", LAST, "value", "newest value"),
)}


def describe() -> list[tuple[str, str]]:
    """``(name, one-line help)`` of each ready aggregation, in order (for help texts)."""
    return [(r.name, r.help) for r in READY.values()]


# -- lookup by name (the CLI's --agg) ------------------------------------------

BY_NAME: dict[str, Aggregator | Callable[[], Aggregator]] = {
    **{name: r.aggregator for name, r in READY.items()},
    **{a.name: a for a in (COLLECT, ARGMAX, ARGMIN, LATEST, LONGEST_RUN, COUNT_MIN)},
}


def get(name: str) -> Aggregator:
    """The aggregator called ``name`` (case and surrounding blanks ignored)."""
    entry = BY_NAME.get(str(name).strip().lower())
    if entry is None:
        raise ValueError(f"unknown aggregator {name!r}; known: {', '.join(sorted(BY_NAME))}")
    return entry if isinstance(entry, Aggregator) else entry()

"""A mergeable quantile sketch as an ordinary monoid: a log-bucket histogram.

Approximate quantiles are what the MQO paper leaves out (mqo-shein-
chrysanthis-tkde section 2: holistic aggregations "require specifically
tailored algorithms"); Arasu and Widom's exact B-INT-QNT
(:mod:`mta.multi.quantiles`) keeps every element.  This sketch keeps one
counter per bucket of a fixed logarithmic grid instead, so it is a monoid
like any other and runs in :class:`mta.Window`, every engine and
:class:`mta.multi.SharedWindows`:

* a value ``x > 0`` falls in bucket ``i = ceil(log_g(x))``, ``g = (1 + a) /
  (1 - a)``, the interval ``(g^(i-1), g^i]``; negative values in the mirror
  buckets, zero in its own;
* ``combine`` adds the counts bucket by bucket: associative, commutative,
  and invertible (``inverse`` subtracts them), so SlickDeque (Inv) and R-Int
  apply;
* **error bound**: ``quantile(phi)`` returns, for the window's element ``x``
  of rank ``ceil(phi * n)`` (the nearest-rank quantile), a value ``v`` with
  ``|v - x| <= a * |x|``.  Proof: buckets partition the reals in value
  order, so the bucket where the cumulative count first reaches the rank
  holds ``x``; every value of bucket ``(g^(i-1), g^i]`` is within relative
  error ``a`` of its representative ``2 g^i / (g + 1)`` (the two ends are
  off by ``(g - 1) / (g + 1) = a`` exactly).  Zero is exact.

Ready aggregators: :func:`approx_quantile` ``(phi, alpha)`` and
:func:`approx_median` lower to the number itself; every sketch aggregator of
one ``alpha`` (and one ``on=`` getter) shares its monoid and lift, so
:class:`mta.multi.SharedWindows` runs quantiles of different ``phi`` in one
tree.  :func:`quantile_sketch` lowers to the :class:`QuantileSketch` (any
quantile of one window, and its count).

Space: one counter per non-empty bucket, at most ``log(max/min) / log(g)``
per sign, whatever the number of elements.  Every sketch value is a tuple of
``((sign, index), count)`` pairs sorted by value, plain immutable data.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial

from .monoid import Aggregator, Monoid
from .multi.quantiles import nearest_rank

__all__ = ["QuantileSketch", "approx_median", "approx_quantile", "quantile_sketch", "QUANTILES"]


def _merge(a: tuple, b: tuple) -> tuple:
    """Bucket-wise sum of two sorted count tuples (a merge of sorted runs).
    O(len(a) + len(b))."""
    if not a:
        return b
    if not b:
        return a
    out = []
    i = j = 0
    na, nb = len(a), len(b)
    while i < na and j < nb:
        ka, kb = a[i][0], b[j][0]
        if ka == kb:
            out.append((ka, a[i][1] + b[j][1]))
            i += 1
            j += 1
        elif ka < kb:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return tuple(out)


def _subtract(a: tuple, b: tuple) -> tuple:
    """Remove the counts of ``b`` (a sub-multiset of ``a``) from ``a``; empty
    buckets disappear.  O(len(a) + len(b))."""
    if not b:
        return a
    counts = dict(b)
    out = []
    for k, c in a:
        left = c - counts.pop(k, 0)
        if left:
            out.append((k, left))
    return tuple(out)


def _key(log_g: float, x) -> tuple:
    """The bucket of ``x``: ``(sign, index)`` ordered as the values."""
    if x > 0:
        return (1, math.ceil(math.log(x) / log_g))
    if x < 0:
        return (-1, -math.ceil(math.log(-x) / log_g))
    if x == 0:
        return (0, 0)
    raise ValueError(f"quantile sketch: cannot place {x!r} (NaN)")


def _lift(log_g: float, x) -> tuple:
    return ((_key(log_g, x), 1),)


class QuantileSketch:
    """What the sketch lowers to: ``quantile(phi)``, ``median``, ``count``.

    ``quantile(phi)`` (``0 <= phi <= 1``) is within relative error
    ``alpha`` of the window's element of rank ``max(1, ceil(phi * count))``
    (exact, ``phi`` as written: :func:`mta.multi.quantiles.nearest_rank`);
    None on an empty window.  O(buckets)."""

    __slots__ = ("buckets", "alpha", "_g")

    def __init__(self, alpha: float, buckets: tuple) -> None:
        self.buckets = buckets
        self.alpha = alpha
        self._g = (1 + alpha) / (1 - alpha)

    @property
    def count(self) -> int:
        return sum(c for _, c in self.buckets)

    def _value(self, key: tuple) -> float:
        sign, index = key
        if sign == 0:
            return 0.0
        g = self._g
        rep = 2.0 * g ** (sign * index) / (g + 1.0)
        return rep if sign > 0 else -rep

    def quantile(self, phi: float):
        if not 0 <= phi <= 1:
            raise ValueError(f"quantile needs 0 <= phi <= 1, got {phi!r}")
        n = self.count
        if n == 0:
            return None
        rank = nearest_rank(phi, n)
        seen = 0
        for key, c in self.buckets:
            seen += c
            if seen >= rank:
                return self._value(key)
        return self._value(self.buckets[-1][0])  # pragma: no cover - rank <= n

    @property
    def median(self):
        return self.quantile(0.5)

    def __repr__(self) -> str:
        return f"QuantileSketch(alpha={self.alpha}, count={self.count}, buckets={len(self.buckets)})"


def _check_alpha(alpha) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"quantile sketch needs 0 < alpha < 1, got {alpha!r}")


def _lift_from(lift, getter, raw) -> tuple:
    return lift(getter(raw))


@lru_cache(maxsize=None)
def _parts(alpha: float, getter=None) -> tuple:
    """The monoid and lift of one ``alpha`` (and getter): built once, so
    aggregators of different ``phi`` share them (and a tree)."""
    if getter is not None:
        monoid, lift = _parts(alpha)
        return monoid, partial(_lift_from, lift, getter)
    log_g = math.log((1 + alpha) / (1 - alpha))
    monoid = Monoid(_merge, (), name=f"quantiles{alpha:g}", inverse=_subtract, commutative=True)
    return monoid, partial(_lift, log_g)


def quantile_sketch(alpha: float = 0.01, *, on=None) -> Aggregator:
    """The log-bucket quantile sketch with relative error ``alpha``
    (``0 < alpha < 1``), lowered to a :class:`QuantileSketch`; ``on(raw)``
    picks the value (the raw element when None).  Lift O(1), combine and
    inverse O(buckets), lower O(1) (the sketch answers in O(buckets))."""
    _check_alpha(alpha)
    if on is not None and not callable(on):
        raise TypeError(f"quantile_sketch on= must be callable raw -> value, got {type(on).__name__}")
    monoid, lift = _parts(alpha, on)
    return Aggregator(monoid, lift, partial(QuantileSketch, alpha), name="quantiles")


def _approx(alpha: float, phi: float, buckets: tuple):
    return QuantileSketch(alpha, buckets).quantile(phi)


def approx_quantile(phi: float, alpha: float = 0.01, *, on=None) -> Aggregator:
    """The ``phi`` quantile of each window within relative error ``alpha``:
    a value ``v`` with ``|v - x| <= alpha * |x|`` for ``x`` the window's
    element of rank ``max(1, ceil(phi * n))`` (None on an empty window).
    An ordinary invertible, commutative monoid: any engine, any plan.  Lift
    O(1), combine and inverse O(buckets), lower O(buckets)."""
    if isinstance(phi, bool) or not isinstance(phi, (int, float)) or not 0 <= phi <= 1:
        raise ValueError(f"approx_quantile needs 0 <= phi <= 1, got {phi!r}")
    _check_alpha(alpha)
    if on is not None and not callable(on):
        raise TypeError(f"approx_quantile on= must be callable raw -> value, got {type(on).__name__}")
    monoid, lift = _parts(alpha, on)
    return Aggregator(monoid, lift, partial(_approx, alpha, phi), name=f"approx_quantile({phi:g})")


def approx_median(alpha: float = 0.01, *, on=None) -> Aggregator:
    """:func:`approx_quantile` at ``phi = 0.5`` (the lower middle of an even
    count).  O(1)."""
    return approx_quantile(0.5, alpha, on=on)


#: The sketch at 1% relative error.
QUANTILES = quantile_sketch()

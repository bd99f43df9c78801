"""Window slide policies that bring their own dimension (sections 3.2, 4.1.3).

A :class:`SlidePolicy` is a WSP together with the monoid it is evaluated
over: ``policy.lift(raw)`` maps a raw input into ``policy.monoid``'s domain
and ``policy.holds(total, prefix)`` is the WSP over that dimension.  A
:class:`~mta.window.Window` runs the policy's monoid next to the user's
aggregation, so e.g. a *max* aggregation can slide by *sum* (section 3.2).

Every WSP must be prefix-monotone: if it holds for an oldest prefix, it holds
for every shorter non-empty one.  Enforcement evicts the longest prefix for
which it holds.  Policies combine with ``a | b`` (:class:`AnyOf`: evict when
either policy says so) and ``a & b`` (:class:`AllOf`: evict only when both do).
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

from .errors import PolicyError
from .monoid import Monoid, product_monoid


def _identity_function(x: Any) -> Any:
    return x


def _sum_last(a, b):
    return (a[0] + b[0], a[1] if b[1] is None else b[1])


#: Count dimension: the sum of a 1 per element.
COUNT_MONOID = Monoid(operator.add, 0, name="count", inverse=operator.sub, commutative=True)
#: Max dimension over numbers (identity ``-inf``).
MAX_MONOID = Monoid(max, -math.inf, name="max", commutative=True, selective=True)
#: ``(sum, last)`` dimension: the sum of a prefix and its newest element
#: (``None`` in the identity, which has no element).
SUM_LAST_MONOID = Monoid(_sum_last, (0, None), name="(sum, last)")


def _callable(f, what: str):
    if not callable(f):
        raise TypeError(f"{what} must be callable, got {type(f).__name__}")
    return f


def _ordered(f, what: str):
    """``f``, refusing a result that is not a number ordered against
    ``-inf``: a NaN would stop a max or sum dimension from ever evicting
    again, and a None or a str would fail inside the engine; refused in the
    lift, the raw value leaves the window as it was (a ``LiftError``)."""
    _callable(f, what)

    def lift(raw):
        v = f(raw)
        try:
            ordered = v >= -math.inf
        except TypeError:
            raise TypeError(f"{what} {v!r} is not a number") from None
        if not ordered:
            raise ValueError(f"{what} {v!r} is NaN")
        return v

    return lift


class SlidePolicy:
    """A WSP over its own dimension: ``monoid``, ``lift`` and ``holds``.

    ``holds(total, prefix)`` must be prefix-monotone.  ``validate(value,
    previous)`` (optional, used by the checking mode) returns an error message
    when a lifted value breaks the policy's assumptions, given the previous
    lifted value (the monoid's identity before the first one), else ``None``.
    """

    def __init__(
        self,
        monoid: Monoid,
        lift: Callable[[Any], Any],
        holds: Callable[[Any, Any], bool],
        *,
        name: str | None = None,
        validate: Callable[[Any, Any], str | None] | None = None,
    ) -> None:
        if not isinstance(monoid, Monoid):
            raise TypeError(f"SlidePolicy needs a Monoid, got {type(monoid).__name__}")
        self.monoid = monoid
        self.lift = _callable(lift, "policy lift")
        self.holds = _callable(holds, "policy holds(total, prefix)")
        self.validate = None if validate is None else _callable(validate, "policy validate")
        self.name = name or getattr(holds, "__name__", "policy")

    def __or__(self, other):
        return AnyOf(self, other) if isinstance(other, SlidePolicy) else NotImplemented

    def __and__(self, other):
        return AllOf(self, other) if isinstance(other, SlidePolicy) else NotImplemented

    def __repr__(self) -> str:
        return self.name


def custom(monoid: Monoid, lift, holds, *, name: str | None = None, validate=None) -> SlidePolicy:
    """A user policy: ``holds(total, prefix)`` over ``monoid`` after ``lift``."""
    return SlidePolicy(monoid, lift, holds, name=name, validate=validate)


class Count(SlidePolicy):
    """Keep the newest ``n`` elements: evict P iff ``total - |P| >= n``."""

    def __init__(self, n: int) -> None:
        try:
            n = operator.index(n)
        except TypeError:
            n = None
        if n is None or n < 1:
            raise PolicyError("Count(n) needs an integer n >= 1")
        self.n = n
        holds = lambda total, prefix: total - prefix >= n  # noqa: E731
        super().__init__(COUNT_MONOID, lambda raw: 1, holds, name=f"Count({n})")


def _times_in_order(value, previous):
    if value < previous:
        return f"time {value!r} is older than the previous time {previous!r} (times must be non-decreasing)"
    return None


def _compares(x, relation, y) -> bool:
    """``relation(x, y)`` for a size given to a policy; a bool, or a value
    that does not compare with numbers (a string), is no size."""
    if isinstance(x, bool):
        return False
    try:
        return bool(relation(x, y))
    except TypeError:
        return False


class TimeRange(SlidePolicy):
    """Keep the elements with time ``t > newest - range``.

    Dimension: the max of ``time(raw)``; evict P iff ``max(P) <= max(total) -
    range`` (computed this way round, so that float rounding agrees with a
    cutoff ``t - range`` computed elsewhere).  Times are ints or floats (anything comparable with ``-inf``)
    and must be non-decreasing in arrival order; a NaN or a time that is
    no number is refused when lifted, the window unchanged.  (The WSP itself stays
    prefix-monotone with late times, but no longer means "the last
    ``range``": a late element only leaves with a prefix whose max time is
    old enough, so it may outlive its range.)  The checking mode reports a
    decreasing time.
    """

    def __init__(self, range, time: Callable[[Any], Any] = _identity_function) -> None:
        if not _compares(range, operator.gt, 0):
            raise PolicyError(f"TimeRange needs a positive range, got {range!r}")
        self.range = range
        super().__init__(
            MAX_MONOID,
            _ordered(time, "TimeRange time"),
            lambda total, prefix: prefix <= total - range,
            name=f"TimeRange({range!r})",
            validate=_times_in_order,
        )


def _non_negative(value, previous):
    return None if value[0] >= 0 else f"value {value[0]!r} is negative (SumAtMost needs non-negative values)"


class SumAtMost(SlidePolicy):
    """Keep the newest elements whose sum is at most ``bound`` (section 3.2).

    ``d_k`` goes iff ``sum(d_k..d_n) > bound``.  Dimension: ``(sum, last)``
    of ``value(raw)`` (:data:`SUM_LAST_MONOID`); evict P iff ``total.sum -
    P.sum + P.last > bound``.  Values must be non-negative for the WSP to be
    prefix-monotone; the checking mode reports a negative one.
    """

    def __init__(self, bound, value: Callable[[Any], Any] = _identity_function) -> None:
        if not _compares(bound, operator.ge, 0):
            raise PolicyError(f"SumAtMost needs a bound >= 0, got {bound!r}")
        self.bound = bound
        value = _ordered(value, "SumAtMost value")

        def lift(raw):
            v = value(raw)
            return (v, v)

        def holds(total, prefix):
            last = prefix[1]  # None only for the empty prefix, which trivially holds
            return last is None or total[0] - prefix[0] + last > bound

        super().__init__(SUM_LAST_MONOID, lift, holds, name=f"SumAtMost({bound!r})", validate=_non_negative)


class OlderThanMax(SlidePolicy):
    """Evict everything older than the window's maximum (Experiment 3).

    The window always starts at the OLDEST occurrence of its maximum.
    Dimension: the max of ``value(raw)``; evict P iff ``max(P) < max(total)``.
    """

    def __init__(self, value: Callable[[Any], Any] = _identity_function) -> None:
        lift = _ordered(value, "OlderThanMax value")
        super().__init__(MAX_MONOID, lift, lambda total, prefix: prefix < total, name="OlderThanMax()")


class _Combination(SlidePolicy):
    """Several policies over the product of their dimensions."""

    quantifier: Callable = any
    symbol = ""

    def __init__(self, *policies: SlidePolicy) -> None:
        if not policies:
            raise PolicyError(f"{type(self).__name__}() needs at least one policy")
        parts: list[SlidePolicy] = []
        for p in policies:
            if not isinstance(p, SlidePolicy):
                raise TypeError(f"{type(self).__name__}() takes SlidePolicies, got {type(p).__name__}")
            parts.extend(p.parts if type(p) is type(self) else (p,))
        self.parts = tuple(parts)
        lifts = tuple(p.lift for p in parts)
        holds_all = tuple(p.holds for p in parts)
        checks = tuple((i, p.validate) for i, p in enumerate(parts) if p.validate is not None)
        quantifier = type(self).quantifier

        def lift(raw):
            return tuple([f(raw) for f in lifts])

        def holds(total, prefix):
            return quantifier(h(t, p) for h, t, p in zip(holds_all, total, prefix))

        def validate(value, previous):
            for i, check in checks:
                message = check(value[i], previous[i])
                if message:
                    return f"{parts[i].name}: {message}"
            return None

        super().__init__(
            product_monoid([p.monoid for p in parts]),
            lift,
            holds,
            name="(" + f" {self.symbol} ".join(p.name for p in parts) + ")",
            validate=validate if checks else None,
        )


class AnyOf(_Combination):
    """Evict a prefix if ANY of the policies holds for it (``a | b``)."""

    quantifier = any
    symbol = "|"


class AllOf(_Combination):
    """Evict a prefix only if ALL of the policies hold for it (``a & b``)."""

    quantifier = all
    symbol = "&"

"""Monoids and aggregators: the paper's map -> reduce -> map (section 3.3).

A :class:`Monoid` is an associative ``combine`` with a neutral ``identity``.
An :class:`Aggregator` wraps a monoid between ``lift`` (raw input -> monoid
domain) and ``lower`` (monoid value -> result).  :func:`product` runs several
aggregators over one window: the paper's multi-dimensional aggregation
(Experiment 5), and how a :class:`~mta.policies.SlidePolicy` brings the
dimension it needs next to the user's aggregation.
"""

from __future__ import annotations

import types
import weakref
from typing import Any, Callable, Sequence


def identity_function(x: Any) -> Any:
    """The default lift and lower: ``x`` unchanged (callers may test for it
    with ``is`` and skip the call)."""
    return x


class Monoid:
    """An associative ``combine(a, b)`` with neutral element ``identity``.

    ``combine`` need not be commutative nor invertible.  The keyword flags are
    declarations that some baselines rely on:

    * ``inverse(a, b)`` removes ``b`` from the front of ``a``:
      ``inverse(combine(b, c), b) == c`` (subtract-on-evict, SlickDeque-Inv);
    * ``exact_inverse``: that equality holds exactly (ints, Fractions, tuples
      dropped from the front).  Declare ``False`` when it holds only up to
      rounding, as for floats: a running aggregate that subtracts what leaves
      keeps every rounding error, turns into NaN for good after one inf
      (``inf - inf``) and loses small windows to a large value that has left
      (``(1e17 + 1) - 1e17 == 0``).  A planner then uses such an inverse only
      when the user names it (:mod:`mta.multi.plan`).  False without an
      inverse;
    * ``commutative``: ``combine(a, b) == combine(b, a)``;
    * ``selective``: ``combine(a, b)`` is always ``a`` or ``b`` (SlickDeque-NonInv).
    """

    __slots__ = ("combine", "identity", "name", "inverse", "exact_inverse", "commutative", "selective")

    def __init__(
        self,
        combine: Callable[[Any, Any], Any],
        identity: Any,
        *,
        name: str | None = None,
        inverse: Callable[[Any, Any], Any] | None = None,
        exact_inverse: bool = True,
        commutative: bool = False,
        selective: bool = False,
    ) -> None:
        if not callable(combine):
            raise TypeError(f"Monoid combine must be callable, got {type(combine).__name__}")
        if inverse is not None and not callable(inverse):
            raise TypeError(f"Monoid inverse must be callable, got {type(inverse).__name__}")
        if not isinstance(exact_inverse, bool):
            raise TypeError(f"Monoid exact_inverse must be True or False, got {exact_inverse!r}")
        self.combine = combine
        self.identity = identity
        self.name = name or getattr(combine, "__name__", "monoid")
        self.inverse = inverse
        self.exact_inverse = exact_inverse and inverse is not None
        self.commutative = commutative
        self.selective = selective

    def fold(self, values) -> Any:
        """Aggregate ``values`` left to right (the identity when empty)."""
        acc = self.identity
        combine = self.combine
        for v in values:
            acc = combine(acc, v)
        return acc

    def __repr__(self) -> str:
        return f"Monoid({self.name})"


class CountingMonoid(Monoid):
    """A monoid that counts its ``combine`` (and ``inverse``) calls.

    Tests and benchmarks use it to show complexity by counting, not timing:
    ``m = CountingMonoid(sum_monoid); engine = AmortizedMTA(m); ...; m.calls``.
    """

    __slots__ = ("calls", "_inner")

    def __init__(self, monoid: Monoid) -> None:
        self._inner = monoid
        self.calls = 0
        inner_combine = monoid.combine

        def combine(a, b):
            self.calls += 1
            return inner_combine(a, b)

        inverse = None
        if monoid.inverse is not None:
            inner_inverse = monoid.inverse

            def inverse(a, b):
                self.calls += 1
                return inner_inverse(a, b)

        super().__init__(
            combine,
            monoid.identity,
            name=f"counting({monoid.name})",
            inverse=inverse,
            exact_inverse=monoid.exact_inverse,
            commutative=monoid.commutative,
            selective=monoid.selective,
        )

    def reset(self) -> int:
        """Return the count so far and start again from zero."""
        calls, self.calls = self.calls, 0
        return calls


class Aggregator:
    """``lift`` -> ``monoid`` -> ``lower`` (section 3.3).

    ``lift`` maps a raw input to the monoid's domain, ``lower`` maps the
    window's aggregate to the result the user sees.  ``parts``: for a
    :func:`product`, the aggregators it is the product of (each result's
    component ``i`` is ``parts[i]``'s), else ``None``.
    """

    __slots__ = ("monoid", "lift", "lower", "name", "parts")

    def __init__(
        self,
        monoid: Monoid,
        lift: Callable[[Any], Any] = identity_function,
        lower: Callable[[Any], Any] = identity_function,
        *,
        name: str | None = None,
    ) -> None:
        if not isinstance(monoid, Monoid):
            raise TypeError(f"Aggregator needs a Monoid, got {type(monoid).__name__}")
        if not callable(lift) or not callable(lower):
            raise TypeError("Aggregator lift and lower must be callable")
        self.monoid = monoid
        self.lift = lift
        self.lower = lower
        self.name = name or monoid.name
        self.parts: tuple | None = None

    def on(self, getter: Callable[[Any], Any], *, name: str | None = None) -> "Aggregator":
        """The same aggregation over ``getter(raw)``, e.g. ``MAX.on(lambda r: r.mem)``."""
        lift = self.lift
        return Aggregator(self.monoid, lambda raw: lift(getter(raw)), self.lower, name=name or self.name)

    def aggregate(self, raws) -> Any:
        """Brute force: the result over ``raws`` (the oracle tests compare to)."""
        return self.lower(self.monoid.fold(self.lift(r) for r in raws))

    def __repr__(self) -> str:
        return f"Aggregator({self.name})"


def _written_out(name: str, params: str, parts: Sequence[str], functions: Sequence[Callable]) -> Callable:
    """``def name(params): return (parts...,)`` with ``f0``, ``f1``, ... bound
    to ``functions``.  A product's functions run on every insert, eviction
    and result, so each width gets its tuple display written out (a loop over
    ``zip`` or a comprehension costs a good share of the call).  Only these
    fixed templates are compiled: no caller's text enters the source."""
    namespace = {f"f{i}": f for i, f in enumerate(functions)}
    exec(f"def {name}({params}):\n    return ({', '.join(parts)},)\n", namespace)  # noqa: S102 - fixed templates
    return namespace[name]


def _componentwise2(functions: Sequence[Callable], name: str) -> Callable:
    """``(a, b) -> (f0(a[0], b[0]), f1(a[1], b[1]), ...)``."""
    fs = tuple(functions)
    return _written_out(name, "a, b", [f"f{i}(a[{i}], b[{i}])" for i in range(len(fs))], fs)


def _componentwise1(functions: Sequence[Callable], name: str) -> Callable:
    """``v -> (f0(v[0]), f1(v[1]), ...)``, ``v[i]`` itself where ``fi`` is
    the identity."""
    fs = tuple(functions)
    return _written_out(name, "v", [f"v[{i}]" if f is identity_function else f"f{i}(v[{i}])"
                                    for i, f in enumerate(fs)], fs)


def _fan_out(functions: Sequence[Callable], name: str) -> Callable:
    """``raw -> (f0(raw), f1(raw), ...)``, ``raw`` itself where ``fi`` is the
    identity."""
    fs = tuple(functions)
    return _written_out(name, "raw", ["raw" if f is identity_function else f"f{i}(raw)" for i, f in enumerate(fs)],
                        fs)


#: The combines product_monoid built, each to its components' combines, which the compiled core runs
#: componentwise without the product's frame (mta.native.combine_spec).  Held here, by the function's
#: identity, not read from an attribute: another callable with a ``components`` (a user's, or a
#: functools.wraps wrapper, which copies the attributes) must still be called.
_PRODUCTS: "weakref.WeakKeyDictionary[Callable, tuple]" = weakref.WeakKeyDictionary()


def product_components(combine: Any) -> tuple | None:
    """The components' combines of a combine :func:`product_monoid` built,
    else None."""
    # product combines are plain functions, compared by identity: no other object's __eq__ is consulted
    return _PRODUCTS.get(combine) if type(combine) is types.FunctionType else None


def product_monoid(monoids: Sequence[Monoid]) -> Monoid:
    """The componentwise product of ``monoids``; values are tuples."""
    monoids = tuple(monoids)
    if not monoids:
        raise ValueError("product of no monoids")
    name = "(" + " x ".join(m.name for m in monoids) + ")"
    inverse = None
    if all(m.inverse is not None for m in monoids):
        inverse = _componentwise2([m.inverse for m in monoids], "product_inverse")
    combine = _componentwise2([m.combine for m in monoids], "product_combine")
    combine.components = _PRODUCTS[combine] = tuple(m.combine for m in monoids)
    return Monoid(
        combine,
        tuple(m.identity for m in monoids),
        name=name,
        inverse=inverse,
        # a tuple's inverse is exact only if every component's is
        exact_inverse=all(m.exact_inverse for m in monoids),
        commutative=all(m.commutative for m in monoids),
        # a product of selective monoids may pick a from one side and b from
        # the other, so it is not selective in general
        selective=len(monoids) == 1 and monoids[0].selective,
    )


def product(*aggregators: Aggregator, name: str | None = None) -> Aggregator:
    """Several aggregators over one window: results come back as a tuple.

    ``product(mean, stddev, maximum)`` lifts each raw input once per
    component, combines componentwise and lowers to ``(mean, sd, max)``.
    """
    if not aggregators:
        raise ValueError("product() needs at least one aggregator")
    for a in aggregators:
        if not isinstance(a, Aggregator):
            raise TypeError(f"product() takes Aggregators, got {type(a).__name__}")
    agg = Aggregator(
        product_monoid([a.monoid for a in aggregators]),
        _fan_out([a.lift for a in aggregators], "lift"),
        _componentwise1([a.lower for a in aggregators], "product_lower"),
        name=name or "product(" + ", ".join(a.name for a in aggregators) + ")",
    )
    agg.parts = tuple(aggregators)
    return agg

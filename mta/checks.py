"""Checking mode: catch a broken monoid or slide policy early, with a clear error.

* :func:`check_monoid` -- associativity on sampled triples and neutrality of
  the identity, else :class:`~mta.errors.MonoidLawError`;
* :func:`check_policy` -- prefix-monotonicity of a WSP over a sample window,
  else :class:`~mta.errors.PolicyError`;
* :class:`WindowChecker` -- what ``Window(..., check=k)`` runs: a bounded
  reservoir of recent lifted values and a few sampled checks every k-th push.

Values compare with ``equal(a, b)``; the default :func:`default_equal` is
exact equality except for floats (``math.isclose``), also inside tuples/lists.
"""

from __future__ import annotations

import itertools
import math
import random
import reprlib
from collections import deque
from typing import Any, Callable, Sequence

from .errors import MonoidLawError, PolicyError
from .monoid import Monoid

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 80
_repr.maxtuple = _repr.maxlist = 12
short_repr = _repr.repr


def default_equal(a: Any, b: Any) -> bool:
    """``a == b``, but floats within ``rel_tol=1e-9, abs_tol=1e-12`` (NaN equals NaN)."""
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (a != a and b != b)
        except TypeError:
            return a == b
    if isinstance(a, (tuple, list)) and type(a) is type(b):
        return len(a) == len(b) and all(map(default_equal, a, b))
    return a == b


def check_identity(monoid: Monoid, x: Any, equal: Callable | None = None) -> None:
    """Raise MonoidLawError unless ``combine(e, x) == x == combine(x, e)``."""
    equal = equal or default_equal
    e, combine = monoid.identity, monoid.combine
    for side, result in (("combine(identity, x)", combine(e, x)), ("combine(x, identity)", combine(x, e))):
        if not equal(result, x):
            raise MonoidLawError(
                f"identity {short_repr(e)} of monoid {monoid.name} is not neutral: "
                f"{side} = {short_repr(result)} for x = {short_repr(x)}"
            )


def check_associative(monoid: Monoid, a: Any, b: Any, c: Any, equal: Callable | None = None) -> None:
    """Raise MonoidLawError unless ``(a.b).c == a.(b.c)``."""
    combine = monoid.combine
    left, right = combine(combine(a, b), c), combine(a, combine(b, c))
    if not (equal or default_equal)(left, right):
        raise MonoidLawError(
            f"combine of monoid {monoid.name} is not associative: for a = {short_repr(a)}, "
            f"b = {short_repr(b)}, c = {short_repr(c)}: combine(combine(a, b), c) = {short_repr(left)} "
            f"but combine(a, combine(b, c)) = {short_repr(right)}"
        )


def check_monoid(
    monoid: Monoid, samples: Sequence, *, equal: Callable | None = None, max_triples: int = 1000, seed: int = 0
) -> None:
    """Check the monoid laws on ``samples`` (values in the monoid's domain).

    The identity is checked against every sample; associativity on every
    triple when there are at most ``max_triples``, else on ``max_triples``
    random ones.  Raises :class:`~mta.errors.MonoidLawError` naming the values.
    """
    samples = list(samples)
    for x in samples:
        check_identity(monoid, x, equal)
    if not samples:
        return
    if len(samples) ** 3 <= max_triples:
        triples = itertools.product(samples, repeat=3)
    else:
        rng = random.Random(seed)
        triples = ((rng.choice(samples), rng.choice(samples), rng.choice(samples)) for _ in range(max_triples))
    for a, b, c in triples:
        check_associative(monoid, a, b, c, equal)


def check_policy(policy_or_wsp, monoid: Monoid | None, values: Sequence) -> None:
    """Check that a WSP is prefix-monotone over the sample window ``values``.

    ``policy_or_wsp`` is a :class:`~mta.policies.SlidePolicy` (``monoid`` may
    then be ``None``: the policy's own) or a ``wsp(total, prefix)`` over
    ``monoid``.  ``values`` are in the monoid's domain, oldest first (lift raw
    inputs with ``policy.lift``).  Raises :class:`~mta.errors.PolicyError`
    naming the prefix lengths when the WSP holds for a prefix of length k but
    not for a shorter non-empty one of length j < k.
    """
    wsp = getattr(policy_or_wsp, "holds", policy_or_wsp)
    name = getattr(policy_or_wsp, "name", None) or getattr(wsp, "__name__", repr(wsp))
    if monoid is None:
        monoid = getattr(policy_or_wsp, "monoid", None)
    if not isinstance(monoid, Monoid):
        raise TypeError("check_policy needs a Monoid (or a SlidePolicy bringing its own)")
    prefixes, acc = [], monoid.identity
    for v in values:
        acc = monoid.combine(acc, v)
        prefixes.append(acc)
    first_false = None
    for k, prefix in enumerate(prefixes, 1):
        if not wsp(acc, prefix):
            if first_false is None:
                first_false = k
        elif first_false is not None:
            raise PolicyError(
                f"slide policy {name} is not prefix-monotone: it holds for the oldest prefix of "
                f"length {k} but not for the shorter prefix of length {first_false} "
                f"(sample window of {len(prefixes)} values: {short_repr(list(values))})"
            )


class WindowChecker:
    """The checking mode of a :class:`~mta.window.Window`.

    ``observe(raw, value)`` runs on every push, before the engine sees the
    lifted ``value = (aggregation, policy)``: it always runs the policy's
    ``validate`` (O(1)); on every ``every``-th push (the first included) it
    also checks the identity on ``value``, associativity on one triple of
    ``value`` and two random recent values, for both the aggregation's and
    the policy's monoid, and prefix-monotonicity of the policy over the
    reservoir of the ``size`` most recent values plus ``value``.  Extra cost
    per checked push: O(size) combines and WSP calls.
    """

    def __init__(
        self, monoid: Monoid, policy, *, every: int = 1, size: int = 8, equal=None, seed: int = 0
    ) -> None:
        if every < 1 or size < 1:
            raise ValueError("WindowChecker needs every >= 1 and size >= 1")
        self.monoids = (monoid, policy.monoid)
        self.policy = policy
        self.every = every
        self.equal = equal
        self._recent: deque = deque(maxlen=size)
        self._previous = policy.monoid.identity
        self._countdown = 1
        self._rng = random.Random(seed)

    def state(self) -> tuple:
        """What observing changes, for :meth:`restore` when the values
        observed do not enter the window after all."""
        return (self._previous, tuple(self._recent), self._countdown, self._rng.getstate())

    def restore(self, state: tuple) -> None:
        self._previous, recent, self._countdown, rng = state
        self._recent.clear()
        self._recent.extend(recent)
        self._rng.setstate(rng)

    def observe(self, raw: Any, value: tuple) -> None:
        """Raise MonoidLawError (naming lifted values) or PolicyError on a detected mistake."""
        policy = self.policy
        if policy.validate is not None:
            message = policy.validate(value[1], self._previous)
            if message:
                raise PolicyError(f"slide policy {policy.name} rejects raw value {short_repr(raw)}: {message}")
        self._countdown -= 1
        if self._countdown <= 0:
            recent, rng = self._recent, self._rng
            for i, monoid in enumerate(self.monoids):
                x = value[i]
                check_identity(monoid, x, self.equal)
                triple = [x, rng.choice(recent)[i], rng.choice(recent)[i]] if recent else [x, x, x]
                rng.shuffle(triple)
                check_associative(monoid, *triple, self.equal)
            check_policy(policy, None, [r[1] for r in recent] + [value[1]])
            self._countdown = self.every
        self._previous = value[1]
        self._recent.append(value)

"""The user-facing sliding window: an aggregator, a slide policy and an engine.

``Window(aggregator, policy)`` runs the aggregator's monoid and the policy's
own dimension side by side (their :func:`~mta.monoid.product_monoid`), so::

    w = Window(Aggregator(Monoid(max, -math.inf)), SumAtMost(10))
    w.extend([2, 2, 3, 3])   # [2, 2, 3, 3]: max 3
    w.push(4)                # [3, 3, 4]: max 4 (section 3.2)
"""

from __future__ import annotations

import operator
from typing import Any, Iterable

from .checks import WindowChecker, short_repr
from .errors import MTAError
from .markers import EMPTY
from .monoid import Aggregator, product_monoid
from .policies import SlidePolicy


class LiftError(MTAError, ValueError):
    """A raw input could not be lifted; the window is unchanged."""

    @classmethod
    def of(cls, who: str, raw: Any, exc: Exception) -> "LiftError":
        """The error of ``who`` (an aggregator or policy, named) failing to lift ``raw`` with ``exc``."""
        return cls(f"{who} cannot lift raw value {short_repr(raw)}: {type(exc).__name__}: {exc}")


#: The product monoids of recent windows, by their two components' identity:
#: a task opens a window per key with the same aggregator and policy, and a
#: product compiles its functions when built.  Entries hold their components,
#: so an id is not reused while its entry lives.
_products: dict = {}


def _window_monoid(aggregator_monoid, policy_monoid):
    """The product of the two monoids, built once per pair.  O(1) when cached."""
    key = (id(aggregator_monoid), id(policy_monoid))
    hit = _products.get(key)
    if hit is not None and hit[0] is aggregator_monoid and hit[1] is policy_monoid:
        return hit[2]
    if len(_products) >= 64:
        _products.clear()
    monoid = product_monoid([aggregator_monoid, policy_monoid])
    _products[key] = (aggregator_monoid, policy_monoid, monoid)
    return monoid


class Window:
    """``aggregator`` over a window slid by ``policy``, on ``engine``.

    ``engine`` is any engine class (default :func:`mta.native.amortized_engine`:
    the Amortized MTA, its compiled core for an in-memory window when built);
    it is built as ``engine(monoid, wsp, **options)``.  Raw inputs are lifted
    before the engine is touched, so one that fails to lift raises
    :class:`LiftError` and leaves the window unchanged; so does one whose
    lifted value the window's store cannot write (``store.check_value``:
    a NumPy scalar, say, for the stores' codec).

    ``check`` turns on the checking mode (:class:`~mta.checks.WindowChecker`):
    ``True`` checks every push, an integer ``k`` every k-th push (the
    policy's per-value ``validate`` still runs on every push); ``equal`` is
    the comparison used by the monoid-law checks.  A detected mistake raises
    MonoidLawError or PolicyError before the value reaches the engine.
    """

    def __init__(
        self,
        aggregator: Aggregator,
        policy: SlidePolicy,
        engine=None,
        *,
        check: bool | int = False,
        equal=None,
        **options,
    ) -> None:
        if not isinstance(aggregator, Aggregator):
            raise TypeError(f"Window needs an Aggregator, got {type(aggregator).__name__}")
        if not isinstance(policy, SlidePolicy):
            raise TypeError(f"Window needs a SlidePolicy, got {type(policy).__name__}")
        if engine is None:
            from .native import amortized_engine

            engine = amortized_engine
        self.aggregator = aggregator
        self.policy = policy
        self.monoid = _window_monoid(aggregator.monoid, policy.monoid)
        holds = policy.holds
        if getattr(options.get("store"), "TAKES_ELEMENT_ARITY", False):  # mta.storage.WindowStore
            options = {"element_arity": 2, **options}  # each element: (aggregator value, policy value)
        try:
            self.engine = engine(self.monoid, lambda total, prefix: holds(total[1], prefix[1]), **options)
        except TypeError as exc:
            # a store refusing an option names the engine that passed it on, but the caller called Window
            raised_by = getattr(exc, "raised_by", None)
            if raised_by is None:
                raise
            raise raised_by("Window", ("engine", "check", "equal")) from None
        self._lower = aggregator.lower
        # a value the store cannot write would fail a later flush, the window then unusable: refused here
        self._store_check = getattr(options.get("store"), "check_value", None)
        self._checker = None
        if check:
            self._checker = WindowChecker(aggregator.monoid, policy, every=operator.index(check), equal=equal)

    def _lift(self, raw: Any) -> tuple:
        """``(aggregator.lift(raw), policy.lift(raw))``, checked in checking mode."""
        a = EMPTY
        try:
            a = self.aggregator.lift(raw)
            value = (a, self.policy.lift(raw))
        except Exception as exc:
            who = f"aggregator {self.aggregator.name}" if a is EMPTY else f"slide policy {self.policy.name}"
            raise LiftError.of(who, raw, exc) from exc
        if self._store_check is not None:
            try:
                self._store_check(value)
            except TypeError as exc:
                raise LiftError(f"the window's store cannot hold raw value {short_repr(raw)} as lifted: "
                                f"{exc}") from exc
        if self._checker is not None:
            self._checker.observe(raw, value)
        return value

    def push(self, raw: Any) -> Any:
        """Insert ``raw``, enforce the policy and return the lowered result."""
        value = self._lift(raw)
        return self._lower(self.engine.push(value)[0])

    def extend(self, raws: Iterable) -> list:
        """Push every raw in order and return the list of results.

        All raws are lifted (and checked) first, so a bad one leaves the
        window unchanged.
        """
        checker = self._checker
        before = checker.state() if checker is not None else None
        try:
            values = [self._lift(r) for r in raws]
        except BaseException:
            if checker is not None:  # nothing entered the window: nothing was seen
                checker.restore(before)
            raise
        push, lower = self.engine.push, self._lower
        return [lower(push(v)[0]) for v in values]

    def query(self) -> Any:
        """The lowered aggregate of the current window."""
        return self._lower(self.engine.query()[0])

    def evict(self) -> None:
        """Remove the oldest element (the engine's error on an empty window)."""
        self.engine.evict()

    def checkpoint(self, label: Any = None) -> int:
        """Make the window durable in its store, with ``label`` (see
        ``LevelEngine.checkpoint``)."""
        return self.engine.checkpoint(label)

    @property
    def resumed_label(self) -> Any:
        """The label of the checkpoint the window resumed (``None``: none)."""
        return getattr(self.engine, "resumed_label", None)

    def close(self, *, delete: bool = False) -> None:
        """Wait for background store I/O; ``delete=True`` also removes the
        window from its store (see ``LevelEngine.close``).  No-op for
        engines without a store."""
        close = getattr(self.engine, "close", None)
        if close is not None:
            close(delete=delete)

    def __len__(self) -> int:
        return len(self.engine)

    def __repr__(self) -> str:
        return f"Window({self.aggregator.name}, {self.policy.name}, {type(self.engine).__name__}, len={len(self)})"

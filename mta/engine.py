"""The interface every engine shares, and its failure guard.

Every engine (the two MTAs and every baseline) is::

    Engine(monoid, wsp=None, **options)
    insert(v)          # v is already in the monoid's domain
    evict()            # removes the oldest element; IndexError on an empty window
    bulk_evict(k)      # removes the k oldest elements; IndexError if there are fewer
    slide(vs, ks)      # for each v, k: insert(v), bulk_evict(k), query(); the list of results
    enforce() -> int   # evicts the longest prefix P with wsp(total, aggregate(P)); returns |P|
    query()            # aggregate of the window; the identity when empty
    push(v)            # insert(v), enforce(), return query()
    __len__()

``wsp(total, prefix)`` is a window slide policy (section 4.1.3): ``total`` is
the window's aggregate when enforcement starts, ``prefix`` the aggregate of
a candidate oldest prefix.  It must be prefix-monotone.

If user code raises inside an operation, the engine is marked failed and
every later call raises :class:`~mta.errors.EngineFailedError`; it never
returns a result computed from a half-updated state.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import operator
import os
from typing import Any, Callable

from .errors import CountError, EmptyWindowError, EngineFailedError, OperationRefused
from .monoid import Monoid

#: The operations guarded against user code raising half-way.
GUARDED_OPERATIONS = ("insert", "evict", "bulk_evict", "enforce", "query", "push", "slide")


def _guard(name: str, method: Callable) -> Callable:
    """``method`` wrapped so that an exception from user code marks the
    engine failed.

    The calls made once per element (``insert(v)``, ``push(v)``, ``evict()``,
    ``enforce()``, ``query()``) get a wrapper written out with the method's
    own parameters: a ``*args`` wrapper would build a tuple on every call, a
    measurable share of a push.  The calls that take a count or a batch
    (``bulk_evict``, ``slide``) do enough work per call that the generic
    wrapper costs nothing visible.
    """
    params = list(inspect.signature(method).parameters.values())[1:]
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in params):
        raise TypeError(f"{name}: guarded operations take plain positional parameters")
    names = tuple(p.name for p in params)
    wrap = _guard_none if not names else _guard_v if names == ("v",) else _guard_any
    guarded = functools.wraps(method)(wrap(name, method))
    guarded.unguarded = method
    return guarded


def _failed(engine: "Engine", name: str, exc: BaseException) -> None:
    """Mark ``engine`` failed in ``name``, unless ``exc`` refused the call
    before any change (then the state is intact)."""
    if not _refused_here(exc):
        engine._mark_failed(exc, name)


#: This package's directory: frames of code outside it are the user's.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _refused_here(exc: BaseException) -> bool:
    """``exc`` is an engine's own refusal: an :class:`OperationRefused`
    raised with no user code (a combine, lift or policy, e.g. one using a
    window of its own) between the call and the raise, since user code
    raises in the middle of an update.  O(traceback), on errors only."""
    if not isinstance(exc, OperationRefused):
        return False
    tb = exc.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            return False
        tb = tb.tb_next
    return True


def _guard_none(name: str, method: Callable) -> Callable:
    def guarded(self):
        if self._failure is not None:
            self._check_usable()
        try:
            return method(self)
        except BaseException as exc:
            _failed(self, name, exc)
            raise

    return guarded


def _guard_v(name: str, method: Callable) -> Callable:
    def guarded(self, v):
        if self._failure is not None:
            self._check_usable()
        try:
            return method(self, v)
        except BaseException as exc:
            _failed(self, name, exc)
            raise

    return guarded


def _guard_any(name: str, method: Callable) -> Callable:
    def guarded(self, *args, **kwargs):
        if self._failure is not None:
            self._check_usable()
        try:
            return method(self, *args, **kwargs)
        except BaseException as exc:
            _failed(self, name, exc)
            raise

    return guarded


class Engine:
    """Base class: argument checks, ``push`` and the failure guard.

    Subclasses implement ``insert``, ``evict``, ``enforce``, ``query`` and
    ``__len__``; the public operations are wrapped once, at class creation,
    and the unwrapped ones stay reachable as ``_raw_insert`` and so on, for
    ``push`` and for engines calling their own operations (one guard per
    public call).
    """

    def __init__(self, monoid: Monoid, wsp: Callable[[Any, Any], bool] | None = None) -> None:
        if not isinstance(monoid, Monoid):
            raise TypeError(f"{type(self).__name__} needs a Monoid, got {type(monoid).__name__}")
        if wsp is not None and not callable(wsp):
            raise TypeError(f"wsp must be callable wsp(total, prefix) -> bool, got {type(wsp).__name__}")
        self.monoid = monoid
        self.wsp = wsp
        self._failure: BaseException | None = None
        self._failed_in = ""

    def _mark_failed(self, exc: BaseException, name: str) -> None:
        """User code raised ``exc`` half-way through ``name``: every later
        call refuses (:meth:`_check_usable`)."""
        self._failure = exc
        self._failed_in = name

    def _check_usable(self) -> None:
        """Raise :class:`EngineFailedError` if user code raised half-way
        through an earlier operation."""
        if self._failed_in == "close":
            raise EngineFailedError(f"{type(self).__name__} was closed: {self._failure}")
        if self._failure is not None:
            raise EngineFailedError(
                f"{type(self).__name__} is unusable: {self._failure!r} was raised during "
                f"{self._failed_in}(), so its state may be inconsistent; rebuild the window "
                "or resume it from its last checkpoint"
            ) from self._failure

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in GUARDED_OPERATIONS:
            method = cls.__dict__.get(name)
            if method is not None and not hasattr(method, "unguarded"):
                setattr(cls, "_raw_" + name, method)
                setattr(cls, name, _guard(name, method))

    def bulk_evict(self, count: int) -> None:
        """Remove the ``count`` oldest elements, here one ``evict`` at a time
        (the MTA engines override it with their O(log n) bulk eviction)."""
        for _ in range(check_count(self, count)):
            self._raw_evict()

    def slide(self, values, evictions) -> list:
        """For each ``v, k`` of ``zip(values, evictions)``: ``insert(v)``,
        evict the ``k`` oldest elements, ``query()``; returns the results.

        The loop of a sliding computation whose evictions are known in
        advance (a batch of rows sorted by time), run inside the engine: one
        guarded call for the whole run instead of three per element.
        """
        if not isinstance(values, (list, tuple)):
            values = list(values)
        evictions = check_evictions(self, evictions, len(values))
        insert, evict, bulk_evict, query = self._raw_insert, self._raw_evict, self._raw_bulk_evict, self._raw_query
        results = []
        append = results.append
        for v, k in zip(values, evictions):
            insert(v)
            if k == 1:
                evict()
            elif k:
                bulk_evict(k)
            append(query())
        return results

    def push(self, v):
        """``insert(v)``, ``enforce()``, then return ``query()``."""
        self._raw_insert(v)
        self._raw_enforce()
        return self._raw_query()

    def __len__(self) -> int:  # pragma: no cover - every engine overrides it
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.monoid.name}, len={len(self)})"


for _name in ("push", "bulk_evict", "slide"):
    setattr(Engine, "_raw_" + _name, getattr(Engine, _name))
    setattr(Engine, _name, _guard(_name, getattr(Engine, _name)))


def _as_count(count, what: str) -> int:
    if isinstance(count, bool):
        raise CountError(f"{what} needs an integer count, got the bool {count!r}")
    try:
        count = operator.index(count)  # ints, numpy integers; not floats or bools' lookalikes
    except TypeError:
        raise CountError(f"{what} needs an integer count, got {type(count).__name__} {count!r}") from None
    if count < 0:
        raise CountError(f"{what} needs a count >= 0, got {count}")
    return count


def check_count(engine: Engine, count) -> int:
    """``bulk_evict``'s argument, checked before any change to the window."""
    count = _as_count(count, "bulk_evict()")
    if count > len(engine):
        raise EmptyWindowError(f"bulk_evict({count}) on a window of {len(engine)} elements")
    return count


_INT = {int}


def check_evictions(engine: Engine, evictions, n: int) -> list[int]:
    """``slide``'s counts, checked before any change: one per value, each
    within what the window holds after that value's insert."""
    counts = list(evictions)
    if len(counts) != n:
        raise CountError(f"slide() needs one eviction count per value: {n} values, {len(counts)} counts")
    size = len(engine)
    # the usual case checked in C (exact ints, none negative, the window never below empty); the loop
    # below converts other integer types and names the first bad count
    if not counts or (set(map(type, counts)) == _INT and min(counts) >= 0
                      and min(itertools.accumulate(map(operator.sub, itertools.repeat(1), counts), initial=size)) >= 0):
        return counts
    for i, k in enumerate(counts):
        if type(k) is not int:
            counts[i] = k = _as_count(k, f"slide() at position {i}")
        size += 1 - k
        if k < 0 or size < 0:
            if k < 0:
                raise CountError(f"slide() needs counts >= 0, got {k} at position {i}")
            raise EmptyWindowError(f"slide(): evicting {k} at position {i}, past the window's {size + k} elements")
    return counts

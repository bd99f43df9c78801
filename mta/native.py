"""The compiled MTA cores, when they were built, and their selection.

``mta/_native.c`` holds the Amortized MTA (:mod:`mta.amortized_mta`) and
the Log MTA (:mod:`mta.log_mta`) over in-memory level queues, written
against the CPython API and compiled at install when a C compiler is
present.  It is optional: without it (or with the environment variable
``MTA_PURE_PYTHON=1``) :data:`AVAILABLE` is False and
:class:`NativeAmortizedMTA` and :class:`NativeLogMTA` refuse to build,
naming why; the pure-Python modules are the reference and run everywhere.

Values stay Python objects and a user monoid's ``combine`` stays a Python
callable, called from C.  The ready monoids get their combine done in C,
with the same operations their Python callables make:

* ``operator.add`` (sum, count, the count dimension of policies);
* builtin ``max`` (the policies' max dimension);
* ``mta.aggregators.MIN`` and ``MAX`` (``_select`` with ``<`` or ``>``);
* ``mta.aggregators.MOMENTS`` (variance, standard deviation: the same
  arithmetic on the (count, mean, M2) triples, in the same order).

Each engine covers what its in-memory pure-Python engine does (insert,
evict, bulk_evict, slide, enforce, query, push); :func:`amortized_engine`
and :func:`log_engine` pick it for in-memory windows and the pure-Python
engine for a window in a store (``store=``).
"""

from __future__ import annotations

import functools
import operator
import os
from typing import Any

from . import aggregators
from .amortized_mta import AmortizedMTA
from .log_mta import LogMTA
from .engine import Engine, check_count, check_evictions
from .errors import EmptyWindowError, EngineFailedError
from .level_queue import MemoryLevelQueue
from .monoid import product_components

try:
    from . import _native
except ImportError as exc:  # not built: no compiler at install, or a source checkout
    _native = None
    WHY_NOT = f"mta._native is not built ({exc})"
else:
    WHY_NOT = ""
if _native is not None and os.environ.get("MTA_PURE_PYTHON", "") not in ("", "0"):
    _native = None
    WHY_NOT = "MTA_PURE_PYTHON is set"

#: True when the compiled core is importable and not disabled.
AVAILABLE = _native is not None


def combine_kind(combine) -> int:
    """Which native combine does what ``combine`` does (0: call it)."""
    if _native is None:
        return 0
    if combine is operator.add:
        return _native.KIND_ADD
    if combine is max:
        return _native.KIND_BUILTIN_MAX
    if combine is aggregators._moments_combine:
        return _native.KIND_MOMENTS
    if (isinstance(combine, functools.partial) and combine.func is aggregators._select
            and not combine.keywords and len(combine.args) == 1):
        if combine.args[0] is operator.gt:
            return _native.KIND_SELECT_GT
        if combine.args[0] is operator.lt:
            return _native.KIND_SELECT_LT
    return _native.KIND_CALL


def combine_spec(combine) -> tuple[int, Any]:
    """What a core takes for ``combine``: ``(kind, fn)``.  A product's
    combine (one :func:`mta.monoid.product_monoid` built, as
    :func:`mta.monoid.product_components` tells) is ``KIND_PRODUCT`` with
    ``(combine, kinds, fns)``, its components' own specs, so that the core
    combines componentwise without the product's Python frame; anything
    else, whatever its attributes, is :func:`combine_kind` and ``combine``
    itself."""
    components = product_components(combine) if _native is not None else None
    if components is not None:
        specs = [combine_spec(f) for f in components]
        return _native.KIND_PRODUCT, (combine, tuple(k for k, _ in specs), tuple(f for _, f in specs))
    return combine_kind(combine), combine


def _failure_raiser(name: str):
    """What a core calls, with the exception user code raised and the
    operation, once it is failed: raises :class:`EngineFailedError`."""

    def raise_failed(failure: BaseException, operation: str):
        raise EngineFailedError(
            f"{name} is unusable: {failure!r} was raised during {operation}(), so its state may be "
            "inconsistent; rebuild the window or resume it from its last checkpoint"
        ) from failure

    return raise_failed


class _NativeEngine(Engine):
    """An MTA whose core is compiled: ``insert``, ``evict``, ``enforce``,
    ``query`` and ``push`` are the core's own methods (no Python frame per
    call); the core keeps the failure guard itself.  ``level_queue`` is
    accepted for a :class:`~mta.level_queue.MemoryLevelQueue` subclass,
    whose ``COMPACT_AFTER`` the core follows.

    User code an operation runs (``combine``, ``wsp``, a finaliser) may not
    call the same engine back: such a call raises RuntimeError and changes
    nothing (raised through the operation, it fails the engine as any error
    of user code does)."""

    _CORE = ""  # the core's type in mta._native
    _PURE = ""  # the pure-Python engine, named in refusals

    def __init__(self, monoid, wsp=None, *, level_queue=MemoryLevelQueue, **options) -> None:
        super().__init__(monoid, wsp)
        name = type(self).__name__
        if _native is None:
            raise RuntimeError(f"{name} needs the compiled core: {WHY_NOT}; use {self._PURE}")
        if options:
            raise TypeError(f"{name} keeps its levels in memory: {', '.join(sorted(options))} "
                            f"need the pure-Python {self._PURE}")
        if not (isinstance(level_queue, type) and issubclass(level_queue, MemoryLevelQueue)):
            raise TypeError(f"{name}: level_queue must be a MemoryLevelQueue subclass")
        kind, combine = combine_spec(monoid.combine)
        self._core = core = getattr(_native, self._CORE)(
            combine, monoid.identity, kind, wsp, _failure_raiser(name), EmptyWindowError,
            level_queue.COMPACT_AFTER)
        # Instance attributes: callers reach the C methods directly.
        self.insert = self._raw_insert = core.insert
        self.evict = self._raw_evict = core.evict
        self.enforce = self._raw_enforce = core.enforce
        self.query = self._raw_query = core.query
        self.push = self._raw_push = core.push

    def _mark_failed(self, exc: BaseException, name: str) -> None:
        # The wrapper's own Python code raised (a slide's values, a count's __index__): the core is told, or
        # its methods, reached without the wrapper, would go on where the pure-Python engine refuses.  The
        # core keeps its first failure (and ignores one from a call made back into it while it runs, which
        # changed nothing).
        super()._mark_failed(exc, name)
        self._core.mark_failed(exc, name)

    def _check_usable(self) -> None:
        core = self._core
        if core.failure is not None:
            _failure_raiser(type(self).__name__)(core.failure, core.failed_in)

    def checkpoint(self, label=None) -> int:
        """As an in-memory pure-Python engine: refused."""
        raise TypeError(f"{type(self).__name__}.checkpoint() needs an engine built with store= "
                        f"(a stored window runs on the pure-Python {self._PURE})")

    def close(self, *, delete: bool = False) -> None:
        """Nothing to wait for: the window is in memory and stays as it is."""

    @property
    def store_stats(self):
        """None: the window is in memory."""
        return None

    def slide(self, values, evictions) -> list:
        """As :meth:`mta.engine.Engine.slide`, the loop run in C."""
        self._check_usable()
        values = list(values)
        counts = check_evictions(self, evictions, len(values))
        return self._core.slide_checked(values, counts)

    def height(self) -> int:
        """Number of levels in use (1 for an empty window)."""
        return self._core.height()

    def local_size(self) -> int:
        """References the core holds."""
        return self._core.local_size()

    def __len__(self) -> int:
        return len(self._core)


class NativeAmortizedMTA(_NativeEngine):
    """The Amortized MTA (section 4.2) with its core compiled: amortized O(1)
    insert and eviction, O(log n) worst case and bulk eviction, as
    :class:`~mta.amortized_mta.AmortizedMTA`."""

    _CORE, _PURE = "AmortizedCore", "AmortizedMTA"

    def bulk_evict(self, count: int) -> None:
        """Remove the ``count`` oldest elements: singly up to ``log2 n`` of
        them, else by position, O(log n)."""
        self._check_usable()
        self._core.bulk_evict_checked(check_count(self, count))


class NativeLogMTA(_NativeEngine):
    """The Log MTA (section 4.1) with its core compiled: O(log n) insert,
    eviction and bulk eviction, as :class:`~mta.log_mta.LogMTA`."""

    _CORE, _PURE = "LogCore", "LogMTA"

    def bulk_evict(self, count: int) -> None:
        """Remove the ``count`` oldest elements by position, O(log n)."""
        self._check_usable()
        self._core.bulk_evict_checked(check_count(self, count))


def amortized_engine(monoid, wsp=None, **options):
    """The Amortized MTA for ``options``: :class:`NativeAmortizedMTA` for an
    in-memory window with the default level queues when the compiled core is
    in use, else :class:`~mta.amortized_mta.AmortizedMTA` (a store, another
    ``level_queue``, or no core).  The default engine of
    :class:`mta.window.Window`."""
    if _native is not None and not options:
        return NativeAmortizedMTA(monoid, wsp)
    return AmortizedMTA(monoid, wsp, **options)


def log_engine(monoid, wsp=None, **options):
    """The Log MTA for ``options``: :class:`NativeLogMTA` for an in-memory
    window with the default level queues when the compiled core is in use,
    else :class:`~mta.log_mta.LogMTA`."""
    if _native is not None and not options:
        return NativeLogMTA(monoid, wsp)
    return LogMTA(monoid, wsp, **options)


#: ``window_moments(x, start, end, mean_out, m2_out) -> bool`` in C
#: (``mta/_native_moments.h``): the ``(count, mean, M2)`` of sliding windows
#: of a float64 buffer, as :data:`mta.aggregators.MOMENTS` combines them,
#: for the columnar engine (:func:`spark_ops.kernels.window_moments`); None
#: without the compiled core or in an older build.
window_moments = getattr(_native, "window_moments", None)

#: ``window_extreme(x, start, end, out, is_max) -> bool`` in C
#: (``mta/_native_extreme.h``): the max or min of sliding windows of a
#: float64 or int64 buffer, for the columnar engine
#: (:func:`spark_ops.kernels.reduce_sliding`); None without the compiled
#: core or in an older build.
window_extreme = getattr(_native, "window_extreme", None)

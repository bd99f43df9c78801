"""The compiled Amortized MTA core, when it was built, and its selection.

``mta/_native.c`` is the Amortized MTA (:mod:`mta.amortized_mta`) over
in-memory level queues, written against the CPython API and compiled at
install when a C compiler is present.  It is optional: without it (or with
the environment variable ``MTA_PURE_PYTHON=1``) :data:`AVAILABLE` is False
and :class:`NativeAmortizedMTA` refuses to build, naming why; the
pure-Python modules are the reference and run everywhere.

Values stay Python objects and a user monoid's ``combine`` stays a Python
callable, called from C.  The ready monoids get their combine done in C,
with the same operations their Python callables make:

* ``operator.add`` (sum, count, the count dimension of policies);
* builtin ``max`` (the policies' max dimension);
* ``mta.aggregators.MIN`` and ``MAX`` (``_select`` with ``<`` or ``>``);
* ``mta.aggregators.MOMENTS`` (variance, standard deviation: the same
  arithmetic on the (count, mean, M2) triples, in the same order).

The engine covers what an in-memory :class:`~mta.amortized_mta.AmortizedMTA`
does (insert, evict, bulk_evict, slide, enforce, query, push);
:func:`amortized_engine` picks it for in-memory windows and the pure-Python
engine for a window in a store (``store=``).
"""

from __future__ import annotations

import functools
import operator
import os

from . import aggregators
from .amortized_mta import AmortizedMTA
from .engine import Engine, check_count, check_evictions
from .errors import EmptyWindowError, EngineFailedError
from .level_queue import MemoryLevelQueue

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


def _raise_failed(failure: BaseException, operation: str):
    raise EngineFailedError(
        f"NativeAmortizedMTA is unusable: {failure!r} was raised during {operation}(), so its state may be "
        "inconsistent; rebuild the window or resume it from its last checkpoint"
    ) from failure


class NativeAmortizedMTA(Engine):
    """The Amortized MTA (section 4.2) with its core compiled: amortized O(1)
    insert and eviction, O(log n) worst case and bulk eviction, as
    :class:`~mta.amortized_mta.AmortizedMTA`.

    ``insert``, ``evict``, ``enforce``, ``query`` and ``push`` are the
    core's own methods (no Python frame per call); the core keeps the
    failure guard itself.  ``level_queue`` is accepted for a
    :class:`~mta.level_queue.MemoryLevelQueue` subclass, whose
    ``COMPACT_AFTER`` the core follows.
    """

    def __init__(self, monoid, wsp=None, *, level_queue=MemoryLevelQueue, **options) -> None:
        super().__init__(monoid, wsp)
        if _native is None:
            raise RuntimeError(f"NativeAmortizedMTA needs the compiled core: {WHY_NOT}; use AmortizedMTA")
        if options:
            raise TypeError(f"NativeAmortizedMTA keeps its levels in memory: {', '.join(sorted(options))} "
                            "need the pure-Python AmortizedMTA")
        if not (isinstance(level_queue, type) and issubclass(level_queue, MemoryLevelQueue)):
            raise TypeError("NativeAmortizedMTA: level_queue must be a MemoryLevelQueue subclass")
        self._core = core = _native.AmortizedCore(
            monoid.combine, monoid.identity, combine_kind(monoid.combine), wsp, _raise_failed,
            EmptyWindowError, level_queue.COMPACT_AFTER)
        # Instance attributes: callers reach the C methods directly.
        self.insert = self._raw_insert = core.insert
        self.evict = self._raw_evict = core.evict
        self.enforce = self._raw_enforce = core.enforce
        self.query = self._raw_query = core.query
        self.push = self._raw_push = core.push

    def _check_usable(self) -> None:
        failure = self._core.failure
        if failure is not None:
            _raise_failed(failure, "an earlier operation")

    def checkpoint(self) -> int:
        """As an in-memory :class:`~mta.amortized_mta.AmortizedMTA`: refused."""
        raise TypeError("NativeAmortizedMTA.checkpoint() needs an engine built with store= "
                        "(a stored window runs on the pure-Python AmortizedMTA)")

    def close(self, *, delete: bool = False) -> None:
        """Nothing to wait for: the window is in memory and stays as it is."""

    @property
    def store_stats(self):
        """None: the window is in memory."""
        return None

    def bulk_evict(self, count: int) -> None:
        """Remove the ``count`` oldest elements: singly up to ``log2 n`` of
        them, else by position, O(log n)."""
        self._check_usable()
        self._core.bulk_evict_checked(check_count(self, count))

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


def amortized_engine(monoid, wsp=None, **options):
    """The Amortized MTA for ``options``: :class:`NativeAmortizedMTA` for an
    in-memory window with the default level queues when the compiled core is
    in use, else :class:`~mta.amortized_mta.AmortizedMTA` (a store, another
    ``level_queue``, or no core).  The default engine of
    :class:`mta.window.Window`."""
    if _native is not None and not options:
        return NativeAmortizedMTA(monoid, wsp)
    return AmortizedMTA(monoid, wsp, **options)

"""The compiled execution of a shared plan, where it applies.

``mta/_native_multi.h`` runs :class:`~.shared.SharedWindows`' push in C for
the plans whose every query is a ``rows=`` query with a slide and no lag,
whose trees slice their own input (no TriWeave shared slicer) with an edge
table (:class:`~.slicing.EdgeSet`), share one ``lift``, and aggregate with a
ready monoid whose combine the compiled core does itself
(:func:`mta.native.combine_kind`), with the naive final aggregation, R-Int
(inverse ``a - b`` or the moments' own), FlatFIT or SlickDeque (Non-Inv).
It mirrors :mod:`.tree`, the final techniques' modules and
:mod:`.schedule` rule for rule; they stay the reference and run every other
plan, a user monoid (a :class:`~mta.monoid.CountingMonoid` included, so
counted calls are the pure-Python path's), and everything when the core is
not built or ``MTA_PURE_PYTHON=1`` is set.

:func:`core_for` says why a plan does not qualify, or builds the core;
:class:`CompiledTree` stands in for a :class:`~.tree.Tree` so that
``flush`` and ``query`` run the pure-Python schedule over the compiled
trees' lookups.
"""

from __future__ import annotations

import operator

from .. import aggregators, native
from ..markers import EMPTY
from ..monoid import identity_function
from .query import Result

#: False runs every plan on the pure-Python path (the tests run the
#: multi-query suite both ways), as ``MTA_PURE_PYTHON=1`` does for all the
#: compiled cores.
USE = True

#: Final techniques the compiled core runs, with its codes for them.
FINALS = {"naive": 0, "rint": 1, "flatfit": 2, "slickdeque-noninv": 3}

#: Window ends the compiled core holds are capped here (a push never
#: reaches them, see :meth:`~.shared.SharedWindows.flush`), and its slides
#: and rows stay below it: an end plus a slide, or minus a window's rows,
#: then fits the core's signed 64-bit integers.
NATIVE_LIMIT = 1 << 62

#: The inverses R-Int may use there: ``a - b`` is done in C, the moments'
#: inverse is called.
_INVERSES = (operator.sub, aggregators._moments_inverse)


def _core_type():
    """The compiled type, or None (not built, disabled, or an older build)."""
    core = native._native
    return None if core is None or not USE else getattr(core, "SharedRowsCore", None)


def why_not(trees, queries, slicers) -> str:
    """Why the compiled core does not run this plan ("" when it does).
    O(queries)."""
    if _core_type() is None:
        if not USE:
            return "mta.multi.compiled.USE is False"
        return native.WHY_NOT or "mta._native has no SharedRowsCore (an older build)"
    if slicers:
        return "a TriWeave shared slicer feeds the trees"
    for q in queries:
        if not q.by_rows or q.slide is None or q.lag:
            return f"query {q.name!r} is not a rows= query with a slide and no lag"
        if max(q.exact_width, q.exact_slide) >= NATIVE_LIMIT:
            return f"query {q.name!r}: rows or slide of 2**62 or more is beyond the compiled core's 64-bit integers"
    lifts = set()
    for t in trees:
        if not hasattr(t, "final"):
            return "a query runs on its own engine (plan='separate')"
        if t.final.NAME not in FINALS:
            return f"final technique {t.final.NAME} is not compiled"
        if t.holistic or t.edges.every or t.edges._table is None:
            return "a tree has no edge table"
        if not native.combine_kind(t.monoid.combine):
            return f"monoid {t.monoid.name!r} has no native combine"
        if t.final.NAME == "rint" and t.monoid.inverse not in _INVERSES:
            return f"monoid {t.monoid.name!r} has no compiled inverse"
        lifts.add(id(t.lift))
    if len(lifts) > 1:
        return "the trees lift their values differently"
    return ""


class _CompiledFinal:
    """What a :class:`CompiledTree` shows of its final technique: its name
    and the partials it holds."""

    __slots__ = ("NAME", "_core", "_i")

    def __init__(self, name: str, core, i: int) -> None:
        self.NAME = name
        self._core = core
        self._i = i

    def __len__(self) -> int:
        """Partials held.  O(1)."""
        return self._core.held(self._i)


class CompiledTree:
    """A :class:`~.tree.Tree` whose partials and final technique live in
    the compiled core (tree ``i``): the same lookups, one C call each."""

    def __init__(self, tree, i: int) -> None:
        """Wraps ``tree`` (its queries, edges and specs); O(1)."""
        self.tree = tree
        self.i = i
        self.group = tree.group
        self.queries = tree.queries
        self.by_rows = tree.by_rows
        self.monoid = tree.monoid
        self.lift = tree.lift
        self.edges = tree.edges
        self.spec = tree.spec
        self.holistic = False
        self.slicer = None
        self.core = None
        self.final = None

    def attach(self, core) -> None:
        """The built core; O(1)."""
        self.core = core
        self.final = _CompiledFinal(self.tree.final.NAME, core, self.i)

    def suffix(self, a, spec: int):
        """:meth:`Tree.suffix <mta.multi.tree.Tree.suffix>`: one binary
        search, the final technique's lookup, one combine with the open
        partial."""
        return self.core.suffix(self.i, a)

    def window(self, q, a, b, left_closed: bool):
        """:meth:`Tree.window <mta.multi.tree.Tree.window>` (every window
        here is periodic: left-closed): two binary searches, the lookup,
        one combine with the open partial."""
        if not left_closed:
            raise ValueError("a compiled tree answers periodic (left-closed) windows only")
        return self.core.window(self.i, a, b)

    def first_key(self, a):
        """:meth:`Tree.first_key <mta.multi.tree.Tree.first_key>`:
        O(log partials), no monoid call."""
        return self.core.first_key(self.i, a)

    def describe(self) -> str:
        """``partial + final``, O(1)."""
        return self.tree.describe()


def core_for(executors, schedule, evict_every: int):
    """The compiled core over ``executors`` (:class:`CompiledTree`) and the
    specs of ``schedule``; attaches it to each tree.  O(queries + edge
    tables)."""
    trees = []
    for ex in executors:
        t, monoid = ex.tree, ex.monoid
        inverse = monoid.inverse if t.final.NAME == "rint" else None
        trees.append((native.combine_kind(monoid.combine), monoid.combine, FINALS[t.final.NAME], inverse,
                      inverse is operator.sub, list(t.edges._table), int(t.edges._length)))
    index = {id(ex): i for i, ex in enumerate(executors)}
    specs = [(index[id(s.ex)], int(s.slide), int(s.width), s.lower, [(r, n) for r, n in s.members])
             for s in schedule.specs]
    core = _core_type()(trees, specs, Result, EMPTY, evict_every)
    for ex in executors:
        ex.attach(core)
    return core


def plain_lift(lift):
    """None when ``lift`` is the identity (the value is pushed as it is)."""
    return None if lift is identity_function else lift

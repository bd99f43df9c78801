"""Execution plans: which queries share which tree, and how each tree
aggregates (mqo-shein-chrysanthis-tkde section 3.1: an execution plan is a
set of disjoint execution trees; section 2: each tree has a partial and a
final aggregation technique).

* :class:`Group` -- one tree: its queries, partial technique (``"panes"``,
  ``"pairs"``, ``"cutty"``, or ``"none"`` for a query on its own engine) and
  final technique (a key of :data:`FINALS`, or ``"mta"``: the separate
  baseline's Amortized MTA), the estimated monoid calls per element and
  the estimated aggregates it holds (:mod:`.memory`);
* :class:`Plan` -- the groups and the total estimates; ``str(plan)`` is the
  readable plan.

Queries can share a tree only when they aggregate the same lifted values
with the same monoid (:func:`sharing_key`).
"""

from __future__ import annotations

import numbers
from typing import Sequence

from .cost import INVERTIBLE_FINALS
from .query import Query

#: Partial aggregation techniques (one module each in :mod:`mta.multi`).
PARTIALS = ("panes", "pairs", "cutty")

#: Final aggregation techniques: name -> (module, class).
FINALS = {
    "naive": ("naive", "Naive"),
    "bint": ("bint", "BInt"),
    "lint": ("lint", "LInt"),
    "rint": ("rint", "RInt"),
    "slickdeque-inv": ("slickdeque_inv", "SlickDequeInv"),
    "slickdeque-noninv": ("slickdeque_noninv", "SlickDequeNonInv"),
    "flatfat": ("flatfat", "FlatFAT"),
    "flatfit": ("flatfit", "FlatFIT"),
}

#: Accepted spellings of the final techniques.
FINAL_ALIASES = {
    "naive": "naive", "panes": "naive",
    "bint": "bint", "b-int": "bint", "baseintervals": "bint",
    "lint": "lint", "l-int": "lint",
    "rint": "rint", "r-int": "rint", "panes-inv": "rint",
    "slickdeque-inv": "slickdeque-inv", "slickdequeinv": "slickdeque-inv", "inv": "slickdeque-inv",
    "slickdeque-noninv": "slickdeque-noninv", "slickdequenoninv": "slickdeque-noninv",
    "noninv": "slickdeque-noninv", "slickdeque-non-inv": "slickdeque-noninv",
    "slickdeque": "slickdeque",  # resolved per monoid: inv if a planner may pick it, else noninv
    "flatfat": "flatfat", "flatfit": "flatfit",
}


def final_class(name: str) -> type:
    """The final aggregator class of a technique name (imported lazily)."""
    import importlib

    module, cls = FINALS[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


def sharing_key(query) -> tuple:
    """Queries with equal keys aggregate the same values over the same keys:
    both time or both rows, the same monoid and the same lift (by identity:
    functions compare by identity anyway)."""
    agg = query.aggregator
    return (query.by_rows, id(agg.monoid), id(agg.lift), holistic(query))


def holistic(query) -> bool:
    """True for an exact quantile (:mod:`.quantiles`): its tree hands the
    base-interval cover to ``lower`` unmerged, so it runs on B-Int only."""
    return getattr(query.aggregator, "holistic", False)


def applicable_finals(queries) -> list:
    """Final techniques that can serve every query of a group: what a plan
    naming its final may run (:func:`planned_finals`: what a planner picks)."""
    if holistic(queries[0]):
        return ["bint"]  # B-INT-QNT
    monoid = queries[0].aggregator.monoid
    suffix = all(q.lag == 0 for q in queries)
    names = ["naive", "bint", "lint", "flatfat"]
    if monoid.inverse is not None:
        names += ["rint", "slickdeque-inv"]
    if suffix:
        names.append("flatfit")
        if monoid.selective:
            names.append("slickdeque-noninv")
    return names


def planned_finals(queries) -> list:
    """The final techniques a planner may pick for a group on its own
    ('auto', 'weaveshare', 'triweave', a partial technique named without its
    final, the 'slickdeque' alias): the applicable ones, less those that
    subtract what leaves the window (:data:`mta.multi.cost.INVERTIBLE_FINALS`)
    unless the monoid's inverse is exact (``Monoid.exact_inverse``).  An
    approximate one, a sum of floats, would give other Results than the
    other plans: every later window NaN after one inf, windows lost to a
    large value that has left them.  Named, they run as asked."""
    names = applicable_finals(queries)
    if queries[0].aggregator.monoid.exact_inverse:
        return names
    return [f for f in names if f not in INVERTIBLE_FINALS]


class Group:
    """One execution tree: ``queries`` (a tuple), ``partial`` and ``final``
    technique names, ``estimate`` (monoid calls per element, or None),
    ``slicer``: None when the tree slices its own input, or the
    :class:`~mta.multi.shared_slicer.Slicer` (TriWeave's shared first level)
    feeding it fragments (groups holding the same Slicer object share it),
    and ``held``: the aggregates it holds at its peak, partials of a tree or
    elements of a separate query (:mod:`.memory`), or None."""

    __slots__ = ("queries", "partial", "final", "estimate", "slicer", "held")

    def __init__(self, queries: Sequence, partial: str, final: str, estimate: float | None = None,
                 slicer=None, held: int | None = None) -> None:
        """O(queries)."""
        self.queries = tuple(queries)
        self.partial = partial
        self.final = final
        self.estimate = estimate
        self.slicer = slicer
        self.held = held

    def __eq__(self, other) -> bool:
        """Same queries, techniques and slicer; O(queries)."""
        return (isinstance(other, Group) and self.queries == other.queries and self.partial == other.partial
                and self.final == other.final and self.slicer is other.slicer)

    def __hash__(self) -> int:
        """O(queries)."""
        return hash((self.queries, self.partial, self.final))

    def __repr__(self) -> str:
        """O(queries)."""
        names = ", ".join(q.name for q in self.queries)
        shared = "" if self.slicer is None else f", slicer={self.slicer!r}"
        held = "" if self.held is None else f", held={self.held!r}"
        return (f"Group([{names}], partial={self.partial!r}, final={self.final!r}, "
                f"estimate={self.estimate!r}{shared}{held})")


def check_given(groups) -> None:
    """Given groups (a :class:`Plan`'s, or ``plan=``'s) must be
    :class:`Group` objects whose estimate is None or a real number and
    whose held is None or an int >= 0, before anything reads them: a
    TypeError or ValueError naming the group otherwise.  Whether they
    cover the queries and can run is :func:`mta.multi.resolve.check_groups`.
    O(groups)."""
    for g in groups:
        if not isinstance(g, Group):
            raise TypeError(f"a plan's groups must be mta.multi.Group objects, got {type(g).__name__} {g!r}")
        if not g.queries:
            raise ValueError(f"a plan's group needs at least one query: {g!r}")
        bad = [q for q in g.queries if not isinstance(q, Query)]
        if bad:
            # not {g!r}: a group's repr reads its queries' names
            raise TypeError(f"a group's queries must be mta.Query objects, got {type(bad[0]).__name__} {bad[0]!r}")
        for what in ("partial", "final"):
            if not isinstance(getattr(g, what), str):
                raise TypeError(f"a group's {what} technique must be a str, got {getattr(g, what)!r} in {g!r}")
        if g.estimate is not None and (isinstance(g.estimate, bool) or not isinstance(g.estimate, numbers.Real)):
            raise TypeError(f"a group's estimate must be a real number or None, got {g.estimate!r} in {g!r}")
        if g.held is not None and (isinstance(g.held, bool) or not isinstance(g.held, int) or g.held < 0):
            raise TypeError(f"a group's held must be an int >= 0 or None, got {g.held!r} in {g!r}")


class Plan:
    """An execution plan: ``groups``, ``slicers`` (the shared first levels
    its groups name, in order), ``estimate``, the total estimated monoid
    calls per element, trees and shared slicers, and ``held``, the
    aggregates its groups hold at their peaks (each None if unknown);
    ``name`` is how it was asked for."""

    def __init__(self, groups: Sequence[Group], name: str = "", estimate: float | None = None) -> None:
        """O(groups); malformed groups raise TypeError or ValueError
        (:func:`check_given`)."""
        self.groups = list(groups)
        check_given(self.groups)
        self.name = name
        self.slicers: list = []
        for g in self.groups:
            if g.slicer is not None and all(g.slicer is not s for s in self.slicers):
                self.slicers.append(g.slicer)
        if (estimate is None and self.groups and all(g.estimate is not None for g in self.groups)
                and all(s.estimate is not None for s in self.slicers)):
            estimate = sum(g.estimate for g in self.groups) + sum(s.estimate for s in self.slicers)
        self.estimate = estimate
        known = self.groups and all(g.held is not None for g in self.groups)
        self.held = sum(g.held for g in self.groups) if known else None

    def __str__(self) -> str:
        """The readable plan: O(queries)."""
        est = "unknown" if self.estimate is None else f"~{self.estimate:.3g}"
        held = "" if self.held is None else f", ~{self.held:,} aggregates held"
        lines = [f"plan {self.name or '?'}: {len(self.groups)} tree(s), {est} monoid calls per element{held}"]
        for j, s in enumerate(self.slicers):
            fed = ", ".join(str(i) for i, g in enumerate(self.groups) if g.slicer is s)
            sest = "" if s.estimate is None else f", ~{s.estimate:.3g} calls/element"
            lines.append(f"  shared slicer {j}: {s.partial} over the edges of trees {fed}{sest}")
        for i, g in enumerate(self.groups):
            if g.final == "mta":
                how = "own Amortized MTA (no sharing)"
            elif g.slicer is not None:
                j = next(j for j, s in enumerate(self.slicers) if s is g.slicer)
                how = f"partial {g.partial} from shared slicer {j}, final {g.final}"
            else:
                how = f"partial {g.partial}, final {g.final}"
            gest = "" if g.estimate is None else f", ~{g.estimate:.3g} calls/element"
            if g.held is not None:
                gest += f", ~{g.held:,} {'elements' if g.final == 'mta' else 'partials'} held"
            lines.append(f"  tree {i}: {how}{gest}")
            for q in g.queries:
                lines.append(f"    {q.describe()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Plan({self.groups!r}, name={self.name!r}, estimate={self.estimate!r})"

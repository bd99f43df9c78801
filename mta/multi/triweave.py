"""TriWeave: greedy weaving behind one shared slicer (three-level processing).

Guirguis et al. (ICDE 2012) as restated in mqo-shein-chrysanthis-tkde
section 3.1.1: the same greedy merging as WeaveShare
(:mod:`mta.multi.weaveshare`), but every tree is fed by one partial
aggregator over the composite slide of *all* queries.  The first level
slices the stream once (at most one call per element instead of one per
tree); the second folds the shared fragments into each tree's own partials
(``E_shared - E_tree`` calls per time unit); the third is the tree's final
aggregation.  The executor runs it so: :mod:`mta.multi.shared_slicer` is the
first level, fed once per element, whose fragments every tree of the plan
folds (:mod:`mta.multi.planner` gives the groups one
:class:`~mta.multi.shared_slicer.Slicer`).  Costs come from
:func:`mta.multi.cost.tree_cost` with ``shared_edges``.  The shared slicer uses one partial technique, so the plan
is woven once per allowed technique and the cheapest plan is kept.
"""

from __future__ import annotations

from typing import Sequence

from . import cost as _cost
from .weaveshare import Tree, edge_classes, price, weave

__all__ = ["triweave", "shared_edges"]


def shared_edges(queries: Sequence[tuple[int, int]], partial: str) -> _cost.Edges:
    """The first level's edges: the union of every query's.  O(edge count)."""
    return _cost.edges(queries, partial)


def triweave(queries: Sequence[tuple[int, int]], finals: Sequence[str] = _cost.FINALS,
             partials: Sequence[str] = ("panes", "pairs", "cutty"),
             rate: float = 1.0, held_price: float = 0.0, memo: dict | None = None) -> tuple[str, list[Tree], float]:
    """TriWeave's plan: ``(shared partial technique, trees, calls per
    element)``; the total counts the shared slicer once.  ``held_price``
    (calls per held partial, :mod:`mta.multi.memory`) weighs the trees'
    partials in the weaving and in the choice of the slicer's technique;
    the returned total is calls only; ``memo`` as in
    :func:`~mta.multi.weaveshare.price`.  O(|partials| * C^2) tree pricings
    for ``C`` edge classes."""
    queries = [tuple(map(int, q)) for q in queries]
    if not queries:
        return partials[0], [], 0.0
    best = None
    for partial in partials:
        shared = shared_edges(queries, partial)

        def pricer(members: tuple[int, ...], parts: Sequence[tuple[int, ...]] = (), partial=partial,
                   shared=shared) -> Tree:
            return price(queries, members, (partial,), finals, rate, shared, held_price, memo, parts)

        trees = weave(queries, edge_classes(queries, (partial,)), pricer)
        total = max(1.0 - shared.density / rate, 0.0) + sum(t.estimate for t in trees)
        score = total + held_price * sum(t.held for t in trees)
        if best is None or score < best[0]:
            best = (score, partial, trees, total)
    assert best is not None
    return best[1:]

"""WeaveShare: selective sharing of execution trees by greedy weaving.

Guirguis et al. (CIKM 2011) as restated in mqo-shein-chrysanthis-tkde
section 3.1.1 and updated in section 4 with the new final aggregation
techniques: start from the no-share plan (one tree per query), repeatedly
merge the pair of trees whose merge lowers the plan cost the most, and stop
when no merge lowers it.  Every tree slices its own input (partial
aggregation ``lambda`` per tree in equation (1)); its cost, and the
partial and final technique it runs, come from :mod:`mta.multi.cost`: each
candidate tree is priced with every allowed technique and keeps the
cheapest.

One addition to the paper's algorithm keeps it fast for thousands of
queries: queries that mark exactly the same edges start in one tree.  Such a
merge never adds a partial and never changes a window's partial count, so
it only removes work (a slicer, and the update of one structure instead of
two) for every final technique except L-Int, whose update grows with the
spread of window lengths; the greedy loop then runs over edge classes
rather than queries (a workload with slides drawn from the factors of 1,000
has at most 16 classes).

Memory (:mod:`mta.multi.memory`): every candidate tree also carries the
partials it holds; with ``held_price > 0`` a tree is priced, and merges
are weighed, at its calls plus ``held_price`` per held partial (the lean
candidates of ``plan="auto"``).  The default 0 is the paper's algorithm.
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterable, Sequence

from . import cost as _cost
from .memory import tree_held

__all__ = ["Tree", "price", "weave", "weaveshare", "edge_classes"]


class Tree:
    """A candidate execution tree: query indices, its techniques, its
    estimated monoid calls per element, the partials it holds
    (:func:`mta.multi.memory.tree_held`) and ``score``, what the weaving
    minimises (the calls, plus any price of the held partials)."""

    __slots__ = ("members", "partial", "final", "estimate", "held", "score")

    def __init__(self, members: tuple[int, ...], partial: str, final: str, estimate: float,
                 held: int | None = None, score: float | None = None) -> None:
        self.members, self.partial, self.final, self.estimate = members, partial, final, estimate
        self.held = held
        self.score = estimate if score is None else score

    def __repr__(self) -> str:
        return (f"Tree({len(self.members)} queries, {self.partial}/{self.final}, {self.estimate:.3f}, "
                f"held {self.held})")


def price(queries: Sequence[tuple[int, int]], members: tuple[int, ...], partials: Sequence[str],
          finals: Sequence[str], rate: float = 1.0, shared: _cost.Edges | None = None,
          held_price: float = 0.0, memo: dict | None = None, parts: Sequence[tuple[int, ...]] = ()) -> Tree:
    """The ``(partial, final)`` for the tree of ``members`` with the lowest
    calls per element plus ``held_price`` per held partial.  ``memo`` (a
    dict the caller keeps for one set of queries, finals and rate) holds
    each ``(members, partial)``'s held partials and calls but the slicing
    term (:func:`mta.multi.cost.tree_parts`), so weavings that differ only
    in ``held_price`` or in the slicing (TriWeave's shared slicer against
    WeaveShare's own) price a tree once; and the queries as numbers and
    each tree's progressions.
    ``parts``: the members (sorted, as :attr:`Tree.members`) of trees
    priced before whose union ``members`` is (a merge): the union's edges
    are counted from theirs (:func:`mta.multi.edge_count.edges_cached`).
    O(|partials| * |finals| * cost.tree_cost), O(|partials| * |finals|) when memoized."""
    if memo is None:
        memo = {}
    numbers = memo.get("numbers")
    if numbers is None:
        numbers = memo["numbers"] = [_cost.query_numbers(q) for q in queries]
    qs = [numbers[i] for i in members]  # in the order given: the costs sum over them in it
    members = tuple(sorted(members))
    progs_memo: dict = memo.setdefault("progressions", {})
    best = None
    seen = set()
    for partial in partials:
        # techniques marking the same edges cost the same (every range a
        # multiple of its slide): price them once
        part_keys = [_progressions_of(queries, m, partial, progs_memo) for m in parts]
        key = _progressions_of(queries, members, partial, progs_memo, part_keys)
        if key in seen:
            continue
        seen.add(key)
        priced = memo.get((members, partial))
        if priced is None:
            _cost.edges_cached(key, part_keys)  # counted from the parts' edges, for the two calls below
            priced = (tree_held(qs, partial, rate, progs=key), _cost.tree_parts(qs, partial, finals, rate, progs=key))
            memo[(members, partial)] = priced
        held, terms = priced
        for final, c in _cost.with_slicing(terms, rate, shared).items():
            score = c + held_price * held
            if best is None or score < best[0]:
                best = (score, partial, final, c, held)
    assert best is not None, "price needs at least one partial and one final technique"
    return Tree(members, best[1], best[2], best[3], best[4], best[0])


def _progressions_of(queries, members: tuple[int, ...], partial: str, memo: dict, part_keys=()) -> tuple:
    """The sorted progressions the tree of ``members`` (sorted) marks, the
    union of ``part_keys`` (its parts') when given; ``memo`` keeps the
    :data:`PROGRESSIONS_KEPT` used last (a weaving's current trees: every
    merge it prices has one as a part).  O(tree size) when not kept."""
    key = (members, partial)
    hit = memo.pop(key, None)
    if hit is None:
        if part_keys:  # sorted runs: merged, not sorted anew
            hit = tuple(dict.fromkeys(sorted([p for k in part_keys for p in k])))
        else:
            hit = tuple(sorted({p for i in members for p in _cost.progressions(queries[i], partial)}))
        if len(memo) >= PROGRESSIONS_KEPT:
            del memo[next(iter(memo))]
    memo[key] = hit
    return hit


#: Most trees' progressions :func:`price` keeps per set of queries.
PROGRESSIONS_KEPT = 1 << 12


def edge_classes(queries: Sequence[tuple[int, int]], partials: Sequence[str]) -> list[tuple[int, ...]]:
    """Query indices grouped by the edges they mark under every technique in
    ``partials`` (equal progressions give equal edges).  O(n)."""
    classes: dict[tuple, list[int]] = {}
    for i, q in enumerate(queries):
        key = tuple(_cost.progressions(q, p) for p in partials)
        classes.setdefault(key, []).append(i)
    return [tuple(v) for v in classes.values()]


def weave(queries: Sequence[tuple[int, int]], start: Iterable[tuple[int, ...]],
          pricer: Callable[..., Tree]) -> list[Tree]:
    """The greedy loop: price every pair of trees, merge the pair with the
    largest saving (of :attr:`Tree.score`), re-price only the pairs with the new tree, until no
    merge saves anything.  ``pricer(members, parts)`` prices the tree of
    ``members``, the union of the trees of ``parts`` (empty for a starting
    tree).  O(T^2) pricings for ``T`` starting trees, then O(T) per merge."""
    trees: dict[int, Tree] = {}
    for members in start:
        trees[len(trees)] = pricer(tuple(members), ())
    next_id = len(trees)
    gains: list[tuple[float, int, int, Tree]] = []  # a heap of (-saving, a, b, merged)

    def consider(a: int, b: int) -> None:
        merged = pricer(trees[a].members + trees[b].members, (trees[a].members, trees[b].members))
        saving = trees[a].score + trees[b].score - merged.score
        if saving > 1e-12:
            heapq.heappush(gains, (-saving, a, b, merged))

    ids = sorted(trees)
    for x in range(len(ids)):
        for y in range(x + 1, len(ids)):
            consider(ids[x], ids[y])
    while gains:
        # the largest saving, then the lowest ids; pairs with a tree merged away are dropped as they surface
        _, a, b, merged = heapq.heappop(gains)
        if a not in trees or b not in trees:
            continue
        del trees[a], trees[b]
        new = next_id
        next_id += 1
        trees[new] = merged
        for other in sorted(trees):
            if other != new:
                consider(other, new)
    return sorted(trees.values(), key=lambda t: t.members)


def weaveshare(queries: Sequence[tuple[int, int]], finals: Sequence[str] = _cost.FINALS,
               partials: Sequence[str] = ("panes", "pairs", "cutty"), rate: float = 1.0,
               held_price: float = 0.0, memo: dict | None = None) -> list[Tree]:
    """WeaveShare's plan for ``queries`` (``(range, slide)`` pairs): trees that
    each slice their own input; ``held_price`` and ``memo`` as in :func:`price`.
    O(C^2) tree pricings for ``C`` edge classes (at most ``n``)."""
    queries = [tuple(map(int, q)) for q in queries]
    if not queries:
        return []

    def pricer(members: tuple[int, ...], parts: Sequence[tuple[int, ...]] = ()) -> Tree:
        return price(queries, members, partials, finals, rate, held_price=held_price, memo=memo, parts=parts)

    return weave(queries, edge_classes(queries, partials), pricer)

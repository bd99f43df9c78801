"""Memory in planning: the partials a plan holds, and the one rule that
trades monoid calls for them.

The cost model of mqo-shein-chrysanthis-tkde (equation (1), and
:mod:`mta.multi.cost`) counts operations only.  Its plans share as much as
the calls allow, so a query with a short range and a small slide lands in
the same tree as the longest window, and that tree cuts a partial at every
edge of the small slide across the whole longest window (section 2.2: a
tree keeps the partials of its longest window).  On the section 5.1
workload (slides from the factors of 1,000, overlap 1..10) every shared
plan then holds about as many partials as the longest window has elements,
while trees split by reach would hold a few hundred for a few more calls
per element.

What a tree holds is known before it runs:

* :func:`tree_held` -- a tree's partials at their peak, right before its
  longest window (range plus lag) is answered: the edges of the tree's
  queries within that reach, and never more than the elements in it;
* :func:`separate_held` -- a query on its own engine keeps the elements of
  its reach.

The rule (:data:`MEMORY_SLACK`, applied by :func:`lean`): **a plan may cost
up to 10 % more estimated monoid calls per element than the cheapest
candidate to hold fewer partials; among the candidates within that bound,
the one holding the fewest partials is chosen** (ties: the cheaper).  The
bound caps what memory may cost in CPU; it never lets memory choose a plan
dearer than that.  Candidates holding less come from the same greedy
weaving with each held partial priced at :func:`held_price` calls per
element: ``cheapest calls / cheapest held``, so a merge goes ahead only
when the share of the plan's calls it saves exceeds the share of the
plan's partials it adds (a slide-1 query joining the longest window's tree
saves one slicing call of ~20 and multiplies the partials held; queries of
neighbouring slides and reaches still share).

Complexity: ``n`` queries of a tree; an edge set is counted once and
cached (:func:`mta.multi.edge_count.edges_cached`).
"""

from __future__ import annotations

import math
from typing import Sequence

from .edge_count import edges_cached, progressions, query_numbers

__all__ = ["EVICT_EVERY", "MEMORY_SLACK", "tree_held", "separate_held", "held_price", "lean"]

#: Pushes between two evictions (:mod:`mta.multi.shared`): the floor below
#: which no window reads is O(queries) to compute, and forgetting later
#: only holds a few more partials (floors never decrease, so an older one
#: is still safe).  :func:`tree_held` counts those partials.
EVICT_EVERY = 16

#: The most, as a fraction of the cheapest candidate's estimated calls per
#: element, a plan may cost more to hold fewer partials.
MEMORY_SLACK = 0.10


def tree_held(queries: Sequence[tuple[int, ...]], partial: str, rate: float = 1.0, *,
              progs: tuple | None = None) -> int:
    """Partials one tree holds at its peak: the edges of ``queries``
    (``(range, slide[, lag])`` in one unit) under ``partial`` within the
    longest reach ``range + lag``, at most the ``reach * rate`` elements
    there (a partial holds one element at least).  What no window reads
    any more is forgotten every :data:`EVICT_EVERY` pushes, so at the peak
    the tree also holds the partials of the ``EVICT_EVERY - 1`` elements
    since the last eviction: the reach is counted that much longer (what
    decides the estimate of a window of a few elements).  ``progs``: the
    tree's sorted progressions, when the caller has them (the queries are
    then ``(range, slide, lag)`` ints already).
    O(n + edge period), plus the edge count on a cache miss."""
    if progs is None:
        queries = [query_numbers(q) for q in queries]
        progs = tuple(sorted({p for q in queries for p in progressions(q, partial)}))
    e = edges_cached(progs)
    reach = max(r + lag for r, _, lag in queries)
    late = (EVICT_EVERY - 1) / rate  # units the last EVICT_EVERY - 1 pushes span
    return max(1, min(e.in_range(0, reach + math.ceil(late)), round(reach * rate + EVICT_EVERY - 1)))


def separate_held(query: tuple[int, ...], rate: float = 1.0) -> int:
    """Elements a query on its own Amortized MTA keeps: those of its reach
    (``plan="separate"``).  O(1)."""
    r, _, lag = query_numbers(query)
    return max(1, round((r + lag) * rate))


def held_price(cheapest_calls: float, cheapest_held: float) -> float:
    """Calls per element one held partial is worth while weaving the lean
    candidates: the cheapest plan's calls over its held partials.  O(1)."""
    return cheapest_calls / max(cheapest_held, 1.0)


def lean(candidates: Sequence, calls, held):
    """The rule: among ``candidates`` (plans), those whose ``calls(plan)``
    is at most ``1 + MEMORY_SLACK`` times the cheapest's, the one with the
    fewest ``held(plan)`` (then the fewest calls; then the first).
    O(candidates)."""
    if not candidates:
        raise ValueError("lean needs at least one candidate plan")
    costs = [calls(c) for c in candidates]
    bound = min(costs) * (1.0 + MEMORY_SLACK) + 1e-12
    allowed = [i for i, c in enumerate(costs) if c <= bound]
    best = min(allowed, key=lambda i: (held(candidates[i]), costs[i], i))
    return candidates[best]

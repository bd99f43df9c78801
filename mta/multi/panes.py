"""Panes (Li et al. 2005) as partial aggregation, mqo-shein-chrysanthis-tkde
section 2.1, Table 1: the stream is cut into panes of ``gcd(range, slide)``
keys, so every window is a union of ``range / gcd(range, slide)`` panes.

Shared by several queries, the panes of the tree are the union of each
query's pane edges (the composite slide of section 3.1); a lag ``L`` shifts
a query's panes by ``L``.  A per-element query cuts at every distinct key.
"""

from __future__ import annotations

from .slicing import EVERY, EdgeSet, gcd

NAME = "panes"


def edges(queries) -> EdgeSet:
    """The tree's edges: ``-lag (mod gcd(range, slide))`` for each periodic
    query.  O(number of queries)."""
    if any(q.slide is None for q in queries):
        return EVERY
    return EdgeSet((-q.exact_lag, gcd(q.exact_width, q.exact_slide)) for q in queries)


def partials_per_window(range_, slide) -> int:
    """Table 1: ``range / gcd(range, slide)`` panes per window."""
    return int(range_ / gcd(range_, slide))

"""Paired windows, Pairs (Krishnamurthy et al. 2006) as partial aggregation,
mqo-shein-chrysanthis-tkde section 2.1, Table 1: each slide is cut into two
fragments, ``f2 = range % slide`` and ``f1 = slide - f2``, i.e. at every
window end ``k * slide`` and every window start ``k * slide - range``, so a
window is ``2 * floor(range / slide) + 1`` partials (``range / slide`` when
the slide divides the range).

Shared, the edges are the union of every query's fragment edges; a lag
shifts them.  A per-element query cuts at every distinct key.
"""

from __future__ import annotations

from .slicing import EdgeSet, window_edges

NAME = "pairs"


def edges(queries) -> EdgeSet:
    """Window starts ``-lag - range`` and ends ``-lag`` modulo each slide.
    O(number of queries)."""
    return window_edges(queries, ends=lambda q: True)


def fragments(range_, slide) -> tuple:
    """``(f1, f2)``: the two fragment lengths of one slide (``f2 = 0`` when
    the slide divides the range)."""
    f2 = range_ % slide
    return slide - f2, f2


def partials_per_window(range_, slide) -> int:
    """Table 1: ``2 * floor(range / slide) + 1``, or ``range / slide``."""
    if range_ % slide == 0:
        return int(range_ // slide)
    return 2 * int(range_ // slide) + 1

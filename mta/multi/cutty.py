"""Cutty slicing (Carbone et al. 2016) as partial aggregation,
mqo-shein-chrysanthis-tkde section 2.1, Fig. 4, Table 1: a partial starts
only where a window starts (``k * slide - range``); a window's end needs no
cut, because the final aggregation reads the open partial's current value
when the window is reported.  A window is ``ceil(range / slide)`` partials.

That reading works because a window is reported before any element past
its end is added: it ends at the newest element.  A historical window
(lag > 0) ends in the past, so its end ``k * slide - lag`` is cut as well
(an extra edge per slide for that query, as in Pairs).  A per-element query
cuts at every distinct key.
"""

from __future__ import annotations

import math

from .slicing import EdgeSet, window_edges

NAME = "cutty"


def edges(queries) -> EdgeSet:
    """Window starts of every query, and window ends of lagged queries.
    O(number of queries)."""
    return window_edges(queries, ends=lambda q: q.exact_lag != 0)


def partials_per_window(range_, slide) -> int:
    """Table 1: ``ceil(range / slide)``."""
    return math.ceil(range_ / slide)

"""Multi-query sliding windows: many aggregate continuous queries over one
stream, sharing partial aggregates (mqo-shein-chrysanthis-tkde,
slickdeque-shein-edbt2018, arasu-widom-vldb2004).

``SharedWindows(queries, time=..., plan=...)`` runs :class:`Query` objects
and returns :class:`Result` tuples; ``plan`` picks the partial aggregation
(:mod:`.panes`, :mod:`.pairs`, :mod:`.cutty`) and final aggregation
(:mod:`.naive`, :mod:`.bint`, :mod:`.rint`, :mod:`.slickdeque_inv`,
:mod:`.slickdeque_noninv`, :mod:`.flatfat`, :mod:`.flatfit`) of each shared
tree, or runs every query separately (:mod:`.separate`).  :func:`median` and
:func:`quantile` are exact quantiles over B-Int's base intervals
(B-INT-QNT, :mod:`.quantiles`).
"""

from .plan import Group, Plan
from .quantiles import median, quantile
from .query import OutOfOrderError, Query, Result
from .shared import ArgumentRefused, SharedWindows, UnknownQuery

__all__ = ["ArgumentRefused", "Group", "OutOfOrderError", "Plan", "Query", "Result", "SharedWindows",
           "UnknownQuery", "median", "quantile"]

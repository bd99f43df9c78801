"""The paper's Omega: final-aggregation operations per edge of a tree.

Shein and Chrysanthis (TKDE 2022; mqo-shein-chrysanthis-tkde), section 4.1,
equations (3)-(7) and Table 3, for Panes, FlatFAT, FlatFIT, SlickDeque (Inv)
and SlickDeque (Non-Inv); B-Int, R-Int and L-Int's are derived (Arasu and
Widom, VLDB 2004).  :func:`mta.multi.cost.omega` picks one by final
technique and :func:`mta.multi.cost.paper_plan_cost` sums equation (1) with
them; the planners price plans in monoid calls instead
(:func:`mta.multi.cost.tree_cost`).  Every function states its complexity;
``n`` is the number of queries.
"""

from __future__ import annotations

import math
from typing import Sequence

from .dyadic import mean_dyadic_pieces

__all__ = ["omega_panes", "omega_flatfat", "omega_flatfit", "omega_slickdeque_inv", "omega_slickdeque_noninv",
           "omega_bint", "omega_rint", "omega_lint"]


def omega_panes(queries: Sequence[tuple[int, int]]) -> float:
    """Equation (3): ``sum r_i / s_i``.  O(n)."""
    return float(sum(q[0] / q[1] for q in queries))


def omega_flatfat(p: Sequence[float]) -> float:
    """Equation (4): ``sum floor(log2(P_i - 1)) + (P_i - 1) / 2^floor(log2 P_i)``
    over the queries' partials per window ``P_i`` (a query of one or two
    partials adds its ``P_i - 1`` combines: the logarithm is undefined or 0
    there).  O(n)."""
    total = 0.0
    for pi in p:
        if pi <= 2:
            total += max(pi - 1, 0)
            continue
        total += math.floor(math.log2(pi - 1)) + (pi - 1) / 2 ** math.floor(math.log2(pi))
    return total


def omega_flatfit(n_queries: int) -> float:
    """Equation (5): ``3 * Q``.  O(1)."""
    return 3.0 * n_queries


def omega_slickdeque_inv(p: Sequence[float]) -> float:
    """Equation (6): ``2 * (number of unique P_i)``.  O(n)."""
    return 2.0 * len({round(pi) for pi in p})


def omega_slickdeque_noninv(p_max: float, n_queries: int) -> float:
    """Equation (7): ``2 - 2/P_max + Q + sum_{i=1..P_max} 1/i!`` (the sum
    converges to e - 1 by ``i = 20``).  O(min(P_max, 20))."""
    tail = 0.0
    fact = 1.0
    for i in range(1, min(int(p_max), 20) + 1):
        fact *= i
        tail += 1.0 / fact
    return 2.0 - 2.0 / p_max + n_queries + tail


def omega_bint(p: Sequence[float]) -> float:
    """Derived (not in the paper): B-Int's update adds one new base interval
    of every level ``l >= 1`` whose width divides the partial's position,
    one combine each, ``sum_{l>=1} 2^-l < 1`` per partial; a lookup combines
    its ``k`` base intervals with ``k - 1`` calls, ``k`` the mean minimal
    dyadic decomposition (Arasu-Widom Theorem 3.1).  O(n log P)."""
    return 1.0 + sum(mean_dyadic_pieces(max(1, round(pi))) - 1 for pi in p)


def omega_rint(n_queries: int) -> float:
    """Derived: R-Int (Arasu-Widom section 3.2, Fig. 6) extends one running
    aggregate per partial and answers with one inverse per query.  O(1)."""
    return 1.0 + n_queries


def omega_lint(p: Sequence[float]) -> float:
    """Derived: L-Int (Arasu-Widom section 3.1.2) extends the prefix from the
    last landmark (1 call per partial), rebuilds the suffixes before each
    landmark (``W_max`` calls every ``W_min`` partials) and answers with one
    combine of two landmark intervals.  O(n)."""
    if not p:
        return 0.0
    return 1.0 + max(p) / max(min(p), 1.0) + len(p)

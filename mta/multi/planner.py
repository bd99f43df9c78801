"""Choosing an execution plan: ``choose(queries, plan_name) -> list[Group]``.

This is the simple planner the execution side runs until the cost-based
optimizers (WeaveShare, TriWeave: mqo-shein-chrysanthis-tkde sections 3.1
and 4) take its place: maximum sharing, one tree per group of queries that
can share (same monoid and lift, :func:`mta.multi.plan.sharing_key`), Cutty
slicing (fewest partials per window, Table 1) and the cheapest applicable
final technique by the Omega of section 4.1: SlickDeque (Non-Inv) for
selective monoids over suffix windows, SlickDeque (Inv) for invertible
ones, else B-Int (any monoid, any range).
"""

from __future__ import annotations

from .plan import Group, applicable_finals, sharing_key

PLAN_NAMES = ("auto", "weaveshare", "triweave")


def best_final(queries) -> str:
    """The final technique with the lowest Omega among those applicable."""
    names = applicable_finals(queries)
    for name in ("slickdeque-noninv", "slickdeque-inv", "bint"):
        if name in names:
            return name
    return "bint"  # pragma: no cover - bint always applies


def share(queries) -> list:
    """The queries split by :func:`sharing_key`, in the order they came."""
    groups: dict = {}
    for q in queries:
        groups.setdefault(sharing_key(q), []).append(q)
    return list(groups.values())


def estimate(queries, partial: str, final: str) -> float:
    """Monoid calls per element, assuming one element per key unit: one
    combine into the open partial, plus the edge rate times the final
    technique's cost per partial (a rough Omega, section 4.1)."""
    from . import cutty, pairs, panes

    edges = {"panes": panes, "pairs": pairs, "cutty": cutty}[partial].edges(queries)
    rate = 1.0 if edges.every else float(edges.edge_rate())
    n = len(queries)
    omega = {
        "naive": sum(float(q.width) for q in queries) / max(1, n),
        "bint": 2.0 * n,
        "lint": 1.0 + n,
        "rint": 1.0 + n,
        "slickdeque-inv": 2.0 * n,
        "slickdeque-noninv": 2.0,
        "flatfat": 2.0 * n,
        "flatfit": 3.0 * n,
    }.get(final, 2.0 * n)
    return 1.0 + rate * omega


def choose(queries, plan_name: str = "auto") -> list:
    """The groups of the plan ``plan_name`` (``"auto"``, ``"weaveshare"``
    or ``"triweave"``; all three are maximum sharing here)."""
    if plan_name not in PLAN_NAMES:
        raise ValueError(f"planner: plan must be one of {PLAN_NAMES}, got {plan_name!r}")
    groups = []
    for qs in share(queries):
        final = best_final(qs)
        groups.append(Group(qs, "cutty", final, estimate(qs, "cutty", final)))
    return groups

"""What a ``plan=`` argument of :class:`mta.multi.SharedWindows` means: its
groups of queries, each with a partial and a final technique, checked before
any tree is built.  The names and aliases come from :mod:`.plan`; 'auto',
'weaveshare' and 'triweave' ask :mod:`.planner`.
"""

from __future__ import annotations

import math
import numbers

from .plan import (FINAL_ALIASES, FINALS, PARTIALS, Group, Plan, applicable_finals, check_given, holistic,
                   planned_finals, sharing_key)
from .shared_slicer import Slicer

__all__ = ["resolve_final", "resolve_plan", "check_groups"]


def resolve_final(name, queries) -> str:
    """The final technique ``name`` (an alias such as 'slickdeque' allowed)
    for ``queries``, checked against what their monoid and lags allow."""
    if not isinstance(name, str):
        raise TypeError(f"final technique must be a str, got {type(name).__name__}")
    key = FINAL_ALIASES.get(name.strip().lower().replace("_", "-"))
    if key is None:
        raise ValueError(f"unknown final technique {name!r}; one of {sorted(FINALS)} (or 'slickdeque')")
    monoid = queries[0].aggregator.monoid
    if key == "slickdeque":
        if "slickdeque-inv" in planned_finals(queries):
            key = "slickdeque-inv"
        elif monoid.inverse is not None and not monoid.selective:
            names = ", ".join(q.name for q in queries)
            raise ValueError(f"final technique 'slickdeque' takes its Inv variant only for an exact inverse; monoid "
                             f"{monoid.name!r} of {names} declares its inverse approximate (floats: one inf makes "
                             f"every later window NaN, a large value cancels the small ones after it); name "
                             f"'slickdeque-inv' to run it anyway, or choose another final technique")
        else:
            key = "slickdeque-noninv"
    if key not in applicable_finals(queries):
        if holistic(queries[0]):
            names = ", ".join(q.name for q in queries)
            raise ValueError(f"exact quantiles ({names}) run on B-Int only (B-INT-QNT selects over its base "
                             f"intervals), not on {key!r}; ask for e.g. plan='cutty+bint' or plan='auto'")
        why = {"rint": "an invertible monoid", "slickdeque-inv": "an invertible monoid",
               "slickdeque-noninv": "a selective monoid and no lag (it answers suffix windows)",
               "flatfit": "no lag (it answers suffix windows)"}.get(key, "other queries")
        names = ", ".join(q.name for q in queries)
        raise ValueError(f"final technique {key!r} needs {why}; it cannot serve {names} "
                         f"(monoid {monoid.name!r})")
    return key


def check_rate(rate) -> float:
    """``rate`` (elements per time unit, ``SharedWindows(rate=)``) as a
    float: None is 1; else a finite real number > 0, or TypeError or
    ValueError.  O(1)."""
    if rate is None:
        return 1.0
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real):
        raise TypeError(f"rate must be a real number of elements per time unit, got {type(rate).__name__} {rate!r}")
    value = float(rate)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"rate must be a finite number > 0 of elements per time unit, got {rate!r}")
    return value


def resolve_plan(queries: list, plan, rate: float = 1.0) -> tuple[list, str]:
    """The groups of ``plan`` and its display name, priced at ``rate``
    elements per time unit (:func:`check_rate`).  ``plan`` may also be
    groups already made (a list of :class:`Group`, or a
    :class:`~mta.multi.plan.Plan`), e.g. another plan's groups re-split by
    hand; :func:`check_groups` checks them.  O(queries) plus the planner."""
    if isinstance(plan, Plan):
        check_given(plan.groups)  # its list may have changed since it was made
        return _with_held(plan.groups, rate), plan.name or "given"
    if isinstance(plan, (list, tuple)) and plan and all(isinstance(g, Group) for g in plan):
        check_given(plan)
        return _with_held(plan, rate), "given"
    if isinstance(plan, str):
        parts = [p.strip() for p in plan.split("+")]
    elif isinstance(plan, (tuple, list)) and all(isinstance(p, str) for p in plan):
        parts = [p.strip() for p in plan]
    else:
        raise TypeError(f"plan must be a str such as 'pairs+bint', a tuple ('pairs', 'bint'), a Plan or a list of "
                        f"Group, got {plan!r}")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"plan must name a plan and optionally a final technique, got {plan!r}")
    name = parts[0].lower()
    final = parts[1] if len(parts) == 2 else None
    if name in ("auto", "weaveshare", "triweave"):
        if final is not None:
            raise ValueError(f"plan {name!r} chooses the final techniques itself; drop {final!r}")
        from . import planner

        groups = list(planner.choose(queries, name, rate=rate))
        return groups, name
    if name == "separate":
        if final is not None:
            raise ValueError(f"plan 'separate' runs every query on its own Amortized MTA; drop {final!r}")
        from . import planner

        return planner.separate(queries, rate), name
    if name not in PARTIALS:
        raise ValueError(f"unknown plan {name!r}; one of 'auto', 'weaveshare', 'triweave', 'separate', "
                         f"{', '.join(repr(p) for p in PARTIALS)} (optionally '+final')")
    from . import planner

    groups = []
    for qs in planner.share(queries):
        f = planner.best_final(qs, rate) if final is None else resolve_final(final, qs)
        groups.append(Group(qs, name, f, planner.estimate(qs, name, f, rate), held=planner.held(qs, name, rate)))
    label = name if final is None else f"{name}+{groups[0].final if len(groups) == 1 else final}"
    return groups, label


def _with_held(groups, rate: float = 1.0) -> list:
    """Given groups, each with its held estimate (:func:`planner.held`) when
    it came without one: a copy then, the caller's group is left as it is.
    Groups the checks will refuse are passed on unchanged.  O(queries)."""
    from . import planner

    out = []
    for g in groups:
        if isinstance(g, Group) and g.held is None and g.queries and (g.partial in PARTIALS or g.final == "mta"):
            g = Group(g.queries, g.partial, g.final, g.estimate, g.slicer,
                      planner.held(g.queries, "none" if g.final == "mta" else g.partial, rate))
        out.append(g)
    return out


def check_groups(queries: list, groups: list) -> None:
    """A planner's groups must cover every query once and be executable."""
    seen = []
    for g in groups:
        if not isinstance(g, Group) or not g.queries:
            raise TypeError(f"planner returned {g!r}, not a non-empty Group")
        if g.final == "mta":
            if len(g.queries) != 1:
                raise ValueError(f"a separate group holds one query: {g!r}")
        else:
            if g.partial not in PARTIALS:
                raise ValueError(f"unknown partial technique in {g!r}")
            if len({sharing_key(q) for q in g.queries}) != 1:
                raise ValueError(f"{g!r} mixes queries that cannot share partials")
            if g.final not in applicable_finals(g.queries):
                raise ValueError(f"final technique {g.final!r} cannot serve {g!r}")
        if g.slicer is not None:
            if not isinstance(g.slicer, Slicer):
                raise TypeError(f"a group's slicer must be an mta.multi.shared_slicer.Slicer or None: {g!r}")
            fed = [h for h in groups if h.slicer is g.slicer]
            if g.final == "mta" or any(h.partial != g.slicer.partial for h in fed):
                raise ValueError(f"a shared slicer feeds trees of its own partial technique "
                                 f"({g.slicer.partial!r}): {g!r}")
            if len({sharing_key(q) for h in fed for q in h.queries}) != 1:
                raise ValueError(f"a shared slicer feeds queries that cannot share partials: {g!r}")
        seen.extend(g.queries)
    if sorted(id(q) for q in seen) != sorted(id(q) for q in queries):
        raise ValueError("the plan's groups must hold every query exactly once")

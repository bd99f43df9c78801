"""The planners' work is bounded, and extreme windows are priced, not refused.

* Many co-prime slides make composite slides too long to enumerate: the
  edges of progressions whose moduli share no factor are counted group by
  group (exact), inclusion-exclusion is capped, and L-Int's landmark walk
  is short.  Work is counted (inclusion-exclusion terms, landmark lookups,
  positions marked), never timed: a counter past its bound fails the test
  at once.
* Ranges and slides whose exact ratio needs more than the cost model's
  floats hold (``1e-300``, ``1e300`` over ``1e-10``) are planned on a
  coarser grid, with finite estimates and the Results of a brute force.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mta import Query, SharedWindows
from mta import aggregators as A
from mta.multi import edge_count, lint_cost, planner
from tests.multi_oracle import MultiOracle

PRIMES = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]


def _time(raw):
    return raw


def coprime_queries(lag: bool):
    """16 queries, slide p and range 2p + 1 for the first 16 primes (a lag
    cuts Cutty's and Pairs's windows at their ends too)."""
    return [Query(f"q{i}", A.SUM, range=2 * p + 1, slide=p, lag=i if lag else 0) for i, p in enumerate(PRIMES)]


@pytest.fixture
def work(monkeypatch):
    """Counts the planners' work: inclusion-exclusion terms (``_crt``),
    landmark lookups (``bisect_left`` in lint_cost) and positions marked
    (``_marks``), each failing the test past its bound; caches emptied."""
    counts = {"terms": 0, "lookups": 0, "marked": 0}
    bounds = {"terms": 100_000, "lookups": 4_000_000, "marked": 64_000_000}

    def counted(kind, f, size=lambda *a: 1):
        def wrapper(*args):
            counts[kind] += size(*args)
            assert counts[kind] <= bounds[kind], f"more than {bounds[kind]:,} {kind}"
            return f(*args)
        return wrapper

    monkeypatch.setattr(edge_count, "_crt", counted("terms", edge_count._crt))
    monkeypatch.setattr(lint_cost, "bisect_left", counted("lookups", lint_cost.bisect_left))
    if hasattr(edge_count, "_marks"):
        monkeypatch.setattr(edge_count, "_marks", counted("marked", edge_count._marks, lambda progs, n: n))
    monkeypatch.setattr(edge_count, "_EDGE_CACHE", {})
    monkeypatch.setattr(lint_cost, "_CACHE", {}, raising=False)
    return counts


@pytest.mark.parametrize("lag", [False, True], ids=["nolag", "lag"])
@pytest.mark.parametrize("plan", ["cutty+naive", "pairs+bint", "cutty+lint", "panes"])
def test_named_plans_of_sixteen_coprime_slides_count_few_edges(work, plan, lag):
    """A named plan prices its one tree: the co-prime groups are counted one
    by one, exactly, with no inclusion-exclusion term."""
    queries = coprime_queries(lag)
    shared = SharedWindows(queries, time=_time, plan=plan)
    assert math.isfinite(shared.plan.estimate)
    assert work["terms"] == 0 and work["marked"] < 1_000
    # the edges against the Chinese remainder theorem: residues modulo
    # co-prime slides are independent, so the share of positions no query
    # cuts is the product of each slide's
    nums, _ = planner.numbers(queries)
    partial = shared.plan.groups[0].partial
    e = edge_count.edges(nums, partial)
    free = Fraction(1)
    for q in nums:
        progs = edge_count.progressions(q, partial)
        (modulus,) = {m for _, m in progs}  # the slide p, or 1 for these panes
        free *= 1 - Fraction(len(progs), modulus)
    assert e.exact and Fraction(e.count, e.period) == 1 - free


@pytest.mark.parametrize("lag", [False, True], ids=["nolag", "lag"])
@pytest.mark.parametrize("plan", ["auto", "weaveshare", "triweave"])
def test_automatic_plans_of_sixteen_coprime_slides_are_bounded(work, plan, lag):
    shared = SharedWindows(coprime_queries(lag), time=_time, plan=plan)
    assert math.isfinite(shared.plan.estimate)
    assert sorted(q.name for g in shared.plan.groups for q in g.queries) == sorted(f"q{i}" for i in range(16))


def brute(progs, period):
    return len({x for off, m in progs for x in range(off, period, m)})


progressions = st.lists(st.tuples(st.integers(0, 40), st.sampled_from([2, 3, 4, 5, 6, 7, 9, 10, 12, 14, 15, 21])),
                        min_size=1, max_size=10).map(lambda ps: sorted({(off % m, m) for off, m in ps}))


@settings(max_examples=150, deadline=None)
@given(progressions)
def test_groups_and_inclusion_exclusion_count_exactly(progs):
    """Nothing enumerated as a whole: each group of progressions sharing
    factors is counted by inclusion-exclusion, within its budget, and the
    union is the brute force's."""
    period = edge_count.composite_slide(m for _, m in progs)
    saved = edge_count.ENUMERATE_LIMIT
    edge_count.ENUMERATE_LIMIT = 0
    try:
        e = edge_count._edges_of(progs)
    finally:
        edge_count.ENUMERATE_LIMIT = saved
    assert e.exact and e.positions is None
    assert e.count == brute(progs, period)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from([2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 36, 48])),
                min_size=1, max_size=24).map(lambda ps: sorted({(off % m, m) for off, m in ps})),
       st.integers(1, 200))
def test_inclusion_exclusion_gives_up_at_once_where_its_budget_cannot_do(progs, budget):
    """``d`` progressions take ``d (d + 1) / 2`` intersections at least
    (each one, then each later one below it, empty or not): with a smaller
    budget the count is None without a single intersection computed; with a
    larger one it is None exactly when the walk runs out, else the brute
    force's."""
    period = edge_count.composite_slide(m for _, m in progs)
    steps = []
    crt = edge_count._crt

    def counted(*a):
        steps.append(a)
        return crt(*a)

    saved, edge_count._crt = edge_count._crt, counted
    try:
        got = edge_count._inclusion_exclusion(progs, period, budget)
        bounded_steps = len(steps)
        unbounded = edge_count._inclusion_exclusion(progs, period, 1 << 30)
    finally:
        edge_count._crt = saved
    d = len(progs)
    assert unbounded == brute(progs, period)
    if d * (d + 1) // 2 > budget:
        assert got is None and bounded_steps == 0
    else:
        assert got is None or got == unbounded
        assert got is not None or d > 1  # one progression's count takes one step


def test_a_group_past_the_budget_is_estimated_close(monkeypatch):
    """16 progressions whose moduli all share factors (products of two of
    2..13): past the inclusion-exclusion budget the count is estimated from
    a sample, within 1 % of the brute force."""
    small = [2, 3, 5, 7, 11, 13]
    moduli = sorted({a * b for a in small for b in small if a < b})[:16]
    progs = sorted({(i % m, m) for i, m in enumerate(moduli)})
    period = edge_count.composite_slide(moduli)
    monkeypatch.setattr(edge_count, "ENUMERATE_LIMIT", 1000)
    monkeypatch.setattr(edge_count, "UNION_TERMS", 64)
    e = edge_count._edges_of(progs)
    assert not e.exact and e.positions is None
    assert e.count == pytest.approx(brute(progs, period), rel=0.01)


#: Moduli past edge_count.SAMPLE: an estimate sums their logarithms.
LONG = [3 << 17, 5 << 17, 131101, 3 * 131101]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 90), st.sampled_from([2, 3, 4, 5, 6, 7, 9, 10, 12, 14, 15, 21, 22, 26, 33, 35,
                                                                 91, 97, 101, *LONG])),
                min_size=1, max_size=16).map(lambda ps: sorted({(off % m, m) for off, m in ps})),
       st.lists(st.integers(0, 2), min_size=16, max_size=16), st.integers(4, 400), st.integers(1, 60))
def test_a_union_counted_from_its_parts_is_counted_as_from_scratch(progs, side, limit, budget):
    """A weaving's merged tree: the edges of two progression sets' union
    (overlapping or not) built from theirs (merging the groups that share
    factors, keeping the others' counts, estimating at once a group that
    holds an estimated one) are the period, count and exactness counting
    the union from scratch gives, the whole enumerated or group by group,
    exact or estimated."""
    parts = ([p for p, k in zip(progs, side) if k != 1], [p for p, k in zip(progs, side) if k != 0])
    if not parts[0] or not parts[1]:
        return
    saved = edge_count.ENUMERATE_LIMIT, edge_count.PLAN_UNION_TERMS, edge_count._EDGE_CACHE
    edge_count.ENUMERATE_LIMIT, edge_count.PLAN_UNION_TERMS, edge_count._EDGE_CACHE = limit, budget, {}
    try:
        keys = [tuple(part) for part in parts]
        merged = edge_count.edges_cached(tuple(progs), keys)
        assert all(key in edge_count._EDGE_CACHE for key in keys)  # counted first, then merged
        alone = edge_count._edges_of(progs, budget)
    finally:
        edge_count.ENUMERATE_LIMIT, edge_count.PLAN_UNION_TERMS, edge_count._EDGE_CACHE = saved
    assert (merged.period, merged.count, merged.exact) == (alone.period, alone.count, alone.exact)
    assert (merged.marks is None) == (alone.marks is None)
    if alone.exact and alone.period <= 1 << 16:
        assert alone.count == brute(progs, alone.period)


# -- extreme ranges and slides ---------------------------------------------------

EXTREMES = {  # each one's exact numbers overflow a float
    "range 1e-300": dict(range=1e-300),
    "range and slide 1e-300": dict(range=1e-300, slide=1e-300),
    "range 1e300, slide 1e-10": dict(range=1e300, slide=1e-10),
    "range 1e-200, slide 1e200": dict(range=1e-200, slide=1e200),
    "lag 1e-320": dict(range=3, slide=1, lag=1e-320),
    "rows 10**400": dict(rows=10 ** 400),
    "rows 10**400, slide 7, lag 3": dict(rows=10 ** 400, slide=7, lag=3),
}


@pytest.mark.parametrize("plan", ["cutty+naive", "pairs+bint", "auto", "separate", "triweave"])
@pytest.mark.parametrize("name", EXTREMES)
def test_extreme_ratios_are_planned(name, plan):
    """Planned with finite estimates, every number within what the cost
    model prices."""
    kw = EXTREMES[name]
    other = {"rows": 3} if "rows" in kw else {"range": 3}
    qs = [Query("q", A.COUNT, **kw), Query("r", A.COUNT, slide=1, **other)]
    shared = SharedWindows(qs, time=None if "rows" in kw else _time, plan=plan)
    assert math.isfinite(shared.plan.estimate) and shared.plan.held >= 1
    nums, rate = planner.numbers(qs)
    assert all(1 <= x <= planner.PRICED_UNITS for q in nums for x in q[:2]) and 0 < rate < math.inf


@pytest.mark.parametrize("plan", ["cutty+naive", "auto", "separate"])
def test_extreme_windows_answer_as_brute_force(plan):
    """A per-element window of 1e-300 holds the elements of its time only;
    a tumbling one of 1e300 all of them; 10**400 rows every element."""
    stream = [0, 0, 1, 2, 2, 2, 5]
    shared = SharedWindows([Query("tiny", A.COUNT, range=1e-300)], time=_time, plan=plan)
    got = [r.value for t in stream for r in shared.push(t)]
    assert got == [sum(1 for u in stream[:i + 1] if Fraction(t) - Fraction(1e-300) < u <= t)
                   for i, t in enumerate(stream)] == [1, 2, 1, 1, 2, 3, 1]
    huge = [Query("huge", A.COUNT, range=1e300, slide=1e300)]
    shared, oracle = SharedWindows(huge, time=_time, plan=plan), MultiOracle(huge, time=_time)
    assert [r for t in stream for r in shared.push(t)] == [r for t in stream for r in oracle.push(t)] == []
    got, want = shared.flush(), oracle.flush()
    assert got == want and [(r.end, r.value) for r in got] == [(1e300, len(stream))]
    rows = SharedWindows([Query("rows", A.COUNT, rows=10 ** 400)], plan=plan)
    assert [r.value for t in stream for r in rows.push(t)] == list(range(1, len(stream) + 1))


def test_edge_cache_counts_each_entry_once_when_a_merge_equals_one_of_its_parts():
    """A merge whose union is one of its parts, that part not cached yet:
    counting the parts caches it, and the merge's own entry replaces it,
    so the bytes the cache holds are counted once (a count that drifted up
    would empty the whole cache at every insert once past its bound)."""
    saved = dict(edge_count._EDGE_CACHE), edge_count._cache_bytes
    try:
        edge_count._EDGE_CACHE.clear()
        edge_count._cache_bytes = 0
        whole, part = ((0, 1000), (3, 999)), ((0, 1000),)
        edge_count.edges_cached(whole, [whole, part])
        held = sum(len(e.marks) for e in edge_count._EDGE_CACHE.values() if e.marks is not None)
        assert held > 0 and edge_count._cache_bytes == held
    finally:
        edge_count._EDGE_CACHE.clear()
        edge_count._EDGE_CACHE.update(saved[0])
        edge_count._cache_bytes = saved[1]

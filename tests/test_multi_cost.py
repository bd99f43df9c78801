"""The multi-query cost model (mta.multi.cost) and the planners.

Hand-computed values from the MQO paper's examples, brute-force edge counts,
and planner invariants; the last tests run plans on SharedWindows with a
CountingMonoid and compare the measured monoid calls per element with the
estimate (within 25%)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.mqo import workload  # section 5.1's workload, one home for the bench and the tests
from mta import aggregators as A
from mta.monoid import Aggregator, CountingMonoid
from mta.multi import Query, SharedWindows, cost, edge_count, memory, planner, slicing
from mta.multi.triweave import triweave
from mta.multi.weaveshare import weaveshare


def brute_edges(queries, partial, period):
    """Partial starts in [0, period), marked one by one."""
    marks = set()
    for q in queries:
        for off, m in cost.progressions(q, partial):
            marks.update(range(off, period, m))
    return len(marks)


# -- hand-computed values from the paper ---------------------------------------

def test_example_2_composite_slide_and_edges():
    # Example 2 (section 3.1): slides 2 and 4, composite slide 4, edges at 2 and 4
    assert cost.composite_slide([2, 4]) == 4
    assert cost.f1_edge_count([2, 4]) == 2
    e = cost.edges([(6, 2), (8, 4)], "panes")
    assert (e.period, e.count) == (4, 2)
    # the first query reads 3 partials, the second 4
    assert [r * e.density for r, _ in [(6, 2), (8, 4)]] == [3, 4]


def test_f1_three_slides_by_hand():
    # LCM(2, 3, 5) = 30: 15 + 10 + 6 - 5 - 3 - 2 + 1 = 22 multiples of 2, 3 or 5
    assert cost.f1_edge_count([2, 3, 5]) == 22
    assert cost.edges([(2, 2), (3, 3), (5, 5)], "panes").count == 22
    assert cost.f1_edge_count([2, 2, 3]) == cost.f1_edge_count([2, 3]) == 4


def test_table_1_partials_per_window():
    # Fig. 2 (range 4, slide 1), Fig. 3 (range 14, slide 8), Fig. 4 (range 5, slide 3)
    assert cost.partials_per_window(4, 1, "panes") == 4
    assert cost.partials_per_window(14, 8, "panes") == 7
    assert cost.partials_per_window(14, 8, "pairs") == 3
    assert cost.partials_per_window(14, 8, "cutty") == 2
    assert cost.partials_per_window(5, 3, "cutty") == 2
    # Pairs' fragments of Fig. 3: f2 = 14 % 8 = 6, f1 = 2: two edges per slide
    assert cost.edges([(14, 8)], "pairs").count == 2
    assert cost.edges([(14, 8)], "cutty").count == 1


def test_omegas_by_hand():
    # equation (3): 6/2 + 8/4
    assert cost.omega_panes([(6, 2), (8, 4)]) == 5
    # equation (4) for P = 5: floor(log2 4) + 4 / 2^2 = 3
    assert cost.omega_flatfat([5]) == 3
    assert cost.omega_flatfit(7) == 21
    # equation (6): P in {3, 4, 4} -> 2 unique
    assert cost.omega_slickdeque_inv([3, 4, 4]) == 4
    # equation (7), P_max = 3, Q = 2: 2 - 2/3 + 2 + (1 + 1/2 + 1/6)
    assert cost.omega_slickdeque_noninv(3, 2) == pytest.approx(2 - 2 / 3 + 2 + 1 + 0.5 + 1 / 6)


def test_equation_1_plan_cost():
    # one tree of Example 2 with Panes: lambda = 1, E = 2/4, Omega = 5
    assert cost.paper_plan_cost([([(6, 2), (8, 4)], "panes", "naive")]) == pytest.approx(1 + 0.5 * 5)
    # no sharing: two trees, E = 1/2 and 1/4
    two = [([(6, 2)], "panes", "naive"), ([(8, 4)], "panes", "naive")]
    assert cost.paper_plan_cost(two) == pytest.approx(2 + 0.5 * 3 + 0.25 * 2)


def test_dyadic_pieces_by_hand():
    # Theorem 3.1: [0, 43) = [0, 32) + [32, 40) + [40, 42) + [42, 43)
    assert cost.dyadic_pieces(0, 43) == 4
    assert cost.dyadic_pieces(0, 64) == 1
    assert cost.dyadic_pieces(1, 3) == 2
    assert cost.dyadic_pieces(5, 5) == 0


def test_tree_cost_by_hand():
    # Example 2 on one Panes tree with the naive final: per element
    # slicing 1 - 1/2, answers 1/2 * (2 closed - 1 + 1 open) + 1/4 * (3 - 1 + 1)
    assert cost.tree_cost([(6, 2), (8, 4)], "panes", "naive") == pytest.approx(0.5 + 0.5 * 2 + 0.25 * 3)
    # R-Int: + 1 per partial, 1 inverse + 1 open per answer
    assert cost.tree_cost([(6, 2), (8, 4)], "panes", "rint") == pytest.approx(0.5 + 0.5 + 0.5 * 2 + 0.25 * 2)


# -- properties against brute force --------------------------------------------

queries_st = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 12), st.integers(0, 5)), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(queries_st, st.sampled_from(["panes", "pairs", "cutty"]))
def test_edges_match_brute_force(queries, partial):
    e = cost.edges(queries, partial)
    assert e.count == brute_edges(queries, partial, e.period)
    # inclusion-exclusion (used past ENUMERATE_LIMIT) agrees with enumeration
    progs = sorted({p for q in queries for p in cost.progressions(q, partial)})
    assert edge_count._inclusion_exclusion(progs, e.period, 1 << 30) == e.count


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=6))
def test_f1_matches_enumeration_and_executor(slides):
    n = cost.f1_edge_count(slides)
    assert n == cost.edges([(s, s) for s in slides], "panes").count
    assert n == slicing.f1_edges(slides)


@settings(max_examples=100, deadline=None)
@given(queries_st, st.sampled_from(["panes", "pairs", "cutty"]))
def test_progressions_match_executor_edges(queries, partial):
    from mta.multi import cutty, pairs, panes
    qs = [Query(f"q{i}", A.SUM, rows=r, slide=s, lag=lag) for i, (r, s, lag) in enumerate(queries)]
    theirs = {"panes": panes, "pairs": pairs, "cutty": cutty}[partial].edges(qs)
    mine = {p for q in queries for p in cost.progressions(q, partial)}
    assert {(o % m, m) for o, m in theirs.progressions} == mine


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 5000))
def test_dyadic_pieces_is_the_greedy_cover(lo, width):
    hi = lo + width
    n, a = 0, lo
    while a < hi:
        size = a & -a if a else 1 << (hi - 1).bit_length()
        while size > hi - a:
            size >>= 1
        a += size
        n += 1
    assert cost.dyadic_pieces(lo, hi) == n


# -- planners -------------------------------------------------------------------

def as_queries(specs, agg):
    return [Query(f"q{i}", agg, rows=r, slide=s) for i, (r, s) in enumerate(specs)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.integers(1, 10)), min_size=1, max_size=8),
       st.sampled_from(["auto", "weaveshare", "triweave"]), st.sampled_from([A.SUM, A.MAX, A.COLLECT]))
def test_plans_are_partitions_and_auto_follows_the_memory_rule(specs, name, agg):
    qs = as_queries(specs, agg)
    groups = planner.choose(qs, name)
    seen = [q for g in groups for q in g.queries]
    assert sorted(id(q) for q in seen) == sorted(id(q) for q in qs)
    assert all(g.estimate is not None and g.estimate >= 0 for g in groups)
    assert all(g.held is not None and g.held >= 1 for g in groups)
    if name == "auto":
        # the memory rule: at most MEMORY_SLACK above the cheapest of its
        # candidates (separate, WeaveShare and TriWeave among them), and
        # holding no more than any of those within that bound
        calls = planner.total_estimate(groups)
        candidates = planner.candidates(qs)
        cheapest = min(planner.total_estimate(c) for c in candidates)
        for other in ("weaveshare", "triweave"):
            assert cheapest <= planner.total_estimate(planner.choose(qs, other)) + 1e-9
        assert cheapest <= sum(cost.separate_calls(q) for q in specs) * 1.0000001  # separate
        bound = cheapest * (1 + memory.MEMORY_SLACK) + 1e-9
        assert calls <= bound
        for c in candidates:
            if planner.total_estimate(c) <= bound:
                assert planner.total_held(groups) <= planner.total_held(c)


def test_weaveshare_triweave_paper_workload_shapes():
    specs = workload(100, 1000, 10_000)
    trees = weaveshare(specs)
    assert sorted(i for t in trees for i in t.members) == list(range(100))
    partial, ttrees, total = triweave(specs)
    assert sorted(i for t in ttrees for i in t.members) == list(range(100))
    assert total <= sum(t.estimate for t in trees) + 1e-9  # one slicer is never dearer
    # Panes with the naive final is what the planners improve on (section 5.2)
    naive = weaveshare(specs, finals=("naive",))
    assert sum(t.estimate for t in trees) * 100 < sum(t.estimate for t in naive)


# -- estimate against the executor's monoid calls ------------------------------

def measure(specs, plan, agg, n=3000, seed=0):
    counting = CountingMonoid(agg.monoid)
    qs = as_queries(specs, Aggregator(counting, agg.lift, agg.lower))
    sw = SharedWindows(qs, plan=plan)
    rng = random.Random(seed)
    for _ in range(max(r for r, _ in specs) + 2 * max(s for _, s in specs)):
        sw.push(rng.random())
    counting.reset()
    for _ in range(n):
        sw.push(rng.random())
    groups = sw.plan.groups
    # trees, plus each shared slicer once (TriWeave's first level)
    est = sum(g.estimate for g in groups)
    est += sum(s.estimate for s in sw.plan.slicers)
    return counting.calls / n, est


SMALL = workload(12, 20, 30, seed=4)


@pytest.mark.parametrize("plan", ["auto", "weaveshare", "triweave", "separate", "panes+naive", "pairs+bint",
                                  "cutty+flatfat", "cutty+flatfit", "panes+lint", "cutty+rint", "cutty+slickdeque-inv"])
def test_measured_calls_within_25_percent_sum(plan):
    measured, est = measure(SMALL, plan, A.SUM)
    assert est == pytest.approx(measured, rel=0.25), (plan, measured, est)


@pytest.mark.parametrize("specs", [workload(100, 1000, 10, seed=0), workload(30, 100, 30, seed=2),
                                   [(r, 1) for r in range(1, 40)], [(12, 5, 3), (40, 10, 0), (7, 2, 9)]],
                         ids=["mqo", "s100-o30", "ranges-1-39", "lags"])
@pytest.mark.parametrize("plan", ["cutty+lint", "panes+lint"])
def test_lint_estimate_counts_landmark_intervals_over_the_pattern(specs, plan):
    """L-Int's landmark intervals, computed on demand as far back as the
    widest lookup through each landmark, counted over the repeating
    pattern of edges, landmarks and answers (mta.multi.lint_cost)."""
    queries = [Query(f"q{i}", A.SUM, rows=spec[0], slide=spec[1], lag=spec[2] if len(spec) > 2 else 0)
               for i, spec in enumerate(specs)]
    counting = CountingMonoid(A.SUM.monoid)
    sw = SharedWindows([Query(q.name, Aggregator(counting, A.SUM.lift, A.SUM.lower), rows=q.rows, slide=q.slide,
                              lag=q.lag) for q in queries], plan=plan)
    rng = random.Random(5)
    reach = max(spec[0] + (spec[2] if len(spec) > 2 else 0) for spec in specs)
    for _ in range(reach + 2 * max(spec[1] for spec in specs)):
        sw.push(rng.random())
    counting.reset()
    for _ in range(3000):
        sw.push(rng.random())
    assert sw.plan.estimate == pytest.approx(counting.calls / 3000, rel=0.05), plan


def test_lint_enumeration_declines_what_it_cannot_walk():
    from mta.multi import lint_cost
    from mta.multi.edge_count import Edges

    assert lint_cost.landmark_calls_enumerated([(10, 5, 0)], Edges(10, 2, None), 8) is None
    calls = lint_cost.landmark_calls_expected([40.0, 9.0, 3.0], [0.01, 0.2, 1.0], 8)
    assert calls == pytest.approx((40 - 4.5) * 0.08 + (9 - 4.5) * 1.0 * 0.92)


@pytest.mark.parametrize("spec", [(10, 1), (1000, 1), (10, 10), (100, 10), (1000, 10), (64, 3), (1000, 100),
                                  (8000, 1000)])
def test_separate_estimate_within_25_percent_of_counted_calls(spec):
    """One query on its own Amortized MTA: the insert's calls, and per
    answer the eviction (one at a time or in bulk) and the query."""
    measured, est = measure([spec], "separate", A.SUM, n=4000)
    assert est == pytest.approx(cost.separate_calls(spec))
    assert est == pytest.approx(measured, rel=0.25), (spec, measured, est)


@pytest.mark.parametrize("plan", ["auto", "weaveshare", "panes+bint", "cutty+slickdeque", "cutty+naive"])
def test_measured_calls_within_25_percent_max(plan):
    measured, est = measure(SMALL, plan, A.MAX)
    assert est == pytest.approx(measured, rel=0.25), (plan, measured, est)


# -- TriWeave's shared slicer: one slicing for every tree -------------------------

SLICED = [(r * s + s // 3, s) for r, s in [(3, 40), (5, 60), (2, 100), (7, 30), (4, 50), (6, 120), (3, 80), (2, 90)]]


def _split_calls(partial, finals, shared: bool, by_rows: bool, n=4000):
    """The SLICED queries split in two trees (even and odd indices), fed by
    one shared slicer or each slicing its own input: measured monoid calls
    per element and the plan's estimate (trees plus the slicer)."""
    from mta.multi.plan import Group
    from mta.multi.shared_slicer import Slicer
    from mta.multi.triweave import shared_edges

    counting = CountingMonoid(A.SUM.monoid)
    agg = Aggregator(counting, lambda raw: raw[1])
    kw = "rows" if by_rows else "range"
    qs = [Query(f"q{i}", agg, slide=s, **{kw: r}) for i, (r, s) in enumerate(SLICED)]
    nums, rate = planner.numbers(qs)
    edges = shared_edges(nums, partial)
    slicer = Slicer(partial, max(1.0 - edges.density / rate, 0.0)) if shared else None
    groups = []
    for half, final in zip((qs[0::2], qs[1::2]), finals):
        est = cost.tree_cost(planner.numbers(half)[0], partial, final, rate, shared_edges=edges if shared else None)
        groups.append(Group(half, partial, final, est, slicer))
    sw = SharedWindows(qs, time=lambda raw: raw[0], plan=groups)
    rng = random.Random(2)
    warm = max(r for r, _ in SLICED) + 2 * max(s for _, s in SLICED)
    for t in range(warm):
        sw.push((t, rng.random()))
    counting.reset()
    for t in range(warm, warm + n):
        sw.push((t, rng.random()))
    return counting.calls / n, sw.plan.estimate


@pytest.mark.parametrize("by_rows", [True, False], ids=["rows", "time"])
@pytest.mark.parametrize("partial", ["panes", "pairs", "cutty"])
@pytest.mark.parametrize("finals", [("bint", "naive"), ("slickdeque-inv", "flatfat"), ("rint", "lint")])
def test_shared_slicer_calls_within_25_percent_and_below_per_tree(partial, finals, by_rows):
    """Measured calls per element of two trees behind one slicer are within
    25 % of the cost model's estimate, and never above the same two trees
    slicing on their own; when the trees mark edges the other does not
    (Pairs and Cutty here; these Panes are one element each in both), the
    one slicing saves most of a call per element."""
    shared, est = _split_calls(partial, finals, True, by_rows)
    alone, alone_est = _split_calls(partial, finals, False, by_rows)
    assert est == pytest.approx(shared, rel=0.25), (shared, est)
    assert alone_est == pytest.approx(alone, rel=0.25), (alone, alone_est)
    assert shared <= alone * (1 + 1e-9), (shared, alone)
    if partial != "panes":
        assert shared < alone - 0.5, (shared, alone)


# -- edges denser than elements ----------------------------------------------------

#: Slides of a fraction of the element spacing (one element per unit): a tree marks 12
#: edges or more per element, but an element closes at most one partial.
DENSE = [(100, 0.25), (60, 0.2), (30, 0.5), (90, 0.125), (45, 0.4)]


def _counted_per_element(specs, plan, rate, n=2000):
    """Counted monoid calls per element after a warm-up of ``n // 4``, and
    the plan's estimate, for ``range=`` queries ``(range, slide[, lag])``
    (a slide of None: per element) fed one element every ``1 / rate`` time
    units."""
    counting = CountingMonoid(A.MAX.monoid)
    agg = Aggregator(counting, lambda raw: raw[1])
    qs = [Query(f"q{i}", agg, range=spec[0], slide=spec[1], lag=spec[2] if len(spec) > 2 else 0)
          for i, spec in enumerate(specs)]
    sw = SharedWindows(qs, time=lambda raw: raw[0], plan=plan, rate=rate)
    rng = random.Random(0)
    warm = n // 4
    for i in range(warm + n):
        if i == warm:
            counting.reset()
        sw.push((i / rate, rng.randint(0, 100)))
    return counting.calls / n, sw.plan.estimate


@pytest.mark.parametrize(("specs", "rate"), [(DENSE, 1), ([(r / 10, s / 10) for r, s in DENSE], 10)],
                         ids=["units", "tenths"])
@pytest.mark.parametrize("plan", ["cutty+slickdeque-noninv", "cutty+bint", "panes+naive", "pairs+lint"])
def test_edges_denser_than_elements_priced_at_one_partial_per_element(specs, rate, plan):
    """The cost model caps a tree's partials at one per element (and a
    window's at its elements), as the executor closes them: the estimate is
    within 10 % of the counted calls (uncapped, 1.7x to 10^16x above them)."""
    nums, unit_rate = planner.numbers([Query(f"q{i}", A.MAX, range=r, slide=s) for i, (r, s) in enumerate(specs)],
                                      rate)
    assert cost.edges(nums, plan.split("+")[0]).density > 2 * unit_rate  # the workload is dense
    measured, est = _counted_per_element(specs, plan, rate)
    assert est == pytest.approx(measured, rel=0.10), (plan, measured, est)


@pytest.mark.parametrize(("specs", "rate"),
                         [([(10, None), (10, 5), (10, 10, 10)], 1), (DENSE, 1), ([(3, 1), (7, 2)], 1)],
                         ids=["docs-example", "dense", "short"])
def test_flatfat_update_walks_the_capacity_of_what_the_tree_holds(specs, rate):
    """FlatFAT's leaf-to-root walk climbs its capacity, the power of two at
    or above the partials held at the peak (a lag's and those of the
    pushes between two evictions too), not the largest window's: the
    estimate is within 10 % of the counted calls."""
    measured, est = _counted_per_element(specs, "cutty+flatfat", rate)
    assert est == pytest.approx(measured, rel=0.10), (measured, est)

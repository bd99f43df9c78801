"""SharedWindows against the brute-force oracle (tests/multi_oracle.py), for
every plan and every final technique.

Random query sets mix time and rows queries, per-element and periodic ones
(tumbling included), historical windows (lag), and streams with equal
times, bursts and long empty periods, interleaved with ``flush(until)``,
``flush()`` and ``query(name)``.  The monoids: CONCAT (non-commutative, the
exact window contents) wherever the technique takes any monoid, the free
group (non-commutative, invertible) for R-Int and SlickDeque (Inv), tagged
first-max / last-max (selective, ties visible) for SlickDeque (Non-Inv);
every stream also holds values equal to the identity.
"""

from __future__ import annotations

import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import Aggregator, CountingMonoid, Query, SharedWindows
from mta.aggregators import SUM
from mta.multi.plan import applicable_finals
from tests.multi_oracle import MultiOracle
from tests.oracle import CONCAT
from tests.strategies import (FIRST_MAX, FREE_GROUP, LAST_MAX, Named, concat_values, free_words, plain, sane_settings,
                              tagged)
# under the name tests/test_multi_store.py and tests/test_quantiles.py import
from tests.strategies import shared_operations as operations
from tests import multi_paths

#: every test here runs with the compiled core in use where it applies, then without
executor = multi_paths.executor

# ---------------------------------------------------------------------------
# monoids: raw elements are (time, value)

_value = operator.itemgetter(1)


def _time(raw):
    return raw[0]


CONCAT_AGG = Aggregator(CONCAT, _value, name="concat")
CONCAT_AGG2 = Aggregator(CONCAT, lambda raw: raw[1][::-1], name="concat-reversed")  # another tree
FREE_AGG = Aggregator(FREE_GROUP, _value, name="free-group")
FIRST_MAX_AGG = Aggregator(FIRST_MAX, _value, name="first-max")
LAST_MAX_AGG = Aggregator(LAST_MAX, _value, name="last-max")

_keys = st.integers(-1, 4)  # -1 stands for the identity element


class Spec(Named):
    """Aggregators for the queries, a strategy for raw values and
    ``make(raw, i)`` building the i-th pushed value from its raw."""

    def __init__(self, name, aggregators, values, make=plain) -> None:
        self.name = name
        self.aggregators = aggregators
        self.values = values
        self.make = make


CONCAT_SPEC = Spec("concat", [CONCAT_AGG, CONCAT_AGG2], concat_values)
FREE_SPEC = Spec("free-group", [FREE_AGG], free_words)
FIRST_SPEC = Spec("first-max", [FIRST_MAX_AGG], _keys, tagged)
LAST_SPEC = Spec("last-max", [LAST_MAX_AGG], _keys, tagged)
# a ready monoid: where the queries allow it (rows=, a slide, no lag) the
# compiled core runs the plan (tests/test_multi_compiled.py covers it alone)
SUM_SPEC = Spec("sum", [Aggregator(SUM.monoid, _value, name="sum")], st.integers(-3, 3))


# ---------------------------------------------------------------------------
# strategies


@st.composite
def query_sets(draw, aggregators, lag: bool = True, max_queries: int = 4):
    n = draw(st.integers(1, max_queries), label="queries")
    queries = []
    for i in range(n):
        rows = draw(st.booleans())
        width = draw(st.integers(1, 9))
        slide = draw(st.one_of(st.none(), st.integers(1, 7), st.just(width)))  # just(width): tumbling
        lagged = draw(st.sampled_from([0, 0, 1, 3, 7])) if lag else 0
        agg = draw(st.sampled_from(aggregators))
        kw = {"rows": width} if rows else {"range": width}
        queries.append(Query(f"q{i}", agg, slide=slide, lag=lagged, **kw))
    return queries


def run(queries, ops, spec, plan, **options) -> None:
    """Replay ``ops`` on the plan (``options``: SharedWindows' own, e.g. a
    store) and on the oracle: every result, query and flush equal."""
    shared = SharedWindows(queries, time=_time, plan=plan, **options)
    oracle = MultiOracle(queries, time=_time)
    t = 0
    i = 0
    for step, op in enumerate(ops):
        where = f"step {step} {op!r}"
        if op[0] == "push":
            t += op[1]
            raw = (t, spec.make(op[2], i))
            i += 1
            assert shared.push(raw) == oracle.push(raw), where
        elif op[0] == "query":
            name = queries[op[1] % len(queries)].name
            assert shared.query(name) == oracle.query(name), where
        else:
            until = None if op[1] is None else t + op[1]
            assert shared.flush(until) == oracle.flush(until), where
        assert len(shared) == len(oracle.elements)
        assert shared.late == oracle.late, where
    assert shared.flush() == oracle.flush(), "final flush"
    for q in queries:
        assert shared.query(q.name) == oracle.query(q.name), q.name
    shared.close(delete=True)


# ---------------------------------------------------------------------------
# every plan and every final technique

GENERAL_FINALS = ["naive", "bint", "lint", "flatfat", "flatfit"]  # flatfit: no lag
PLANS = ["separate", "auto", "weaveshare", "triweave"]


def _params():
    out = []
    for spec, finals in [(CONCAT_SPEC, GENERAL_FINALS), (FREE_SPEC, ["rint", "slickdeque-inv"]),
                         (FIRST_SPEC, ["slickdeque-noninv"]), (LAST_SPEC, ["slickdeque-noninv"]),
                         (SUM_SPEC, ["naive", "rint", "flatfit"])]:
        for partial in ("panes", "pairs", "cutty"):
            for final in finals:
                out.append(pytest.param(spec, f"{partial}+{final}", id=f"{spec.name}-{partial}+{final}"))
    for spec in (CONCAT_SPEC, FREE_SPEC, FIRST_SPEC):
        for plan in PLANS:
            out.append(pytest.param(spec, plan, id=f"{spec.name}-{plan}"))
    return out


def _suffix_only(plan: str) -> bool:
    return plan.endswith(("flatfit", "noninv"))


@pytest.mark.parametrize(("spec", "plan"), _params())
@sane_settings(60)
@given(data=st.data())
def test_plan_against_oracle(spec, plan, data):
    queries = data.draw(query_sets(spec.aggregators, lag=not _suffix_only(plan)), label="queries")
    ops = data.draw(operations(spec.values), label="ops")
    run(queries, ops, spec, plan)


@pytest.mark.parametrize("plan", ["separate", "cutty+bint", "pairs+naive", "panes+flatfat", "cutty+flatfit"])
@sane_settings(30)
@given(data=st.data())
def test_many_queries_one_tree(plan, data):
    """Up to 8 queries sharing one tree (one aggregator)."""
    lag = not _suffix_only(plan)
    queries = data.draw(query_sets([CONCAT_AGG], lag=lag, max_queries=8), label="queries")
    ops = data.draw(operations(concat_values, max_ops=50), label="ops")
    run(queries, ops, CONCAT_SPEC, plan)


@pytest.mark.parametrize(("spec", "plan"), [(CONCAT_SPEC, "separate"), (CONCAT_SPEC, "cutty+flatfit"),
                                           (CONCAT_SPEC, "pairs+bint"), (CONCAT_SPEC, "auto"),
                                           (FREE_SPEC, "cutty+rint"), (FREE_SPEC, "panes+slickdeque-inv"),
                                           (FIRST_SPEC, "cutty+slickdeque-noninv")])
@sane_settings(30)
@given(data=st.data())
def test_twin_queries(spec, plan, data):
    """Every query twice (another name, the same window): each twin gets its
    own Results, equal to the oracle's, and a shared tree looks the window
    up once (the monoid calls are those of the queries without twins)."""
    queries = data.draw(query_sets(spec.aggregators[:1], lag=not _suffix_only(plan), max_queries=4),
                        label="queries")
    twins = []
    for q in queries:
        kw = {"rows": q.rows} if q.by_rows else {"range": q.range}
        twins.append(Query(q.name + "-twin", q.aggregator, slide=q.slide, lag=q.lag, **kw))
    ops = data.draw(operations(spec.values), label="ops")
    run(queries + twins, ops, spec, plan)
    if plan in ("separate", "auto"):
        return
    calls = []
    for qs in (queries, queries + twins):
        m = CountingMonoid(qs[0].aggregator.monoid)
        agg = Aggregator(m, qs[0].aggregator.lift, name="counted")
        counted = [Query(q.name, agg, slide=q.slide, lag=q.lag, **({"rows": q.rows} if q.by_rows else
                                                                  {"range": q.range})) for q in qs]
        shared = SharedWindows(counted, time=_time, plan=plan)
        t = 0
        for i, op in enumerate(o for o in ops if o[0] == "push"):
            t += op[1]
            shared.push((t, spec.make(op[2], i)))
        shared.flush()
        calls.append(m.calls)
    assert calls[0] == calls[1]


def test_twins_keep_their_end_types():
    """A window given in floats and the same window in ints are answered
    from one lookup, each with its own type of end."""
    from mta import aggregators as A

    total = Aggregator(A.SUM.monoid, _value, name="sum")
    qs = [Query("a", total, range=2, slide=2), Query("b", total, range=2.0, slide=2.0)]
    shared = SharedWindows(qs, time=_time, plan="cutty+rint")
    out = [r for t in range(6) for r in shared.push((t, 1))]
    assert [(r.query, r.end, type(r.end), r.value) for r in out] == [
        ("a", 2, int, 2), ("b", 2.0, float, 2), ("a", 4, int, 2), ("b", 4.0, float, 2)]


def test_every_final_is_tested():
    from mta.multi.plan import FINALS

    tested = {p.values[1].split("+")[1] for p in _params() if "+" in p.values[1]}
    assert tested == set(FINALS)


# ---------------------------------------------------------------------------
# the plan


def test_plan_is_readable():
    qs = [Query("a", CONCAT_AGG, range=10), Query("b", CONCAT_AGG, range=20, slide=5),
          Query("c", FIRST_MAX_AGG, rows=4, slide=2)]
    shared = SharedWindows(qs, time=_time, plan="pairs+bint")
    text = str(shared.plan)
    assert "pairs" in text and "bint" in text
    assert "a: concat range=10, per element" in text and "c: first-max rows=4, slide=2" in text
    assert len(shared.plan.groups) == 2  # different monoids cannot share
    assert shared.plan.estimate > 0
    sep = SharedWindows(qs, time=_time, plan="separate")
    assert len(sep.plan.groups) == 3 and "own Amortized MTA" in str(sep.plan)
    auto = SharedWindows(qs, time=_time)
    # auto takes the cost model's cheapest plan: never above a fixed
    # technique on the same queries
    for fixed in (shared, SharedWindows(qs, time=_time, plan="cutty+bint")):
        assert auto.plan.estimate <= fixed.plan.estimate * (1 + 1e-9)


def test_plan_spellings():
    qs = [Query("a", FREE_AGG, range=10, slide=2)]
    for plan in ("pairs+rint", ("pairs", "r-int"), "PAIRS + R-Int", ("pairs", "RINT")):
        assert SharedWindows(qs, time=_time, plan=plan).plan.groups[0].final == "rint"
    assert SharedWindows(qs, time=_time, plan="cutty+slickdeque").plan.groups[0].final == "slickdeque-inv"
    sel = [Query("m", FIRST_MAX_AGG, range=10, slide=2)]
    assert SharedWindows(sel, time=_time, plan="cutty+slickdeque").plan.groups[0].final == "slickdeque-noninv"


def test_applicable_finals():
    lagged = [Query("a", FIRST_MAX_AGG, range=4, slide=2, lag=1)]
    assert "slickdeque-noninv" not in applicable_finals(lagged)
    assert "flatfit" not in applicable_finals(lagged)
    assert "slickdeque-noninv" in applicable_finals([Query("a", FIRST_MAX_AGG, range=4, slide=2)])
    assert "rint" in applicable_finals([Query("a", FREE_AGG, range=4)])
    assert "rint" not in applicable_finals([Query("a", CONCAT_AGG, range=4)])


# ---------------------------------------------------------------------------
# sharing costs fewer monoid calls


def test_sharing_saves_monoid_calls():
    """Eight periodic sums over one stream: a shared Cutty tree with
    SlickDeque (Inv) makes fewer monoid calls than eight MTAs."""
    from tests.strategies import SUM_INV

    def calls(plan):
        m = CountingMonoid(SUM_INV)
        agg = Aggregator(m, _value)
        qs = [Query(f"q{r}", agg, range=10 * r, slide=10) for r in range(1, 9)]
        shared = SharedWindows(qs, time=_time, plan=plan)
        for t in range(2000):
            shared.push((t, t % 7))
        return m.calls

    separate, shared = calls("separate"), calls("cutty+slickdeque-inv")
    assert shared < separate / 3, (shared, separate)


def test_bint_lookup_is_logarithmic():
    """B-Int answers a range of W partials with at most 2 log2(W) + 1 calls."""
    from mta.multi.bint import BInt

    m = CountingMonoid(CONCAT)
    b = BInt(m)
    for i in range(1000):
        b.append((i,))
    b.evict(37)
    for lo, hi in [(37, 1000), (100, 900), (512, 513), (255, 257), (40, 41)]:
        m.reset()
        assert b.range(lo, hi) == tuple(range(lo, hi))
        assert m.calls <= 2 * max(1, (hi - lo).bit_length()), (lo, hi, m.calls)


# ---------------------------------------------------------------------------
# long streams: deep B-Int levels, FlatFAT resizing, L-Int landmarks


@pytest.mark.parametrize("plan", ["separate", "auto", "panes+bint", "pairs+lint", "cutty+flatfat",
                                  "cutty+flatfit", "pairs+naive"])
@sane_settings(6)
@given(seed=st.integers(0, 2**32 - 1))
def test_long_streams(plan, seed):
    """Windows of hundreds of partials over 1200 elements (AFFINE: an O(1)
    non-commutative monoid), against the oracle."""
    import random

    from tests.strategies import AFFINE

    rng = random.Random(seed)
    agg = Aggregator(AFFINE, _value, name="affine")
    lag_ok = not _suffix_only(plan)
    queries = []
    for i in range(4):
        rows = rng.random() < 0.4
        width = rng.randrange(1, 300)
        slide = rng.choice([None, rng.randrange(1, 60), width])
        lag = rng.choice([0, rng.randrange(0, 100)]) if lag_ok else 0
        queries.append(Query(f"q{i}", agg, slide=slide, lag=lag, **({"rows": width} if rows else {"range": width})))
    shared = SharedWindows(queries, time=_time, plan=plan)
    oracle = MultiOracle(queries, time=_time)
    t = 0
    for k in range(1200):
        t += rng.choice([0, 0, 1, 1, 2, 5]) if rng.random() > 0.01 else rng.randrange(50, 400)
        value = AFFINE.identity if rng.random() < 0.05 else (rng.randrange(1, 1 << 61), rng.randrange(1 << 61))
        raw = (t, value)
        assert shared.push(raw) == oracle.push(raw), k
        if rng.random() < 0.02:
            name = rng.choice(queries).name
            assert shared.query(name) == oracle.query(name)
    assert shared.flush() == oracle.flush()


# ---------------------------------------------------------------------------
# TriWeave's shared slicer with any split of the queries into trees


@st.composite
def shared_slicer_plans(draw, queries):
    """Groups fed by one shared Slicer per key kind (time, rows): the queries
    of a kind split at random into up to three trees, one partial technique
    per slicer, each tree with a final technique its queries allow."""
    from mta.multi.plan import Group
    from mta.multi.shared_slicer import Slicer

    groups = []
    for by_rows in (False, True):
        kind = [q for q in queries if q.by_rows == by_rows]
        if not kind:
            continue
        slicer = Slicer(draw(st.sampled_from(["panes", "pairs", "cutty"])))
        trees: dict = {}
        for q in kind:
            trees.setdefault(draw(st.integers(0, 2)), []).append(q)
        for members in trees.values():
            final = draw(st.sampled_from(applicable_finals(members)))
            groups.append(Group(members, slicer.partial, final, None, slicer))
    return groups


@pytest.mark.parametrize("spec", [CONCAT_SPEC, FREE_SPEC, FIRST_SPEC], ids=repr)
@sane_settings(60)
@given(data=st.data())
def test_shared_slicer_against_oracle(spec, data):
    """Trees fed fragments by one slicer answer as the oracle, whatever the
    split, partial technique and finals (non-commutative CONCAT, the free
    group for the invertible finals, tagged first-max for SlickDeque (Non-Inv))."""
    queries = data.draw(query_sets(spec.aggregators[:1], max_queries=6), label="queries")
    groups = data.draw(shared_slicer_plans(queries), label="groups")
    ops = data.draw(operations(spec.values, max_ops=40), label="ops")
    run(queries, ops, spec, groups)


def test_triweave_plan_runs_one_slicer():
    """TriWeave's trees are fed by one slicer: str(plan) shows it, every tree
    of the shareable set points to it, and the stream is sliced once."""
    from mta.multi.plan import Group

    specs = [(r * s + s // 3, s) for r, s in [(3, 40), (5, 60), (2, 100), (7, 30), (4, 50), (6, 120)]]
    qs = [Query(f"q{i}", CONCAT_AGG, rows=r, slide=s) for i, (r, s) in enumerate(specs)]
    shared = SharedWindows(qs, plan="triweave")
    plan = shared.plan
    if len(plan.groups) > 1:
        assert len(plan.slicers) == 1 and all(g.slicer is plan.slicers[0] for g in plan.groups)
        assert "shared slicer 0" in str(plan) and "from shared slicer 0" in str(plan)
        assert len(shared._feeders) == 1
    else:
        assert plan.slicers == []  # one tree slices its own input
    # a hand-made split is checked: one slicer feeds trees of its own technique
    from mta.multi.shared_slicer import Slicer

    sl = Slicer("cutty")
    bad = [Group(qs[:3], "cutty", "bint", None, sl), Group(qs[3:], "pairs", "bint", None, sl)]
    with pytest.raises(ValueError, match="own partial technique"):
        SharedWindows(qs, plan=bad)
    mixed = [Group(qs[:3], "cutty", "bint", None, sl),
             Group([Query("x", CONCAT_AGG2, rows=5, slide=2)], "cutty", "bint", None, sl)]
    with pytest.raises(ValueError, match="cannot share partials"):
        SharedWindows(qs[:3] + list(mixed[1].queries), plan=mixed)
    with pytest.raises(TypeError, match="Slicer"):
        SharedWindows(qs, plan=[Group(qs, "cutty", "bint", None, "cutty")])
    # the same plan handed back runs the same
    again = SharedWindows(qs, plan=shared.plan)
    assert again.plan.groups == plan.groups and again.plan.estimate == plan.estimate

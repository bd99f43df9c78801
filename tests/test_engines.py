"""Every engine against the brute-force oracle, on random interleavings of
insert, evict, enforce, push and query.

* CONCAT (the exact, ordered window contents) is the main monoid and runs on
  every engine that takes a general monoid (both MTAs, Recalc, TwoStacks,
  DABA cached and uncached, FlatFAT, FlatFIT);
* the other test monoids (see :mod:`tests.strategies`) run on every engine
  supporting them: invertible ones (integer sum, free group x count,
  SL(2, Z) x count) also on SubtractOnEvict and SlickDeque "inv", selective
  ones ("first max wins" and "last max wins", tagged so ties show) also on
  SlickDeque "noninv";
* the ready slide policies run through :class:`mta.window.Window` (engine=E
  compared to engine=BruteForceWindow), and on their own dimension directly;
* MTA level queues compacting after 0 or 1 dead elements.

Values equal to the identity are inserted as ordinary elements throughout.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta.errors import CountError, EmptyWindowError
from mta.level_queue import MemoryLevelQueue
from mta.monoid import Aggregator, product_monoid
from mta.policies import COUNT_MONOID, MAX_MONOID, AllOf, AnyOf, Count, OlderThanMax, SumAtMost, TimeRange
from mta.window import Window
from tests.oracle import CONCAT, BruteForceWindow
from tests.strategies import (
    AFFINE,
    ALWAYS,
    CONCAT_SPEC,
    ENGINES,
    FIRST_MAX,
    FREE_GROUP,
    MONOIDS,
    MTA_ENGINES,
    NEVER,
    PrefixOracle,
    Wsp,
    drain_against_oracle,
    map_raws,
    engine_monoid_pairs,
    operations,
    run_against_oracle,
    SUM_INV,
    sane_settings,
)

CONCAT_PAIRS = engine_monoid_pairs(monoids=[CONCAT_SPEC])
OTHER_PAIRS = engine_monoid_pairs(monoids=[m for m in MONOIDS if m is not CONCAT_SPEC])
ENGINE_PARAMS = [pytest.param(e, id=e.name) for e in ENGINES]
MTA_PARAMS = [pytest.param(e, id=e.name) for e in MTA_ENGINES]


def test_every_engine_is_tested():
    """Each engine configuration meets at least one test monoid (and CONCAT
    unless it needs an inverse or a selective monoid)."""
    for e in ENGINES:
        assert any(e.supports(m.monoid) for m in MONOIDS), e
        assert e.supports(CONCAT) == (e.needs is None), e
    assert {"inverse", "selective", None} == {e.needs for e in ENGINES}


# ---------------------------------------------------------------------------
# random operations against the oracle


def _random_operations(engine, spec, data) -> None:
    """A drawn slide policy and operation list on ``engine`` against the oracle."""
    wsp = data.draw(spec.wsps, label="wsp")
    ops = data.draw(operations(spec.raws, max_ops=30, max_run=16), label="ops")
    run_against_oracle(engine(spec.monoid, wsp), BruteForceWindow(spec.monoid, wsp), ops, spec.make)


@pytest.mark.parametrize(("engine", "spec"), CONCAT_PAIRS)
@sane_settings(250)
@given(data=st.data())
def test_concat_random_operations(engine, spec, data):
    _random_operations(engine, spec, data)


@pytest.mark.parametrize(("engine", "spec"), OTHER_PAIRS)
@sane_settings(40)
@given(data=st.data())
def test_other_monoids_random_operations(engine, spec, data):
    _random_operations(engine, spec, data)


@pytest.mark.parametrize("engine", [p for p in ENGINE_PARAMS if p.values[0].needs is None])
@sane_settings(25)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(200, 1500), keep=st.integers(0, 300))
def test_long_windows(engine, seed, n, keep):
    """Deeper trees than the operation lists reach: a window of up to 1500,
    bulk evictions of hundreds of elements, single evictions, against an O(n)
    oracle (AFFINE: an O(1), non-commutative monoid)."""
    rng = random.Random(seed)
    count = Wsp(f"keep>={keep}", lambda t, p: t[1] - p[1] >= keep)  # over (map, count) pairs
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    e, o = engine(monoid, count), PrefixOracle(monoid, count)

    def value():
        if rng.random() < 0.05:
            return monoid.identity
        return ((rng.randrange(1, 1 << 61), rng.randrange(1 << 61)), 1)

    insert_both(e, o, value, n)
    assert e.query() == o.query()
    for _ in range(6):
        assert e.enforce() == o.enforce()
        assert len(e) == len(o) and e.query() == o.query()
        churn_both(e, o, value, rng, keep)
        assert len(e) == len(o) and e.query() == o.query()
    drain_against_oracle(e, o)


def insert_both(e, o, value, n: int) -> None:
    """``n`` values from ``value()`` inserted into the engine and its oracle."""
    for _ in range(n):
        v = value()
        e.insert(v)
        o.insert(v)


def churn_both(e, o, value, rng: random.Random, keep: int) -> None:
    """A phase of test_long_windows (and its store twin): up to ``2 keep +
    50`` inserts, then up to 40 single evictions, the same on both."""
    insert_both(e, o, value, rng.randrange(0, 2 * keep + 50))
    for _ in range(min(len(o), rng.randrange(0, 40))):
        e.evict()
        o.evict()


# ---------------------------------------------------------------------------
# the empty window and the trivial policies


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_empty_window(engine):
    """Empty: query is the identity, enforce evicts 0 (even with a policy that
    always holds), evict raises EmptyWindowError (an IndexError) and leaves
    the engine usable; a value equal to the identity is an element."""
    spec = next(m for m in MONOIDS if engine.supports(m.monoid))
    monoid = spec.monoid
    for wsp in (None, ALWAYS, NEVER):
        e = engine(monoid, wsp)
        assert len(e) == 0 and e.query() == monoid.identity
        assert e.enforce() == 0
        for _ in range(2):
            with pytest.raises(EmptyWindowError):
                e.evict()
            with pytest.raises(IndexError):
                e.evict()
        assert len(e) == 0 and e.query() == monoid.identity
        e.insert(monoid.identity)  # the identity is an ordinary element
        assert len(e) == 1 and e.query() == monoid.identity
        assert e.enforce() == (1 if wsp is ALWAYS else 0)
        assert len(e) == (0 if wsp is ALWAYS else 1)
        assert e.push(monoid.identity) == monoid.identity
        assert len(e) == (0 if wsp is ALWAYS else 2)
        while len(e):
            e.evict()
        with pytest.raises(EmptyWindowError):
            e.evict()
        assert e.query() == monoid.identity


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_bad_counts_are_refused_before_any_change(engine):
    """bulk_evict and slide with a count that is not a non-negative integer
    (CountError, a ValueError), or that asks for more than the window holds
    (EmptyWindowError), raise before any change: the engine stays usable and
    its window intact; numpy integers are counts like ints."""
    np = pytest.importorskip("numpy")
    monoid, v = {None: (CONCAT, lambda i: (i,)), "inverse": (SUM_INV, lambda i: 2**i),
                 "selective": (FIRST_MAX, lambda i: (i % 3, i))}[engine.needs]
    e, o = engine(monoid), BruteForceWindow(monoid)
    for i in range(5):
        e.insert(v(i))
        o.insert(v(i))
    for call, error in [(lambda: e.bulk_evict(1.0), CountError), (lambda: e.bulk_evict(-1), CountError),
                        (lambda: e.bulk_evict(6), EmptyWindowError), (lambda: e.bulk_evict(True), CountError),
                        (lambda: e.slide([v(8), v(9)], [0, 8]), EmptyWindowError),
                        (lambda: e.slide([v(8), v(9)], [0]), CountError),
                        (lambda: e.slide([v(8)], [-1]), CountError),
                        (lambda: e.slide([v(8)], ["1"]), CountError)]:
        with pytest.raises(error):
            call()
        assert len(e) == 5 and e.query() == o.query()
    e.bulk_evict(np.int64(2))
    o.bulk_evict(2)
    assert e.slide([v(5), v(6)], [np.int64(1), 0]) == o.slide([v(5), v(6)], [1, 0])
    assert len(e) == len(o) and e.query() == o.query()


@pytest.mark.parametrize("engine", [p for p in ENGINE_PARAMS if p.values[0].needs is None])
def test_identity_values_only(engine):
    """A window holding only identity values (CONCAT's ``()``): len counts
    them, every policy sees them, evict removes them one at a time."""
    wsp = Wsp("len(total)-len(prefix)>=0", lambda t, p: len(t) - len(p) >= 0)  # always holds
    for w in (None, NEVER, wsp):
        e, o = engine(CONCAT, w), BruteForceWindow(CONCAT, w)
        for i in range(37):
            e.insert(())
            o.insert(())
            assert len(e) == i + 1 and e.query() == ()
        assert e.enforce() == o.enforce()
        assert len(e) == len(o)
        e.insert((1,))
        o.insert((1,))
        drain_against_oracle(e, o)


# ---------------------------------------------------------------------------
# ready policies through Window, against Window(engine=BruteForceWindow)


def fst(raw):
    return raw[0]


def snd(raw):
    return raw[1]


#: Exact window contents as the aggregation: raw -> (raw,), lowered to a list.
CONTENTS = Aggregator(CONCAT, lambda raw: (raw,), list, name="contents")
#: A non-commutative invertible aggregation (the free group) for SubtractOnEvict
#: and SlickDeque "inv": the value 0 lifts to the identity ().
WORDS = Aggregator(FREE_GROUP, lambda raw: () if raw[1] == 0 else (raw[1] % 3 + 1,) * (1 + raw[1] % 2), name="words")

#: raw inputs are (time, value); operations draw (dt, value) and times accumulate.
RAWS = st.tuples(st.integers(0, 3), st.integers(0, 5))

count_policies = st.integers(1, 8).map(Count)
base_policies = st.one_of(
    count_policies,
    st.integers(1, 10).map(lambda r: TimeRange(r, time=fst)),
    st.floats(0.5, 6.0).map(lambda r: TimeRange(r, time=fst)),
    st.integers(0, 15).map(lambda b: SumAtMost(b, value=snd)),
    st.just(None).map(lambda _: OlderThanMax(value=snd)),
)


def combinations_of(base: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        base,
        base,
        st.builds(AnyOf, base, base),
        st.builds(AllOf, base, base),
        st.builds(lambda a, b, c: (a & b) | c, base, base, base),
        st.builds(lambda a, b, c: AllOf(a | b, c), base, base, base),
    )


ready_policies = combinations_of(base_policies)
count_only_policies = combinations_of(count_policies)


def timed(ops):
    """(dt, value) raws -> (time, value) raws with non-decreasing times."""
    t = 0

    def fix(raw):
        nonlocal t
        t += raw[0]
        return (t, raw[1])

    return map_raws(ops, fix)


def lifted(w: Window, raw):
    """What Window inserts for ``raw``: (aggregator dimension, policy dimension)."""
    return (w.aggregator.lift(raw), w.policy.lift(raw))


def run_windows(w: Window, ref: Window, ops) -> None:
    """Window ops (push, extend, evict, query) and engine-level insert and
    enforce, compared with the reference window."""
    for step, op in enumerate(ops):
        kind, where = op[0], f"step {step} {op!r}"
        if kind == "push":
            assert w.push(op[1]) == ref.push(op[1]), where
        elif kind == "extend":
            assert w.extend(op[1]) == ref.extend(op[1]), where
        elif kind == "insert":  # insert without enforcing the policy
            w.engine.insert(lifted(w, op[1]))
            ref.engine.insert(lifted(ref, op[1]))
        elif kind == "enforce":
            assert w.engine.enforce() == ref.engine.enforce(), where
        elif kind == "query":
            assert w.query() == ref.query(), where
        elif kind == "evict":
            if len(ref):
                w.evict()
                ref.evict()
            else:
                with pytest.raises(IndexError):
                    w.evict()
        elif kind == "bulk_evict":
            if op[1] <= len(ref):
                w.engine.bulk_evict(op[1])
                ref.engine.bulk_evict(op[1])
            else:
                with pytest.raises(IndexError):
                    w.engine.bulk_evict(op[1])
        elif kind == "slide":  # on the engines, evictions clipped to the window
            values, evictions, n = [], [], len(ref)
            for raw, k in op[1]:
                values.append(lifted(w, raw))
                n += 1
                evictions.append(min(k, n))
                n -= evictions[-1]
            assert w.engine.slide(values, evictions) == ref.engine.slide(values, evictions), where
        else:
            assert kind in ("push", "extend", "insert", "enforce", "query"), kind
        assert len(w) == len(ref), where
    assert w.query() == ref.query()
    while len(ref):
        w.evict()
        ref.evict()
        assert len(w) == len(ref) and w.query() == ref.query()
    with pytest.raises(IndexError):
        w.evict()


@pytest.mark.parametrize("engine", [p for p in ENGINE_PARAMS if p.values[0].needs is None])
@sane_settings(60)
@given(policy=ready_policies, ops=operations(RAWS, max_ops=30, max_run=12))
def test_window_ready_policies(engine, policy, ops):
    """Count, TimeRange, SumAtMost, OlderThanMax and their AnyOf/AllOf
    combinations, over the exact contents: Window(engine=E) == Window(engine=brute)."""
    ops = timed(ops)
    w = Window(CONTENTS, policy, engine=engine.cls, **engine.options)
    ref = Window(CONTENTS, policy, engine=BruteForceWindow)
    run_windows(w, ref, ops)


@pytest.mark.parametrize("engine", [p for p in ENGINE_PARAMS if p.values[0].needs == "inverse"])
@sane_settings(60)
@given(policy=count_only_policies, ops=operations(RAWS, max_ops=30, max_run=12))
def test_window_invertible_engines(engine, policy, ops):
    """SubtractOnEvict and SlickDeque "inv" in a Window: the free group next to
    Count policies (the product is invertible)."""
    ops = timed(ops)
    w = Window(WORDS, policy, engine=engine.cls, **engine.options)
    ref = Window(WORDS, policy, engine=BruteForceWindow)
    run_windows(w, ref, ops)


def _policies_for(engine) -> st.SearchStrategy:
    if engine.needs == "selective":  # the max dimension is selective
        return st.one_of(
            st.integers(1, 10).map(lambda r: TimeRange(r, time=fst)), st.just(None).map(lambda _: OlderThanMax(value=snd))
        )
    if engine.needs == "inverse":  # the count dimension is invertible
        return count_only_policies
    return ready_policies


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
@sane_settings(40)
@given(data=st.data())
def test_ready_policies_on_their_own_dimension(engine, data):
    """A ready policy's WSP straight on its own monoid (policy.monoid,
    policy.lift, policy.holds): every engine, SlickDeque "noninv" included
    (TimeRange and OlderThanMax run on the selective max)."""
    policy = data.draw(_policies_for(engine), label="policy")
    ops = timed(data.draw(operations(RAWS, max_ops=30, max_run=12), label="ops"))
    if engine.needs == "selective":
        assert policy.monoid is MAX_MONOID
    run_against_oracle(engine(policy.monoid, policy.holds), BruteForceWindow(policy.monoid, policy.holds),
                       map_raws(ops, policy.lift))


# ---------------------------------------------------------------------------
# level-queue compaction on every occasion


@pytest.mark.parametrize("compact_after", [0, 1])
@pytest.mark.parametrize("engine", MTA_PARAMS)
@sane_settings(80)
@given(data=st.data())
def test_mta_compaction_random_operations(engine, compact_after, data):
    """MemoryLevelQueue.COMPACT_AFTER = 0 or 1: levels compact (and feed the
    graveyard) on nearly every advance."""
    spec = CONCAT_SPEC
    wsp = data.draw(spec.wsps, label="wsp")
    ops = data.draw(operations(spec.raws, max_ops=30, max_run=16), label="ops")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MemoryLevelQueue, "COMPACT_AFTER", compact_after)
        run_against_oracle(engine(spec.monoid, wsp), BruteForceWindow(spec.monoid, wsp), ops, spec.make)


@pytest.mark.parametrize("compact_after", [0, 1, 7])
@pytest.mark.parametrize("engine", MTA_PARAMS)
def test_mta_compaction_long_run(engine, compact_after):
    """A long run with tiny compaction thresholds; checks compaction did happen
    (a level's list no longer starts at position 0)."""
    rng = random.Random(compact_after)
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MemoryLevelQueue, "COMPACT_AFTER", compact_after)
        keep = [0]
        wsp = Wsp("keep", lambda t, p: t[1] - p[1] >= keep[0])
        e, o = engine(monoid, wsp), PrefixOracle(monoid, wsp)
        compacted = False
        for _ in range(300):
            keep[0] = rng.choice([0, 1, 3, 10, 50, 200, 1000])
            for _ in range(rng.randrange(0, 60)):
                v = ((rng.randrange(1, 1 << 61), rng.randrange(1 << 61)), 1)
                e.insert(v)
                o.insert(v)
            if rng.random() < 0.5:
                assert e.enforce() == o.enforce()
            else:
                for _ in range(min(len(o), rng.randrange(0, 5))):
                    e.evict()
                    o.evict()
            assert len(e) == len(o) and e.query() == o.query()
            bases = e._core.level_bases() if hasattr(e, "_core") else [q._base for q in e._levels]
            compacted = compacted or any(b > 0 for b in bases)
        assert compacted
        drain_against_oracle(e, o)

"""mta.aggregators against the standard library, folded in random tree shapes."""

from __future__ import annotations

import math
import os
import pickle
import random
import statistics
import subprocess
import sys
from fractions import Fraction
from operator import itemgetter

import pytest
from hypothesis import given, strategies as st

from mta import aggregators as A
from mta.monoid import product

ints = st.lists(st.integers(-10**6, 10**6), max_size=40)
small_ints = st.lists(st.integers(0, 6), max_size=40)  # many ties and short runs
floats = st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=40)
positives = st.lists(st.floats(1e-3, 1e6), max_size=40)
records = st.lists(st.tuples(st.integers(0, 10**4), st.integers(-3, 3)), max_size=40)
tokens = st.lists(st.one_of(st.integers(-5, 5), st.text("ab", max_size=2)), max_size=40)
fractions = st.lists(st.fractions(-100, 100, max_denominator=50), max_size=15)


def tree_fold(monoid, values, rnd: random.Random):
    """Fold ``values`` in a random bracketing, sprinkling identities."""
    if not values:
        return monoid.identity
    if len(values) == 1:
        r = rnd.random()
        if r < 0.2:
            return monoid.combine(monoid.identity, values[0])
        return monoid.combine(values[0], monoid.identity) if r < 0.4 else values[0]
    k = rnd.randint(1, len(values) - 1)
    return monoid.combine(tree_fold(monoid, values[:k], rnd), tree_fold(monoid, values[k:], rnd))


def run_tree(agg, raws, seed):
    return agg.lower(tree_fold(agg.monoid, [agg.lift(x) for x in raws], random.Random(seed)))


def close(x, y, rel=1e-9, abs_=1e-6) -> bool:
    if x is None or y is None:
        return x is y
    if isinstance(x, tuple):
        return len(x) == len(y) and all(close(a, b, rel, abs_) for a, b in zip(x, y))
    return math.isclose(x, y, rel_tol=rel, abs_tol=abs_)


def or_none(f, at_least=1):
    return lambda xs: f(xs) if len(xs) >= at_least else None


def brute_run(xs):
    """Oldest longest strictly increasing contiguous run as (start, end, length)."""
    best = (0, 0)
    for i in range(len(xs)):
        j = i + 1
        while j < len(xs) and xs[j - 1] < xs[j]:
            j += 1
        if j - i > best[1] - best[0]:
            best = (i, j)
    return (*best, best[1] - best[0]) if xs else None


# name, aggregator, raw inputs, reference, tolerances (None: exact)
CASES = [
    ("sum-int", A.SUM, ints, sum, None),
    ("sum-float", A.SUM, floats, math.fsum, (1e-9, 1e-6)),
    ("count", A.COUNT, floats, len, None),
    ("min", A.MIN, floats, or_none(min), None),
    ("max", A.MAX, ints, or_none(max), None),
    ("mean", A.MEAN, floats, or_none(statistics.mean), (1e-9, 1e-6)),
    ("geomean", A.GEOMEAN, positives, or_none(statistics.geometric_mean), (1e-9, 0)),
    ("variance", A.VARIANCE, floats, or_none(statistics.variance, 2), (1e-7, 1e-6)),
    ("var_pop", A.VAR_POP, floats, or_none(statistics.pvariance), (1e-7, 1e-6)),
    ("stddev", A.STDDEV, floats, or_none(statistics.stdev, 2), (1e-7, 1e-3)),
    ("stddev_pop", A.STDDEV_POP, floats, or_none(statistics.pstdev), (1e-7, 1e-3)),
    ("variance-exact", A.VARIANCE, fractions, or_none(statistics.variance, 2), None),
    ("first", A.FIRST, ints, or_none(itemgetter(0)), None),
    ("last", A.LAST, ints, or_none(itemgetter(-1)), None),
    ("collect", A.COLLECT, ints, tuple, None),
    ("argmax", A.ARGMAX, records, or_none(lambda xs: max(xs, key=itemgetter(1))), None),
    ("argmin", A.ARGMIN, records, or_none(lambda xs: min(xs, key=itemgetter(1))), None),
    ("argmax-key", A.argmax(key=abs), ints, or_none(lambda xs: max(xs, key=abs)), None),
    ("latest", A.LATEST, records, or_none(lambda xs: max(t for t, _ in xs)), None),
    ("longest_run", A.LONGEST_RUN, small_ints, brute_run, None),
    ("longest_run-key", A.longest_run(key=itemgetter(1)), records,
     lambda xs: brute_run([v for _, v in xs]), None),
]


@pytest.mark.parametrize("name, agg, raws, reference, tol", CASES, ids=[c[0] for c in CASES])
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_tree_fold_matches_reference(name, agg, raws, reference, tol, data, seed):
    raws = data.draw(raws)
    got, want = run_tree(agg, raws, seed), reference(raws)
    if tol is None:
        assert got == want
    else:
        assert close(got, want, *tol), (got, want)


def test_by_name_and_get():
    required = {"sum", "count", "min", "max", "mean", "geomean", "variance", "stddev", "var_pop",
                "stddev_pop", "first", "last", "collect", "argmax", "argmin", "latest"}
    assert required <= set(A.BY_NAME)
    for name, agg in A.BY_NAME.items():
        assert A.get(name) is agg and agg.name == name
    assert A.get(" Max ") is A.MAX
    with pytest.raises(ValueError, match="unknown aggregator 'median'.*mean.*stddev"):
        A.get("median")


def test_ready_declarations():
    """Each ready aggregation is declared once (mta.aggregators.READY): BY_NAME
    and the help texts come from it, and what it says an empty window gives
    is what its aggregator gives."""
    assert list(A.READY) == ["sum", "count", "min", "max", "mean", "geomean", "variance", "stddev", "var_pop",
                             "stddev_pop", "first", "last"]
    assert [name for name, _ in A.describe()] == list(A.READY)
    for name, ready in A.READY.items():
        assert ready.name == name and A.BY_NAME[name] is ready.aggregator and ready.aggregator.name == name
        assert ready.result in ("value", "floating", "count")
        assert ready.help and "\n" not in ready.help
        assert ready.aggregator.aggregate([]) == ready.empty


EMPTY = {"sum": 0, "count": 0, "collect": ()}


@pytest.mark.parametrize("name", sorted(A.BY_NAME))
def test_empty_window(name):
    agg = A.BY_NAME[name]
    got = agg.aggregate([])
    if name == "countmin":
        assert got.total == 0 and got("x") == 0
    else:
        assert got == EMPTY.get(name)


def test_sample_variance_needs_two_values():
    assert A.VARIANCE.aggregate([3.0]) is None and A.STDDEV.aggregate([3.0]) is None
    assert A.VAR_POP.aggregate([3.0]) == 0 and A.STDDEV_POP.aggregate([3.0]) == 0


@given(xs=st.lists(st.one_of(st.integers(-5, 5).map(float), st.just(0.0)), max_size=20),
       infinite=st.lists(st.sampled_from([math.inf, -math.inf]), min_size=1, max_size=3),
       seed=st.integers(0, 50), at=st.randoms(use_true_random=False))
def test_spread_of_a_window_with_an_infinite_value_is_nan_in_any_tree(xs, infinite, seed, at):
    """A window holding an infinite value has an undefined spread: NaN,
    however the engine's tree combines it (below ddof + 1 values: None)."""
    for x in infinite:
        xs.insert(at.randrange(len(xs) + 1), x)
    for agg, ddof in ((A.VARIANCE, 1), (A.STDDEV, 1), (A.VAR_POP, 0), (A.STDDEV_POP, 0)):
        got = run_tree(agg, xs, seed)
        assert got is None if len(xs) <= ddof else math.isnan(got), (agg.name, xs, got)


# -- monoid laws and truthful declarations, on exact-valued inputs ----------

# aggregator, exact raw inputs (variance on Fractions is exact, too)
EXACT = [
    (A.SUM, ints), (A.COUNT, ints), (A.MEAN, ints), (A.MIN, small_ints), (A.MAX, small_ints),
    (A.VARIANCE, fractions), (A.FIRST, ints), (A.LAST, ints), (A.COLLECT, ints),
    (A.ARGMAX, records), (A.ARGMIN, records), (A.LATEST, records),
    (A.LONGEST_RUN, small_ints), (A.count_min(8, 2), tokens),
]
EXACT_IDS = [a.name for a, _ in EXACT]


def three_folds(data, agg, raws_strategy):
    return [agg.monoid.fold(map(agg.lift, data.draw(raws_strategy))) for _ in range(3)]


@pytest.mark.parametrize("agg, raws", EXACT, ids=EXACT_IDS)
@given(data=st.data())
def test_associative_and_identity(agg, raws, data):
    m = agg.monoid
    a, b, c = three_folds(data, agg, raws)
    assert m.combine(m.combine(a, b), c) == m.combine(a, m.combine(b, c))
    assert m.combine(m.identity, a) == a == m.combine(a, m.identity)


@pytest.mark.parametrize("agg, raws", EXACT, ids=EXACT_IDS)
@given(data=st.data())
def test_declared_flags_hold(agg, raws, data):
    m = agg.monoid
    a, b, c = three_folds(data, agg, raws)
    if m.inverse is not None:
        assert m.inverse(m.combine(b, c), b) == c
        assert m.inverse(m.combine(b, c), m.identity) == m.combine(b, c)
    if m.commutative:
        assert m.combine(a, b) == m.combine(b, a)
    if m.selective:
        r = m.combine(a, b)
        assert r is a or r is b


def test_flag_declarations():
    invertible = {"sum", "count", "mean", "geomean", "variance", "stddev", "var_pop",
                  "stddev_pop", "collect", "countmin"}
    selective = {"min", "max", "first", "last", "argmax", "argmin", "latest"}
    commutative = (invertible | selective) - {"collect", "first", "last", "argmax", "argmin"}
    for name, agg in A.BY_NAME.items():
        m = agg.monoid
        assert (m.inverse is not None) == (name in invertible), name
        assert m.selective == (name in selective), name
        assert m.commutative == (name in commutative), name


def test_non_commutative_witnesses():
    for agg, x, y in [(A.FIRST, 1, 2), (A.LAST, 1, 2), (A.COLLECT, 1, 2),
                      (A.ARGMAX, (0, 5), (1, 5)), (A.ARGMIN, (0, 5), (1, 5)),
                      (A.LONGEST_RUN, 1, 2)]:
        m, a, b = agg.monoid, agg.lift(x), agg.lift(y)
        assert m.combine(a, b) != m.combine(b, a), agg.name


def test_argmax_ties_go_to_the_oldest():
    xs = [(10, 1), (11, 7), (12, 7), (13, 7), (14, 2)]
    for seed in range(50):
        assert run_tree(A.ARGMAX, xs, seed) == (11, 7)
        assert run_tree(A.ARGMIN, [(0, 3), (1, 1), (2, 1)], seed) == (1, 1)
        assert run_tree(A.argmin(key=lambda r: -r[1]), xs, seed) == (11, 7)


@given(floats, floats)
def test_float_inverses_approximately_truthful(bs, cs):
    for agg, tol in [(A.SUM, (1e-9, 1e-6)), (A.MEAN, (1e-9, 1e-6)), (A.VAR_POP, (1e-6, 1e-3))]:
        m = agg.monoid
        b, c = (m.fold(map(agg.lift, xs)) for xs in (bs, cs))
        assert close(agg.lower(m.inverse(m.combine(b, c), b)), agg.lower(c), *tol)


@given(positives, positives)
def test_geomean_inverse_approximately_truthful(bs, cs):
    m, lift = A.GEOMEAN.monoid, A.GEOMEAN.lift
    b, c = (m.fold(map(lift, xs)) for xs in (bs, cs))
    assert close(A.GEOMEAN.lower(m.inverse(m.combine(b, c), b)), A.GEOMEAN.lower(c), 1e-9, 0)


@pytest.mark.parametrize("bad", [0, -1.5, float("nan")])
def test_geomean_rejects_non_positive(bad):
    with pytest.raises(ValueError, match="geomean: inputs must be positive"):
        A.GEOMEAN.lift(bad)


def test_variance_is_numerically_stable():
    rnd = random.Random(7)
    xs = [1e9 + rnd.uniform(-1, 1) for _ in range(2000)]
    exact = statistics.variance(xs)  # computed on exact fractions
    naive = (math.fsum(x * x for x in xs) - math.fsum(xs) ** 2 / len(xs)) / (len(xs) - 1)
    assert not math.isclose(naive, exact, rel_tol=1e-2)  # the data is hard
    for seed in range(5):
        assert math.isclose(run_tree(A.VARIANCE, xs, seed), exact, rel_tol=1e-6)
    # removing most of the window through the inverse stays accurate, too
    m, lifted = A.MOMENTS, [A.VARIANCE.lift(x) for x in xs]
    rest = m.inverse(m.fold(lifted), m.fold(lifted[:1500]))
    assert math.isclose(A.VARIANCE.lower(rest), statistics.variance(xs[1500:]), rel_tol=1e-4)


@given(small_ints)
def test_longest_run_positions_index_the_window(xs):
    got = A.LONGEST_RUN.aggregate(xs)
    if got is not None:
        start, end, length = got
        run = xs[start:end]
        assert length == len(run) >= 1 and all(p < q for p, q in zip(run, run[1:]))


# -- Count-Min sketch ---------------------------------------------------------

@given(tokens, st.integers(0, 2**32))
def test_count_min_never_underestimates(xs, seed):
    small, big = A.count_min(8, 2), A.count_min(1024, 4)
    q_small, q_big = run_tree(small, xs, seed), run_tree(big, xs, seed)
    assert q_small.total == q_big.total == len(xs)
    for x in set(xs) | {"absent"}:
        assert q_small(x) >= xs.count(x)
        assert q_big(x) == xs.count(x)  # wide enough: no collision in every row


def test_count_min_hashing_ignores_pythonhashseed():
    code = "from mta import aggregators as A; print(A._cm_rows(64, 4, ('abc', 1, 2.5)))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(A.__file__)))
    outs = {
        subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {str(A._cm_rows(64, 4, ("abc", 1, 2.5)))}


@pytest.mark.parametrize("width, depth", [(0, 4), (8, 0), (8, 17)])
def test_count_min_checks_its_shape(width, depth):
    with pytest.raises(ValueError, match="count_min needs"):
        A.count_min(width, depth)


# -- values are plain data, aggregators travel ----------------------------------

def plain(v) -> bool:
    if isinstance(v, tuple):
        return all(map(plain, v))
    return v is None or type(v) in (int, float, str, bool, Fraction)


SAMPLES = {"argmax": [(1, 2), (2, 3)], "argmin": [(1, 2), (2, 3)], "latest": [(1, 2), (2, 3)]}


@pytest.mark.parametrize("name", sorted(A.BY_NAME))
def test_values_are_plain_and_aggregators_pickle(name):
    agg = A.BY_NAME[name]
    raws = SAMPLES.get(name, [3, 1, 4, 1, 5])
    lifted = [agg.lift(x) for x in raws]
    assert plain(agg.monoid.identity) and all(map(plain, lifted))
    assert plain(agg.monoid.fold(lifted))
    again = pickle.loads(pickle.dumps(agg))
    want, got = agg.aggregate(raws), again.aggregate(raws)
    assert (got.counts == want.counts) if name == "countmin" else got == want


def test_msgpack_round_trip():
    msgpack = pytest.importorskip("msgpack")
    for name, agg in A.BY_NAME.items():
        raws = SAMPLES.get(name, [3, 1, 4, 1, 5])
        m = agg.monoid
        v = m.fold(map(agg.lift, raws))
        back = msgpack.unpackb(msgpack.packb(v), use_list=False)
        assert m.combine(back, agg.lift(raws[0])) == m.combine(v, agg.lift(raws[0])), name


def test_product_of_ready_aggregators():
    agg = product(A.MEAN, A.STDDEV, A.MAX, A.LONGEST_RUN)
    xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    mean, sd, mx, run = agg.aggregate(xs)
    assert mean == 5.0 and math.isclose(sd, statistics.stdev(xs)) and mx == 9.0
    assert run == (5, 8, 3)  # [5.0, 7.0, 9.0]


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 9])
def test_products_apply_each_component_in_place(width):
    """A product's written-out lift, combine and lower (any width, identity
    lifts and lowers passed through without a call) against each
    component's own, on a non-commutative monoid beside ready ones."""
    from mta.monoid import Aggregator, Monoid

    concat = Aggregator(Monoid(lambda a, b: a + b, ()), lambda x: (x,), lambda v: "".join(map(str, v)))
    pool = [A.MAX, concat, A.MEAN, A.SUM, A.FIRST]
    parts = [pool[i % len(pool)] for i in range(width)]
    agg = product(*parts)
    raws = [3, 1, 4, 1, 5]
    lifted = [agg.lift(r) for r in raws]
    assert lifted == [tuple(p.lift(r) for p in parts) for r in raws]
    folded = agg.monoid.fold(lifted)
    assert folded == tuple(p.monoid.fold(p.lift(r) for r in raws) for p in parts)
    assert agg.monoid.combine(agg.monoid.identity, folded) == folded
    assert agg.lower(folded) == tuple(p.aggregate(raws) for p in parts)
    assert agg.monoid.combine.components == tuple(p.monoid.combine for p in parts)

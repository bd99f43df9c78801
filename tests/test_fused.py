"""mta.fused (several ready aggregations as one monoid over shared moments)
and its use by the batch window (spark_ops.sorted_window.SortedWindow),
against brute force over each window.

The fused element is checked on random bracketings with identities
sprinkled in (as an engine's tree combines it), exactly on Fractions and
within the ready aggregations' float tolerances on floats; its Arrow
lowering against its per-value lowering; and the batch window's pushes
against the window's values recomputed from scratch, for the memory, file
and Redis stores, with a job that fuses and one that cannot (a
non-commutative user monoid beside the ready ones).
"""

from __future__ import annotations

import math
import pickle
import random
import statistics
from fractions import Fraction

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from mta import Aggregator, Monoid, fused, product
from mta import aggregators as A
from spark_ops import aggregations
from spark_ops.sorted_window import SortedWindow
from spark_ops.spec import WindowSpec
from tests.store_fixtures import fresh_window, store_url  # noqa: F401  (fixture)
from tests.strategies import sane_settings
from tests.test_aggregators import close, tree_fold

NAMES = tuple(fused.FUSABLE)

#: Brute force per fusable aggregation (None where the ready one gives None).
REFERENCE = {
    "sum": sum, "count": len,
    "min": lambda xs: min(xs) if xs else None, "max": lambda xs: max(xs) if xs else None,
    "mean": lambda xs: sum(xs) / len(xs) if xs else None,
    "variance": lambda xs: statistics.variance(xs) if len(xs) > 1 else None,
    "var_pop": lambda xs: statistics.pvariance(xs) if xs else None,
    "stddev": lambda xs: statistics.stdev(xs) if len(xs) > 1 else None,
    "stddev_pop": lambda xs: statistics.pstdev(xs) if xs else None,
}

floats = st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=40)
ints = st.lists(st.integers(-10**6, 10**6), max_size=40)
fractions = st.lists(st.fractions(-100, 100, max_denominator=50), max_size=15)
name_lists = st.lists(st.sampled_from(NAMES), min_size=1, max_size=6)


def fused_of(names):
    agg = fused.fuse([A.READY[n].aggregator for n in names])
    assert agg is not None and fused.fused_names(agg) == tuple(names)
    return agg


def folded(names, xs, seed):
    """The fused aggregation of ``names`` over ``xs``, combined in a random
    bracketing (``seed``)."""
    agg = fused_of(names)
    return agg.lower(tree_fold(agg.monoid, [agg.lift(x) for x in xs], random.Random(seed)))


def test_every_fusable_name_is_a_ready_aggregation_with_its_empty_result():
    for name in NAMES:
        assert name in A.READY
        assert fused.FUSABLE[name](fused.IDENTITY) == A.READY[name].aggregator.aggregate([])


@sane_settings(100)
@given(names=name_lists, xs=floats, seed=st.integers(0, 2**32))
def test_floats_in_any_bracketing_match_brute_force(names, xs, seed):
    got = folded(names, xs, seed)
    for name, result in zip(names, got):
        assert close(result, REFERENCE[name](xs), 1e-7, 1e-3), (name, xs, result)


@sane_settings(100)
@given(names=name_lists, xs=ints, seed=st.integers(0, 2**32))
def test_integers_keep_exact_sums_counts_and_extremes(names, xs, seed):
    got = folded(names, xs, seed)
    for name, result in zip(names, got):
        want = REFERENCE[name](xs)
        if name in ("sum", "count", "min", "max"):
            assert result == want and type(result) is type(want), (name, xs, result)
        else:
            assert close(result, want, 1e-7, 1e-3), (name, xs, result)


@sane_settings(100)
@given(xs=fractions, seed=st.integers(0, 2**32))
def test_fractions_are_exact(xs, seed):
    got = folded(NAMES[:-2], xs, seed)  # every name but the square roots
    assert list(got) == [REFERENCE[name](xs) for name in NAMES[:-2]]


@sane_settings(100)
@given(data=st.data())
def test_associative_commutative_with_identity_on_fractions(data):
    m = fused.MONOID
    a, b, c = (m.fold(map(fused._lift, data.draw(fractions))) for _ in range(3))
    assert m.combine(m.combine(a, b), c) == m.combine(a, m.combine(b, c))
    assert m.combine(m.identity, a) == a == m.combine(a, m.identity)
    assert m.combine(a, b) == m.combine(b, a)


@sane_settings(100)
@given(xs=st.lists(st.sampled_from([0.0, -0.0, 1.0]), min_size=1, max_size=12), seed=st.integers(0, 2**32))
def test_ties_keep_the_oldest_like_min_and_max(xs, seed):
    """0.0 and -0.0 tie: the fused min and max give the one MIN and MAX give."""
    lo, hi = folded(("min", "max"), xs, seed)
    for got, ready in ((lo, A.MIN), (hi, A.MAX)):
        want = ready.aggregate(xs)
        assert got == want and math.copysign(1, got) == math.copysign(1, want), (xs, got, want)


@sane_settings(100)
@given(xs=st.lists(st.floats(-5, 5), max_size=8), infinite=st.sampled_from([math.inf, -math.inf]),
       at=st.integers(0, 8), seed=st.integers(0, 50))
def test_a_window_holding_an_infinite_value_has_a_nan_spread(xs, infinite, at, seed):
    xs.insert(min(at, len(xs)), infinite)
    var, sd, mx = folded(("variance", "stddev_pop", "max"), xs, seed)
    assert (var is None if len(xs) < 2 else math.isnan(var)) and math.isnan(sd)
    assert mx == max(xs)


def test_only_ready_aggregators_recognised_by_their_functions_fuse():
    own_max = Aggregator(Monoid(max, -math.inf, name="max"), name="max")  # named max, not the ready one
    assert fused.fuse([A.MAX, own_max]) is None
    assert fused.fuse([A.MAX, A.GEOMEAN]) is None and fused.fuse([A.MAX, A.FIRST]) is None
    copies = pickle.loads(pickle.dumps([A.MAX, A.MEAN, A.STDDEV]))  # as an executor unpickles them
    assert [fused.ready_name(a) for a in copies] == ["max", "mean", "stddev"]
    assert fused.fused_names(fused.fuse(copies)) == ("max", "mean", "stddev")
    assert fused.fused_names(product(A.MAX, A.MEAN)) is None


def test_a_job_fuses_only_aggregations_of_one_column():
    assert aggregations.value_aggregator([A.MAX, A.MEAN], ()) is not None
    assert aggregations.value_aggregator([A.MAX], ()) is None  # one runs alone (its native combine)
    assert aggregations.value_aggregator([A.MAX, A.MEAN], (0, 1)) is None
    on_second = aggregations.value_aggregator([A.MAX, A.MEAN], (1, 1))
    assert on_second.lower(on_second.monoid.fold([on_second.lift((9.0, 2.0)), on_second.lift((0.0, 4.0))])) \
        == (4.0, 3.0)


@sane_settings(100)
@given(names=name_lists, windows=st.lists(st.lists(st.floats(-1e3, 1e3, allow_nan=False), max_size=6), max_size=20))
def test_arrow_columns_equal_the_per_value_lowers(names, windows):
    """Empty windows (the identity) and windows below ddof + 1 values give nulls."""
    agg = fused_of(names)
    results = [agg.monoid.fold(map(agg.lift, w)) for w in windows]
    columns = aggregations.fused_arrow_columns(tuple(names), results)
    for i, name in enumerate(names):
        want = [agg.lower(r)[i] for r in results]
        assert columns[i].to_pylist() == want, (name, windows)
        assert columns[i].type == (pa.int64() if name == "count" else pa.float64())


@st.composite
def sorted_rows(draw):
    times, t = [], draw(st.floats(-1e6, 1e6, allow_nan=False))
    for d in draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.0, 40.0]), max_size=80)):
        t += d
        times.append(t)
    values = draw(st.lists(st.integers(-5, 5).map(float), min_size=len(times), max_size=len(times)))
    return times, values


def _concat_lift(x):
    return (x,)


#: A non-commutative user monoid: the window's values in order.
CONCAT = Aggregator(Monoid(A._concat, (), name="concat"), _concat_lift, name="concat")


@sane_settings(40)
@given(data=sorted_rows(), span=st.sampled_from([0.5, 1.0, 7.0, 30.0]), engine=st.sampled_from(["amta", "lmta"]),
       aggs=st.sampled_from([["max", "mean", "stddev"], ["count", "sum", "min", "var_pop", "stddev_pop"],
                             ["max", "mean", ("concat", CONCAT, "array<double>")]]),
       sizes=st.sampled_from([1, 2, 512]), cut=st.floats(0, 1))
def test_batch_window_pushes_match_brute_force(store_url, data, span, engine, aggs, sizes, cut):  # noqa: F811
    times, values = data
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, range=span, engine=engine, store=store_url,
                            buffer_size=sizes, cache_size=sizes)
    window = SortedWindow(spec, "k", fresh_window("fused"))
    assert (window._fused is None) == isinstance(aggs[-1], tuple)
    got = [[] for _ in aggs]
    split = int(cut * len(times))
    for lo, hi in ((0, split), (split, len(times))):  # two Arrow batches of one key
        columns = window.push(pa.array(times[lo:hi], pa.float64()), pa.array(values[lo:hi], pa.float64()), None)
        for column, array in zip(got, columns):
            column.extend(array.to_pylist())
    window.close()
    for i, t in enumerate(times):
        inside = [v for s, v in zip(times[: i + 1], values[: i + 1]) if s > t - span]
        for agg, column in zip(aggs, got):
            name = agg if isinstance(agg, str) else agg[0]
            want = tuple(inside) if name == "concat" else REFERENCE[name](inside)
            result = tuple(column[i]) if name == "concat" else column[i]
            assert close(result, want, 1e-9, 1e-9), (name, i, inside, result)


def test_fractions_stay_exact_in_chan_merge():
    agg = fused_of(("variance",))
    xs = [Fraction(1, 3), Fraction(2, 7), Fraction(-5, 2)]
    assert agg.lower(agg.monoid.fold(map(agg.lift, xs))) == (statistics.variance(xs),)

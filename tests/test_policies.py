"""Ready slide policies against brute-force definitions on the raw window."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mta.checks import check_monoid, check_policy
from mta.errors import PolicyError
from mta.monoid import Aggregator, Monoid, product
from mta.policies import (
    COUNT_MONOID,
    MAX_MONOID,
    SUM_LAST_MONOID,
    AllOf,
    AnyOf,
    Count,
    OlderThanMax,
    SlidePolicy,
    SumAtMost,
    TimeRange,
    custom,
)
from mta.window import LiftError, Window
from tests.oracle import CONCAT, BruteForceWindow

#: None is the Window's default engine, AmortizedMTA.
ENGINES = pytest.mark.parametrize("engine", [BruteForceWindow, None], ids=["brute", "amortized"])
CONTENTS = Aggregator(CONCAT, lambda raw: (raw,), list, name="contents")
MAXIMUM = Aggregator(Monoid(max, -math.inf, name="max"), name="max")
SETTINGS = settings(max_examples=60, deadline=None)


def fst(raw):
    return raw[0]


def snd(raw):
    return raw[1]


# Brute force: each rule maps the raw window (after an insertion) to the index
# of its first kept element, straight from the policy's plain-words definition.
def newest(n):
    return lambda w: max(0, len(w) - n)


def within(r):  # keep t > newest - r (the documented rule, rounding included)
    return lambda w: next(i for i, x in enumerate(w) if x[0] > w[-1][0] - r)


def suffix_sum_at_most(b):
    return lambda w: next((k for k in range(len(w)) if sum(x[1] for x in w[k:]) <= b), len(w))


def from_oldest_max(w):
    values = [x[1] for x in w]
    return values.index(max(values))


@st.composite
def policies(draw):
    """A ready policy over raws ``(time, value)`` and its brute-force rule."""
    kind = draw(st.sampled_from(["count", "time", "sum", "max"]))
    if kind == "count":
        n = draw(st.integers(1, 6))
        return Count(n), newest(n)
    if kind == "time":
        r = draw(st.integers(1, 20))
        return TimeRange(r, time=fst), within(r)
    if kind == "sum":
        b = draw(st.integers(0, 25))
        return SumAtMost(b, value=snd), suffix_sum_at_most(b)
    return OlderThanMax(value=snd), from_oldest_max


#: raws (time, value): non-decreasing times, non-negative values
streams = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), max_size=40).map(
    lambda steps: [(sum(dt for dt, _ in steps[: i + 1]), v) for i, (_, v) in enumerate(steps)]
)


def assert_slides_like(window, rule, stream):
    expected = []
    for raw in stream:
        expected.append(raw)
        del expected[: rule(expected)]
        assert window.push(raw) == expected
        assert len(window) == len(expected)


@ENGINES
@SETTINGS
@given(policies(), streams)
def test_ready_policy_matches_brute_force(engine, policy_rule, stream):
    policy, rule = policy_rule
    assert_slides_like(Window(CONTENTS, policy, engine), rule, stream)


@ENGINES
@SETTINGS
@given(st.lists(policies(), min_size=1, max_size=3), st.booleans(), streams)
def test_combinations_match_brute_force(engine, policy_rules, any_of, stream):
    policies_, rules = zip(*policy_rules)
    policy = AnyOf(*policies_) if any_of else AllOf(*policies_)
    # monotone WSPs: the longest prefix where any (all) holds is the longest (shortest) one
    pick = max if any_of else min
    assert_slides_like(Window(CONTENTS, policy, engine), lambda w: pick(r(w) for r in rules), stream)


@ENGINES
@SETTINGS
@given(
    st.lists(st.floats(0, 1e3, allow_nan=False), max_size=40).map(sorted),
    st.floats(0.01, 100, allow_nan=False),
)
def test_time_range_float_times(engine, times, r):
    assert_slides_like(Window(CONTENTS, TimeRange(r, time=fst), engine), within(r), [(t, 0) for t in times])


@ENGINES
def test_paper_section_3_2_max_slid_by_sum(engine):
    w = Window(product(MAXIMUM, CONTENTS), SumAtMost(10), engine)
    assert w.extend([2, 2, 3, 3])[-1] == (3, [2, 2, 3, 3])
    assert w.push(4) == (4, [3, 3, 4])
    assert len(w) == 3


@ENGINES
def test_older_than_max_keeps_oldest_max_and_experiment_3(engine):
    w = Window(CONTENTS, OlderThanMax(), engine)
    assert w.extend([1, 3, 1, 3, 2])[-1] == [3, 1, 3, 2]
    assert w.push(5) == [5]
    w = Window(MAXIMUM, Count(3) | OlderThanMax(), engine)  # Experiment 3, with 3 for 2**20
    assert w.extend([9, 1, 2, 3, 0]) == [9, 9, 9, 3, 3]
    assert len(w) == 2


def test_count_time_and_older_than_max_edge_cases():
    w = Window(CONTENTS, Count(1), BruteForceWindow)
    assert w.extend([1, 2]) == [[1], [2]]
    w = Window(CONTENTS, TimeRange(10), BruteForceWindow)
    assert w.extend([0, 9, 10, 25]) == [[0], [0, 9], [9, 10], [25]]
    w = Window(CONTENTS, SumAtMost(3), BruteForceWindow)
    assert w.extend([1, 7, 0, 3]) == [[1], [], [0], [0, 3]]


def test_operators_build_flattened_combinations():
    a, b, c = Count(2), OlderThanMax(), TimeRange(5)
    assert isinstance(a | b, AnyOf) and isinstance(a & b, AllOf)
    assert (a | b | c).parts == (a, b, c) == AnyOf(a, AnyOf(b, c)).parts
    assert (a & b & c).parts == (a, b, c)
    mixed = (a | b) & c
    assert isinstance(mixed, AllOf) and len(mixed.parts) == 2
    assert mixed.name == "((Count(2) | OlderThanMax()) & TimeRange(5))"
    assert mixed.lift(7) == ((1, 7), 7)
    with pytest.raises(TypeError):
        a | 3
    with pytest.raises(TypeError):
        AnyOf(a, "b")
    with pytest.raises(PolicyError):
        AllOf()


@pytest.mark.parametrize(
    "make",
    [lambda: Count(0), lambda: Count(2.5), lambda: Count("3"), lambda: TimeRange(0), lambda: TimeRange(-1.5),
     lambda: TimeRange(math.nan), lambda: TimeRange("5"), lambda: TimeRange(None), lambda: TimeRange(True),
     lambda: SumAtMost(-1), lambda: SumAtMost(math.nan), lambda: SumAtMost("5"), lambda: SumAtMost(False)],
)
def test_misconfigured_policies_raise_policy_error(make):
    with pytest.raises(PolicyError):
        make()


def test_constructor_type_checks():
    with pytest.raises(TypeError):
        SlidePolicy("not a monoid", int, lambda t, p: True)
    with pytest.raises(TypeError):
        TimeRange(3, time="t")
    with pytest.raises(TypeError):
        custom(COUNT_MONOID, lambda raw: 1, None)


def test_custom_policy_and_direct_engine_use():
    # evict P iff at least 2 odd values remain: the window starts at the 2nd-newest odd value
    odd = custom(COUNT_MONOID, lambda raw: raw % 2, lambda total, prefix: total - prefix >= 2, name="odd")
    assert repr(odd) == "odd"
    w = Window(CONTENTS, odd, BruteForceWindow)
    assert w.extend([1, 3, 5, 2, 7]) == [[1], [1, 3], [3, 5], [3, 5, 2], [5, 2, 7]]
    # a policy is also a (monoid, wsp) pair any engine takes directly
    engine = BruteForceWindow(Count(2).monoid, Count(2).holds)
    for _ in range(5):
        engine.push(1)
    assert len(engine) == 2


def test_sum_at_most_dimension():
    assert SUM_LAST_MONOID.fold([(2, 2), (3, 3), (0, 0)]) == (5, 0)
    assert SUM_LAST_MONOID.fold([]) == (0, None)
    policy = SumAtMost(4)
    assert policy.holds((9, 5), SUM_LAST_MONOID.identity)  # the empty prefix trivially holds
    assert policy.validate((-1, -1), (0, None)) and not policy.validate((0, 0), (0, None))
    assert TimeRange(3).validate(1, 2) and not TimeRange(3).validate(2, 2)


@SETTINGS
@given(policies(), streams)
def test_ready_policies_are_monotone_and_lawful(policy_rule, stream):
    policy, _ = policy_rule
    values = [policy.lift(raw) for raw in stream]
    check_policy(policy, None, values)
    check_monoid(policy.monoid, values[:10])


def test_dimension_monoids_are_lawful():
    check_monoid(COUNT_MONOID, [0, 1, 5])
    check_monoid(MAX_MONOID, [-3, 0, 2.5, 7])
    check_monoid(SUM_LAST_MONOID, [(1, 1), (0, 0), (4, 2)])


@ENGINES
@pytest.mark.parametrize("check", [False, True, 2])
@pytest.mark.parametrize("make, rule, bad", [
    (lambda: TimeRange(10, time=fst), within(10), (math.nan, 1)),
    (lambda: TimeRange(10, time=fst), within(10), (None, 1)),
    (lambda: TimeRange(10, time=fst), within(10), ("5", 1)),
    (lambda: SumAtMost(10, value=snd), suffix_sum_at_most(10), (3, math.nan)),
    (lambda: OlderThanMax(value=snd), from_oldest_max, (3, math.nan)),
    (lambda: AnyOf(Count(4), TimeRange(10, time=fst)), lambda w: max(newest(4)(w), within(10)(w)), (math.nan, 1)),
], ids=["time-nan", "time-none", "time-str", "sum-nan", "max-nan", "combined-nan"])
def test_a_time_or_value_that_is_no_ordered_number_is_refused_and_the_window_keeps_sliding(engine, check, make, rule,
                                                                                            bad):
    """A NaN (or a None or str) where a policy's max or sum dimension needs
    a number is refused when lifted, in every mode, naming the policy and
    the raw value; the window is unchanged and keeps sliding as brute force
    says (a NaN taken in stopped eviction for good: the window grew without
    bound)."""
    w = Window(CONTENTS, make(), engine, check=check)
    stream = [(t, t % 5) for t in range(0, 60, 3)]
    expected = []
    for i, raw in enumerate(stream):
        if i == 2:
            with pytest.raises(LiftError, match=rf"slide policy .* cannot lift raw value \({bad[0]!r}"):
                w.push(bad)
            assert w.query() == expected
        expected.append(raw)
        del expected[: rule(expected)]
        assert w.push(raw) == expected
    assert len(expected) < len(stream)

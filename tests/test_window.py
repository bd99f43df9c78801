"""The Window facade and the checking mode (mta.checks)."""

import math
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mta.checks import WindowChecker, check_associative, check_identity, check_monoid, check_policy, default_equal
from mta.errors import MonoidLawError, PolicyError
from mta.monoid import Aggregator, CountingMonoid, Monoid
from mta.policies import COUNT_MONOID, Count, OlderThanMax, SumAtMost, TimeRange, custom
from mta.window import LiftError, Window
from tests.oracle import CONCAT, BruteForceWindow

SUM = Monoid(operator.add, 0, name="sum", inverse=operator.sub, commutative=True)
MEAN = Aggregator(Monoid(lambda a, b: (a[0] + b[0], a[1] + b[1]), (0, 0), name="mean"),
                  lambda raw: (float(raw), 1), lambda v: v[0] / v[1] if v[1] else None, name="mean")
fst, snd = operator.itemgetter(0), operator.itemgetter(1)
CONTENTS = Aggregator(CONCAT, lambda raw: (raw,), list, name="contents")


def none_or(f):  # a lawful identity (None) around a possibly unlawful combine
    return lambda a, b: b if a is None else a if b is None else f(a, b)


SUBTRACTION = Monoid(none_or(operator.sub), None, name="subtraction")
NOT_NEUTRAL = Monoid(operator.add, 1, name="sum-from-1")
ODD_PREFIX = custom(COUNT_MONOID, lambda raw: 1, lambda total, p: p % 2 == 1, name="odd-prefix")


class RecordingEngine(BruteForceWindow):
    def __init__(self, monoid, wsp=None, **options):
        super().__init__(monoid, wsp)
        self.options = options


# --- the facade ------------------------------------------------------------


@pytest.mark.parametrize("engine", [BruteForceWindow, None], ids=["brute", "amortized"])
def test_push_query_extend_evict_len(engine):
    w = Window(MEAN, Count(3), engine)
    assert len(w) == 0 and w.query() is None
    assert w.push(1) == 1.0
    assert w.extend([2, 3, 10]) == [1.5, 2.0, 5.0]
    assert len(w) == 3 and w.query() == 5.0
    w.evict()
    assert len(w) == 2 and w.query() == 6.5
    assert "Count(3)" in repr(w)


def test_windows_of_one_aggregator_and_policy_share_their_product_and_stay_apart():
    """Windows opened with the same aggregator and policy (a task's keys)
    build the product of their monoids once, and still hold their own
    elements; a policy with another monoid gets its own product."""
    policy = Count(2)
    a, b = Window(MEAN, policy), Window(MEAN, policy)
    assert a.monoid is b.monoid
    assert Window(MEAN, Count(5)).monoid is a.monoid  # same two monoids
    other = Window(MEAN, SumAtMost(10))
    assert other.monoid is not a.monoid
    assert other.monoid.identity == (MEAN.monoid.identity, SumAtMost(10).monoid.identity)
    assert a.extend([1, 2, 3]) == [1.0, 1.5, 2.5] and b.extend([10, 20]) == [10.0, 15.0]
    assert a.query() == 2.5 and b.query() == 15.0


def test_default_engine_is_amortized_mta():
    """The compiled core for an in-memory window when it is in use, the
    pure-Python engine otherwise and for other level queues."""
    from mta import native
    from mta.amortized_mta import AmortizedMTA
    from mta.level_queue import MemoryLevelQueue

    expected = native.NativeAmortizedMTA if native.AVAILABLE else AmortizedMTA
    assert type(Window(MEAN, Count(3)).engine) is expected
    assert type(Window(MEAN, Count(3), level_queue=MemoryLevelQueue).engine) is AmortizedMTA


def test_options_pass_through_and_type_checks():
    w = Window(MEAN, Count(2), RecordingEngine, depth=3, store="mem")
    assert w.engine.options == {"depth": 3, "store": "mem"}
    checking = type("Checking", (), {"TAKES_ELEMENT_ARITY": True})()  # a store that checks its elements' shape
    w = Window(MEAN, Count(2), RecordingEngine, store=checking)
    assert w.engine.options == {"store": checking, "element_arity": 2}  # (aggregator value, policy value)
    assert w.engine.wsp((5, 3), (0, 1)) and not w.engine.wsp((5, 3), (0, 2))  # sees the policy's dimension
    with pytest.raises(TypeError):
        Window(SUM, Count(2), BruteForceWindow)
    with pytest.raises(TypeError):
        Window(MEAN, lambda t, p: True, BruteForceWindow)


def test_lift_error_names_value_and_leaves_window_unchanged():
    w = Window(MEAN, TimeRange(10, time=lambda raw: int(raw)), BruteForceWindow)
    w.extend([1, 2])
    with pytest.raises(LiftError, match=r"aggregator mean cannot lift raw value 'abc'") as info:
        w.push("abc")
    assert isinstance(info.value.__cause__, ValueError) and isinstance(info.value, ValueError)
    with pytest.raises(LiftError, match=r"slide policy TimeRange\(10\) cannot lift raw value '2.5'"):
        w.push("2.5")  # float() accepts it, int() does not
    with pytest.raises(LiftError, match="None"):
        w.extend([3, 4, None])  # every raw lifts before any is pushed
    assert len(w) == 2 and w.query() == 1.5
    assert w.push(3) == 2.0


# --- check_monoid / check_policy -------------------------------------------


def test_check_monoid_detects_non_associative_combine():
    with pytest.raises(MonoidLawError, match=r"subtraction is not associative: for a = 1, b = 1, c = 1"):
        check_monoid(SUBTRACTION, [1, 2, 3])


def test_check_monoid_detects_non_neutral_identity():
    message = r"identity 1 of monoid sum-from-1 is not neutral: combine\(identity, x\) = 3"
    with pytest.raises(MonoidLawError, match=message):
        check_monoid(NOT_NEUTRAL, [2])
    with pytest.raises(MonoidLawError, match="combine\\(x, identity\\)"):
        check_identity(Monoid(lambda a, b: b if a == 0 else a * b, 0), 5)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=12))
def test_check_monoid_accepts_lawful_monoids(xs):
    check_monoid(SUM, [round(x) for x in xs])
    # float rounding stays within math.isclose without cancellation (a + b + c near 0 would not)
    check_monoid(Monoid(operator.add, 0.0), [abs(x) for x in xs])
    check_monoid(Monoid(max, -math.inf), xs)
    check_monoid(CONCAT, [tuple(xs[:i]) for i in range(len(xs))])


def test_check_monoid_samples_triples_and_equal_hook():
    check_monoid(SUM, range(50), max_triples=200)  # 200 random triples of 125 000
    sloppy = Monoid(none_or(lambda a, b: (a + b) * 1.001), None, name="sloppy")
    with pytest.raises(MonoidLawError):
        check_associative(sloppy, 1.0, 1.0, 0.0)
    check_associative(sloppy, 1.0, 1.0, 0.0, equal=lambda a, b: abs(a - b) <= 0.01)
    assert default_equal((1.0, [0.1 + 0.2]), (1.0, [0.3])) and default_equal(math.nan, math.nan)
    assert not default_equal((1, 2), [1, 2]) and not default_equal(1.0, 1.001)


def test_check_policy_detects_non_monotone_wsp():
    with pytest.raises(PolicyError, match=r"odd-prefix is not prefix-monotone: .* length 3 .* length 2"):
        check_policy(ODD_PREFIX, None, [1, 1, 1, 1])
    bare = lambda total, p: p % 2 == 1  # noqa: E731
    with pytest.raises(PolicyError, match="<lambda>"):
        check_policy(bare, COUNT_MONOID, [1, 1, 1])
    check_policy(bare, COUNT_MONOID, [1, 1])  # 2 values: only prefix 1 holds, which is fine
    with pytest.raises(TypeError):
        check_policy(bare, None, [1])


def test_check_policy_accepts_monotone_wsps():
    for policy, raws in [(Count(2), range(6)), (TimeRange(3), [0, 1, 1, 4, 9]), (SumAtMost(5), [3, 0, 2, 4]),
                         (OlderThanMax(), [1, 5, 2, 5]), (Count(2) & OlderThanMax(), [4, 1, 2])]:
        check_policy(policy, None, [policy.lift(r) for r in raws])


# --- checking mode ------------------------------------------------------------


def test_check_mode_reports_non_associative_aggregation_before_insert():
    w = Window(Aggregator(SUBTRACTION), Count(5), BruteForceWindow, check=True)
    with pytest.raises(MonoidLawError, match="not associative"):
        w.push(3)
    assert len(w) == 0


def test_check_mode_reports_non_neutral_identity():
    w = Window(Aggregator(NOT_NEUTRAL), Count(5), BruteForceWindow, check=True)
    with pytest.raises(MonoidLawError, match="not neutral"):
        w.push(3)


def test_check_mode_reports_non_monotone_policy_early():
    w = Window(MEAN, ODD_PREFIX, BruteForceWindow, check=True)
    w.extend([1, 2])
    with pytest.raises(PolicyError, match="not prefix-monotone"):
        w.push(3)
    assert Window(MEAN, ODD_PREFIX, BruteForceWindow).extend([1, 2, 3])  # unchecked: silently wrong


def test_check_mode_reports_policy_assumptions_on_every_push():
    w = Window(MEAN, SumAtMost(10), BruteForceWindow, check=5)
    w.extend([1, 2])
    with pytest.raises(PolicyError, match=r"SumAtMost\(10\) rejects raw value -4: value -4 is negative"):
        w.push(-4)
    assert len(w) == 2
    w = Window(MEAN, Count(9) | TimeRange(5), BruteForceWindow, check=True)
    w.extend([1, 3, 3])
    with pytest.raises(PolicyError, match=r"TimeRange\(5\): time 2 is older than the previous time 3"):
        w.push(2)
    Window(MEAN, SumAtMost(10), BruteForceWindow).push(-4)  # unchecked: accepted


def test_check_every_k_pushes():
    # identity 0 is not neutral for 99 only: combine(0, 99) == 0
    zero_99 = Monoid(lambda a, b: 0 if (a, b) == (0, 99) else a + b, 0, name="zero-99")
    w = Window(Aggregator(zero_99), Count(5), BruteForceWindow, check=3)
    w.extend([1, 99, 99, 2, 99, 5])  # pushes 1, 4, 7, ... are checked
    with pytest.raises(MonoidLawError, match="not neutral"):
        w.push(99)
    with pytest.raises(ValueError):
        Window(MEAN, Count(2), BruteForceWindow, check=-1)


@pytest.mark.parametrize("engine", [BruteForceWindow, None], ids=["brute", "amortized"])
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 100)), max_size=60))
def test_check_mode_accepts_correct_windows(engine, steps):
    raws = [(sum(dt for dt, _ in steps[: i + 1]), v) for i, (_, v) in enumerate(steps)]
    policy = (Count(7) | TimeRange(6, time=fst)) & (SumAtMost(150, value=snd) | OlderThanMax(snd))
    mean = Aggregator(MEAN.monoid, lambda raw: (snd(raw), 1), MEAN.lower)
    checked = Window(mean, policy, engine, check=True).extend(raws)
    assert checked == Window(mean, policy, BruteForceWindow).extend(raws)


def test_check_mode_extra_cost_per_push_is_bounded():
    def combines(check, n):
        counting = CountingMonoid(SUM)
        Window(Aggregator(counting), Count(4), BruteForceWindow, check=check).extend(range(n))
        return counting.calls

    for n in (100, 1000):
        extra = combines(True, n) - combines(False, n)
        assert 0 < extra <= 6 * n  # identity (2) + one triple (4) per push for the aggregation
    assert combines(10, 1000) - combines(False, 1000) <= 6 * 100


def test_window_checker_reservoir_is_bounded():
    checker = WindowChecker(SUM, Count(3), size=4)
    for i in range(20):
        checker.observe(i, (i, 1))
    assert len(checker._recent) == 4


def test_failed_extend_leaves_the_checking_mode_as_it_was():
    """extend lifts and checks every raw before any enters the window: when
    one fails to lift, the raws checked before it were not seen either, so a
    time older than theirs is still accepted next."""
    w = Window(Aggregator(Monoid(operator.add, 0)).on(lambda r: r[1]), TimeRange(100, time=lambda r: r[0]),
               check=True)
    with pytest.raises(LiftError):
        w.extend([(10, 1.0), (20,)])  # the second raw has no value
    assert len(w) == 0
    assert w.push((7, 3.0)) == 3.0
    with pytest.raises(PolicyError, match="older than the previous time 7"):
        w.push((5, 1.0))

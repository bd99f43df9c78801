"""The worked examples of the MTA paper (Villalba et al., TPDS 2019).

* section 3.2: a max window slid by a sum policy: [2, 2, 3, 3] (max 3), then
  4 evicts the two oldest: [3, 3, 4] (max 4);
* Fig. 2: Log MTA bulk eviction by time, monoid max, WSP total - old >= 4;
* Fig. 4b and Fig. 5: the Amortized MTA's Stack and Result Pair, and its
  single evictions on sum over [1, 3, 2, 1, 2, 1, 1, 0, 3, 1].

Every example also runs on the brute-force oracle.
"""

from __future__ import annotations

import math
import operator

import pytest

from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA
from mta.monoid import Aggregator, CountingMonoid, Monoid, product, product_monoid
from mta.policies import SumAtMost
from mta.window import Window
from tests.oracle import CONCAT, BruteForceWindow
from tests.strategies import ENGINES

MTAS = pytest.mark.parametrize("engine", [LogMTA, AmortizedMTA], ids=["LogMTA", "AmortizedMTA"])
MTAS_AND_ORACLE = pytest.mark.parametrize(
    "engine", [LogMTA, AmortizedMTA, BruteForceWindow], ids=["LogMTA", "AmortizedMTA", "brute"]
)

MAX = Monoid(max, -math.inf, name="max", commutative=True, selective=True)
SUM = Monoid(operator.add, 0, name="sum", commutative=True)
#: The newest value of a prefix (None for the empty prefix).
LAST = Monoid(lambda a, b: a if b is None else b, None, name="last")


# ---------------------------------------------------------------------------
# section 3.2


def paper_wsp(total, prefix) -> bool:
    """Section 3.2's policy, d_i in W iff d_i + ... + d_n <= 10, as a WSP over
    (max, sum, last): the prefix P = d_1..d_k leaves iff d_k leaves, i.e. iff
    sum(d_k..d_n) = total.sum - P.sum + P.last > 10.  (The sum alone cannot
    say it: the rule is about the suffix starting AT the prefix's newest
    value, hence the ``last`` component next to the paper's (max, sum).)"""
    _, prefix_sum, last = prefix
    return last is not None and total[1] - prefix_sum + last > 10


@MTAS_AND_ORACLE
def test_section_3_2_max_slid_by_sum(engine):
    e = engine(product_monoid([MAX, SUM, LAST]), paper_wsp)
    results = [e.push((v, v, v)) for v in [2, 2, 3, 3]]
    assert [r[0] for r in results] == [2, 2, 3, 3]  # nothing leaves: 2 + 2 + 3 + 3 <= 10
    assert len(e) == 4
    assert e.query()[:2] == (3, 10)  # max 3 before the insertion
    assert e.push((4, 4, 4))[:2] == (4, 10)  # max 4 immediately after: 3 + 3 + 4 <= 10
    assert len(e) == 3
    # the window is [3, 3, 4]: evicting one by one shows its suffixes
    e.evict()
    assert e.query() == (4, 7, 4)
    e.evict()
    assert e.query() == (4, 4, 4)


@pytest.mark.parametrize("engine", [e for e in ENGINES if e.needs is None], ids=repr)
def test_section_3_2_window_sum_at_most(engine):
    """The same through the facade: Window(max and contents, SumAtMost(10))."""
    agg = product(Aggregator(MAX, name="max"), Aggregator(CONCAT, lambda v: (v,), list, name="contents"))
    for eng, options in ((engine.cls, engine.options), (BruteForceWindow, {})):
        w = Window(agg, SumAtMost(10), engine=eng, **options)
        assert w.extend([2, 2, 3, 3]) == [(2, [2]), (2, [2, 2]), (3, [2, 2, 3]), (3, [2, 2, 3, 3])]
        assert w.push(4) == (4, [3, 3, 4])
        assert len(w) == 3 and w.query() == (4, [3, 3, 4])


# ---------------------------------------------------------------------------
# Fig. 2: bulk eviction by time


def fig2_engine(engine, counting=True):
    """Monoid max (with the exact contents beside it, to see what remains) and
    the figure's WSP ``total - old >= 4`` on the max.  Records the prefixes
    the WSP accepted."""
    monoid = product_monoid([MAX, CONCAT])
    if counting:
        monoid = CountingMonoid(monoid)
    accepted = []

    def wsp(total, old):
        ok = total[0] - old[0] >= 4
        if ok:
            accepted.append(old)
        return ok

    return engine(monoid, wsp), monoid, accepted


def spy_bulk(e):
    """Count AmortizedMTA's bulk evictions (Algorithm 2 on the forest)."""
    calls = []
    if isinstance(e, AmortizedMTA):
        inner = e._bulk_evict

        def bulk(total, acc):
            evicted = inner(total, acc)
            calls.append(evicted)
            return evicted

        e._bulk_evict = bulk
    return calls


@MTAS_AND_ORACLE
@pytest.mark.parametrize(("newest", "remains"), [(8, [5, 6, 7, 8]), (11, [11])])
def test_fig2_bulk_eviction_by_time(engine, newest, remains):
    """Timestamps 1..7 are in the window (inserted without enforcement, as
    the figure's tree holds them), then ``newest`` arrives and the policy is
    enforced.  With the figure's WSP, total - old >= 4, a newest timestamp 8
    evicts 1..4 and keeps [5, 6, 7, 8]; a newest timestamp >= 11 evicts all
    the others, as the figure's narrative describes ("evict all the other
    updates in the window in three steps")."""
    e, _, _ = fig2_engine(engine, counting=False)
    for t in range(1, 8):
        e.insert((t, (t,)))
    e.insert((newest, (newest,)))
    assert e.enforce() == 8 - len(remains)
    assert e.query() == (newest, tuple(remains))
    assert len(e) == len(remains)


def test_fig2_log_mta_three_steps():
    """Log MTA evicts whole subtrees root to leaf: with 1..7 then 11 the WSP
    accepts the subtree [1..4] (level 2), then [5, 6] (level 1), then [7]
    (level 0): three steps, one per level, and no single-leaf walk."""
    e, monoid, accepted = fig2_engine(LogMTA)
    for t in range(1, 8):
        e.insert((t, (t,)))
    e.insert((11, (11,)))
    assert e.height() == 4  # 8 leaves: levels of 8, 4, 2, 1
    monoid.reset()
    assert e.enforce() == 7
    assert accepted == [(4, (1, 2, 3, 4)), (6, (1, 2, 3, 4, 5, 6)), (7, (1, 2, 3, 4, 5, 6, 7))]
    assert e.query() == (11, (11,))
    assert monoid.calls <= 2 * 4  # a few combines per level, not one per evicted leaf

    # The literal figure: 8 evicts [1..4], one whole subtree, in one step.
    e, monoid, accepted = fig2_engine(LogMTA)
    for t in range(1, 9):
        e.insert((t, (t,)))
    assert e.enforce() == 4
    assert accepted == [(4, (1, 2, 3, 4))]
    assert e.query() == (8, (5, 6, 7, 8))


@MTAS
@pytest.mark.parametrize("k", [3, 10, 14])
def test_fig2_scaled_bulk_path(engine, k):
    """The figure scaled to n = 2^k timestamps: the newest evicts all the others
    with O(log n) monoid calls, not n (c = 8 calls per level; n = 16384 would
    need over 16000 one by one).  AmortizedMTA reaches its bulk path after
    log2 n single evictions (section 4.2.4)."""
    n = 2**k
    monoid = CountingMonoid(MAX)
    e = engine(monoid, lambda total, old: total - old >= 4)
    bulk = spy_bulk(e)
    for t in range(1, n):
        e.insert(t)
    e.insert(n + 4)
    monoid.reset()
    assert e.enforce() == n - 1
    assert e.query() == n + 4 and len(e) == 1
    assert monoid.calls <= 8 * (k + 1)
    if engine is AmortizedMTA:
        assert len(bulk) == 1 and bulk[0] == n - 1 - n.bit_length()


# ---------------------------------------------------------------------------
# Fig. 4b and Fig. 5: the Amortized MTA's Stack and Result Pair


def split(e: AmortizedMTA):
    """R0, R1 and the Stack, computing them first if they are stale (our
    implementation runs Algorithms 4-5 lazily)."""
    if getattr(e, "_split_stale", False):
        e._split()
    return e._r0, e._r1, list(e._stack)


def test_fig4_stack():
    """Fig. 4b, sum over [1, 2, 1, 2, 1, 2]: R0 = 6 (the leftmost tree
    [1, 2, 1, 2]); the Stack's top is R0 minus the head leaf, 6 - 1 = 5, the
    next is R0 minus the head of level 2, 6 - 3 = 3."""
    e = AmortizedMTA(SUM)
    for v in [1, 2, 1, 2, 1, 2]:
        e.insert(v)
    r0, r1, stack = split(e)
    assert r0 == 6
    assert stack == [3, 5]  # top last
    assert e.query() == 9 and r0 + r1 == 9


def test_fig5_single_evictions():
    """Fig. 5, sum over [1, 3, 2, 1, 2, 1, 1, 0, 3, 1] = 15.  The leftmost tree
    is [1, 3, 2, 1]: R0 = 7, R1 = 8, Stack [3, 6].  Evicting 1 moves the
    Stack's top 6 into R0: 6 + 8 = 14 = 15 - 1, nothing else to do.  Evicting
    3 removes the head pair of the leaves, the head of level 2 becomes
    empty, and <2, 1> updates the Stack with 1 + nothing = 1: R0 = 3, 3 + 8 = 11."""
    values = [1, 3, 2, 1, 2, 1, 1, 0, 3, 1]
    e, o = AmortizedMTA(SUM), BruteForceWindow(SUM)
    for v in values:
        e.insert(v)
        o.insert(v)
    assert e.query() == 15
    assert split(e) == (7, 8, [3, 6])

    e.evict()
    o.evict()
    assert e.query() == o.query() == 14
    assert (e._r0, e._r1, e._stack) == (6, 8, [3])  # stack top 6 moved to R0: R = 6 + 8

    e.evict()
    o.evict()
    assert e.query() == o.query() == 11
    assert (e._r0, e._r1, e._stack) == (3, 8, [1])  # <2, 1> pushed 1 on the Stack
    assert e._levels[0].lo == 2  # the head pair <1, 3> left the leaves
    assert e._levels[1].lo == 1  # the head of level 2 is now <empty, 3>

    seen = []
    while len(o):
        e.evict()
        o.evict()
        assert e.query() == o.query()
        seen.append(e.query())
    assert seen == [9, 8, 6, 5, 4, 4, 1, 0]  # sums of the remaining suffixes
    assert len(e) == 0


@MTAS
def test_fig5_sequence_on_both_engines(engine):
    """The Fig. 5 evictions on both MTA engines, against the oracle."""
    values = [1, 3, 2, 1, 2, 1, 1, 0, 3, 1]
    e, o = engine(SUM), BruteForceWindow(SUM)
    for v in values:
        e.insert(v)
        o.insert(v)
    results = [e.query()]
    while len(o):
        e.evict()
        o.evict()
        assert e.query() == o.query()
        results.append(e.query())
    assert results == [15, 14, 11, 9, 8, 6, 5, 4, 4, 1, 0]

"""Complexity by counting monoid calls (CountingMonoid), never by timing;
memory reclaimed after a bulk eviction; the engines' failure guard.

Constants:

* a bulk eviction of n - 1 of n elements costs at most ``BULK_C * log2 n``
  combines on either MTA engine (measured: about 2 log2 n on the Log MTA
  and 6 log2 n on the Amortized MTA, which first evicts log2 n elements one
  at a time, then recomputes its leftmost branch and Result Pair);
* on a constant-size window (Count policy), the Amortized MTA's combines per
  push do not grow with the window: the ratio between n = 2^16 and n = 2^6
  is at most ``FLAT_RATIO``; the Log MTA's grow like log n (ratio >= 1.5,
  measured 2.0), which shows the measurement can tell them apart.
"""

from __future__ import annotations

import math

import pytest

from mta import level_queue
from mta.amortized_mta import AmortizedMTA
from mta.baselines.daba import DABA
from mta.baselines.recalc import Recalc
from mta.baselines.two_stacks import TwoStacks
from mta.errors import EmptyWindowError, EngineFailedError
from mta.level_queue import graveyard_size
from mta.log_mta import LogMTA
from mta.monoid import CountingMonoid, Monoid
from mta.policies import Count
from tests.oracle import CONCAT, BruteForceWindow
from tests.strategies import ENGINES, EngineSpec

BULK_C = 8
FLAT_RATIO = 1.1
MTAS = pytest.mark.parametrize("engine", [LogMTA, AmortizedMTA], ids=["LogMTA", "AmortizedMTA"])
MAX = Monoid(max, -math.inf, name="max", commutative=True, selective=True)


def time_window(engine, n: int, offset: int = 0):
    """A window of timestamps ``offset .. offset + n - 2`` plus a newest one so
    far ahead that the policy ``total - old >= n`` evicts all but it.  The
    first ``offset`` positions of the stream were inserted and evicted
    already (so the tree does not start at position 0)."""
    monoid = CountingMonoid(MAX)
    wsp_calls = [0]

    def wsp(total, old):
        wsp_calls[0] += 1
        return total - old >= n

    e = engine(monoid, wsp)
    for t in range(offset):
        e.insert(t)
    for _ in range(offset):
        e.evict()
    for t in range(offset, offset + n - 1):
        e.insert(t)
    e.insert(offset + 10 * n)
    monoid.reset()
    wsp_calls[0] = 0
    return e, monoid, wsp_calls


@MTAS
@pytest.mark.parametrize("offset", [0, 12345])
def test_bulk_eviction_is_logarithmic(engine, offset):
    k = 16
    n = 2**k
    e, monoid, wsp_calls = time_window(engine, n, offset)
    assert e.enforce() == n - 1
    assert len(e) == 1 and e.query() == offset + 10 * n
    assert monoid.calls <= BULK_C * k, monoid.calls
    assert wsp_calls[0] <= BULK_C * k, wsp_calls[0]


@MTAS
@pytest.mark.parametrize("offset", [0, 12345])
def test_bulk_evict_by_count_is_logarithmic(engine, offset):
    """bulk_evict(k) for any k of n = 2^16 costs O(log n) monoid calls,
    including the query that follows."""
    k = 16
    n = 2**k
    for count in (n // 2 - 3, n - 1, n):
        e, monoid, _ = time_window(engine, n, offset)
        window = list(range(offset, offset + n - 1)) + [offset + 10 * n]
        e.bulk_evict(count)
        assert len(e) == n - count
        assert e.query() == (max(window[count:]) if count < n else e.monoid.identity)
        assert monoid.calls <= BULK_C * k, (count, monoid.calls)


@pytest.mark.parametrize("engine", [TwoStacks, Recalc, DABA], ids=["TwoStacks", "Recalc", "DABA"])
def test_baselines_evict_one_by_one(engine):
    """Without bulk eviction the same enforcement costs at least n - 1 combines."""
    n = 2**16
    e, monoid, wsp_calls = time_window(engine, n)
    assert e.enforce() == n - 1
    assert len(e) == 1 and e.query() == 10 * n
    assert monoid.calls >= n - 1
    assert wsp_calls[0] >= n


def calls_per_push(engine, k: int, pushes: int):
    """Mean and worst combines per push on a full Count(2^k) window."""
    n = 2**k
    policy = Count(n)
    monoid = CountingMonoid(policy.monoid)
    e = engine(monoid, policy.holds)
    one = policy.lift(None)
    for _ in range(n):
        e.push(one)
    monoid.reset()
    worst = 0
    for _ in range(pushes):
        before = monoid.calls
        e.push(one)
        worst = max(worst, monoid.calls - before)
    assert len(e) == n and e.query() == n
    return monoid.calls / pushes, worst


def test_amortized_mta_constant_per_push():
    """Amortized O(1): the same combines per push on windows of 2^6 and 2^16
    (each measured over 2^16 pushes, a whole turnover of the large window);
    the worst single push stays O(log n)."""
    small, _ = calls_per_push(AmortizedMTA, 6, 2**16)
    large, worst = calls_per_push(AmortizedMTA, 16, 2**16)
    assert large / small <= FLAT_RATIO, (small, large)
    assert worst <= 3 * 16, worst


def test_log_mta_grows_per_push():
    """The same measurement on the Log MTA grows with log n: the test above
    can fail."""
    small, _ = calls_per_push(LogMTA, 6, 2**12)
    large, _ = calls_per_push(LogMTA, 16, 2**12)
    assert large / small >= 1.5, (small, large)


@MTAS
def test_memory_reclaimed_after_bulk_eviction(engine):
    """After evicting all but one of 2^16 elements, a few appends leave the
    level queues holding a few hundred elements, and the graveyard of
    dropped lists is freed a little per append."""
    n = 2**16
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(level_queue, "_graveyard", [])  # isolated from other tests
        e = engine(MAX, lambda total, old: total - old >= 4)
        for t in range(n - 1):
            e.insert(t)
        e.insert(10 * n)
        assert sum(q.local_size() for q in e._levels) >= n
        assert e.enforce() == n - 1
        t = 10 * n
        for _ in range(64):  # a window of 4 timestamps slides on
            t += 1
            e.push(t)
        assert len(e) == 4
        local = sum(q.local_size() for q in e._levels)
        assert local <= 256, local
        assert e.local_size() <= 256 + 64
        peak = graveyard_size()
        assert peak >= n - 1  # the dropped elements wait in the graveyard...
        for _ in range(n // 4):
            t += 1
            e.push(t)
            if graveyard_size() <= n // 32:
                break
        assert graveyard_size() <= n // 32  # ... and are freed by later appends
        assert sum(q.local_size() for q in e._levels) <= 2 * level_queue.MemoryLevelQueue.COMPACT_AFTER + 64
        assert e.query() == t


def test_a_queue_fed_in_batches_frees_what_it_drops_as_appends_would():
    """A level fed a batch at a time with ``extend`` (the range windows'
    times FIFO), its head dropped as the window slides: the lists compaction
    drops are freed as fast as appends one by one would free them, so the
    graveyard stays within a couple of windows however long the stream runs;
    :func:`level_queue.reclaim_all` frees the rest at once."""
    batch, window = 5_000, 20_000
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(level_queue, "_graveyard", [])  # isolated from other tests
        q = level_queue.MemoryLevelQueue()
        peak = 0
        for b in range(100):
            q.extend([float(x) for x in range(b * batch, (b + 1) * batch)])
            q.lo = max(q.lo, q.hi - window)
            peak = max(peak, graveyard_size())
        assert q.lo == 100 * batch - window and q.span(q.lo, q.hi) == [float(x) for x in range(q.lo, q.hi)]
        assert peak <= 2 * (window + batch), peak
        assert q.local_size() <= 2 * (window + batch)  # compacted: the dropped lists went to the graveyard
        q.discard()
        assert graveyard_size() >= window
        level_queue.reclaim_all()
        assert graveyard_size() == 0


# ---------------------------------------------------------------------------
# the failure guard


class Boom(Exception):
    pass


class IndexBoom(IndexError):
    """User code raising an IndexError that is NOT the empty-window error:
    it must poison the engine like any other exception."""


def poisoned_concat(error=Boom):
    """CONCAT whose combine raises ``error`` once ``armed`` and an operand holds "X"."""
    armed = [False]

    def combine(a, b):
        if armed[0] and ("X" in a or "X" in b):
            raise error(f"combine({a!r}, {b!r})")
        return a + b

    return Monoid(combine, (), name="poisoned-concat"), armed


def assert_failed(e, cause=Boom):
    """Every guarded operation now raises EngineFailedError from the original error."""
    for op, args in (("insert", ((1,),)), ("evict", ()), ("enforce", ()), ("query", ()), ("push", ((2,),))):
        with pytest.raises(EngineFailedError) as info:
            getattr(e, op)(*args)
        assert isinstance(info.value.__cause__, cause), op


ERRORS = pytest.mark.parametrize("error", [Boom, IndexBoom])


@MTAS
@ERRORS
def test_guard_combine_raises_mid_insert(engine, error):
    monoid, armed = poisoned_concat(error)
    e = engine(monoid)
    for i in range(5):
        e.insert((i,))
    armed[0] = True
    with pytest.raises(error):
        e.insert(("X",))
    assert_failed(e, error)


@MTAS
@ERRORS
def test_guard_combine_raises_mid_enforce(engine, error):
    """The poisoned element is in the window; enforcement combines it into
    the candidate prefix part-way through evicting."""
    monoid, armed = poisoned_concat(error)
    e = engine(monoid, lambda total, prefix: len(prefix) <= 5)
    for v in [(0,), (1,), ("X",), (3,), (4,), (5,), (6,), (7,), (8,), (9,)]:
        e.insert(v)
    assert e.query() == (0, 1, "X", 3, 4, 5, 6, 7, 8, 9)
    armed[0] = True
    with pytest.raises(error):
        e.enforce()
    assert_failed(e, error)


@MTAS
@ERRORS
@pytest.mark.parametrize("fail_on", [1, 2, 4, 9])
def test_guard_wsp_raises(engine, fail_on, error):
    """A WSP that raises on its fail_on-th call, part-way through a bulk eviction."""
    calls = [0]

    def wsp(total, prefix):
        calls[0] += 1
        if calls[0] == fail_on:
            raise error("wsp")
        return len(prefix) <= 40

    e = engine(CONCAT, wsp)
    for i in range(64):
        e.insert((i,))
    with pytest.raises(error):
        e.enforce()
    assert_failed(e, error)


@pytest.mark.parametrize("engine", [pytest.param(s, id=s.name) for s in ENGINES])
def test_guard_push_every_engine(engine: EngineSpec):
    """push() with a combine raising part-way poisons every engine."""
    if engine.needs == "inverse":
        armed = [False]

        def add(a, b):
            if armed[0] and (a == 13 or b == 13):
                raise Boom("add")
            return a + b

        monoid = Monoid(add, 0, inverse=lambda a, b: a - b)
        values, poison = [1, 2, 3, 4], 13
    elif engine.needs == "selective":
        armed = [False]

        def first_max(a, b):
            if armed[0] and (a == 13 or b == 13):
                raise Boom("max")
            return b if b > a else a

        monoid = Monoid(first_max, -1, selective=True)
        values, poison = [1, 2, 3, 4], 13
    else:
        monoid, armed = poisoned_concat()
        values, poison = [(1,), (2,), (3,), (4,)], ("X",)
    e = engine(monoid, lambda total, prefix: False)
    for v in values:
        e.push(v)
    armed[0] = True
    with pytest.raises(Boom):
        e.push(poison)
    assert_failed(e)


@pytest.mark.parametrize("engine", [pytest.param(s, id=s.name) for s in ENGINES])
def test_empty_evict_does_not_poison(engine: EngineSpec):
    """evict() on an empty window raises EmptyWindowError, an IndexError, and
    the engine keeps working (also after being emptied)."""
    monoid = CONCAT
    if engine.needs == "inverse":
        monoid = Monoid(lambda a, b: a + b, 0, inverse=lambda a, b: a - b)
    elif engine.needs == "selective":
        monoid = MAX
    v = (7,) if monoid is CONCAT else 7
    e, o = engine(monoid), BruteForceWindow(monoid)
    for _ in range(2):
        with pytest.raises(EmptyWindowError):
            e.evict()
        with pytest.raises(IndexError):
            o.evict()
        assert e.query() == o.query() and len(e) == 0
        assert e.push(v) == o.push(v)
        assert e.query() == o.query() and len(e) == 1
        e.evict()
        o.evict()

"""Every final aggregator of mta.multi on its own, against a fold of the
live partials: random appends, evictions and range lookups (historical
ranges for the techniques answering any range, suffix ranges for the
suffix-only ones), with several ranges per step as a shared tree asks."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import CountingMonoid
from mta.markers import EMPTY
from mta.multi._final import RangeRefused
from mta.multi.bint import BInt
from mta.multi.flatfat import FlatFAT
from mta.multi.flatfit import FlatFIT
from mta.multi.lint import LInt
from mta.multi.naive import Naive
from mta.multi.rint import RInt
from mta.multi.slickdeque_inv import SlickDequeInv
from mta.multi.slickdeque_noninv import SlickDequeNonInv
from tests.oracle import CONCAT
from tests.strategies import FIRST_MAX, FREE_GROUP, LAST_MAX, SEL_IDENTITY, _reduce_word, sane_settings

_concat = st.lists(st.integers(0, 9), max_size=2).map(tuple)
_words = st.lists(st.sampled_from([1, -1, 2, -2, 3, -3]), max_size=3).map(_reduce_word)
_keys = st.integers(-1, 4)

CASES = [
    ("naive", lambda m: Naive(m), CONCAT, _concat),
    ("bint", lambda m: BInt(m), CONCAT, _concat),
    ("lint-1", lambda m: LInt(m, w_min=1), CONCAT, _concat),
    ("lint-3", lambda m: LInt(m, w_min=3), CONCAT, _concat),
    ("lint-8", lambda m: LInt(m), CONCAT, _concat),
    ("flatfat", lambda m: FlatFAT(m), CONCAT, _concat),
    ("flatfit", lambda m: FlatFIT(m), CONCAT, _concat),
    ("rint", lambda m: RInt(m), FREE_GROUP, _words),
    ("slickdeque-inv", lambda m: SlickDequeInv(m), FREE_GROUP, _words),
    ("slickdeque-noninv-first", lambda m: SlickDequeNonInv(m), FIRST_MAX, _keys),
    ("slickdeque-noninv-last", lambda m: SlickDequeNonInv(m), LAST_MAX, _keys),
]


def _ops():
    return st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 12)),
            st.tuples(st.just("evict"), st.integers(0, 6)),
            st.tuples(st.just("ranges"), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), max_size=4)),
        ),
        max_size=25,
    )


@pytest.mark.parametrize(("name", "make", "monoid", "values"), [pytest.param(*c, id=c[0]) for c in CASES])
@sane_settings(150)
@given(data=st.data())
def test_final_against_fold(name, make, monoid, values, data):
    final = make(monoid)
    partials = {}
    counter = 0
    for op in data.draw(_ops(), label="ops"):
        if op[0] == "append":
            for raw in data.draw(st.lists(values, min_size=op[1], max_size=op[1]), label="values"):
                counter += 1
                v = (SEL_IDENTITY if raw < 0 else (raw, counter)) if monoid in (FIRST_MAX, LAST_MAX) else raw
                partials[final.hi] = v
                final.append(v)
        elif op[0] == "evict":
            final.evict(min(final.hi, final.lo + op[1]))
        else:
            live = final.hi - final.lo
            asks = []
            for a, b in op[1]:
                lo = final.lo + (a % (live + 1))
                hi = final.hi if final.SUFFIX_ONLY else lo + (b % (final.hi - lo + 1))
                asks.append((lo, hi))
            for spec, (lo, hi) in enumerate(asks):
                expected = EMPTY if lo == hi else monoid.fold(partials[p] for p in range(lo, hi))
                got = final.range(lo, hi, spec % 2)
                assert got == expected, (lo, hi)
    assert final.hi == len(partials)


def test_suffix_only_refuses_historical_ranges():
    for final in (FlatFIT(CONCAT), SlickDequeNonInv(FIRST_MAX)):
        for i in range(5):
            final.append((i, i) if final.NEEDS else (i,))
        with pytest.raises(RangeRefused):
            final.range(1, 3)
        with pytest.raises(RangeRefused):
            final.range(0, 9)


def test_techniques_check_their_monoid():
    with pytest.raises(TypeError, match="invertible"):
        RInt(CONCAT)
    with pytest.raises(TypeError, match="invertible"):
        SlickDequeInv(CONCAT)
    with pytest.raises(TypeError, match="selective"):
        SlickDequeNonInv(CONCAT)
    with pytest.raises(ValueError):
        LInt(CONCAT, w_min=0)


def test_lint_lookup_is_one_combine():
    """Once the intervals before a landmark are computed (on the first
    lookup reaching back that far), a lookup is one combine; computing them
    costs one combine per interval, once."""
    m = CountingMonoid(CONCAT)
    lint = LInt(m, w_min=16)
    for i in range(200):
        lint.append((i,))
    assert m.reset() == 200 - len(range(0, 200, 16))  # one combine per partial that is not a landmark
    lint.evict(20)
    ranges = [(20, 200), (25, 170), (40, 100), (33, 50), (21, 199)]
    for lo, hi in ranges:
        assert lint.range(lo, hi) == tuple(range(lo, hi))
    assert m.reset() <= len(ranges) + (192 - 20) + (160 - 25) + (96 - 40) + (48 - 33)
    for lo, hi in ranges:
        m.reset()
        assert lint.range(lo, hi) == tuple(range(lo, hi))
        assert m.calls <= 1


def test_slickdeque_noninv_answers_many_ranges_in_one_pass():
    m = CountingMonoid(LAST_MAX)
    d = SlickDequeNonInv(m)
    values = [(3, 0), (1, 1), (4, 2), (1, 3), (5, 4), (9, 5), (2, 6), (6, 7)]
    for v in values:
        d.append(v)
    m.reset()
    starts = [0, 2, 5, 6, 7, 8]
    assert d.ranges(starts) == [(9, 5), (9, 5), (9, 5), (6, 7), (6, 7), EMPTY]
    assert m.calls == 0


@sane_settings(200)
@given(progressions=st.lists(st.tuples(st.integers(-40, 40), st.integers(1, 12)), min_size=1, max_size=5),
       x=st.integers(-100, 300))
def test_next_edge(progressions, x):
    """EdgeSet.next_after (its table of the composite slide, or the pass
    over the progressions) against a scan of the keys after ``x``."""
    from mta.multi.slicing import EdgeSet

    edges = EdgeSet(progressions)
    y = x + 1
    while not any((y - o) % p == 0 for o, p in progressions):
        y += 1
    assert edges.next_after(x) == y
    assert edges.next_after(Fraction(2 * x + 1, 2)) == y  # a key between two ints: the pass, exact

"""Shared monoids, engines, slide policies and operation strategies for the engine tests.

Everything an engine test needs to compare an engine with the brute-force
oracle (:class:`tests.oracle.BruteForceWindow`):

* :data:`ENGINES` -- every engine configuration of ``bench/engines.py``'s
  table with the monoid property it needs (``None``, ``"inverse"`` or
  ``"selective"``);
* :data:`MONOIDS` -- test monoids (:data:`~tests.oracle.CONCAT` first), each
  with a strategy for its values (the identity included) and a strategy for
  prefix-monotone WSPs over those values;
* :func:`operations` -- random interleavings of insert, evict, enforce, push
  and query (plus runs of inserts, so that trees grow a few levels);
* :func:`run_against_oracle` -- applies one operation list to an engine and
  to the oracle, comparing every returned value, then drains both;
* :func:`shared_operations` -- random streams of pushes, queries and flushes
  for the multi-query windows (``SharedWindows``) and their oracle.
"""

from __future__ import annotations

import operator
import os
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from bench.engines import CONFIGURATIONS, EngineSpec
from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA
from mta.native import NativeAmortizedMTA, NativeLogMTA
from mta.monoid import Monoid, product_monoid
from mta.policies import COUNT_MONOID
from tests.oracle import CONCAT, BruteForceWindow

# ---------------------------------------------------------------------------
# hypothesis settings: the whole engine suite runs in about a minute.
# MTA_EXAMPLES_FACTOR=10 (say) multiplies every budget for a deeper local run.

_FACTOR = float(os.environ.get("MTA_EXAMPLES_FACTOR", "1"))


def sane_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max(1, int(max_examples * _FACTOR)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---------------------------------------------------------------------------
# engines


#: Every engine configuration with a single requirement (bench/engines.py's
#: table: one for the benchmarks and the tests).
ENGINES = [e for e in CONFIGURATIONS if e.needs is None or "|" not in e.needs]
MTA_ENGINES = [e for e in ENGINES if e.cls in (LogMTA, AmortizedMTA, NativeAmortizedMTA, NativeLogMTA)]
GENERAL_BASELINES = [e for e in ENGINES if e.needs is None and e not in MTA_ENGINES]
INVERSE_BASELINES = [e for e in ENGINES if e.needs == "inverse"]
SELECTIVE_BASELINES = [e for e in ENGINES if e.needs == "selective"]
BY_NAME = {e.name: e for e in ENGINES}

# ---------------------------------------------------------------------------
# slide policies as plain WSP callables (prefix-monotone by construction)


class Named:
    """A part of a test known by its ``name``, which is its ``repr``: what
    hypothesis prints for a failing example."""

    name: str

    def __repr__(self) -> str:
        return self.name


class Wsp(Named):
    """A named ``wsp(total, prefix)``."""

    def __init__(self, name: str, fn: Callable[[Any, Any], bool]) -> None:
        self.name = name
        self.fn = fn

    def __call__(self, total, prefix) -> bool:
        return bool(self.fn(total, prefix))


ALWAYS = Wsp("always", lambda t, p: True)  # evict everything
NEVER = Wsp("never", lambda t, p: False)


def any_of(a: Wsp, b: Wsp) -> Wsp:
    return Wsp(f"({a!r} | {b!r})", lambda t, p: a(t, p) or b(t, p))


def all_of(a: Wsp, b: Wsp) -> Wsp:
    return Wsp(f"({a!r} & {b!r})", lambda t, p: a(t, p) and b(t, p))


def with_combinations(base: st.SearchStrategy) -> st.SearchStrategy:
    """``None``, always, never, a base policy, or an or/and of two base policies.

    Disjunctions and conjunctions of prefix-monotone predicates are
    prefix-monotone.
    """
    return st.one_of(
        st.none(),
        st.sampled_from([ALWAYS, NEVER]),
        base,
        base,
        st.builds(any_of, base, base),
        st.builds(all_of, base, base),
    )


def _max0(items) -> int:
    """Max of non-negative ints; -1 for none (the identity has no item)."""
    return max(items, default=-1)


def concat_wsps() -> st.SearchStrategy:
    """WSPs over CONCAT aggregates (tuples of non-negative ints).

    Thresholds on item counts ("prefix length <= k", "keep k items"), on sums
    of non-negative values (SumAtMost-like), on times (the items read as
    timestamps, max-based as TimeRange) and OlderThanMax.
    """
    k = st.integers(0, 12)
    base = st.one_of(
        k.map(lambda k: Wsp(f"len(prefix)<={k}", lambda t, p: len(p) <= k)),
        k.map(lambda k: Wsp(f"len(total)-len(prefix)>={k}", lambda t, p: len(t) - len(p) >= k)),
        st.integers(0, 40).map(lambda s: Wsp(f"sum(prefix)<={s}", lambda t, p: sum(p) <= s)),
        st.integers(0, 40).map(lambda s: Wsp(f"sum(total)-sum(prefix)>={s}", lambda t, p: sum(t) - sum(p) >= s)),
        st.integers(0, 10).map(lambda r: Wsp(f"max(total)-max(prefix)>={r}", lambda t, p: _max0(t) - _max0(p) >= r)),
        st.just(Wsp("max(prefix)<max(total)", lambda t, p: _max0(p) < _max0(t))),
    )
    return with_combinations(base)


def scalar_wsps(key: Callable[[Any], Any] = lambda x: x, what: str = "") -> st.SearchStrategy:
    """WSPs over a non-negative, non-decreasing-with-the-prefix scalar
    ``key(aggregate)`` (a sum of non-negative values, a count, a max)."""
    k = st.integers(0, 15)
    base = st.one_of(
        k.map(lambda k: Wsp(f"{what}prefix<={k}", lambda t, p: key(p) <= k)),
        k.map(lambda k: Wsp(f"{what}total-{what}prefix>={k}", lambda t, p: key(t) - key(p) >= k)),
        st.just(Wsp(f"{what}prefix<{what}total", lambda t, p: key(p) < key(t))),
    )
    return with_combinations(base)


# ---------------------------------------------------------------------------
# test monoids


def _free_combine(a: tuple, b: tuple) -> tuple:
    """Concatenate two reduced words, cancelling ``x, -x`` at the junction."""
    i, n = 0, min(len(a), len(b))
    while i < n and a[-1 - i] == -b[i]:
        i += 1
    return a[: len(a) - i] + b[i:]


def _free_invert(w: tuple) -> tuple:
    return tuple(-x for x in reversed(w))


def _reduce_word(letters) -> tuple:
    w: tuple = ()
    for x in letters:
        w = _free_combine(w, (x,))
    return w


#: The free group on 3 generators (reduced words of +-1, +-2, +-3): non-commutative,
#: invertible (``inverse(b.c, b) = b^-1 . c``), its identity () a legal element.
FREE_GROUP = Monoid(
    _free_combine, (), name="free-group", inverse=lambda a, b: _free_combine(_free_invert(b), a)
)


def _mat_mul(x: tuple, y: tuple) -> tuple:
    a, b, c, d = x
    e, f, g, h = y
    return (a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h)


def _adjugate(x: tuple) -> tuple:  # the inverse of a determinant-1 matrix
    a, b, c, d = x
    return (d, -b, -c, a)


SL2_IDENTITY = (1, 0, 0, 1)
#: 2x2 integer matrices of determinant 1 under multiplication (SL(2, Z)):
#: non-commutative, invertible through the adjugate.
SL2 = Monoid(_mat_mul, SL2_IDENTITY, name="SL2(Z)", inverse=lambda a, b: _mat_mul(_adjugate(b), a))
_SL2_GENERATORS = [(0, -1, 1, 0), (0, 1, -1, 0), (1, 1, 0, 1), (1, -1, 0, 1)]  # S, S^-1, T, T^-1


def _sl2_product(gens) -> tuple:
    m = SL2_IDENTITY
    for g in gens:
        m = _mat_mul(m, g)
    return m


#: Integer sum with its inverse (``inverse(a, b) = a - b``).
SUM_INV = Monoid(operator.add, 0, name="sum", inverse=operator.sub, commutative=True)

#: Selective monoids over ``(key, tag)`` pairs; the tag is unique per inserted
#: element, so the result shows WHICH of several tied maxima won.  The
#: identity ``(-1, None)`` (keys are >= 0) is also inserted as an element.
SEL_IDENTITY = (-1, None)
FIRST_MAX = Monoid(lambda a, b: b if b[0] > a[0] else a, SEL_IDENTITY, name="first-max", selective=True)
LAST_MAX = Monoid(lambda a, b: a if a[0] > b[0] else b, SEL_IDENTITY, name="last-max", selective=True)


def tagged(raw, i):
    """Selective monoids: raw key -> ``(key, i)``; key -1 -> the identity itself."""
    return SEL_IDENTITY if raw < 0 else (raw, i)


def plain(raw, i):
    """The value inserted for a raw is the raw itself."""
    return raw


class MonoidSpec(Named):
    """A test monoid, a strategy for raw values, ``make(raw, i)`` building the
    i-th inserted value from its raw, and a strategy of WSPs over values."""

    def __init__(self, name: str, monoid: Monoid, raws, wsps, make: Callable[[Any, int], Any] = plain) -> None:
        self.name = name
        self.monoid = monoid
        self.raws = raws
        self.wsps = wsps
        self.make = make


def _count_of(x):
    return x[1]


#: CONCAT values, () (the identity) among them.
concat_values = st.lists(st.integers(0, 9), max_size=2).map(tuple)
#: FREE_GROUP elements, () (the identity) among them.
free_words = st.lists(st.sampled_from([1, -1, 2, -2, 3, -3]), max_size=3).map(_reduce_word)
_matrices = st.lists(st.sampled_from(_SL2_GENERATORS), max_size=3).map(_sl2_product)
_counts = st.sampled_from([1, 1, 1, 0])  # 0: an element the count policy ignores

CONCAT_SPEC = MonoidSpec("concat", CONCAT, concat_values, concat_wsps())
MONOIDS = [
    CONCAT_SPEC,
    # CONCAT next to a count, as Window pairs an aggregation with Count: "prefix length <= k"
    MonoidSpec(
        "concat x count",
        product_monoid([CONCAT, COUNT_MONOID]),
        st.one_of(st.just(((), 0)), st.tuples(concat_values, _counts)),
        scalar_wsps(_count_of, "count "),
    ),
    MonoidSpec("sum (invertible)", SUM_INV, st.integers(0, 5), scalar_wsps()),
    MonoidSpec(
        "free-group x count",
        product_monoid([FREE_GROUP, COUNT_MONOID]),
        st.one_of(st.just(((), 0)), st.tuples(free_words, _counts)),
        scalar_wsps(_count_of, "count "),
    ),
    MonoidSpec(
        "SL2 x count",
        product_monoid([SL2, COUNT_MONOID]),
        st.one_of(st.just((SL2_IDENTITY, 0)), st.tuples(_matrices, _counts)),
        scalar_wsps(_count_of, "count "),
    ),
    MonoidSpec("first-max", FIRST_MAX, st.integers(-1, 4), scalar_wsps(operator.itemgetter(0), "key "), tagged),
    MonoidSpec("last-max", LAST_MAX, st.integers(-1, 4), scalar_wsps(operator.itemgetter(0), "key "), tagged),
]


def engine_monoid_pairs(engines=None, monoids=None) -> list:
    """``pytest.param(engine, monoid_spec)`` for every engine supporting the monoid."""
    pairs = []
    for m in monoids or MONOIDS:
        for e in engines or ENGINES:
            if e.supports(m.monoid):
                pairs.append(pytest.param(e, m, id=f"{e.name}-{m.name}"))
    return pairs


#: A large prime for :data:`AFFINE`.
AFFINE_P = (1 << 61) - 1


def _affine_then(f: tuple, g: tuple) -> tuple:
    """``x -> a x + b`` maps mod a prime, composed left to right (f, then g)."""
    return (f[0] * g[0] % AFFINE_P, (f[1] * g[0] + g[1]) % AFFINE_P)


#: A cheap (O(1) combine) non-commutative monoid for long runs, where CONCAT's
#: O(n) combines are too slow: with random maps, any lost, duplicated or
#: reordered element changes the aggregate except with negligible probability.
AFFINE = Monoid(_affine_then, (1, 0), name="affine")


class PrefixOracle(BruteForceWindow):
    """BruteForceWindow with an O(n) ``enforce`` for long runs: the prefix
    aggregates are folded incrementally (every prefix is still checked, so
    no monotonicity is assumed)."""

    def enforce(self) -> int:
        if self.wsp is None or not self.items:
            return 0
        total = self.fold(self.items)
        acc, longest = self.monoid.identity, 0
        for k, v in enumerate(self.items, 1):
            acc = self.monoid.combine(acc, v)
            if self.wsp(total, acc):
                longest = k
        del self.items[:longest]
        return longest


# ---------------------------------------------------------------------------
# operations


def operations(raws: st.SearchStrategy, max_ops: int = 40, max_run: int = 40) -> st.SearchStrategy:
    """Lists of ``("insert", raw)``, ``("push", raw)``, ``("evict",)`` (also
    on an empty window), ``("bulk_evict", k)`` (also for more elements than
    the window holds), ``("slide", [(raw, k), ...])``, ``("enforce",)``,
    ``("query",)`` and
    ``("extend", [raw, ...])`` (a run of inserts without enforcement)."""
    op = st.one_of(
        st.tuples(st.just("insert"), raws),
        st.tuples(st.just("push"), raws),
        st.just(("evict",)),
        st.tuples(st.just("bulk_evict"), st.one_of(st.integers(0, 8), st.integers(0, 300))),
        st.tuples(st.just("slide"), st.lists(st.tuples(raws, st.sampled_from([0, 0, 1, 1, 1, 2, 5, 40])),
                                             max_size=max_run)),
        st.just(("enforce",)),
        st.just(("query",)),
        st.tuples(st.just("extend"), st.lists(raws, min_size=2, max_size=max_run)),
    )
    return st.lists(op, max_size=max_ops)


def map_raws(ops, f) -> list:
    """``ops`` with every raw value ``r`` replaced by ``f(r)``, in order."""
    out = []
    for op in ops:
        if op[0] in ("insert", "push"):
            out.append((op[0], f(op[1])))
        elif op[0] == "extend":
            out.append(("extend", [f(r) for r in op[1]]))
        elif op[0] == "slide":
            out.append(("slide", [(f(r), k) for r, k in op[1]]))
        else:
            out.append(op)
    return out


def run_against_oracle(engine, oracle, ops, make=plain, check_len: bool = True) -> None:
    """Apply ``ops`` to ``engine`` and ``oracle`` side by side, comparing every
    result; then drain both with evict/query and check an empty evict raises
    ``IndexError`` without breaking the engine."""
    counter = 0

    def value(raw):
        nonlocal counter
        counter += 1
        return make(raw, counter)

    for step, op in enumerate(ops):
        where = f"step {step} {op!r}"
        apply_operation(engine, oracle, op, value, where)
        if check_len:
            assert len(engine) == len(oracle), where
    drain_against_oracle(engine, oracle)


def apply_operation(engine, oracle, op, value, where: str) -> None:
    """Apply one operation of :func:`operations` to both, comparing results;
    ``value(raw)`` makes the element inserted for a raw."""
    kind = op[0]
    if kind == "insert":
        v = value(op[1])
        engine.insert(v)
        oracle.insert(v)
    elif kind == "extend":
        for raw in op[1]:
            v = value(raw)
            engine.insert(v)
            oracle.insert(v)
    elif kind == "push":
        v = value(op[1])
        assert engine.push(v) == oracle.push(v), where
    elif kind == "evict":
        if len(oracle):
            engine.evict()
            oracle.evict()
        else:
            with pytest.raises(IndexError):
                engine.evict()
            assert len(engine) == 0, where
            assert engine.query() == oracle.query(), where
    elif kind == "bulk_evict":
        if op[1] <= len(oracle):
            engine.bulk_evict(op[1])
            oracle.bulk_evict(op[1])
        else:  # refused before any change
            with pytest.raises(IndexError):
                engine.bulk_evict(op[1])
            assert engine.query() == oracle.query(), where
    elif kind == "slide":  # evictions clipped to what the window holds
        values, evictions, n = [], [], len(oracle)
        for raw, k in op[1]:
            values.append(value(raw))
            n += 1
            evictions.append(min(k, n))
            n -= evictions[-1]
        assert engine.slide(values, evictions) == oracle.slide(values, evictions), where
    elif kind == "enforce":
        assert engine.enforce() == oracle.enforce(), where
    elif kind == "query":
        assert engine.query() == oracle.query(), where
    else:  # pragma: no cover
        raise AssertionError(kind)


# ---------------------------------------------------------------------------
# streams for the multi-query windows (SharedWindows)

#: Writes by weight: pushes after a time step, bursts and gaps, or pushes at
#: the next position (time unused).
_TIMED_WRITES = ["push"] * 6 + ["burst", "gap"]
_ROW_WRITES = ["push"] * 8


@st.composite
def shared_operations(draw, values: st.SearchStrategy, max_ops: int = 30, timed: bool = True) -> list:
    """Up to ``max_ops`` writes and reads for SharedWindows and its oracle.

    Writes, when ``timed``: ``("push", dt, raw)``, ``dt`` after the previous
    time (0 or small), in bursts of equal times, or after a long empty
    period (a gap); else ``("push", raw)`` at the next position.  Reads:
    ``("query", i)`` (the query ``i`` modulo the number of queries),
    ``("flush", None)`` (flush everything) and ``("flush", d)`` (flush
    until an offset ``d``, -3 to 12, from where the test's stream stands)."""
    ops = []
    for _ in range(draw(st.integers(0, max_ops))):
        kind = draw(st.sampled_from((_TIMED_WRITES if timed else _ROW_WRITES) + ["query", "flush", "flush-until"]))
        if kind == "push":
            ops.append(("push", draw(st.sampled_from([0, 0, 1, 1, 2, 3])), draw(values)) if timed
                       else ("push", draw(values)))
        elif kind == "burst":  # equal times
            for v in draw(st.lists(values, min_size=2, max_size=6)):
                ops.append(("push", 0, v))
        elif kind == "gap":  # an empty period
            ops.append(("push", draw(st.integers(8, 40)), draw(values)))
        elif kind == "query":
            ops.append(("query", draw(st.integers(0, 10))))
        elif kind == "flush":
            ops.append(("flush", None))
        else:
            ops.append(("flush", draw(st.integers(-3, 12))))
    return ops


def drain_against_oracle(engine, oracle) -> None:
    """Every suffix of the final window, then the empty window, then reuse."""
    assert len(engine) == len(oracle)
    assert engine.query() == oracle.query(), "final query"
    while len(oracle):
        engine.evict()
        oracle.evict()
        assert len(engine) == len(oracle)
        assert engine.query() == oracle.query(), f"drain, {len(oracle)} left"
    with pytest.raises(IndexError):
        engine.evict()
    assert engine.enforce() == 0
    assert engine.query() == oracle.query()
    assert len(engine) == 0


__all__ = [
    "AFFINE",
    "ALWAYS",
    "BY_NAME",
    "CONCAT_SPEC",
    "ENGINES",
    "EngineSpec",
    "FIRST_MAX",
    "FREE_GROUP",
    "GENERAL_BASELINES",
    "INVERSE_BASELINES",
    "LAST_MAX",
    "MONOIDS",
    "MTA_ENGINES",
    "MonoidSpec",
    "NEVER",
    "Named",
    "PrefixOracle",
    "SELECTIVE_BASELINES",
    "SL2",
    "SUM_INV",
    "Wsp",
    "apply_operation",
    "concat_values",
    "drain_against_oracle",
    "map_raws",
    "engine_monoid_pairs",
    "free_words",
    "operations",
    "plain",
    "run_against_oracle",
    "sane_settings",
    "shared_operations",
    "tagged",
]

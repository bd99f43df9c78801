"""The compiled MTA cores (mta/_native.c via mta.native).

tests/test_engines.py runs "AMTA-native" and "LMTA-native" with every other
engine against the brute-force oracle (bench.engines adds them when the core
is built).  Here, for each compiled engine next to its pure-Python
reference: the native combines of the ready monoids against the reference
(same tree, so the same results, type for type) and the oracle, the same
monoid calls as the reference, the failure guard, references released, the
selection functions, and the pure-Python fallback.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import aggregators as A
from mta import native
from mta.amortized_mta import AmortizedMTA
from mta.level_queue import MemoryLevelQueue
from mta.log_mta import LogMTA
from mta.errors import CountError, EmptyWindowError, EngineFailedError
from mta.monoid import CountingMonoid, Monoid, product_monoid
from mta.policies import COUNT_MONOID, MAX_MONOID
from tests.oracle import CONCAT, BruteForceWindow
from tests.strategies import sane_settings

needs_core = pytest.mark.skipif(not native.AVAILABLE, reason=f"compiled core not in use: {native.WHY_NOT}")

#: (compiled engine, its pure-Python reference)
PAIRS = pytest.mark.parametrize(("compiled", "reference"), [(native.NativeAmortizedMTA, AmortizedMTA),
                                                           (native.NativeLogMTA, LogMTA)],
                                ids=["AMTA", "LMTA"])

# Equal values of different types (1 and 1.0, 0 and 0.0 and False) show which
# one a selective combine keeps on ties; None is the selective identity.
_SCALARS = st.sampled_from([0, 0.0, 1, 1.0, -1, 2, 2.5, -0.5])
_READY = [
    ("sum", A.SUM.monoid, _SCALARS),
    ("count", COUNT_MONOID, st.integers(-3, 3)),
    ("min", A.MIN.monoid, st.one_of(st.none(), _SCALARS)),
    ("max", A.MAX.monoid, st.one_of(st.none(), _SCALARS)),
    ("policy max", MAX_MONOID, _SCALARS),
    ("moments", A.MOMENTS, st.one_of(st.sampled_from([(0, 0, 0)]), st.builds(
        A._moments_lift, st.one_of(st.integers(-5, 5), st.floats(-1e3, 1e3), st.just(float("inf")))))),
]


def _slides(values: st.SearchStrategy) -> st.SearchStrategy:
    """Batches of (value, eviction count) that never evict past the window."""

    @st.composite
    def batches(draw):
        n = draw(st.integers(0, 120))
        vs = [draw(values) for _ in range(n)]
        size, ks = 0, []
        for _ in vs:
            size += 1
            k = draw(st.one_of(st.just(0), st.just(1), st.integers(0, size)))
            ks.append(k)
            size -= k
        return vs, ks

    return batches()


def _typed(xs):
    return [repr(x) for x in xs]  # 1 and 1.0 differ, NaN equals NaN


@needs_core
def test_ready_monoids_get_native_combines():
    kinds = {name: native.combine_kind(m.combine) for name, m, _ in _READY}
    assert kinds == {"sum": native._native.KIND_ADD, "count": native._native.KIND_ADD,
                     "min": native._native.KIND_SELECT_LT, "max": native._native.KIND_SELECT_GT,
                     "policy max": native._native.KIND_BUILTIN_MAX, "moments": native._native.KIND_MOMENTS}
    for m in (CONCAT, CountingMonoid(A.SUM.monoid), A.FIRST.monoid, A.MEAN.monoid):
        assert native.combine_kind(m.combine) == native._native.KIND_CALL, m


@needs_core
@PAIRS
@pytest.mark.parametrize(("name", "monoid", "values"), _READY, ids=[r[0] for r in _READY])
@sane_settings(60)
@given(data=st.data())
def test_native_combines_match_the_reference(compiled, reference, name, monoid, values, data):
    """Same results as the pure-Python engine (same tree: same values and
    types, float rounding included) and, over exact values, as the oracle."""
    vs, ks = data.draw(_slides(values))
    got = compiled(monoid).slide(vs, ks)
    ref = reference(monoid).slide(vs, ks)
    assert _typed(got) == _typed(ref)
    exact = [v for v in vs if not isinstance(v, (float, tuple))]  # moments divide: rounding depends on order
    if len(exact) == len(vs):
        assert got == BruteForceWindow(monoid).slide(vs, ks)


@needs_core
@PAIRS
@sane_settings(60)
@given(data=st.data())
def test_same_monoid_calls_as_the_reference(compiled, reference, data):
    """A user monoid (non-commutative, its identity among the values) gets
    exactly the reference engine's combine calls, in push, slide and evict,
    and the policy exactly its calls (the same arguments, in order)."""
    raws = data.draw(st.lists(st.sampled_from([(), ("a",), ("b",), ("c",)]), max_size=80))
    keep = data.draw(st.integers(0, 12))

    def wsp(total, prefix):
        return len(total) - len(prefix) >= keep

    counted = {}
    for cls in (compiled, reference):
        m = CountingMonoid(CONCAT)
        seen = []

        def logged(total, prefix):
            seen.append((total, prefix))
            return wsp(total, prefix)

        e = cls(m, logged)
        out = [e.push(v) for v in raws]
        out += e.slide(raws[:10], [1] * len(raws[:10]))
        while len(e):
            e.evict()
            out.append(e.query())
        counted[cls] = (out, m.calls, seen)
    assert counted[compiled] == counted[reference]
    oracle = BruteForceWindow(CONCAT, wsp)
    assert counted[reference][0][: len(raws)] == [oracle.push(v) for v in raws]


class Boom(Exception):
    pass


class IndexBoom(IndexError):
    """User code raising an IndexError that is not the empty-window error:
    it fails the engine like any other exception."""


@needs_core
@PAIRS
@pytest.mark.parametrize("error", [Boom, IndexBoom])
@pytest.mark.parametrize("where", ["combine", "wsp", "slide"])
def test_user_code_raising_marks_the_engine_failed(compiled, reference, where, error):
    """combine raising part-way through push or slide, or the policy raising
    part-way through an enforcement: every later operation raises
    EngineFailedError from it, as the pure-Python engine does."""
    calls = [0]

    def combine(a, b):
        calls[0] += 1
        if where != "wsp" and calls[0] == 7:
            raise error("combine")
        return a + b

    def wsp(total, prefix):
        if where == "wsp" and len(total) >= 4:
            raise error("wsp")
        return len(total) - len(prefix) >= 3

    for cls in (compiled, reference):
        calls[0] = 0
        e = cls(Monoid(combine, ()), wsp)
        with pytest.raises(error):
            if where == "slide":
                e.slide([(i,) for i in range(20)], [0, 1] * 10)
            for i in range(20):
                e.push((i,))
        for op in (lambda: e.insert((0,)), e.query, e.evict, e.enforce, lambda: e.push((1,)),
                   lambda: e.bulk_evict(0), lambda: e.slide([(2,)], [0])):
            with pytest.raises(EngineFailedError, match=f"{cls.__name__} is unusable") as info:
                op()
            assert isinstance(info.value.__cause__, error)


#: Products whose components mix native kinds and Python calls: a
#: non-commutative one (tuple concatenation), selective ones with the None
#: identity, moments, and a product nested in a product.
_PRODUCTS = [
    ("concat x max x sum", product_monoid([CONCAT, A.MAX.monoid, A.SUM.monoid]),
     st.tuples(st.sampled_from([(), ("a",), ("b", "c")]), st.one_of(st.none(), _SCALARS), _SCALARS)),
    ("min x moments", product_monoid([A.MIN.monoid, A.MOMENTS]),
     st.tuples(st.one_of(st.none(), _SCALARS), st.sampled_from([(0, 0, 0), (1, 2.0, 0.0), (2, 1.5, 0.5)]))),
    ("(concat x count) x max", product_monoid([product_monoid([CONCAT, COUNT_MONOID]), A.MAX.monoid]),
     st.tuples(st.tuples(st.sampled_from([(), ("x",)]), st.integers(0, 2)), st.one_of(st.none(), _SCALARS))),
]


@needs_core
def test_products_combine_componentwise_in_the_core():
    """A product's combine reaches the core as its components' kinds (ready
    ones native, the rest called), nested products too; a wrapper that
    hides the product (counting) is called as it is."""
    kind, spec = native.combine_spec(_PRODUCTS[2][1].combine)
    assert kind == native._native.KIND_PRODUCT and spec[0] is _PRODUCTS[2][1].combine
    inner = spec[2][0]
    assert spec[1] == (native._native.KIND_PRODUCT, native._native.KIND_SELECT_GT)
    assert inner[1] == (native._native.KIND_CALL, native._native.KIND_ADD) and inner[2][0] is CONCAT.combine
    counting = CountingMonoid(_PRODUCTS[0][1])
    assert native.combine_spec(counting.combine) == (native._native.KIND_CALL, counting.combine)
    for bad in [("not", "a spec"), (CONCAT.combine, (0,), ()), (CONCAT.combine, (99,), (CONCAT.combine,))]:
        with pytest.raises(ValueError):
            native._native.AmortizedCore(bad, (), native._native.KIND_PRODUCT, None, None, EmptyWindowError, 1)


@needs_core
@PAIRS
@pytest.mark.parametrize(("name", "monoid", "values"), _PRODUCTS, ids=[r[0] for r in _PRODUCTS])
@sane_settings(60)
@given(data=st.data())
def test_products_match_the_reference(compiled, reference, name, monoid, values, data):
    """Same results as the pure-Python engine, type for type, with identity
    values among the inputs; over exact values, as the oracle."""
    vs, ks = data.draw(_slides(st.one_of(st.just(monoid.identity), values)))
    got = compiled(monoid).slide(vs, ks)
    ref = reference(monoid).slide(vs, ks)
    assert _typed(got) == _typed(ref)
    if not any(isinstance(x, float) for x in repr_leaves(vs)):
        assert got == BruteForceWindow(monoid).slide(vs, ks)


def repr_leaves(values):
    """Every scalar inside ``values`` (nested tuples flattened)."""
    for v in values:
        if isinstance(v, tuple):
            yield from repr_leaves(v)
        else:
            yield v


@needs_core
@PAIRS
def test_product_values_of_another_shape_take_the_python_combine(compiled, reference):
    """Values that are not tuples of the product's width (lists here) go
    through the product's Python combine, as in the reference."""
    monoid = product_monoid([CONCAT, A.SUM.monoid])
    vs = [[("a",), 1], [("b",), 2], (("c",), 3), [("d",), 4]]
    assert compiled(monoid).slide(vs, [0, 0, 1, 1]) == reference(monoid).slide(vs, [0, 0, 1, 1])


@needs_core
@PAIRS
def test_product_component_raising_marks_the_engine_failed(compiled, reference):
    """A component that raises inside the core's product (max of an int and
    a str) fails both engines alike, the cause kept."""
    monoid = product_monoid([CONCAT, A.MAX.monoid])
    for e in (compiled(monoid), reference(monoid)):
        e.insert((("a",), 1))
        with pytest.raises(TypeError):
            for _ in range(4):
                e.insert((("b",), "x"))
        with pytest.raises(EngineFailedError) as info:
            e.query()
        assert isinstance(info.value.__cause__, TypeError)


@needs_core
@PAIRS
def test_native_combine_raising_marks_the_engine_failed(compiled, reference):
    """A ready monoid's combine done in C raises as its Python callable does
    (max of an int and a str): both engines are failed afterwards."""
    engines = [compiled(A.MAX.monoid), reference(A.MAX.monoid)]
    for e in engines:
        e.insert(1)
        with pytest.raises(TypeError):
            for _ in range(4):
                e.insert("a")
        with pytest.raises(EngineFailedError) as info:
            e.query()
        assert isinstance(info.value.__cause__, TypeError)


@needs_core
@PAIRS
def test_refusals_leave_the_engine_usable(compiled, reference):
    e = compiled(CONCAT)
    with pytest.raises(EmptyWindowError):
        e.evict()
    e.insert((1,))
    for bad in (lambda: e.bulk_evict(2), lambda: e.bulk_evict(-1), lambda: e.bulk_evict(True),
                lambda: e.slide([(2,)], [3]), lambda: e.slide([(2,)], [])):
        with pytest.raises((EmptyWindowError, CountError)):
            bad()
    assert e.query() == (1,) and len(e) == 1
    assert e.slide([(2,), (3,)], [0, 2]) == [(1, 2), (3,)]


@needs_core
@PAIRS
def test_store_windows_are_refused_with_the_reason(compiled, reference):
    with pytest.raises(TypeError, match=f"store.*pure-Python {reference.__name__}"):
        compiled(CONCAT, store=object(), window_id="w")
    with pytest.raises(TypeError, match=f"pure-Python {reference.__name__}"):
        compiled(CONCAT).checkpoint()


@needs_core
@pytest.mark.parametrize(("select", "compiled", "reference"),
                         [(native.amortized_engine, native.NativeAmortizedMTA, AmortizedMTA),
                          (native.log_engine, native.NativeLogMTA, LogMTA)], ids=["AMTA", "LMTA"])
def test_selection_picks_the_core_for_memory_windows(select, compiled, reference):
    class Queue(MemoryLevelQueue):
        pass

    assert type(select(CONCAT)) is compiled
    assert type(select(CONCAT, level_queue=Queue)) is reference


class Tracked:
    """A value whose live instances are counted (references released)."""

    live = 0

    def __init__(self, x):
        self.x = x
        Tracked.live += 1

    def __del__(self):
        Tracked.live -= 1

    def __add__(self, other):
        return Tracked(self.x + other.x)


@needs_core
@PAIRS
def test_references_are_released(compiled, reference):
    gc.collect()
    before = Tracked.live
    e = compiled(Monoid(lambda a, b: a + b, Tracked(0)), lambda t, p: t.x - p.x >= 100)
    for i in range(5000):
        e.push(Tracked(1))
    assert e.query().x == 100
    e.bulk_evict(len(e) // 2)
    assert e.query().x == 50
    del e
    gc.collect()
    assert Tracked.live == before


def test_pure_python_fallback():
    """MTA_PURE_PYTHON=1: no native engine listed, a clear refusal, the
    pure-Python engine as usual."""
    code = (
        "from mta import native\n"
        "from bench.engines import BY_NAME\n"
        "from mta.amortized_mta import AmortizedMTA\n"
        "from mta.aggregators import SUM\n"
        "from mta.log_mta import LogMTA\n"
        "assert not native.AVAILABLE and 'AMTA-native' not in BY_NAME and 'LMTA-native' not in BY_NAME\n"
        "for cls in (native.NativeAmortizedMTA, native.NativeLogMTA):\n"
        "    try:\n"
        "        cls(SUM.monoid)\n"
        "    except RuntimeError as exc:\n"
        "        assert 'MTA_PURE_PYTHON' in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError('built without the core')\n"
        "for select, cls in ((native.amortized_engine, AmortizedMTA), (native.log_engine, LogMTA)):\n"
        "    e = select(SUM.monoid)\n"
        "    assert type(e) is cls and e.slide([1, 2, 3], [0, 0, 1]) == [1, 3, 5]\n"
    )
    env = dict(os.environ, MTA_PURE_PYTHON="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@needs_core
def test_engine_benchmark_runs(capsys):
    """bench.native_engine's table, small: a row per engine, the ratio rows
    of both cores, and --callgrind's instruction counts for one engine."""
    from bench import native_engine

    assert native_engine.main(["--size", "64", "--updates", "200", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert set(rows) == {"AMTA", "AMTA-native", "LMTA", "LMTA-native", "DABA", "TwoStacks", "AMTA/native",
                         "LMTA/native"}
    assert all(len(cells) == len(native_engine.WORKLOADS) for cells in rows.values())
    assert native_engine.main(["--callgrind", "--size", "64", "--updates", "400", "--engines", "LMTA-native",
                               "--workloads", "ieq-max"]) == 0
    (row,) = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("LMTA-native")]
    assert float(row[1].replace(",", "")) > 0

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

import functools
import gc
import operator
import os
import subprocess
import sys
import weakref

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


def _raising_values():
    yield 1
    raise KeyError("values")


class _BadCount:
    def __index__(self):
        raise KeyError("count")


def _outcome(engine, op):
    """What ``op(engine)`` gave: its result, or its error's type, message
    (the engine's class name left out) and cause's type."""
    try:
        return "ok", op(engine)
    except Exception as exc:  # noqa: BLE001 - every error is compared
        cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else None
        return type(exc).__name__, str(exc).replace(type(engine).__name__, "<engine>"), cause


#: Operations whose own Python code raises, before the core runs.
_FAILING = {"slide values": lambda e: e.slide(_raising_values(), [0, 0]),
            "bulk_evict count": lambda e: e.bulk_evict(_BadCount())}


@needs_core
@PAIRS
@pytest.mark.parametrize("failing", sorted(_FAILING))
def test_failing_in_the_wrapper_fails_the_engine_as_the_reference(compiled, reference, failing):
    """An operation whose own Python code raises before the core runs (a
    slide's values, a count's __index__ raising other than TypeError)
    fails the engine as the reference's guard does: every later call,
    through the core's methods too (one bound before the failure among
    them), raises EngineFailedError from it; refusals (an empty window, a
    bad count) before it change nothing."""
    ops = [lambda e: e.evict(), lambda e: e.bulk_evict(3), lambda e: e.slide([1, 2], [0, 5]),
           lambda e: (e.insert(4), e.query())[1], _FAILING[failing], lambda e: e.bulk_evict(_BadCount()),
           lambda e: e.insert(5), lambda e: e.query(), lambda e: e.evict(), lambda e: e.enforce(),
           lambda e: e.push(6), lambda e: e.bulk_evict(0), lambda e: e.slide([7], [0]), lambda e: len(e)]
    seen = {}
    for cls in (compiled, reference):
        e = cls(A.SUM.monoid, lambda t, p: False)
        bound = e.insert
        seen[cls] = [_outcome(e, op) for op in ops] + [_outcome(e, lambda e: bound(8))]
    assert seen[compiled] == seen[reference]
    assert [o[0] for o in seen[reference][4:-2]] == ["KeyError"] + ["EngineFailedError"] * 8
    assert seen[reference][-1][0] == "EngineFailedError"


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


class _Named:
    """A user's combine that happens to have a tuple ``components``: a
    pair's sum, named per coordinate."""

    components = ("x", "y")

    def __call__(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class _Scaled(_Named):
    """Its ``components`` callables the core could run, yet its own
    combine is another: (a0 + b0, a1 * b1)."""

    components = (operator.add, operator.add)

    def __call__(self, a, b):
        return (a[0] + b[0], a[1] * b[1])


@needs_core
@PAIRS
def test_only_products_built_here_combine_componentwise(compiled, reference):
    """A combine with a ``components`` attribute that product_monoid did
    not build (a user's, or a functools.wraps wrapper of a product's, which
    copies it) is called as it is, as the reference calls it; products
    still reach the core componentwise."""
    pair = product_monoid([A.SUM.monoid, A.SUM.monoid])
    calls = [0]

    @functools.wraps(pair.combine)
    def counted(a, b):
        calls[0] += 1
        return pair.combine(a, b)

    vs, ks = [(1, 2), (3, 4), (5, 6), (7, 8), (0, 1)], [0, 0, 1, 0, 2]
    for combine in (_Named(), _Scaled(), counted):
        monoid = Monoid(combine, (0, 1))
        calls[0] = 0
        ref = reference(monoid).slide(vs, ks)
        ref_calls, calls[0] = calls[0], 0
        assert compiled(monoid).slide(vs, ks) == ref and calls[0] == ref_calls
        assert native.combine_spec(combine) == (native._native.KIND_CALL, combine)
    assert native.combine_spec(pair.combine)[0] == native._native.KIND_PRODUCT
    assert pair.combine.components == (operator.add, operator.add)


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


def _in_child(script: str) -> str:
    """``script``'s output, run in a child process, so that a crash of the
    interpreter fails the test instead of ending the run."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout


@needs_core
@PAIRS
@pytest.mark.parametrize("caught", [False, True], ids=["let-through", "caught"])
@pytest.mark.parametrize("where", ["combine", "wsp"])
def test_a_call_back_into_the_window_from_user_code_is_refused(compiled, reference, where, caught):
    """combine (in slide and push) or the policy (in enforce) calling the
    window's own operations while one runs: each call is refused with
    RuntimeError before it changes anything.  Let through, the error fails
    the engine as any other from user code; caught, the operation goes on
    and the window is the reference's, which nothing called back into."""
    refused = []
    box = {}

    def call_back():
        e = box.get("engine")
        if e is None:
            return
        for op in (e.evict, lambda: e.bulk_evict(1), lambda: e.insert((9,)), e.query, e.enforce,
                   lambda: e.push((9,)), lambda: e.slide([(9,)], [1])):
            try:
                op()
            except RuntimeError as exc:
                if not caught:
                    raise
                assert "re-entrant calls are refused" in str(exc)
                refused.append(exc)
            else:
                raise AssertionError("a call back into the window ran")

    def combine(a, b):
        if where == "combine":
            call_back()
        return a + b

    def wsp(total, prefix):
        if where == "wsp":
            call_back()
        return len(total) - len(prefix) >= 3

    ref = reference(Monoid(lambda a, b: a + b, ()), lambda t, p: len(t) - len(p) >= 3)
    e = compiled(Monoid(combine, ()), wsp)
    box["engine"] = e
    values = [(i,) for i in range(12)]
    if not caught:
        with pytest.raises(RuntimeError, match="re-entrant calls are refused") as info:
            e.slide(values, [0] * len(values)) if where == "combine" else e.push(values[0])
        with pytest.raises(EngineFailedError, match=f"{compiled.__name__} is unusable") as failed:
            e.query()
        assert failed.value.__cause__ is info.value
        return
    assert e.slide(values, [0, 1] * 6) == ref.slide(values, [0, 1] * 6)
    assert [e.push(v) for v in values] == [ref.push(v) for v in values]
    assert refused and (e.query(), len(e), e.enforce()) == (ref.query(), len(ref), ref.enforce())
    box.clear()
    assert [e.push(v) for v in values] == [ref.push(v) for v in values]
    assert e.slide(values, [1] * 12) == ref.slide(values, [1] * 12) and len(e) == len(ref)


@needs_core
@PAIRS
def test_the_core_checks_slide_counts_itself(compiled, reference):
    """slide_checked, the method slide calls once check_evictions passed,
    checks every count before any change (0 <= count <= the size after its
    insert), and reads copies of its lists: an __index__ emptying the
    caller's lists changes nothing it reads (a child process: both read
    past the window or the list)."""
    out = _in_child(
        "from mta import native, aggregators\n"
        f"e = native.{compiled.__name__}(aggregators.SUM.monoid)\n"
        "e.insert(1)\n"
        "for counts in ([0, 9], [3, 0], [0, -5], [2, 2]):\n"
        "    try:\n"
        "        e._core.slide_checked([2, 3], counts)\n"
        "    except ValueError as exc:\n"
        "        assert 'slide_checked: count' in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError(counts)\n"
        "    assert (len(e), e.query(), e._core.failure) == (1, 1, None)\n"
        "print(e._core.slide_checked([2, 3], [0, 3]), len(e))\n"
        "values, counts = [1, 2, 3, 4], []\n"
        "class Shrink:\n"
        "    def __index__(self):\n"
        "        values.clear(); counts.clear()\n"
        "        return 0\n"
        "counts.extend([Shrink(), Shrink(), 1, 1])\n"
        "print(e._core.slide_checked(values, counts), len(e))\n")
    assert out.splitlines() == ["[3, 0] 0", "[1, 3, 5, 7] 2"]


@needs_core
def test_cores_made_without_init_refuse_every_call():
    """A core made by __new__ alone, or whose __init__ failed part-way,
    refuses every call (RuntimeError naming why) instead of reading the
    state __init__ sets (a child process: that crashed)."""
    out = _in_child(
        "from mta import _native\n"
        "from mta.markers import EMPTY\n"
        "from mta.multi.query import Result\n"
        "def calls(core):\n"
        "    if isinstance(core, _native.SharedRowsCore):\n"
        "        return [lambda: core.push(1), lambda: core.suffix(0, 0), lambda: core.window(0, 0, 1),\n"
        "                lambda: core.first_key(0, 0), lambda: core.held(0), core.evict, core.nexts,\n"
        "                lambda: core.set_nexts([])]\n"
        "    return [lambda: core.insert(1), core.evict, lambda: core.bulk_evict_checked(0), core.query,\n"
        "            core.enforce, lambda: core.push(1), lambda: core.slide_checked([1], [0]), core.head]\n"
        "bad = _native.SharedRowsCore.__new__(_native.SharedRowsCore)\n"
        "try:\n"
        "    bad.__init__([(1, max, 0, None, False, [0], 1)], [(0, 0, 1, None, [])], Result, EMPTY, 1)\n"
        "except ValueError:\n"
        "    pass\n"
        "types = (_native.AmortizedCore, _native.LogCore, _native.SharedRowsCore)\n"
        "for core in [t.__new__(t) for t in types] + [bad]:\n"
        "    for call in calls(core):\n"
        "        try:\n"
        "            call()\n"
        "        except RuntimeError as exc:\n"
        "            assert 'not initialised' in str(exc), exc\n"
        "        else:\n"
        "            raise AssertionError('ran')\n"
        "    print(type(core).__name__, 'refused')\n")
    assert out.split() == ["AmortizedCore", "refused", "LogCore", "refused", "SharedRowsCore", "refused",
                           "SharedRowsCore", "refused"]


class _Payload:
    """Stands for a window's contents, weakly referenced."""


@needs_core
@PAIRS
def test_failed_engines_are_collected(compiled, reference):
    """A failed core keeps the exception, whose traceback holds the frame
    that caught it, whose locals hold the engine: a cycle through the core,
    which the garbage collector takes (as the pure-Python engine's)."""

    def combine(a, b):
        if a is not None and b is not None:
            raise Boom("combine")
        return a

    def one_window():
        e = compiled(Monoid(combine, None))
        payload = _Payload()
        e.insert(payload)
        try:
            e.insert(_Payload())
        except Boom:
            pass
        assert e._core.failure is not None
        return weakref.ref(e), weakref.ref(payload)

    refs = [one_window() for _ in range(1000)]
    gc.collect()
    assert sum(r() is not None for pair in refs for r in pair) == 0


@needs_core
def test_shared_rows_cores_in_a_cycle_are_collected():
    """A SharedRowsCore whose lower holds the core itself is collected."""
    from mta.markers import EMPTY
    from mta.multi.query import Result

    refs = []
    for _ in range(200):
        held, payload = [], _Payload()

        def lower(v, held=held):
            return v

        core = native._native.SharedRowsCore([(native._native.KIND_ADD, operator.add, 0, None, False, [0], 1)],
                                             [(0, 1, 2, lower, [(0, "q")])], Result, EMPTY, 1)
        held.extend([core, payload])
        assert [r.value for r in core.push(1) + core.push(2)] == [1, 3]
        refs.append(weakref.ref(payload))
        del core, held, payload, lower
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


@needs_core
def test_shared_rows_cores_refuse_calls_back_into_them():
    """A lower calling back into the core while a push runs is refused
    (RuntimeError from the push, whose caller marks its windows failed);
    the core answers again once the push is over."""
    from mta.markers import EMPTY
    from mta.multi.query import Result

    box = {}

    def lower(v):
        if box:
            box["core"].push(100)
        return v

    core = native._native.SharedRowsCore([(native._native.KIND_ADD, operator.add, 0, None, False, [0], 1)],
                                         [(0, 1, 2, lower, [(0, "q")])], Result, EMPTY, 1)
    assert [r.value for r in core.push(1)] == [1]
    box["core"] = core
    with pytest.raises(RuntimeError, match="re-entrant calls are refused"):
        core.push(2)
    box.clear()
    assert core.suffix(0, 0) == 3


@needs_core
def test_shared_rows_cores_read_copies_of_their_lists():
    """set_nexts and the edge tables read copies of the caller's lists: an
    __index__ emptying a list changes nothing they read (a child process:
    that read past the emptied list)."""
    out = _in_child(
        "import operator\n"
        "from mta import _native\n"
        "from mta.markers import EMPTY\n"
        "from mta.multi.query import Result\n"
        "class Clear:\n"
        "    def __init__(self, target, n): self.target, self.n = target, n\n"
        "    def __index__(self):\n"
        "        self.target.clear()\n"
        "        return self.n\n"
        "table = [0]\n"
        "table.insert(0, Clear(table, 0))\n"
        "core = _native.SharedRowsCore([(1, operator.add, 0, None, False, table, 2)],\n"
        "                              [(0, 2, 4, None, [(0, 'a')]), (0, 2, 2, None, [(1, 'b')])], Result, EMPTY, 1)\n"
        "ends = [7, 9]\n"
        "ends.insert(0, Clear(ends, 5))\n"
        "try:\n"
        "    core.set_nexts(ends)\n"
        "except TypeError as exc:\n"
        "    print('refused', exc)\n"
        "ends = [9]\n"
        "ends.insert(0, Clear(ends, 5))\n"
        "core.set_nexts(ends)\n"
        "print(core.nexts())\n")
    assert out.split("\n")[:2] == ["refused set_nexts takes a list, one end per spec", "[5, 9]"]


@needs_core
@PAIRS
def test_a_combine_failing_in_split_leaks_nothing(compiled, reference):
    """combine raising at each point of pushes with enforcement, the
    Amortized MTA's split among them (R1 partly built): once the engine is
    gone, every value it made is released."""
    live = [0]

    class V:
        __slots__ = ("s",)

        def __init__(self, s):
            self.s = s
            live[0] += 1

        def __del__(self):
            live[0] -= 1

    def trial(fail_at):
        calls = [0]

        def combine(a, b):
            calls[0] += 1
            if calls[0] == fail_at:
                raise Boom("combine")
            return V(a.s + b.s)

        e = compiled(Monoid(combine, V("")), lambda t, p: len(t.s) - len(p.s) >= 37)
        try:
            for i in range(120):
                e.push(V(chr(97 + i % 26)))
        except Boom:
            pass
        else:
            raise AssertionError("combine did not raise")
        del e  # the failure's traceback holds this frame: no cycle through the engine

    gc.collect()
    before = live[0]
    for k in range(60, 280):
        trial(k)
        assert live[0] == before, k


@needs_core
def test_compiled_kernels_refuse_outputs_sharing_memory_with_their_inputs():
    """window_extreme and window_moments write their outputs while reading
    the windows' bounds and values: an output overlapping x, start, end or
    the other output is refused (ValueError naming both) before anything
    is written, and outputs in other parts of one buffer are filled right
    (a child process: an end overwritten by a result made the kernel read
    and write past its buffers)."""
    pytest.importorskip("numpy")
    out = _in_child(
        "import numpy as np\n"
        "from mta import native\n"
        "def run(fn, *args):\n"
        "    try:\n"
        "        return fn(*args)\n"
        "    except ValueError as exc:\n"
        "        return str(exc)\n"
        "ext, mom = native.window_extreme, native.window_moments\n"
        "x, zeros = np.array([100000, 1, 2, 3]), np.zeros(4, dtype=np.int64)\n"
        "buf = np.array([0, 1, 2, 3, 0])\n"
        "print(run(ext, x, zeros, buf[:4], buf[1:], True))\n"
        "print(run(ext, x, zeros, np.arange(4), x, False))\n"
        "ends = np.array([0, 1, 2, 3, 3])\n"
        "print(run(ext, x.astype(float), zeros, ends[:4], ends[1:].view(float), True))\n"
        "print(run(mom, x.astype(float), zeros, ends[:4], ends[1:].view(float), np.empty(4)))\n"
        "both = np.empty(5)\n"
        "print(run(mom, x.astype(float), zeros, np.arange(4), both[:4], both[1:]))\n"
        "one = np.array([0, 0, 1, 2, 0, 1, 2, 3, 9, 9, 9, 9])\n"
        "print(run(ext, x, one[:4], one[4:8], one[8:], True), one[8:].tolist())\n"
        "spread = np.zeros(8)\n"
        "print(run(mom, x.astype(float), one[:4], one[4:8], spread[:4], spread[4:]), spread.tolist())\n")
    assert out.splitlines() == [
        "window_extreme: out shares memory with end",
        "window_extreme: out shares memory with x",
        "window_extreme: out shares memory with end",
        "window_moments: mean_out shares memory with end",
        "window_moments: m2_out shares memory with mean_out",
        "True [100000, 100000, 2, 3]",
        f"True {[100000.0, 50000.5, 1.5, 2.5] + [0.0, 4999900000.5, 0.5, 0.5]}"]


@needs_core
@pytest.mark.parametrize("name", ["window_extreme", "window_moments"])
def test_compiled_kernels_check_each_window_as_they_read_it(name):
    """Another thread writing an end past x while a kernel runs (the GIL
    released): the kernel refuses that window with the ValueError of a
    window outside x, or finishes before it reads it (a child process:
    it read and wrote past its buffers)."""
    pytest.importorskip("numpy")
    call = ("native.window_extreme(x, start, end, np.empty(n), True)" if name == "window_extreme"
            else "native.window_moments(x, start, end, np.empty(n), np.empty(n))")
    out = _in_child(
        "import threading\n"
        "import numpy as np\n"
        "from mta import native\n"
        "n = 1_000_000\n"
        "x, start, end = np.arange(n, dtype=float), np.arange(n), np.arange(n)\n"
        "running, done = threading.Event(), threading.Event()\n"
        "def write():\n"
        "    while not done.is_set():\n"
        "        if running.is_set():\n"
        "            end[-1] = 1 << 40\n"
        "writer = threading.Thread(target=write)\n"
        "writer.start()\n"
        "seen = set()\n"
        "for _ in range(20):\n"
        "    end[-1] = n - 1\n"
        "    running.set()\n"
        "    try:\n"
        f"        seen.add({call})\n"
        "    except ValueError as exc:\n"
        f"        assert str(exc) == '{name}: window 999999 [999999, 1099511627776] is outside the 1000000 values'\n"
        "        seen.add('outside')\n"
        "    running.clear()\n"
        "done.set()\n"
        "writer.join()\n"
        "print(*seen)\n")
    assert set(out.split()) <= {"True", "outside"}

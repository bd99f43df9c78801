"""The multi-query API's contract: argument checks (refused before any
change), the failure guard, flush and query(name) semantics, and the
slicing formulas (Table 1, formula F1) of mqo-shein-chrysanthis-tkde."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mta
from mta import Aggregator, EngineFailedError, Monoid, OperationRefused, Query, Result, SharedWindows
from mta.aggregators import COUNT, MAX, SUM
from mta.multi import cutty, pairs, panes
from mta.multi.query import OutOfOrderError
from mta.multi.shared import ArgumentRefused, UnknownQuery
from mta.multi.slicing import EdgeSet, edges, f1_edges, lcm
from tests.multi_oracle import MultiOracle
from tests.oracle import CONCAT
from tests.strategies import sane_settings
from tests import multi_paths

#: every test here runs with the compiled core in use where it applies, then without
executor = multi_paths.executor

VALUE = SUM.on(lambda r: r[1])
TIME = lambda r: r[0]  # noqa: E731
CONCAT_AGG = Aggregator(CONCAT, lambda r: r[1])


def test_exports():
    assert mta.Query is Query and mta.Result is Result and mta.SharedWindows is SharedWindows
    r = Result("q", 3, 7)
    assert (r.query, r.end, r.value) == ("q", 3, 7)


# ---------------------------------------------------------------------------
# Query arguments


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, ValueError),  # neither range nor rows
        ({"range": 3, "rows": 3}, ValueError),
        ({"range": 0}, ValueError),
        ({"range": -1}, ValueError),
        ({"range": float("nan")}, ValueError),
        ({"range": float("inf")}, ValueError),
        ({"range": True}, TypeError),
        ({"range": "3"}, TypeError),
        ({"rows": 2.5}, TypeError),
        ({"rows": 0}, ValueError),
        ({"rows": 3, "slide": 1.5}, TypeError),
        ({"rows": 3, "lag": 0.5}, TypeError),
        ({"range": 3, "slide": 0}, ValueError),
        ({"range": 3, "lag": -1}, ValueError),
    ],
)
def test_query_bad_arguments(kwargs, error):
    with pytest.raises(error):
        Query("q", SUM, **kwargs)


def test_query_bad_name_and_aggregator():
    with pytest.raises(TypeError):
        Query("", SUM, range=3)
    with pytest.raises(TypeError):
        Query(3, SUM, range=3)
    with pytest.raises(TypeError, match="mta.Aggregator"):
        Query("q", SUM.monoid, range=3)


def test_query_accepts_real_numbers():
    q = Query("q", SUM, range=2.5, slide=0.5, lag=1)
    assert q.periodic and q.width == 2.5
    assert "range=2.5" in repr(q) and "lag=1" in repr(q)


# ---------------------------------------------------------------------------
# SharedWindows arguments


def test_shared_windows_bad_arguments():
    q = Query("a", VALUE, range=3)
    r = Query("b", VALUE, rows=3)
    with pytest.raises(ValueError):
        SharedWindows([])
    with pytest.raises(TypeError):
        SharedWindows(q, time=TIME)
    with pytest.raises(TypeError):
        SharedWindows([q, "x"], time=TIME)
    with pytest.raises(ValueError, match="named 'a'"):
        SharedWindows([q, Query("a", VALUE, rows=2)], time=TIME)
    with pytest.raises(TypeError, match="time="):
        SharedWindows([q])
    SharedWindows([r])  # rows only: no time needed
    with pytest.raises(TypeError):
        SharedWindows([q], time=3)
    with pytest.raises(ValueError, match="unknown plan"):
        SharedWindows([q], time=TIME, plan="bogus")
    with pytest.raises(ValueError, match="unknown final"):
        SharedWindows([q], time=TIME, plan="pairs+bogus")
    with pytest.raises(ValueError):
        SharedWindows([q], time=TIME, plan="auto+bint")
    with pytest.raises(ValueError):
        SharedWindows([q], time=TIME, plan="separate+bint")
    with pytest.raises(ValueError):
        SharedWindows([q], time=TIME, plan="pairs+bint+naive")
    with pytest.raises(TypeError):
        SharedWindows([q], time=TIME, plan=3)
    with pytest.raises(ValueError, match="invertible"):
        SharedWindows([Query("c", CONCAT_AGG, range=3)], time=TIME, plan="pairs+rint")
    with pytest.raises(ValueError, match="selective"):
        SharedWindows([Query("m", MAX, range=3, lag=1)], time=TIME, plan="pairs+slickdeque-noninv")
    with pytest.raises(ValueError, match="no lag"):
        SharedWindows([Query("c", CONCAT_AGG, range=3, lag=1)], time=TIME, plan="cutty+flatfit")
    with pytest.raises(TypeError, match="store="):
        SharedWindows([q], time=TIME, window_id="w")
    with pytest.raises(TypeError, match="unknown options"):
        SharedWindows([q], time=TIME, bogus=1)


def _feed(shared, oracle, raws):
    for raw in raws:
        assert shared.push(raw) == oracle.push(raw)


def _queries():
    return [Query("a", VALUE, range=4), Query("b", VALUE, range=6, slide=2), Query("c", VALUE, rows=3, slide=2),
            Query("d", VALUE, range=5, slide=3, lag=2)]


@pytest.mark.parametrize("plan", ["separate", "auto", "pairs+bint", "cutty+naive"])
def test_refused_arguments_change_nothing(plan):
    queries = _queries()
    shared = SharedWindows(queries, time=TIME, plan=plan)
    oracle = MultiOracle(queries, time=TIME)
    _feed(shared, oracle, [(0, 1), (2, 2), (5, 3)])
    with pytest.raises(OutOfOrderError, match="older") as info:
        shared.push((4, 9))
    assert isinstance(info.value, OperationRefused) and isinstance(info.value, ValueError)
    assert "4" in str(info.value)
    with pytest.raises(ArgumentRefused):
        shared.push(("late", 9))
    with pytest.raises(ArgumentRefused):
        shared.push((float("nan"), 9))
    with pytest.raises(ArgumentRefused):
        shared.flush("soon")
    for infinite in (float("inf"), -float("inf")):  # no multiple of a slide to end a window at
        with pytest.raises(ArgumentRefused, match="finite"):
            shared.push((infinite, 9))
        with pytest.raises(ArgumentRefused, match="finite"):
            shared.flush(infinite)
    with pytest.raises(UnknownQuery):
        shared.query("zzz")
    with pytest.raises(KeyError):
        shared.query("zzz")
    assert len(shared) == 3
    _feed(shared, oracle, [(5, 4), (9, 5), (30, 6)])  # equal time allowed
    assert shared.flush() == oracle.flush()


# ---------------------------------------------------------------------------
# user code that raises


class Boom(Exception):
    pass


def _exploding(when):
    state = {"armed": False}

    def combine(a, b):
        if state["armed"] and when == "combine":
            raise Boom("combine")
        return a + b

    def lift(raw):
        if state["armed"] and when == "lift":
            raise Boom("lift")
        return raw[1]

    return Aggregator(Monoid(combine, 0, name="sum"), lift), state


@pytest.mark.parametrize("plan", ["separate", "auto", "pairs+bint", "panes+naive", "cutty+flatfat"])
def test_combine_raising_fails_the_object(plan):
    agg, state = _exploding("combine")
    shared = SharedWindows([Query("a", agg, range=4), Query("b", agg, range=4, slide=2)], time=TIME, plan=plan)
    for t in range(6):
        shared.push((t, t))
    state["armed"] = True
    with pytest.raises(Boom):
        for t in range(6, 12):
            shared.push((t, t))
    state["armed"] = False
    for call in (lambda: shared.push((20, 1)), lambda: shared.flush(), lambda: shared.query("a")):
        with pytest.raises(EngineFailedError, match="Boom"):
            call()


@pytest.mark.parametrize("when", ["lift", "time"])
def test_lift_or_time_raising_changes_nothing(when):
    agg, state = _exploding(when)
    armed = {"on": False}

    def time(raw):
        if armed["on"]:
            raise Boom("time")
        return raw[0]

    queries = [Query("a", agg, range=4), Query("b", agg, range=4, slide=2)]
    plain = [Query("a", VALUE, range=4), Query("b", VALUE, range=4, slide=2)]
    shared = SharedWindows(queries, time=time)
    oracle = MultiOracle(plain, time=TIME)
    _feed(shared, oracle, [(0, 1), (1, 2), (3, 3)])
    state["armed"] = armed["on"] = True
    with pytest.raises(Boom):
        shared.push((4, 4))
    state["armed"] = armed["on"] = False
    _feed(shared, oracle, [(4, 4), (7, 5)])
    assert shared.flush() == oracle.flush()


# ---------------------------------------------------------------------------
# flush and query(name)


@pytest.mark.parametrize("plan", ["separate", "auto", "pairs+naive"])
def test_flush_semantics(plan):
    q = Query("tumble", VALUE, range=10, slide=10)
    shared = SharedWindows([q], time=TIME, plan=plan)
    assert shared.flush() == []  # nothing pushed
    assert shared.push((1, 1)) == []
    assert shared.push((9, 2)) == []
    assert shared.push((10, 4)) == [Result("tumble", 10, 3)]  # reported before 10 is added
    assert shared.flush(until=19) == []  # [10, 20) ends after 19
    assert shared.flush(until=20) == [Result("tumble", 20, 4)]
    assert shared.flush(until=20) == []  # not twice
    assert shared.push((25, 8)) == []
    assert shared.push((47, 16)) == [Result("tumble", 30, 8)]  # the empty window [30, 40) is not reported
    assert shared.flush() == [Result("tumble", 50, 16)]
    assert shared.flush() == []
    assert shared.late == 0
    assert shared.push((48, 32)) == []  # [40, 50) was final at the flush
    assert shared.late == 1  # counted, not silently lost
    assert shared.flush() == []
    assert shared.flush(until=70) == []
    assert shared.push((65, 64)) == []  # [60, 70) was final: the flush's bound passed it
    assert shared.push((70, 128)) == []  # [70, 80) was not
    assert shared.late == 2
    assert shared.flush() == [Result("tumble", 80, 128)]


@pytest.mark.parametrize("plan", ["panes+naive", "cutty+rint", "separate"])
def test_rows_flush_then_more_pushes_are_counted_late(plan):
    """flush() reports the rows window still filling; the elements that
    would have completed it are counted in late, and the windows after it
    hold them as usual."""
    shared = SharedWindows([Query("sum3", VALUE, rows=3, slide=3)], plan=plan)
    for v in (1, 2, 4, 8):
        shared.push((None, v))
    assert shared.flush() == [Result("sum3", 5, 8)]  # [3, 6) with element 3 alone
    got = [shared.push((None, v)) for v in (16, 32, 64, 128, 256)]
    assert got == [[], [], [], [], [Result("sum3", 8, 448)]]
    assert shared.late == 2  # elements 4 and 5 fell in [3, 6)


def test_rows_windows_and_ends():
    qs = [Query("each", VALUE, rows=2), Query("every3", VALUE, rows=3, slide=3),
          Query("hist", VALUE, rows=2, slide=2, lag=1)]
    shared = SharedWindows(qs)
    got = []
    for i in range(7):
        got.append(shared.push((None, 10 ** i)))
    assert got[0] == [Result("each", 0, 1)]
    # after element 1 (2 elements): hist's window is [0, 1) (lag 1)
    assert got[1] == [Result("each", 1, 11), Result("hist", 1, 1)]
    assert got[2] == [Result("each", 2, 110), Result("every3", 2, 111)]
    assert got[3] == [Result("each", 3, 1100), Result("hist", 3, 110)]
    assert got[5] == [Result("each", 5, 110000), Result("every3", 5, 111000), Result("hist", 5, 11000)]
    assert shared.query("every3") == 1000000  # the window [6, 9) in progress
    assert shared.query("each") == 1100000
    assert shared.query("hist") == 1100000  # the window in progress, e = 8: [5, 7)
    assert shared.flush() == [Result("hist", 7, 1100000), Result("every3", 8, 1000000)]


def test_query_lookup_model():
    qs = [Query("per", VALUE, range=3), Query("per_lag", VALUE, range=3, lag=2),
          Query("tumble", VALUE, range=5, slide=5), Query("hop", VALUE, range=10, slide=5, lag=5)]
    for plan in ("separate", "auto", "pairs+bint", "cutty+naive"):
        shared = SharedWindows(qs, time=TIME, plan=plan)
        assert [shared.query(q.name) for q in qs] == [0, 0, 0, 0]
        for t, v in [(0, 1), (2, 2), (4, 4), (6, 8), (7, 16)]:
            shared.push((t, v))
        assert shared.query("per") == 8 + 16  # (4, 7]
        assert shared.query("per_lag") == 4  # times in (7-2-3, 7-2] = (2, 5]
        assert shared.query("tumble") == 8 + 16  # [5, 10)
        assert shared.query("hop") == 1 + 2 + 4  # [10-5-10, 10-5) = [-5, 5)


def test_results_ordered_by_end_then_query_order():
    qs = [Query("z", VALUE, range=4, slide=2), Query("y", VALUE, range=2, slide=1), Query("x", VALUE, range=3)]
    shared = SharedWindows(qs, time=TIME)
    shared.push((0, 1))
    out = shared.push((4, 2))
    assert [(r.end, r.query) for r in out] == [(1, "y"), (2, "z"), (2, "y"), (4, "z"), (4, "x")]


def test_float_times_and_ranges():
    qs = [Query("a", VALUE, range=1.5, slide=0.5), Query("b", VALUE, range=0.75)]
    shared = SharedWindows(qs, time=TIME)
    oracle = MultiOracle(qs, time=TIME)
    for i in range(40):
        raw = (i * 0.3, i)
        assert shared.push(raw) == oracle.push(raw)
    assert shared.flush() == oracle.flush()
    ends = [r.end for r in SharedWindows(qs, time=TIME).push((0.1, 1)) + []]
    assert ends == [0.1]


def test_count_and_max_aggregators_share_nothing_but_run():
    qs = [Query("n", COUNT, range=3, slide=1), Query("m", MAX.on(lambda r: r[1]), range=3, slide=1)]
    shared = SharedWindows(qs, time=TIME)
    assert len(shared.plan.groups) == 2
    shared.push((0, 5))
    assert shared.push((1, 2)) == [Result("n", 1, 1), Result("m", 1, 5)]


# ---------------------------------------------------------------------------
# slicing: Table 1 and formula F1


@sane_settings(200)
@given(r=st.integers(1, 60), s=st.integers(1, 30), lag=st.integers(0, 5), start=st.integers(0, 40))
def test_partials_per_window_table1(r, s, lag, start):
    """Counting the edges inside one window gives Table 1's partials."""
    q = Query("q", SUM, range=r, slide=s, lag=lag)
    e = start * s
    a, b = e - lag - r, e - lag
    for module, expected in [(panes, r // math.gcd(r, s)), (pairs, pairs.partials_per_window(r, s)),
                             (cutty, math.ceil(r / s))]:
        es = module.edges([q])
        inside, x = 1, a  # a is an edge: the first partial starts there
        while True:
            x = es.next_after(x)
            if x >= b:
                break
            inside += 1
        if module is cutty and lag:
            expected = pairs.partials_per_window(r, s)  # a lagged window's end is cut too
        assert inside == expected, module.NAME
    assert pairs.partials_per_window(r, s) == (r // s if r % s == 0 else 2 * (r // s) + 1)


@sane_settings(200)
@given(slides=st.lists(st.integers(1, 12), min_size=1, max_size=5))
def test_f1_counts_the_unique_edges(slides):
    length = lcm(slides)
    brute = {k for s in slides for k in range(s, length + 1, s)}
    assert f1_edges(slides) == len(brute)
    es = EdgeSet((0, s) for s in slides)
    assert es.composite_slide() == length
    assert len(es.edges_in_composite()) == len(brute)


def test_f1_example_and_edges_helper():
    # Example 2 of the MQO paper: slides 2 and 4 -> edges at 2 and 4 of the composite slide 4
    assert f1_edges([2, 4]) == 2
    assert edges([(6, 2), (8, 4)], 4) == [0, 2]
    assert edges([(14, 8)], 16) == [0, 2, 8, 10]  # Pairs: f1 = 6, f2 = 2
    assert f1_edges([3, 4, 6]) == len({3, 6, 9, 12, 4, 8})
    with pytest.raises(ValueError):
        f1_edges([0, 2])

"""A batch window with a store starts in process memory and moves into the
store only when a push would take it past ``spill_at`` rows
(spark_ops.sorted_window.SortedWindow): against brute force over each
window and against the same window without a store, on every store, with
the metadata record checked (no record while in memory, one after the
move, none after close)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

import stores
from spark_ops.sorted_window import SortedWindow
from spark_ops.spec import WindowSpec
from tests.store_fixtures import fresh_window, store_url  # noqa: F401  (fixture)
from tests.strategies import sane_settings

steps = st.sampled_from([0.0, 0.5, 1.0, 2.0, 9.0])


@sane_settings(40)
@given(deltas=st.lists(steps, min_size=1, max_size=90), cuts=st.lists(st.floats(0, 1), max_size=3),
       span=st.sampled_from([2.0, 6.0, 40.0]), engine=st.sampled_from(["amta", "lmta"]),
       kind=st.sampled_from(["range", "rows"]), sizes=st.sampled_from([1, 2, 3]))
def test_window_moves_into_the_store_only_past_spill_at(store_url, deltas, cuts, span, engine, kind,  # noqa: F811
                                                        sizes):
    times = [sum(deltas[: i + 1]) for i in range(len(deltas))]
    values = [float((i * 7) % 11 - 5) for i in range(len(times))]
    slide = {"range": span} if kind == "range" else {"rows": int(span)}
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max", "count"], engine=engine, store=store_url,
                            buffer_size=sizes, cache_size=sizes, **slide)
    run = fresh_window("spill")
    window = SortedWindow(spec, "k", run)
    plain = SortedWindow(WindowSpec.build(key="k", time="t", value="v", aggs=["max", "count"], engine=engine,
                                          **slide), "k", "memory")
    store = stores.pooled_store(store_url)
    record = spec.window_id("k", run)
    spill_at = window.spill_at
    assert spill_at == 2 * (sizes + sizes)
    bounds = sorted({0, len(times), *(int(c * len(times)) for c in cuts)})
    largest = 0
    for lo, hi in zip(bounds, bounds[1:]):
        t, v = pa.array(times[lo:hi], pa.float64()), pa.array(values[lo:hi], pa.float64())
        got, want = window.push(t, v, None), plain.push(t, v, None)
        assert [c.to_pylist() for c in got] == [c.to_pylist() for c in want]
        for i in range(lo, hi):  # brute force
            inside = ([x for s, x in zip(times[: i + 1], values[: i + 1]) if s > times[i] - span] if kind == "range"
                      else values[max(0, i + 1 - int(span)): i + 1])
            largest = max(largest, len(inside))
            assert (got[0][i - lo].as_py(), got[1][i - lo].as_py()) == (max(inside), len(inside))
        in_store = store.read_meta(record)[0] is not None
        assert in_store == (largest > spill_at), (largest, spill_at)
        assert (window.spill_at is None) == in_store
    window.close()
    assert store.read_meta(record)[0] is None
    assert store.read_meta(record + "~times")[0] is None

"""spark_ops.sorted_window.SortedWindow (the batch path's per-key window) against brute force.

No Spark: the window is driven directly with sorted times, as a batch task
drives it, on the memory, file and Redis stores with buffers and caches of
one or two pairs, so the times FIFO and the engine's levels go through the
store.  Time windows and count windows, both MTA engines, one aggregation
and several (a product), and times with bursts, gaps longer than the window
and fractional steps.
"""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_ops.sorted_window import SizesSortedWindow, SortedWindow, leading_at_most
from spark_ops.spec import WindowSpec
from mta import MemoryLevelQueue
from tests.store_fixtures import fresh_window, store_url  # noqa: F401  (fixture)
from tests.strategies import sane_settings

steps = st.one_of(st.just(0.0), st.sampled_from([0.25, 0.5, 1.0, 3.0]), st.floats(0.0, 40.0, allow_nan=False))


@st.composite
def sorted_rows(draw):
    deltas = draw(st.lists(steps, max_size=120))
    times, t = [], draw(st.floats(-1e6, 1e6, allow_nan=False))
    for d in deltas:
        t += d
        times.append(t)
    values = draw(st.lists(st.integers(-5, 5).map(float), min_size=len(times), max_size=len(times)))
    return times, values


def brute(times, values, *, range=None, rows=None):
    out = []
    for i, t in enumerate(times):
        if range is not None:
            window = [v for s, v in zip(times[: i + 1], values[: i + 1]) if s > t - range]
        else:
            window = values[max(0, i + 1 - rows) : i + 1]
        out.append(window)
    return out


def check(spec, times, values, windows, split):
    w = SortedWindow(spec, "k", fresh_window("sorted"))
    got = [[] for _ in spec.aggs]
    for lo, hi in ((0, split), (split, len(times))):  # two Arrow batches of one key
        lifted, problems = w.lift(values[lo:hi])
        assert problems is None
        for column, results in zip(got, w.slide(times[lo:hi], lifted)):
            column.extend(results)
    w.close()
    for name, column in zip([n for n, _, _ in spec.aggs], got):
        for i, (window, result) in enumerate(zip(windows, column)):
            if name == "max":
                assert result == max(window), (i, window, result)
            elif name == "count":
                assert result == len(window), (i, window, result)
            elif name == "first":
                assert result == window[0], (i, window, result)
            elif name == "stddev":
                want = statistics.stdev(window) if len(window) > 1 else None
                assert (result is None and want is None) or math.isclose(result, want, abs_tol=1e-9), (i, window)


@sane_settings(60)
@given(data=sorted_rows(), span=st.sampled_from([0.5, 1.0, 7.0, 30.0]), engine=st.sampled_from(["amta", "lmta"]),
       aggs=st.sampled_from([["max"], ["count", "first", "max", "stddev"]]), sizes=st.sampled_from([1, 2, 512]),
       cut=st.floats(0, 1))
def test_time_windows(store_url, data, span, engine, aggs, sizes, cut):  # noqa: F811
    times, values = data
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, range=span, engine=engine, store=store_url,
                            buffer_size=sizes, cache_size=sizes)
    check(spec, times, values, brute(times, values, range=span), int(cut * len(times)))


@sane_settings(30)
@given(data=sorted_rows(), n=st.sampled_from([1, 2, 5, 33]), engine=st.sampled_from(["amta", "lmta"]),
       cut=st.floats(0, 1))
def test_count_windows(store_url, data, n, engine, cut):  # noqa: F811
    times, values = data
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count", "first", "max"], rows=n, engine=engine,
                            store=store_url, buffer_size=1, cache_size=1)
    check(spec, times, values, brute(times, values, rows=n), int(cut * len(times)))


def check_sizes(spec, times, values, split):
    """Every size's columns against brute force at that size, the rows in
    two batches."""
    w = SizesSortedWindow(spec, "k", fresh_window("sizes"))
    got = [[] for _ in spec.columns]
    for lo, hi in ((0, split), (split, len(times))):
        lifted, problems = w.lift(values[lo:hi])
        assert problems is None
        for column, results in zip(got, w.slide(times[lo:hi], lifted)):
            column.extend(results)
    w.close()
    by_name = dict(zip([name for name, _, _ in spec.columns], got))
    for label, size in spec.sizes:
        kind = {"range": size} if spec.range is not None else {"rows": size}
        windows = brute(times, values, **kind)
        for name, _, _ in spec.aggs:
            column = by_name[f"{name}_{label}"]
            for i, (window, result) in enumerate(zip(windows, column)):
                if name == "max":
                    assert result == max(window), (label, i, window, result)
                elif name == "count":
                    assert result == len(window), (label, i, window, result)
                elif name == "first":
                    assert result == window[0], (label, i, window, result)


@sane_settings(40)
@given(data=sorted_rows(), spans=st.lists(st.sampled_from([0.5, 1.0, 7.0, 30.0, 100.0]), min_size=2, max_size=4,
                                          unique=True),
       aggs=st.sampled_from([["max"], ["count", "first", "max"]]), sizes=st.sampled_from([1, 2, 512]),
       cut=st.floats(0, 1))
def test_several_time_windows(store_url, data, spans, aggs, sizes, cut):  # noqa: F811
    times, values = data
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, range=spans, engine="amta", store=store_url,
                            buffer_size=sizes, cache_size=sizes)
    check_sizes(spec, times, values, int(cut * len(times)))


@sane_settings(25)
@given(data=sorted_rows(), ns=st.lists(st.sampled_from([1, 2, 5, 33]), min_size=2, max_size=3, unique=True),
       cut=st.floats(0, 1))
def test_several_count_windows(store_url, data, ns, cut):  # noqa: F811
    times, values = data
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count", "first", "max"], rows=ns, engine="amta",
                            store=store_url, buffer_size=1, cache_size=1)
    check_sizes(spec, times, values, int(cut * len(times)))


@given(st.lists(st.integers(0, 30), max_size=200).map(sorted), st.integers(-1, 31), st.integers(0, 20))
def test_leading_at_most(values, cutoff, dropped):
    q = MemoryLevelQueue(0, 7)
    for v in values:
        q.append(v)
    q.lo += min(dropped, len(values))
    live = values[min(dropped, len(values)):]
    assert leading_at_most(q, cutoff) == sum(v <= cutoff for v in live)


def test_store_backed_memory_does_not_grow_with_the_window(tmp_path):
    """A time window of 20,000 rows in the file store, buffer and cache of 8
    pairs: the engine's and the times FIFO's elements in process memory stay
    within levels x (buffer + cache), a few hundred, while the same window in
    memory holds every row."""
    from tests.test_store_engines import _local_bound

    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max", "mean"], range=20_000,
                            store=f"file://{tmp_path}", buffer_size=8, cache_size=8)
    in_store = SortedWindow(spec, "k", fresh_window("bounded"))
    in_memory = SortedWindow(WindowSpec.build(key="k", time="t", value="v", aggs=["max", "mean"], range=20_000),
                             "k", "memory")
    peak = 0
    for start in range(0, 60_000, 1_000):
        times = [float(t) for t in range(start, start + 1_000)]
        values = [float(t % 97) for t in times]
        assert in_store.slide(times, in_store.lift(values)[0]) == in_memory.slide(times, in_memory.lift(values)[0])
        held = in_store.engine.local_size() + in_store.times.local_size()
        peak = max(peak, held)
    assert len(in_store.engine) == 20_000
    assert peak <= _local_bound(in_store.engine.height(), 8, 8) + _local_bound(1, 8, 8), peak
    assert peak < 1_000
    assert in_memory.engine.local_size() + in_memory.times.local_size() >= 2 * 20_000
    in_store.close()


def test_several_sizes_in_a_store_hold_little_memory(tmp_path):
    """Four time windows of up to 20,000 rows in the file store, buffer and
    cache of 8 pairs: the shared rows, times and each size's front keep a few
    hundred elements in process memory."""
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max", "mean"], range=[20_000, 10_000, 5_000, 2_500],
                            store=f"file://{tmp_path}", buffer_size=8, cache_size=8)
    in_store = SizesSortedWindow(spec, "k", fresh_window("bounded"))
    peak = 0
    for start in range(0, 60_000, 1_000):
        times = [float(t) for t in range(start, start + 1_000)]
        values = [float(t % 97) for t in times]
        got = in_store.slide(times, in_store.lift(values)[0])
        assert got[0][-1] == max(float(t % 97) for t in range(max(0, start + 1_000 - 20_000), start + 1_000))
        peak = max(peak, in_store.stacks.local_size())
    assert in_store.stacks.hi - in_store.stacks.lo(0) == 20_000
    assert peak < 1_000, peak
    in_store.close()


def test_window_ids_are_valid_and_distinct():
    """Keys become store window names: readable when they can be, else a
    readable prefix and a digest of the whole key; never two keys one name,
    never a name a store refuses."""
    from stores.checks import check_window

    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], rows=3)
    keys = ["a", "{a}", "(a)", "a}", "主机" * 40, "x" * 500, "tab\there", 5, 5.0, "5", None, ("a", 1), "é" * 70]
    ids = [spec.window_id(k, "run-1/17") for k in keys]
    assert len(set(ids)) == len(keys), ids
    for key, wid in zip(keys, ids):
        assert check_window(wid) == wid
        assert wid.startswith("mta/run-1/17/")
        assert spec.window_id(key, "run-1/17") == wid  # the same in every process
    assert ids[0] == "mta/run-1/17/'a'" and ids[7] == "mta/run-1/17/5"


@pytest.mark.parametrize("engine", ["columnar", "amta", "policy"])
def test_key_windows_settle_rejected_rows_alike(engine):
    """Every batch key window (spark_ops.windows.open_key_window) gives the
    same output columns for a run with rejected rows: null aggregations and
    the reason when flagged, an error naming the first one otherwise; a
    null key's rows are all rejected."""
    import pyarrow as pa

    from mta import policies
    from spark_ops import SlidingWindowError, rows
    from spark_ops.windows import open_key_window

    size = dict(policy=policies.Count(3)) if engine == "policy" else dict(rows=3)
    common = dict(key="k", time="t", value="v", aggs=["max", "count"], engine="amta" if engine == "policy" else engine,
                  **size)
    times, values = pa.array([1.0, 2.0, None, 4.0, 5.0]), pa.array([5.0, None, 1.0, 7.0, 2.0])
    problems = rows.check_columns(pa.array(["k"] * 5), times, values)
    window = open_key_window(WindowSpec.build(on_bad_row="flag", **common), "k", "run")
    maxes, counts, rejected = window.push(times, values, problems)
    window.close()
    assert maxes.to_pylist() == [5.0, None, None, 7.0, 7.0]
    assert counts.to_pylist() == [1, None, None, 2, 3]
    assert rejected.to_pylist() == [None, "null or NaN value", "null or NaN time", None, None]
    window = open_key_window(WindowSpec.build(**common), "k", "run")
    with pytest.raises(SlidingWindowError, match=r"row rejected \(null or NaN value\): k='k', t=2.0, v=None"):
        window.push(times, values, problems)
    window.close()
    nulls = open_key_window(WindowSpec.build(on_bad_row="flag", **common), None, "run")
    assert [c.to_pylist() for c in nulls.push(times, values, None)] == [[None] * 5, [None] * 5,
                                                                         [rows.NULL_KEY] * 5]


@sane_settings(40)
@given(data=sorted_rows(), span=st.sampled_from([1.0, 7.0, 30.0, 1e9]), engine=st.sampled_from(["amta", "lmta"]),
       spill=st.sampled_from([(1, 1), (2, 3), (4, 4), (16, 16)]), cuts=st.lists(st.floats(0, 1), max_size=4))
def test_a_window_moves_to_the_store_when_it_outgrows_memory(store_url, data, span, engine, spill, cuts):  # noqa: F811
    """With a store, a batch window starts in memory and moves to the store
    before the push that takes it past buffer_size + cache_size rows,
    wherever in the rows that falls (several pushes of one key): results
    as brute force, the store holding the window exactly when its largest
    size passed the spill size, and nothing left after close."""
    import stores

    times, values = data
    buffer_size, cache_size = spill
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count", "first", "max"], range=span, engine=engine,
                            store=store_url, buffer_size=buffer_size, cache_size=cache_size)
    assert spec.spill_rows == buffer_size + cache_size
    store = stores.pooled_store(store_url)
    run = fresh_window("spill")
    w = SortedWindow(spec, "k", run)
    bounds = sorted({0, len(times), *(int(c * len(times)) for c in cuts)})
    got = [[] for _ in spec.aggs]
    for lo, hi in zip(bounds, bounds[1:]):
        for column, results in zip(got, w.slide(times[lo:hi], w.lift(values[lo:hi])[0])):
            column.extend(results)
    windows = brute(times, values, range=span)
    assert got[0] == [len(x) for x in windows]
    assert got[1] == [x[0] for x in windows]
    assert got[2] == [max(x) for x in windows]
    ours = [name for name in store.window_names() if name.startswith(f"mta/{run}/")]
    assert bool(ours) == (max(map(len, windows), default=0) > spec.spill_rows), (ours, spec.spill_rows)
    w.close()
    assert not [name for name in store.window_names() if name.startswith(f"mta/{run}/")]


def test_a_small_window_never_opens_the_file_store(tmp_path):
    """A file store named for windows that stay under the spill size: the
    database is never created (no writes a batch window would not read)."""
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], rows=50, engine="amta",
                            store=f"file://{tmp_path}/never")
    w = SortedWindow(spec, "k", fresh_window("small"))
    times = [float(t) for t in range(5_000)]
    values = [float(t * 37 % 101) for t in range(5_000)]
    assert w.slide(times, values)[0] == [max(x) for x in brute(times, values, rows=50)]
    w.close()
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("engine", ["amta", "lmta"])
def test_one_aggregation_that_is_a_product_gives_one_column(engine):
    """A user's own product as the one aggregation: its results stay one
    column of tuples (several aggregations are lowered column by column,
    one aggregation never is)."""
    from mta import aggregators as A
    from mta.monoid import product

    spec = WindowSpec.build(key="k", time="t", value="v", aggs=[("both", product(A.MAX, A.MIN), "array<double>")],
                            range=3.0, engine=engine)
    times, values = [0.0, 1.0, 2.0, 3.0, 3.5, 9.0], [4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    w = SortedWindow(spec, "k", "run")
    lifted, problems = w.lift(values)
    (column,) = w.slide(times, lifted)
    w.close()
    assert problems is None and column == [(max(win), min(win)) for win in brute(times, values, range=3.0)]


def test_a_time_window_reads_each_leaving_time_once():
    """A time window spanning several batches, each row of a batch pushing
    one earlier row out: the rows leaving are read from the times FIFO
    together, each once, plus an O(log k) search per batch, not searched
    for row by row (three reads or more per row).  Results against brute
    force."""
    class Counted(MemoryLevelQueue):
        reads = 0

        def __getitem__(self, i):
            Counted.reads += 1
            return super().__getitem__(i)

        def span(self, a, b):
            Counted.reads += b - a
            return super().span(a, b)

    span, batch, n = 1_000, 250, 6_000
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=span)
    w = SortedWindow(spec, "k", "memory")
    w.times = Counted(0, 0)
    times = [float(t) for t in range(n)]
    values = [float((t * 7919) % 1009) for t in range(n)]
    got = []
    for lo in range(0, n, batch):
        got.extend(w.slide(times[lo:lo + batch], w.lift(values[lo:lo + batch])[0])[0])
    w.close()
    assert got == [max(window) for window in brute(times, values, range=span)]
    assert Counted.reads / (n - span) <= 1.25, Counted.reads

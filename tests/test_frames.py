"""``frame="sql"`` in the per-key window layer (spark_ops.frames, every key
window of spark_ops.windows) against a brute-force oracle.

No Spark: a key's sorted rows go through :func:`spark_ops.windows.open_key_window`
as the plans push them, cut into pushes where a time ends (the batch plan
holds a trailing run of equal times back until it is complete; a streaming
micro-batch ends one).  The times have many ties and steps of exactly the
range, so rows sit on the inclusive lower edge ``t - range``; some values
are null (rejected and flagged, so peers are settled over the accepted rows
only).  The oracle is written here from the definition, independent of
``mta``: the window of a row at time t is every accepted row with time in
``[t - range, t]`` in (time, arrival) order (so rows of equal time share one
window), or the newest N accepted rows at or before it for ``rows=N``.

The aggregations: a NON-commutative user monoid (affine maps composed in
order) whose lift sends the value 0 to the monoid's identity, next to
``first``, ``last``, ``count``, ``max`` and ``sum``; the columnar engine
(ready aggregations only) gets those, the MTAs (``amta``, ``lmta``, in
memory and in the memory, file and Redis stores, batch and streaming
windows) get all of them.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mta import Aggregator, Monoid, policies
from spark_ops import SlidingWindowError, frames, rows
from spark_ops.spec import WindowSpec
from spark_ops.windows import open_key_window
from tests.store_fixtures import fresh_window, store_url  # noqa: F401  (fixture)
from tests.strategies import sane_settings

P = (1 << 61) - 1


def _affine_then(f, g):
    return (f[0] * g[0] % P, (f[1] * g[0] + g[1]) % P)


def _lift(v):
    """0 is the identity; any other value a map ``x -> a x + b`` of its own."""
    v = int(v)
    return (1, 0) if v == 0 else (v + 5, (7 * v + 1) % P)


def _show(m):
    return f"{m[0]}x+{m[1]}"


def affine():
    return Aggregator(Monoid(_affine_then, (1, 0), name="affine"), lift=_lift, lower=_show, name="affine")


def affine_expected(values):
    acc = (1, 0)
    for v in values:
        acc = _affine_then(acc, _lift(v))
    return _show(acc)


READY = ["first", "last", "count", "max", "sum"]
ORACLE = {"first": lambda w: w[0], "last": lambda w: w[-1], "count": len, "max": max, "sum": math.fsum,
          "affine": affine_expected}
EMPTY = {"count": 0, "sum": 0.0, "affine": "1x+0"}


@st.composite
def key_rows(draw, span):
    """Sorted times with ties and steps of ``span`` and its halves; values
    -3..3 (0: the affine identity), some null."""
    steps = st.sampled_from([0.0, 0.0, 0.0, span, span, span / 2, 1.0, 3 * span])
    times, t = [], draw(st.sampled_from([0.0, -1e5, 1.7e9]))
    for d in draw(st.lists(steps, min_size=1, max_size=80)):
        t += d
        times.append(t)
    values = draw(st.lists(st.one_of(st.integers(-3, 3).map(float), st.just(None)),
                           min_size=len(times), max_size=len(times)))
    return times, values


def brute(times, values, *, span=None, n=None):
    """Per row, its window's values in the sql frame (``None`` for a rejected row)."""
    good = [(t, v) for t, v in zip(times, values) if v is not None]
    out = []
    for i, (t, v) in enumerate(zip(times, values)):
        if v is None:
            out.append(None)
        elif span is not None:
            out.append([w for s, w in good if t - span <= s <= t])
        else:
            before = [w for w in values[: i + 1] if w is not None]
            out.append(before[-n:])
    return out


def time_cuts(times, picks):
    """Push boundaries, each where a time ends."""
    ends = [i for i in range(1, len(times)) if times[i] != times[i - 1]]
    return sorted({ends[p % len(ends)] for p in picks}) if ends else []


def push_all(window, times, values, cuts):
    got = None
    for lo, hi in zip([0] + cuts, cuts + [len(times)]):
        t, v = pa.array(times[lo:hi], pa.float64()), pa.array(values[lo:hi], pa.float64())
        problems = [rows.NULL_VALUE if x is None else None for x in values[lo:hi]]
        columns = window.push(t, v, problems if any(problems) else None)
        piece = [c.to_pylist() for c in columns]
        got = piece if got is None else [a + b for a, b in zip(got, piece)]
    return got


def batch_pushed(spec, times, values, picks):
    """The output columns of a batch window of ``spec`` over one key's rows,
    pushed in the pieces ``picks`` cut (:func:`time_cuts`)."""
    window = open_key_window(spec, "k", fresh_window("frame"))
    try:
        return push_all(window, times, values, time_cuts(times, picks))
    finally:
        window.close()


def engine_aggs(engine):
    """``(aggs, names)``: the ready aggregations, and on the MTAs the
    non-commutative ``affine`` too."""
    aggs = READY if engine == "columnar" else READY + [("affine", affine(), "string")]
    return aggs, [a if isinstance(a, str) else a[0] for a in aggs]


def check(got, names, windows):
    for name, column in zip(names, got):
        for i, (w, g) in enumerate(zip(windows, column)):
            want = None if w is None else ORACLE[name](w) if w else EMPTY.get(name)
            if name == "sum" and want is not None:
                assert math.isclose(g, want, abs_tol=1e-9), (name, i, g, want, w)
            else:
                assert g == want, (name, i, g, want, w)
    rejected = got[len(names)]
    assert rejected == [rows.NULL_VALUE if w is None else None for w in windows]


SPANS = [1.0, 2.5, 10.0]


@sane_settings(80)
@given(span=st.sampled_from(SPANS), data=st.data(), picks=st.lists(st.integers(0, 1000), max_size=5),
       engine=st.sampled_from(["columnar", "amta", "lmta"]), in_store=st.booleans())
def test_batch_windows_sql_range_frame(store_url, span, data, picks, engine, in_store):  # noqa: F811
    times, values = data.draw(key_rows(span))
    aggs, names = engine_aggs(engine)
    store = dict(store=store_url, buffer_size=1, cache_size=2) if in_store and engine != "columnar" else {}
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, range=span, engine=engine, frame="sql",
                            on_bad_row="flag", **store)
    got = batch_pushed(spec, times, values, picks)
    check(got, names, brute(times, values, span=span))


@sane_settings(40)
@given(data=st.data(), picks=st.lists(st.integers(0, 1000), max_size=5), in_store=st.booleans(),
       by=st.sampled_from(["range", "rows"]))
def test_several_sizes_in_one_mta_window_sql_frame(store_url, data, picks, in_store, by):  # noqa: F811
    """Several sizes of one batch MTA window (the sizes share the rows): each
    size's columns equal that size's sql-frame oracle, peers and rejected
    rows included, with a non-commutative aggregation whose identity is a
    value too."""
    times, values = data.draw(key_rows(2.5))
    sizes = {"a": 1.0, "b": 2.5, "c": 10.0} if by == "range" else {"a": 1, "b": 2, "c": 5}
    aggs = ["first", "max", "count", ("affine", affine(), "string")]
    store = dict(store=store_url, buffer_size=1, cache_size=1) if in_store else {}
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, engine="amta", frame="sql",
                            on_bad_row="flag", **{by: sizes}, **store)
    got = batch_pushed(spec, times, values, picks)
    names = [a if isinstance(a, str) else a[0] for a in aggs]
    for label, size in sizes.items():
        picked = [got[[f"{a}_{lab}" for a in names for lab in sizes].index(f"{a}_{label}")] for a in names]
        windows = brute(times, values, span=size) if by == "range" else brute(times, values, n=size)
        check(picked + [got[-1]], names, windows)


@sane_settings(40)
@given(n=st.sampled_from([1, 2, 5]), data=st.data(), picks=st.lists(st.integers(0, 1000), max_size=5),
       engine=st.sampled_from(["columnar", "amta", "lmta"]))
def test_batch_windows_sql_rows_frame_is_the_newest_n_in_arrival_order(n, data, picks, engine):
    times, values = data.draw(key_rows(1.0))
    aggs, names = engine_aggs(engine)
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, rows=n, engine=engine, frame="sql",
                            on_bad_row="flag")
    got = batch_pushed(spec, times, values, picks)
    check(got, names, brute(times, values, n=n))


@sane_settings(40)
@given(span=st.sampled_from(SPANS), data=st.data(), picks=st.lists(st.integers(0, 1000), max_size=4),
       engine=st.sampled_from(["amta", "lmta"]))
def test_streaming_windows_sql_range_frame_across_micro_batches(store_url, span, data, picks, engine):  # noqa: F811
    """A streaming window (resumed from its checkpoint for every
    micro-batch, as the streaming plan does): the same outputs; a row at
    the newest time of an earlier micro-batch is a bad row with its
    reason, and the window is unchanged by it."""
    times, values = data.draw(key_rows(span))
    aggs = READY + [("affine", affine(), "string")]
    names = [a if isinstance(a, str) else a[0] for a in aggs]
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=aggs, range=span, engine=engine, frame="sql",
                            on_bad_row="flag", store=store_url, buffer_size=1, cache_size=1)
    run = fresh_window("stream")
    version, newest, got = False, None, None
    cuts = time_cuts(times, picks)
    for lo, hi in zip([0] + cuts, cuts + [len(times)]):
        window = open_key_window(spec, "k", run, streaming=True, resume=version, newest=newest)
        piece = push_all(window, times[lo:hi], values[lo:hi], [])
        version, newest = window.checkpoint(), window.newest
        window.close()
        got = piece if got is None else [a + b for a, b in zip(got, piece)]
    check(got, names, brute(times, values, span=span))
    if newest is not None:  # a late peer of the last time, then a row after it
        window = open_key_window(spec, "k", run, streaming=True, resume=version, newest=newest)
        late = push_all(window, [newest, newest + span], [1.0, 2.0], [])
        window.expire()
        assert late[len(names)] == [rows.peers_emitted(newest), None]
        assert late[0][0] is None
        good = [v for t, v in zip(times, values) if v is not None and newest <= t]
        assert late[names.index("count")][1] == len(good) + 1  # the late row never entered


def test_default_frame_keeps_ties_in_arrival_order():
    """The same rows in the default frame: ``(t - range, t]``, each row of
    a tie seeing those before it (the contrast the docs' table shows)."""
    times, values = [0.0, 1.0, 1.0, 2.0], [5.0, 1.0, 2.0, 3.0]
    got = {}
    for frame in ("default", "sql"):
        spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count", "sum"], range=1, frame=frame)
        window = open_key_window(spec, "k", "run")
        got[frame] = [c.to_pylist() for c in window.push(pa.array(times), pa.array(values), None)]
        window.close()
    assert got["default"] == [[1, 1, 2, 1], [5.0, 1.0, 3.0, 3.0]]
    assert got["sql"] == [[1, 3, 3, 3], [5.0, 8.0, 8.0, 6.0]]
    assert brute(times, values, span=1) == [[5.0], [5.0, 1.0, 2.0], [5.0, 1.0, 2.0], [1.0, 2.0, 3.0]]


@sane_settings(100)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([0.0, 1.0, 2.0, None])),
                max_size=30))
def test_trailing_peers(pairs):
    """Where the rows sharing the last row's key and time start (the rows
    the batch plan holds back): the brute-force scan from the end; string
    keys and struct keys alike."""
    keys, times = pa.array([k for k, _ in pairs], pa.string()), pa.array([t for _, t in pairs], pa.float64())
    n = len(pairs)
    want = n
    if n and pairs[-1][0] is not None and pairs[-1][1] is not None:
        want = n - 1
        while want and pairs[want - 1] == pairs[-1]:
            want -= 1
    assert frames.trailing_peers(keys, times) == want
    nested = pa.array([None if k is None else {"name": k} for k, _ in pairs],
                      pa.struct([("name", pa.string())]))  # a key type Arrow cannot compare
    assert frames.trailing_peers(nested, times) == want


@given(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]), max_size=40).map(sorted))
def test_last_peers(times):
    at = frames.last_peers(np.array(times))
    want = [max(j for j, s in enumerate(times) if s == t) for t in times]
    assert (list(range(len(times))) if at is None else at.tolist()) == want


def test_frame_sql_is_refused_with_a_policy_and_unknown_frames_are_named():
    with pytest.raises(SlidingWindowError, match=r"frame='sql' is for range= and rows=.*custom policy"):
        WindowSpec.build(key="k", time="t", value="v", aggs=["max"], policy=policies.Count(3), frame="sql")
    with pytest.raises(SlidingWindowError, match=r"frame must be one of \('default', 'sql'\), got 'SQL'"):
        WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=3, frame="SQL")
    for ties in ("Any", None, ["t"]):
        with pytest.raises(SlidingWindowError, match=r"ties must be one of \('input', 'any'\).*got " + re.escape(repr(ties))):
            WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=3, ties=ties)
    assert WindowSpec.build(key="k", time="t", value="v", aggs=["max"], rows=3, ties="any").ties == "any"


def test_a_changed_frame_is_another_job():
    """A streaming query restarted with the other frame must not resume the
    windows (the fingerprint differs); the default's fingerprint is as before."""
    common = dict(key="k", time="t", value="v", aggs=["max"], range=3)
    default = WindowSpec.build(**common).fingerprint()
    assert default == "max=max; range=3; auto; key=k, time=t, value=v"
    assert WindowSpec.build(frame="sql", **common).fingerprint() != default


@pytest.mark.parametrize("step", ["close", "expire"])
@pytest.mark.parametrize("close_fails_too", [False, True])
def test_a_size_that_fails_to_close_leaves_no_other_size_open(store_url, step, close_fails_too):  # noqa: F811
    """A window of several sizes whose size 0 raises on close or expire:
    every other size is still closed, and size 0's error reaches the
    caller, even when another size's close fails too.  A failed expire
    (size 0's delete, which is fenced as the key's) deletes no other size:
    they are closed and kept, for the attempt that claimed the key or the
    next expiry; a close closes them all."""
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=[1.0, 2.0, 4.0], store=store_url)
    run = fresh_window("sizes")
    window = open_key_window(spec, "k", run, streaming=True)
    push_all(window, [0.0, 1.0], [1.0, 2.0], [])
    window.checkpoint()
    done = []
    for i, size in enumerate(window.windows):
        for name in ("close", "expire"):
            real = getattr(size, name)

            def act(real=real, i=i, name=name):
                done.append((name, i))
                if i == 0 and name == step:
                    raise OSError("size 0 failed")
                real()
                if i == 1 and name == "close" and close_fails_too:
                    raise RuntimeError("size 1 failed to close")

            setattr(size, name, act)
    with pytest.raises(OSError, match="size 0 failed"):
        getattr(window, step)()
    assert done == [(step, 0), ("close", 1), ("close", 2)]

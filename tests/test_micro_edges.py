"""``range=`` edges over a time column that counts microseconds (a
timestamp, a date, a decimal of at most 6 places) against integer
arithmetic.

The oracle is written here from the definition in whole microseconds,
independent of the doubles the windows take: a row at ``s_us`` is in the
window of a row at ``t_us`` when ``t_us - R_us < s_us`` (``frame="default"``)
or ``t_us - R_us <= s_us`` (``frame="sql"``), as Spark SQL's ``rangeBetween``
decides over such a column.  The windows get the times as the plan gives
them, ``us / 10^6`` rounded once (:func:`spark_ops.plan.seconds`), and
ranges that are not binary fractions (0.1 s, 0.3 s, 0.7 s, a day and a
microsecond), with rows exactly ``R`` earlier and one microsecond either
side of that.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_ops import SlidingWindowError, frames
from spark_ops.plan import seconds
from spark_ops.spec import WindowSpec
from spark_ops.windows import PolicyWindow, open_key_window
from tests.store_fixtures import fresh_window
from tests.strategies import sane_settings

LIMIT_US = int(frames.MICRO_EXACT * 1_000_000) - 1  # the times the edges are exact for
SPANS_US = [1, 100_000, 300_000, 700_000, 1_000_000, 86_400_000_001]


def oracle_in(s_us: int, t_us: int, span_us: int, frame: str) -> bool:
    return t_us - span_us < s_us if frame == "default" else t_us - span_us <= s_us


@sane_settings(200)
@given(t_us=st.integers(-LIMIT_US, LIMIT_US), span_us=st.one_of(st.sampled_from(SPANS_US), st.integers(1, 10**13)),
       step=st.integers(-2, 2), frame=st.sampled_from(frames.FRAMES))
def test_edge_is_integer_microseconds(t_us, span_us, step, frame):
    """The claim the edge rests on: ``s > edge(t)`` exactly when ``s_us``
    is in the window, for ``s`` and ``t`` the doubles ``us / 10^6``, rows
    at the edge and a microsecond either side; scalar and array alike."""
    s_us = min(max(t_us - span_us + step, -LIMIT_US), LIMIT_US)
    edge = frames.range_edge(span_us / 1e6, frame, micros=True)
    s, t = s_us / 1e6, t_us / 1e6
    want = oracle_in(s_us, t_us, span_us, frame)
    assert (s > edge(t)) == want
    assert bool(s > edge(np.array([t]))[0]) == want


def test_edge_is_exact_across_the_whole_range_of_times():
    """Dense random check, times up to :data:`frames.MICRO_EXACT` seconds
    either side of 1970 (where ``round(t * 10^6)`` alone misses by one)."""
    rng = np.random.default_rng(11)
    for frame in frames.FRAMES:
        for span_us in SPANS_US:
            t_us = rng.integers(-LIMIT_US, LIMIT_US, 200_000)
            s_us = np.clip(t_us - span_us + rng.integers(-2, 3, t_us.size), -LIMIT_US, LIMIT_US)
            got = s_us / 1e6 > frames.range_edge(span_us / 1e6, frame, micros=True)(t_us / 1e6)
            want = s_us >= t_us - span_us + (frame == "default")
            assert np.array_equal(got, want), (frame, span_us)


def test_beyond_the_exact_range_the_edge_is_taken_in_doubles():
    """Past :data:`frames.MICRO_EXACT` seconds (the years before 1698 and
    after 2242) doubles no longer tell microseconds apart: the edge is the
    double one, as for a number of seconds (a row exactly the range back
    then stays out of the default frame), scalar and array alike."""
    times = [frames.MICRO_EXACT, 32503680020.0, 253402297215.0, -frames.MICRO_EXACT - 5.0, math.inf]
    for frame in frames.FRAMES:
        micro, double = frames.range_edge(10.0, frame, micros=True), frames.range_edge(10.0, frame)
        assert [micro(t) for t in times] == [double(t) for t in times]
        assert np.array_equal(micro(np.array(times)), double(np.array(times)))
    assert frames.range_edge(10.0, "default", micros=True)(32503680020.0) == 32503680010.0


def test_a_span_below_a_microsecond_is_refused_on_such_a_column():
    refused = "range on a timestamp, date or decimal time column must be at least one microsecond, got "
    with pytest.raises(SlidingWindowError, match="^" + refused + "4e-07$"):
        WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=4e-7, micros=True)
    with pytest.raises(SlidingWindowError, match="^" + refused + "1e-07$"):
        WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=[1, 1e-7], micros=True)
    assert WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=4e-7).range == 4e-7


@st.composite
def key_micros(draw):
    """One key's sorted times in microseconds: steps of the span, a
    microsecond either side of it, ties, and others; from a base anywhere
    in the exact range."""
    span_us = draw(st.sampled_from(SPANS_US[:4]))
    steps = st.sampled_from([0, span_us, span_us, span_us - 1, span_us + 1, span_us // 3, 1, 3 * span_us])
    base = draw(st.sampled_from([0, -86_400_000_000, 1_732_926_873_293_315, 4_294_967_296_000_001,
                                 LIMIT_US - 10**9, -LIMIT_US]))
    times, t = [], base
    for d in draw(st.lists(steps, min_size=1, max_size=60)):
        t += d
        times.append(t)
    return span_us, times


def brute(times_us, span_us, frame):
    """Per row, its window's count and sum of positions (values 1..n), from integer microseconds."""
    out = []
    for i, t in enumerate(times_us):
        if frame == "sql":  # rows of equal time are peers: all of them
            rows = [j for j, s in enumerate(times_us) if oracle_in(s, t, span_us, frame) and s <= t]
        else:
            rows = [j for j, s in enumerate(times_us[: i + 1]) if oracle_in(s, t, span_us, frame)]
        out.append((len(rows), float(sum(j + 1 for j in rows))))
    return out


def timestamps(times_us):
    """The windows' double seconds of timestamps, as the batch plan makes them."""
    return seconds(pa.array(times_us, pa.timestamp("us", tz="UTC")))


def window_outputs(window, times, values, cut, sizes=1):
    """Per size, the counts and sums of one key's rows pushed in two pieces, split where a time ends."""
    ends = [i for i in range(1, len(times)) if times[i] != times[i - 1]]
    cuts = [ends[cut % len(ends)]] if ends else []
    got = [[] for _ in range(sizes)]
    try:
        for lo, hi in zip([0] + cuts, cuts + [len(times)]):
            columns = window.push(times.slice(lo, hi - lo), values.slice(lo, hi - lo), None)
            for k in range(sizes):  # count then sum, each per size
                got[k] += list(zip(columns[k].to_pylist(), columns[sizes + k].to_pylist()))
    finally:
        window.close()
    return got


@sane_settings(60)
@given(case=key_micros(), frame=st.sampled_from(frames.FRAMES), cut=st.integers(0, 100),
       engine=st.sampled_from(["columnar", "amta", "lmta", "sizes", "policy"]))
def test_every_engine_decides_the_edge_in_microseconds(case, frame, cut, engine):
    """Each batch engine (columnar, the sorted MTA windows, several sizes
    in one window) and the slide policy of the streaming windows, over
    timestamps as the plan converts them."""
    span_us, times_us = case
    span = span_us / 1e6
    size = dict(range=[span, 2 * span]) if engine == "sizes" else dict(range=span)
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count", "sum"], frame=frame, micros=True,
                            engine="amta" if engine in ("sizes", "policy") else engine, **size)
    if engine == "columnar":
        spec.kernels = ("count", "sum")
    values = pa.array([float(j + 1) for j in range(len(times_us))])
    window = (PolicyWindow(spec, "k", fresh_window("micro")) if engine == "policy"
              else open_key_window(spec, "k", fresh_window("micro")))
    spans_us = [span_us, 2 * span_us] if engine == "sizes" else [span_us]
    got = window_outputs(window, timestamps(times_us), values, cut, len(spans_us))
    for size_us, by_size in zip(spans_us, got):
        assert by_size == [(c, pytest.approx(s)) for c, s in brute(times_us, size_us, frame)]


@pytest.mark.parametrize("frame", frames.FRAMES)
def test_regular_sampling_every_window_holds_the_same_rows(frame):
    """Rows every 100 ms, ``range=0.3``: after the first rows, every window
    holds 3 rows (default frame) or 4 (sql), none a row fewer or more."""
    us = 1_700_000_000_000_000 + np.arange(20_000, dtype=np.int64) * 100_000
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=0.3, frame=frame, micros=True,
                            engine="columnar")
    spec.kernels = ("count",)
    window = open_key_window(spec, "k", "r")
    (count,) = window.push(timestamps(us), pa.array(np.ones(len(us))), None)
    assert set(count.to_pylist()[10:]) == {3 if frame == "default" else 4}


def test_dates_count_days():
    """A date's double seconds are its days times 86400: a range of one day
    and one microsecond holds the day before in both frames, one day alone
    only in the sql frame."""
    days = pa.array([19000, 19001, 19002], pa.date32())
    for frame, span, want in (("default", 86400, [1, 1, 1]), ("sql", 86400, [1, 2, 2]),
                              ("default", 86400.000001, [1, 2, 2])):
        spec = WindowSpec.build(key="k", time="t", value="v", aggs=["count"], range=span, frame=frame,
                                micros=True, engine="amta")
        window = open_key_window(spec, "k", "d")
        (count,) = window.push(seconds(days), pa.array([1.0, 2.0, 3.0]), None)
        assert count.to_pylist() == want, (frame, span)
    assert math.isclose(seconds(days).to_pylist()[0], 19000 * 86400)

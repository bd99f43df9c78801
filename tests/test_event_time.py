"""spark_ops.event_time.split, the watermark rule, without Spark.

A key's rows arrive over micro-batches in any order; after each one the
watermark moves to the newest time seen minus the delay (never back).  The
rows released over all micro-batches must be exactly the rows that were not
late, in time order with ties in arrival order (earlier micro-batches
first, then the order within a micro-batch); a late row (time at or behind
the watermark when it arrives) leaves at once with its reason; a row with a
null time leaves with its own reason; nothing is lost or released twice.
The oracle replays the same rule row by row in plain Python.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_ops import event_time, rows
from spark_ops.plan import ARRIVAL, TIME, VALUE

batches = st.lists(st.lists(st.one_of(st.integers(0, 40).map(float), st.none()), max_size=8), min_size=1,
                   max_size=8)


def table(times, first_id):
    """Rows of times in seconds: the timestamp column ``ts`` (what the
    watermark is on) and the plan's double seconds beside it."""
    return pa.table({"id": pa.array(range(first_id, first_id + len(times)), pa.int64()),
                     ARRIVAL: pa.array(range(len(times)), pa.int64()),
                     "ts": pa.array([None if t is None else round(t * 1e6) for t in times], pa.timestamp("us", "UTC")),
                     TIME: pa.array(times, pa.float64()), VALUE: pa.array([1.0] * len(times))})


def split(new, waiting, watermark: float):
    """:func:`event_time.split` with the watermark in seconds."""
    return event_time.split(new, waiting, round(watermark * 1000), "ts")


@settings(max_examples=300, deadline=None)
@given(batches=batches, delay=st.sampled_from([0.0, 1.0, 5.0, 100.0]))
def test_released_rows_are_the_timely_rows_in_time_order(batches, delay):
    watermark, newest, waiting, next_id = 0.0, None, None, 0
    released, left, expect_late, expect_null, timely, at_mark = [], {}, set(), set(), [], {}
    for times in batches:
        new = table(times, next_id)
        for i, t in enumerate(times):  # the oracle: each row against the watermark it arrives under
            if t is None:
                expect_null.add(next_id + i)
            elif t <= watermark:
                expect_late.add(next_id + i)
                at_mark[next_id + i] = t == watermark
            else:
                timely.append((t, len(timely), next_id + i))
        leaving, problems, ready, waiting = split(new, waiting, watermark)
        assert leaving.num_rows == len(problems)
        left.update(zip(leaving.column("id").to_pylist(), problems))
        released += ready.column("id").to_pylist()
        assert all(t <= watermark for t in ready.column(TIME).to_pylist())
        assert all(t > watermark for t in waiting.column(TIME).to_pylist())
        seen = [t for t in times if t is not None]
        if seen:
            newest = max(seen) if newest is None else max(newest, max(seen))
        if newest is not None:
            watermark = max(watermark, newest - delay)
        next_id += len(times)
    # the rows still waiting would be released by a later watermark, in order
    leaving, problems, ready, rest = split(table([], next_id), waiting, 1e12)
    assert not leaving.num_rows and not rest.num_rows
    released += ready.column("id").to_pylist()
    assert released == [i for _, _, i in sorted(timely)]
    assert set(left) == expect_late | expect_null
    assert all(("is at the watermark" if at_mark[i] else "is behind the watermark") in left[i] for i in expect_late)
    assert all(left[i] == rows.NULL_TIME for i in expect_null)


@pytest.mark.parametrize("at_watermark", [False, True])
def test_a_time_before_1970_is_late_from_the_first_micro_batch_and_told_why(at_watermark):
    """Spark's watermark starts at the epoch and never goes back: a row
    before it is late even in a query's first micro-batch, where no row has
    entered a window yet, and the reason says so, not that later rows have."""
    for watermark in (0.0, 5.0):
        leaving, problems, ready, waiting = event_time.split(table([-3.0, 7.0], 0), None, round(watermark * 1000),
                                                             "ts", at_watermark=at_watermark)
        assert leaving.column("id").to_pylist() == [0] and waiting.column("id").to_pylist() == [1]
        (problem,) = problems
        assert problem.startswith("time 1969-12-31 23:59:57 UTC is behind the watermark 1970-01-01")
        assert ("Spark's watermarks start" in problem) == (watermark == 0.0)
        assert ("rows of later times may have entered" in problem) == (watermark > 0.0)


def test_waiting_rows_survive_their_state_form():
    _, _, ready, waiting = split(table([5.0, 3.0, 9.0], 0), None, 2.0)
    assert not ready.num_rows and waiting.column("id").to_pylist() == [1, 0, 2]
    _, _, ready, waiting = split(table([], 3), waiting, 4.0)  # no rows: the timeout's call
    assert ready.column("id").to_pylist() == [1]
    blob = event_time.pack_waiting(waiting)
    assert isinstance(blob, bytes) and event_time.pack_waiting(waiting.slice(0, 0)) is None
    assert event_time.unpack_waiting(blob).equals(waiting) and event_time.unpack_waiting(None) is None
    # the timeout calls the key once the watermark passes its oldest waiting row (5 s), not before
    assert event_time.timeout_ms(waiting, "ts") == 4999


@pytest.mark.parametrize("t, watermark", [(0.0005, 0.0), (1e-6, 0.0)])
def test_timeout_is_a_timestamp_spark_takes(t, watermark):
    _, _, _, waiting = split(table([t], 0), None, watermark)
    assert event_time.timeout_ms(waiting, "ts") >= 1


def test_times_are_exact_microseconds_beside_a_null_time():
    """In the year 9999 (double seconds there are 30 us apart), a row 1 us
    after the watermark waits, beside a row with a null time in the same
    micro-batch, which leaves with its own reason."""
    far_ms = 253_402_300_000_000  # 9999-12-31 23:06:40 UTC
    new = pa.table({"id": pa.array([0, 1], pa.int64()), ARRIVAL: pa.array([0, 1], pa.int64()),
                    "ts": pa.array([None, far_ms * 1000 + 1], pa.timestamp("us", "UTC")),
                    TIME: pa.array([None, far_ms / 1000], pa.float64()), VALUE: pa.array([1.0, 1.0])})
    leaving, problems, ready, waiting = event_time.split(new, None, far_ms, "ts")
    assert leaving.column("id").to_pylist() == [0] and problems == [rows.NULL_TIME]
    assert not ready.num_rows and waiting.column("id").to_pylist() == [1]
    assert event_time.timeout_ms(waiting, "ts") == far_ms


@pytest.mark.parametrize("peers", [False, True])
def test_peers_of_one_double_leave_together(peers):
    """Two rows 1 us apart in the year 9000, whose double seconds are
    equal, the watermark exactly at the first: with peers (frame="sql",
    rows of one time sharing an output) both wait for the second, else the
    first leaves alone."""
    at_us = 221_845_392_000_000_000  # 9000-01-01 00:00:00 UTC
    new = pa.table({"id": pa.array([0, 1], pa.int64()), ARRIVAL: pa.array([0, 1], pa.int64()),
                    "ts": pa.array([at_us, at_us + 1], pa.timestamp("us", "UTC")),
                    TIME: pa.array([at_us / 1e6, (at_us + 1) / 1e6], pa.float64()), VALUE: pa.array([1.0, 2.0])})
    assert new.column(TIME)[0].as_py() == new.column(TIME)[1].as_py()
    _, _, ready, waiting = event_time.split(new, None, 0, "ts", peers=peers)  # both wait
    _, _, ready, waiting = event_time.split(new.slice(0, 0), waiting, at_us // 1000, "ts", peers=peers)
    assert ready.column("id").to_pylist() == ([] if peers else [0])
    assert waiting.column("id").to_pylist() == ([0, 1] if peers else [1])


def test_a_row_at_the_first_watermark_is_told_it_is_at_it_where_spark_starts():
    """A row at 1970-01-01 00:00:00 in the first micro-batch is late (at the
    watermark, which starts there): the reason says it is at the watermark,
    not behind it, and that no longer delay helps."""
    leaving, problems, _, _ = event_time.split(table([0.0, 7.0], 0), None, 0, "ts")
    assert leaving.column("id").to_pylist() == [0]
    assert problems[0].startswith("time 1970-01-01 00:00:00 UTC is at the watermark 1970-01-01 00:00:00 UTC, where "
                                  "Spark's watermarks start")

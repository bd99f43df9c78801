"""Event time in streaming: a watermarked input's rows wait for the watermark.

The rows of every key arrive out of order within the watermark delay, cut
into many micro-batches (one file each, ``maxFilesPerTrigger=1``); the
sink must equal the brute-force oracle over the same rows in time order
(ties in arrival order), which is also what the batch job gives.  Late rows
(behind the watermark when they arrive) are flagged with the reason and
counted, or fail the query naming the row; they never enter a window.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import uuid

import pytest

import json
import sys

from spark_ops import SlidingWindowError, sliding_window
from tests.spark_fixtures import (FailFirstAttempt, assert_outputs, expected, key_times, read_sink,
                                  run_available_now, ship_by_value, trace)

ship_by_value(sys.modules[__name__])

#: Times are seconds after BASE; the windows and the delay in seconds.
BASE = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SCHEMA = "id long, k string, t double, ts timestamp, v double"
READY_AGGS = ["sum", "count", "max", "mean", "first", "last"]
#: ``joined`` (the window's values in order, non-commutative) shows a row
#: that entered out of order, twice or not at all.
NAMES = READY_AGGS + ["joined"]
RANGE = 10
DELAY = 6


#: A failed task is tried again (the retry test).
SPARK_MASTER = "local[2,3]"


def aggs(lift=None) -> list:
    return READY_AGGS + [("joined", trace(lift), "string")]


def out_of_order(seed: int, *, keys: int = 6, per_key=(15, 40), delay: float = DELAY) -> list[dict]:
    """Rows of ``keys`` keys in arrival order: every row arrives at its time
    plus a random lag below ``delay``, so a row arrives after a row of time
    ``t`` only if its own time is above ``t - delay``: never behind the
    watermark (the newest time of earlier micro-batches minus the delay)."""
    rng = random.Random(seed)
    rows = []
    for i in range(keys):
        for t in key_times(rng, rng.randint(*per_key)):
            rows.append({"k": f"k{i:02d}", "t": t, "v": float(rng.choice([rng.randint(1, 9), rng.randint(10, 200)])),
                         "lag": rng.uniform(0, delay * 0.999)})
    rows.sort(key=lambda r: r["t"] + r.pop("lag"))
    for j, r in enumerate(rows):
        r["id"], r["ts"] = j, BASE + dt.timedelta(seconds=r["t"])
    newest: dict = {}
    behind = 0
    for r in rows:
        behind += r["t"] < newest.get(r["k"], r["t"])
        newest[r["k"]] = max(newest.get(r["k"], r["t"]), r["t"])
    assert behind >= 5, "the rows must arrive out of order within their keys"
    return rows


def at(t: float, id_: int, k: str, v: float) -> dict:
    return {"id": id_, "k": k, "t": t, "ts": BASE + dt.timedelta(seconds=t), "v": v}


def closing_row(rows: list[dict], id_: int) -> dict:
    """A row of its own key far past every row: its micro-batch moves the
    watermark past every row before it (the row itself waits)."""
    return at(max(r["t"] for r in rows) + 10 * DELAY, id_, "zz-closing", 0.0)


def write_files(directory: str, rows: list[dict], per_file: int, first: int = 0) -> int:
    """``rows`` as files of ``per_file`` rows, each one micro-batch
    (``maxFilesPerTrigger=1``), in list order (the file source takes files
    by modification time).  Returns the next file number."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()),
                        ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.float64())])
    os.makedirs(directory, exist_ok=True)
    n = first
    for start in range(0, len(rows), per_file):
        table = pa.Table.from_pylist([{f.name: r[f.name] for f in schema} for r in rows[start:start + per_file]],
                                     schema=schema)
        path = os.path.join(directory, f"part-{n:05d}.parquet")
        pq.write_table(table, path + ".tmp")
        os.utime(path + ".tmp", (1_700_000_000 + n, 1_700_000_000 + n))
        os.rename(path + ".tmp", path)
        n += 1
    return n


class Stream:
    """A watermarked query over a file source, run with ``availableNow``
    from its checkpoint (again after more files arrive)."""

    def __init__(self, spark, directory, *, lift=None, **kw):
        self.spark, self.files = spark, 0
        self.source, self.sink, self.ckpt = (os.path.join(directory, d) for d in ("in", "out", "ckpt"))
        os.makedirs(self.source)
        df = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(self.source)
              .withWatermark("ts", f"{DELAY} seconds"))
        self.out = self.windows(df, directory, aggs(lift), **kw)
        self.progress: list[dict] = []

    def windows(self, df, directory, aggs, **kw):
        """The query's sliding_window (per-row output, a file store in ``directory``)."""
        kw.setdefault("store", f"file://{directory}/store")
        kw.setdefault("range", RANGE)
        return sliding_window(df, key="k", time="ts", value="v", aggs=aggs, buffer_size=2, cache_size=2,
                              name=f"et-{uuid.uuid4().hex[:8]}", **kw)

    def run(self, rows, per_file: int = 12, run_ids=None):
        self.files = write_files(self.source, rows, per_file, self.files)
        query = run_available_now(self.out, self.sink, self.ckpt, run_ids=run_ids)
        self.progress += [json.loads(p.json) for p in query.recentProgress]
        return read_sink(self.spark, self.sink)

    def dropped_by_spark(self) -> int:
        """Rows Spark's stateful operator dropped as late (it must see none)."""
        return sum(op.get("numRowsDroppedByWatermark", 0) for p in self.progress for op in p.get("stateOperators", []))


def oracle(rows, rejected=None) -> dict:
    """The batch answer: each key's rows in time order, ties in arrival order."""
    return expected(sorted(rows, key=lambda r: r["t"]), NAMES, range=RANGE, rejected=rejected)


@pytest.mark.parametrize("kind", ["file", "redis"])
def test_out_of_order_rows_within_the_delay_give_the_batch_output(spark, tmp_path, kind, request):
    """Rows of many keys shuffled within the delay over a dozen
    micro-batches: every row's output is the oracle's (and the batch job's)
    over its key's rows in time order; the closing row, which the watermark
    has not passed, waits."""
    rows = out_of_order(1)
    store = f"file://{tmp_path}/store" if kind == "file" else request.getfixturevalue("redis_url")
    stream = Stream(spark, str(tmp_path), store=store)
    got = stream.run(rows + [closing_row(rows, len(rows))])
    want = oracle(rows)
    assert_outputs(got, rows, want, NAMES)
    assert stream.dropped_by_spark() == 0
    batch = sliding_window(spark.createDataFrame([tuple(r[c] for c in ("id", "k", "t", "ts", "v")) for r in rows],
                                                 SCHEMA), key="k", time="ts", value="v", aggs=aggs(), range=RANGE)
    assert_outputs(batch.collect(), rows, want, NAMES)


def test_several_sizes_wait_for_the_watermark_and_resume(spark, tmp_path):
    """Several sizes on the plan with Spark's state: out-of-order rows over
    two runs of the query, the second resuming every size's window at the
    versions Spark's state and size 0's checkpoint hold; every row's output
    at each size is the oracle's over its key's rows in time order."""
    rows = out_of_order(3)
    sizes = {"a": RANGE, "b": 3 * RANGE}
    stream = Stream(spark, str(tmp_path), range=sizes)
    half = len(rows) // 2
    stream.run(rows[:half])
    got = stream.run(rows[half:] + [closing_row(rows, len(rows))])
    want: dict = {}
    for label, size in sizes.items():
        for rid, results in expected(sorted(rows, key=lambda r: r["t"]), NAMES, range=size).items():
            want.setdefault(rid, {"rejected": None}).update({f"{a}_{label}": results[a] for a in NAMES})
    assert_outputs(got, rows, want, [f"{a}_{label}" for a in NAMES for label in sizes])
    assert stream.dropped_by_spark() == 0


def test_times_past_pandas_range_wait_and_enter_in_order(spark, tmp_path):
    """Event times in the years 3000 and 9999 (outside pandas' nanosecond
    range, which the operator's Python side uses): rows out of order within
    the delay still wait for the watermark and give the oracle's output, and
    Spark drops none."""
    for far in (dt.datetime(3000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone.utc)):
        rows = out_of_order(4, keys=3)
        rows = rows + [closing_row(rows, len(rows))]
        for r in rows:
            r["ts"] = far + dt.timedelta(seconds=r["t"])
        stream = Stream(spark, str(tmp_path / str(far.year)))
        got = stream.run(rows)
        assert_outputs(got, rows[:-1], oracle(rows[:-1]), NAMES)
        assert stream.dropped_by_spark() == 0


def test_rows_a_microsecond_around_the_watermark_far_from_1970(spark, tmp_path):
    """In the year 3000, whose double seconds no longer tell microseconds
    apart: a row 1 us behind the watermark and one at it are late, one 1 us
    after it waits and enters in time order (the watermark and the times
    are compared in exact microseconds, as Spark compares them)."""
    far = dt.datetime(3000, 1, 1, tzinfo=dt.timezone.utc)
    first = at(100.0, 0, "Z", 1.0)  # then the watermark is at 100 - DELAY
    mark = 100.0 - DELAY
    edge = [at(mark + off, i + 1, "A", float(i + 2)) for i, off in enumerate((-1e-6, 0.0, 1e-6, 3e-5, 0.5))]
    everything = [first] + edge
    everything.append(closing_row(everything, len(everything)))
    for r in everything:
        r["ts"] = far + dt.timedelta(microseconds=round(r["t"] * 1e6))
    stream = Stream(spark, str(tmp_path), on_bad_row="flag")
    stream.run([first])
    got = stream.run(everything[1:], per_file=len(everything))
    rejected = {1: "is behind the watermark", 2: "is at the watermark"}
    assert_outputs(got, everything[:-1], oracle(everything[:-1], rejected), NAMES, flag=True)


def test_frame_sql_peers_of_one_double_leave_together_far_from_1970(spark, tmp_path):
    """frame="sql" in the year 9000: two rows 1 us apart, which the windows
    take as one time (equal double seconds), the watermark moving exactly
    onto the first: they leave together and share one output (the second
    was refused as a peer of an output already given)."""
    far = dt.datetime(9000, 1, 1, tzinfo=dt.timezone.utc)
    rows = [{"id": 0, "k": "A", "t": 0.0, "ts": far, "v": 1.0},
            {"id": 1, "k": "A", "t": 0.0, "ts": far + dt.timedelta(microseconds=1), "v": 2.0},
            {"id": 2, "k": "Z", "t": 6.0, "ts": far + dt.timedelta(seconds=DELAY), "v": 0.0}]  # watermark: far
    closing = {"id": 3, "k": "Z", "t": 20.0, "ts": far + dt.timedelta(seconds=20), "v": 0.0}
    stream = Stream(spark, str(tmp_path), frame="sql")
    stream.run(rows, per_file=len(rows))
    got = stream.run([closing])
    assert sorted((g["id"], g["sum"], g["count"]) for g in got if g["k"] == "A") == [(0, 3.0, 2), (1, 3.0, 2)]


def _no_404(v):
    """The ``joined`` lift, refusing the value 404."""
    if v == 404.0:
        raise ValueError("404 is no value")
    return f"{v:g},"


def test_keys_whose_rows_no_window_takes_leave_nothing_behind(spark, tmp_path):
    """on_bad_row="flag": a null key's rows leave flagged at once (no wait
    for the watermark), a key whose only row the aggregations cannot take
    leaves flagged when the watermark passes it; neither keeps a window in
    the store nor Spark state, and every output is the oracle's."""
    import stores

    rows = out_of_order(5, keys=4)
    newest = max(r["t"] for r in rows)
    bad = [at(rows[3]["t"], len(rows), None, 1.0), at(newest, len(rows) + 1, "only-bad", 404.0)]
    everything = rows[:10] + bad[:1] + rows[10:] + bad[1:]
    stream = Stream(spark, str(tmp_path), on_bad_row="flag", lift=_no_404)
    stream.run(everything[:11], per_file=11)  # the null key's row comes out in its own micro-batch
    assert [g["id"] for g in read_sink(spark, stream.sink) if g["k"] is None] == [len(rows)]
    closings = []
    for name in ("zz-first", "zz-second"):
        closings.append({**closing_row(everything + closings, len(everything) + len(closings)), "k": name})
    stream.run(everything[11:] + closings[:1])
    stream.run(closings[1:])
    store = stores.open_store(f"file://{tmp_path}/store")
    assert store.window_names() == [n for n in store.window_names() if "zz-first" in n] and store.window_names()
    store.close()
    assert stream.progress[-1]["stateOperators"][0]["numRowsTotal"] == 2  # the closing keys
    last = closing_row(everything + closings, len(everything) + 2)
    got = stream.run([last])
    rejected = {len(rows): "null or NaN key", len(rows) + 1: "404 is no value"}
    assert_outputs(got, everything + closings, oracle(everything + closings, rejected), NAMES, flag=True)


def test_keys_as_spark_groups_them_across_micro_batches(spark, tmp_path):
    """A composite key of a double (0.0 and -0.0 are one key, whichever
    comes first in a micro-batch), an array (holding a null, or one
    number) and a timestamp (null: a bad row, flagged): every row's window
    equals the oracle's over the keys Spark groups, across three
    micro-batches, and the store holds one window per key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import stores

    keys = [(0.0, [None]), (-0.0, [None]), (0.0, [7]), (-0.0, [7])]
    batches = [[0, 1, 2, 3, None], [1, 0, 3, 2], [1, 3, None, 0]]  # the key of each row; None: null timestamp
    rows, t = [], 0.0
    for batch in batches:
        for j in batch:
            d, a = keys[j if j is not None else 0]
            rows.append({"id": len(rows), "d": d, "a": a, "kt": None if j is None else BASE, "t": t,
                         "ts": BASE + dt.timedelta(seconds=t), "v": float(len(rows))})
            t += 1.0
    schema = pa.schema([("id", pa.int64()), ("d", pa.float64()), ("a", pa.list_(pa.int64())),
                        ("kt", pa.timestamp("us", tz="UTC")), ("t", pa.float64()), ("ts", pa.timestamp("us", tz="UTC")),
                        ("v", pa.float64())])
    source, sink, ckpt = (str(tmp_path / d) for d in ("in", "out", "ckpt"))
    os.makedirs(source)
    out = sliding_window(spark.readStream.schema("id long, d double, a array<bigint>, kt timestamp, t double, "
                                                 "ts timestamp, v double").parquet(source)
                         .withWatermark("ts", "0 seconds"), key=["d", "a", "kt"], time="ts", value="v",
                         aggs=[("joined", trace(), "string")], range=100, store=f"file://{tmp_path}/store",
                         name=f"keys-{uuid.uuid4().hex[:8]}", on_bad_row="flag")
    start = 0
    for batch in batches + [[]]:  # a last micro-batch moves the watermark past the rows
        pq.write_table(pa.Table.from_pylist(rows[start:start + len(batch)], schema=schema),
                       os.path.join(source, f"part-{start:03d}.parquet"))
        start += len(batch)
        run_available_now(out, sink, ckpt)
    got = {g["id"]: g for g in read_sink(spark, sink)}
    want = {}
    for r in rows:
        if r["kt"] is None:
            want[r["id"]] = None
            continue
        mine = [x for x in rows[:r["id"] + 1] if x["kt"] is not None and x["d"] == r["d"] and x["a"] == r["a"]]
        want[r["id"]] = "".join(f"{x['v']:g}," for x in mine)
    assert {i: g["joined"] for i, g in got.items()} == want
    assert all((g["rejected"] is None) == (g["kt"] is not None) for g in got.values())
    store = stores.open_store(f"file://{tmp_path}/store")
    assert len(store.window_names()) == 2, store.window_names()
    store.close()


def late_rows(rows: list[dict], first_id: int) -> tuple[list[dict], dict]:
    """Rows behind the watermark once ``rows`` are in: one at the oldest
    time of a key, one just behind the watermark, each of a key with rows
    after it.  Returns them and {id: reason}."""
    newest = max(r["t"] for r in rows)
    late = [at(rows[0]["t"], first_id, rows[0]["k"], 7.0),
            at(newest - DELAY - 1, first_id + 1, rows[-1]["k"], 8.0)]
    return late, {r["id"]: "is behind the watermark" for r in late}


def test_idle_keys_leave_the_store_and_the_state_once_the_watermark_passes_their_windows(spark, tmp_path):
    """Keys whose rows stop: once the watermark passes a key's newest row
    plus the range, no row still to come can share a window with its rows,
    so the key's window is deleted from the store and its Spark state
    dropped (at the watermark's next advance: the two closing rows); a
    late row of such a key (or of a key never seen) leaves flagged and
    leaves nothing behind; rows that come for those keys later start new
    windows, and every output is the oracle's over all the rows, as if the
    windows had been kept."""
    import stores

    rows = out_of_order(5, keys=4)
    stream = Stream(spark, str(tmp_path), on_bad_row="flag")
    store = stores.open_store(f"file://{tmp_path}/store")
    first = closing_row(rows, len(rows))
    stream.run(rows + [first])
    assert len(store.window_names()) >= 1  # the keys' windows, until the watermark moves on
    second = {**closing_row(rows + [first], len(rows) + 1), "k": "zz-second"}
    stream.run([second])
    # the first closing row entered its window at this advance; every other key's window went
    assert len(store.window_names()) == 1
    assert stream.progress[-1]["stateOperators"][0]["numRowsTotal"] == 2  # the closing keys
    # a late row of a key whose window went, and of a key never seen: flagged, and nothing kept for them
    late = [at(rows[0]["t"], len(rows) + 2, rows[0]["k"], 5.0), at(rows[0]["t"], len(rows) + 3, "never-seen", 5.0)]
    stream.run(late, per_file=2)
    assert len(store.window_names()) == 1
    assert stream.progress[-1]["stateOperators"][0]["numRowsTotal"] == 2
    later = [at(second["t"] + 1 + i, len(rows) + 4 + i, r["k"], float(i % 3)) for i, r in enumerate(rows[:9])]
    everything = rows + [first, second] + late + later
    got = stream.run(later + [closing_row(everything, len(everything))])
    rejected = {r["id"]: "is behind the watermark" for r in late}
    assert_outputs(got, everything, oracle(everything, rejected), NAMES, flag=True)
    assert stream.dropped_by_spark() == 0
    store.close()


def test_a_key_resting_less_than_its_range_keeps_its_window(spark, tmp_path):
    """The expiry waits for the watermark to pass the newest row plus the
    whole range: key A rests while another key's rows move the watermark
    past A's newest row plus half the range (micro-batches that time out
    keys without rows), then A's next row, still within the range of its
    old rows, must find them in its window."""
    a = [at(float(t), t, "A", float(t + 1)) for t in range(6)]
    stream = Stream(spark, str(tmp_path))
    stream.run(a, per_file=len(a))
    b1 = at(5 + DELAY + 7, 6, "B", 50.0)  # the watermark then: newest of A + 7
    b2 = at(5 + DELAY + 8.5, 7, "B", 60.0)  # and then newest of A + 8.5 (the range is 10)
    assert RANGE / 2 < 7 < 8.5 < RANGE
    stream.run([b1])
    stream.run([b2])
    back = at(14.0, 8, "A", 70.0)  # after the watermark, within the range of A's rows from 5
    everything = a + [b1, b2, back]
    got = stream.run([back, closing_row(everything, len(everything))], per_file=2)
    assert_outputs(got, everything, oracle(everything), NAMES)


def test_late_rows_are_flagged_and_leave_the_windows_unchanged(spark, tmp_path):
    """on_bad_row="flag": rows behind the watermark come out at once with
    null aggregations and the reason; Spark drops none of them itself; the
    rows around them give the oracle's output without them."""
    rows = out_of_order(2)
    late, rejected = late_rows(rows, len(rows))
    after = [at(r["t"] + (max(q["t"] for q in rows) + 1), len(rows) + 2 + i, r["k"], r["v"])
             for i, r in enumerate(rows[:20])]
    stream = Stream(spark, str(tmp_path), on_bad_row="flag")
    stream.run(rows)
    everything = rows + late + after
    got = stream.run(late + after + [closing_row(everything, len(everything))], per_file=8)
    want = oracle(everything, rejected)
    assert_outputs(got, everything, want, NAMES, flag=True)
    flagged = [g for g in got if g["rejected"] is not None]
    assert sorted(g["id"] for g in flagged) == sorted(rejected)
    assert stream.dropped_by_spark() == 0


def test_late_row_error_fails_the_query_naming_it(spark, tmp_path):
    rows = out_of_order(3, keys=3)
    late, _ = late_rows(rows, len(rows))
    stream = Stream(spark, str(tmp_path))
    stream.run(rows)
    with pytest.raises(Exception) as info:
        stream.run(late[:1])
    message = str(info.value)
    assert "is behind the watermark" in message and f"k={late[0]['k']!r}" in message, message[:3000]


def test_pending_rows_survive_a_restart_and_a_failed_task(spark, tmp_path, tmp_path_factory):
    """The query stops with rows waiting (in Spark's state, in its
    checkpoint) and restarts from its checkpoint; in the restarted run, the
    first attempt of a task fails in the middle of a key, after other keys
    of its partition entered their windows.  The sink equals a failure-free
    run, which equals the oracle."""
    rows = out_of_order(4)
    cut = len(rows) // 2
    marker = rows[cut + 10]
    marker["v"] = 12345.0  # the lift fails at it in the first attempt
    tail = rows[cut:] + [closing_row(rows, len(rows))]

    clean = Stream(spark, str(tmp_path_factory.mktemp("clean")))
    want = oracle(rows)
    assert_outputs(clean.run(rows + tail[-1:]), rows, want, NAMES)

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    stream = Stream(spark, str(tmp_path / "run"), lift=FailFirstAttempt({marker["v"]}, str(evidence)))
    first = stream.run(rows[:cut])
    assert len(first) < cut, "rows must be waiting when the query stops"
    got = stream.run(tail)
    (failure,) = [json.load(open(evidence / f)) for f in os.listdir(evidence)]
    assert failure["lifted_before"] > 0, failure
    assert_outputs(got, rows, want, NAMES)
    assert sorted(map(tuple, got)) == sorted(map(tuple, clean.run([])))


def test_configuration_errors(spark, tmp_path):
    df = (spark.readStream.schema(SCHEMA).parquet(str(tmp_path)).withWatermark("ts", "1 minute"))
    with pytest.raises(SlidingWindowError, match="expire_after counts processing time"):
        sliding_window(df, key="k", time="ts", value="v", aggs=["sum"], range=10, store=f"file://{tmp_path}/s",
                       name="x", expire_after="1h")
    other = spark.readStream.schema(SCHEMA + ", ingest timestamp").parquet(str(tmp_path)) \
        .withWatermark("ingest", "1 minute")
    with pytest.raises(SlidingWindowError, match="watermark is on column 'ingest'.*use df.withWatermark\\('ts', delay\\)"):
        sliding_window(other, key="k", time="ts", value="v", aggs=["sum"], range=10, store=f"file://{tmp_path}/s",
                       name="x")
    with pytest.raises(SlidingWindowError, match=r"make one of 't': df.withColumn\('ts', F.timestamp_seconds\('t'\)\)"):
        sliding_window(other, key="k", time="t", value="v", aggs=["sum"], range=10, store=f"file://{tmp_path}/s",
                       name="x")

"""``sliding_window(..., frame="sql")`` equals Spark SQL's own window functions.

The oracle is Spark itself: every ready aggregation (``spark_ops.READY``)
as a Spark SQL window function over ``PARTITION BY k ORDER BY t RANGE
BETWEEN R PRECEDING AND CURRENT ROW`` (a timestamp column: ``INTERVAL 'R'
SECOND PRECEDING``), or ``ORDER BY t, id ROWS BETWEEN N - 1 PRECEDING AND
CURRENT ROW`` for a count window (``id``: the input order, which is the
arrival order).  ``first`` and ``last`` are ``min_by``/``max_by`` of the
value by ``(t, id)``: the first and last row of the frame with ties in
arrival order, which is what ``frame="sql"`` gives (Spark's ``first`` over
peers takes whatever order its sort left them in).  The spreads, sums,
means and geometric means are compared within float tolerance (Spark and
the engines add in different orders), the rest exactly.

The data: 12 keys with bursts of equal times (ties), steps of exactly the
range (rows on the inclusive lower edge) and gaps, plus one key with a run
of 40 equal times; given to Spark shuffled, sorts spilling every 64 rows
(ties leave the shuffle in no particular order) and Arrow batches of 13
rows, so runs of equal times span batches (the batch plan holds them back
until complete).  Time columns: double, long, timestamp and timestamp_ntz;
engines: columnar, amta, lmta, and amta with its windows in the file store.
Streaming: micro-batches whose times never straddle a micro-batch equal the
batch oracle; a row at a time an earlier micro-batch gave outputs for is
flagged with its reason.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import sys
import uuid

import pytest

from spark_ops import READY, sliding_window
from spark_ops import rows as row_rules
from tests.spark_fixtures import (key_times, read_sink, run_available_now, ship_by_value, spark_session,
                                  stream_source, write_parquet)

ship_by_value(sys.modules[__name__])

SPARK_SQL = {"sum": "sum(v) OVER w", "count": "count(v) OVER w", "min": "min(v) OVER w", "max": "max(v) OVER w",
             "mean": "avg(v) OVER w", "geomean": "exp(avg(ln(v)) OVER w)", "variance": "var_samp(v) OVER w",
             "stddev": "stddev_samp(v) OVER w", "var_pop": "var_pop(v) OVER w",
             "stddev_pop": "stddev_pop(v) OVER w", "first": "min_by(v, struct(t, id)) OVER w",
             "last": "max_by(v, struct(t, id)) OVER w"}
assert set(SPARK_SQL) == set(READY)
ROUNDED = {"sum", "mean", "geomean", "variance", "stddev", "var_pop", "stddev_pop"}
EPOCH = dt.datetime(2024, 5, 1, 12, 0, 0)


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", **{"spark.sql.session.timeZone": "UTC",
                                           "spark.sql.execution.arrow.maxRecordsPerBatch": "13"})
    yield session
    session.stop()


def tied_rows(seed: int, keys: int = 12) -> list[dict]:
    """Rows ``{id, k, t, v}`` (``t``: integer seconds), shuffled; ``id`` is
    the input order."""
    rng = random.Random(seed)
    rows = []
    for i in range(keys):
        for t in key_times(rng, rng.randint(20, 60)):
            rows.append({"k": f"k{i:02d}", "t": t, "v": float(rng.choice([rng.randint(1, 9),
                                                                            round(rng.uniform(0.5, 50), 2)]))})
    for t in [0.0, 4.0, 5.0] + [10.0] * 40 + [15.0, 15.0, 16.0]:  # a long run of ties, rows on the edge
        rows.append({"k": "big", "t": t, "v": float(rng.randint(1, 9))})
    rng.shuffle(rows)
    for j, r in enumerate(rows):
        r["id"] = j
    return rows


#: Each kind of time column: its Spark type, the row's time in it, and the range.
KINDS = {
    "double": ("double", lambda t: t / 2, 2.5),
    "long": ("long", lambda t: int(t), 5),
    "timestamp": ("timestamp", lambda t: EPOCH + dt.timedelta(seconds=t / 2), 2.5),
    "timestamp_ntz": ("timestamp_ntz", lambda t: EPOCH + dt.timedelta(seconds=t / 2), 2.5),
}


def frame_sql(kind: str, *, range=None, rows=None) -> str:
    if rows is not None:
        return f"PARTITION BY k ORDER BY t, id ROWS BETWEEN {rows - 1} PRECEDING AND CURRENT ROW"
    bound = f"INTERVAL '{range}' SECOND" if kind.startswith("timestamp") else f"{range}"
    return f"PARTITION BY k ORDER BY t RANGE BETWEEN {bound} PRECEDING AND CURRENT ROW"


def spark_says(df, kind, **size) -> dict:
    """id -> {aggregation: Spark's window function}."""
    over = frame_sql(kind, **size)
    exprs = [SPARK_SQL[a].replace("OVER w", f"OVER ({over})") + f" AS {a}" for a in READY]
    return {r["id"]: r.asDict() for r in df.selectExpr("id", *exprs).collect()}


def assert_same(got, want):
    assert len(got) == len(want), "one output row per input row"
    bad = []
    for r in got:
        w = want[r["id"]]
        for a in READY:
            g, e = r[a], w[a]
            if g is None or e is None:
                ok = g is None and e is None
            elif a in ROUNDED:
                ok = math.isclose(g, e, rel_tol=1e-9, abs_tol=1e-9)
            else:
                ok = g == e
            if not ok:
                bad.append((r["id"], r["k"], r["t"], a, g, e))
    assert not bad, f"{len(bad)} differences from Spark, first ones (id, k, t, agg, ours, Spark's): {bad[:8]}"


ENGINES = {"columnar": {}, "amta": {}, "lmta": {}, "amta-store": {"store": True}}


def run(spark, tmp_path, data, kind, engine, **size):
    spark_type, convert, _ = KINDS[kind]
    df = spark.createDataFrame([(r["id"], r["k"], convert(r["t"]), r["v"]) for r in data],
                               f"id long, k string, t {spark_type}, v double")
    store = dict(store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2) if engine == "amta-store" else {}
    got = sliding_window(df, key="k", time="t", value="v", aggs=list(READY), frame="sql",
                         engine=engine.split("-")[0], **store, **size).collect()
    return got, spark_says(df, kind, **size)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("kind", ["double", "long", "timestamp"])
def test_time_window_equals_spark_range_between(spark, tmp_path, engine, kind):
    rows = tied_rows(1)
    got, want = run(spark, tmp_path, rows, kind, engine, range=KINDS[kind][2])
    assert_same(got, want)


@pytest.mark.parametrize("engine", ["columnar", "amta"])
def test_ties_in_any_order_give_peers_the_same_outputs(spark, tmp_path, engine):
    """``ties="any"``: the plan sorts on (key, time) alone, so ties leave the
    spilling sort in no set order; the peers' shared outputs cannot tell:
    every aggregation but ``first`` and ``last`` equals Spark's, and those
    two are the value of a row at the frame's first (last) time."""
    rows = tied_rows(6)
    df = spark.createDataFrame([(r["id"], r["k"], r["t"] / 2, r["v"]) for r in rows],
                               "id long, k string, t double, v double")
    got = sliding_window(df, key="k", time="t", value="v", aggs=list(READY), frame="sql", engine=engine,
                         range=2.5, ties="any").collect()
    want = spark_says(df, "double", range=2.5)
    at = {}
    for r in rows:
        at.setdefault((r["k"], r["t"] / 2), set()).add(r["v"])
    for r in got:
        times = sorted({t for k, t in at if k == r["k"] and r["t"] - 2.5 <= t <= r["t"]})
        assert r["first"] in at[(r["k"], times[0])] and r["last"] in at[(r["k"], times[-1])], r
        want[r["id"]].update(first=r["first"], last=r["last"])
    assert_same(got, want)


def test_time_window_over_timestamp_ntz(spark, tmp_path):
    rows = tied_rows(2)
    got, want = run(spark, tmp_path, rows, "timestamp_ntz", "columnar", range=2.5)
    assert_same(got, want)


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("n", [1, 4])
def test_count_window_equals_spark_rows_between_by_time_then_arrival(spark, tmp_path, engine, n):
    rows = tied_rows(3)
    got, want = run(spark, tmp_path, rows, "double", engine, rows=n)
    assert_same(got, want)


def test_the_frames_differ_where_the_docs_say(spark, tmp_path):
    """On the same rows the default frame differs from Spark's range frame
    (so the equivalence tests above can fail), and only for rows with a
    peer or a row exactly ``range`` before them."""
    rows = tied_rows(4)
    df = spark.createDataFrame([(r["id"], r["k"], r["t"] / 2, r["v"]) for r in rows],
                               "id long, k string, t double, v double")
    default = {r["id"]: r for r in sliding_window(df, key="k", time="t", value="v", aggs=["count"],
                                                 range=2.5).collect()}
    want = spark_says(df, "double", range=2.5)
    differ = {i for i, r in default.items() if r["count"] != want[i]["count"]}
    times = {}
    for r in rows:
        times.setdefault(r["k"], []).append(r["t"] / 2)
    special = {r["id"] for r in rows
               if times[r["k"]].count(r["t"] / 2) > 1 or (r["t"] / 2 - 2.5) in times[r["k"]]}
    assert differ and differ <= special


def _rounds_at_time_boundaries(rng, rows, rounds=3):
    """Each key's rows (by time) cut into ``rounds`` runs, never inside a run
    of equal times; each round shuffled."""
    out = [[] for _ in range(rounds)]
    by_key = {}
    for r in rows:
        by_key.setdefault(r["k"], []).append(r)
    for items in by_key.values():
        items.sort(key=lambda r: r["t"])
        ends = [i for i in range(1, len(items)) if items[i]["t"] != items[i - 1]["t"]]
        cuts = sorted(rng.sample(ends, min(rounds - 1, len(ends))))
        for n, (a, b) in enumerate(zip([0] + cuts, cuts + [len(items)])):
            out[n].extend(items[a:b])
    for batch in out:
        rng.shuffle(batch)
    return out


def test_streaming_equals_spark_and_flags_a_row_at_an_emitted_time(spark, tmp_path):
    """Three micro-batches (availableNow runs of one query from its
    checkpoint): rows whose time never straddles a micro-batch come out as
    Spark's batch window functions over all of them; a row sent in the last
    micro-batch at its key's newest time of an earlier one is flagged, with
    null aggregations and the reason, and changes no other row."""
    rng = random.Random(5)
    rows = tied_rows(5, keys=6)
    rounds = _rounds_at_time_boundaries(rng, rows)
    key = min(r["k"] for r in rounds[0])
    newest = max(r["t"] for r in rounds[0] + rounds[1] if r["k"] == key)
    late = {"id": 90_000, "k": key, "t": newest, "v": 7.0}
    rounds[2].insert(0, late)
    source, sink, ckpt = (str(tmp_path / d) for d in ("in", "out", "ckpt"))
    os.makedirs(source)
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=list(READY),
                         range=5, frame="sql", store=f"file://{tmp_path}/store", buffer_size=2, cache_size=2,
                         on_bad_row="flag", name=f"s-{uuid.uuid4().hex[:8]}")
    for batch in rounds:
        by_key = {}
        for r in batch:
            by_key.setdefault(r["k"], []).append(r)
        for part in by_key.values():  # one file per key, in id order: a key's ties arrive in id order
            write_parquet(source, sorted(part, key=lambda r: r["id"]))
        run_available_now(out, sink, ckpt)
    got = read_sink(spark, sink)
    flagged = [r for r in got if r["rejected"] is not None]
    assert [(r["id"], r["rejected"]) for r in flagged] == [(90_000, row_rules.peers_emitted(newest))]
    assert all(flagged[0][a] is None for a in READY)
    df = spark.createDataFrame([(r["id"], r["k"], r["t"], r["v"]) for r in rows],
                               "id long, k string, t double, v double")
    assert_same([r for r in got if r["id"] != 90_000], spark_says(df, "double", range=5))

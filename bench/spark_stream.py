"""Spark Structured Streaming: per-event sliding results against hopping windows.

The input is a file source receiving one Parquet file per micro-batch: K
hosts, one reading a second each, every file the next stretch of time.  Two
queries compute "the max of the last hour" and process every file:

* ``MTA``: ``sliding_window(stream, ..., aggs=["max"], range=3600,
  store=...)``: one output row per event, with the max over that event's
  last hour; each key's window lives in the store between micro-batches
  (file store and Redis), Spark's state holds one small row per key;
* ``hopping``: Spark's own ``groupBy(window(ts, "1 hour", "1 second"), k)
  .agg(max(v))`` with a one-hour watermark, in update mode: the closest
  built-in to a per-event sliding result (every window containing an event
  is updated), at the price of 3600 windows per event.

Reported: events per second (all events / wall time of the query, which
runs with ``availableNow`` and one file per micro-batch, so it includes
Spark's per-batch overhead), rows of Spark state at the end, and the
store's size for MTA.  Both sinks are ``noop``.  The hopping query only
runs on the smaller input (its work is 3600 aggregation updates per event).
"""

from __future__ import annotations

import os
import time

from . import common, sparkbench, storebench
from .common import RunConfig
from .experiment import Run

NAME = "spark-stream"

PROFILES = {
    # (hosts, seconds of readings, files = micro-batches)
    "full": dict(small=(5, 1800, 6), large=(50, 7200, 12), hopping_max_events=10_000),
    "quick": dict(small=(3, 900, 3), large=(20, 3600, 6), hopping_max_events=3_000),
    "tiny": dict(small=(2, 60, 2), large=(3, 120, 2), hopping_max_events=200, range_s=30),
}
RANGE_S = 3600


def write_input(directory: str, hosts: int, seconds: int, files: int, seed: int = 7) -> int:
    """``hosts`` x ``seconds`` readings ``(k, ts, v)``, ``files`` Parquet files
    of consecutive stretches of time; returns the number of events."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    os.makedirs(directory)
    t0 = np.datetime64("2024-03-04T00:00:00", "us")
    per_file = -(-seconds // files)
    for f in range(files):
        secs = np.arange(f * per_file, min(seconds, (f + 1) * per_file))
        k = np.repeat(np.arange(hosts), len(secs)).astype(np.int32)
        ts = t0 + np.tile(secs, hosts).astype("timedelta64[s]")
        v = rng.uniform(0, 100, len(k))
        table = pa.table({"k": k, "ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "v": v})
        pq.write_table(table, os.path.join(directory, f"part-{f:04d}.parquet"))
    return hosts * seconds


def run_query(df, checkpoint: str, output_mode: str, checksum_of: str | None = None) -> tuple[float, dict]:
    """Run ``df`` to the end of its files, into the ``noop`` sink, or with
    ``checksum_of`` a column into one that counts the output rows and sums
    the column (``output_rows``, ``checksum``): methods computing the same
    outputs must show the same."""
    writer = df.writeStream.outputMode(output_mode).option("checkpointLocation", checkpoint)
    sums = []
    if checksum_of is None:
        writer = writer.format("noop")
    else:
        from pyspark.sql import functions as F

        def keep(batch, _batch_id):
            sums.append(tuple(batch.agg(F.count(F.lit(1)), F.sum(checksum_of)).collect()[0]))
        writer = writer.foreachBatch(keep)
    q = writer.trigger(availableNow=True).start()
    t0 = time.perf_counter()
    q.awaitTermination()
    seconds = time.perf_counter() - t0
    progress = [p for p in q.recentProgress if p.get("numInputRows")]
    state = {}
    if progress and progress[-1].get("stateOperators"):
        op = progress[-1]["stateOperators"][0]
        state = {"state_rows": op.get("numRowsTotal"), "state_memory_bytes": op.get("memoryUsedBytes")}
    state["micro_batches"] = len(progress)
    state["input_rows"] = sum(p["numInputRows"] for p in progress)
    if checksum_of is not None:
        state["output_rows"] = sum(n for n, _ in sums)
        state["checksum"] = sum(c for n, c in sums if n)
    return seconds, state


def store_size(kind: str, url: str, directory: str) -> dict:
    if kind == "file":
        db = os.path.join(directory, "mta.sqlite3")
        size = sum(os.path.getsize(db + suffix) for suffix in ("", "-wal") if os.path.exists(db + suffix))
        return {"store_bytes": size}
    import redis

    client = redis.Redis.from_url(url)
    try:
        return {"store_bytes": client.info("memory")["used_memory"], "store_keys": client.dbsize()}
    finally:
        client.close()


def run(cfg: RunConfig) -> dict:
    from pyspark.sql import functions as F

    from spark_ops import sliding_window

    p = PROFILES[cfg.profile]
    span = p.get("range_s", RANGE_S)
    job = Run(NAME, cfg, {**p, "range_s": span, "slide_s": 1, "master": sparkbench.MASTER})
    data = job.data
    data["machine"]["redis_server"] = storebench.redis_server_version()
    data["notes"] = [
        "Events/s = events / wall time of an availableNow query, one file per micro-batch; the sink (foreachBatch) "
        "counts each micro-batch's rows and sums their max, so the MTA's stores show they give the same outputs.",
        f"MTA: per-event max over the last {span} s; hopping: window(ts, '{span} s', '1 s') max, update mode, "
        f"watermark {span} s.",
        "State rows: Spark's state store (stateOperators.numRowsTotal) after the last micro-batch.",
    ]
    records = data["records"] = []
    with sparkbench.spark_run(cfg, data, 4, "mta-bench-stream-") as (spark, work):
        with storebench.backends(cfg, storebench.configured(cfg, ("redis",))) as backends:
            redis_url = backends.urls.get("redis")
            _warm_up(spark, work)
            for size in ("small", "large"):
                hosts, seconds, files = p[size]
                source = os.path.join(work, f"in-{size}")
                events = write_input(source, hosts, seconds, files)
                queries = []
                for kind, url in (("file", f"file://{work}/store-{size}"), ("redis", redis_url)):
                    if url is not None:
                        queries.append((f"MTA, {kind} store", kind, url))
                if events <= p["hopping_max_events"]:
                    queries.append(("hopping windows", None, None))
                for method, kind, url in queries:
                    if redis_url is not None:
                        _flush(redis_url)
                    stream = (spark.readStream.schema("k int, ts timestamp, v double")
                              .option("maxFilesPerTrigger", 1).parquet(source))
                    if kind is None:
                        out = (stream.withWatermark("ts", f"{span} seconds")
                               .groupBy(F.window("ts", f"{span} seconds", "1 second"), "k")
                               .agg(F.max("v").alias("max")))
                        mode = "update"
                    else:
                        out = sliding_window(stream, key="k", time="ts", value="v", aggs=["max"], range=span,
                                             store=url, name=f"bench-{size}-{kind}")
                        mode = "append"
                    checkpoint = os.path.join(work, f"ckpt-{size}-{len(records)}")
                    secs, state = run_query(out, checkpoint, mode, checksum_of="max")
                    assert state["input_rows"] == events, (method, state, events)
                    rec = {"input": size, "hosts": hosts, "seconds_of_data": seconds, "events": events,
                           "method": method, "wall_s": secs, "events_per_s": events / secs, **state}
                    if kind is not None:
                        rec.update(store_size(kind, url, f"{work}/store-{size}"))
                    records.append(rec)
                    held = "" if state.get("state_rows") is None else f", Spark state rows {state['state_rows']}"
                    cfg.log(f"  spark-stream {size:<5} {method:<18} {rec['events_per_s']:>9,.0f} events/s "
                            f"({secs:.1f} s, {state['micro_batches']} batches{held})")
                    job.save()
    return job.finish(plot, checksums_agree=lambda d: checksums_agree(d["records"]))


def checksums_agree(records) -> dict:
    """Per input, whether the MTA's stores gave the same output rows and
    sum(max) (``common.sums_agree``; hopping windows output other rows)."""
    by_input: dict = {}
    for r in records:
        if "checksum" in r and r["method"].startswith("MTA"):
            by_input.setdefault(r["input"], []).append((r["output_rows"], r["checksum"]))
    return {size: common.sums_agree(pairs) for size, pairs in by_input.items()}


def plot(data: dict, path) -> None:
    sparkbench.plot_bars(data, path, [f"{r['method']}\n{r['input']}: {r['events']:,} events" for r in data["records"]],
                         (("events_per_s", "events per second (higher is better)"),
                          ("state_rows", "rows of Spark state after the last micro-batch")),
                         "hopping windows", row_height=0.6)


def _warm_up(spark, work: str) -> None:
    """Start the Python workers before the first timed query."""
    from spark_ops import sliding_window

    df = spark.createDataFrame([(1, 0.0, 1.0)], "k int, t double, v double")
    sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=1.0,
                   store=f"file://{work}/warm-up").collect()


def _flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushall()
    finally:
        client.close()


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    rows = [[r["input"], f"{r['hosts']} x {r['seconds_of_data']:,} s", f"{r['events']:,}", r["method"],
             f"{r['micro_batches']}", f"{r['events_per_s']:,.0f}", f"{r.get('state_rows', '-')}",
             f"{r['store_bytes'] / 2**20:.1f}" if "store_bytes" in r else "-"] for r in data["records"]]
    return [("", ["input", "hosts x time", "events", "method", "micro-batches", "events/s", "Spark state rows",
                  "store MB"], rows)]


def summary_lines(data: dict) -> list[str]:
    by = {(r["input"], r["method"]): r for r in data["records"]}
    hop = by.get(("small", "hopping windows"))
    lines = []
    for method in ("MTA, file store", "MTA, redis store"):
        mine = by.get(("small", method))
        if hop and mine:
            lines.append(f"[ratio] small input, {method} / hopping windows: events/s "
                         f"{mine['events_per_s'] / hop['events_per_s']:.1f}x, Spark state rows "
                         f"{mine.get('state_rows')} vs {hop.get('state_rows')}")
    agree = checksums_agree(data["records"])
    if agree:  # results recorded with the noop sink have no checksums
        lines.append("checksums (output rows, sum(max)) of the MTA's stores agree: " + ", ".join(
            f"{size} {'?' if ok is None else 'yes' if ok else 'NO'}" for size, ok in agree.items()))
    return lines


report = sparkbench.reporter(lambda data: f"Spark streaming: per-event max over the last {data['config']['range_s']} s",
                             tables, summary_lines)

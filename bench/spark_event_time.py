"""Spark Structured Streaming with event time: out-of-order input against in-order.

The input is a file source receiving one Parquet file per micro-batch: K
hosts, one reading a second each.  The same readings arrive

* ``in order``: in time order;
* ``out of order, d``: each reading arrives at its time plus a random lag
  below ``d`` (1 % and 10 % of the window's range), so the files mix
  readings up to ``d`` apart.

Every query computes the per-reading max over the last ``range`` seconds
with :func:`spark_ops.sliding_window` (file store and Redis):

* ``in order, no watermark``: the in-order input, no watermark (each key's
  rows enter their window as their micro-batch arrives);
* ``in order, watermark d``: the same input with ``withWatermark(ts, d)``:
  the event-time path (rows wait in Spark's state until the watermark
  passes them) on input that needs no reordering;
* ``out of order, d``: the out-of-order input with a watermark of ``d``.

Reported: input and output rows per second (all events, and the events
given an output, over the wall time of an availableNow query, one file per
micro-batch, ``noop`` sink: with a watermark the readings within the delay
of the newest time still wait when the input ends, :func:`emitted`), the
ratio of output rows per second to the in-order query without watermark
on the same store, and the rows waiting per key
after each micro-batch, computed from the input and Spark's watermark rule
(the newest time of the earlier micro-batches minus the delay).  Runs are
interleaved (each method once per repeat) and the median is reported.
"""

from __future__ import annotations

import math
import os
import statistics

from . import common, sparkbench, storebench
from .common import RunConfig
from .experiment import Run, save_figure
from .spark_stream import _flush, _warm_up, run_query

NAME = "spark-event-time"

PROFILES = {
    # hosts, seconds of readings, files (= micro-batches), window range (s), repeats
    "full": dict(hosts=20, seconds=7200, files=12, range_s=3600, repeats=3),
    "quick": dict(hosts=10, seconds=3600, files=6, range_s=1800, repeats=1),
    "tiny": dict(hosts=3, seconds=240, files=3, range_s=60, repeats=1),
}
#: The lags (fractions of the range) of the out-of-order inputs.
DISORDER = (0.01, 0.10)
BASELINE = "in order, no watermark"


def arrivals(hosts: int, seconds: int, lag: float, seed: int = 11):
    """The readings ``(k, t, v)`` as numpy arrays in arrival order: time plus
    a uniform lag below ``lag`` seconds (``0``: time order)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.tile(np.arange(seconds, dtype=np.float64), hosts)
    k = np.repeat(np.arange(hosts, dtype=np.int32), seconds)
    v = rng.uniform(0, 100, len(t))
    order = np.argsort(t + rng.uniform(0, lag, len(t)) if lag else t, kind="stable")
    return k[order], t[order], v[order]


def write_input(directory: str, k, t, v, files: int) -> list:
    """The readings as ``files`` Parquet files of equal row counts, in
    arrival order; returns each file's times (for :func:`waiting`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(directory)
    t0 = np.datetime64("2024-03-04T00:00:00", "us")
    cuts = np.array_split(np.arange(len(t)), files)
    for f, idx in enumerate(cuts):
        ts = t0 + (t[idx] * 1e6).astype("timedelta64[us]")
        table = pa.table({"k": k[idx], "ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "v": v[idx]})
        path = os.path.join(directory, f"part-{f:04d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source's order
    return [t[idx] for idx in cuts]


def waiting(batches: list, delay: float | None, hosts: int) -> tuple[float, float]:
    """Mean and max rows waiting per key after each micro-batch: the rows
    seen so far whose time the watermark of that micro-batch (the newest time
    of the earlier ones minus ``delay``) has not passed."""
    import numpy as np

    if delay is None:
        return 0.0, 0.0
    seen, newest, counts = np.empty(0), None, []
    for times in batches:
        watermark = -np.inf if newest is None else newest - delay
        seen = np.concatenate([seen, times])
        seen = seen[seen > watermark]
        counts.append(len(seen) / hosts)
        newest = times.max() if newest is None else max(newest, times.max())
    return float(np.mean(counts)), float(np.max(counts))


def run(cfg: RunConfig) -> dict:
    from spark_ops import sliding_window

    p = PROFILES[cfg.profile]
    hosts, seconds, files, span = p["hosts"], p["seconds"], p["files"], p["range_s"]
    job = Run(NAME, cfg, {**p, "disorder": list(DISORDER), "master": sparkbench.MASTER})
    data = job.data
    data["machine"]["redis_server"] = storebench.redis_server_version()
    data["notes"] = [
        "Events/s = events / wall time of an availableNow query, one file per micro-batch, noop sink.",
        f"Per-reading max over the last {span} s; out of order: each reading arrives up to d after its time.",
        "Rows waiting per key: computed from the input and Spark's watermark rule, after each micro-batch.",
    ]
    records = data["records"] = []
    with sparkbench.spark_run(cfg, data, 4, "mta-bench-event-time-") as (spark, work):
        inputs = {}  # lag fraction -> (directory, each file's times)
        for lag in (0.0, *DISORDER):
            directory = os.path.join(work, f"in-{lag}")
            inputs[lag] = (directory, write_input(directory, *arrivals(hosts, seconds, lag * span), files))
        methods = [(BASELINE, 0.0, None)] + [(f"in order, watermark {d:.0%}", 0.0, d) for d in DISORDER[:1]] + \
                  [(f"out of order, {d:.0%}", d, d) for d in DISORDER]
        with storebench.backends(cfg, storebench.configured(cfg, ("redis",))) as backends:
            stores = [("file", None), ("redis", backends.urls.get("redis"))]
            _warm_up(spark, work)
            for repeat in range(p["repeats"]):
                for kind, redis_url in stores:
                    if kind == "redis" and redis_url is None:
                        continue
                    for method, lag, delay in methods:
                        url = redis_url or f"file://{work}/store-{repeat}-{len(records)}"
                        if redis_url:
                            _flush(redis_url)
                        source, batches = inputs[lag]
                        stream = (spark.readStream.schema("k int, ts timestamp, v double")
                                  .option("maxFilesPerTrigger", 1).parquet(source))
                        if delay is not None:
                            stream = stream.withWatermark("ts", f"{round(delay * span * 1000)} milliseconds")
                        out = sliding_window(stream, key="k", time="ts", value="v", aggs=["max"], range=span,
                                             store=url, name=f"bench-{len(records)}")
                        secs, state = run_query(out, os.path.join(work, f"ckpt-{len(records)}"), "append")
                        events = hosts * seconds
                        assert state["input_rows"] == events, (method, state, events)
                        mean_wait, max_wait = waiting(batches, None if delay is None else delay * span, hosts)
                        rec = {"store": kind, "method": method, "repeat": repeat, "lag_fraction": lag,
                               "watermark_fraction": delay, "events": events, "wall_s": secs,
                               "events_per_s": events / secs, "waiting_per_key_mean": mean_wait,
                               "waiting_per_key_max": max_wait, "load_average_before": os.getloadavg()[0], **state}
                        records.append(rec)
                        cfg.log(f"  spark-event-time {kind:<5} {method:<26} {rec['events_per_s']:>9,.0f} events/s "
                                f"({secs:.1f} s, {state['micro_batches']} batches, waiting per key "
                                f"{mean_wait:.0f} mean, {max_wait:.0f} max)")
                        job.save()
    data["summary"] = summarize(data)
    return job.finish(plot)


def emitted(rec: dict, config: dict) -> int:
    """The rows a query gave outputs for: with a watermark of d seconds, the
    rows within d of the newest time still wait for later rows when the
    input ends (each host has a reading at every whole second, so that is
    ceil(d) readings per host: a fractional d still holds back the reading
    floor(d) seconds old; d rounded first, as fraction x range can be
    360.00000000000006 for 360)."""
    if rec["watermark_fraction"] is None:
        return rec["events"]
    return rec["events"] - config["hosts"] * math.ceil(round(rec["watermark_fraction"] * config["range_s"], 6))


def _medians(data: dict) -> dict:
    out: dict = {}
    for r in data["records"]:
        out.setdefault((r["store"], r["method"]), []).append(r)
    return {key: {"events_per_s": statistics.median(x["events_per_s"] for x in recs),
                  "outputs_per_s": statistics.median(emitted(x, data["config"]) / x["wall_s"] for x in recs),
                  "waiting_per_key_mean": recs[0]["waiting_per_key_mean"],
                  "waiting_per_key_max": recs[0]["waiting_per_key_max"], "runs": len(recs)}
            for key, recs in out.items()}


def summarize(data: dict) -> dict:
    med = _medians(data)
    ratios = {}
    for (store, method), m in med.items():
        base = med.get((store, BASELINE))
        if base and method != BASELINE:
            ratios[f"{store}: {method}"] = m["outputs_per_s"] / base["outputs_per_s"]
    worst = min((v for k, v in ratios.items() if "out of order" in k), default=None)
    return {"ratio_to_in_order": ratios, "worst_out_of_order_ratio": worst, "target": ">= 0.7",
            "met": worst is not None and worst >= 0.7}


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    med = _medians(data)
    keys = list(med)
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(keys) + 1.8))
    ax.barh(range(len(keys)), [med[k]["outputs_per_s"] for k in keys],
            color=["tab:gray" if k[1] == BASELINE else "tab:blue" if "in order" in k[1] else "tab:red" for k in keys])
    ax.set_yticks(range(len(keys)), [f"{s}: {m}" for s, m in keys], fontsize=8)
    ax.invert_yaxis()
    ax.set_title("output rows per second, median of the runs (higher is better)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    save_figure(plt, fig, path, sparkbench.caption(data), bottom=0.08)


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    med = _medians(data)
    ratios = summarize(data)["ratio_to_in_order"]
    rows = [[store, method, f"{m['events_per_s']:,.0f}", f"{m['outputs_per_s']:,.0f}",
             "1.00" if method == BASELINE else f"{ratios.get(f'{store}: {method}', float('nan')):.2f}",
             f"{m['waiting_per_key_mean']:,.0f}", f"{m['waiting_per_key_max']:,.0f}", str(m["runs"])]
            for (store, method), m in med.items()]
    return [("", ["store", "method", "input rows/s", "output rows/s", "x in order", "rows waiting per key (mean)",
                  "(max)", "runs"],
             rows)]


def summary_lines(data: dict) -> list[str]:
    s = summarize(data)
    if s["worst_out_of_order_ratio"] is None:
        return []
    return [f"[ratio] out-of-order input gives {s['worst_out_of_order_ratio']:.2f}x or more of the in-order "
            f"output rows per second (target {s['target']}: {'met' if s['met'] else 'not met'})"]


def report(data: dict) -> str:
    c = data["config"]
    title = (f"Spark streaming with event time: per-reading max over the last {c['range_s']} s, "
             f"{c['hosts']} hosts x {c['seconds']:,} s")
    return sparkbench.report(title, data, tables(data), summary_lines(data))

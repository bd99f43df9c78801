"""Spark batch: several window sizes in one sliding_window call, and
periodic output (``slide=``) against Spark's hopping windows.

Same session, same cached data (:func:`bench.sparkbench.readings`: one
reading a second per key, so a time window of W seconds holds W rows):

* ``one call``: ``sliding_window(..., aggs=["max"], range=[W, W/2, ...])``
  with k = 2, 4, 8 sizes (the largest W), one shuffle, one sort and one
  pass per key, and ``range=W`` for k = 1 (today's call, the baseline); ``k calls joined``: one call per size, joined on (key,
  time), what a user without several sizes writes.  Both for the columnar
  engine (``engine="auto"``) and the Amortized MTA with the file store
  (``engine="amta"``, ``store="file:..."``).  Each job ends in the sum of
  every size's column (the checksum both must agree on).
* ``periodic``: ``sliding_window(..., aggs=["max", "count"], range=R,
  slide=R/60)`` (on panes, :mod:`spark_ops.periodic_panes`) against ``groupBy(k, window(ts, R, R/60)).agg(max, count)``,
  the same windows and outputs (the checksums: the sums of max and count).

Rows per second = input rows / the job's wall time (median of ``repeats``).
"""

from __future__ import annotations

import math
import statistics

from . import common, sparkbench
from .common import RunConfig, fmt_num
from .experiment import Run, save_figure, verdict

NAME = "spark-sizes"

PROFILES = {
    "full": dict(keys=8, rows_per_key=200_000, window=4096, ks=[1, 2, 4, 8], periodic_range=3600, repeats=3),
    "quick": dict(keys=4, rows_per_key=25_000, window=1024, ks=[1, 2, 4, 8], periodic_range=600, repeats=2),
    "tiny": dict(keys=2, rows_per_key=1_000, window=64, ks=[1, 2, 4], periodic_range=60),
}

ENGINES = {"columnar": dict(engine="auto"), "MTA, file store": dict(engine="amta")}
ONE, JOINED = "one call", "k calls joined"
OURS, SPARK = "sliding_window slide=", "Spark groupBy(window)"


def sizes(window: int, k: int) -> list[int]:
    """k sizes, the largest ``window``, each half the one before."""
    return [window >> i for i in range(k)]


def _one_call(df, ks, options):
    from pyspark.sql import functions as F

    from spark_ops import sliding_window

    if len(ks) == 1:  # one size as users give it today: range=W, column max
        out = sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=ks[0], **options)
        return out.withColumn("checksum", F.col("max") + F.lit(0.0))
    out = sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=ks, **options)
    return out.withColumn("checksum", sum((F.col(f"max_{w}") for w in ks), F.lit(0.0)))


def _joined(df, ks, options):
    from pyspark.sql import functions as F

    from spark_ops import sliding_window

    out = None
    for w in ks:
        one = sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=w, **options)
        one = one.select("k", "t", F.col("max").alias(f"max_{w}"))
        out = one if out is None else out.join(one, ["k", "t"])
    return out.withColumn("checksum", sum((F.col(f"max_{w}") for w in ks), F.lit(0.0)))


def _periodic_ours(df, r, s):
    from pyspark.sql import functions as F

    from spark_ops import sliding_window

    out = sliding_window(df, key="k", time="ts", value="v", aggs=["max", "count"], range=r, slide=s)
    return out.withColumn("checksum", F.col("max") + F.col("count"))


def _periodic_spark(df, r, s):
    from pyspark.sql import functions as F

    return (df.groupBy("k", F.window("ts", f"{r} seconds", f"{s} seconds"))
            .agg(F.max("v").alias("max"), F.count("v").alias("count"))
            .withColumn("checksum", F.col("max") + F.col("count")))


def run(cfg: RunConfig) -> dict:
    from pyspark.sql import functions as F

    sparkbench.ship_by_value(__name__)
    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "master": sparkbench.MASTER, "shuffle_partitions": p["keys"]})
    data = job.data
    r = p["periodic_range"]
    s = r // 60
    data["notes"] = [
        "Rows/s = input rows / the job's wall time; every job ends in the sum of a checksum column.",
        f"{p['keys']} keys x {p['rows_per_key']:,} rows, one reading a second per key; sizes W, W/2, W/4, ... "
        f"seconds with W = {p['window']:,}.",
        f"Periodic: range {r} s, slide {s} s (range/slide = 60), aggregations max and count; slide= runs them "
        "on panes (spark_ops.periodic_panes: Spark's partial aggregation per key and pane of the slide, then "
        "each key's windows from its panes).",
    ]
    records = data["records"] = []
    with sparkbench.spark_run(cfg, data, p["keys"], "mta-bench-state-") as (spark, state):
        rows = p["keys"] * p["rows_per_key"]

        def measure(record: dict, make) -> None:
            runs = []
            for _ in range(p.get("repeats", 1)):
                seconds, checksum, n = sparkbench.timed(make(), "checksum")
                runs.append(seconds)
            seconds = statistics.median(runs)
            records.append({**record, "rows": rows, "output_rows": n, "seconds": seconds, "seconds_each_run": runs,
                            "rows_per_s": rows / seconds, "checksum": checksum})
            cfg.log(f"  {NAME} {record} {rows / seconds:>10,.0f} rows/s ({seconds:.1f} s)")

        df = sparkbench.readings(spark, p["keys"], p["rows_per_key"])
        sparkbench.timed(_one_call(df, [p["window"]], dict(engine="auto")), "checksum")  # start the workers
        for engine, options in ENGINES.items():
            if options["engine"] == "amta":
                options = dict(options, store=f"file://{state}")
            for k in p["ks"]:
                ks = sizes(p["window"], k)
                measure({"part": "sizes", "engine": engine, "k": k, "method": ONE},
                        lambda: _one_call(df, ks, options))
                measure({"part": "sizes", "engine": engine, "k": k, "method": JOINED},
                        lambda: _joined(df, ks, options))
                job.save()
        timed_df = df.withColumn("ts", F.timestamp_seconds("t")).cache()
        timed_df.count()
        for method, make in ((OURS, _periodic_ours), (SPARK, _periodic_spark)):
            measure({"part": "periodic", "method": method, "range": r, "slide": s}, lambda: make(timed_df, r, s))
        job.save()
    return sparkbench.finish_checked(job, plot, checksums_agree, summarize)


def checksums_agree(records) -> bool:
    """One call and k calls joined agree per (engine, k); so do all engines
    at each k; the periodic methods agree on sums and window counts."""
    groups: dict = {}
    for rec in records:
        key = ("sizes", rec["k"]) if rec["part"] == "sizes" else ("periodic",)
        groups.setdefault(key, []).append((rec["checksum"], rec["output_rows"]))
    return all(math.isclose(c, v[0][0], rel_tol=1e-9) and n == v[0][1] for v in groups.values() for c, n in v)


def _rate(data, **match):
    for rec in data["records"]:
        if all(rec.get(k) == v for k, v in match.items()):
            return rec["rows_per_s"]
    return None


def summarize(data: dict) -> dict:
    """The issue's targets: four sizes in one call cost at most 1.5x one
    size; periodic output at least 5x Spark's hopping windows."""
    out: dict = {}
    for engine in ENGINES:
        one, four = _rate(data, engine=engine, k=1, method=ONE), _rate(data, engine=engine, k=4, method=ONE)
        if one and four:
            out[f"{engine}_4_sizes_cost"] = {"ratio": one / four, "target": "<= 1.5", "met": one / four <= 1.5}
    ours, spark = _rate(data, method=OURS), _rate(data, method=SPARK)
    if ours and spark:
        out["periodic_vs_spark"] = {"ratio": ours / spark, "target": ">= 5", "met": ours / spark >= 5}
    return out


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    ks = data["config"]["ks"]
    head = ["engine, method"] + [f"k={k}" for k in ks] + ["k=1 / k=max (one call)"]
    rows = []
    for engine in ENGINES:
        for method in (ONE, JOINED):
            rates = [_rate(data, engine=engine, k=k, method=method) for k in ks]
            ratio = f"{rates[0] / rates[-1]:.2f}" if method == ONE and rates[0] and rates[-1] else "-"
            rows.append([f"{engine}, {method}"] + [fmt_num(v) for v in rates] + [ratio])
    periodic = [[m, fmt_num(_rate(data, method=m))] for m in (OURS, SPARK)]
    return [("window sizes per call, rows/s", head, rows), ("periodic output (range/slide = 60), rows/s",
                                                             ["method", "rows/s"], periodic)]


def summary_lines(data: dict) -> list[str]:
    lines = [f"checksums agree: {'yes' if data.get('checksums_agree') else 'NO'}"]
    for key, v in (data.get("summary") or summarize(data)).items():
        lines.append(f"[target] {key}: {v['ratio']:.2f}, target {v['target']}: {verdict(v['met'])}")
    return lines


report = sparkbench.reporter("Spark batch, several window sizes and periodic output", tables, summary_lines)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for engine in ENGINES:
        for method in (ONE, JOINED):
            pts = sorted((rec["k"], rec["rows_per_s"]) for rec in data["records"]
                         if rec.get("engine") == engine and rec["method"] == method)
            ax.plot([k for k, _ in pts], [v for _, v in pts], marker="o", label=f"{engine}, {method}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("window sizes k")
    ax.set_ylabel("rows per second (higher is better)")
    ax.set_title("k window sizes: one call against k calls joined", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(plt, fig, path, sparkbench.caption(data))

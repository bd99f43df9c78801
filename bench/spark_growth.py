"""Spark batch: per-row cost and executor memory as the window grows 100x.

``sliding_window(..., aggs=["max", "mean", "stddev"], range=W, engine="amta")`` over keys
whose rows span twice the window, for W from the profile's smallest to 100
times it, with the windows in process memory, in the file store and in
Redis (a private ``redis-server`` started for the run).  Each (store, W)
runs in a fresh Spark session, so that the Python workers start empty; a
thread samples their resident memory (psutil) every 0.1 s.

Reported: rows per second, the peak resident memory of the largest Python
worker, and the ratios between the largest and the smallest window.  With a
store, a worker holds O(log W) of each window (levels x (buffer + cache)), so
its memory should not grow with W; in process memory it holds the window.
"""

from __future__ import annotations


from . import common, sparkbench, storebench
from .common import RunConfig
from .experiment import Run, report_text, save_figure, verdict

NAME = "spark-growth"

PROFILES = {
    "full": dict(windows=[10_000, 100_000, 1_000_000], keys=2, window_multiple=2),
    "quick": dict(windows=[2_000, 20_000, 200_000], keys=2, window_multiple=2),
    "tiny": dict(windows=[50, 500], keys=2, window_multiple=2),
}
AGGS = ["max", "mean", "stddev"]
STORES = ["memory", "file", "redis"]


def run(cfg: RunConfig) -> dict:
    from spark_ops import sliding_window

    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "aggs": AGGS, "stores": STORES, "master": sparkbench.MASTER,
                          "buffer_size": 512, "cache_size": 512})
    data = job.data
    data["machine"]["redis_server"] = storebench.redis_server_version()
    data["notes"] = [
        "One key per core (2 tasks at a time), rows per key = 2 W, one reading a second, range = W seconds.",
        "Each (store, W) runs in a fresh Spark session; peak RSS of the largest Python worker, sampled every 0.1 s.",
        "Rows/s = rows / wall time of the job (its output consumed by sum(max)).",
    ]
    records = data["records"] = []
    with storebench.backends(cfg, storebench.configured(cfg, ("redis", "file"))) as backends:
        urls = {"memory": None, **backends.urls}
        data["stores"] = backends.info
        for store in (s for s in STORES if s in urls):  # the stores --stores leaves out are not run
            for w in p["windows"]:
                spark = sparkbench.session(cfg, p["keys"])
                data.setdefault("spark", sparkbench.spark_versions(spark))
                per_key = p["window_multiple"] * w
                df = sparkbench.readings(spark, p["keys"], per_key)
                sparkbench.timed(sliding_window(df.limit(10), key="k", time="t", value="v", aggs=AGGS,
                                                range=w), "max")  # start the workers
                out = sliding_window(df, key="k", time="t", value="v", aggs=AGGS, range=w, store=urls[store],
                                     engine="amta")  # the MTA: a batch job's windows are in the store only there
                with sparkbench.WorkerMemory() as mem:
                    seconds, checksum, n = sparkbench.timed(out, "max")
                spark.stop()
                rec = {"store": store, "window": w, "rows": n, "seconds": seconds, "rows_per_s": n / seconds,
                       "checksum": checksum,
                       "peak_worker_mb": round(mem.peak_worker_mb, 1),
                       "peak_workers_total_mb": round(mem.peak_total_mb, 1)}
                records.append(rec)
                cfg.log(f"  spark-growth {store:<6} W={w:>9,} {rec['rows_per_s']:>9,.0f} rows/s  "
                        f"peak worker {rec['peak_worker_mb']:>7.1f} MB  ({seconds:.1f} s)")
                job.save()
    return job.finish(plot, summary=summarize, checksums_agree=lambda d: checksums_agree(d["records"]))


def checksums_agree(records) -> dict:
    """Per W, whether every store gave the same row count and sum(max)
    (``common.sums_agree``); None for a W whose records kept no checksum."""
    by_w: dict = {}
    for r in records:
        if "checksum" in r:
            by_w.setdefault(r["window"], []).append((r["rows"], r["checksum"]))
    return {w: common.sums_agree(pairs) for w, pairs in by_w.items()}


def _by_store(data) -> dict:
    out: dict = {}
    for r in data["records"]:
        out.setdefault(r["store"], {})[r["window"]] = r
    return out


def summarize(data: dict) -> dict:
    s = {}
    for store, recs in _by_store(data).items():
        small, large = recs[min(recs)], recs[max(recs)]
        cost = small["rows_per_s"] / large["rows_per_s"]  # per-row cost, largest over smallest window
        memory = large["peak_worker_mb"] / small["peak_worker_mb"]
        s[store] = {"windows": f"{min(recs):,}..{max(recs):,}", "per_row_cost_ratio": cost,
                    "peak_worker_mb_ratio": memory,
                    "cost_target": "<= 1.5", "cost_met": cost <= 1.5}
        if store != "memory":
            s[store].update(memory_target="<= 1.1 (flat)", memory_met=memory <= 1.1)
    return s


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    rows = [[r["store"], f"{r['window']:,}", f"{r['rows']:,}", f"{r['rows_per_s']:,.0f}",
             f"{1e6 / r['rows_per_s']:.1f}", f"{r['peak_worker_mb']:.1f}"] for r in data["records"]]
    return [("", ["store", "W", "rows", "rows/s", "us/row (wall, 2 cores)", "peak worker MB"], rows)]


def summary_lines(data: dict) -> list[str]:
    lines = []
    for store, v in (data.get("summary") or summarize(data)).items():
        line = (f"[target] {store}: per-row cost largest/smallest W ({v['windows']}) = "
                f"{v['per_row_cost_ratio']:.2f}, target {v['cost_target']}: {verdict(v['cost_met'])}; "
                f"peak worker memory ratio {v['peak_worker_mb_ratio']:.2f}")
        if "memory_met" in v:
            line += f", target {v['memory_target']}: {verdict(v['memory_met'])}"
        lines.append(line)
    agree = checksums_agree(data["records"])
    if agree:  # results recorded before the checksums were kept have none
        lines.append("checksums (rows, sum(max)) of the stores agree, per W: "
                     + ", ".join(f"{w:,} {'?' if ok is None else 'yes' if ok else 'NO'}" for w, ok in agree.items()))
    return lines


def report(data: dict) -> str:
    head = (f"Spark batch, {', '.join(AGGS)} over time windows: cost and worker memory as W grows "
            f"({data['profile']} profile, {sparkbench.MASTER})")
    return report_text([head, common.render_tables(tables(data)), "", *summary_lines(data)], data)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for store, recs in _by_store(data).items():
        ws = sorted(recs)
        axes[0].plot(ws, [1e6 / recs[w]["rows_per_s"] for w in ws], marker="o", label=store)
        axes[1].plot(ws, [recs[w]["peak_worker_mb"] for w in ws], marker="o", label=store)
    for ax, label in zip(axes, ("microseconds per row (wall, 2 cores)", "peak RSS of a Python worker (MB)")):
        ax.set_xscale("log")
        ax.set_xlabel("rows per window W")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, title="windows in")
    axes[0].set_title("per-row cost", fontsize=10)
    axes[1].set_title("executor (Python worker) memory", fontsize=10)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]))

"""Latency distribution (DABA paper Table 2 / Fig. 18 bottom analogue).

A constant window of ``N = 2^14`` elements (count monoid and count WSP as in
:mod:`bench.exp1`); after an untimed fill, every one of ``M`` updates
(``engine.push(1)`` = insert + enforce + query, the DABA paper's round of
evict, insert, query) is timed on its own with ``time.perf_counter_ns``.
Reported: mean, standard deviation, p50, p99, p99.9, p99.99 and max, and
how many updates took over 10x the median ("spikes": Two-Stacks' flip,
FlatFIT's pointer resets, the AMTA's O(log n) leftmost-tree rebuilds).
The timer's own overhead (two back-to-back perf_counter_ns reads plus the
store) is measured and reported, not subtracted.
"""

from __future__ import annotations

import gc
import math
import time
from array import array
from itertools import repeat

from . import common
from .common import RunConfig, fmt_ns, fmt_ratio, pow2
from .engines import applicable, class_name
from .exp1 import COUNT, SizeWSP
from .experiment import Run, report_text, save_figure

NAME = "latency"

PROFILES = {
    # Recalc is O(N) per update: it gets only recalc_m updates
    "full": dict(log2_n=14, m=1 << 20, recalc_m=1 << 15),
    "quick": dict(log2_n=14, m=1 << 15, recalc_m=1 << 12),
    "tiny": dict(log2_n=8, m=1 << 10, recalc_m=1 << 8),
}

PERCENTILES = (50, 90, 99, 99.9, 99.99)
#: Rounds kept for the time-series plot.
SERIES = 3 << 14


def percentile(sorted_values, q: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not sorted_values:
        return math.nan
    i = min(len(sorted_values) - 1, max(0, math.ceil(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[i])


def timer_overhead(m: int = 1 << 16) -> float:
    lat = array("q", bytes(8 * m))
    pc = time.perf_counter_ns
    for i in range(m):
        t0 = pc()
        lat[i] = pc() - t0
    return percentile(sorted(lat), 50)


def run(cfg: RunConfig) -> dict:
    p = PROFILES[cfg.profile]
    n, m = 1 << p["log2_n"], p["m"]
    specs, skipped = applicable(COUNT, cfg.engines)
    wsp = SizeWSP(n)
    job = Run(NAME, cfg, {
        "window": n, "updates": m, "recalc_updates": p["recalc_m"],
        "monoid": "count: int +, identity 0, inverse - (as exp1)",
        "wsp": f"total - prefix >= {n}",
        "operation": "engine.push(1) timed individually with time.perf_counter_ns after an untimed fill",
        "timer_overhead_p50_ns": timer_overhead(),
    })
    data = job.data
    data["engines"] = {s.name: s.description for s in specs}
    data["skipped_engines"] = skipped
    data["notes"] = ["Per-update times include the timer overhead (config.timer_overhead_p50_ns).",
                     f"Recalc (O(N) per update) is timed over {p['recalc_m']} updates only."]
    job.gc_note("The cyclic garbage collector is off during the timed loop.")
    records = data["records"] = []
    series = {}
    for spec in specs:
        try:
            rec, head = measure(spec, n, p["recalc_m"] if spec.name == "Recalc" else m, wsp, cfg)
        except Exception as exc:
            records.append({"engine": spec.name, "error": repr(exc)})
            cfg.log(f"  latency {spec.name:<16} ERROR {exc!r}")
            continue
        records.append(rec)
        series[spec.name] = head
        cfg.log(f"  latency N={pow2(n)} {spec.name:<16} mean {fmt_ns(rec['mean_ns'])}  p50 {fmt_ns(rec['p50_ns'])}  "
                f"p99 {fmt_ns(rec['p99_ns'])}  p99.9 {fmt_ns(rec['p99.9_ns'])}  max {fmt_ns(rec['max_ns'])}")
    return job.finish(lambda d, path: plot(d, series, path))


def measure(spec, n, m, wsp, cfg):
    lat = array("q", bytes(8 * m))
    pc = time.perf_counter_ns
    with common.gc_paused(cfg):
        engine = spec.build(COUNT, wsp)
        common.fill(engine, repeat(1, n))
        push = engine.push
        c0, w0 = time.thread_time_ns(), pc()
        for i in range(m):
            t0 = pc()
            push(1)
            lat[i] = pc() - t0
        loop_wall, loop_cpu = pc() - w0, time.thread_time_ns() - c0
        assert len(engine) == n
        cls = class_name(engine)
        del engine, push
    gc.collect()
    s = sorted(lat)
    mean = sum(s) / m
    var = sum((x - mean) ** 2 for x in s) / m
    med = percentile(s, 50)
    rec = {"engine": spec.name, "class": cls, "updates": m, "mean_ns": mean, "stdev_ns": math.sqrt(var),
           "min_ns": float(s[0]), "max_ns": float(s[-1]),
           "spikes_over_10x_median": sum(1 for x in s if x > 10 * med),
           "loop_wall_over_cpu": loop_wall / loop_cpu if loop_cpu else None}
    for q in PERCENTILES:
        rec[f"p{q:g}_ns"] = percentile(s, q)
    # the CCDF for the plot, thinned: (latency, fraction of updates slower)
    idx = sorted({min(m - 1, int(m - m / 10 ** (e / 20))) for e in range(0, int(20 * math.log10(m)) + 1)})
    rec["ccdf"] = [[float(s[i]), (m - i) / m] for i in idx]
    return rec, lat[:SERIES]


def report(data: dict) -> str:
    recs = [r for r in data["records"] if "error" not in r]
    n = data["config"]["window"]
    lines = [f"Latency distribution per update, window {pow2(n)}, {data['config']['updates']} updates, "
             f"{data['profile']} profile (timer overhead ~{data['config']['timer_overhead_p50_ns']:.0f} ns)"]
    head = ["engine", "updates", "mean", "stdev", "p50", "p99", "p99.9", "p99.99", "max", ">10x p50"]
    rows = [[r["engine"], str(r["updates"]), fmt_ns(r["mean_ns"]), fmt_ns(r["stdev_ns"]), fmt_ns(r["p50_ns"]), fmt_ns(r["p99_ns"]),
             fmt_ns(r["p99.9_ns"]), fmt_ns(r["p99.99_ns"]), fmt_ns(r["max_ns"]), str(r["spikes_over_10x_median"])]
            for r in recs]
    lines.append(common.table(head, rows))
    by = {r["engine"]: r for r in recs}
    a = by.get("AMTA")
    if a:
        lines.append("")
        rows = []
        for other in ("DABA", "TwoStacks", "LMTA", "SlickDeque"):
            o = by.get(other)
            if o:
                rows.append([f"AMTA/{other}"] + [fmt_ratio(a[k], o[k]) for k in
                                                 ("mean_ns", "p50_ns", "p99_ns", "p99.9_ns", "max_ns")])
        lines.append(common.table(["ratio", "mean", "p50", "p99", "p99.9", "max"], rows))
    return report_text(lines, data)


def plot(data: dict, series: dict, path) -> None:
    plt = common.pyplot()
    recs = [r for r in data["records"] if "error" not in r]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for r in recs:
        color, marker = common.STYLE.get(r["engine"], (None, "o"))
        xs = [c[0] / 1e3 for c in r["ccdf"]]
        ys = [c[1] for c in r["ccdf"]]
        ax1.step(xs, ys, where="post", color=color, label=r["engine"])
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("latency per update (us)")
    ax1.set_ylabel("fraction of updates slower (CCDF)")
    ax1.set_title(f"Latency distribution, window {pow2(data['config']['window'])}")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8, ncol=2)
    for name in ("TwoStacks", "FlatFIT", "DABA", "AMTA"):
        if name in series:
            color, _ = common.STYLE.get(name, (None, "o"))
            s = series[name]
            ax2.plot(range(len(s)), [x / 1e3 for x in s], ".", ms=1.5, color=color, label=name, alpha=0.6)
    ax2.set_yscale("log")
    ax2.set_xlabel("update number")
    ax2.set_ylabel("latency (us)")
    ax2.set_title("per-update latency, first rounds (cf. DABA paper Fig. 18)")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8, markerscale=8)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]), dpi=110)

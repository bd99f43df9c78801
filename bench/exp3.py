"""Experiment 3 (MTA paper Table 2): stream analytics latency.

A synthetic memory-usage stream (:func:`bench.streams.memory_usage_stream`,
one reading per second) is aggregated with sum, mean, geometric mean,
standard deviation, max and the longest increasing run, over a COUNT
window of at most ``N`` readings (the paper's "the window contains at most
2^20 elements"; ``N`` readings is about 12 days at one per second).  Max
additionally evicts everything older than the window's maximum
(:class:`mta.policies.OlderThanMax`), the longest run everything older than
the run's start -- both cut the window with bulk evictions.

Each engine runs the monoid a :class:`mta.window.Window` would build:
``product_monoid([aggregation, count])`` with the WSP on the count
dimension (``mta.policies.Count(N).holds``), OR-ed for max with
``OlderThanMax().holds`` read on the aggregation's own max dimension and
for the run with ``prefix.length <= total.best_start``.  Inputs are lifted
beforehand (the same for every engine), so the timing is ``engine.push``
only.  Each engine is filled with the first ``N`` readings (pushes, not
timed), then ``M`` pushes are timed (``M = N``: a full window cycle), unless
the per-run time budget runs out first (Recalc: O(N) per eviction).
"""

from __future__ import annotations

import gc
import math
import time

from mta.aggregators import BY_NAME
from mta.monoid import product_monoid
from mta.policies import COUNT_MONOID, Count, OlderThanMax
from .streams import memory_usage_stream

from . import common
from .common import RunConfig, fmt_ns, fmt_ratio, pow2
from .engines import applicable, class_name
from .experiment import Run, report_text, save_figure

NAME = "exp3"

PROFILES = {
    "full": dict(log2_n=20, budget_s=60.0),
    "quick": dict(log2_n=14, budget_s=3.0),
    "tiny": dict(log2_n=8, budget_s=0.5),
}

#: (label, BY_NAME key, extra policy)
AGGREGATIONS = [
    ("sum", "sum", None),
    ("mean", "mean", None),
    ("geomean", "geomean", None),
    ("stddev", "stddev", None),
    ("max", "max", "older-than-max"),
    ("longest_run", "longest_run", "keep-run"),
]


def make_wsp(extra: str | None, n: int):
    """The WSP over ``(aggregation, count)`` values."""
    cap = Count(n).holds

    if extra is None:
        def wsp(total, prefix):
            return cap(total[1], prefix[1])
    elif extra == "older-than-max":
        older = OlderThanMax().holds

        def wsp(total, prefix):
            return cap(total[1], prefix[1]) or older(total[0], prefix[0])
    elif extra == "keep-run":
        def wsp(total, prefix):
            # prefix.length <= start of the (oldest) longest run: the prefix is before the run
            return cap(total[1], prefix[1]) or prefix[0][0] <= total[0][6]
    else:
        raise ValueError(extra)
    return wsp


def run(cfg: RunConfig) -> dict:
    p = PROFILES[cfg.profile]
    n = 1 << p["log2_n"]
    m = n
    job = Run(NAME, cfg, {
        "window": n, "updates": m, "budget_s_per_run": p["budget_s"],
        "stream": f"bench.streams.memory_usage_stream({n + m}, seed=0): (t, MB) one per second, values used",
        "window_kind": f"count window of at most {n} readings (~{n / 86400:.1f} days at 1/s)",
        "monoid": "product_monoid([aggregation.monoid, COUNT_MONOID]) (as mta.window.Window builds it)",
        "policies": {"default": f"Count({n})", "max": f"Count({n}) | OlderThanMax() (on the max dimension)",
                     "longest_run": f"Count({n}) | evict prefix while prefix.length <= run start"},
        "operation": "engine.push(pre-lifted value) = insert + enforce + query; fill with N pushes untimed",
    })
    data = job.data
    data["notes"] = [
        f"Each (aggregation, engine) run times M = {m} pushes after the fill, or fewer if its timed "
        f"updates exceed {p['budget_s']} s (reported as 'updates').",
        "Lifting is done before timing and is identical for all engines.",
    ]
    job.gc_note()
    cfg.log(f"  exp3 generating {n + m} readings ...")
    readings = [v for _, v in memory_usage_stream(n + m, seed=0)]
    data["config"]["stream_stats"] = {"min": min(readings), "max": max(readings),
                                      "mean": round(sum(readings) / len(readings), 1)}
    records = data["records"] = []
    data["skipped_engines"] = {}
    data["engines"] = {}
    for label, key, extra in AGGREGATIONS:
        agg = BY_NAME[key]
        monoid = product_monoid([agg.monoid, COUNT_MONOID])
        wsp = make_wsp(extra, n)
        specs, skipped = applicable(monoid, cfg.engines)
        data["skipped_engines"][label] = skipped
        lift = agg.lift
        values = [(lift(v), 1) for v in readings]
        for spec in specs:
            data["engines"].setdefault(spec.name, spec.description)
            try:
                rec = measure(spec, monoid, wsp, values, n, m, p["budget_s"], cfg)
            except Exception as exc:  # a broken engine must not stop the others
                records.append({"aggregation": label, "engine": spec.name, "error": repr(exc)})
                cfg.log(f"  exp3 {label:<12} {spec.name:<16} ERROR {exc!r}")
                continue
            rec["aggregation"] = label
            rec["result"] = _jsonable(agg.lower(rec.pop("final")[0]))
            records.append(rec)
            cfg.log(f"  exp3 {label:<12} {spec.name:<16} {fmt_ns(rec['mean_ns']):>10}/update  "
                    f"({rec['updates']} updates, mean window {rec['mean_window']:.0f}, "
                    f"evicted {rec['evicted']}, fill {rec['fill_s']:.1f} s)")
        del values
        gc.collect()
        job.save()
    return job.finish(plot, summary=summarize)


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    return x


def measure(spec, monoid, wsp, values, n, m, budget_s, cfg) -> dict:
    with common.gc_paused(cfg):
        engine = spec.build(monoid, wsp)
        fill_ns = common.push_all(engine, values[:n])
        before = len(engine)
        sizes = 0
        # time in slices so the mean window size can be sampled without timing it
        updates = ns = cpu_ns = 0
        step = 1 << 12
        deadline = time.perf_counter() + budget_s
        while updates < m:
            chunk = values[n + updates: n + min(m, updates + step)]
            done, t, c = common.time_pushes(engine, chunk, len(chunk), budget_s=max(deadline - time.perf_counter(), 0))
            updates += done
            ns += t
            cpu_ns += c
            sizes += len(engine) * done
            if done < len(chunk) or time.perf_counter() > deadline:
                break
        after = len(engine)
        final = engine.query()
        cls = class_name(engine)
        del engine
    gc.collect()
    return {"engine": spec.name, "class": cls, "updates": updates, "complete": updates == m,
            "mean_ns": ns / updates, "mean_cpu_ns": cpu_ns / updates, "fill_s": fill_ns / 1e9, "window_after_fill": before,
            "window_at_end": after, "mean_window": sizes / updates,
            "evicted": before + updates - after, "final": final}


# -- summary, table, plot ------------------------------------------------------

def grid(data: dict) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in data["records"]:
        if "error" not in r:
            out.setdefault(r["aggregation"], {})[r["engine"]] = r
    return out


def summarize(data: dict) -> dict:
    g = grid(data)
    s: dict = {"amta_over": {}, "amta_over_cpu": {}, "results_agree": {}}
    for label, recs in g.items():
        a = recs.get("AMTA")
        if a:
            s["amta_over"][label] = {e: a["mean_ns"] / r["mean_ns"] for e, r in recs.items() if e != "AMTA"}
            s["amta_over_cpu"][label] = {e: a["mean_cpu_ns"] / r["mean_cpu_ns"] for e, r in recs.items() if e != "AMTA"}
        finals = [r["result"] for r in recs.values() if r["complete"]]
        s["results_agree"][label] = all(_close(finals[0], f) for f in finals[1:]) if finals else None
    return s


def _close(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
        except TypeError:
            return False
    return a == b


def engine_order(data: dict) -> list[str]:
    g = grid(data)
    seen: list[str] = []
    for recs in g.values():
        for e in recs:
            if e not in seen:
                seen.append(e)
    from .engines import ENGINES

    return [e for e in ENGINES if e in seen]


def report(data: dict) -> str:
    g = grid(data)
    names = engine_order(data)
    n = data["config"]["window"]
    lines = [f"Experiment 3 (Table 2): mean latency per update, count window of {pow2(n)} readings, "
             f"{data['profile']} profile"]
    head = ["aggregation"] + names + ["AMTA/DABA", "AMTA/2Stk", "AMTA/LMTA"]
    rows = []
    for label, recs in g.items():
        def ns(e):
            r = recs.get(e)
            if r is None:
                return "n/a"
            return fmt_ns(r["mean_ns"]) + ("" if r["complete"] else "*")
        a = recs.get("AMTA", {}).get("mean_ns")
        rows.append([label] + [ns(e) for e in names]
                    + [fmt_ratio(a, recs.get(x, {}).get("mean_ns")) for x in ("DABA", "TwoStacks", "LMTA")])
    lines.append(common.table(head, rows))
    lines.append("* = stopped by the time budget before M updates; n/a = monoid not supported by the engine")
    lines.append("")
    lines.append("CPU time per update (thread_time_ns)")
    rows = []
    for label, recs in g.items():
        a = recs.get("AMTA", {}).get("mean_cpu_ns")
        rows.append([label] + [fmt_ns(recs[e]["mean_cpu_ns"]) if e in recs else "n/a" for e in names]
                    + [fmt_ratio(a, recs.get(x, {}).get("mean_cpu_ns")) for x in ("DABA", "TwoStacks", "LMTA")])
    lines.append(common.table(head, rows))
    lines.append("")
    lines.append("Mean window size during the timed updates / elements evicted")
    rows = []
    for label, recs in g.items():
        some = next(iter(recs.values()))
        rows.append([label, f"{some['mean_window']:.0f}", str(some["evicted"]), str(some["result"])[:60]])
    lines.append(common.table(["aggregation", "mean window", "evicted", "final result (AMTA or first engine)"], rows))
    s = data.get("summary") or summarize(data)
    bad = [k for k, v in s["results_agree"].items() if v is False]
    lines.append("Final results agree across engines that completed: " + ("yes" if not bad else "NO for " + ", ".join(bad)))
    return report_text(lines, data)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    g = grid(data)
    names = engine_order(data)
    labels = list(g)
    fig, axes = plt.subplots(1, 2, figsize=(18, 5.2))
    width = 0.8 / max(len(names), 1)
    for ax, key, ylabel in ((axes[0], "mean_ns", "mean wall time per update (us)"),
                            (axes[1], "mean_cpu_ns", "CPU time per update (us)")):
        for j, e in enumerate(names):
            color, _ = common.STYLE.get(e, (None, "o"))
            xs, ys = [], []
            for i, label in enumerate(labels):
                r = g[label].get(e)
                if r is not None:
                    xs.append(i + (j - (len(names) - 1) / 2) * width)
                    ys.append(r[key] / 1e3)
            ax.bar(xs, ys, width=width, color=color, label=e)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].set_title(f"Exp. 3: memory-usage stream, count window of {pow2(data['config']['window'])}, wall", fontsize=10)
    axes[1].set_title("CPU time (thread_time)", fontsize=10)
    axes[0].legend(fontsize=8, ncol=3)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]))

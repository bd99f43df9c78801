"""Experiment 1 (MTA paper Fig. 6): constant-size window latency.

For each window size ``N = 2^k`` and each engine: fill the window with
``N`` inserts (not timed), then time ``M`` updates, each ``engine.push(1)``
= insert + enforce + query, under a count WSP that keeps the newest ``N``.
``M = max(N, M_min)``: as in the paper, at least one full cycle (every
element of the fill leaves), so amortized costs (Two-Stacks' flip, the
AMTA's leftmost-tree rebuilds) are counted in their true proportion.  A
second, untimed run with :class:`~mta.monoid.CountingMonoid` counts monoid
calls (combine + inverse) per update.

Monoid: count (``int +``, inverse ``-``): the paper's Listing 2 with its
constant ``maxSize`` moved into the WSP, ``total - prefix >= N`` (Listing 3,
:class:`mta.policies.Count`).  It is invertible, so every engine runs it
(SlickDeque as its Inv variant).
"""

from __future__ import annotations

import gc
import math
import operator
from itertools import repeat

from mta.monoid import CountingMonoid, Monoid

from . import common
from .common import RunConfig, fmt_ns, fmt_num, fmt_ratio, pow2
from .engines import applicable, class_name
from .experiment import Run, report_text, save_figure, verdict

NAME = "exp1"

PROFILES = {
    #            sizes (log2)                    M_min    Recalc max size, Recalc M_min
    "full": dict(log2_sizes=list(range(0, 23)), m_min=1 << 16, recalc_max=1 << 12, recalc_m_min=1 << 12),
    "quick": dict(log2_sizes=[0, 4, 8, 11, 14], m_min=1 << 13, recalc_max=1 << 11, recalc_m_min=1 << 11),
    "tiny": dict(log2_sizes=[0, 4, 8], m_min=1 << 9, recalc_max=1 << 8, recalc_m_min=1 << 8),
}

COUNT = Monoid(operator.add, 0, name="count", inverse=operator.sub, commutative=True)


class SizeWSP:
    """``total - prefix >= n``: keep the newest ``n`` (Listing 3).  ``n`` is
    set per window size; one object is shared by every engine."""

    __slots__ = ("n",)

    def __init__(self, n: int = 1) -> None:
        self.n = n

    def __call__(self, total, prefix) -> bool:
        return total - prefix >= self.n


def updates_for(n: int, m_min: int) -> int:
    return max(n, m_min)


def run(cfg: RunConfig) -> dict:
    p = PROFILES[cfg.profile]
    sizes = [1 << k for k in p["log2_sizes"]]
    specs, skipped = applicable(COUNT, cfg.engines)
    wsp = SizeWSP()
    job = Run(NAME, cfg, {
        "sizes": sizes,
        "updates_per_size": {str(n): updates_for(n, p["m_min"]) for n in sizes},
        "m_min": p["m_min"],
        "recalc_max_size": p["recalc_max"],
        "recalc_updates_per_size": {str(n): updates_for(n, p["recalc_m_min"]) for n in sizes if n <= p["recalc_max"]},
        "monoid": "count: int +, identity 0, inverse - (Listing 2 with maxSize in the WSP)",
        "wsp": "total - prefix >= N (Listing 3; mta.policies.Count(N))",
        "value": "every update is the int 1",
        "operation": "engine.push(1) = insert + enforce + query, after an untimed fill of N inserts",
        "harness_overhead_ns": round(common.harness_overhead_ns(), 1),
    })
    data = job.data
    data["engines"] = {s.name: {"description": s.description, "complexity": s.complexity} for s in specs}
    data["skipped_engines"] = skipped
    notes = [
        f"M = max(N, {p['m_min']}) timed updates per size: at least one full window cycle.",
        f"Recalc is O(N) per update: only sizes <= {pow2(p['recalc_max'])} ({p['recalc_max']}), "
        f"with M = max(N, {p['recalc_m_min']}).",
        "Monoid calls come from a separate run with CountingMonoid (not timed).",
    ]
    data["notes"] = notes
    job.gc_note()
    records = data["records"] = []
    for n in sizes:
        wsp.n = n
        for spec in specs:
            is_recalc = spec.name == "Recalc"
            if is_recalc and n > p["recalc_max"]:
                continue
            m = updates_for(n, p["recalc_m_min"] if is_recalc else p["m_min"])
            try:
                rec = measure(spec, COUNT, wsp, n, m, cfg)
            except Exception as exc:  # a broken engine must not stop the others
                records.append({"engine": spec.name, "size": n, "error": repr(exc)})
                cfg.log(f"  exp1 N={pow2(n):>5} {spec.name:<16} ERROR {exc!r}")
                continue
            records.append(rec)
            cfg.log(f"  exp1 N={pow2(n):>5} {spec.name:<16} {rec['mean_ns']:>10.0f} ns/update  "
                    f"{rec['calls_per_update']:>7.3f} calls/update  (M={m}, fill {rec['fill_ns_per_insert']:.0f} ns/insert)")
        job.save()
    return job.finish(plot, summary=lambda d: summarize(d, "mean_ns"),
                      summary_cpu=lambda d: summarize(d, "mean_cpu_ns"))


def measure(spec, monoid, wsp, n: int, m: int, cfg: RunConfig) -> dict:
    # timing run
    with common.gc_paused(cfg):
        engine = spec.build(monoid, wsp)
        fill_ns = common.fill(engine, repeat(1, n))
        updates, ns, cpu_ns = common.time_pushes(engine, repeat(1), m)
        assert len(engine) == n, f"{spec.name}: window has {len(engine)} elements, expected {n}"
        result = engine.query()
        cls = class_name(engine)
        del engine
    # counting run
    counting = CountingMonoid(monoid)
    with common.gc_paused(cfg):
        engine = spec.build(counting, wsp)
        common.fill(engine, repeat(1, n))
        fill_calls = counting.reset()
        push = engine.push
        for _ in repeat(None, m):
            push(1)
        calls = counting.reset()
        del engine, push
    gc.collect()
    return {
        "engine": spec.name, "class": cls, "size": n, "updates": updates,
        "mean_ns": ns / updates, "mean_cpu_ns": cpu_ns / updates, "calls_per_update": calls / m,
        "fill_ns_per_insert": fill_ns / n, "fill_calls_per_insert": fill_calls / n,
        "result": result,
    }


# -- summary, table, plot ------------------------------------------------------

def by_engine(data: dict) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for r in data["records"]:
        if "error" in r:
            continue
        out.setdefault(r["engine"], {})[r["size"]] = r
    return out


def summarize(data: dict, key: str = "mean_ns") -> dict:
    """Ratios and the project's targets on ``key`` (wall or CPU time;
    computed, never asserted)."""
    eng = by_engine(data)
    amta = eng.get("AMTA", {})
    s: dict = {}
    flat = {n: r[key] for n, r in amta.items() if n >= 1 << 10}
    if len(flat) >= 2:
        s["amta_flatness"] = {
            "sizes": f"{pow2(min(flat))}..{pow2(max(flat))}",
            "min_ns": min(flat.values()), "max_ns": max(flat.values()),
            "max_over_min": max(flat.values()) / min(flat.values()),
            "largest_over_smallest_size": flat[max(flat)] / flat[min(flat)],
            "target": "max/min <= 1.5 over 2^10..2^22", "met": max(flat.values()) / min(flat.values()) <= 1.5,
        }
    for other, limit in (("DABA", 1.0), ("TwoStacks", 1.5)):
        if other in eng and amta:
            ratios = {n: amta[n][key] / eng[other][n][key]
                      for n in amta if n in eng[other] and n >= 1 << 9}
            if ratios:
                s[f"amta_over_{other.lower()}"] = {
                    "sizes": f">= 2^9 ({len(ratios)} sizes)",
                    "ratios": {pow2(n): round(v, 3) for n, v in ratios.items()},
                    "max": max(ratios.values()), "min": min(ratios.values()),
                    "geomean": math.exp(sum(map(math.log, ratios.values())) / len(ratios)),
                    "sizes_meeting": sum(v <= limit for v in ratios.values()),
                    "target": f"AMTA/{other} <= {limit} for N >= 2^9",
                    "met": max(ratios.values()) <= limit,
                }
    return s


def report(data: dict) -> str:
    eng = by_engine(data)
    names = list(eng)
    sizes = data["config"]["sizes"]
    lines = [f"Experiment 1 (Fig. 6): mean latency per update (insert + enforce + query), {data['profile']} profile"]
    head = ["N"] + names + ["AMTA/DABA", "AMTA/2Stk", "AMTA/LMTA"]

    def get(name, n, key):
        r = eng.get(name, {}).get(n)
        return None if r is None else r[key]

    rows = []
    for n in sizes:
        row = [pow2(n)] + [fmt_ns(get(e, n, "mean_ns")) for e in names]
        a = get("AMTA", n, "mean_ns")
        row += [fmt_ratio(a, get("DABA", n, "mean_ns")), fmt_ratio(a, get("TwoStacks", n, "mean_ns")),
                fmt_ratio(a, get("LMTA", n, "mean_ns"))]
        rows.append(row)
    lines.append(common.table(head, rows))
    lines.append("")
    lines.append("CPU time per update (thread_time_ns: not inflated when other processes take the CPU)")
    rows = [[pow2(n)] + [fmt_ns(get(e, n, "mean_cpu_ns")) for e in names]
            + [fmt_ratio(get("AMTA", n, "mean_cpu_ns"), get(o, n, "mean_cpu_ns")) for o in ("DABA", "TwoStacks", "LMTA")]
            for n in sizes]
    lines.append(common.table(head, rows))
    lines.append("")
    lines.append("Monoid calls (combine + inverse) per update")
    rows = [[pow2(n)] + [fmt_num(get(e, n, "calls_per_update")) for e in names] for n in sizes]
    lines.append(common.table(["N"] + names, rows))
    return report_text(lines, data, summary_lines(data))


def summary_lines(data: dict) -> list[str]:
    out = []
    for label, key, skey in (("wall", "mean_ns", "summary"), ("cpu", "mean_cpu_ns", "summary_cpu")):
        s = data.get(skey) or summarize(data, key)
        if "amta_flatness" in s:
            f = s["amta_flatness"]
            out.append(f"[{label}] AMTA flatness {f['sizes']}: max/min = {f['max_over_min']:.2f} "
                       f"({fmt_ns(f['min_ns'])} .. {fmt_ns(f['max_ns'])}), largest/smallest size "
                       f"{f['largest_over_smallest_size']:.2f}; target <= 1.5: {verdict(f['met'])}")
        for k, name in (("amta_over_daba", "AMTA/DABA"), ("amta_over_twostacks", "AMTA/TwoStacks")):
            if k in s:
                r = s[k]
                out.append(f"[{label}] {name} for N >= 2^9: max {r['max']:.2f}, min {r['min']:.2f}, "
                           f"geomean {r['geomean']:.2f}, {r['sizes_meeting']}/{len(r['ratios'])} sizes meet; "
                           f"target {r['target']}: {verdict(r['met'])}")
    return out


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    eng = by_engine(data)
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.2))
    panels = (("mean_ns", 1e3, "mean wall time per update (us)", "Exp. 1: wall time per update"),
              ("mean_cpu_ns", 1e3, "CPU time per update (us)", "Exp. 1: CPU time (thread_time) per update"),
              ("calls_per_update", 1, "monoid calls per update", "monoid calls (combine + inverse) per update"))
    for ax, (key, scale, ylabel, title) in zip(axes, panels):
        for name, recs in eng.items():
            color, marker = common.STYLE.get(name, (None, "o"))
            ns = [n for n in sorted(recs) if key in recs[n]]
            ax.plot(ns, [max(recs[n][key] / scale, 1e-2) for n in ns], marker=marker, color=color, label=name, ms=4)
        common.log_axes(ax, "window size N (elements)", ylabel, title)
    axes[0].legend(fontsize=8, ncol=2)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]))

"""Experiment 2 (MTA paper Fig. 7): bulk eviction latency.

Each engine builds a window of ``N`` elements once (not timed).  Then, for
``k = 1, 2, 4, ..., N/2`` and ``N - 1`` (ascending): one ``insert`` (the
window holds ``N + 1``), then one ``enforce`` whose WSP evicts exactly the
``k`` oldest elements -- its wall time is the measurement -- then (not
timed) a ``query`` and ``k - 1`` inserts that bring the window back to
``N``.  Small ``k`` are repeated (``reps``) and averaged.  A separate run
with :class:`~mta.monoid.CountingMonoid` (one repetition per ``k``) counts
the monoid calls of each enforce.

Monoid and WSP are the paper's (Listings 2 and 3): count (``int +``), and
``total - prefix >= keep`` where ``keep`` plays the newest update's
``maxSize``: set to ``N + 1 - k`` before the measured enforce, so exactly
``k`` elements leave.  The ``query`` right after the enforce is timed too
(reported separately): it is where Recalc pays its O(N) re-aggregation.
"""

from __future__ import annotations

import gc
import math
import time
from itertools import repeat

from mta.monoid import CountingMonoid

from . import common
from .common import RunConfig, fmt_ns, fmt_num, fmt_ratio, pow2
from .engines import MTA_ENGINES, applicable, class_name
from .exp1 import COUNT, SizeWSP
from .experiment import Run, report_text, save_figure, verdict

NAME = "exp2"

PROFILES = {
    # window 2^log2_n; k with k * reps <= rep_budget get up to max_reps repetitions
    "full": dict(log2_n=22, rep_budget=1 << 20, max_reps=8),
    "quick": dict(log2_n=16, rep_budget=1 << 14, max_reps=4),
    "tiny": dict(log2_n=10, rep_budget=1 << 8, max_reps=2),
}


#: After each measured enforce, the first refill inserts timed one by one.
NEXT_INSERTS = 64


def evictions(n: int) -> list[int]:
    """``1, 2, 4, ..., n/2`` and ``n - 1``."""
    ks = [1 << i for i in range(n.bit_length() - 1)]
    if n - 1 > ks[-1]:
        ks.append(n - 1)
    return ks


def reps_for(k: int, p: dict) -> int:
    return max(1, min(p["max_reps"], p["rep_budget"] // k))


def run(cfg: RunConfig) -> dict:
    p = PROFILES[cfg.profile]
    n = 1 << p["log2_n"]
    ks = evictions(n)
    specs, skipped = applicable(COUNT, cfg.engines)
    wsp = SizeWSP(n)
    job = Run(NAME, cfg, {
        "window": n,
        "evictions": ks,
        "reps": {str(k): reps_for(k, p) for k in ks},
        "counting_reps": 1,
        "monoid": "count: int +, identity 0, inverse - (Listing 2)",
        "wsp": "total - prefix >= keep, keep = N + 1 - k before the measured enforce (Listing 3, maxSize = keep)",
        "operation": "insert(1) (untimed); enforce() timed; query() timed separately; k - 1 inserts refill to N "
                     f"(the first {NEXT_INSERTS} timed one by one: next_inserts_max_ns)",
    })
    data = job.data
    data["engines"] = {s.name: {"description": s.description} for s in specs}
    data["skipped_engines"] = skipped
    data["notes"] = [
        "One window per engine, built once; k ascending on the same window, refilled to N after each eviction.",
        "Latency = wall time of the one enforce() call that evicts k elements (mean over reps).",
        "The baselines have no bulk eviction: their enforce pops and checks the head one element at a time.",
    ]
    job.gc_note("The cyclic garbage collector is off during the measurements (as timeit does).")
    records = data["records"] = []
    builds = data["builds"] = {}
    for spec in specs:
        try:
            recs, build = measure(spec, n, ks, p, wsp, cfg)
        except Exception as exc:  # a broken engine must not stop the others
            builds[spec.name] = {"error": repr(exc)}
            cfg.log(f"  exp2 {spec.name:<16} ERROR {exc!r}")
            continue
        records.extend(recs)
        builds[spec.name] = build
        job.save()
    return job.finish(plot, summary=lambda d: summarize(d, "enforce_ns"),
                      summary_cpu=lambda d: summarize(d, "enforce_cpu_ns"))


def measure(spec, n, ks, p, wsp, cfg):
    pc, tt = time.perf_counter_ns, time.thread_time_ns
    out = {}
    build = {}
    # timing run
    with common.gc_paused(cfg):
        wsp.n = n
        engine = spec.build(COUNT, wsp)
        build["build_s"] = common.fill(engine, repeat(1, n)) / 1e9
        build["rss_mb_after_build"] = common.rss_mb()
        build["class"] = class_name(engine)
        insert, enforce, query = engine.insert, engine.enforce, engine.query
        for k in ks:
            enf, qry, cpu, nxt = [], [], [], []
            for _ in range(reps_for(k, p)):
                wsp.n = n + 1 - k
                insert(1)
                c0 = tt()
                t0 = pc()
                evicted = enforce()
                t1 = pc()
                c1 = tt()
                query()
                t2 = pc()
                if evicted != k:
                    raise AssertionError(f"{spec.name}: enforce evicted {evicted}, expected {k}")
                enf.append(t1 - t0)
                cpu.append(c1 - c0)
                qry.append(t2 - t1)
                wsp.n = n
                # refill; the first inserts are timed one by one (deferred work, e.g. a level
                # queue compacting its dead prefix, lands on them)
                worst = worst_cpu = 0
                for _ in repeat(None, min(k - 1, NEXT_INSERTS)):
                    c0 = tt()
                    t0 = pc()
                    insert(1)
                    t1 = pc()
                    c1 = tt()
                    if t1 - t0 > worst:
                        worst = t1 - t0
                    if c1 - c0 > worst_cpu:
                        worst_cpu = c1 - c0
                for _ in repeat(None, k - 1 - min(k - 1, NEXT_INSERTS)):
                    insert(1)
                if k > 1:
                    nxt.append((worst, worst_cpu))
            assert len(engine) == n
            out[k] = {"engine": spec.name, "k": k, "reps": len(enf), "enforce_ns": sum(enf) / len(enf),
                      "enforce_min_ns": min(enf), "enforce_max_ns": max(enf), "enforce_cpu_ns": sum(cpu) / len(cpu),
                      "query_ns": sum(qry) / len(qry),
                      "next_inserts_max_ns": max(x[0] for x in nxt) if nxt else None,
                      "next_inserts_max_cpu_ns": max(x[1] for x in nxt) if nxt else None}
            cfg.log(f"  exp2 N={pow2(n)} {spec.name:<16} k={pow2(k):>7}  enforce {fmt_ns(out[k]['enforce_ns']):>10}"
                    f"  (min {fmt_ns(min(enf))}, max {fmt_ns(max(enf))}, {len(enf)} reps)  query {fmt_ns(out[k]['query_ns'])}")
        del engine, insert, enforce, query
    gc.collect()
    # counting run
    counting = CountingMonoid(COUNT)
    with common.gc_paused(cfg):
        wsp.n = n
        engine = spec.build(counting, wsp)
        common.fill(engine, repeat(1, n))
        build["build_calls_per_insert"] = counting.reset() / n
        insert, enforce, query = engine.insert, engine.enforce, engine.query
        for k in ks:
            wsp.n = n + 1 - k
            insert(1)
            counting.reset()
            enforce()
            out[k]["enforce_calls"] = counting.reset()
            query()
            out[k]["query_calls"] = counting.reset()
            wsp.n = n
            for _ in repeat(None, k - 1):
                insert(1)
        del engine, insert, enforce, query
    gc.collect()
    return [out[k] for k in ks], build


# -- summary, table, plot ------------------------------------------------------

def by_engine(data: dict) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for r in data["records"]:
        out.setdefault(r["engine"], {})[r["k"]] = r
    return out


def _slope(points: dict[int, float], k_min: int) -> float | None:
    """Least-squares slope of log(latency) against log(k) for k >= k_min."""
    xs = [(math.log(k), math.log(v)) for k, v in points.items() if k >= k_min and v > 0]
    if len(xs) < 2:
        return None
    mx = sum(x for x, _ in xs) / len(xs)
    my = sum(y for _, y in xs) / len(xs)
    den = sum((x - mx) ** 2 for x, _ in xs)
    return sum((x - mx) * (y - my) for x, y in xs) / den if den else None


def summarize(data: dict, key: str = "enforce_ns") -> dict:
    eng = by_engine(data)
    n = data["config"]["window"]
    k_max = max(data["config"]["evictions"])
    k_fit = 1 << max(0, min(10, (k_max // 64).bit_length() - 1))
    s: dict = {"window": n, "largest_eviction": k_max, "slope_fit_from_k": k_fit}
    per = s["engines"] = {}
    for name, recs in eng.items():
        lat = {k: r[key] for k, r in recs.items()}
        per[name] = {
            "largest_eviction_ns": lat.get(k_max),
            "max_over_k_ns": max(lat.values()),
            "worst_k": pow2(max(lat, key=lat.get)),
            "loglog_slope": _slope(lat, k_fit),
            "largest_eviction_calls": recs[k_max].get("enforce_calls") if k_max in recs else None,
            "worst_next_insert_ns": max((r.get("next_inserts_max_ns") or 0) for r in recs.values()) or None,
            "worst_next_insert_cpu_ns": max((r.get("next_inserts_max_cpu_ns") or 0) for r in recs.values()) or None,
        }
    mta = {m: per[m]["largest_eviction_ns"] for m in MTA_ENGINES if m in per}
    if mta:
        s["mta_bulk_target"] = {
            "target": f"enforce evicting {pow2(k_max)} elements < 500 us for AMTA and LMTA",
            "latency_ns": mta,
            "met": all(v is not None and v < 500_000 for v in mta.values()) and len(mta) == len(MTA_ENGINES),
            "note": "defined for the full profile (N = 2^22)" if n != 1 << 22 else "",
        }
    base = {b: per[b]["loglog_slope"] for b in per if b not in MTA_ENGINES}
    if base:
        s["baselines_linear"] = {
            "target": f"baselines grow linearly (log-log slope ~1 for k >= {pow2(k_fit)})",
            "slopes": base,
            "met": all(v is not None and v > 0.8 for v in base.values()),
        }
    return s


def report(data: dict) -> str:
    eng = by_engine(data)
    names = list(eng)
    ks = data["config"]["evictions"]
    n = data["config"]["window"]
    lines = [f"Experiment 2 (Fig. 7): latency of one enforce() evicting k of N = {pow2(n)} elements, {data['profile']} profile"]

    def get(name, k, key):
        r = eng.get(name, {}).get(k)
        return None if r is None else r.get(key)

    head = ["k"] + names + ["DABA/AMTA", "2Stk/AMTA", "LMTA/AMTA"]
    rows = []
    for k in ks:
        a = get("AMTA", k, "enforce_ns")
        rows.append([pow2(k)] + [fmt_ns(get(e, k, "enforce_ns")) for e in names]
                    + [fmt_ratio(get("DABA", k, "enforce_ns"), a), fmt_ratio(get("TwoStacks", k, "enforce_ns"), a),
                       fmt_ratio(get("LMTA", k, "enforce_ns"), a)])
    lines.append(common.table(head, rows))
    lines.append("")
    lines.append("CPU time of the enforce (thread_time_ns)")
    rows = []
    for k in ks:
        a = get("AMTA", k, "enforce_cpu_ns")
        rows.append([pow2(k)] + [fmt_ns(get(e, k, "enforce_cpu_ns")) for e in names]
                    + [fmt_ratio(get(o, k, "enforce_cpu_ns"), a) for o in ("DABA", "TwoStacks", "LMTA")])
    lines.append(common.table(head, rows))
    lines.append("")
    lines.append("Monoid calls per enforce (counting run, 1 rep)")
    rows = [[pow2(k)] + [fmt_num(get(e, k, "enforce_calls")) for e in names] for k in ks]
    lines.append(common.table(["k"] + names, rows))
    lines.append("")
    lines.append(f"Slowest of the first {NEXT_INSERTS} inserts after the enforce (max over reps), wall / CPU")
    rows = [[pow2(k)] + [f"{fmt_ns(get(e, k, 'next_inserts_max_ns'))} / {fmt_ns(get(e, k, 'next_inserts_max_cpu_ns'))}"
                         for e in names] for k in ks]
    lines.append(common.table(["k"] + names, rows))
    lines.append("")
    lines.append("query() right after the enforce (mean)")
    rows = [[pow2(k)] + [fmt_ns(get(e, k, "query_ns")) for e in names] for k in ks]
    lines.append(common.table(["k"] + names, rows))
    lines.append("")
    builds = data.get("builds", {})
    lines.append("Build of the window: " + ", ".join(
        f"{e} {b['build_s']:.1f} s" for e, b in builds.items() if "build_s" in b))
    return report_text(lines, data, summary_lines(data))


def summary_lines(data: dict) -> list[str]:
    out = []
    for label, key, skey in (("wall", "enforce_ns", "summary"), ("cpu", "enforce_cpu_ns", "summary_cpu")):
        s = data.get(skey) or summarize(data, key)
        t = s.get("mta_bulk_target")
        if t:
            out.append(f"[{label}] MTA bulk eviction of {pow2(s['largest_eviction'])}: "
                       + ", ".join(f"{m} {fmt_ns(v)}" for m, v in t["latency_ns"].items())
                       + f"; target < 500 us: {verdict(t['met'])} {t['note']}".rstrip())
            for m in t["latency_ns"]:
                e = s["engines"][m]
                out.append(f"[{label}]   {m}: worst over all k {fmt_ns(e['max_over_k_ns'])} at k = {e['worst_k']}"
                           + (f"; slowest insert right after an eviction {fmt_ns(e['worst_next_insert_ns'])} wall, "
                              f"{fmt_ns(e.get('worst_next_insert_cpu_ns'))} CPU"
                              if e.get("worst_next_insert_ns") and label == "wall" else ""))
        b = s.get("baselines_linear")
        if b:
            out.append(f"[{label}] Baseline log-log slopes for k >= {pow2(s['slope_fit_from_k'])}: "
                       + ", ".join(f"{e} {v:.2f}" for e, v in b["slopes"].items() if v is not None)
                       + f"; linear growth: {verdict(b['met'])}")
    return out


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    eng = by_engine(data)
    n = data["config"]["window"]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.2))
    panels = (("enforce_ns", 1e3, "enforce wall time (us)", f"Exp. 2: bulk eviction from a window of {pow2(n)}, wall"),
              ("enforce_cpu_ns", 1e3, "enforce CPU time (us)", "Exp. 2: CPU time (thread_time) of the enforce"),
              ("enforce_calls", 1, "monoid calls per enforce", "monoid calls (combine + inverse) per enforce"))
    for ax, (key, scale, ylabel, title) in zip(axes, panels):
        for name, recs in eng.items():
            color, marker = common.STYLE.get(name, (None, "o"))
            ks = [k for k in sorted(recs) if recs[k].get(key) is not None]
            ax.plot(ks, [max(recs[k][key] / scale, 0.5 if scale == 1 else 1e-3) for k in ks],
                    marker=marker, color=color, label=name, ms=4)
        if scale != 1:
            ax.axhline(500, color="k", ls=":", lw=1)
            ax.text(1, 500, " 500 us", va="bottom", fontsize=8)
        common.log_axes(ax, "elements evicted by one enforce (k)", ylabel, title)
    axes[0].legend(fontsize=8, ncol=2)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]))

"""Multi-query optimization (mqo-shein-chrysanthis-tkde section 5).

Four parts, all on :class:`mta.multi.SharedWindows` with ``rows=`` queries:

1. **Plans at Q = 100** -- the paper's workload (section 5.1: slides drawn
   uniformly from the factors of ``S_max``, ranges ``slide * overlap`` with
   the overlap uniform in ``1..O_max``) at a size Python can run: the
   paper's ``S_max`` 1,000 with ``O_max`` 10 instead of 10,000 (windows of
   up to 10^4 elements, not 10^7): elements per second (wall and
   CPU), monoid calls per element (a separate CountingMonoid run), the cost
   model's estimate, trees, and the aggregates each plan holds, for
   ``auto``, ``weaveshare``, ``triweave``, one tree per technique, ``panes``
   (as SharedWindows resolves it), ``panes+naive`` (the paper's Panes
   technique) and ``separate``; sum and max.
2. **Estimated vs measured** (Exp. 6 and 7): WeaveShare's and TriWeave's
   plans restricted to one final technique each, all on one executor
   (:mod:`bench.mqo_model`); the estimated throughput (``1 / calls``, and
   ``1 / operations`` with the weights of a calibration run first) and the
   measured elements/s are normalised by their largest reading and compared
   (average deviation), as in the paper.
3. **Number of queries** (Exp. 1): the planners' estimates at the paper's
   parameters (``S_max`` 1,000, ``O_max`` 10,000) for Q = 1 .. 10,000, and
   measured elements/s of ``auto`` (and ``separate`` while it is feasible)
   at the scaled sizes.
4. **SlickDeque's multi-query setting** (slickdeque-shein-edbt2018): ranges
   1..n, slide 1, sum and max: elements/s and calls per element of every
   final technique that applies.
5. **Parameters**: the same measurements (sum) for a few ``(S_max, O_max)``
   at Q = 100, for the cheapest shared plans, ``panes+naive`` and
   ``separate``: how the ratios move with the slides (answers per element)
   and the window lengths.

Memory is counted, not sampled: the aggregates a plan holds after the run
(partials in every tree's final aggregator, the elements a separate query
keeps), against ``separate``, beside the planner's estimate of them
(``plan.held``, :mod:`mta.multi.memory`); the memory target's verdict is
given for the plan ``auto`` chooses and for the fastest plan.
"""

from __future__ import annotations

import gc
import random
import time

from mta import aggregators as A
from mta.monoid import Aggregator, CountingMonoid
from mta.multi import Query, SharedWindows, cost, planner
from mta.multi.plan import Group, applicable_finals
from mta.multi.weaveshare import weaveshare

from . import common, mqo_model, mqo_params
from .common import RunConfig, fmt_num
from .mqo_model import EXP67_FINALS

NAME = "mqo"

PROFILES = {
    "full": dict(q=100, s_max=1000, o_max=10, elements=2000, repeats=1, sweep=[1, 10, 100, 1000, 10000],
                 sweep_measured=[1, 10, 100, 1000, 10000], separate_max_q=1000, sd_ranges=[16, 128], sd_elements=2000,
                 params=[(100, 30), (1000, 10), (1000, 30), (1000, 100)]),
    "quick": dict(q=100, s_max=1000, o_max=10, elements=800, repeats=1, sweep=[1, 10, 100, 1000],
                  sweep_measured=[1, 10, 100], separate_max_q=100, sd_ranges=[16, 64], sd_elements=800,
                  params=[(100, 30), (1000, 10)]),
    "tiny": dict(q=12, s_max=10, o_max=10, elements=120, repeats=1, sweep=[1, 10, 30],
                 sweep_measured=[1, 10], separate_max_q=12, sd_ranges=[8], sd_elements=100,
                 params=[(10, 10)]),
}

#: Paper parameters of the plan-generation sweep (Table 4, Exp. 1).
PAPER = dict(s_max=1000, o_max=10_000)

AGGS = {"sum": A.SUM, "max": A.MAX}


def workload(n: int, s_max: int, o_max: int, seed: int = 0) -> list[tuple[int, int]]:
    """Section 5.1: ``n`` queries ``(range, slide)``, uniform slides among the
    factors of ``s_max``, overlap factor uniform in ``1..o_max``."""
    rng = random.Random(seed)
    factors = [d for d in range(1, s_max + 1) if s_max % d == 0]
    out = []
    for _ in range(n):
        s = rng.choice(factors)
        out.append((s * rng.randint(1, o_max), s))
    return out


def queries_of(specs, agg) -> list:
    return [Query(f"q{i}", agg, rows=r, slide=s) for i, (r, s) in enumerate(specs)]


def held(sw) -> int:
    """Aggregates the plan holds now: partials in the trees' final
    aggregators, elements a separate query keeps."""
    total = 0
    for ex in sw._executors:
        final = getattr(ex, "final", None)
        total += len(final) if final is not None else len(ex._held)
    return total


def _groups_for(queries, plan):
    """``(plan string, groups or None)``: groups go to ``plan=`` as they are."""
    if isinstance(plan, list):
        return "given", plan
    return plan, None


def run_plan(specs, plan, agg, elements: int, cfg: RunConfig, seed: int = 1) -> dict:
    """Time ``elements`` pushes after a warm-up of the longest window, then
    count monoid calls over the same pushes with a CountingMonoid; the
    timed run's answers' count and sum, the same for every plan, checked."""
    rng = random.Random(seed)
    warm = max(r for r, _ in specs) + 2 * max(s for _, s in specs)
    data = [rng.random() for _ in range(warm + elements)]
    name, groups = _groups_for(specs, plan)
    out: dict = {}
    for counting in (False, True):
        monoid = CountingMonoid(agg.monoid) if counting else agg.monoid
        a = Aggregator(monoid, agg.lift, agg.lower, name=agg.name)
        qs = queries_of(specs, a)
        if groups is not None:
            remapped = [Group([qs[int(q.name[1:])] for q in g.queries], g.partial, g.final, g.estimate, g.slicer,
                              g.held) for g in groups]
            sw = SharedWindows(qs, plan=remapped)
        else:
            sw = SharedWindows(qs, plan=name)
        push = sw.push
        with common.gc_paused(cfg):
            for v in data[:warm]:
                push(v)
            if counting:
                monoid.reset()
                for v in data[warm:]:
                    push(v)
                out["calls_per_element"] = monoid.calls / elements
            else:
                completed = []  # summed after the clock stops: the checksum costs no timed work
                keep = completed.append
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                for v in data[warm:]:
                    keep(push(v))
                wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
                out["answers"] = answers = sum(len(rs) for rs in completed)
                out["checksum"] = sum(r.value for rs in completed for r in rs)
                out["results_per_element"] = answers / elements
                out["elements_per_s"] = elements / (wall / 1e9)
                out["elements_per_s_cpu"] = elements / (cpu / 1e9)
                out["held"] = held(sw)
                out["held_estimate"] = sw.plan.held
                out["trees"] = len(sw.plan.groups)
                out["label"] = sw.plan.name
                out["compiled_why_not"] = sw.compiled_why_not
                out["executor"] = "python" if sw.compiled_why_not else "compiled"
                out["techniques"] = sorted({f"{g.partial}+{g.final}" for g in sw.plan.groups})
                out["estimate"] = (sum(planner.estimate(g.queries, g.partial, g.final) if g.estimate is None
                                       else g.estimate for g in sw.plan.groups)
                                   + sum(sl.estimate for sl in sw.plan.slicers))
        del sw, push
        gc.collect()
    return out


def plan_list(specs, agg_name: str) -> list:
    """The plans of part 1: names SharedWindows resolves."""
    finals = EXP67_FINALS[agg_name] + ["lint"]
    return (["auto", "weaveshare", "triweave"] + [f"cutty+{f}" for f in finals]
            + ["panes", "panes+naive", "separate"])


def run(cfg: RunConfig) -> dict:
    started = time.perf_counter()
    p = PROFILES[cfg.profile]
    specs = workload(p["q"], p["s_max"], p["o_max"])
    data = common.header(NAME, cfg, {
        "q": p["q"], "s_max": p["s_max"], "o_max": p["o_max"], "elements_timed": p["elements"],
        "workload": "slides uniform over the factors of S_max, range = slide * U(1..O_max) (section 5.1)",
        "paper_parameters_for_estimates": PAPER, "sweep": p["sweep"], "sweep_measured": p["sweep_measured"],
        "slickdeque_ranges": p["sd_ranges"], "params": p["params"], "queries": specs,
    })
    data["notes"] = [
        "Elements are uniform random floats; every push returns the Results it completes.",
        "Monoid calls come from a second run of the same pushes with CountingMonoid (not timed).",
        "'held' counts aggregates kept after the run: partials in shared trees, elements of separate queries; "
        "'held est' is the planner's estimate (plan.held: each tree's peak, its longest window's partials).",
        "'panes' is SharedWindows' plan='panes' (Panes slicing, cheapest final); 'panes+naive' is the "
        "paper's Panes technique (naive final).",
        "TriWeave's trees are fed by one shared slicer (three-level processing); its estimate counts the "
        "slicer once.",
    ]
    records = data["records"] = []
    # part 1: plans at Q = 100
    for agg_name, agg in AGGS.items():
        for plan in plan_list(specs, agg_name):
            try:
                rec = run_plan(specs, plan, agg, p["elements"], cfg)
            except Exception as exc:  # a failing plan must not stop the others
                records.append({"part": "plans", "agg": agg_name, "plan": plan, "error": repr(exc)})
                cfg.log(f"  mqo {agg_name} {plan:<24} ERROR {exc!r}")
                continue
            rec.update(part="plans", agg=agg_name, plan=plan, q=len(specs))
            records.append(rec)
            cfg.log(f"  mqo {agg_name} {plan:<24} {rec['elements_per_s']:>10,.0f} el/s  "
                    f"{rec['calls_per_element']:>9.2f} calls/el (est {rec['estimate']:.2f})  "
                    f"{rec['trees']:>3} trees  held {rec['held']} (est {rec['held_estimate']})")
        common.write_json(cfg.out / f"{NAME}.json", common.finish(data, started))
    # part 2: estimated vs measured, Exp. 6 (WeaveShare) and 7 (TriWeave), each on one executor
    data["calibration"], exp67 = mqo_model.run(cfg, specs, p["elements"], run_plan, queries_of, AGGS)
    records.extend(exp67)
    common.write_json(cfg.out / f"{NAME}.json", common.finish(data, started))
    # part 3: number of queries
    for n in p["sweep"]:
        paper_specs = workload(n, PAPER["s_max"], PAPER["o_max"], seed=n)
        t0 = time.perf_counter()
        ws = weaveshare(paper_specs, cost.applicable_finals(True, False, EXP67_FINALS["sum"] + ["lint"]))
        plan_s = time.perf_counter() - t0
        rec = {"part": "sweep_estimate", "q": n, "weaveshare_sum": sum(t.estimate for t in ws),
               "weaveshare_trees": len(ws), "planning_s": plan_s,
               "separate": sum(cost.separate_calls(q) for q in paper_specs)}
        for final in ("naive", "flatfat", "flatfit", "rint", "slickdeque-inv", "slickdeque-noninv", "bint"):
            trees = weaveshare(paper_specs, (final,))
            rec[f"weaveshare[{final}]"] = sum(t.estimate for t in trees)
            rec[f"trees[{final}]"] = len(trees)
        records.append(rec)
        cfg.log(f"  mqo sweep Q={n:<6} weaveshare {rec['weaveshare_sum']:.3g} calls/el ({len(ws)} trees, "
                f"planned in {plan_s:.2f} s); panes+naive {rec['weaveshare[naive]']:.3g}")
    for n in p["sweep_measured"]:
        sweep_specs = workload(n, p["s_max"], p["o_max"], seed=n)
        for plan in ("auto", "panes+naive") + (("separate",) if n <= p["separate_max_q"] else ()):
            rec = run_plan(sweep_specs, plan, A.SUM, max(100, p["elements"] // 2), cfg)
            rec.update(part="sweep_measured", q=n, plan=plan)
            records.append(rec)
            cfg.log(f"  mqo sweep measured Q={n:<5} {plan:<12} {rec['elements_per_s']:>10,.0f} el/s "
                    f"{rec['calls_per_element']:.2f} calls/el")
    common.write_json(cfg.out / f"{NAME}.json", common.finish(data, started))
    # part 5: the workload's parameters (S_max, O_max) at Q = p["q"]
    for s_max, o_max in p["params"]:
        param_specs = workload(p["q"], s_max, o_max)
        for plan in mqo_params.PARAM_PLANS:
            rec = run_plan(param_specs, plan, A.SUM, p["elements"], cfg)
            rec.update(part="params", s_max=s_max, o_max=o_max, q=p["q"], plan=plan)
            records.append(rec)
            cfg.log(f"  mqo params S_max={s_max:<5} O_max={o_max:<4} {plan:<14} {rec['elements_per_s']:>10,.0f} el/s "
                    f"(cpu {rec['elements_per_s_cpu']:,.0f}) {rec['results_per_element']:.1f} results/el "
                    f"held {rec['held']} (est {rec['held_estimate']})")
    common.write_json(cfg.out / f"{NAME}.json", common.finish(data, started))
    # part 4: SlickDeque's multi-query setting
    for n in p["sd_ranges"]:
        sd_specs = [(r, 1) for r in range(1, n + 1)]
        for agg_name, agg in AGGS.items():
            qs = queries_of(sd_specs, agg)
            for final in applicable_finals(qs):
                rec = run_plan(sd_specs, f"cutty+{final}", agg, p["sd_elements"], cfg)
                rec.update(part="slickdeque_mq", agg=agg_name, n=n, final=final)
                records.append(rec)
                cfg.log(f"  mqo slickdeque-mq n={n:<4} {agg_name} {final:<18} {rec['elements_per_s']:>9,.0f} el/s "
                        f"{rec['calls_per_element']:7.2f} calls/el (est {rec['estimate']:.2f})")
    data["summary"] = summarize(data)
    common.finish(data, started)
    common.write_json(cfg.out / f"{NAME}.json", data)
    if cfg.plot:
        plot(data, cfg.out / f"{NAME}.png")
    return data


# -- summary, report, plot -------------------------------------------------------

def _plans(data, agg):
    return {r["plan"]: r for r in data["records"] if r.get("part") == "plans" and r.get("agg") == agg
            and "error" not in r}


#: The paper's Exp. 6-7 statistic (normalised throughput deviation).
deviation = mqo_model.deviation


def summarize(data: dict) -> dict:
    s: dict = {}
    for agg in AGGS:
        plans = _plans(data, agg)
        if not plans or "separate" not in plans:
            continue
        sep, naive = plans["separate"], plans.get("panes+naive")
        # CPU time: the wall clock moves with the machine's other jobs
        best = max((r for k, r in plans.items() if k not in ("separate",)), key=lambda r: r["elements_per_s_cpu"])
        auto = plans.get("auto")
        entry = {
            "best_plan": best["plan"], "best_elements_per_s": best["elements_per_s"],
            "best_over_separate": best["elements_per_s"] / sep["elements_per_s"],
            "best_over_separate_cpu": best["elements_per_s_cpu"] / sep["elements_per_s_cpu"],
            "best_over_panes_naive": None if naive is None else best["elements_per_s"] / naive["elements_per_s"],
            "best_over_panes_naive_cpu": None if naive is None
            else best["elements_per_s_cpu"] / naive["elements_per_s_cpu"],
            "best_over_panes": best["elements_per_s"] / plans["panes"]["elements_per_s"] if "panes" in plans else None,
            "held_best_over_separate": best["held"] / sep["held"],
            "held_auto_over_separate": None if auto is None else auto["held"] / sep["held"],
            "held_estimate_best_over_separate": best["held_estimate"] / sep["held_estimate"],
            "held_estimate_auto_over_separate": None if auto is None
            else auto["held_estimate"] / sep["held_estimate"],
            "auto_over_separate": None if auto is None else auto["elements_per_s"] / sep["elements_per_s"],
            "auto_over_separate_cpu": None if auto is None else auto["elements_per_s_cpu"] / sep["elements_per_s_cpu"],
            "calls_estimate_error": {k: abs(r["estimate"] - r["calls_per_element"]) / r["calls_per_element"]
                                     for k, r in plans.items() if r["calls_per_element"]},
            "checksums_agree": common.sums_agree((r["answers"], r["checksum"]) for r in plans.values()
                                                 if "checksum" in r),
        }
        errs = list(entry["calls_estimate_error"].values())
        entry["calls_estimate_error_mean"] = sum(errs) / len(errs)
        s[agg] = entry
    s.update(mqo_model.summarize(data["records"]))
    s["params"] = mqo_params.summarize(data["records"])
    calls = [s[a]["calls_estimate_error_mean"] for a in AGGS if a in s]
    targets = {}
    for agg in AGGS:
        if agg in s:
            e = s[agg]
            targets[f"{agg}: best plan >= 20x separate (elements/s of CPU time, Q={data['config']['q']})"] = (
                f"{e['best_plan']} {e['best_over_separate_cpu']:.1f}x (wall {e['best_over_separate']:.1f}x)",
                e["best_over_separate_cpu"] >= 20)
            if e["best_over_panes_naive"] is not None:
                targets[f"{agg}: best plan >= 5x panes (Panes + naive final, CPU time)"] = (
                    f"{e['best_over_panes_naive_cpu']:.1f}x (wall {e['best_over_panes_naive']:.1f}x; "
                    f"plan='panes' as resolved, wall: {e['best_over_panes']:.2f}x)",
                    e["best_over_panes_naive_cpu"] >= 5)
            if e["held_auto_over_separate"] is not None:
                targets[f"{agg}: held <= 1/10 of separate (the plan auto chooses)"] = (
                    f"auto {e['held_auto_over_separate']:.4f} (estimate {e['held_estimate_auto_over_separate']:.4f})",
                    e["held_auto_over_separate"] <= 0.1)
            targets[f"{agg}: held <= 1/10 of separate (the fastest plan)"] = (
                f"{e['best_plan']} {e['held_best_over_separate']:.4f} "
                f"(estimate {e['held_estimate_best_over_separate']:.4f})",
                e["held_best_over_separate"] <= 0.1)
            targets[f"{agg}: auto never loses to separate by more than 10% (CPU time)"] = (
                f"auto/separate {e['auto_over_separate_cpu']:.1f}x (wall {e['auto_over_separate']:.1f}x)",
                e["auto_over_separate_cpu"] >= 0.9)
    targets.update(mqo_params.targets(s["params"], PAPER["s_max"]))
    exp67 = mqo_model.target(s)
    if exp67:
        targets["estimate within 25% of measured on average (Exp. 6-7 normalised throughput)"] = exp67
    if calls:
        targets["estimate within 25% of measured on average (monoid calls per element, part 1)"] = (
            ", ".join(f"{a} {s[a]['calls_estimate_error_mean']:.1%}" for a in AGGS if a in s),
            sum(calls) / len(calls) <= 0.25)
    s["targets"] = {k: {"measured": v[0], "met": v[1]} for k, v in targets.items()}
    return s


def report(data: dict) -> str:
    lines = [f"MQO (section 5): Q={data['config']['q']}, S_max={data['config']['s_max']}, "
             f"O_max={data['config']['o_max']}, {data['profile']} profile"]
    s = data.get("summary") or summarize(data)
    for agg in AGGS:
        plans = _plans(data, agg)
        if not plans:
            continue
        sep = plans.get("separate")
        rows = []
        for k, r in plans.items():
            rows.append([k, r["label"], str(r["trees"]), fmt_num(r["elements_per_s"], 0),
                         fmt_num(r["elements_per_s_cpu"], 0),
                         "-" if sep is None else f"{r['elements_per_s'] / sep['elements_per_s']:.1f}",
                         f"{r['calls_per_element']:.2f}", f"{r['estimate']:.2f}", str(r["held"]),
                         str(r["held_estimate"])])
        lines += ["", f"{agg}: plans", common.table(
            ["plan", "resolved", "trees", "el/s", "el/s cpu", "x separate", "calls/el", "estimate", "held",
             "held est"], rows)]
        agree = s.get(agg, {}).get("checksums_agree")
        if agree is not None:  # results recorded before the checksums were kept have none
            lines.append(f"checksums of the plans (count and sum of answers) agree: {'yes' if agree else 'NO'}")
    lines += mqo_model.report_lines(data, common.table, fmt_num)
    recs = [r for r in data["records"] if r.get("part") == "sweep_estimate"]
    if recs:
        keys = ["weaveshare[naive]", "weaveshare[flatfat]", "weaveshare[bint]", "weaveshare[flatfit]",
                "weaveshare[rint]", "weaveshare[slickdeque-inv]", "weaveshare[slickdeque-noninv]"]
        rows = [[str(r["q"])] + [f"{r[k]:.3g}" for k in keys] + [f"{r['separate']:.3g}", f"{r['planning_s']:.2f}"]
                for r in recs]
        lines += ["", "Exp. 1 (estimates at S_max 1,000, O_max 10,000): WeaveShare plan cost, calls per element",
                  common.table(["Q"] + [k[11:-1] for k in keys] + ["separate", "plan s"], rows)]
    recs = [r for r in data["records"] if r.get("part") == "sweep_measured"]
    if recs:
        rows = [[str(r["q"]), r["plan"], str(r["trees"]), fmt_num(r["elements_per_s"], 0),
                 f"{r['calls_per_element']:.2f}", f"{r['estimate']:.2f}", str(r["held"])] for r in recs]
        lines += ["", "Number of queries, measured (scaled workload, sum)",
                  common.table(["Q", "plan", "trees", "el/s", "calls/el", "estimate", "held"], rows)]
    recs = [r for r in data["records"] if r.get("part") == "slickdeque_mq"]
    if recs:
        rows = [[str(r["n"]), r["agg"], r["final"], fmt_num(r["elements_per_s"], 0),
                 f"{r['calls_per_element']:.2f}", f"{r['estimate']:.2f}", str(r["held"])] for r in recs]
        lines += ["", "SlickDeque's multi-query setting: ranges 1..n, slide 1",
                  common.table(["n", "agg", "final", "el/s", "calls/el", "estimate", "held"], rows)]
    lines += mqo_params.report_lines(data, s.get("params", []), common.table, fmt_num)
    lines += ["", "Targets:"]
    for k, v in s.get("targets", {}).items():
        lines.append(f"  {k}: {v['measured']} -> {'MET' if v['met'] else 'MISSED'}")
    lines.extend(["", *("note: " + n for n in data.get("notes", []))])
    return "\n".join(lines)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    ax = axes[0][0]
    for i, agg in enumerate(AGGS):
        plans = _plans(data, agg)
        names = list(plans)
        ax.barh([j + 0.4 * i for j in range(len(names))], [plans[k]["elements_per_s"] for k in names],
                height=0.4, label=agg)
        ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("elements per second (wall)")
    ax.set_title(f"plans at Q={data['config']['q']}", fontsize=10)
    ax.legend()
    ax = axes[0][1]
    recs = [r for r in data["records"] if r.get("part") == "exp67" and r.get("run_on") == "python"]
    if recs:
        labels = [f"{r['optimizer'][:5]} {r['agg']} {r['final']}" for r in recs]
        series = [("estimated (1/calls)", [1 / r["estimate"] for r in recs])]
        if all(r["operations"] for r in recs):
            series.append(("estimated (1/operations)", [1 / r["operations"] for r in recs]))
        series.append(("measured el/s (CPU)", [r["elements_per_s_cpu"] for r in recs]))
        h = 0.8 / len(series)
        for i, (label, values) in enumerate(series):
            ax.barh([j + i * h for j in range(len(recs))], [v / max(values) for v in values], height=h, label=label)
        ax.set_yticks(range(len(recs)), labels, fontsize=6)
        ax.set_title("Exp. 6-7 (pure-Python executor): normalised estimated vs measured throughput", fontsize=10)
        ax.legend(fontsize=8)
    ax = axes[1][0]
    recs = [r for r in data["records"] if r.get("part") == "sweep_estimate"]
    for key in ("naive", "flatfat", "bint", "flatfit", "rint", "slickdeque-inv", "slickdeque-noninv"):
        ax.plot([r["q"] for r in recs], [r[f"weaveshare[{key}]"] for r in recs], marker="o", label=key)
    ax.plot([r["q"] for r in recs], [r["separate"] for r in recs], "k--", label="separate")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("queries Q")
    ax.set_ylabel("estimated monoid calls per element")
    ax.set_title("Exp. 1: WeaveShare plan cost (S_max 1,000, O_max 10,000)", fontsize=10)
    ax.legend(fontsize=7)
    ax = axes[1][1]
    recs = [r for r in data["records"] if r.get("part") == "slickdeque_mq"]
    if recs:
        labels = [f"n={r['n']} {r['agg']} {r['final']}" for r in recs]
        ax.barh(range(len(recs)), [r["elements_per_s"] for r in recs])
        ax.set_yticks(range(len(recs)), labels, fontsize=6)
        ax.set_xscale("log")
        ax.set_xlabel("elements per second (wall)")
        ax.set_title("SlickDeque's multi-query setting: ranges 1..n, slide 1", fontsize=10)
    fig.suptitle(common.machine_caption(data["machine"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Exp. 6 and 7 of bench mqo (mqo-shein-chrysanthis-tkde section 5.4): the
cost model's estimated throughput against the measured one.

As in the paper, every plan of one experiment runs on one platform: the
pure-Python executor for all (``mta.multi.compiled.USE = False``), and the
compiled push too when it covers every plan of the experiment (each record
says which executor ran it, and why not the compiled one).

Two estimates are compared: monoid calls per element (``estimate``, what
the planners minimise) and operations per element
(:func:`mta.multi.operations.operations`): calls plus the pushes, partials
closed, windows looked up and Results, each weighted by its time relative
to a monoid call on that executor.  The weights come from :func:`calibrate`,
run before Exp. 6-7 on five trivial plans whose operation counts differ one
kind at a time; they are never fitted to Exp. 6-7's measurements.
"""

from __future__ import annotations

from contextlib import contextmanager

from mta import aggregators as A
from mta.multi import SharedWindows, compiled, operations
from mta.multi.plan import Group
from mta.multi.shared_slicer import Slicer
from mta.multi.triweave import triweave
from mta.multi.weaveshare import price, weaveshare

#: Final techniques compared in Exp. 6 and 7 (the paper's Panes, FlatFAT,
#: FlatFIT, SlickDeque; here with B-Int and R-Int too).
EXP67_FINALS = {"sum": ["naive", "bint", "flatfat", "flatfit", "rint", "slickdeque-inv"],
                "max": ["naive", "bint", "flatfat", "flatfit", "slickdeque-noninv"]}

#: Timed runs of each Exp. 6-7 plan; the fastest (CPU time) is kept.
EXP67_REPEATS = 3

#: The executors Exp. 6-7 may run on: True/False for mta.multi.compiled.USE.
EXECUTORS = {"python": False, "compiled": True}

#: Calibration plans (sum, rows queries): ``(name, queries, plan)``.  Against
#: ``answer`` (one query, rows 1, slide 1: a push, a partial, a lookup, a
#: Result per element, no call), each differs in mainly one kind: ``results``
#: answers CAL_K identical queries with one lookup, ``calls`` folds CAL_W - 1
#: partials per lookup, ``tumbling`` closes, looks up and answers once every
#: CAL_S elements, ``partials`` closes a partial every element and answers
#: every CAL_S.
CAL_K, CAL_W, CAL_S = 16, 257, 64
CALIBRATION = [
    ("answer", [(1, 1)], "cutty+naive"),
    ("results", [(1, 1)] * CAL_K, "cutty+naive"),
    ("calls", [(CAL_W, 1)], "cutty+naive"),
    ("tumbling", [(CAL_S, CAL_S)], "cutty+naive"),
    ("partials", [(1, CAL_S)], "panes+naive"),
]


@contextmanager
def executor(name: str):
    """Run SharedWindows on the named executor inside the block."""
    was = compiled.USE
    compiled.USE = EXECUTORS[name]
    try:
        yield
    finally:
        compiled.USE = was


def calibrate(cfg, run_plan, name: str, elements: int, repeats: int = EXP67_REPEATS) -> dict:
    """Time per element of each calibration plan on executor ``name`` (the
    fastest of ``repeats`` runs, CPU time), its operation counts (calls and
    Results as the executor returned them, partials and lookups from
    :func:`mta.multi.operations.counts`), and the solved time of each
    operation kind; the weights are those times over a monoid call's."""
    rows, times, plans = [], [], []
    with executor(name):
        for label, specs, plan in CALIBRATION:
            recs = [run_plan(specs, plan, A.SUM, elements, cfg) for _ in range(repeats)]
            rec = max(recs, key=lambda r: r["elements_per_s_cpu"])
            partial, final = plan.split("+")
            c = operations.counts([(specs, partial, final)])
            row = [1.0, rec["calls_per_element"], c.partials, c.lookups, rec["results_per_element"]]
            rows.append(row)
            times.append(1e9 / rec["elements_per_s_cpu"])
            plans.append({"plan": label, "queries": specs, "technique": plan, "executor": rec["executor"],
                          "compiled_why_not": rec["compiled_why_not"], "ns_per_element": times[-1],
                          "counts": dict(zip(("element", "calls", "partials", "lookups", "results"), row))})
    ran = {p["executor"] for p in plans}
    out = {"executor": name, "plans": plans}
    if ran != {name}:
        out["error"] = f"the calibration plans ran on {sorted(ran)}, not all on {name}"
        return out
    t_el, t_call, t_part, t_look, t_res = operations.solve(rows, times)
    out["ns"] = {"element": t_el, "call": t_call, "partial": t_part, "lookup": t_look, "result": t_res}
    bad = [k for k, v in out["ns"].items() if v <= 0]
    if bad:  # a time below zero is noise, not a price: no weights from this run
        out["error"] = f"the calibration solved a time <= 0 for {bad} (other jobs on the machine?); rerun"
        return out
    out["weights"] = operations.Weights(t_el / t_call, t_part / t_call, t_look / t_call, t_res / t_call)._asdict()
    return out


def exp67_plans(specs) -> list:
    """``(agg, optimizer, final, trees, slicer)`` of every Exp. 6-7 plan:
    WeaveShare's and TriWeave's plans restricted to one final technique."""
    out = []
    for agg_name in EXP67_FINALS:
        for optimizer in ("weaveshare", "triweave"):
            for final in EXP67_FINALS[agg_name]:
                if optimizer == "weaveshare":
                    trees = weaveshare(specs, (final,), ("panes", "pairs", "cutty"))
                    slicer = None
                else:
                    partial, trees, total = triweave(specs, (final,), ("panes", "pairs", "cutty"))
                    slicer = Slicer(partial, total - sum(t.estimate for t in trees)) if len(trees) > 1 else None
                    if slicer is None:
                        trees = [price(specs, t.members, (t.partial,), (t.final,)) for t in trees]
                out.append((agg_name, optimizer, final, trees, slicer))
    return out


def _groups(specs, qs, trees, slicer):
    return [Group([qs[i] for i in t.members], t.partial, t.final, t.estimate, slicer) for t in trees]


def run(cfg, specs, elements: int, run_plan, queries_of, aggs) -> tuple[dict, list]:
    """Calibrate each executor that covers every plan, then run Exp. 6-7 on
    it.  Returns the calibrations (by executor) and the records."""
    plans = exp67_plans(specs)
    calibrations, records = {}, []
    for name in EXECUTORS:
        why = set()
        with executor(name):
            for a, _, _, t, sl in plans:
                qs = queries_of(specs, aggs[a])
                why.add(SharedWindows(qs, plan=_groups(specs, qs, t, sl)).compiled_why_not)
        if name == "compiled" and why != {""}:
            calibrations[name] = {"executor": name, "skipped": "the compiled push does not run every plan: "
                                  + "; ".join(sorted(w for w in why if w))}
            cfg.log(f"  mqo exp67 compiled: skipped ({calibrations[name]['skipped']})")
            continue
        # whole slides of the calibration plans, so each counts exactly its answers
        cal = calibrations[name] = calibrate(cfg, run_plan, name, -(-max(200, elements) // CAL_S) * CAL_S)
        w = operations.Weights(**cal["weights"]) if "weights" in cal else None
        if w is None:  # the plans still run: the calls-only estimate is compared
            cfg.log(f"  mqo calibration {name}: {cal['error']}")
        else:
            cfg.log(f"  mqo calibration {name}: ns per " + ", ".join(f"{k} {v:.1f}" for k, v in cal["ns"].items())
                    + "; weights (calls) " + ", ".join(f"{k} {v:.2f}" for k, v in cal["weights"].items()))
        with executor(name):
            for agg_name, optimizer, final, trees, slicer in plans:
                groups = _groups(specs, queries_of(specs, aggs[agg_name]), trees, slicer)
                # the fastest of EXP67_REPEATS runs, as the calibration takes its plans'
                rec = max((run_plan(specs, groups, aggs[agg_name], elements, cfg) for _ in range(EXP67_REPEATS)),
                          key=lambda r: r["elements_per_s_cpu"])
                numeric = [([specs[i] for i in t.members], t.partial, t.final) for t in trees]
                shared = slicer is not None
                c = operations.counts(numeric, shared_slicing=shared)
                rec.update(part="exp67", agg=agg_name, optimizer=optimizer, final=final, run_on=name,
                           counts=c._asdict(),
                           operations=None if w is None else operations.operations(numeric, w, shared_slicing=shared))
                records.append(rec)
                cfg.log(f"  mqo exp67 [{name}] {agg_name} {optimizer:<10} {final:<18} "
                        f"{rec['elements_per_s_cpu']:>10,.0f} el/s cpu  {rec['calls_per_element']:>7.2f} calls/el "
                        f"(est {rec['estimate']:.2f}), ops est {rec['operations'] or 0:.1f}, {rec['trees']} trees, "
                        f"ran {rec['executor']}")
    return calibrations, records


def deviation(pairs) -> float | None:
    """The paper's Exp. 6-7 statistic: scale both series so their largest
    readings are equal, then the mean of |estimated - measured| / measured."""
    pairs = [(e, m) for e, m in pairs if e and m]
    if not pairs:
        return None
    e_max = max(e for e, _ in pairs)
    m_max = max(m for _, m in pairs)
    return sum(abs(e / e_max - m / m_max) / (m / m_max) for e, m in pairs) / len(pairs)


def summarize(records) -> dict:
    """Per optimizer and executor: the deviation of the calls-only and of the
    operations estimate (CPU and wall time), and the calls' error."""
    s: dict = {}
    for optimizer in ("weaveshare", "triweave"):
        for name in EXECUTORS:
            recs = [r for r in records if r.get("part") == "exp67" and r["optimizer"] == optimizer
                    and r.get("run_on") == name]
            if not recs:
                continue
            s.setdefault(f"exp67_{optimizer}", {})[name] = {
                "plans": len(recs),
                "ran_on": sorted({r["executor"] for r in recs}),
                "calls_deviation_cpu": deviation([(1 / r["estimate"], r["elements_per_s_cpu"]) for r in recs]),
                "calls_deviation": deviation([(1 / r["estimate"], r["elements_per_s"]) for r in recs]),
                "operations_deviation_cpu": deviation([(1 / r["operations"], r["elements_per_s_cpu"]) for r in recs
                                                       if r["operations"]]),
                "operations_deviation": deviation([(1 / r["operations"], r["elements_per_s"]) for r in recs
                                                   if r["operations"]]),
                "calls_error_mean": sum(abs(r["estimate"] - r["calls_per_element"]) / r["calls_per_element"]
                                        for r in recs) / len(recs),
            }
    return s


def target(s: dict):
    """The issue's target on the uniform (pure-Python) executor, operations
    estimate, CPU time: ``(measured text, met)`` or None."""
    devs = {k[6:]: v["python"]["operations_deviation_cpu"] for k, v in s.items()
            if k.startswith("exp67_") and "python" in v}
    if not devs:
        return None
    if None in devs.values():
        return "no operations estimate: the calibration gave no weights (see calibration)", False
    text = ", ".join(f"{k} {d:.0%}" for k, d in devs.items())
    calls = ", ".join(f"{k[6:]} {v['python']['calls_deviation_cpu']:.0%}" for k, v in s.items()
                      if k.startswith("exp67_") and "python" in v)
    return (f"operations estimate, pure-Python executor, CPU time: {text} (calls only: {calls})",
            sum(devs.values()) / len(devs) <= 0.25)


def report_lines(data: dict, table, fmt_num) -> list:
    """The calibration and Exp. 6-7 tables."""
    lines = []
    for name, cal in data.get("calibration", {}).items():
        if "weights" in cal:
            w = cal["weights"]
            lines += ["", f"Calibration on the {name} executor (ns per operation, CPU): "
                      + ", ".join(f"{k} {v:.1f}" for k, v in cal["ns"].items())
                      + "; weights in calls: " + ", ".join(f"{k} {v:.2f}" for k, v in w.items())]
        else:
            lines += ["", f"Calibration on the {name} executor: {cal.get('skipped') or cal.get('error')}"]
    for optimizer in ("weaveshare", "triweave"):
        recs = [r for r in data["records"] if r.get("part") == "exp67" and r["optimizer"] == optimizer]
        if recs:
            rows = [[r["run_on"], r["agg"], r["final"], str(r["trees"]), r["executor"],
                     fmt_num(r["elements_per_s_cpu"], 0), f"{r['calls_per_element']:.2f}", f"{r['estimate']:.2f}",
                     "-" if r["operations"] is None else f"{r['operations']:.1f}"] for r in recs]
            lines += ["", f"Exp. {6 if optimizer == 'weaveshare' else 7} ({optimizer}): one final technique per plan",
                      table(["executor", "agg", "final", "trees", "ran", "el/s cpu", "calls/el", "calls est",
                             "ops est"], rows)]
    s = data.get("summary", {})
    for k in ("exp67_weaveshare", "exp67_triweave"):
        for name, e in s.get(k, {}).items():
            ops = e["operations_deviation_cpu"], e["operations_deviation"]
            lines.append(f"  {k[6:]} on {name}: deviation calls-only {e['calls_deviation_cpu']:.0%}, operations "
                         + ("(no calibration)" if None in ops else f"{ops[0]:.0%}")
                         + f" (CPU; wall {e['calls_deviation']:.0%}"
                         + ("" if None in ops else f" and {ops[1]:.0%}") + ")")
    return lines

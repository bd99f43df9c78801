"""The MQO experiment's parameters part: the same queries (sum, Q = 100) at
several ``(S_max, O_max)``, and the issue's targets judged at the point
nearest the paper's workload that a run affords.

The issue's workload is ``S_max`` 1,000 with ``O_max`` 10,000 (windows of
10^7 elements); the main tables of ``bench mqo`` use ``O_max`` 10 so that
every plan, the pure-Python ones and their counting runs included, fits a
run.  This part measures the cheapest shared plans, the paper's Panes and
``separate`` at larger ``O_max`` too, and :func:`targets` judges the
throughput and memory targets at the largest ``O_max`` measured with the
paper's ``S_max``, next to the main tables' verdicts.
"""

from __future__ import annotations

#: Plans of the parameters part (sum): the cheapest shared ones, the paper's
#: Panes, and the baseline.
PARAM_PLANS = ["auto", "cutty+rint", "cutty+flatfit", "panes+naive", "separate"]


def summarize(records: list) -> list[dict]:
    """Per ``(S_max, O_max)``: the fastest shared plan (CPU time) and its
    ratios to ``separate`` and to Panes with the naive final, ``auto``'s
    ratio, and what each holds against ``separate``."""
    params: dict = {}
    for r in records:
        if r.get("part") == "params":
            params.setdefault((r["s_max"], r["o_max"]), {})[r["plan"]] = r
    out = []
    for (s_max, o_max), plans in params.items():
        sep, naive = plans.get("separate"), plans.get("panes+naive")
        shared = [r for k, r in plans.items() if k not in ("separate", "panes+naive")]
        if not (sep and naive and shared):
            continue
        best = max(shared, key=lambda r: r["elements_per_s_cpu"])
        auto = plans.get("auto")
        out.append({
            "s_max": s_max, "o_max": o_max, "best_plan": best["plan"],
            "results_per_element": best["results_per_element"],
            "best_over_separate": best["elements_per_s"] / sep["elements_per_s"],
            "best_over_separate_cpu": best["elements_per_s_cpu"] / sep["elements_per_s_cpu"],
            "best_over_panes_naive_cpu": best["elements_per_s_cpu"] / naive["elements_per_s_cpu"],
            "auto_over_separate_cpu": None if auto is None else auto["elements_per_s_cpu"] / sep["elements_per_s_cpu"],
            "auto_over_panes_naive_cpu": None if auto is None
            else auto["elements_per_s_cpu"] / naive["elements_per_s_cpu"],
            "held_best_over_separate": best["held"] / sep["held"],
            "held_auto_over_separate": None if auto is None else auto["held"] / sep["held"],
        })
    return out


def targets(entries: list, paper_s_max: int) -> dict:
    """The issue's targets (sum) at the largest ``O_max`` measured with the
    paper's ``S_max``, for the plan ``auto`` chooses: ``(measured text,
    met)`` by target name."""
    near = [e for e in entries if e["s_max"] == paper_s_max and e["auto_over_separate_cpu"] is not None]
    out: dict = {}
    if near:
        e = max(near, key=lambda e: e["o_max"])
        at = f"sum, S_max {e['s_max']}, O_max {e['o_max']} (nearest measured to the paper's O_max 10,000), auto"
        out[f"{at}: >= 20x separate (CPU)"] = (f"{e['auto_over_separate_cpu']:.1f}x",
                                                e["auto_over_separate_cpu"] >= 20)
        out[f"{at}: >= 5x panes (Panes + naive final, CPU)"] = (f"{e['auto_over_panes_naive_cpu']:.1f}x",
                                                                e["auto_over_panes_naive_cpu"] >= 5)
        out[f"{at}: held <= 1/10 of separate"] = (f"{e['held_auto_over_separate']:.4f}",
                                                  e["held_auto_over_separate"] <= 0.1)
    if entries:
        worst = min(entries, key=lambda e: e["auto_over_separate_cpu"] or 0)
        out["sum, every (S_max, O_max) measured: auto never loses to separate by more than 10% (CPU)"] = (
            f"worst auto/separate {worst['auto_over_separate_cpu']:.1f}x at S_max {worst['s_max']}, "
            f"O_max {worst['o_max']}", worst["auto_over_separate_cpu"] >= 0.9)
    return out


def report_lines(data: dict, entries: list, table, fmt_num) -> list[str]:
    """The part's two tables: every plan's measurements, then the ratios."""
    lines: list[str] = []
    recs = [r for r in data["records"] if r.get("part") == "params"]
    if recs:
        rows = [[str(r["s_max"]), str(r["o_max"]), r["plan"], fmt_num(r["elements_per_s"], 0),
                 fmt_num(r["elements_per_s_cpu"], 0), f"{r['results_per_element']:.1f}",
                 f"{r['calls_per_element']:.2f}", str(r["held"]), str(r["held_estimate"])] for r in recs]
        lines += ["", f"Parameters (sum, Q={data['config']['q']})",
                  table(["S_max", "O_max", "plan", "el/s", "el/s cpu", "results/el", "calls/el", "held",
                         "held est"], rows)]
    if entries:
        rows = [[str(e["s_max"]), str(e["o_max"]), e["best_plan"], f"{e['results_per_element']:.1f}",
                 f"{e['best_over_separate_cpu']:.1f}", f"{e['best_over_panes_naive_cpu']:.1f}",
                 "-" if e["auto_over_separate_cpu"] is None else f"{e['auto_over_separate_cpu']:.1f}",
                 "-" if e["auto_over_panes_naive_cpu"] is None else f"{e['auto_over_panes_naive_cpu']:.1f}",
                 f"{e['held_best_over_separate']:.4f}",
                 "-" if e["held_auto_over_separate"] is None else f"{e['held_auto_over_separate']:.4f}"]
                for e in entries]
        lines += ["", "Parameters: ratios on CPU time (best shared plan, and auto)",
                  table(["S_max", "O_max", "best", "results/el", "x separate", "x panes+naive",
                         "auto x separate", "auto x panes+naive", "held/separate", "auto held/separate"], rows)]
    return lines

"""Markdown tables from the benchmark JSON, for docs/benchmarks.md.

    python -m bench.report [--results bench/results]            # print every section
    python -m bench.report --update docs/benchmarks.md          # refresh the generated sections
    python -m bench.report --replot                             # redraw exp1-3 PNGs from the JSON

``--update`` replaces, in the given file, the text between
``<!-- BEGIN generated:NAME -->`` and ``<!-- END generated:NAME -->`` with
section NAME (machine, exp1, exp1_calls, exp2, exp2_calls, exp3, latency,
targets, spark-batch, spark-before, spark-demo, spark-growth, spark-stream, spark-keys, spark-event-time,
spark-sizes, spark-tasks); the prose around them is left alone.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from . import (common, exp1, exp2, exp3, spark_batch, spark_before, spark_demo, spark_event_time, spark_growth,
               spark_keys, spark_sizes, spark_stream, spark_tasks)
from .common import REPO, fmt_ns, fmt_num, fmt_ratio, markdown_table, pow2


def _load(results: Path, name: str) -> dict | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def platform_rows(m: dict) -> list[list]:
    """The machine table's memory, Python and platform rows."""
    return [["memory", f"{m.get('memory_gb', '?')} GB"],
            ["Python", f"{m.get('python_implementation')} {m.get('python')} ({m.get('python_build')})"],
            ["platform", m.get("platform")]]


def machine(d: dict) -> str:
    m = d["machine"]
    rows = [
        ["CPU", f"{m.get('cpu_model')} ({m.get('logical_cores')} logical / {m.get('physical_cores', '?')} physical cores, "
                f"{m.get('cpu_mhz', '?')} MHz)"],
        *platform_rows(m),
        ["code", f"commit {m.get('git_commit', '')[:10]}"
                 + (f" + uncommitted {', '.join(m.get('git_changed_files', []))}" if m.get("git_changed_files") else "")
                 + f"; mta sources sha256 {m.get('mta_source_sha256', '?')}"],
    ]
    return markdown_table(["", ""], rows)


def runs(results: Path) -> str:
    rows = []
    for name in ("exp1", "exp2", "exp3", "latency"):
        d = _load(results, name)
        if d is None:
            continue
        m = d["machine"]
        rows.append([name, f"`{d.get('command')}`", m.get("date_utc", ""), f"{d.get('wall_seconds', 0) / 60:.1f} min",
                     f"{m.get('load_average_at_start', ['?'])[0]} / {m.get('load_average_at_end', ['?'])[0]}",
                     m.get("mta_source_sha256", "?")])
    return markdown_table(["experiment", "command (run from the snapshot by bench/run_full.sh)", "started (UTC)",
                           "wall time", "load avg start / end", "mta sha256"], rows)


def _exp1_grid(d: dict, key: str, fmt) -> str:
    eng = exp1.by_engine(d)
    names = list(eng)
    rows = []
    for n in d["config"]["sizes"]:
        def get(e, k=key):
            r = eng.get(e, {}).get(n)
            return None if r is None else r[k]
        row = [pow2(n)] + [fmt(get(e)) for e in names]
        if fmt is fmt_ns:
            a = get("AMTA")
            row += [fmt_ratio(a, get(o)) for o in ("DABA", "TwoStacks", "LMTA")]
        rows.append(row)
    head = ["N"] + names + (["AMTA/DABA", "AMTA/TwoStacks", "AMTA/LMTA"] if fmt is fmt_ns else [])
    return markdown_table(head, rows)


def exp1_section(d: dict) -> str:
    return "\n\n".join([
        "Mean wall time per update (`perf_counter_ns`):",
        _exp1_grid(d, "mean_ns", fmt_ns),
        "CPU time per update (`thread_time_ns`: this thread only, so time the scheduler gave to other "
        "processes on the 2 cores is not counted):",
        _exp1_grid(d, "mean_cpu_ns", fmt_ns),
    ])


def exp1_calls(d: dict) -> str:
    return _exp1_grid(d, "calls_per_update", fmt_num)


def _exp2_grid(d: dict, key: str, fmt, ratios: bool) -> str:
    eng = exp2.by_engine(d)
    names = list(eng)
    rows = []
    for k in d["config"]["evictions"]:
        def get(e):
            r = eng.get(e, {}).get(k)
            return None if r is None else r.get(key)
        row = [pow2(k)] + [fmt(get(e)) for e in names]
        if ratios:
            a = get("AMTA")
            row += [fmt_ratio(get(o), a) for o in ("DABA", "TwoStacks", "LMTA")]
        rows.append(row)
    head = ["k"] + names + (["DABA/AMTA", "TwoStacks/AMTA", "LMTA/AMTA"] if ratios else [])
    return markdown_table(head, rows)


def exp2_section(d: dict) -> str:
    return "\n\n".join([
        f"Wall time of the one `enforce()` that evicts k of N = {pow2(d['config']['window'])} elements "
        "(mean over the repetitions):",
        _exp2_grid(d, "enforce_ns", fmt_ns, True),
        "CPU time of the same calls:",
        _exp2_grid(d, "enforce_cpu_ns", fmt_ns, True),
    ])


def exp2_calls(d: dict) -> str:
    return "\n\n".join([
        "Monoid calls per enforce:",
        _exp2_grid(d, "enforce_calls", fmt_num, False),
        "Slowest of the first 64 inserts after the enforce (wall, max over the repetitions; "
        "deferred work such as a level queue compacting its dead prefix lands here):",
        _exp2_grid(d, "next_inserts_max_ns", fmt_ns, False),
        "The same, CPU time (`thread_time_ns`, so preemption by other processes is not counted):",
        _exp2_grid(d, "next_inserts_max_cpu_ns", fmt_ns, False),
        "Wall time of the `query()` right after the enforce:",
        _exp2_grid(d, "query_ns", fmt_ns, False),
        "Building the window (N untimed inserts): "
        + ", ".join(f"{e} {b['build_s']:.1f} s" for e, b in d.get("builds", {}).items() if "build_s" in b) + ".",
    ])


def exp3_section(d: dict) -> str:
    g = exp3.grid(d)
    names = exp3.engine_order(d)
    out = []
    for key, title in (("mean_ns", "Mean wall time per update"), ("mean_cpu_ns", "CPU time per update")):
        rows = []
        for label, recs in g.items():
            a = recs.get("AMTA", {}).get(key)
            rows.append([label] + [(fmt_ns(recs[e][key]) + ("" if recs[e]["complete"] else " *")) if e in recs else "n/a"
                                   for e in names]
                        + [fmt_ratio(a, recs.get(x, {}).get(key)) for x in ("DABA", "TwoStacks", "LMTA")])
        out.append(f"{title}:")
        out.append(markdown_table(["aggregation"] + names + ["AMTA/DABA", "AMTA/TwoStacks", "AMTA/LMTA"], rows))
    rows = []
    for label, recs in g.items():
        some = recs.get("AMTA") or next(iter(recs.values()))
        rec = recs.get("Recalc")
        rows.append([label, f"{some['mean_window']:,.0f}", f"{some['evicted']:,}",
                     f"{rec['updates']:,}" if rec else "-", f"`{str(some['result'])[:40]}`"])
    out.append("Window and the Recalc sample:")
    out.append(markdown_table(["aggregation", "mean window during the timed updates", "elements evicted",
                               "Recalc updates timed", "final result"], rows))
    return "\n\n".join(out)


def latency_section(d: dict) -> str:
    recs = [r for r in d["records"] if "error" not in r]
    rows = [[r["engine"], f"{r['updates']:,}", fmt_ns(r["mean_ns"]), fmt_ns(r["stdev_ns"]), fmt_ns(r["p50_ns"]),
             fmt_ns(r["p99_ns"]), fmt_ns(r["p99.9_ns"]), fmt_ns(r["p99.99_ns"]), fmt_ns(r["max_ns"]),
             str(r["spikes_over_10x_median"]), f"{r['loop_wall_over_cpu']:.2f}"] for r in recs]
    out = [markdown_table(["engine", "updates", "mean", "stdev", "p50", "p99", "p99.9", "p99.99", "max",
                           "> 10x p50", "wall/CPU"], rows)]
    by = {r["engine"]: r for r in recs}
    a = by.get("AMTA")
    if a:
        rows = [[f"AMTA/{o}"] + [fmt_ratio(a[k], by[o][k]) for k in ("mean_ns", "p50_ns", "p99_ns", "p99.9_ns", "max_ns")]
                for o in ("DABA", "TwoStacks", "SlickDeque", "LMTA") if o in by]
        out.append(markdown_table(["ratio", "mean", "p50", "p99", "p99.9", "max"], rows))
    return "\n\n".join(out)


def _clocks(d: dict | None):
    """``(clock, summary)`` for the wall and CPU summaries of ``d`` (none
    without results)."""
    for key, label in (("summary", "wall"), ("summary_cpu", "CPU")):
        if d:
            yield label, d.get(key) or {}


def _met(met: bool) -> str:
    return "met" if met else "**missed**"


def targets(results: Path) -> str:
    rows = []
    for label, s in _clocks(_load(results, "exp1")):
        f = s.get("amta_flatness")
        if f:
            rows.append([f"AMTA flat over {f['sizes']}: max/min <= 1.5", label,
                         f"{f['max_over_min']:.2f} ({fmt_ns(f['min_ns'])} .. {fmt_ns(f['max_ns'])}); "
                         f"2^22 / 2^10 = {f['largest_over_smallest_size']:.2f}", _met(f["met"])])
        for key, name, lim in (("amta_over_daba", "DABA", "1"), ("amta_over_twostacks", "TwoStacks", "1.5")):
            r = s.get(key)
            if r:
                rows.append([f"AMTA/{name} <= {lim} for N >= 2^9", label,
                             f"max {r['max']:.2f}, geomean {r['geomean']:.2f}, min {r['min']:.2f} "
                             f"({r['sizes_meeting']}/{len(r['ratios'])} sizes meet)", _met(r["met"])])
    for label, s in _clocks(_load(results, "exp2")):
        t = s.get("mta_bulk_target")
        if t:
            rows.append([f"bulk eviction of {pow2(s['largest_eviction'])} < 500 us (AMTA, LMTA)", label,
                         ", ".join(f"{m} {fmt_ns(v)}" for m, v in t["latency_ns"].items())
                         + "; worst k: " + ", ".join(f"{m} {fmt_ns(s['engines'][m]['max_over_k_ns'])} at "
                                                     f"{s['engines'][m]['worst_k']}" for m in t["latency_ns"]),
                         _met(t["met"])])
        b = s.get("baselines_linear")
        if b:
            rows.append([f"baselines grow linearly in k (log-log slope, k >= {pow2(s['slope_fit_from_k'])})", label,
                         ", ".join(f"{e} {v:.2f}" for e, v in b["slopes"].items() if v is not None), _met(b["met"])])
    return markdown_table(["target", "clock", "measured", "verdict"], rows)


#: The sections each experiment's results give, in page order.
SECTIONS = {
    "exp1": (("exp1", exp1_section), ("exp1_calls", exp1_calls)),
    "exp2": (("exp2", exp2_section), ("exp2_calls", exp2_calls)),
    "exp3": (("exp3", exp3_section),),
    "latency": (("latency", latency_section),),
}


def sections_of(loaded: dict[str, dict | None], table: dict[str, tuple]) -> dict[str, str]:
    """``{section: render(data)}`` for every experiment of ``table`` whose
    results were found."""
    return {section: render(loaded[name]) for name, pairs in table.items() if loaded.get(name)
            for section, render in pairs}


def sections(results: Path) -> dict[str, str]:
    loaded = {name: _load(results, name) for name in SECTIONS}
    first = next((d for d in loaded.values() if d), None)
    out: dict[str, str] = {}
    if first:
        out.update(machine=machine(first), runs=runs(results))
    out.update(sections_of(loaded, SECTIONS))
    if loaded["exp1"] or loaded["exp2"]:
        out["targets"] = targets(results)
    for name, mod in (("spark-batch", spark_batch), ("spark-before", spark_before), ("spark-demo", spark_demo),
                      ("spark-growth", spark_growth),
                      ("spark-stream", spark_stream), ("spark-keys", spark_keys),
                      ("spark-event-time", spark_event_time), ("spark-sizes", spark_sizes),
                      ("spark-tasks", spark_tasks)):
        d = _load(results, name)
        if d is not None:
            out[name] = "\n\n".join([
                f"`{d.get('command')}`, {d['machine']['date_utc'][:16]} UTC, {d['machine']['cpu_model']} "
                f"({d['machine']['logical_cores']} cores), Spark {d['spark']['spark']} on {d['spark']['master']}, "
                f"load average {d['machine'].get('load_average_at_start', ['?'])[0]} at the start, "
                f"{d['machine'].get('load_average_at_end', ['?'])[0]} at the end; "
                f"commit {d['machine'].get('git_commit', '')[:10]}.",
                common.render_tables(mod.tables(d), markdown=True),
                "\n".join(f"* {line}" for line in mod.summary_lines(d))])
    return out


def update(path: Path, secs: dict[str, str]) -> list[str]:
    text = path.read_text()
    done = []
    for name, body in secs.items():
        pat = re.compile(rf"(<!-- BEGIN generated:{name} -->\n).*?(<!-- END generated:{name} -->)", re.S)
        text, n = pat.subn(lambda m: m.group(1) + body + "\n" + m.group(2), text)
        if n:
            done.append(name)
    path.write_text(text)
    return done


def cli(argv, *, prog: str, sections, plotted: dict) -> int:
    """The command line of a report module: print the generated sections of
    ``sections(results)``, or refresh them in a markdown file (``--update``),
    or redraw the PNGs of ``plotted`` (name -> experiment module) first."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    ap.add_argument("--update", type=Path, help="markdown file whose generated sections to refresh")
    ap.add_argument("--replot", action="store_true",
                    help=f"redraw the {', '.join(plotted)} PNGs from their JSON")
    args = ap.parse_args(argv)
    if args.replot:
        for name, mod in plotted.items():
            d = _load(args.results, name)
            if d is not None:
                mod.plot(d, args.results / f"{name}.png")
                print("replotted", args.results / f"{name}.png")
    secs = sections(args.results)
    if args.update:
        print("updated:", ", ".join(update(args.update, secs)) or "nothing")
    else:
        for name, body in secs.items():
            print(f"<!-- BEGIN generated:{name} -->\n{body}\n<!-- END generated:{name} -->\n")
    return 0


def main(argv=None) -> int:
    return cli(argv, prog="python -m bench.report", sections=sections,
               plotted={"exp1": exp1, "exp2": exp2, "exp3": exp3})


if __name__ == "__main__":
    raise SystemExit(main())

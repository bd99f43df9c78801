"""Markdown tables from the store benchmarks' JSON, for docs/benchmarks-stores.md.

    python -m bench.report_stores [--results bench/results]                 # print every section
    python -m bench.report_stores --update docs/benchmarks-stores.md        # refresh the generated sections
    python -m bench.report_stores --replot                                  # redraw kvs1/kvs2/exp4 PNGs

``--update`` replaces, in the given file, the text between
``<!-- BEGIN generated:NAME -->`` and ``<!-- END generated:NAME -->`` with
section NAME (machine, runs, targets, kvs1, kvs1_traffic, kvs2, kvs2_traffic,
exp4); the prose around them is left alone.
"""

from __future__ import annotations

from pathlib import Path

from . import exp4, kvs1, kvs2, storebench
from .common import fmt_ns, markdown_table, pow2
from .report import _load, cli, platform_rows, sections_of

NAMES = ("kvs1", "kvs2", "exp4")


def machine(d: dict) -> str:
    m = d["machine"]
    s = d.get("stores", {})
    redis = s.get("backends", {}).get("redis", {})
    file = s.get("backends", {}).get("file", {})
    rows = [
        ["CPU", f"{m.get('cpu_model')} ({m.get('logical_cores')} logical / {m.get('physical_cores', '?')} physical "
                f"cores, {m.get('cpu_mhz', '?')} MHz), shared with other work"],
        *platform_rows(m),
        ["Redis", f"redis-server {s.get('redis_server_version')}, "
                  + ("started by the benchmark on a free loopback port, persistence off (`--save '' --appendonly no`)"
                     if redis.get("started_by_benchmark") else f"given with --redis ({redis.get('url')})")
                  + f"; redis-py {s.get('redis_py')}, hiredis {s.get('hiredis')}"],
        ["file store", f"SQLite {s.get('sqlite')} (WAL, synchronous=meta) in "
                       + ("a temporary directory" if file.get("temporary") else file.get("directory", "?"))
                       + f" on {file.get('filesystem', '?')}"],
        ["codec", f"msgpack {s.get('msgpack')}"],
        ["code", f"commit {m.get('git_commit', '')[:10]}; mta sources sha256 {m.get('mta_source_sha256', '?')}; "
                 f"stores sources sha256 {s.get('stores_source_sha256', '?')}"],
        ["level queues", f"buffer {s.get('buffer_size')} pairs, cache {s.get('cache_size')} pairs per level "
                         "(paper section 5.1)"],
    ]
    return markdown_table(["", ""], rows)


def runs(results: Path) -> str:
    rows = []
    for name in NAMES:
        d = _load(results, name)
        if d is None:
            continue
        m = d["machine"]
        start, end = m.get("load_average_at_start", ["?"] * 3), m.get("load_average_at_end", ["?"] * 3)
        rows.append([name, f"`{d.get('command')}`", d.get("profile"), m.get("date_utc", ""),
                     f"{d.get('wall_seconds', 0) / 60:.1f} min",
                     f"{' / '.join(map(str, start))}", f"{' / '.join(map(str, end))}"])
    return markdown_table(["experiment", "command (run by bench/run_full.sh from a snapshot)", "profile",
                           "started (UTC)", "wall time", "load avg at start (1 / 5 / 15 min)",
                           "load avg at end"], rows)


def _targets(results: Path, mod) -> dict:
    """The targets in the summary of ``mod``'s results ({} without results)."""
    d = _load(results, mod.NAME)
    return {} if d is None else (d.get("summary") or mod.summarize(d))["targets"]


def targets(results: Path) -> str:
    rows = []
    t = _targets(results, exp4).get("redis_2_25_under_150mb")
    if t:
        rows.append([f"a 2^25-element window on Redis, peak process memory < {exp4.RSS_TARGET_MB} MB", "exp4",
                     ", ".join(f"{k.split('/')[0]} {v:.1f} MB" for k, v in t["peak_rss_mb"].items())
                     + f" (window {t['window']})",
                     _verdict(t["met"], t["applies"])])
    d1 = _load(results, "kvs1")
    t = _targets(results, kvs1).get("redis_latency_within_2x")
    if t:
        r = (d1.get("summary") or kvs1.summarize(d1))["ratios"]
        rows.append(["constant-window per-update latency on Redis within 2x of the in-memory engine", "kvs1",
                     "; ".join(f"{k.split('/')[0]}: max {v:.2f}x (N = {t['at'][k]}), geomean "
                               f"{r[k]['geomean_wall']:.2f}x, total CPU max {r[k]['max_total_cpu']:.2f}x"
                               for k, v in t["max_ratio"].items()),
                     _verdict(t["met"], True)])
    t = _targets(results, kvs1).get("round_trips_per_update")
    if t:
        rows.append(["store round trips per update <= 1/100, constant windows", "kvs1",
                     ", ".join(f"{k} {v:.4f} (1 per {1 / v:,.0f})" if v else f"{k} 0" for k, v in t["max"].items()),
                     _verdict(t["met"], True)])
    t = _targets(results, kvs2).get("redis_bulk_eviction")
    if t:
        window = _load(results, "kvs2")["config"]["window"]
        rows.append(["bulk eviction of 2^22 - 1 elements on Redis < 5 ms", "kvs2",
                     ", ".join(f"{k.split('/')[0]} {fmt_ns(v)}" for k, v in t["latency_ns"].items())
                     + f" (N = {pow2(window)})",
                     _verdict(t["met"], t["applies"])])
    return markdown_table(["target (issue 3)", "experiment", "measured", "verdict"], rows)


def _verdict(met: bool, applies: bool) -> str:
    if not applies:
        return "not checked (smaller profile)"
    return "**met**" if met else "**missed**"


def kvs1_section(d: dict) -> str:
    cfgs, keys, labels = storebench.report_configs(d, "size")
    head = ["N"] + [labels[k] for k in keys] + [f"{labels[k]} / Mem" for k in keys if not k.endswith("/memory")]
    sizes = d["config"]["sizes"]
    return "\n\n".join([
        "Mean wall time per update, and store-backed / in-memory (same engine, same rounds):",
        markdown_table(head, storebench.with_ratios(cfgs, keys, sizes, "mean_ns")),
        "Total CPU per update (every thread of the process + the redis-server), and its ratio:",
        markdown_table(head, storebench.with_ratios(cfgs, keys, sizes, "mean_total_cpu_ns")),
    ])


def kvs1_traffic(d: dict) -> str:
    cfgs = kvs1.by_config(d)
    out = []
    for backend in ("redis", "file"):
        keys = [k for k in d["configs"] if k.endswith("/" + backend)]
        if not keys:
            continue
        rows = []
        for n in d["config"]["sizes"]:
            row = [pow2(n)]
            for k in keys:
                r = cfgs.get(k, {}).get(n)
                if r is None:
                    row += ["-"] * 5
                    continue
                pu, t = r["per_update"], r["traffic"]
                lookups = t["cache_hits"] + t["cache_misses"]
                row += [f"{pu['round_trips']:.4f}", f"{pu['bytes_written']:.1f} / {pu['bytes_read']:.1f}",
                        f"{pu['pairs_written']:.3f} / {pu['pairs_read']:.3f}",
                        f"{t['cache_hits']:,} / {t['cache_misses']:,}" + (f" ({t['cache_misses'] / lookups:.1e})"
                                                                          if lookups and t["cache_misses"] else ""),
                        f"{r['local_size']:,}"]
            rows.append(row)
        head = ["N"]
        for k in keys:
            e = k.split("/")[0]
            head += [f"{e} trips/update", f"{e} B written / read per update", f"{e} pairs w / r per update",
                     f"{e} cache hits / misses", f"{e} local_size"]
        out.append(f"**{backend}**:")
        out.append(markdown_table(head, rows))
    return "\n\n".join(out)


def kvs2_section(d: dict) -> str:
    cfgs, keys, labels = storebench.report_configs(d, "k")
    head = ["k"] + [labels[x] for x in keys] + [f"{labels[x]} / Mem" for x in keys if not x.endswith("/memory")]
    out = [f"Wall time of the one `enforce()` evicting k of N = {pow2(d['config']['window'])} elements "
           "(mean over the repetitions), and store-backed / in-memory:",
           markdown_table(head, storebench.with_ratios(cfgs, keys, d["config"]["evictions"], "enforce_ns", 1))]
    rows = [[labels[x], f"{b['build_s']:.1f} s"] + ([f"{b.get('local_size', 0):,}", str(b.get("height", ""))]
                                                   if "local_size" in b else ["-", "-"])
            for x, b in d.get("builds", {}).items() if "build_s" in b]
    out.append("Building the windows (N inserts):")
    out.append(markdown_table(["configuration", "build", "local_size after", "levels"], rows))
    return "\n\n".join(out)


def kvs2_traffic(d: dict) -> str:
    cfgs = kvs2.by_config(d)
    keys = [k for k in d["configs"] if not k.endswith("/memory")]
    rows = []
    for k in d["config"]["evictions"]:
        row = [pow2(k)]
        for x in keys:
            r = cfgs.get(x, {}).get(k)
            t = r and r["enforce_traffic"]
            row.append("-" if not t else f"{t['round_trips']:.1f} ({t['cache_misses']:.1f}) | "
                                         f"{t['pairs_read']:.0f} / {t['bytes_read']:.0f} B")
        rows.append(row)
    return markdown_table(["k"] + [f"{d['configs'][x]}: trips (misses) / pairs / bytes read" for x in keys], rows)


def exp4_section(d: dict) -> str:
    cfgs = exp4.by_config(d)
    keys = list(d["configs"])
    head = ["N"] + [d["configs"][k] for k in keys]
    sizes = d["config"]["sizes"]

    def speed(r):
        where = f"; {r['store_used_mb']:.0f} MB in the store" if r.get("store_used_mb") else ""
        return f"{fmt_ns(r['fill_ns_per_insert'])} / {fmt_ns(r['slide_ns_per_update'])}{where}"

    out = ["Peak RSS of the process (`VmHWM`) and, in brackets, `local_size()` (elements in process memory):",
           markdown_table(head, storebench.grid(
               cfgs, keys, sizes, lambda r: f"{r['peak_rss_mb']:.1f} MB ({r['local_size']:,})")),
           "Fill per insert / slide per update at constant size, and where the window went "
           "(redis-server `used_memory`, or the SQLite files):",
           markdown_table(head, storebench.grid(cfgs, keys, sizes, speed))]
    s = d.get("summary") or exp4.summarize(d)
    lines = []
    for k, c in s["configs"].items():
        extra = ""
        if c.get("bytes_per_element") is not None:
            extra = f"{c['bytes_per_element']:.1f} bytes per element"
        if c.get("extrapolated_capacity_log2"):
            extra += f"; the {d['machine'].get('memory_gb')} GB of RAM would hold about 2^{c['extrapolated_capacity_log2']}"
        base = f"baseline (interpreter + imports) {c['baseline_rss_mb']:.0f} MB"
        lines.append(f"* {c['label']}: {base}" + (f"; {extra}" if extra else ""))
    out.append("\n".join(lines))
    errors = [r for r in d["records"] if "error" in r]
    if errors:
        out.append("\n".join(f"* ERROR {r['label']} N = {pow2(r['size'])}: {r['error']}" for r in errors))
    return "\n\n".join(out)


#: The sections each experiment's results give, in page order.
SECTIONS = {
    "kvs1": (("kvs1", kvs1_section), ("kvs1_traffic", kvs1_traffic)),
    "kvs2": (("kvs2", kvs2_section), ("kvs2_traffic", kvs2_traffic)),
    "exp4": (("exp4", exp4_section),),
}


def sections(results: Path) -> dict[str, str]:
    loaded = {name: _load(results, name) for name in NAMES}
    first = next((d for d in loaded.values() if d), None)
    out: dict[str, str] = {}
    if first:
        out.update(machine=machine(first), runs=runs(results), targets=targets(results))
    out.update(sections_of(loaded, SECTIONS))
    return out


def main(argv=None) -> int:
    return cli(argv, prog="python -m bench.report_stores", sections=sections,
               plotted={"kvs1": kvs1, "kvs2": kvs2, "exp4": exp4})


if __name__ == "__main__":
    raise SystemExit(main())

"""Experiment 4 (MTA paper section 5.7, Fig. 8): process memory of a big window.

The paper gave each engine a JVM heap and a window capacity of 2^25
updates; the KVS AMTA and LMTA reached it with a 512 MB heap, the in-memory
engines needed 32 GB.  Here every configuration runs in a **fresh child
process** (so that its peak resident memory is its own): it builds a window
of ``N`` elements (count monoid, every update the int 1, as Experiment 1),
then slides it at constant size for a few more updates, and reports

* the peak resident set size (``VmHWM``, the kernel's high-water mark of
  the process's RSS; ``getrusage().ru_maxrss`` is recorded too, but on Linux
  it also counts the parent's image replaced by ``exec``) and the RSS after
  the imports (the interpreter's own share), sampled RSS while
  filling (psutil), and the final RSS;
* ``local_size()`` (elements held in process memory) and the window's height;
* for store-backed engines the store traffic, and where the data went
  (``used_memory`` of the redis-server, or the SQLite file's size);
* the fill rate and the slowest chunk of inserts (the paper's 5 s timeout).

Configurations: the in-memory AMTA and LMTA ("Mem.") and the same engines
with their level queues in Redis and in the file store ("KVS"), buffer and
cache of 512 pairs.  The cyclic garbage collector stays on (the default).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from itertools import repeat

from . import common, storebench
from .common import REPO, RunConfig, fmt_ns, pow2
from .experiment import report_text, save_figure, verdict

NAME = "exp4"

#: ``lmta_max_log2``: the Log MTA stops at this size.  Its O(log n) inserts make
#: a fill of 2^25 take 6 to 12 minutes per configuration, and the target is
#: the AMTA's; the LMTA's level structure, hence its memory, is the same.
PROFILES = {
    "full": dict(log2_sizes=[21, 23, 25], lmta_max_log2=23, slide=1 << 16, chunk=1 << 16),
    "quick": dict(log2_sizes=[18, 20], slide=1 << 14, chunk=1 << 14),
    "tiny": dict(log2_sizes=[12], slide=1 << 10, chunk=1 << 10),
}

#: Target (issue 3): a 2^25-element window on Redis in under 150 MB of process memory.
RSS_TARGET_MB = 150
TARGET_WINDOW = 1 << 25


def run(cfg: RunConfig) -> dict:
    p = PROFILES[cfg.profile]
    sizes = [1 << k for k in p["log2_sizes"]]
    lmta_max = 1 << p.get("lmta_max_log2", p["log2_sizes"][-1])
    confs = storebench.configs(cfg)
    with storebench.backends(cfg, cfg.store_backends) as b:
        job = storebench.open_run(NAME, cfg, b, confs, {
            "sizes": sizes, "slide_updates": p["slide"], "chunk": p["chunk"],
            "monoid": "count: int +, identity 0 (as exp1)", "value": "every update is the int 1",
            "wsp": "total - prefix >= N", "operation": "a fresh child process per (configuration, N): "
            "N inserts, then slide_updates pushes at constant size, then (store-backed) a checkpoint",
            "buffer_size": storebench.BUFFER_SIZE, "cache_size": storebench.CACHE_SIZE,
            "gc": "enabled (the default)", "lmta_max_size": lmta_max,
        })
        data = job.data
        data["notes"] = [
            "Peak RSS = VmHWM of the child process (everything it ever held: interpreter, imports, "
            "redis-py, the engine); baseline = RSS after the imports, before the engine and the store client.",
            "Every element is the int 1, a shared object: in-memory figures are the list slots "
            "(8 bytes per reference) plus the upper levels' sums; distinct values would add their own size.",
        ]
        records = data["records"] = []
        for n in sizes:
            for conf in confs:
                if conf.engine == "LMTA" and n > lmta_max:
                    continue
                spec = {"engine": conf.engine, "backend": conf.backend, "n": n, "slide": p["slide"],
                        "chunk": p["chunk"], "url": b.urls.get(conf.backend) if conf.backend else None}
                rec = run_child(spec, cfg)
                rec.update({"config": conf.key, "label": conf.label, "engine": conf.engine,
                            "backend": conf.backend or "memory", "size": n})
                records.append(rec)
                if "error" in rec:
                    cfg.log(f"  exp4 N={pow2(n)} {conf.label:<15} ERROR {rec['error']}")
                else:
                    cfg.log(f"  exp4 N={pow2(n)} {conf.label:<15} peak RSS {rec['peak_rss_mb']:8.1f} MB "
                            f"(baseline {rec['baseline_rss_mb']:.1f}), local_size {rec['local_size']:>9}, "
                            f"fill {rec['fill_s']:.1f} s ({fmt_ns(rec['fill_ns_per_insert'])}/insert), "
                            f"slowest chunk {fmt_ns(rec['slowest_chunk_ns_per_insert'])}/insert"
                            + (f", redis used_memory {rec['store_used_mb']:.0f} MB" if rec.get("store_used_mb")
                               and conf.backend == "redis" else "")
                            + (f", SQLite file {rec['store_used_mb']:.0f} MB" if rec.get("store_used_mb")
                               and conf.backend == "file" else ""))
                job.save()
    return job.finish(plot, summary=summarize)


def run_child(spec: dict, cfg: RunConfig) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [x for x in [env.get("PYTHONPATH")] if x])
    proc = subprocess.run([sys.executable, "-m", "bench.exp4", "--child", json.dumps(spec)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=6 * 3600)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"child exited with {proc.returncode}: {' | '.join(tail)}"}
    return json.loads(lines[-1])


# -- the child -------------------------------------------------------------------

def _rss_mb(proc) -> float:
    return proc.memory_info().rss / 2**20


def _maxrss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / 2**20  # KiB on Linux, bytes on macOS


def _peak_mb() -> float:
    """This process image's peak RSS: ``VmHWM`` from /proc/self/status on
    Linux.  ``ru_maxrss`` is not used for the figure because on Linux it
    keeps the high-water mark of the image replaced by ``exec`` -- a child
    spawned from a bigger parent reports at least the parent's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _maxrss_mb()


def child(spec: dict) -> dict:
    import psutil

    from .exp1 import COUNT, SizeWSP

    proc = psutil.Process()
    baseline = _rss_mb(proc)
    peak_before = _peak_mb()
    n, slide, chunk = spec["n"], spec["slide"], spec["chunk"]
    conf = storebench.Config(spec["engine"], spec["backend"])
    b = storebench.Backends({spec["backend"]: spec["url"]} if spec["backend"] else {}, {})
    wsp = SizeWSP(n)
    engine, store = conf.build(COUNT, wsp, b, window_id=f"exp4-{spec['engine']}-{n}-{os.getpid()}")
    after_open = _rss_mb(proc)
    insert = engine.insert
    series = []
    slowest = 0
    pc = time.perf_counter_ns
    t_start = pc()
    done = 0
    sample_every = max(chunk, n // 256)
    while done < n:
        step = min(chunk, n - done)
        t0 = pc()
        for _ in repeat(None, step):
            insert(1)
        dt = pc() - t0
        slowest = max(slowest, dt / step)
        done += step
        if done % sample_every == 0 or done == n:
            series.append([done, round(_rss_mb(proc), 1)])
    fill_ns = pc() - t_start
    push = engine.push
    t0 = pc()
    for _ in repeat(None, slide):
        push(1)
    slide_ns = pc() - t0
    assert len(engine) == n and engine.query() == n
    out = {
        "n": n, "baseline_rss_mb": round(baseline, 1), "peak_rss_before_engine_mb": round(peak_before, 1),
        "rss_after_open_mb": round(after_open, 1),
        "fill_s": fill_ns / 1e9, "fill_ns_per_insert": fill_ns / n, "slowest_chunk_ns_per_insert": slowest,
        "slide_ns_per_update": slide_ns / slide if slide else None,
        "local_size": engine.local_size(),
        "height": engine.height(), "rss_series_mb": series,
    }
    if store is not None:
        t0 = pc()
        version = engine.checkpoint()
        out["checkpoint_ms"] = (pc() - t0) / 1e6
        out["checkpoint_version"] = version
        out["traffic"] = storebench.counters(engine, store)
        out["store_stats"] = store.stats.as_dict()
        if spec["backend"] == "redis":
            import redis

            client = redis.Redis.from_url(spec["url"])
            try:
                out["store_used_mb"] = client.info("memory")["used_memory"] / 2**20
            finally:
                client.close()
        elif spec["backend"] == "file":
            from stores.sqlite_store import DB_NAME, parse_file_url

            path = os.path.join(parse_file_url(spec["url"]), DB_NAME)
            out["store_used_mb"] = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 2**20
    out["final_rss_mb"] = round(_rss_mb(proc), 1)
    out["peak_rss_mb"] = round(_peak_mb(), 1)
    out["ru_maxrss_mb"] = round(_maxrss_mb(), 1)
    # the window is no longer needed: Redis frees it; the file store's directory is removed by the parent
    storebench.close(engine, store, delete=spec["backend"] == "redis")
    return out


# -- summary, table, plot --------------------------------------------------------

def by_config(data: dict) -> dict[str, dict[int, dict]]:
    return storebench.by_config(data, "size")


def summarize(data: dict) -> dict:
    cfgs = by_config(data)
    s: dict = {"configs": {}, "targets": {}}
    largest = max(data["config"]["sizes"])
    for key, recs in cfgs.items():
        ns = sorted(recs)
        big = recs[ns[-1]]
        entry = s["configs"][key] = {
            "label": big["label"], "largest_size": pow2(ns[-1]),
            "peak_rss_mb": {pow2(n): recs[n]["peak_rss_mb"] for n in ns},
            "local_size": {pow2(n): recs[n]["local_size"] for n in ns},
            "baseline_rss_mb": big["baseline_rss_mb"],
        }
        if len(ns) >= 2:
            lo, hi = recs[ns[0]], recs[ns[-1]]
            entry["bytes_per_element"] = (hi["peak_rss_mb"] - lo["peak_rss_mb"]) * 2**20 / (ns[-1] - ns[0])
        if key.endswith("/memory") and entry.get("bytes_per_element"):
            mem_gb = data["machine"].get("memory_gb")
            if mem_gb:
                cap = (mem_gb * 2**30 - big["baseline_rss_mb"] * 2**20) / entry["bytes_per_element"]
                entry["extrapolated_capacity_elements"] = cap
                entry["extrapolated_capacity_log2"] = round(math.log2(cap), 1)
    redis = {k: v for k, v in cfgs.items() if k.endswith("/redis") and largest in v}
    if redis:
        s["targets"]["redis_2_25_under_150mb"] = {
            "target": f"a 2^25-element window on Redis with peak process memory < {RSS_TARGET_MB} MB",
            "peak_rss_mb": {k: v[largest]["peak_rss_mb"] for k, v in redis.items()},
            "window": pow2(largest),
            "met": all(v[largest]["peak_rss_mb"] < RSS_TARGET_MB for v in redis.values()),
            "applies": largest == TARGET_WINDOW,
        }
    return s


def report(data: dict) -> str:
    cfgs, keys, labels = storebench.report_configs(data, "size")
    sizes = data["config"]["sizes"]
    head = ["N"] + [labels[k] for k in keys]

    def speed(r):
        return (f"{fmt_ns(r['fill_ns_per_insert'])} | {fmt_ns(r['slide_ns_per_update'])}"
                + (f" | {r['store_used_mb']:.0f}" if r.get("store_used_mb") else ""))

    return report_text([
        storebench.heading(data, "Experiment 4 (Fig. 8): process memory of a window of N elements, one child "
                                 "process each", ram=True),
        "Peak RSS (MB) | local_size() (elements in process memory)",
        common.table(head, storebench.grid(cfgs, keys, sizes, lambda r: f"{r['peak_rss_mb']:.1f} | {r['local_size']:,}")),
        "",
        "Fill per insert | slide per update | where the window went (redis used_memory / SQLite file, MB)",
        common.table(head, storebench.grid(cfgs, keys, sizes, speed)),
        *(f"ERROR {r['label']} N = {pow2(r['size'])}: {r['error']}" for r in data["records"] if "error" in r),
    ], data, summary_lines(data))


def summary_lines(data: dict) -> list[str]:
    s = data.get("summary") or summarize(data)
    out = []
    for key, c in s["configs"].items():
        line = (f"{c['label']}: peak RSS " + ", ".join(f"{v:.0f} MB at {n}" for n, v in c["peak_rss_mb"].items())
                + f" (interpreter + imports {c['baseline_rss_mb']:.0f} MB)")
        if c.get("bytes_per_element") is not None:
            line += f"; {c['bytes_per_element']:.1f} bytes per element"
        if c.get("extrapolated_capacity_log2"):
            line += f"; this machine's RAM would hold about 2^{c['extrapolated_capacity_log2']} elements"
        out.append(line)
    t = s["targets"].get("redis_2_25_under_150mb")
    if t:
        out.append(f"Target: {t['window']}-element window on Redis with peak RSS < {RSS_TARGET_MB} MB: "
                   + ", ".join(f"{k.split('/')[0]} {v:.1f} MB" for k, v in t["peak_rss_mb"].items())
                   + ": " + verdict(t["met"], t["applies"],
                                    f"not checked (largest window here {t['window']}; the target is for 2^25)"))
    return out


def plot(data: dict, path) -> None:
    from .kvs1 import style

    plt = common.pyplot()
    cfgs, labels = by_config(data), data.get("configs", {})
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.4))
    ax = axes[0]
    for key, recs in cfgs.items():
        ns = sorted(recs)
        ax.plot(ns, [recs[n]["peak_rss_mb"] for n in ns], label=labels.get(key, key), **style(key))
    ax.axhline(RSS_TARGET_MB, color="k", ls=":", lw=1)
    ax.text(min(data["config"]["sizes"]), RSS_TARGET_MB, " 150 MB (target on Redis at 2^25)", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("peak RSS of the process (MB)")
    ax.set_title("Exp. 4: peak process memory (one child process each)", fontsize=10)
    ax.legend(fontsize=8)
    ax = axes[1]
    for key, recs in cfgs.items():
        ns = sorted(recs)
        ax.plot(ns, [max(recs[n]["local_size"], 1) for n in ns], label=labels.get(key, key), **style(key))
    ax.set_yscale("log")
    ax.set_ylabel("elements in process memory (local_size)")
    ax.set_title("local_size(): O(log n) levels x (buffer + cache) vs O(n)", fontsize=10)
    for ax in axes[:2]:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("window size N (elements)")
        ax.grid(True, which="both", alpha=0.3)
    ax = axes[2]
    largest = max(data["config"]["sizes"])
    for key, recs in cfgs.items():
        r = recs.get(largest)
        if r and r.get("rss_series_mb"):
            xs, ys = zip(*r["rss_series_mb"])
            ax.plot(xs, ys, label=labels.get(key, key), **dict(style(key), ms=0))
    ax.axhline(RSS_TARGET_MB, color="k", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("elements inserted")
    ax.set_ylabel("RSS (MB)")
    ax.set_title(f"RSS while filling the window of {pow2(largest)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    save_figure(plt, fig, path, storebench.caption(data, ram=True), y=0.005)


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--child":
        print(json.dumps(child(json.loads(argv[1]))), flush=True)
        return 0
    print("usage: python -m bench exp4 [--quick]  (python -m bench.exp4 --child SPEC is internal)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

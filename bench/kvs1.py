"""Experiment 1 with the level queues in a store: "KVS AMTA" and "KVS LMTA".

The paper's Fig. 6 setting (:mod:`bench.exp1`: count monoid, WSP keeping the
newest ``N``, every update ``engine.push(1)`` = insert + enforce + query)
for the AMTA and the LMTA in memory and with their level queues in Redis and
in the file store (SQLite), buffer and cache of 512 pairs per level (paper
section 5.1).  For each window size ``N``:

* every configuration builds its window (``N`` inserts, timed as the fill);
* then ``M = max(N, M_min)`` updates are run **interleaved**: in rounds,
  each configuration runs a chunk of pushes in turn (the order rotating from
  round to round), so that the in-memory and store-backed engines share the
  same moments of machine load and their ratio is measured side by side.
  After a store-backed engine's chunk its background flushes and prefetches
  are waited for (:func:`bench.storebench.drain`) inside its timed span: the
  work it queued is charged to it, never to the next engine.

Per update: wall time (``perf_counter_ns``), the main thread's CPU time, the
process's CPU time (all threads: the store I/O threads included), the
redis-server's CPU time (``INFO cpu``, read between chunks), and the store
traffic: round trips and bytes written and read (the store's
:class:`stores.StoreStats`), cache hits and misses (the engine's
``store_stats``).
"""

from __future__ import annotations

import gc
import math
import time
from itertools import repeat

from . import common, storebench
from .common import RunConfig, fmt_ns, pow2
from .exp1 import COUNT, SizeWSP
from .experiment import report_text, save_figure, verdict

NAME = "kvs1"

PROFILES = {
    "full": dict(log2_sizes=[0, 3, 6, 9, 10, 12, 14, 16, 18, 20, 22], m_min=1 << 16, chunk=1 << 14),
    "quick": dict(log2_sizes=[0, 6, 10, 14, 16], m_min=1 << 15, chunk=1 << 13),
    "tiny": dict(log2_sizes=[2, 12], m_min=1 << 12, chunk=1024),
}

#: Targets (issue 3): store-backed / in-memory latency, round trips per update.
LATENCY_RATIO_TARGET = 2.0
TRIPS_PER_UPDATE_TARGET = 0.01


def updates_for(n: int, m_min: int) -> int:
    return max(n, m_min)


def run(cfg: RunConfig) -> dict:
    p = PROFILES[cfg.profile]
    sizes = [1 << k for k in p["log2_sizes"]]
    confs = storebench.configs(cfg)
    with storebench.backends(cfg, cfg.store_backends) as b:
        job = storebench.open_run(NAME, cfg, b, confs, {
            "sizes": sizes,
            "updates_per_size": {str(n): updates_for(n, p["m_min"]) for n in sizes},
            "m_min": p["m_min"],
            "chunk": p["chunk"],
            "monoid": "count: int +, identity 0 (as exp1)",
            "wsp": "total - prefix >= N (Listing 3)",
            "value": "every update is the int 1",
            "operation": "engine.push(1) = insert + enforce + query, after a fill of N inserts; configurations "
                         "interleaved in chunks, store-backed chunks include waiting for their background I/O",
            "buffer_size": storebench.BUFFER_SIZE, "cache_size": storebench.CACHE_SIZE,
        })
        data = job.data
        data["notes"] = [
            "Ratios are store-backed / in-memory of the same engine, measured in the same rounds.",
            "Wall time includes waiting for the engine's background store I/O at the end of each chunk.",
            "process CPU = every thread of this process; server CPU = the redis-server's user + system CPU "
            "over the engine's chunks (so 'total CPU' = process + server is what the store path costs).",
            "Round trips and bytes are the store's own counters (stores.StoreStats): pair blobs, metadata "
            "excluded (no checkpoints here).",
        ]
        job.gc_note()
        records = data["records"] = []
        for n in sizes:
            m = updates_for(n, p["m_min"])
            try:
                recs = measure(confs, n, m, p["chunk"], b, cfg)
            except Exception as exc:  # report and go on with the next size
                records.append({"size": n, "error": repr(exc)})
                cfg.log(f"  kvs1 N={pow2(n):>5} ERROR {exc!r}")
                continue
            records.extend(recs)
            job.save()
    return job.finish(plot, summary=summarize)


class _Run:
    __slots__ = ("conf", "engine", "store", "wall", "cpu", "pcpu", "scpu", "updates", "fill_ns", "before")

    def __init__(self, conf, engine, store) -> None:
        self.conf, self.engine, self.store = conf, engine, store
        self.wall = self.cpu = self.pcpu = self.updates = 0
        self.scpu = 0.0
        self.fill_ns = 0
        self.before = None


def measure(confs, n: int, m: int, chunk: int, b, cfg: RunConfig) -> list[dict]:
    wsp = SizeWSP(n)
    runs: list[_Run] = []
    pc, tt, pt = time.perf_counter_ns, time.thread_time_ns, time.process_time_ns
    server = b.redis_client() if "redis" in b.urls else None
    try:
        with common.gc_paused(cfg):
            for conf in confs:
                engine, store = conf.build(COUNT, wsp, b)
                r = _Run(conf, engine, store)
                runs.append(r)
                t0 = pc()
                common.fill(engine, repeat(1, n))
                if store is not None:
                    storebench.drain()
                r.fill_ns = pc() - t0
                r.before = storebench.counters(engine, store)
            done = rnd = 0
            while done < m:
                step = min(chunk, m - done)
                for j in range(len(runs)):
                    r = runs[(j + rnd) % len(runs)]
                    push = r.engine.push
                    on_redis = r.conf.backend == "redis"
                    s0 = b.redis_cpu_s(server) if on_redis else 0.0
                    p0, c0, t0 = pt(), tt(), pc()
                    for _ in repeat(None, step):
                        push(1)
                    if r.store is not None:
                        storebench.drain()
                    t1, c1, p1 = pc(), tt(), pt()
                    r.wall += t1 - t0
                    r.cpu += c1 - c0
                    r.pcpu += p1 - p0
                    if on_redis:
                        r.scpu += b.redis_cpu_s(server) - s0
                    r.updates += step
                done += step
                rnd += 1
        out = []
        for r in runs:
            e = r.engine
            assert len(e) == n, f"{r.conf.label}: window has {len(e)} elements, expected {n}"
            result = e.query()
            assert result == n, f"{r.conf.label}: count {result}, expected {n}"
            traffic = storebench.delta(storebench.counters(e, r.store), r.before)
            rec = {
                "config": r.conf.key, "label": r.conf.label, "engine": r.conf.engine,
                "backend": r.conf.backend or "memory", "size": n, "updates": r.updates,
                "mean_ns": r.wall / r.updates, "mean_cpu_ns": r.cpu / r.updates,
                "mean_process_cpu_ns": r.pcpu / r.updates,
                "mean_server_cpu_ns": r.scpu * 1e9 / r.updates if r.conf.backend == "redis" else None,
                "fill_ns_per_insert": r.fill_ns / n,
                "traffic": traffic,
                "per_update": storebench.per(traffic, r.updates),
                "local_size": e.local_size() if r.store is not None else None,
                "height": e.height(),
                "result": result,
            }
            total_cpu = rec["mean_process_cpu_ns"] + (rec["mean_server_cpu_ns"] or 0)
            rec["mean_total_cpu_ns"] = total_cpu
            out.append(rec)
            pu = rec["per_update"]
            cfg.log(f"  kvs1 N={pow2(n):>5} {r.conf.label:<15} {rec['mean_ns']:>9.0f} ns/update "
                    f"(CPU: thread {rec['mean_cpu_ns']:.0f}, process {rec['mean_process_cpu_ns']:.0f}, "
                    f"total {total_cpu:.0f})  fill {rec['fill_ns_per_insert']:.0f} ns/insert"
                    + (f"  trips/update {pu['round_trips']:.5f}  B/update w {pu['bytes_written']:.1f} "
                       f"r {pu['bytes_read']:.1f}  hits {traffic['cache_hits']} misses {traffic['cache_misses']}"
                       f"  local {rec['local_size']}" if r.store is not None else ""))
        return out
    finally:
        for r in runs:
            storebench.close(r.engine, r.store)
        runs.clear()
        if server is not None:
            server.close()
        gc.collect()


# -- summary, table, plot --------------------------------------------------------

def by_config(data: dict) -> dict[str, dict[int, dict]]:
    return storebench.by_config(data, "size")


def _geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize(data: dict) -> dict:
    """Ratios (store-backed / in-memory) and the targets; computed, never asserted."""
    cfgs = by_config(data)
    s: dict = {"ratios": {}, "round_trips": {}, "targets": {}}
    for key, recs in cfgs.items():
        engine, backend = key.split("/")
        if backend == "memory":
            continue
        mem = cfgs.get(f"{engine}/memory", {})
        sizes = [n for n in sorted(recs) if n in mem]
        if not sizes:
            continue
        wall = {n: recs[n]["mean_ns"] / mem[n]["mean_ns"] for n in sizes}
        cpu = {n: recs[n]["mean_total_cpu_ns"] / mem[n]["mean_total_cpu_ns"] for n in sizes}
        worst = max(wall, key=wall.get)
        s["ratios"][key] = {
            "label": recs[sizes[0]]["label"],
            "wall": {pow2(n): round(v, 3) for n, v in wall.items()},
            "total_cpu": {pow2(n): round(v, 3) for n, v in cpu.items()},
            "max_wall": wall[worst], "max_wall_at": pow2(worst), "geomean_wall": _geomean(wall.values()),
            "max_total_cpu": max(cpu.values()), "geomean_total_cpu": _geomean(cpu.values()),
            "largest_size_wall": wall[sizes[-1]], "largest_size": pow2(sizes[-1]),
        }
        trips = {n: recs[n]["per_update"]["round_trips"] for n in sorted(recs)}
        tw = max(trips, key=trips.get)
        s["round_trips"][key] = {
            "label": recs[sizes[0]]["label"],
            "per_update": {pow2(n): trips[n] for n in trips},
            "max": trips[tw], "max_at": pow2(tw),
            "updates_per_round_trip_at_max": (1 / trips[tw]) if trips[tw] else None,
            "bytes_written_per_update": {pow2(n): recs[n]["per_update"]["bytes_written"] for n in recs},
            "bytes_read_per_update": {pow2(n): recs[n]["per_update"]["bytes_read"] for n in recs},
        }
    redis = {k: v for k, v in s["ratios"].items() if k.endswith("/redis")}
    if redis:
        s["targets"]["redis_latency_within_2x"] = {
            "target": f"constant-window per-update latency on Redis <= {LATENCY_RATIO_TARGET}x the in-memory "
                      "engine (wall time, every size)",
            "max_ratio": {k: v["max_wall"] for k, v in redis.items()},
            "at": {k: v["max_wall_at"] for k, v in redis.items()},
            "met": all(v["max_wall"] <= LATENCY_RATIO_TARGET for v in redis.values()),
        }
    if s["round_trips"]:
        s["targets"]["round_trips_per_update"] = {
            "target": f"store round trips per update <= {TRIPS_PER_UPDATE_TARGET} (1 in 100), constant windows",
            "max": {k: v["max"] for k, v in s["round_trips"].items()},
            "met": all(v["max"] <= TRIPS_PER_UPDATE_TARGET for v in s["round_trips"].values()),
        }
    return s


def report(data: dict) -> str:
    cfgs, keys, labels = storebench.report_configs(data, "size")
    sizes = data["config"]["sizes"]
    ratio_keys = [k for k in keys if not k.endswith("/memory")]

    def traffic(r):
        pu, t = r["per_update"], r["traffic"]
        return (f"{pu['round_trips']:.4f} | {pu['bytes_written']:.1f} / {pu['bytes_read']:.1f} B | "
                f"{t['cache_misses']}/{t['cache_hits'] + t['cache_misses']}")

    def fill(r):
        local = r.get("local_size")
        return fmt_ns(r.get("fill_ns_per_insert")) + (f" | {local}" if local is not None else "")

    head = ["N"] + [labels[k] for k in keys] + [labels[k] + " /Mem" for k in ratio_keys]
    return report_text([
        storebench.heading(data, "Store-backed Experiment 1: mean latency per update (insert + enforce + query)"),
        common.table(head, storebench.with_ratios(cfgs, keys, sizes, "mean_ns")), "",
        "Total CPU per update (this process, all threads + the redis-server), and its ratio",
        common.table(head, storebench.with_ratios(cfgs, keys, sizes, "mean_total_cpu_ns")), "",
        "Store traffic per update: round trips, bytes written / read, cache misses (of hits + misses)",
        common.table(["N"] + [labels[k] for k in ratio_keys], storebench.grid(cfgs, ratio_keys, sizes, traffic)), "",
        "Fill (N inserts) per insert, and local_size() at the end (elements in process memory)",
        common.table(["N"] + [labels[k] for k in keys], storebench.grid(cfgs, keys, sizes, fill)),
    ], data, summary_lines(data))


def summary_lines(data: dict) -> list[str]:
    s = data.get("summary") or summarize(data)
    out = []
    for k, r in s["ratios"].items():
        out.append(f"{r['label']} / Mem {k.split('/')[0]}: wall max {r['max_wall']:.2f} (at N = {r['max_wall_at']}), "
                   f"geomean {r['geomean_wall']:.2f}, at N = {r['largest_size']} {r['largest_size_wall']:.2f}; "
                   f"total CPU max {r['max_total_cpu']:.2f}, geomean {r['geomean_total_cpu']:.2f}")
    for k, r in s["round_trips"].items():
        every = f"1 per {r['updates_per_round_trip_at_max']:,.0f} updates" if r["updates_per_round_trip_at_max"] else "none"
        out.append(f"{r['label']}: round trips per update max {r['max']:.5f} at N = {r['max_at']} ({every})")
    t = s["targets"].get("redis_latency_within_2x")
    if t:
        out.append("Target: Redis per-update latency within 2x of in-memory: "
                   + ", ".join(f"{k.split('/')[0]} {v:.2f}x (N = {t['at'][k]})" for k, v in t["max_ratio"].items())
                   + f": {verdict(t['met'])}")
    t = s["targets"].get("round_trips_per_update")
    if t:
        out.append("Target: store round trips per update <= 1/100 (constant windows): max "
                   + ", ".join(f"{k} {v:.5f}" for k, v in t["max"].items())
                   + f": {verdict(t['met'])}")
    return out


ENGINE_COLOR = {"AMTA": "tab:red", "LMTA": "tab:orange"}
BACKEND_STYLE = {"memory": ("-", "o"), "redis": ("--", "s"), "file": (":", "^")}


def style(key: str) -> dict:
    engine, backend = key.split("/")
    ls, marker = BACKEND_STYLE.get(backend, ("-", "o"))
    return {"color": ENGINE_COLOR.get(engine), "ls": ls, "marker": marker, "ms": 4}


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    cfgs = by_config(data)
    labels = data.get("configs", {})
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.5))
    ax = axes[0][0]
    for k, recs in cfgs.items():
        ns = sorted(recs)
        ax.plot(ns, [recs[n]["mean_ns"] / 1e3 for n in ns], label=labels.get(k, k), **style(k))
    ax.set_ylabel("mean wall time per update (us)")
    ax.set_title("Exp. 1 with stores: wall time per update", fontsize=10)
    ax.set_yscale("log")
    ax = axes[0][1]
    for k, recs in cfgs.items():
        if k.endswith("/memory"):
            continue
        mem = cfgs.get(k.split("/")[0] + "/memory", {})
        ns = [n for n in sorted(recs) if n in mem]
        st = style(k)
        ax.plot(ns, [recs[n]["mean_ns"] / mem[n]["mean_ns"] for n in ns], label=labels.get(k, k) + " wall", **st)
        st2 = dict(st, ls="-", alpha=0.35)
        ax.plot(ns, [recs[n]["mean_total_cpu_ns"] / mem[n]["mean_total_cpu_ns"] for n in ns],
                label=labels.get(k, k) + " total CPU", **st2)
    ax.axhline(LATENCY_RATIO_TARGET, color="k", ls=":", lw=1)
    ax.text(1, LATENCY_RATIO_TARGET, " target 2x (Redis)", va="bottom", fontsize=8)
    ax.axhline(1, color="gray", lw=0.5)
    ax.set_ylabel("store-backed / in-memory")
    ax.set_title("ratio to the in-memory engine (same rounds)", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1][0]
    for k, recs in cfgs.items():
        if k.endswith("/memory"):
            continue
        ns = sorted(recs)
        ax.plot(ns, [max(recs[n]["per_update"]["round_trips"] * 100, 1e-3) for n in ns],
                label=labels.get(k, k), **style(k))
    ax.axhline(TRIPS_PER_UPDATE_TARGET * 100, color="k", ls=":", lw=1)
    ax.text(1, TRIPS_PER_UPDATE_TARGET * 100, " target: 1 per 100 updates", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("store round trips per 100 updates")
    ax.set_title("round trips (plotted at 0.001 when none)", fontsize=10)
    ax = axes[1][1]
    for k, recs in cfgs.items():
        if k.endswith("/memory"):
            continue
        ns = sorted(recs)
        st = style(k)
        ax.plot(ns, [max(recs[n]["per_update"]["bytes_written"], 1e-2) for n in ns],
                label=labels.get(k, k) + " written", **st)
        ax.plot(ns, [max(recs[n]["per_update"]["bytes_read"], 1e-2) for n in ns],
                label=labels.get(k, k) + " read", **dict(st, ls="-", alpha=0.35))
    ax.set_yscale("log")
    ax.set_ylabel("bytes per update")
    ax.set_title("store bytes per update (pair blobs; plotted at 0.01 when none)", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("window size N (elements)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    save_figure(plt, fig, path, storebench.caption(data), y=0.005, bottom=0.02)

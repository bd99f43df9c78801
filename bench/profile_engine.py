"""Where does an engine's per-update time go?  cProfile on Experiment 1's loop.

    python -m bench.profile_engine AMTA [--size 65536] [--updates 131072] [--top 20]

Fills a constant window of ``--size`` elements (count monoid, count WSP, as
in :mod:`bench.exp1`), then runs ``--updates`` pushes under cProfile and
prints, per function, calls per update and its share of the profiled time
(``tottime``: time in the function itself, callees excluded).  cProfile adds
a fixed cost per Python call, so shares are biased toward functions that
are called often; the second table times the same operations without the
profiler (unguarded methods called directly, so the guard wrapper's cost
is the difference between ``push`` and the sum of its parts).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
from itertools import repeat

from .engines import ENGINES, parse_engine_list
from .exp1 import COUNT, SizeWSP


def profile(name: str, n: int, m: int, top: int) -> str:
    spec = ENGINES[name]
    wsp = SizeWSP(n)
    engine = spec.build(COUNT, wsp)
    for _ in repeat(None, n):
        engine.insert(1)
    push = engine.push
    gc.collect()
    gc.disable()
    prof = cProfile.Profile()
    prof.enable()
    for _ in repeat(None, m):
        push(1)
    prof.disable()
    gc.enable()
    st = pstats.Stats(prof)
    total = st.total_tt
    rows = []
    for (file, line, func), (cc, nc, tt, ct, _callers) in st.stats.items():
        short = file.rsplit("/", 1)[-1]
        label = f"{short}:{line}({func})" if line else func
        rows.append((tt, ct, nc, label))
    rows.sort(reverse=True)
    out = [f"cProfile, {name} ({type(engine).__name__}), window {n}, {m} pushes: "
           f"{total / m * 1e9:,.0f} ns/update under the profiler"]
    out.append(f"{'tottime %':>9} {'cumtime %':>9} {'calls/update':>12}  function")
    for tt, ct, nc, label in rows[:top]:
        out.append(f"{100 * tt / total:9.1f} {100 * ct / total:9.1f} {nc / m:12.2f}  {label}")
    return "\n".join(out)


def breakdown(name: str, n: int, m: int) -> str:
    """The push and its parts, timed without a profiler (CPU time)."""
    spec = ENGINES[name]
    wsp = SizeWSP(n)
    tt = time.thread_time_ns

    def fresh():
        e = spec.build(COUNT, wsp)
        for _ in repeat(None, n):
            e.insert(1)
        return e

    def run(label, body):
        gc.collect()
        gc.disable()
        t0 = tt()
        body()
        ns = (tt() - t0) / m
        gc.enable()
        return label, ns

    cls = None
    results = []
    e = fresh()
    cls = type(e)
    push = e.push
    results.append(run("push (guarded: insert + enforce + query)", lambda: [push(1) for _ in repeat(None, m)]))
    e = fresh()
    ins, enf, qry = cls.insert.unguarded, cls.enforce.unguarded, cls.query.unguarded

    def parts():
        for _ in repeat(None, m):
            ins(e, 1)
            enf(e)
            qry(e)

    results.append(run("insert + enforce + query (unguarded)", parts))
    # each part on its own (the window grows by m during the insert-only run)
    e = fresh()
    results.append(run("insert alone (unguarded, window grows)", lambda: [ins(e, 1) for _ in repeat(None, m)]))
    ev = cls.evict.unguarded if hasattr(cls.evict, "unguarded") else cls.evict
    results.append(run("evict alone (unguarded, window shrinks)", lambda: [ev(e) for _ in repeat(None, m)]))
    e = fresh()
    results.append(run("query alone (cached)", lambda: [qry(e) for _ in repeat(None, m)]))
    results.append(run("enforce alone (nothing to evict: 1 WSP call)", lambda: [enf(e) for _ in repeat(None, m)]))
    results.append(run("WSP call alone", lambda: [wsp(n + 1, 1) for _ in repeat(None, m)]))
    results.append(run("combine alone (operator.add)", lambda: [COUNT.combine(n, 1) for _ in repeat(None, m)]))
    results.append(run("empty loop (list comprehension of m)", lambda: [None for _ in repeat(None, m)]))
    out = [f"CPU time per call, {name}, window {n}, {m} calls each"]
    out += [f"{ns:10,.0f} ns  {label}" for label, ns in results]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile_engine")
    ap.add_argument("engines", nargs="?", default="AMTA", help="comma-separated engine names (default AMTA)")
    ap.add_argument("--size", type=int, default=1 << 16)
    ap.add_argument("--updates", type=int, default=1 << 17)
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args(argv)
    for name in parse_engine_list(args.engines) or ["AMTA"]:
        print(profile(name, args.size, args.updates, args.top))
        print()
        print(breakdown(name, args.size, args.updates))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The compiled MTA cores against the pure-Python engines and the baselines.

    python -m bench.native_engine [--size 4096] [--updates 200000] [--engines AMTA,AMTA-native,LMTA,...]
    python -m bench.native_engine --one AMTA-native --workload push-count --updates N   # for callgrind
    python -m bench.native_engine --callgrind [--engines ...] [--workloads ...]       # instructions per update

A constant window of ``--size`` elements, then ``--updates`` updates, per
workload:

* ``push-count``: ``push(1)`` with the count monoid and the count WSP, as
  :mod:`bench.profile_engine` and Experiment 1 (insert, enforce, query);
* ``ieq-max``: ``insert(v)``, ``evict()``, ``query()`` on ``aggregators.MAX``;
* ``ieq-user``: the same with a user monoid (a Python function, max by hand);
* ``slide-max``: one ``slide`` call over the updates on ``aggregators.MAX``.

Prints CPU time per update (``time.thread_time_ns``, best of ``--repeat``).
``--one`` runs a single engine and workload and nothing else, so that
``valgrind --tool=callgrind`` instructions at two ``--updates`` counts give
instructions per update by difference (start-up cancels); ``--callgrind``
runs those pairs (``--updates`` and half of it) for every engine and
workload and prints the table.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from itertools import repeat

from mta.aggregators import MAX
from mta.monoid import Monoid

from .engines import BY_NAME
from .exp1 import COUNT, SizeWSP

WORKLOADS = ("push-count", "ieq-max", "ieq-user", "slide-max")


def _user_max(a, b):
    return b if a is None or (b is not None and b > a) else a


USER_MAX = Monoid(_user_max, None, name="user max")


def _prepare(name: str, workload: str, n: int, m: int):
    """The engine filled with ``n`` elements and the body running ``m`` updates."""
    spec = BY_NAME[name]
    rng = random.Random(1)
    if workload == "push-count":
        e = spec.build(COUNT, SizeWSP(n))
        for _ in repeat(None, n):
            e.insert(1)
        push = e.push
        return lambda: [push(1) for _ in repeat(None, m)]
    monoid = USER_MAX if workload == "ieq-user" else MAX.monoid
    e = spec.build(monoid, None)
    for _ in repeat(None, n):
        e.insert(rng.random())
    values = [rng.random() for _ in range(m)]
    if workload == "slide-max":
        counts = [1] * m
        return lambda: e.slide(values, counts)
    insert, evict, query = e.insert, e.evict, e.query

    def body():
        for v in values:
            insert(v)
            evict()
            query()

    return body


def time_one(name: str, workload: str, n: int, m: int, repeat_: int) -> float:
    best = float("inf")
    for _ in range(repeat_):
        body = _prepare(name, workload, n, m)
        gc.collect()
        gc.disable()
        t0 = time.thread_time_ns()
        body()
        best = min(best, (time.thread_time_ns() - t0) / m)
        gc.enable()
    return best


def instructions(name: str, workload: str, n: int, m: int) -> int:
    """Instructions callgrind counts for ``--one name`` with ``m`` updates."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m", "bench.native_engine",
             "--one", name, "--workload", workload, "--size", str(n), "--updates", str(m)],
            # one hash seed for every run: start-up's dict layouts, and so its instructions, are the same
            # in the two runs whose difference is taken
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if not found:
        raise RuntimeError(f"no instruction count from callgrind for {name} {workload}: {done.stderr[-500:]}")
    return int(found.group(1))


def per_update(name: str, workload: str, n: int, m: int) -> float:
    """Instructions per update: the difference between ``m`` and ``m // 2``
    updates, which cancels start-up and the filling of the window."""
    half = m // 2
    return (instructions(name, workload, n, m) - instructions(name, workload, n, half)) / (m - half)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.native_engine")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--updates", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default="AMTA,AMTA-native,LMTA,LMTA-native,DABA,TwoStacks")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--one", help="run one engine (with --workload) once, untimed: for callgrind")
    ap.add_argument("--workload", default="push-count", choices=WORKLOADS)
    ap.add_argument("--callgrind", action="store_true",
                    help="instructions per update under valgrind (--updates and half of it; try 40000)")
    args = ap.parse_args(argv)
    if args.one:
        _prepare(args.one, args.workload, args.size, args.updates)()
        return 0
    engines = [e for e in args.engines.split(",") if e]
    missing = [e for e in engines if e not in BY_NAME]
    if missing:
        raise SystemExit(f"unknown or unavailable engines: {', '.join(missing)} (the -native ones need the built core)")
    workloads = args.workloads.split(",")
    if args.callgrind:
        print(f"instructions per update (callgrind), window {args.size}, {args.updates} - {args.updates // 2} updates")
    else:
        print(f"CPU ns per update, window {args.size}, {args.updates} updates, best of {args.repeat}")
    print(f"{'engine':<12}" + "".join(f"{w:>12}" for w in workloads))
    table = {}
    for name in engines:
        if args.callgrind:
            table[name] = [per_update(name, w, args.size, args.updates) for w in workloads]
        else:
            table[name] = [time_one(name, w, args.size, args.updates, args.repeat) for w in workloads]
        print(f"{name:<12}" + "".join(f"{ns:12,.0f}" for ns in table[name]), flush=True)
    for pure in ("AMTA", "LMTA"):
        if pure in table and pure + "-native" in table:
            print(f"{pure + '/native':<12}" + "".join(f"{a / b:12.1f}x"
                                                     for a, b in zip(table[pure], table[pure + "-native"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

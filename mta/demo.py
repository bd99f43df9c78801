"""Demonstration of the engines on a generated telemetry stream.

``python -m mta.demo [--readings N] [--range SECONDS]``: one memory reading a
second, and for every reading the max, mean and standard deviation of the
last hour, computed side by side by the Amortized MTA, the Log MTA and
Two-Stacks.  Prints progress, checks the engines agree, and summarizes
monoid calls and time per update.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time

from . import aggregators as A
from .amortized_mta import AmortizedMTA
from .baselines import TwoStacks
from .log_mta import LogMTA
from .monoid import Aggregator, CountingMonoid, product
from .policies import TimeRange
from .streams import memory_usage_stream
from .window import Window

ENGINES = {"AmortizedMTA": AmortizedMTA, "LogMTA": LogMTA, "TwoStacks": TwoStacks}


def _same(a, b) -> bool:
    return all(x == y or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6))
               for x, y in zip(a, b))


def run(readings: int, range_s: float, out=sys.stdout) -> dict:
    """Push ``readings`` through one window per engine; return the summary."""
    aggregator = product(A.MAX, A.MEAN, A.STDDEV).on(lambda r: r[1])
    policy = TimeRange(range_s, time=lambda r: r[0])
    stream = list(memory_usage_stream(readings, seed=7))
    summary = {}
    reference = None
    for name, engine in ENGINES.items():
        counting = CountingMonoid(aggregator.monoid)  # one call per window combine
        window = Window(Aggregator(counting, aggregator.lift, aggregator.lower), policy, engine=engine)
        results = []
        step = max(1, readings // 10)
        start = time.perf_counter()
        for i, reading in enumerate(stream, 1):
            results.append(window.push(reading))
            if i % step == 0 or i == readings:
                print(f"\r{name:>13}: {i:>9,}/{readings:,} readings", end="", file=out, flush=True)
        elapsed = time.perf_counter() - start
        print(file=out)
        if reference is None:
            reference = results
        agree = all(_same(a, b) for a, b in zip(results, reference))
        summary[name] = {
            "us_per_update": elapsed / readings * 1e6,
            "monoid_calls_per_update": counting.calls / readings,
            "window_length_at_end": len(window),
            "agrees_with_AmortizedMTA": agree,
            "last": results[-1],
        }
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mta.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=200_000, help="readings to generate (one a second)")
    parser.add_argument("--range", type=float, default=3600.0, help="window range in seconds")
    args = parser.parse_args(argv)
    print(f"{args.readings:,} memory readings, one a second; per reading: max, mean and stddev "
          f"of the last {args.range:g} s")
    summary = run(args.readings, args.range)
    print(f"\n{'engine':>13} {'us/update':>10} {'monoid calls/update':>20} {'agrees':>7}")
    for name, s in summary.items():
        print(f"{name:>13} {s['us_per_update']:>10.2f} {s['monoid_calls_per_update']:>20.2f} "
              f"{str(s['agrees_with_AmortizedMTA']):>7}")
    mx, mean, sd = summary["AmortizedMTA"]["last"]
    print(f"\nlast window: {summary['AmortizedMTA']['window_length_at_end']:,} readings, "
          f"max {mx:.1f} MB, mean {mean:.1f} MB, stddev {sd:.1f} MB")
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}")
    return 0 if all(s["agrees_with_AmortizedMTA"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

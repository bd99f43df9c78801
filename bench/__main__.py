"""``python -m bench <experiment> [--quick] [--out DIR] [--engines A,B] [--gc]``.

Store experiments (kvs1, kvs2, exp4) also take ``--redis URL`` (default: start
a private redis-server), ``--store-dir DIR`` (default: a temporary directory)
and ``--stores redis,file``.  The Spark experiments (spark-batch, spark-before, spark-demo,
spark-growth, spark-stream, spark-keys, spark-event-time, spark-sizes, spark-tasks) run on local[2] and
take ``--redis`` and ``--store-dir`` too."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import (exp1, exp2, exp3, exp4, kvs1, kvs2, latency, mqo, spark_batch, spark_before, spark_demo,
               spark_event_time, spark_growth, spark_keys, spark_sizes, spark_stream, spark_tasks)
from .common import RunConfig
from .engines import ENGINES, parse_engine_list
from .experiment import Experiment

#: Every experiment, by its command-line name (each one follows bench/experiment.py's contract).
EXPERIMENTS: dict[str, Experiment] = {"exp1": exp1, "exp2": exp2, "exp3": exp3, "latency": latency,
               "kvs1": kvs1, "kvs2": kvs2, "exp4": exp4,
               "spark-batch": spark_batch, "spark-before": spark_before, "spark-demo": spark_demo,
               "spark-growth": spark_growth,
               "spark-stream": spark_stream, "spark-keys": spark_keys, "spark-event-time": spark_event_time,
               "spark-sizes": spark_sizes, "spark-tasks": spark_tasks, "mqo": mqo}
#: What ``all`` runs (the store and Spark experiments are run by name).
DEFAULT = ("exp1", "exp2", "exp3", "latency")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("experiment", choices=[*EXPERIMENTS, "all"])
    ap.add_argument("--quick", action="store_true", help="small sizes (all experiments in about 2 minutes)")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # smoke tests
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                    help="directory for <experiment>.json and .png (default bench/results)")
    ap.add_argument("--engines", help=f"comma-separated subset of: {', '.join(ENGINES)}")
    ap.add_argument("--gc", action="store_true", help="keep the cyclic garbage collector on while timing")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only the final tables")
    ap.add_argument("--redis", metavar="URL",
                    help="store experiments: use this Redis (default: start a private redis-server, persistence off)")
    ap.add_argument("--store-dir", metavar="DIR",
                    help="store experiments: directory of the file store (default: a temporary directory)")
    ap.add_argument("--stores", default="redis,file", help="store experiments: backends (default redis,file)")
    args = ap.parse_args(argv)
    backends = tuple(b.strip() for b in args.stores.split(",") if b.strip())
    unknown = set(backends) - {"redis", "file"}
    if unknown:
        ap.error(f"--stores: unknown backend(s) {', '.join(sorted(unknown))} (redis, file)")
    cfg = RunConfig(
        profile="tiny" if args.tiny else "quick" if args.quick else "full",
        out=args.out, engines=parse_engine_list(args.engines), gc_enabled=args.gc,
        plot=not args.no_plot, verbose=not args.quiet, argv=argv,
        redis_url=args.redis, store_dir=args.store_dir, store_backends=backends,
    )
    names = list(DEFAULT) if args.experiment == "all" else [args.experiment]
    for name in names:
        mod = EXPERIMENTS[name]
        t0 = time.perf_counter()
        cfg.log(f"== {name} ({cfg.profile}) -> {cfg.out / (name + '.json')}")
        data = mod.run(cfg)
        print()
        print(mod.report(data))
        print(f"[{name}: {time.perf_counter() - t0:.1f} s; wrote {cfg.out / (name + '.json')}"
              + (f" and {cfg.out / (name + '.png')}]" if cfg.plot else "]"), flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

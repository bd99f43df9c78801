"""``python -m bench <experiment> [--quick] [--out DIR] [--engines A,B] [--gc]``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import exp1, exp2, exp3, latency
from .common import RunConfig
from .engines import ENGINES, parse_engine_list

EXPERIMENTS = {"exp1": exp1, "exp2": exp2, "exp3": exp3, "latency": latency}


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
    args = ap.parse_args(argv)
    cfg = RunConfig(
        profile="tiny" if args.tiny else "quick" if args.quick else "full",
        out=args.out, engines=parse_engine_list(args.engines), gc_enabled=args.gc,
        plot=not args.no_plot, verbose=not args.quiet, argv=argv,
    )
    names = list(EXPERIMENTS) if args.experiment == "all" else [args.experiment]
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

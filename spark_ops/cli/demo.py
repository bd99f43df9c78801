"""``mta-spark demo``: generated fleet telemetry, per-host one-hour max, mean
and stddev on local Spark (on the columnar engine, or with ``--engine amta``
or ``lmta`` on an MTA with the windows in the embedded file store), a
summary checked against pandas, and a plot (:mod:`.demo_report`)."""

from __future__ import annotations

import math
import os
import sys
import time

from ..spec import ENGINE_CHOICES, ENGINES, WindowSpec
from .demo_report import DEMO_AGGS, report, write_parquet_input
from .errors import EXIT_FAILED, EXIT_OK, PROG, CLIError
from .options import Command, positive_int, store_sizes
from .progress import Progress, duration
from .session import active_session, session
from .store import check_store, normalize_store, shown, warn_file_store_on_cluster


def add_arguments(p) -> None:
    p.add_argument("--hosts", type=positive_int, default=300, help="hosts (default: %(default)s)")
    p.add_argument("--rows", type=positive_int, default=1_000_000,
                   help="readings in all (default: %(default)s)")
    p.add_argument("--hours", type=float, default=24.0,
                   help="time the readings span (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    p.add_argument("--out", default="demo-output", metavar="DIR",
                   help="output directory: its input, windows, host.png and state are the demo's and replaced "
                        "by the next run; a directory holding any of them that the demo did not write is "
                        "refused (default: ./%(default)s)")
    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                   help="auto, columnar: the columnar engine, windows in executor memory; amta, lmta: "
                        "every row through that MTA, windows in the store (default: %(default)s)")
    p.add_argument("--store", metavar="URL",
                   help="store URL for the windows with --engine amta or lmta (default: file:OUT/state)")
    store_sizes(p)


#: What the demo writes in its --out directory (and replaces on the next run).
OUTPUTS = ("input", "windows", "host.png", "state")
#: The file that marks a directory as the demo's, whose outputs a run may replace.
MARKER = ".mta-demo"


def _output_directory(path: str) -> str:
    """The --out directory, made if missing; one whose ``input``,
    ``windows``, ``host.png`` or ``state`` the demo did not write is
    refused, since a run replaces them."""
    out = os.path.abspath(os.path.expanduser(path))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise CLIError(f"cannot create the output directory {out}: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise CLIError(f"cannot write to the output directory {out}")
    theirs = [n for n in OUTPUTS if os.path.lexists(os.path.join(out, n))]
    if theirs and not os.path.exists(os.path.join(out, MARKER)):
        raise CLIError(f"{out} holds {', '.join(theirs)}, which mta-spark demo did not write and would replace; "
                       "give a new or empty --out")
    with open(os.path.join(out, MARKER), "w") as f:
        f.write("written by mta-spark demo: its input, windows, host.png and state here are replaced by the next run\n")
    return out


def run(args, spark=None) -> int:
    from ..telemetry import fleet_memory

    if args.rows < args.hosts:
        raise CLIError(f"--rows ({args.rows}) must be at least --hosts ({args.hosts})")
    if not (args.hours > 0 and math.isfinite(args.hours)):
        raise CLIError(f"--hours must be positive, got {args.hours}")
    out = _output_directory(args.out)
    input_dir, windows_dir, plot = (os.path.join(out, n) for n in ("input", "windows", "host.png"))
    store = None
    if args.engine in ENGINES:  # only an MTA keeps a batch job's windows in the store
        store = normalize_store(args.store or "file:" + os.path.join(out, "state"))
        check_store(store)

    new_session = spark is None and active_session() is None
    progress = Progress(stages=4 + new_session)
    started = time.monotonic()
    with progress.stage("generating telemetry", None,
                        f"{args.rows:,} readings from {args.hosts:,} hosts over {args.hours:g} h"):
        readings = fleet_memory(args.hosts, args.rows, seed=args.seed, span=args.hours * 3600.0)
    with progress.stage("writing input", None, f"Parquet to {input_dir}"):
        files = write_parquet_input(readings, input_dir)
    with session(args, spark, "demo", progress) as spark:
        from .. import traffic
        from ..api import choose_engine, sliding_window

        warn_file_store_on_cluster(store, spark.sparkContext.master)
        label = "running windows"
        before = traffic.round_trips(spark)
        df = spark.read.parquet(input_dir)
        job = dict(key="host", time="ts", value="mem_mb", aggs=list(DEMO_AGGS), range=3600, store=store,
                   engine=args.engine, buffer_size=args.buffer_size, cache_size=args.cache_size)
        engine, why = choose_engine(WindowSpec.build(**job), df)
        with progress.stage(label, spark, f"one hour per host: {', '.join(DEMO_AGGS)}; engine {engine}: {why}",
                            job=f"{PROG} demo: sliding window {', '.join(DEMO_AGGS)} over 1 h per host, "
                                f"engine {engine}"):
            windows = sliding_window(df, **job)
            windows.write.mode("overwrite").parquet(windows_dir)
        window_seconds = progress.times[label]
        trips = traffic.round_trips(spark) - before
        master = spark.sparkContext.master
    with progress.stage("summary and plot", None, plot):
        summary = report(readings, windows_dir, plot)
    total = time.monotonic() - started

    n = len(readings)
    ts = readings["ts"]
    print()
    print(f"{PROG} demo: one-hour sliding max / mean / stddev of memory, per host, on Spark "
          f"({master if new_session else 'the active session'})")
    print(f"  engine         {engine}: {why}" + (f"; store {shown(store)}: {trips:,} round trips" if store else ""))
    print(f"  readings       {n:,} from {readings['host'].nunique():,} hosts, "
          f"{ts.min():%Y-%m-%d %H:%M:%S} to {ts.max():%Y-%m-%d %H:%M:%S} UTC")
    print(f"  windows        {summary['rows']:,} output rows in {duration(window_seconds)}: "
          f"{summary['rows'] / max(window_seconds, 1e-9):,.0f} rows/s "
          f"({n / max(total, 1e-9):,.0f} rows/s end to end, {duration(total)} in all)")
    print("  stage times    " + ", ".join(f"{k} {duration(v)}" for k, v in progress.times.items()))
    print()
    print("  window outputs over all readings (MB):")
    print(_indent(summary["overall"], 4))
    print()
    print("  top 5 hosts by peak memory:")
    print(_indent(summary["top"], 4))
    print()
    check = summary["check"]
    print(f"  check          {check['host']}: {check['rows']:,} windows "
          f"{'match' if check['ok'] else 'DO NOT match'} pandas rolling('1h') max/mean/std "
          f"(largest difference {check['diff']:.3g})")
    print(f"  input          {input_dir} ({files} Parquet file{'s' * (files != 1)}: host, ts, mem_mb)")
    print(f"  windows        {windows_dir} (Parquet: host, ts, mem_mb, {', '.join(DEMO_AGGS)})")
    if store:
        print(f"  state          {shown(store)}")
    print(f"  plot           {plot} ({check['host']})")
    sys.stdout.flush()
    if not check["ok"]:
        raise CLIError(f"the windows of {check['host']} differ from pandas' rolling windows", EXIT_FAILED)
    return EXIT_OK


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


COMMAND = Command(
    name="demo",
    summary="the main job: generated fleet telemetry, per-host one-hour max/mean/stddev, summary and plot",
    description="Generate a fleet's memory telemetry (bursty, irregular readings from many hosts), "
                "write it as Parquet, compute every reading's one-hour max, mean and stddev per host "
                "on Spark (the columnar engine, windows in executor memory; --engine amta keeps them "
                "in the embedded file store), write Parquet, print a summary and plot the host with "
                "the highest peak.",
    epilog=f"example:\n  {PROG} demo --hosts 50 --rows 100000 --out /tmp/demo\n\n"
           "Writes OUT/input (Parquet: host, ts, mem_mb), OUT/windows (Parquet: host, ts, "
           "mem_mb, max, mean, stddev), OUT/host.png and, with --engine amta or lmta, the store's "
           "state under OUT/state.",
    add_arguments=add_arguments, run=run, master="local[2]")

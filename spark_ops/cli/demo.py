"""``mta-spark demo``: generated fleet telemetry, per-host one-hour max, mean
and stddev on local Spark (on the columnar engine, the windows in executor
memory; or with ``--engine amta`` or ``lmta`` on that MTA, each window in
executor memory until it outgrows ``--buffer-size + --cache-size`` rows,
then in the store), a summary checked against pandas, and a plot
(:mod:`.demo_report`).

A run makes its outputs in a scratch directory of its own in ``--out`` and
puts them in place of the previous run's only once it succeeded, so that a
run that fails leaves the previous run's outputs as they were.  A
``--store`` follows ``mta-spark run``'s rule (:func:`.store.batch_store`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time

from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from ..spec import ENGINE_CHOICES, WindowSpec
from ..telemetry import LIMITS, START
from .demo_report import (DEMO_AGGS, DEMO_HOURS, DEMO_SEED, DEMO_WINDOW, demo_readings, report,
                          write_parquet_input)
from .errors import EXIT_FAILED, EXIT_OK, PROG, CLIError
from .options import Command, number_in, store_sizes
from .progress import Progress, duration
from .session import active_session, session
from .store import batch_store, check_store, normalize_store, round_trips_note, shown, warn_where_windows_go

#: --hours at most: the generator's longest span.
MOST_HOURS = LIMITS["span"][1] / 3600
#: The windows' length, as the summary names it.
WINDOW = f"{DEMO_WINDOW['range'] / 3600:g} h"


def add_arguments(p) -> None:
    low, high = LIMITS["hosts"]
    p.add_argument("--hosts", type=number_in(int, low, high), default=300,
                   help=f"hosts, {low:,} to {high:,} (default: %(default)s)")
    low, high = LIMITS["rows"]
    p.add_argument("--rows", type=number_in(int, low, high), default=1_000_000,
                   help=f"readings in all, --hosts to {high:,} (default: %(default)s)")
    p.add_argument("--hours", type=number_in(float, 0.0, MOST_HOURS, above=True, note=" (366 days)"),
                   default=DEMO_HOURS,
                   help=f"time the readings span, the first at {START.astype(object):%Y-%m-%d %H:%M} UTC and "
                        f"the last HOURS later (to the millisecond); more than 0, at most {MOST_HOURS:,g} (366 "
                        "days) (default: %(default)s)")
    p.add_argument("--seed", type=number_in(int, LIMITS["seed"][0]), default=DEMO_SEED,
                   help="random seed, at least 0 (default: %(default)s)")
    p.add_argument("--out", default="demo-output", metavar="DIR",
                   help="output directory: a run writes its input, windows and host.png there, in place of the "
                        "previous run's (and of a state directory) only once it succeeded: a run that fails "
                        "leaves them as they were; a directory holding any of input, windows, host.png or state "
                        "that the demo did not write is refused (default: ./%(default)s)")
    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                   help="auto, columnar: the columnar engine, windows in executor memory; amta, lmta: every row "
                        "through that MTA, each window in executor memory until it outgrows --buffer-size + "
                        f"--cache-size rows ({DEFAULT_BUFFER_SIZE + DEFAULT_CACHE_SIZE:,} by default), then in "
                        "the store (default: %(default)s)")
    p.add_argument("--store", metavar="URL",
                   help="store for the windows an MTA moves out of executor memory, opened and pinged before "
                        "Spark starts; the columnar engine never opens it, and the summary's engine line says "
                        "where the windows are (default: with --engine amta or lmta, a file store of the run's "
                        "own, removed with its scratch directory: a batch job deletes every window it made)")
    store_sizes(p)


#: What the demo owns in its --out directory and a run replaces (``state``: a
#: store's directory, removed rather than kept: a batch job leaves no window in it).
OUTPUTS = ("input", "windows", "host.png", "state")
#: The outputs a run moves into place once it succeeded.
MADE = ("input", "windows", "host.png")
#: The file that marks a directory as the demo's, whose outputs a run may replace.
MARKER = ".mta-demo"
#: The name prefix of a run's scratch directory in --out.
SCRATCH = ".mta-demo-run-"


def _output_directory(path: str) -> str:
    """The --out directory, made if missing; one whose ``input``,
    ``windows``, ``host.png`` or ``state`` the demo did not write is
    refused, since a run replaces them.  Scratch directories of runs that
    were killed are removed (two runs into one --out would replace each
    other's outputs anyway)."""
    out = os.path.abspath(os.path.expanduser(path))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise CLIError(f"cannot create the output directory {out}: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise CLIError(f"cannot write to the output directory {out}")
    ours = os.path.exists(os.path.join(out, MARKER))
    theirs = [n for n in OUTPUTS if os.path.lexists(os.path.join(out, n))]
    if theirs and not ours:
        raise CLIError(f"{out} holds {', '.join(theirs)}, which mta-spark demo did not write and would replace; "
                       "give a new or empty --out")
    if ours:
        for name in os.listdir(out):
            if name.startswith(SCRATCH):
                shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    with open(os.path.join(out, MARKER), "w") as f:
        f.write("written by mta-spark demo: its input, windows, host.png and state here are replaced by the next run\n")
    return out


@contextlib.contextmanager
def _scratch(out: str):
    """A directory of the run's own in ``out``, removed at the end: the run
    makes its outputs there, and its default store (a path no earlier run
    used: a reused session's Python workers keep a file store open, and
    refuse one whose database was deleted under them)."""
    work = tempfile.mkdtemp(prefix=SCRATCH, dir=out)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _publish(work: str, out: str) -> None:
    """The run's outputs in ``work`` in place of the previous run's in
    ``out``: every old one goes first, so that an interruption leaves part
    of this run's outputs, never a mix of two runs."""
    for name in OUTPUTS:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    for name in MADE:
        os.rename(os.path.join(work, name), os.path.join(out, name))


def _apart_from_outputs(store: str | None, out: str) -> None:
    """A file --store lies outside what a run replaces, which would delete it."""
    import stores
    from stores.urls import parse_file_url

    if not store or stores.scheme_of(store) != "file":
        return
    path = os.path.realpath(parse_file_url(store))
    for name in (*OUTPUTS, SCRATCH):
        mine = os.path.realpath(os.path.join(out, name))
        if path == mine or path.startswith(mine if name == SCRATCH else mine + os.sep):
            raise CLIError(f"--store {shown(store)} lies in {os.path.join(out, name)}, which a run of the demo "
                           "replaces; give a store outside it, or none (an MTA's default is a file store of the "
                           "run's own)")


def run(args, spark=None) -> int:
    from ..api import engine_for, keeps_windows_in_store

    if args.rows < args.hosts:
        raise CLIError(f"--rows ({args.rows}) must be at least --hosts ({args.hosts})")
    out = _output_directory(args.out)
    _apart_from_outputs(normalize_store(args.store), out)
    store = batch_store(args.store)
    job = dict(DEMO_WINDOW, aggs=list(DEMO_AGGS), store=store, engine=args.engine, buffer_size=args.buffer_size,
               cache_size=args.cache_size)
    # the demo's value column is a double: the engine is known before Spark starts
    engine, _ = engine_for(WindowSpec.build(**job), streaming=False, fractional=True)
    new_session = spark is None and active_session() is None
    progress = Progress(stages=4 + new_session)
    started = time.monotonic()
    with _scratch(out) as work:
        own_store = store is None and keeps_windows_in_store(engine)
        if own_store:
            job["store"] = store = normalize_store("file:" + os.path.join(work, "state"))
            check_store(store)
        made = {name: os.path.join(work, name) for name in MADE}
        with progress.stage("generating telemetry", None,
                            f"{args.rows:,} readings from {args.hosts:,} hosts over {args.hours:g} h"):
            readings = demo_readings(args.hosts, args.rows, hours=args.hours, seed=args.seed)
        with progress.stage("writing input", None, f"Parquet to {os.path.join(out, 'input')}"):
            files = write_parquet_input(readings, made["input"])
        engine, why, trips, master, window_seconds = _windows(args, spark, progress, job, made, store)
        with progress.stage("summary and plot", None, os.path.join(out, "host.png")):
            summary = report(readings, made["windows"], made["host.png"])
        _publish(work, out)
    total = time.monotonic() - started
    _print_summary(readings, summary, out, files, progress, engine=engine, why=why + round_trips_note(store, trips),
                   own_store=own_store, on=master if new_session else None, seconds=(window_seconds, total))
    check = summary["check"]
    if not check["ok"]:
        raise CLIError(f"the windows of {check['differs']} differ from pandas' rolling windows", EXIT_FAILED)
    return EXIT_OK


def _windows(args, spark, progress, job: dict, made: dict, store: str | None):
    """The Spark stage: the windows of the input in ``made`` written beside
    it.  Returns the engine, why it was chosen, the store round trips, the
    master and the stage's seconds."""
    with session(args, spark, "demo", progress) as spark:
        from .. import traffic
        from ..api import choose_engine, sliding_window

        label = "running windows"
        before = traffic.round_trips(spark)
        df = spark.read.parquet(made["input"])
        engine, why = choose_engine(WindowSpec.build(**job), df)
        warn_where_windows_go(store, engine, spark.sparkContext.master)
        aggs = ", ".join(DEMO_AGGS)
        with progress.stage(label, spark, f"{WINDOW} per host: {aggs}; engine {engine}: {why}",
                            job=f"{PROG} demo: sliding window {aggs} over {WINDOW} per host, engine {engine}"):
            sliding_window(df, **job).write.mode("overwrite").parquet(made["windows"])
        return (engine, why, traffic.round_trips(spark) - before, spark.sparkContext.master,
                progress.times[label])


def _print_summary(readings, summary: dict, out: str, files: int, progress, *, engine: str, why: str,
                   own_store: bool, on: str | None, seconds: tuple[float, float]) -> None:
    """The summary on stdout; ``on``: the master of the session the demo
    started (None: the active session, whose Python workers may be warm)."""
    window_seconds, total = seconds
    n = len(readings)
    ts = readings["ts"]
    rate = f"{summary['rows'] / max(window_seconds, 1e-9):,.0f} rows/s"
    if on is not None:
        # the demo's one job runs as its session's Python workers start and import: not a warm figure
        rate += " on a cold run (the session's first job: its Python workers start in it)"
    print()
    print(f"{PROG} demo: one-hour sliding max / mean / stddev of memory, per host, on Spark "
          f"({on or 'the active session'})")
    print(f"  engine         {engine}: {why}")
    if own_store:
        print("  state          none kept: a batch job deletes each window it made, and the run's own file store "
              "went with its scratch directory")
    print(f"  readings       {n:,} from {readings['host'].nunique():,} hosts, "
          f"{ts.min():%Y-%m-%d %H:%M:%S} to {ts.max():%Y-%m-%d %H:%M:%S} UTC")
    print(f"  windows        {summary['rows']:,} output rows in {duration(window_seconds)}: {rate}; "
          f"{n / max(total, 1e-9):,.0f} rows/s end to end, {duration(total)} in all")
    print("  stage times    " + ", ".join(f"{k} {duration(v)}" for k, v in progress.times.items()))
    print()
    print("  window outputs over all readings (MB):")
    print(_indent(summary["overall"], 4))
    print()
    print("  top 5 hosts by peak memory:")
    print(_indent(summary["top"], 4))
    print()
    check = summary["check"]
    hosts = f"all {check['hosts']:,} host{'s' * (check['hosts'] != 1)}"
    verdict = "match" if check["ok"] else f"DO NOT match ({check['differs']}'s first)"
    print(f"  check          {hosts}: {check['rows']:,} windows {verdict} pandas rolling('1h') max/mean/std "
          f"(largest difference {check['diff']:.3g})")
    print(f"  input          {os.path.join(out, 'input')} ({files} Parquet file{'s' * (files != 1)}: host, ts, "
          "mem_mb)")
    print(f"  windows        {os.path.join(out, 'windows')} (Parquet: host, ts, mem_mb, {', '.join(DEMO_AGGS)})")
    print(f"  plot           {os.path.join(out, 'host.png')} ({summary['host']})")
    sys.stdout.flush()


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


COMMAND = Command(
    name="demo",
    summary="the main job: generated fleet telemetry, per-host one-hour max/mean/stddev, summary and plot",
    description="Generate a fleet's memory telemetry (bursty, irregular readings from many hosts), "
                "write it as Parquet, compute every reading's one-hour max, mean and stddev per host "
                "on Spark (the columnar engine, windows in executor memory; --engine amta or lmta runs that "
                "MTA, each window in executor memory until it outgrows --buffer-size + --cache-size rows, "
                "then in the store), write Parquet, print a summary and plot the host with the highest peak.",
    epilog=f"example:\n  {PROG} demo --hosts 50 --rows 100000 --out /tmp/demo\n\n"
           "Writes OUT/input (Parquet: host, ts, mem_mb), OUT/windows (Parquet: host, ts, "
           "mem_mb, max, mean, stddev) and OUT/host.png, in place of the previous run's once the run "
           "succeeded.",
    add_arguments=add_arguments, run=run, master="local[2]")

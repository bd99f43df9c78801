"""``mta-spark``: per-key sliding windows on Spark from the command line.

Subcommands:

* ``mta-spark demo`` -- the main job: generates a fleet's memory telemetry
  (hundreds of hosts, bursty irregular readings), runs per-host one-hour
  max / mean / stddev windows on local Spark with the windows' level queues
  in the embedded file store, prints a summary and plots one host.
* ``mta-spark run`` -- batch: a CSV, Parquet or JSON input to Parquet output
  with one column per aggregation.
* ``mta-spark stream`` -- the same over a directory where files arrive
  (Spark's file source), with a checkpoint; resumable.

Usage errors (a missing column, an unknown aggregation, an unreachable
store, a missing input, both or neither of ``--range``/``--rows``) exit with
status 2 and one line on stderr; a failed job exits with status 1 (2 when
it met a row it cannot take).  ``--verbose`` shows Spark's logs and full
tracebacks.

:func:`main` takes ``argv`` and an optional ``spark`` session (tests run
several commands on one session); without one it uses the active session
if any, else starts a local one and stops it at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid

from .spec import ENGINE_CHOICES, READY, SlidingWindowError, WindowSpec, absolute_store_url

PROG = "mta-spark"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
FORMATS = ("csv", "parquet", "json")
_EXTENSIONS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet",
               ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_COMPRESSION = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".xz")


class CLIError(Exception):
    """A usage or input problem: printed as one line, exit status 2."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors raise :class:`CLIError` (one line, status 2)
    instead of printing the usage and exiting."""

    def error(self, message):  # noqa: D102 - argparse API
        raise CLIError(f"{message} (see '{self.prog} --help')")


# -- arguments ------------------------------------------------------------------
def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (x > 0 and math.isfinite(x)):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return int(x) if x.is_integer() else x


_INTERVAL_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
                   "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
                   "h": 3600, "hour": 3600, "hours": 3600}


def _trigger(text: str):
    """``once``, ``available-now`` or an interval such as ``10s``, ``500ms``, ``1 minute``."""
    t = text.strip().lower()
    if t in ("once", "available-now", "availablenow", "available_now"):
        return "once" if t == "once" else "available-now"
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", t)
    if m and (m.group(2) or "s") in _INTERVAL_UNITS:
        ms = round(float(m.group(1)) * _INTERVAL_UNITS[m.group(2) or "s"] * 1000)
        if ms > 0:
            return ms
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a trigger: use once, available-now or an interval such as 10s, 500ms, 2min")


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _common(master: str) -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    spark = common.add_argument_group("Spark")
    spark.add_argument("--master", default=None,
                       help=f"Spark master URL (default: spark-submit's when run under it, else {master}; "
                            "ignored when a session is already active)")
    spark.set_defaults(default_master=master)
    spark.add_argument("--conf", type=_conf, action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting for the session mta-spark starts (repeatable), "
                            "e.g. --conf spark.executor.memory=2g")
    spark.add_argument("--partitions", type=_positive_int, default=None, metavar="N",
                       help="shuffle partitions, i.e. parallel window tasks (default: 4 x the cores)")
    spark.add_argument("-v", "--verbose", action="store_true",
                       help="show Spark's logs and full tracebacks")
    return common


def _window_args(p: argparse.ArgumentParser, *, store_required: bool) -> None:
    cols = p.add_argument_group("window")
    cols.add_argument("--key", required=True, metavar="COL", help="column whose values each get their own window")
    cols.add_argument("--time", required=True, metavar="COL",
                      help="time column: a number of seconds or a timestamp (a session started by "
                           "mta-spark reads timestamps without a zone as UTC); orders each key's rows, "
                           "ties keep input order")
    cols.add_argument("--value", required=True, metavar="COL", help="numeric column aggregated")
    cols.add_argument("--agg", required=True, metavar="NAMES",
                      help=f"comma-separated aggregations, each becoming an output column of that name: "
                           f"{', '.join(READY)}")
    size = cols.add_mutually_exclusive_group(required=True)
    size.add_argument("--range", type=_seconds, metavar="SECONDS",
                      help="time window: the rows of the key with time in (t - SECONDS, t]")
    size.add_argument("--rows", type=_positive_int, metavar="N", help="count window: the key's newest N rows")
    cols.add_argument("--on-bad-row", choices=("error", "flag"), default="error",
                      help="a row with a null or NaN key, time or value, an infinite time, a value an "
                           "aggregation cannot take (geomean of a value <= 0), or, streaming, a time older "
                           "than its key's newest in an earlier micro-batch: 'error' stops the job naming the "
                           "row; 'flag' keeps it with null aggregations and the reason in a 'rejected' column "
                           "(default: %(default)s)")
    cols.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                      help="auto: the columnar engine (NumPy) for batch jobs in executor memory whose "
                           "aggregations it computes (max, min, count, first, last; sum and mean of a "
                           "floating-point column), else the Amortized MTA; columnar: that engine or an "
                           "error; amta, lmta: every row through that MTA (default: %(default)s)")
    _store_sizes(cols)
    store_help = ("where the windows' level queues live: file:DIR (embedded SQLite), "
                  "redis://HOST:PORT/DB, couchbase://...")
    if store_required:
        cols.add_argument("--store", required=True, metavar="URL",
                          help=store_help + "; streaming windows stay there between micro-batches")
    else:
        cols.add_argument("--store", metavar="URL",
                          help=store_help + " (default: the executors' memory)")


def _store_sizes(group) -> None:
    group.add_argument("--buffer-size", type=_positive_int, default=512, metavar="PAIRS",
                       help="pairs per level written to the store in one round trip (default: %(default)s)")
    group.add_argument("--cache-size", type=_positive_int, default=512, metavar="PAIRS",
                       help="pairs per level read ahead from the store (default: %(default)s)")


def _wrap(text: str) -> str:
    import textwrap

    width = min(shutil.get_terminal_size((80, 24)).columns, 100) - 2
    return textwrap.fill(text, width=max(40, width))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Per-key sliding-window aggregation on Spark with the Monoid Tree Aggregator: "
                    "one output row per input row, with the aggregations over that row's window.",
        epilog=f"Run '{PROG} COMMAND --help' for a command's options.  Exit status: 0 done, "
               "1 the job failed, 2 a usage or input error.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    demo = sub.add_parser(
        "demo", parents=[_common("local[2]")], formatter_class=argparse.RawDescriptionHelpFormatter,
        help="the main job: generated fleet telemetry, per-host one-hour max/mean/stddev, summary and plot",
        description=_wrap("Generate a fleet's memory telemetry (bursty, irregular readings from many hosts), "
                    "write it as Parquet, compute every reading's one-hour max, mean and stddev per host "
                    "on Spark with the windows in the embedded file store, write Parquet, print a "
                    "summary and plot the host with the highest peak."),
        epilog=f"example:\n  {PROG} demo --hosts 50 --rows 100000 --out /tmp/demo\n\n"
               "Writes OUT/input (Parquet: host, ts, mem_mb), OUT/windows (Parquet: host, ts, "
               "mem_mb, max, mean, stddev), OUT/host.png and the store's state under OUT/state.")
    demo.add_argument("--hosts", type=_positive_int, default=300, help="hosts (default: %(default)s)")
    demo.add_argument("--rows", type=_positive_int, default=1_000_000,
                      help="readings in all (default: %(default)s)")
    demo.add_argument("--hours", type=float, default=24.0,
                      help="time the readings span (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    demo.add_argument("--out", default="demo-output", metavar="DIR",
                      help="output directory (default: ./%(default)s)")
    demo.add_argument("--store", metavar="URL", help="store URL (default: file:OUT/state)")
    _store_sizes(demo)
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser(
        "run", parents=[_common("local[*]")], formatter_class=argparse.RawDescriptionHelpFormatter,
        help="batch: sliding windows over a CSV/Parquet/JSON input, Parquet output",
        description=_wrap("Read the input, compute each row's window aggregations per key, write Parquet with "
                    "the key, time and value columns and one column per aggregation (named after it)."),
        epilog=f"example:\n  {PROG} run --input readings.csv --output windows --key host --time ts "
               "--value mem --agg max,mean,stddev --range 3600")
    run.add_argument("--input", required=True, metavar="PATH", help="a file or a directory of files")
    run.add_argument("--output", required=True, metavar="DIR", help="Parquet output directory")
    run.add_argument("--format", choices=FORMATS,
                     help="input format (default: from the file extension; csv has a header line)")
    run.add_argument("--overwrite", action="store_true", help="replace the output directory if it exists")
    _window_args(run, store_required=False)
    run.set_defaults(func=cmd_run)

    stream = sub.add_parser(
        "stream", parents=[_common("local[*]")], formatter_class=argparse.RawDescriptionHelpFormatter,
        help="streaming: the same over a directory where files arrive, with a checkpoint",
        description=_wrap("Process the files arriving in a directory (Spark's file source) with per-key "
                    "sliding windows that live in --store between micro-batches; append Parquet to "
                    "--output.  Restart with the same --checkpoint and --store to continue where it "
                    "stopped: each file is processed exactly once."),
        epilog=f"examples:\n  {PROG} stream --input incoming/ --output windows/ --checkpoint ckpt/ "
               "--store file:state --key host --time ts --value mem --agg max --range 3600 "
               "--trigger available-now\n"
               "  ... --trigger 10s     runs a micro-batch every 10 s until Ctrl-C, which stops it cleanly")
    stream.add_argument("--input", required=True, metavar="DIR", help="directory where input files arrive")
    stream.add_argument("--output", required=True, metavar="DIR", help="Parquet output directory (appended)")
    stream.add_argument("--checkpoint", required=True, metavar="DIR", help="Spark checkpoint directory")
    stream.add_argument("--format", choices=FORMATS,
                        help="input format (default: from the extension of the files already there)")
    stream.add_argument("--schema", metavar="DDL",
                        help="input schema, e.g. 'host STRING, ts TIMESTAMP, mem DOUBLE' (default: "
                             "inferred from the files already in the directory)")
    stream.add_argument("--expire-after", type=_seconds, metavar="SECONDS",
                        help="delete the window (and Spark state) of a key that received no rows for this long, "
                             "in processing time; needs an interval --trigger (default: keep every key)")
    stream.add_argument("--trigger", type=_trigger, default="available-now",
                        help="once, available-now (process what is there and stop; default) or an "
                             "interval such as 10s (run until interrupted)")
    _window_args(stream, store_required=True)
    stream.set_defaults(func=cmd_stream)
    return parser


# -- entry point -------------------------------------------------------------------
def main(argv=None, *, spark=None) -> int:
    """Run ``mta-spark`` with ``argv`` (default ``sys.argv[1:]``); returns the
    exit status.  ``spark``: a session to use (else the active one, else a
    new local one, stopped at the end)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CLIError as e:
        return _fail(str(e), e.code)
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else EXIT_OK
    verbose = args.verbose
    try:
        return args.func(args, spark) or EXIT_OK
    except CLIError as e:
        return _fail(str(e), e.code)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as e:  # noqa: BLE001 - one line instead of a stack trace
        if verbose:
            raise
        message, code = failure_message(e)
        return _fail(message + " (--verbose shows the details)" * (code == EXIT_FAILED), code)


def _fail(message: str, code: int) -> int:
    sys.stdout.flush()
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return code


_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")


def failure_message(exc: BaseException) -> tuple[str, int]:
    """A one-line message and exit status for an exception from a job:
    the Python exception raised in a worker when there is one, else the
    first line of Spark's message."""
    from stores.errors import StoreAuthenticationError, StoreConfigError, StoreError

    if isinstance(exc, (SlidingWindowError, StoreConfigError, StoreAuthenticationError)):
        return _clean(str(exc)), EXIT_USAGE
    if isinstance(exc, StoreError):  # the store failed during the job
        return f"{type(exc).__name__}: {_clean(str(exc))}", EXIT_FAILED
    text = str(exc)
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")
              or "Traceback (most recent call last)" in line]
    if starts:
        for line in lines[starts[-1] + 1:]:
            m = _PY_EXCEPTION.match(line)
            if m and not line[0].isspace():
                name, msg = m.group(1), m.group(2)
                short = name.rsplit(".", 1)[-1]
                bad_input = short in ("SlidingWindowError", "StoreConfigError", "StoreAuthenticationError")
                msg = _clean(msg)
                return (msg if short == "SlidingWindowError" else f"{short}: {msg}"), \
                    (EXIT_USAGE if bad_input else EXIT_FAILED)
    first = next((line.strip() for line in lines if line.strip()), type(exc).__name__)
    first = re.sub(r"\s*SQLSTATE: \w+\.?$", "", first)
    analysis = type(exc).__name__ in ("AnalysisException", "ParseException", "IllegalArgumentException")
    if not analysis:
        first = f"{type(exc).__name__}: {first}"
    return _clean(first), (EXIT_USAGE if analysis else EXIT_FAILED)


def _clean(message: str) -> str:
    message = message.replace("pass on_bad_row='flag'", "pass --on-bad-row flag")
    message = " ".join(message.split())
    return message if len(message) <= 600 else message[:597] + "..."


# -- checks before Spark starts -------------------------------------------------------
def _spec(args) -> WindowSpec:
    """Check the window arguments (aggregations, size) without Spark."""
    names = [a.strip() for a in args.agg.split(",") if a.strip()]
    if not names:
        raise CLIError(f"--agg needs at least one aggregation, e.g. --agg max,mean; choose from {', '.join(READY)}")
    unknown = [a for a in names if a.lower() not in READY]
    if unknown:
        raise CLIError(f"unknown aggregation{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} "
                       f"in --agg; choose from {', '.join(READY)}")
    try:
        return WindowSpec.build(key=args.key, time=args.time, value=args.value, aggs=args.agg,
                                range=args.range, rows=args.rows, on_bad_row=args.on_bad_row)
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None


def _has_scheme(path: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.\-]+:", path) is not None


def _local_path(path: str) -> str | None:
    """The local file system path of ``path``, or None for remote URIs (hdfs:, s3a:, ...)."""
    if path.startswith("file:"):
        from urllib.parse import unquote, urlsplit

        return os.path.abspath(unquote(urlsplit(path).path))
    if _has_scheme(path):
        return None
    return os.path.abspath(os.path.expanduser(path))


def _spark_path(path: str) -> str:
    """``path`` as Spark should see it: local paths absolute, as ``file:``
    paths, because Spark's JVM resolves relative paths against the directory
    it started in, which need not be this process's working directory."""
    local = _local_path(path)
    return path if local is None else "file:" + local


def _visible_files(directory: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [os.path.join(root, f) for f in sorted(files)
                  if not f.startswith((".", "_")) and not f.endswith(".crc")]
    return found


def _check_input(path: str, *, directory: bool = False) -> str | None:
    """Fail clearly if a local input is missing or unreadable; its local path."""
    local = _local_path(path)
    if local is None:
        return None
    if not os.path.exists(local):
        raise CLIError(f"input {path} does not exist")
    if directory and not os.path.isdir(local):
        raise CLIError(f"input {path} is not a directory (stream reads the files arriving in a directory)")
    readable = os.access(local, os.R_OK) and (not os.path.isdir(local) or os.access(local, os.X_OK))
    if not readable:
        raise CLIError(f"cannot read input {path}: permission denied")
    if os.path.isdir(local):
        for f in _visible_files(local):
            if not os.access(f, os.R_OK):
                raise CLIError(f"cannot read input file {f}: permission denied")
    return local


def _format_of(path: str, local: str | None, given: str | None, *, required: bool = True) -> str | None:
    if given:
        return given
    names = [path]
    if local is not None and os.path.isdir(local):
        names = _visible_files(local)
    for name in names:
        base = name.lower()
        for ext in _COMPRESSION:
            if base.endswith(ext):
                base = base[: -len(ext)]
        fmt = _EXTENSIONS.get(os.path.splitext(base)[1])
        if fmt:
            return fmt
    if not required:
        return None
    raise CLIError(f"cannot tell the format of {path} from its file names; pass --format csv|parquet|json")


def _normalize_store(url: str | None) -> str | None:
    """File stores as absolute ``file://`` URLs (executors may not share the cwd)."""
    try:
        return absolute_store_url(url)
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None


def check_store(url: str, *, retries: int = 1) -> None:
    """Open the store and ping it (few retries): fail clearly before Spark starts."""
    import stores
    from stores.errors import StoreError

    try:
        store = stores.open_store(url, retries=retries, backoff=0.05, backoff_max=0.2)
    except StoreError as e:
        raise CLIError(f"bad store URL {url}: {e}") from None
    except ImportError as e:
        raise CLIError(f"store {url} needs a package that is not installed: {e}") from None
    try:
        store.ping()
    except StoreError as e:
        raise CLIError(f"cannot use --store: {e}") from None
    except ImportError as e:
        raise CLIError(f"store {url} needs a package that is not installed: {e}") from None
    finally:
        with contextlib.suppress(Exception):
            store.close()


# -- Spark session ----------------------------------------------------------------
_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


@contextlib.contextmanager
def _session(args, spark, app: str, progress=None):
    """The given session, the active one, or a new local one (stopped at the end)."""
    if not args.verbose:
        # pyspark logs analysis errors with their JVM stack trace; the CLI prints one line instead
        for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is not None:
        if args.partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions))
        yield spark
        return
    from .session import local_session

    # every shuffle partition a task (AQE would merge the window partitions into fewer, longer tasks)
    conf = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC",
            "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    log_dir = None
    if not args.verbose:
        log_dir = tempfile.mkdtemp(prefix="mta-spark-log4j-")
        config = os.path.join(log_dir, "log4j2.properties")
        with open(config, "w") as f:
            f.write(_LOG4J)
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{config}"
        os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    # under spark-submit the session takes its master (and the rest) from spark-submit
    master = args.master or (None if "PYSPARK_GATEWAY_PORT" in os.environ else args.default_master)
    if args.partitions or master is not None:
        conf["spark.sql.shuffle.partitions"] = str(args.partitions or 4 * _cores(master))
    conf.update(args.conf)
    session = None
    try:
        with (progress.stage("starting Spark", detail=master or "spark-submit's master")
              if progress else contextlib.nullcontext()):
            session = local_session(master, app=f"{PROG} {app}", **conf)
            if not args.verbose:
                session.sparkContext.setLogLevel("OFF")
        yield session
    finally:
        if session is not None:
            session.stop()
        if log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)


def _cores(master: str) -> int:
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master.strip())
    if master.strip() == "local":
        return 1
    if m and m.group(1) != "*":
        return int(m.group(1))
    return os.cpu_count() or 2


# -- progress -----------------------------------------------------------------------
class Progress:
    """Stage lines on ``stream`` (stderr) with elapsed times, and while a
    Spark stage runs, its completed/total tasks from ``sc.statusTracker()``
    (a live line on a terminal, a line every ``every`` seconds otherwise)."""

    def __init__(self, stream=None, *, stages: int | None = None, every: float = 15.0):
        self.stream = stream or sys.stderr
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stages = stages
        self.every = every
        self.number = 0
        self.started = time.monotonic()
        self.times: dict[str, float] = {}

    def _print(self, text: str, *, end="\n") -> None:
        print(text, file=self.stream, end=end, flush=True)

    @contextlib.contextmanager
    def stage(self, label: str, spark=None, detail: str = ""):
        """A stage called ``label`` (its time is ``times[label]``), described
        further by ``detail`` on its first line."""
        self.number += 1
        head = f"[{self.number}/{self.stages}]" if self.stages else f"[{self.number}]"
        self._print(f"{head} {label}{': ' + detail if detail else ''} ...")
        t0 = time.monotonic()
        stop = threading.Event()
        poller = None
        group = None
        if spark is not None:
            sc = spark.sparkContext
            group = f"mta-spark-{uuid.uuid4().hex[:8]}"
            sc.setJobGroup(group, label)
            poller = threading.Thread(target=self._poll, args=(sc, group, label, t0, stop), daemon=True)
            poller.start()
        try:
            yield
        finally:
            stop.set()
            if poller is not None:
                poller.join(timeout=5)
                sc.setLocalProperty("spark.jobGroup.id", None)
                sc.setLocalProperty("spark.job.description", None)
            elapsed = time.monotonic() - t0
            self.times[label] = elapsed
            if self.live:
                self._print("\r\033[K", end="")
            ok = sys.exc_info()[0] is None
            self._print(f"{head} {label}: {'done' if ok else 'failed'} in {_duration(elapsed)}")

    def _poll(self, sc, group: str, label: str, t0: float, stop: threading.Event) -> None:
        last_text, last_print = None, time.monotonic()
        while not stop.wait(0.5 if self.live else 1.0):
            try:
                text = self._tasks(sc, group)
            except Exception:  # noqa: BLE001 - progress is best effort (session stopping, ...)
                continue
            if text is None:
                continue
            line = f"    {label}: {text}, {_duration(time.monotonic() - t0)}"
            if self.live:
                self._print("\r\033[K" + line, end="")
            elif text != last_text and time.monotonic() - last_print >= self.every:
                self._print(line)
                last_text, last_print = text, time.monotonic()

    @staticmethod
    def _tasks(sc, group: str) -> str | None:
        tracker = sc.statusTracker()
        jobs = tracker.getJobIdsForGroup(group)
        if not jobs:
            return None
        stage_ids = set()
        for j in jobs:
            info = tracker.getJobInfo(j)
            if info is not None:
                stage_ids.update(info.stageIds)
        done = total = running = stages = 0
        for s in sorted(stage_ids):
            info = tracker.getStageInfo(s)
            if info is None or (info.numActiveTasks == 0 and info.numCompletedTasks == 0
                                and s not in tracker.getActiveStageIds()):
                continue  # not started, or skipped
            stages += 1
            total += info.numTasks
            done += info.numCompletedTasks
            running += info.numActiveTasks
        if not stages:
            return "waiting for tasks"
        return f"{done}/{total} tasks done, {running} running ({stages} stage{'s' * (stages > 1)})"


def _rows(n: int) -> str:
    return f"{n:,} row{'s' * (n != 1)}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d} min" if m < 60 else f"{m // 60}:{m % 60:02d}:{s:02d} h"


# -- reading and windows -------------------------------------------------------------
def _reader(reader, fmt: str, *, streaming: bool):
    reader = reader.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true")
        if not streaming:
            reader = reader.option("inferSchema", "true")
    return reader




def _windows(df, args, spec: WindowSpec, store: str | None, name: str | None):
    """``sliding_window`` over the key, time and value columns only, returning
    them plus the aggregation columns (and ``rejected`` when flagging)."""
    from pyspark.sql import functions as F

    from .api import sliding_window

    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in (args.key, args.time, args.value) if c not in fields]
    if missing:
        raise CLIError(f"no column {', '.join(repr(c) for c in missing)} in the input; it has "
                       f"{', '.join(fields) or 'no columns'}")
    outputs = [n for n, _ in spec.output_columns]
    clash = sorted({args.key, args.time, args.value} & set(outputs))
    if clash:
        raise CLIError(f"input column {', '.join(map(repr, clash))} has the name of an output column; "
                       "rename it in the input")
    keep = list(dict.fromkeys([args.key, args.time, args.value]))
    df = df.select(*[F.col(f"`{c}`") for c in keep])
    try:
        out = sliding_window(df, key=args.key, time=args.time, value=args.value, aggs=args.agg,
                             range=args.range, rows=args.rows, store=store, on_bad_row=args.on_bad_row,
                             name=name, buffer_size=args.buffer_size, cache_size=args.cache_size,
                             engine=args.engine, expire_after=getattr(args, "expire_after", None))
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None
    return out.select(*[F.col(f"`{c}`") for c in keep + outputs])


# -- run ----------------------------------------------------------------------------
def cmd_run(args, spark=None) -> int:
    spec = _spec(args)
    local = _check_input(args.input)
    fmt = _format_of(args.input, local, args.format)
    out_local = _local_path(args.output)
    if out_local is not None and os.path.exists(out_local) and not args.overwrite:
        raise CLIError(f"output {args.output} exists; pass --overwrite to replace it")
    store = _normalize_store(args.store)
    if store:
        check_store(store)
    progress = Progress()
    with _session(args, spark, "run", progress) as session:
        t0 = time.monotonic()
        with progress.stage("reading input", session, f"{fmt} {args.input}"):
            df = _reader(session.read, fmt, streaming=False).load(_spark_path(args.input))
            out = _windows(df, args, spec, store, None)
        with progress.stage("running windows", session, f"{_describe(spec)}, into {args.output}"):
            out.write.mode("overwrite" if args.overwrite else "errorifexists").parquet(_spark_path(args.output))
        elapsed = time.monotonic() - t0
        rows = session.read.parquet(_spark_path(args.output)).count()
    print(f"wrote {rows:,} rows to {args.output} (Parquet: {', '.join(out.columns)}) "
          f"in {_duration(elapsed)}, {rows / max(elapsed, 1e-9):,.0f} rows/s")
    return EXIT_OK


def _describe(spec: WindowSpec) -> str:
    size = f"range {spec.range} s" if spec.range is not None else f"newest {spec.rows} rows"
    return f"{', '.join(n for n, _, _ in spec.aggs)} over {size} per {spec.key}"


# -- stream -----------------------------------------------------------------------------
def cmd_stream(args, spark=None) -> int:
    spec = _spec(args)
    if args.expire_after is not None and isinstance(args.trigger, str):
        raise CLIError(f"--expire-after needs an interval --trigger such as 10s (with {args.trigger} the query "
                       "would keep running micro-batches to expire keys instead of stopping)")
    local = _check_input(args.input, directory=True)
    empty = local is not None and not _visible_files(local)
    if empty and args.schema is None:
        raise CLIError(f"input directory {args.input} is empty, so there is nothing to infer the schema "
                       "from; pass --schema 'col TYPE, ...' (and --format) to wait for files")
    if empty and args.format is None:
        raise CLIError(f"input directory {args.input} is empty; pass --format csv|parquet|json")
    fmt = _format_of(args.input, local, args.format)
    store = _normalize_store(args.store)
    check_store(store)
    checkpoint = _local_path(args.checkpoint) or args.checkpoint
    name = "stream-" + hashlib.sha1(checkpoint.encode()).hexdigest()[:12]
    progress = Progress()
    with _session(args, spark, "stream", progress) as session:
        reader = _reader(session.readStream, fmt, streaming=True)
        if args.schema is not None:
            try:
                from pyspark.sql.types import _parse_datatype_string

                schema = _parse_datatype_string(args.schema)
            except Exception as e:  # noqa: BLE001
                raise CLIError(f"bad --schema {args.schema!r}: {failure_message(e)[0]}") from None
        else:
            with progress.stage("inferring the schema", session, f"from the files in {args.input}"):
                schema = _reader(session.read, fmt, streaming=False).load(_spark_path(args.input)).schema
        df = reader.schema(schema).load(_spark_path(args.input))
        out = _windows(df, args, spec, store, name)
        writer = (out.writeStream.format("parquet").outputMode("append")
                  .option("path", _spark_path(args.output))
                  .option("checkpointLocation", _spark_path(args.checkpoint)))
        if args.trigger == "once":
            writer = writer.trigger(once=True)
        elif args.trigger == "available-now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{args.trigger} milliseconds")
        what = ("until the files there are done" if isinstance(args.trigger, str)
                else f"every {args.trigger / 1000:g} s until interrupted (Ctrl-C stops cleanly)")
        with progress.stage("streaming", None, f"{args.input} -> {args.output} ({_describe(spec)}), {what}"):
            query = writer.start()
            rows, batches, stopped = _watch(query, progress)
    print(f"processed {_rows(rows)} in {batches} micro-batch{'es' * (batches != 1)}"
          f"{' (stopped on request)' if stopped else ''}; output {args.output} (Parquet: "
          f"{', '.join(out.columns)}), checkpoint {args.checkpoint}, store {store}")
    return EXIT_OK


def _watch(query, progress: Progress) -> tuple[int, int, bool]:
    """Wait for the query, printing each micro-batch; SIGINT/SIGTERM stop it
    cleanly (a second SIGINT interrupts).  Returns rows, batches, stopped."""
    stop = threading.Event()
    previous = {}

    def request_stop(signum, frame):
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, request_stop)
    seen, rows, batches = -1, 0, 0
    try:
        while True:
            finished = query.awaitTermination(0.5)
            for p in query.recentProgress:
                if p["batchId"] > seen and p.get("numInputRows", 0) > 0:
                    seen = p["batchId"]
                    rows += p["numInputRows"]
                    batches += 1
                    ms = (p.get("durationMs") or {}).get("triggerExecution", 0)
                    progress._print(f"    micro-batch {p['batchId']}: {_rows(p['numInputRows'])} "
                                    f"in {_duration(ms / 1000)}")
            if finished:
                return rows, batches, False
            if stop.is_set():
                progress._print("    stopping the query ...")
                query.stop()
                return rows, batches, True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- demo ---------------------------------------------------------------------------------
DEMO_AGGS = ("max", "mean", "stddev")


def cmd_demo(args, spark=None) -> int:
    from .telemetry import fleet_memory

    if args.rows < args.hosts:
        raise CLIError(f"--rows ({args.rows}) must be at least --hosts ({args.hosts})")
    if not (args.hours > 0 and math.isfinite(args.hours)):
        raise CLIError(f"--hours must be positive, got {args.hours}")
    out = os.path.abspath(os.path.expanduser(args.out))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise CLIError(f"cannot create the output directory {out}: {e.strerror}") from None
    if not os.access(out, os.W_OK):
        raise CLIError(f"cannot write to the output directory {out}")
    input_dir, windows_dir, plot = (os.path.join(out, n) for n in ("input", "windows", "host.png"))
    store = _normalize_store(args.store or "file:" + os.path.join(out, "state"))
    check_store(store)

    new_session = spark is None and _active_session() is None
    progress = Progress(stages=4 + new_session)
    started = time.monotonic()
    with progress.stage("generating telemetry", None,
                        f"{args.rows:,} readings from {args.hosts:,} hosts over {args.hours:g} h"):
        readings = fleet_memory(args.hosts, args.rows, seed=args.seed, span=args.hours * 3600.0)
    with progress.stage("writing input", None, f"Parquet to {input_dir}"):
        files = _write_parquet_input(readings, input_dir)
    with _session(args, spark, "demo", progress) as session:
        from .api import sliding_window

        label = "running windows"
        with progress.stage(label, session, f"one hour per host: {', '.join(DEMO_AGGS)}, store {store}"):
            df = session.read.parquet(input_dir)
            windows = sliding_window(df, key="host", time="ts", value="mem_mb", aggs=list(DEMO_AGGS),
                                     range=3600, store=store, buffer_size=args.buffer_size,
                                     cache_size=args.cache_size)
            windows.write.mode("overwrite").parquet(windows_dir)
        window_seconds = progress.times[label]
        master = session.sparkContext.master
    with progress.stage("summary and plot", None, plot):
        report = _demo_report(readings, windows_dir, plot)
    total = time.monotonic() - started

    n = len(readings)
    ts = readings["ts"]
    print()
    print(f"{PROG} demo: one-hour sliding max / mean / stddev of memory, per host, on Spark "
          f"({master if new_session else 'the active session'}), store {store}")
    print(f"  readings       {n:,} from {readings['host'].nunique():,} hosts, "
          f"{ts.min():%Y-%m-%d %H:%M:%S} to {ts.max():%Y-%m-%d %H:%M:%S} UTC")
    print(f"  windows        {report['rows']:,} output rows in {_duration(window_seconds)}: "
          f"{report['rows'] / max(window_seconds, 1e-9):,.0f} rows/s "
          f"({n / max(total, 1e-9):,.0f} rows/s end to end, {_duration(total)} in all)")
    print("  stage times    " + ", ".join(f"{k} {_duration(v)}" for k, v in progress.times.items()))
    print()
    print("  window outputs over all readings (MB):")
    print(_indent(report["overall"], 4))
    print()
    print("  top 5 hosts by peak memory:")
    print(_indent(report["top"], 4))
    print()
    check = report["check"]
    print(f"  check          {check['host']}: {check['rows']:,} windows "
          f"{'match' if check['ok'] else 'DO NOT match'} pandas rolling('1h') max/mean/std "
          f"(largest difference {check['diff']:.3g})")
    print(f"  input          {input_dir} ({files} Parquet file{'s' * (files != 1)}: host, ts, mem_mb)")
    print(f"  windows        {windows_dir} (Parquet: host, ts, mem_mb, {', '.join(DEMO_AGGS)})")
    print(f"  state          {store}")
    print(f"  plot           {plot} ({check['host']})")
    sys.stdout.flush()
    if not check["ok"]:
        raise CLIError(f"the windows of {check['host']} differ from pandas' rolling windows", EXIT_FAILED)
    return EXIT_OK


def _active_session():
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def _write_parquet_input(readings, directory: str, rows_per_file: int = 125_000) -> int:
    """Write the readings as a few Parquet files, in time order, cutting only
    between distinct timestamps (ties stay in one file, so their input order
    is unambiguous).  Returns the number of files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    table = pa.Table.from_pandas(readings, preserve_index=False)
    ts = readings["ts"].to_numpy()
    cuts, start, n = [], 0, len(readings)
    while start < n:
        end = min(n, start + rows_per_file)
        while end < n and ts[end] == ts[end - 1]:
            end += 1
        cuts.append((start, end))
        start = end
    for i, (a, b) in enumerate(cuts):
        pq.write_table(table.slice(a, b - a), os.path.join(directory, f"part-{i:05d}.parquet"))
    return len(cuts)


def _demo_report(readings, windows_dir: str, plot: str) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    w = pq.read_table(windows_dir).to_pandas()
    stats = w[["mem_mb", *DEMO_AGGS]].describe(percentiles=[0.5, 0.99]).T
    stats = stats[["mean", "50%", "99%", "max"]].rename(columns={"50%": "p50", "99%": "p99"})
    stats.index = ["reading", "1 h max", "1 h mean", "1 h stddev"]
    overall = stats.to_string(float_format=lambda x: f"{x:,.1f}")

    per_host = w.groupby("host").agg(readings=("mem_mb", "size"), peak=("mem_mb", "max"),
                                     top_mean=("mean", "max"), top_stddev=("stddev", "max"),
                                     median_max=("max", "median"))
    top = per_host.sort_values(["peak", "top_mean"], ascending=False).head(5)
    top.columns = ["readings", "peak MB", "highest 1h mean", "highest 1h stddev", "median 1h max"]
    top.index.name = None
    top_text = top.to_string(float_format=lambda x: f"{x:,.1f}", formatters={"readings": "{:,}".format})

    host = top.index[0]
    mine = w[w["host"] == host].sort_values("ts", kind="stable").reset_index(drop=True)
    source = readings[readings["host"] == host].sort_values("ts", kind="stable")
    rolled = source.set_index("ts")["mem_mb"].rolling("3600s")
    expected = {"max": rolled.max().to_numpy(), "mean": rolled.mean().to_numpy(),
                "stddev": rolled.std().to_numpy()}
    same = len(w) == len(readings) and len(mine) == len(source) and np.array_equal(mine["mem_mb"].to_numpy(), source["mem_mb"].to_numpy())
    diff = 0.0
    if same:
        for name, want in expected.items():
            got = mine[name].to_numpy(dtype=float)
            both_nan = np.isnan(got) & np.isnan(want)
            close = np.isclose(got, want, rtol=1e-6, atol=1e-3) | both_nan
            same = same and bool(close.all())
            finite = ~np.isnan(got) & ~np.isnan(want)
            if finite.any():
                diff = max(diff, float(np.abs(got[finite] - want[finite]).max()))
    _plot_host(mine, host, plot)
    return {"rows": len(w), "overall": overall, "top": top_text,
            "check": {"host": host, "rows": len(mine), "ok": same, "diff": diff}}


def _plot_host(frame, host: str, path: str) -> None:
    """One host's readings with its sliding one-hour max and mean (and mean +- stddev)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    ts = frame["ts"].dt.tz_convert("UTC").dt.tz_localize(None) if frame["ts"].dt.tz is not None else frame["ts"]
    fig = Figure(figsize=(12, 5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    mean, std = frame["mean"].to_numpy(dtype=float), frame["stddev"].to_numpy(dtype=float)
    ax.plot(ts, frame["mem_mb"], ".", ms=2.5, color="0.35", alpha=0.7, label="readings")
    ax.fill_between(ts, mean - std, mean + std, step="post", color="tab:blue", alpha=0.15, lw=0,
                    label="1 h mean \u00b1 stddev")
    ax.step(ts, frame["max"], where="post", color="tab:red", lw=1.2, label="1 h sliding max")
    ax.step(ts, mean, where="post", color="tab:blue", lw=1.2, label="1 h sliding mean")
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("memory used (MB)")
    ax.set_title(f"{host}: {len(frame):,} readings and their one-hour sliding windows (mta-spark demo)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", markerscale=6)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())

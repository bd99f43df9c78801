"""What the subcommands share in their parsers: the :class:`Command` entry of
the subcommand table, argument types, and the Spark, window and store
option groups."""

from __future__ import annotations

import argparse
import shutil
import textwrap
from dataclasses import dataclass
from typing import Callable

from mta.storage import DEFAULT_BUFFER_SIZE, DEFAULT_CACHE_SIZE

from .. import durations
from ..aggregations import READY
from ..columnar import AGGREGATIONS, FLOAT_ONLY
from ..frames import FRAMES, TIES
from ..spec import ENGINE_CHOICES, MICROS_TIME_LIMIT
from .errors import CLIError


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, its help texts, what adds its options to its
    parser, and what runs it (``run(args, spark) -> exit status``)."""

    name: str
    summary: str  # its line in ``mta-spark --help``
    description: str
    epilog: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., int]
    #: the Spark master it starts by default; None for a command without Spark
    master: str | None = "local[*]"


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors raise :class:`CLIError` (one line, status 2)
    instead of printing the usage and exiting."""

    def error(self, message):  # noqa: D102 - argparse API
        raise CLIError(f"{message} (see '{self.prog} --help')")


def aggregation_names() -> tuple[str, ...]:
    """The ready aggregations ``--agg`` takes, in the order the help lists them."""
    return READY


def engine_help() -> str:
    """``--engine``'s help, listing the columnar engine's aggregations as
    :mod:`spark_ops.columnar` declares them."""
    anywhere = [name for name in AGGREGATIONS if name not in FLOAT_ONLY]
    return ("auto: the columnar engine (NumPy, windows in executor memory) for batch jobs whose "
            f"aggregations it computes ({', '.join(anywhere)}; {' and '.join(FLOAT_ONLY)} of a "
            "floating-point column), else the Amortized MTA; columnar: that engine or an error; amta, "
            "lmta: every row through that MTA, the only engines that keep a batch job's windows in "
            "--store (default: %(default)s)")


def wrap(text: str) -> str:
    width = min(shutil.get_terminal_size((80, 24)).columns, 100) - 2
    # an option name (--older-than) must not be cut at its hyphen
    return textwrap.fill(text, width=max(40, width), break_on_hyphens=False)


# -- argument types -------------------------------------------------------------
def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def number_in(kind: type, low, high=None, *, above: bool = False, note: str = ""):
    """An argument type: a ``kind`` (int or float) number from ``low`` (more
    than it with ``above``) to ``high`` (unbounded when None, ``note`` said
    after it), whose error names that range."""
    def shown(n) -> str:
        return f"{n:,}" if kind is int else f"{n:,g}"

    def parse(text: str):
        try:
            n = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if not ((n > low if above else n >= low) and (high is None or n <= high)):  # NaN fails both
            raise argparse.ArgumentTypeError(
                f"must be {'more than' if above else 'at least'} {shown(low)}"
                + (f" and at most {shown(high)}{note}" if high is not None else "") + f", got {text}")
        return n

    return parse


def seconds(text: str) -> float:
    """A duration (:mod:`spark_ops.durations`) in seconds."""
    try:
        return durations.seconds(text, "a duration")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def interval(text: str) -> float:
    """A duration that becomes a Spark interval (``--watermark``): in whole
    microseconds, so at least one (a shorter one would become no delay)."""
    value = seconds(text)
    try:
        durations.micros(value, "a duration")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def range_sizes(text: str):
    """``--range``: one duration in seconds, or several separated by commas
    (a list of the durations as typed: they label the output columns,
    ``max_5m``; sliding_window parses them)."""
    if "," not in text:
        return seconds(text)
    parts = [p.strip() for p in text.split(",")]
    for part in parts:
        seconds(part)
    return parts


def count_sizes(text: str):
    """``--rows``: one count, or several separated by commas (a list)."""
    if "," not in text:
        return positive_int(text)
    return [positive_int(p.strip()) for p in text.split(",")]


def trigger(text: str):
    """``once``, ``available-now`` or an interval such as ``10s``, ``500ms``,
    ``1 minute`` (in milliseconds)."""
    t = text.strip().lower()
    if t in ("once", "available-now", "availablenow", "available_now"):
        return "once" if t == "once" else "available-now"
    try:
        ms = round(durations.seconds(t, "a trigger") * 1000)
    except ValueError:
        ms = 0
    if ms > 0:
        return ms
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a trigger: use once, available-now or an interval such as 10s, 500ms, 2min")


def conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def aggregations(given: list[str]) -> list[str]:
    """``--agg``'s aggregations: each given value (the option repeats)
    split at its commas, blanks dropped (``--agg max,mean --agg
    'max(cpu)'``: ``["max", "mean", "max(cpu)"]``)."""
    return [a.strip() for text in given for a in text.split(",") if a.strip()]


def reader_options(p: argparse.ArgumentParser) -> None:
    """``--option``: settings passed to Spark's reader of the input."""
    p.add_argument("--option", type=conf, action="append", default=[], metavar="KEY=VALUE",
                   help="an option of Spark's reader of the input (repeatable), e.g. --option nullValue=n/a, "
                        "--option sep=';'")


# -- option groups ---------------------------------------------------------------
def spark_options(master: str) -> argparse.ArgumentParser:
    """A parent parser with the Spark options of a command whose default master is ``master``."""
    common = Parser(add_help=False)
    spark = common.add_argument_group("Spark")
    spark.add_argument("--master", default=None,
                       help=f"Spark master URL (default: spark-submit's when run under it, else {master}; "
                            "ignored when a session is already active)")
    spark.set_defaults(default_master=master)
    spark.add_argument("--conf", type=conf, action="append", default=[], metavar="KEY=VALUE",
                       help="a Spark setting for the session mta-spark starts (repeatable), "
                            "e.g. --conf spark.executor.memory=2g")
    spark.add_argument("--partitions", type=positive_int, default=None, metavar="N",
                       help="shuffle partitions, i.e. parallel window tasks (default: 4 x the cores; a stream "
                            "restarted without --slide, --watermark or --expire-after takes the count it ran as, "
                            "which its records in --store keep and require)")
    spark.add_argument("--no-ui", action="store_true",
                       help="turn off the Spark UI of the session mta-spark starts (default: on, its address "
                            "printed when the session starts; the window job is named in its job descriptions)")
    spark.add_argument("-v", "--verbose", action="store_true",
                       help="show Spark's logs and full tracebacks")
    return common


def slide_option(p: argparse.ArgumentParser, *, streaming: bool) -> None:
    """``--slide``: periodic output (``run`` and ``stream``)."""
    p.add_argument("--slide", type=seconds, metavar="DURATION",
                   help="periodic output with --range: one row per key and window ending at each multiple of "
                        "DURATION, covering [end - R, end), as Spark's window(ts, R, DURATION); columns: the "
                        "key, window_end and the aggregations" +
                        ("; each window is written once, when the watermark (--watermark, needed) passes its "
                         "end, and lives in Spark's state until then (no --store needed)" if streaming else "") +
                        " (default: one row per input row)")


def window_options(p: argparse.ArgumentParser, *, store_required: bool, store_note: str | None = None,
                   batch: bool = False) -> None:
    """The window's columns, aggregations, size, bad-row rule, engine and
    store (``store_note``: what the store is for, when not required);
    ``batch``: a batch job's options too (``--ties``: streaming keeps a
    micro-batch's order at no cost)."""
    cols = p.add_argument_group("window")
    cols.add_argument("--key", required=True, metavar="COLS",
                      help="column whose values each get their own window, or comma-separated columns "
                           "(--key dc,host: each combination of their values gets its own window)")
    cols.add_argument("--time", required=True, metavar="COL",
                      help="time column: a number of seconds, a timestamp (a session started by "
                           "mta-spark reads timestamps without a zone as UTC) or a date (its midnight UTC; "
                           "--slide needs a timestamp or a number); "
                           "orders each key's rows, "
                           "ties keep input order")
    cols.add_argument("--value", required=True, metavar="COLS",
                      help="numeric column aggregated, or comma-separated columns (--value cpu,mem: each "
                           "aggregation then names the column it reads, --agg 'max(cpu)')")
    cols.add_argument("--agg", required=True, action="append", metavar="NAMES",
                      help=f"comma-separated aggregations, each becoming an output column of that name: "
                           f"{', '.join(aggregation_names())}; with several --value columns each names its "
                           "column, 'max(cpu)', output column max_cpu; repeatable (--agg 'max(cpu)' --agg "
                           "'mean(mem)')")
    size = cols.add_mutually_exclusive_group(required=True)
    size.add_argument("--range", type=range_sizes, metavar="R",
                      help="time window: the rows of the key with time in (t - R, t] (in [t - R, "
                           "t] with --frame sql); several sizes separated by commas (--range 5m,1h) give "
                           "one column per aggregation and size, named <aggregation>_<size as typed> "
                           "(max_5m, max_1h), in one pass")
    size.add_argument("--rows", type=count_sizes, metavar="N",
                      help="count window: the key's newest N rows; several separated by commas (--rows "
                           "10,100: max_10, max_100)")
    cols.add_argument("--frame", choices=FRAMES, default="default",
                      help="default: a --range window holds the rows with time in (t - R, t] at or "
                           "before the row, rows of equal time in arrival order, each seeing those that "
                           "arrived before it (as pandas' rolling); sql: Spark SQL's RANGE BETWEEN R "
                           "PRECEDING AND CURRENT ROW, the rows with time in [t - R, t], rows of equal "
                           "time peers sharing one output (streaming: a row at a time an earlier "
                           "micro-batch gave outputs for is then a bad row). --rows N is the newest N rows "
                           "in (time, arrival) order in both (default: %(default)s)")
    if batch:
        cols.add_argument("--ties", choices=TIES, default="input",
                          help="what orders a key's rows of equal time: input: their order in the input (the "
                               "output depends on the input alone); any: whatever order the shuffle leaves "
                               "them in, as Spark's window functions and pandas (the job ships and sorts one "
                               "column less) (default: %(default)s)")
    cols.add_argument("--on-bad-row", choices=("error", "flag"), default="error",
                      help="a row with a null or NaN key, time or value, an infinite time, a CSV value that "
                           "is not a number, a value an aggregation cannot take (geomean of a value <= 0), or, "
                           "streaming, a time older than its key's newest in an earlier micro-batch: 'error' "
                           "stops the job naming the "
                           "row; 'flag' keeps it with null aggregations and the reason in a 'rejected' column "
                           "(--slide: leaves it out of the windows, counted in the summary and logged; with "
                           f"--slide also a time more than {MICROS_TIME_LIMIT:.3g} seconds from 1970, beyond the "
                           "microseconds the windows count, as with --watermark, and with stream --slide a row "
                           "behind the watermark) "
                           "(default: %(default)s)")
    cols.add_argument("--engine", choices=ENGINE_CHOICES, default="auto", help=engine_help())
    store_sizes(cols)
    store_help = ("where the windows' level queues live: file:DIR (embedded SQLite), "
                  "redis://HOST:PORT/DB, couchbase://...")
    if store_required:
        store_note = "; streaming windows stay there between micro-batches"
    elif store_note is None:
        store_note = ("; a batch job uses it on an MTA (--engine amta or lmta, for windows larger than executor "
                      "memory, or auto's fallback: sum or mean of an integral column; refused with --slide, whose "
                      "windows stay in executor memory) (default: the executors' memory)")
    cols.add_argument("--store", required=store_required, metavar="URL", help=store_help + store_note)


def store_sizes(group) -> None:
    group.add_argument("--buffer-size", type=positive_int, default=DEFAULT_BUFFER_SIZE, metavar="PAIRS",
                       help="pairs per level written to the store in one round trip (default: %(default)s)")
    group.add_argument("--cache-size", type=positive_int, default=DEFAULT_CACHE_SIZE, metavar="PAIRS",
                       help="pairs per level read ahead from the store (default: %(default)s)")

"""``mta-spark stream``: sliding windows over the files arriving in a
directory, with a checkpoint and the windows in a store; resumable."""

from __future__ import annotations

import logging
import signal
import threading

from .. import durations
from ..spec import split_columns
from . import inputs
from .checkpoint import Checkpoint, schema_change
from .errors import EXIT_OK, PROG, CLIError
from .options import Command, interval, reader_options, seconds, slide_option, trigger, window_options
from .progress import Progress, duration, rows
from .session import session
from .store import check_store, normalize_store, shown, warn_file_store_on_cluster
from .window import (OBSERVED, describe, observe_rejected, respelled, text_columns, value_columns, window_spec,
                     windows)

_log = logging.getLogger(__name__)


def add_arguments(p) -> None:
    p.add_argument("--input", required=True, metavar="DIR", help="directory where input files arrive")
    p.add_argument("--output", required=True, metavar="DIR", help="Parquet output directory (appended)")
    p.add_argument("--checkpoint", required=True, metavar="DIR", help="Spark checkpoint directory")
    p.add_argument("--format", choices=inputs.FORMATS,
                   help="input format (default: from the extension of the files already there)")
    p.add_argument("--schema", metavar="DDL",
                   help="input schema, e.g. 'host STRING, ts TIMESTAMP, mem DOUBLE', a CSV's columns "
                        "matched to its header by name (default: inferred from the files already in the "
                        "directory when the query first starts, a CSV's key columns read as text, then kept in "
                        "--checkpoint for its restarts; a --schema that changes the type of an output column "
                        "of a started query is refused)")
    reader_options(p)
    p.add_argument("--expire-after", type=seconds, metavar="DURATION",
                   help="delete the window (and Spark state) of a key that received no rows for this long, "
                        "in processing time; needs an interval --trigger (default: keep every key)")
    p.add_argument("--watermark", type=interval, metavar="DURATION",
                   help="event time: rows may arrive this much out of order (e.g. 10m), by the --time column "
                        "(a timestamp); each row waits in Spark's state until the watermark (the newest time "
                        "seen minus DURATION) passes it, then enters its window in time order; a row behind "
                        "the watermark when it arrives is late (--on-bad-row) (default: no watermark, rows "
                        "in order across micro-batches)")
    p.add_argument("--trigger", type=trigger, default="available-now",
                   help="once, available-now (process what is there and stop; default) or an "
                        "interval such as 10s (run until interrupted)")
    slide_option(p, streaming=True)
    window_options(p, store_required=False,
                   store_note="; streaming windows stay there between micro-batches (needed; refused with --slide, "
                              "whose windows live in Spark's state)")


def run(args, spark=None) -> int:
    spec = window_spec(args)
    if args.expire_after is not None and args.watermark is not None:
        raise CLIError("--expire-after counts processing time and --watermark waits for event time: use one")
    if args.expire_after is not None and isinstance(args.trigger, str):
        raise CLIError(f"--expire-after needs an interval --trigger such as 10s (with {args.trigger} the query "
                       "would keep running micro-batches to expire keys instead of stopping)")
    if spec.slide is not None and args.watermark is None:
        raise CLIError("--slide in a stream writes each window once the watermark passes its end: give "
                       "--watermark DURATION (how late a row may arrive, by the --time column)")
    if spec.slide is None and not args.store:
        raise CLIError("mta-spark stream needs --store URL (the windows live there between micro-batches), "
                       "e.g. --store file:state; only --slide keeps its windows in Spark's state")
    local = inputs.check_input(args.input, directory=True)
    for option, path in (("--output", args.output), ("--checkpoint", args.checkpoint)):
        inputs.check_apart(args.input, path, option)
        inputs.check_writable(path, option)
    empty = local is not None and not inputs.visible_files(local)
    store = normalize_store(args.store)
    if store:
        check_store(store)
    progress = Progress()
    with session(args, spark, "stream", progress) as spark:
        warn_file_store_on_cluster(store, spark.sparkContext.master)
        checkpoint = Checkpoint(spark, args.checkpoint)
        kept = checkpoint.kept()
        fmt = args.format or (kept.get("format") if empty else None)
        if empty and args.schema is None and "schema" not in kept:
            raise CLIError(f"input directory {args.input} is empty, so there is nothing to infer the schema "
                           "from; pass --schema 'col TYPE, ...' (and --format) to wait for files")
        if empty and fmt is None:
            raise CLIError(f"input directory {args.input} is empty; pass --format csv|parquet|json")
        fmt = inputs.format_of(args.input, local, fmt)
        schema = _schema(args, spark, fmt, progress, kept)
        spec = respelled(args, schema.names)
        name = kept.get("name") or _name(checkpoint, spec, store)
        record = {"format": fmt, "schema": schema.jsonValue(), "name": name}
        schema, types = text_columns(schema, fmt, args)
        df = (inputs.reader(spark.readStream, fmt, streaming=True, options=args.option, schema=schema)
              .load(inputs.spark_path(args.input)))
        if args.watermark is not None:
            df = _with_watermark(df, args)
        _resume_tasks(args, spark, df, spec, store, name, progress)
        out, _ = observe_rejected(windows(df, args, spec, store, name, types), args)
        # the query's name heads the description of each micro-batch's jobs in the Spark UI; active
        # queries' names are unique in a session, as are their checkpoints (hence ``name``)
        writer = (out.writeStream.queryName(f"{PROG} stream ({name}): sliding window {describe(spec)}")
                  .format("parquet").outputMode("append")
                  .option("path", inputs.spark_path(args.output))
                  .option("checkpointLocation", inputs.spark_path(args.checkpoint)))
        if args.trigger == "once":
            writer = writer.trigger(once=True)
        elif args.trigger == "available-now":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{args.trigger} milliseconds")
        what = ("until the files there are done" if isinstance(args.trigger, str)
                else f"every {args.trigger / 1000:g} s until interrupted (Ctrl-C stops cleanly)")
        from .. import excluded, traffic

        before, left_out = traffic.round_trips(spark), excluded.rejected_rows(spark)
        if record != kept:  # the schema and name this query starts with, for its restarts
            checkpoint.keep(record)
        with progress.stage("streaming", spark, f"{args.input} -> {args.output} ({describe(spec)}), {what}") as jobs:
            query = writer.start()
            jobs.follow(str(query.runId))  # the job group of the query's micro-batches
            total, batches, stopped, rejected = _watch(query, progress)
        trips = traffic.round_trips(spark) - before
        left_out = excluded.rejected_rows(spark) - left_out
    where = "left out of the windows" if spec.slide is not None else "flagged in column 'rejected'"
    if spec.slide is not None:  # no output row carries a flag: the rows left out are counted
        rejected = left_out
    flagged = f", {rows(rejected)} rejected ({where})" if args.on_bad_row == "flag" else ""
    if rejected:
        _log.warning("%s stream: %d of %d rows rejected (%s of %s)", PROG, rejected, total, where, args.output)
    print(f"processed {rows(total)} in {batches} micro-batch{'es' * (batches != 1)}"
          f"{' (stopped on request)' if stopped else ''}{flagged}; output {args.output} (Parquet: "
          f"{', '.join(out.columns)}), checkpoint {args.checkpoint}, "
          f"{f'store {shown(store)} ({trips:,} round trips)' if store else 'windows in Spark state'}")
    return EXIT_OK


def _resume_tasks(args, spark, df, spec, store: str | None, name: str, progress: Progress) -> None:
    """Before the plan is built: a query on the plan whose micro-batches run
    as the count of tasks its progress records keep (``runs_as_tasks``)
    resumes the count it ran as, which its record of task 0 keeps
    (:func:`stores.tasks_of`, one round trip).  Spark restores no such count
    from the checkpoint, and the session's default (4 x the cores) follows
    the machine, which the records would refuse.  A count the user gave
    (--partitions, --conf spark.sql.shuffle.partitions) stays: the query
    then fails naming both counts."""
    from ..api import runs_as_tasks

    given = args.partitions or any(key == "spark.sql.shuffle.partitions" for key, _ in args.conf)
    # a --time missing from the input is windows()'s error to report
    if given or not store or args.time not in df.columns or not runs_as_tasks(df, spec, args.expire_after):
        return
    import stores

    with stores.open_store(store) as opened:
        tasks = stores.tasks_of(opened, spec.run_record(name, 0))
    if tasks is None:  # a first run, or records that keep no count
        return
    spark.conf.set("spark.sql.shuffle.partitions", str(tasks))
    progress.line(f"    resuming as {tasks} tasks, as this query ran before (spark.sql.shuffle.partitions="
                  f"{tasks}, from its records in {shown(store)})")


def _with_watermark(df, args):
    """``df`` with Spark's watermark on the time column (--watermark)."""
    from pyspark.sql.types import TimestampType

    if args.time in df.columns and not isinstance(df.schema[args.time].dataType, TimestampType):
        raise CLIError(f"--watermark needs a timestamp --time column; {args.time!r} is "
                       f"{df.schema[args.time].dataType.simpleString()} (give it as TIMESTAMP in --schema)")
    return df.withWatermark(args.time, durations.spark_interval(args.watermark)) if args.time in df.columns else df


def _schema(args, spark, fmt: str, progress: Progress, kept: dict):
    """``--schema``, else the schema the query started with (``kept`` in
    its checkpoint), else the schema of the files already in the directory
    (a query's first run).  A ``--schema`` that changes the type of a
    column the output holds is refused: the sink's Parquet files would
    disagree."""
    from pyspark.sql.types import StructType

    before = StructType.fromJson(kept["schema"]) if "schema" in kept else None
    if args.schema is not None:
        schema = inputs.parse_schema(args.schema)
        output = {c.lower() for c in [*split_columns(args.key), args.time, *value_columns(args)]}
        change = before and schema_change(before, schema, output, args.checkpoint)
        if change:
            raise CLIError(change)
        return schema
    if before is not None:
        progress.line(f"    schema as the query started with: {before.simpleString()} (from {args.checkpoint})")
        return before
    with progress.stage("inferring the schema", spark, f"from the files in {args.input}"):
        return inputs.inferred_schema(spark, fmt, args.input, args.option, split_columns(args.key), args.time)


def _name(checkpoint: Checkpoint, spec, store: str | None) -> str:
    """The query's name in the store (its windows' prefix) when its
    checkpoint keeps none: from its checkpoint location resolved, unless the
    query ran already under the location as typed (:meth:`Checkpoint.names`),
    then the name under which the store holds its first task's record."""
    names = checkpoint.names()
    if len(names) > 1 and store and checkpoint.started():
        import stores

        with stores.open_store(store) as opened:
            return next((n for n in names if opened.read_meta(spec.run_record(n, 0))[0] is not None), names[0])
    return names[0]


def _watch(query, progress: Progress) -> tuple[int, int, bool, int]:
    """Wait for the query, printing each micro-batch; SIGINT/SIGTERM stop it
    cleanly (a second SIGINT interrupts).  Returns rows, batches, stopped and
    the rows flagged (observed metrics :data:`.window.OBSERVED`, 0 without)."""
    stop = threading.Event()
    previous = {}

    def request_stop(signum, frame):
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, request_stop)
    seen, total, batches, rejected = -1, 0, 0, 0
    try:
        while True:
            finished = query.awaitTermination(0.5)
            for p in query.recentProgress:
                if p["batchId"] > seen and p.get("numInputRows", 0) > 0:
                    seen = p["batchId"]
                    total += p["numInputRows"]
                    batches += 1
                    observed = (p.get("observedMetrics") or {}).get(OBSERVED)
                    rejected += observed["rejected"] if observed else 0
                    ms = (p.get("durationMs") or {}).get("triggerExecution", 0)
                    progress.line(f"    micro-batch {p['batchId']}: {rows(p['numInputRows'])} "
                                  f"in {duration(ms / 1000)}")
            if finished:
                return total, batches, False, rejected
            if stop.is_set():
                progress.line("    stopping the query ...")
                query.stop()
                return total, batches, True, rejected
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


COMMAND = Command(
    name="stream",
    summary="streaming: the same over a directory where files arrive, with a checkpoint",
    description="Process the files arriving in a directory (Spark's file source) with per-key "
                "sliding windows that live in --store between micro-batches; append Parquet to "
                "--output.  Restart with the same --checkpoint and --store to continue where it "
                "stopped: each file is processed exactly once.",
    epilog=f"examples:\n  {PROG} stream --input incoming/ --output windows/ --checkpoint ckpt/ "
           "--store file:state --key host --time ts --value mem --agg max --range 3600 "
           "--trigger available-now\n"
           "  ... --trigger 10s     runs a micro-batch every 10 s until Ctrl-C, which stops it cleanly\n"
           "  ... --watermark 10m   takes rows up to 10 minutes out of order (--time a timestamp)\n"
           "  ... --watermark 1m --slide 5m   one row per key and 1-hour window every 5 minutes (--range 1h)",
    add_arguments=add_arguments, run=run)

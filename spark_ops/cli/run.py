"""``mta-spark run``: batch sliding windows over a CSV, Parquet or JSON input,
Parquet output."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time

from . import inputs
from .errors import EXIT_OK, PROG, CLIError
from .options import Command, reader_options, slide_option, window_options
from .progress import Progress, duration
from .session import session
from .store import batch_store, round_trips_note, warn_where_windows_go
from .window import describe, observe_rejected, respelled, text_columns, typed, window_spec, windows

_log = logging.getLogger(__name__)


def add_arguments(p) -> None:
    p.add_argument("--input", required=True, metavar="PATH", help="a file or a directory of files")
    p.add_argument("--output", required=True, metavar="DIR", help="Parquet output directory")
    p.add_argument("--format", choices=inputs.FORMATS,
                   help="input format (default: from the file extension; csv has a header line)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the output directory if it exists, once the new output is written (a run "
                        "that fails leaves it as it was, and without --overwrite leaves none); an output that "
                        "is, holds or lies in the input is refused")
    p.add_argument("--schema", metavar="DDL",
                   help="input schema, e.g. 'host STRING, ts TIMESTAMP, mem DOUBLE', a CSV's columns "
                        "matched to its header by name (default: Parquet's own; CSV and JSON types inferred, a "
                        "CSV's key columns read as text)")
    reader_options(p)
    slide_option(p, streaming=False)
    p.add_argument("--keep-columns", action="store_true",
                   help="write every input column (default: only the key, time and value columns) "
                        "and the aggregations")
    window_options(p, store_required=False, batch=True)


def _write(spark, out, target: str, overwrite: bool) -> None:
    """Write ``out`` as Parquet to ``target``.  It goes to a directory
    beside the target first, which becomes the target (replacing it with
    ``overwrite``) only once the job succeeded: a job that fails (a bad
    row, a lost executor) leaves the earlier output as it was, or none."""
    import uuid

    jvm = spark._jvm
    dst = jvm.org.apache.hadoop.fs.Path(target)
    fs = dst.getFileSystem(spark._jsc.hadoopConfiguration())
    src = jvm.org.apache.hadoop.fs.Path(f"{target.rstrip('/')}.mta-tmp-{uuid.uuid4().hex[:12]}")
    try:
        out.write.mode("errorifexists").parquet(src.toString())
    except BaseException:
        with contextlib.suppress(Exception):  # the job's own error is the one to report
            fs.delete(src, True)
        raise
    if fs.exists(dst) and not overwrite:
        raise CLIError(f"the windows are in {src.toString()}: {target} appeared while the job ran")
    if fs.exists(dst) and not fs.delete(dst, True):
        raise CLIError(f"the windows are in {src.toString()}: the earlier {target} could not be deleted")
    if not fs.rename(src, dst):
        raise CLIError(f"the windows are in {src.toString()}: moving them to {target} failed")


def run(args, spark=None) -> int:
    spec = window_spec(args)
    local = inputs.check_input(args.input)
    fmt = inputs.format_of(args.input, local, args.format)
    out_local = inputs.local_path(args.output)
    if out_local is not None and os.path.exists(out_local) and not args.overwrite:
        raise CLIError(f"output {args.output} exists; pass --overwrite to replace it")
    inputs.check_apart(args.input, args.output)
    inputs.check_writable(args.output)
    store = batch_store(args.store)
    progress = Progress()
    with session(args, spark, "run", progress) as spark:
        from .. import excluded, traffic
        from ..api import choose_engine

        # Spark parses the DDL: in a session (a console script has none before it)
        schema = inputs.parse_schema(args.schema) if args.schema is not None else None
        before, left_out = traffic.round_trips(spark), excluded.rejected_rows(spark)
        t0 = time.monotonic()
        with progress.stage("reading input", spark, f"{fmt} {args.input}"):
            if fmt == "csv" and schema is None:  # the inferred types, keys as text
                schema = inputs.inferred_schema(spark, fmt, args.input, args.option, spec.keys, args.time)
            types = {}
            if schema is not None:
                respelled(args, schema.names)
                schema, types = text_columns(schema, fmt, args)
            df = inputs.load(spark, fmt, args.input, args.option, schema)
            spec = respelled(args, df.columns)
            out = windows(df, args, spec, store, None, types)
            out, observation = observe_rejected(out, args)
            engine, why = choose_engine(dataclasses.replace(spec, store=store, engine=args.engine),
                                        typed(df, args, types))
        warn_where_windows_go(store, engine, spark.sparkContext.master)
        with progress.stage("running windows", spark,
                            f"{describe(spec)}, into {args.output}; engine {engine}: {why}",
                            job=f"{PROG} run: sliding window {describe(spec)}, engine {engine}"):
            _write(spark, out, inputs.spark_path(args.output), args.overwrite)
        elapsed = time.monotonic() - t0
        trips = traffic.round_trips(spark) - before
        rows = spark.read.parquet(inputs.spark_path(args.output)).count()
        left_out = excluded.rejected_rows(spark) - left_out
    if spec.slide is not None and args.on_bad_row == "flag":  # no output row to flag: left out, counted
        flagged = f"; {left_out:,} rejected, left out of the windows"
        if left_out:
            _log.warning("%s run: %d rows rejected, left out of the windows of %s", PROG, left_out, args.output)
    else:
        rejected = observation.get["rejected"] if observation is not None else None
        flagged = "" if rejected is None else f"; {rejected:,} rejected, flagged in column 'rejected'"
        if rejected:
            _log.warning("%s run: %d of %d rows rejected (flagged in column 'rejected' of %s)",
                         PROG, rejected, rows, args.output)
    print(f"wrote {rows:,} rows to {args.output} (Parquet: {', '.join(out.columns)}) "
          f"in {duration(elapsed)}, {rows / max(elapsed, 1e-9):,.0f} rows/s{flagged}"
          + round_trips_note(store, trips))
    return EXIT_OK


COMMAND = Command(
    name="run",
    summary="batch: sliding windows over a CSV/Parquet/JSON input, Parquet output",
    description="Read the input, compute each row's window aggregations per key, write Parquet with "
                "the key, time and value columns (every input column with --keep-columns) and one column per "
                "aggregation (named after it).",
    epilog=f"example:\n  {PROG} run --input readings.csv --output windows --key host --time ts "
           "--value mem --agg max,mean,stddev --range 3600\n"
           f"  {PROG} run --input usage.csv --output windows --key host --time ts "
           "--value cpu,mem --agg 'max(cpu)' --agg 'mean(mem)' --range 1h   (columns max_cpu, mean_mem)",
    add_arguments=add_arguments, run=run)

"""Spark batch: the windows stage of ``mta-spark demo``, before and after the
columnar engine ran it.

The demo's own data (:func:`spark_ops.telemetry.fleet_memory`: the
profile's readings from its hosts over 24 hours, bursty and irregular,
written as Parquet by the demo's own writer) and its own windows stage:
read the Parquet, ``sliding_window(..., aggs=["max", "mean", "stddev"],
range=3600)`` per host, write Parquet.  Two methods, in one Spark session,
on the same files, interleaved (old, new, old, new, ...):

* ``MTA, file store named`` (what the demo ran before): ``engine="amta"``
  with ``store=`` the embedded file store (SQLite), every row through an
  Amortized MTA.  A batch window moves to the store only when it outgrows
  ``buffer_size + cache_size`` rows (:attr:`spark_ops.spec.WindowSpec.spill_rows`);
  the demo's one-hour windows hold about 140 rows, so this row's windows
  stay in executor memory and it no longer measures the store;
* ``columnar`` (what the demo runs now): the default ``engine="auto"``
  with the same ``store=``, which runs this job on the columnar engine,
  the windows in executor memory;
* ``MTA, in memory``: ``engine="amta"`` without a store (the compiled
  core when built), the ready aggregations fused into one monoid;
* ``MTA user monoids, file store named``: ``engine="amta"`` with the file
  store named (its windows in memory, as above) and the same three results from aggregators written as a user would
  (:data:`USER_AGGS`: not the ready ones, so not fused and no native
  combine): the MTA path of user monoids;
* ``SQL table function``: the same job through ``mta_sliding_window``
  (:mod:`spark_ops.sql`, ``order => 'seq'``, ``seq`` the input order,
  which breaks ties as the DataFrame call does), which Spark
  feeds one row at a time; the same engine choice (columnar);
* ``UDTF hand-over alone``, pickled and Arrow: a Python UDTF that returns
  each row as it came, its table partitioned and ordered as the SQL
  function asks for its own (``PARTITION BY host ORDER BY ts``): what Spark's row-at-a-time hand-over to a Python table
  function costs before any window, with rows pickled (as
  ``mta_sliding_window`` takes them) and with Spark's Arrow transport;
* ``pipeline alone``: the same stage with the windows left out: the
  Parquet read, the arrival number (the plan's one added column), the shuffle by host,
  the sort, the Arrow round trip to a Python function that returns the
  value as each output, the Parquet write.  No window engine in this plan
  can beat it: before / pipeline is the largest speedup the stage can get
  from the windows alone.

For each run: its wall time, the CPU time of the JVM (driver and
executors: local mode is one JVM) and of the Python workers, each summed
over the processes below the benchmark (psutil, user + system, with the
reaped children's), and the load average before it.  The
methods must agree on the sums of the three output columns (up to
rounding, as they add in different orders).
"""

from __future__ import annotations

import math
import os
import statistics
import time

from mta import Aggregator, Monoid

from . import common, sparkbench
from .common import RunConfig
from .experiment import Run, save_figure

NAME = "spark-demo"

PROFILES = {
    "full": dict(rows=1_000_000, hosts=300, repeats=3),
    "quick": dict(rows=200_000, hosts=60, repeats=2),
    "tiny": dict(rows=3_000, hosts=5, repeats=1),
}
#: The demo's aggregations (spark_ops.cli.demo_report.DEMO_AGGS, which run() checks this against), spelled
#: out: bench.spark_before_job imports this module beside an older commit's library, which lacks that module.
AGGS = ["max", "mean", "stddev"]
OLD = "MTA, file store named (before)"
NEW = "columnar (now)"
MTA_MEMORY = "MTA, in memory"
USER = "MTA user monoids, file store named"
SQL = "SQL table function (columnar)"
HANDOVER = "UDTF hand-over alone (pickled)"
HANDOVER_ARROW = "UDTF hand-over alone (Arrow)"
PIPELINE = "pipeline alone (no window)"
METHODS = [OLD, NEW, MTA_MEMORY, USER, SQL, HANDOVER, HANDOVER_ARROW, PIPELINE]
#: Methods without a window: their outputs are not compared.
NO_WINDOW = (HANDOVER, HANDOVER_ARROW, PIPELINE)
#: The demo's shuffle partitions: 4 x the cores of local[2] (mta-spark's default).
PARTITIONS = 8


# -- max, mean and stddev as a user writes them (module-level functions: they pickle) --

def _user_max(a, b):
    return b if a is None or (b is not None and b > a) else a


def _user_pair_add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def _user_with_one(x):
    return (x, 1)


def _user_ratio(v):
    return v[0] / v[1] if v[1] else None


def _user_moments(a, b):
    """Chan et al.'s merge of (count, mean, M2)."""
    if not a[0]:
        return b
    if not b[0]:
        return a
    n = a[0] + b[0]
    delta = b[1] - a[1]
    return (n, a[1] + delta * b[0] / n, a[2] + b[2] + delta * delta * a[0] * b[0] / n)


def _user_moment_of(x):
    return (1, x, 0.0)


def _user_stddev(v):
    return math.sqrt(v[2] / (v[0] - 1)) if v[0] > 1 else None


#: The demo's aggregations as user monoids (not recognised as ready ones).
USER_AGGS = [("max", Aggregator(Monoid(_user_max, None, name="user_max"), name="user_max"), "double"),
             ("mean", Aggregator(Monoid(_user_pair_add, (0, 0), name="user_mean"), _user_with_one, _user_ratio,
                                 name="user_mean"), "double"),
             ("stddev", Aggregator(Monoid(_user_moments, (0, 0.0, 0.0), name="user_moments"), _user_moment_of,
                                   _user_stddev, name="user_stddev"), "double")]


def _windows_stage(spark, input_dir: str, out_dir: str, store: str | None, engine: str, aggs=AGGS) -> None:
    """The demo's windows stage (spark_ops.cli.demo), with ``engine``."""
    from spark_ops import sliding_window
    from spark_ops.cli.demo_report import DEMO_WINDOW

    df = spark.read.parquet(input_dir)
    windows = sliding_window(df, **DEMO_WINDOW, aggs=aggs, store=store, engine=engine)
    windows.write.mode("overwrite").parquet(out_dir)


def _sql_stage(spark, input_dir: str, out_dir: str) -> None:
    """The windows stage as the SQL table function (spark_ops.sql)."""
    from pyspark.sql import functions as F

    from spark_ops.cli.demo_report import DEMO_WINDOW as W
    from spark_ops.sql import register_sql

    register_sql(spark)
    # readings of one host at the same time enter its window in input order, as in the DataFrame call
    readings = spark.read.parquet(input_dir).withColumn("seq", F.monotonically_increasing_id())
    readings.createOrReplaceTempView("readings")
    spark.sql(f"""SELECT * EXCEPT (seq) FROM mta_sliding_window(TABLE(readings), order => 'seq',
                  key => '{W["key"]}', time => '{W["time"]}', value => '{W["value"]}', aggs => '{",".join(AGGS)}',
                  range => {W["range"]})""") \
         .write.mode("overwrite").parquet(out_dir)


class _Identity:
    """A Python UDTF that returns every row as it came."""

    @staticmethod
    def analyze(table):
        from pyspark.sql.udtf import AnalyzeResult

        return AnalyzeResult(schema=table.dataType)

    def eval(self, row):
        yield tuple(row)


def _handover_stage(spark, input_dir: str, out_dir: str, arrow: bool) -> None:
    """Spark's hand-over of the rows to a Python UDTF and back, no window."""
    from pyspark.sql.functions import udtf

    from spark_ops.cli.demo_report import DEMO_WINDOW as W

    spark.udtf.register("mta_bench_identity", udtf(_Identity, useArrow=arrow))
    spark.read.parquet(input_dir).createOrReplaceTempView("readings")
    spark.sql(f"SELECT * FROM mta_bench_identity(TABLE(readings) PARTITION BY {W['key']} ORDER BY {W['time']})") \
         .write.mode("overwrite").parquet(out_dir)


def _pipeline_stage(spark, input_dir: str, out_dir: str) -> None:
    """The stage's plan (spark_ops.batch) with a Python function in place of the windows."""
    from pyspark.sql import functions as F

    from spark_ops.cli.demo_report import DEMO_WINDOW as W

    def values_as_outputs(batches):
        import pyarrow as pa

        for batch in batches:
            value = batch.column(2)
            yield pa.RecordBatch.from_arrays(batch.columns[:3] + [value] * len(AGGS),
                                             names=batch.schema.names[:3] + AGGS)

    df = spark.read.parquet(input_dir)
    schema = ", ".join([f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields]
                       + [f"{a} double" for a in AGGS])
    (df.withColumn("arrival", F.monotonically_increasing_id()).repartition(W["key"])
       .sortWithinPartitions(W["key"], W["time"], "arrival")
       .mapInArrow(values_as_outputs, schema).write.mode("overwrite").parquet(out_dir))


def _checksums(spark, out_dir: str) -> list[float]:
    from pyspark.sql import functions as F

    row = spark.read.parquet(out_dir).agg(*[F.sum(a).alias(a) for a in AGGS]).collect()[0]
    return [row[a] for a in AGGS]


def run(cfg: RunConfig) -> dict:
    from spark_ops.cli.demo_report import DEMO_AGGS, DEMO_HOURS, DEMO_SEED, DEMO_WINDOW, demo_readings, \
        write_parquet_input

    if tuple(AGGS) != DEMO_AGGS:
        raise RuntimeError(f"bench.spark_demo.AGGS {AGGS} is not the demo's {list(DEMO_AGGS)}: make them one")
    sparkbench.ship_by_value(__name__)  # USER_AGGS' functions
    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "aggs": AGGS, "range_seconds": DEMO_WINDOW["range"], "methods": METHODS,
                          "master": sparkbench.MASTER, "shuffle_partitions": PARTITIONS})
    data = job.data
    data["notes"] = [
        f"{p['rows']:,} readings from {p['hosts']} hosts over {DEMO_HOURS:g} h (the demo's generator and seed "
        f"{DEMO_SEED}), windows of {DEMO_WINDOW['range']:,} s, max, mean and stddev per host; the stage reads "
        "Parquet and writes Parquet.",
        f"The methods alternate, {p['repeats']} run(s) each, in one session; the medians count.",
        "CPU: user + system seconds of the JVM (driver and executors, one process in local mode) and of "
        "the Python workers (psutil), per output row.",
        "MTA, file store named: engine='amta' with store=file:... (a window moves to the store past buffer_size + "
        "cache_size rows; the demo's stay in memory); columnar: engine='auto' with the same store, "
        "which sliding_window runs on the columnar engine (windows in executor memory).",
    ]
    records = data["records"] = []
    with sparkbench.spark_run(cfg, data, PARTITIONS, "mta-bench-demo-") as (spark, work):
        input_dir, out_dir = os.path.join(work, "input"), os.path.join(work, "windows")
        store = f"file://{work}/state"
        write_parquet_input(demo_readings(p["hosts"], p["rows"]), input_dir)
        stages = {OLD: lambda: _windows_stage(spark, input_dir, out_dir, store, "amta"),
                  NEW: lambda: _windows_stage(spark, input_dir, out_dir, store, "auto"),
                  MTA_MEMORY: lambda: _windows_stage(spark, input_dir, out_dir, None, "amta"),
                  USER: lambda: _windows_stage(spark, input_dir, out_dir, store, "amta", USER_AGGS),
                  SQL: lambda: _sql_stage(spark, input_dir, out_dir),
                  HANDOVER: lambda: _handover_stage(spark, input_dir, out_dir, arrow=False),
                  HANDOVER_ARROW: lambda: _handover_stage(spark, input_dir, out_dir, arrow=True),
                  PIPELINE: lambda: _pipeline_stage(spark, input_dir, out_dir)}
        for method in METHODS:  # start the Python workers (and import NumPy) before the first timed run
            stages[method]()
        for repeat in range(p["repeats"]):
            for method in METHODS:
                load = os.getloadavg()[0]
                with sparkbench.CpuMeter() as cpu:
                    t0 = time.perf_counter()
                    stages[method]()
                    seconds = time.perf_counter() - t0
                jvm, python = cpu.jvm, cpu.python
                n = p["rows"]
                rec = {"method": method, "repeat": repeat, "rows": n, "seconds": seconds, "rows_per_s": n / seconds,
                       "cpu_seconds": jvm + python, "cpu_us_per_row": 1e6 * (jvm + python) / n,
                       "jvm_cpu_us_per_row": 1e6 * jvm / n, "python_cpu_us_per_row": 1e6 * python / n,
                       "load_average_before": round(load, 2),
                       "checksums": None if method in (HANDOVER, HANDOVER_ARROW) else _checksums(spark, out_dir)}
                records.append(rec)
                cfg.log(f"  spark-demo {method:<26} {rec['rows_per_s']:>10,.0f} rows/s, "
                        f"{rec['cpu_us_per_row']:6.2f} us CPU/row (JVM {rec['jvm_cpu_us_per_row']:.2f}, Python "
                        f"{rec['python_cpu_us_per_row']:.2f}; {seconds:.1f} s, load {load:.2f})")
                job.save()
    return sparkbench.finish_checked(job, plot, checksums_agree, summarize)


def checksums_agree(records) -> bool:
    """Every run of both window methods gives the same sums of max, mean and stddev."""
    windows = [r for r in records if r["method"] not in NO_WINDOW]
    first = windows[0]["checksums"]
    return all(math.isclose(a, b, rel_tol=1e-9) for r in windows for a, b in zip(r["checksums"], first))


def median_of(data: dict, method: str, key: str) -> float | None:
    values = [r[key] for r in data["records"] if r["method"] == method]
    return statistics.median(values) if values else None


def summarize(data: dict) -> dict:
    """The columnar engine over the MTA with the file store named, as the
    library runs both now (issue 12's 5x over the library it was filed on
    is :mod:`bench.spark_before`'s target), and the ceilings beside it."""
    old, new = median_of(data, OLD, "rows_per_s"), median_of(data, NEW, "rows_per_s")
    if not (old and new):
        return {}
    speedup = new / old
    cpu = median_of(data, OLD, "cpu_us_per_row") / median_of(data, NEW, "cpu_us_per_row")
    python = median_of(data, OLD, "python_cpu_us_per_row") / median_of(data, NEW, "python_cpu_us_per_row")
    ceiling = median_of(data, PIPELINE, "rows_per_s")
    sql = median_of(data, SQL, "rows_per_s")
    return {"windows_stage_speedup": {"ratio": speedup, "cpu_per_row_ratio": cpu, "python_cpu_per_row_ratio": python,
                                      "pipeline_over_before": ceiling / old if ceiling else None,
                                      "sql_over_dataframe": sql / new if sql else None,
                                      "handover_rows_per_s": median_of(data, HANDOVER, "rows_per_s"),
                                      "handover_arrow_rows_per_s": median_of(data, HANDOVER_ARROW, "rows_per_s"),
                                      "sql_cpu_per_row_ratio": (median_of(data, SQL, "cpu_us_per_row")
                                                                / median_of(data, NEW, "cpu_us_per_row")) if sql else None}}


def cpu_table(data: dict, methods, *, wall: bool = True) -> tuple[list[str], list[list[str]]]:
    """Each method's medians (rows/s, wall seconds when ``wall``, CPU per
    row, JVM and Python workers apart) and its runs: header and rows."""
    rows = []
    for method in methods:
        runs = [r for r in data["records"] if r["method"] == method]
        if runs:
            keys = ["seconds"] * wall + ["cpu_us_per_row", "jvm_cpu_us_per_row", "python_cpu_us_per_row"]
            rows.append([method, f"{median_of(data, method, 'rows_per_s'):,.0f}"]
                        + [f"{median_of(data, method, k):.{1 if k == 'seconds' else 2}f}" for k in keys]
                        + [", ".join(f"{r['rows_per_s']:,.0f}" for r in runs),
                           ", ".join(f"{r['load_average_before']:.2f}" for r in runs)])
    header = (["method", "rows/s"] + ["wall s"] * wall + ["CPU us/row", "of it JVM", "of it Python workers",
                                                          "rows/s of each run", "load average before each run"])
    return header, rows


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    return [("the demo's windows stage (median of the runs)", *cpu_table(data, METHODS))]


def summary_lines(data: dict) -> list[str]:
    lines = [f"checksums (sums of {', '.join(AGGS)}) agree: {'yes' if data.get('checksums_agree') else 'NO'}"]
    for key, v in (data.get("summary") or summarize(data)).items():
        lines.append(f"[ratio] {key}: {v['ratio']:.2f}x the rows per second "
                     f"({v['cpu_per_row_ratio']:.2f}x less CPU per row; in the Python workers, where the windows "
                     f"are, {v['python_cpu_per_row_ratio']:.2f}x less): columnar (now) over MTA, file store named "
                     "(before); issue 12's 5x target is spark-before's, against the library it was filed on")
        if v.get("sql_over_dataframe"):
            lines.append(f"the SQL table function runs at {v['sql_over_dataframe']:.2f}x the rows per second of the "
                         f"DataFrame call on the same engine ({v['sql_cpu_per_row_ratio']:.2f}x its CPU per row)")
        if v.get("handover_rows_per_s"):
            lines.append(f"Spark's hand-over to a Python UDTF and back, with no window, runs at "
                         f"{v['handover_rows_per_s']:,.0f} rows/s with rows pickled and "
                         f"{v['handover_arrow_rows_per_s']:,.0f} with its Arrow transport: the most a SQL table "
                         "function can reach here")
        if v.get("pipeline_over_before"):
            lines.append(f"the pipeline alone runs at {v['pipeline_over_before']:.2f}x the rows per second of "
                         "before: what the stage's plan costs with no window (a window engine adds to it; the "
                         "runs' spread can put one above it)")
    return lines


report = sparkbench.reporter("Spark batch, the windows stage of mta-spark demo, before and now", tables,
                             summary_lines)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, key, label in ((axes[0], "rows_per_s", "rows per second (higher is better)"),
                           (axes[1], "cpu_us_per_row", "CPU microseconds per row, JVM + Python (lower is better)")):
        values = [median_of(data, m, key) or 0 for m in METHODS]
        ax.bar(range(len(METHODS)), values, color=["0.6", "tab:blue", "tab:orange", "tab:red", "tab:green", "0.75",
                                                   "0.8", "0.85"], tick_label=METHODS)
        ax.tick_params(axis="x", labelsize=8)
        for i, v in enumerate(values):
            ax.annotate(f"{v:,.0f}" if key == "rows_per_s" else f"{v:.2f}", (i, v), ha="center", va="bottom",
                        fontsize=9)
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_title(f"mta-spark demo's windows stage, {data['config']['rows']:,} rows", fontsize=10)
    save_figure(plt, fig, path, sparkbench.caption(data))

"""What the Spark benchmarks share: sessions, generated data, timed jobs and
the memory of the Python workers.

Every Spark benchmark runs on ``local[2]`` (the two cores of the machine),
with one shuffle partition per key so that every key is its own task, and
times whole jobs: a job's output is consumed by an aggregation (the sum and
count of the result column), which makes Spark compute every row of it and
gives a checksum that the methods must agree on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time

from . import common
from .common import RunConfig
from .experiment import report_text, save_figure

MASTER = "local[2]"


def ship_by_value(module_name: str) -> None:
    """Pickle the functions of benchmark module ``module_name`` by value, so
    that the executors' Python workers need not import ``bench`` (their
    working directory need not be the repository's)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])


def session(cfg: RunConfig, partitions: int, **conf):
    """A fresh local session (a running one is stopped first)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from spark_ops.session import local_session

    if SparkContext._active_spark_context is not None:
        SparkSession.builder.getOrCreate().stop()
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    conf.setdefault("spark.sql.adaptive.enabled", "false")  # keep one task per key partition
    conf.setdefault("spark.driver.memory", "4g")
    spark = local_session(MASTER, app="mta bench", shuffle_partitions=partitions, **conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def spark_run(cfg: RunConfig, data: dict, partitions: int, prefix: str):
    """A benchmark run's session (:func:`session`) and scratch directory:
    yields ``(spark, directory)`` and records the versions in
    ``data["spark"]``; however the run ends, the session is stopped and the
    directory removed."""
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        spark = session(cfg, partitions)
        try:
            data["spark"] = spark_versions(spark)
            yield spark, work
        finally:
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def finish_checked(job, plot, checksums_agree, summarize) -> dict:
    """``job.finish`` for a benchmark whose methods must agree:
    ``checksums_agree(records)`` and ``summarize(data)`` kept in the data."""
    return job.finish(plot, checksums_agree=lambda d: checksums_agree(d["records"]), summary=summarize)


def report(title: str, data: dict, tables: list, summary: list) -> str:
    """A Spark benchmark's text report: its ``title`` with the profile,
    master and Spark version, its ``tables``
    (:func:`bench.common.render_tables`), the notes, the ``summary`` lines."""
    head = f"{title} ({data['profile']} profile, {data['spark']['master']}, Spark {data['spark']['spark']})"
    return report_text([head, "", common.render_tables(tables), "", *summary], data)


def reporter(title, tables, summary_lines):
    """A benchmark module's ``report(data)``: :func:`report` of ``title``
    (a string, or a function of the data), ``tables(data)`` and
    ``summary_lines(data)``."""
    def report_of(data: dict) -> str:
        return report(title(data) if callable(title) else title, data, tables(data), summary_lines(data))
    return report_of


def plot_bars(data: dict, path, labels: list[str], panels, baseline: str, *, row_height: float) -> None:
    """Two panels of horizontal bars on log scales, a bar a record of
    ``data`` (``labels``: theirs, in order), saved at ``path``.  ``panels``:
    the two ``(key, title)``, the record's reading at ``key`` the bar's
    length (None or missing: no bar); the records of method ``baseline`` in
    gray, the others in red."""
    plt = common.pyplot()
    recs = data["records"]
    fig, axes = plt.subplots(1, 2, figsize=(13, row_height * len(recs) + 2))
    for ax, (key, title) in zip(axes, panels):
        ax.barh(range(len(recs)), [r.get(key) or 0 for r in recs],
                color=["tab:gray" if r["method"] == baseline else "tab:red" for r in recs])
        ax.set_yticks(range(len(recs)), labels, fontsize=8)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    save_figure(plt, fig, path, caption(data), bottom=0.04)


def readings(spark, keys: int, rows_per_key: int, seed: int = 1):
    """``keys`` x ``rows_per_key`` rows ``(k, t, v)``: key ``k`` in 0..keys-1,
    one reading a second per key (``t`` in seconds, so a time window of W
    seconds holds W rows, like a count window of W rows), ``v`` uniform in
    [0, 100).  Generated in the JVM and cached, so every method reads the
    same data from memory."""
    from pyspark.sql import functions as F

    n = keys * rows_per_key
    df = (spark.range(n, numPartitions=2)
          .select((F.col("id") % keys).cast("int").alias("k"),
                  F.floor(F.col("id") / keys).cast("double").alias("t"),
                  (F.rand(seed) * 100).alias("v"))
          .cache())
    df.count()
    return df


def timed(df, column: str) -> tuple[float, float, int]:
    """Run the job computing ``df`` and return ``(seconds, sum of column,
    rows)``; the sum is the checksum the methods are compared by."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    row = df.agg(F.sum(column).alias("s"), F.count("*").alias("n")).collect()[0]
    return time.perf_counter() - t0, row["s"], row["n"]


class CpuMeter:
    """CPU seconds (user + system) of the processes below this one while a
    block runs, by kind: :attr:`python` (PySpark's daemon and workers),
    :attr:`store` (a redis-server child: the store's work, not Spark's) and
    :attr:`jvm` (the driver and executors; anything else).

    Sampled every ``every`` seconds from a thread as well as at both ends,
    each process counted up to its last sample: PySpark's daemon ignores
    SIGCHLD, so a worker that exits while the block runs (Spark stops
    workers idle for a minute) is reaped by the kernel and its CPU reaches
    no parent's counters, where reading the counters at both ends would
    lose all of it.  What an exiting process runs after its last sample, at
    most ``every`` seconds of it, is lost; a process started during the
    block counts from zero.  Reaped children's counters are left out, so
    nothing is counted twice."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.jvm = self.python = self.store = 0.0
        self._start: dict = {}
        self._last: dict = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _now() -> dict:
        """``{(pid, start time): (kind, CPU seconds)}`` of every process below this one: "python" for
        the workers, "store" for a store server (the redis-server that bench/redis_server.py starts as a
        child, which is not Spark's work), "jvm" for the rest."""
        import psutil

        out = {}
        for p in psutil.Process().children(recursive=True):
            try:
                with p.oneshot():
                    t, name, born = p.cpu_times(), p.name().lower(), p.create_time()
            except psutil.Error:
                continue
            kind = "python" if "python" in name else "store" if "redis-server" in name else "jvm"
            out[(p.pid, born)] = (kind, t.user + t.system)
        return out

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            sample = self._now()
            with self._lock:
                self._last.update(sample)

    def __enter__(self) -> "CpuMeter":
        self._start = self._now()
        self._last = dict(self._start)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._last.update(self._now())
        totals = {"jvm": 0.0, "python": 0.0, "store": 0.0}
        for process, (kind, cpu) in self._last.items():
            totals[kind] += cpu - self._start.get(process, (kind, 0.0))[1]
        self.jvm, self.python, self.store = totals["jvm"], totals["python"], totals["store"]


class WorkerMemory:
    """Peak resident memory of the Python workers Spark started, sampled
    every ``every`` seconds from a thread (psutil)."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.peak_worker_mb = 0.0  # the largest single worker
        self.peak_total_mb = 0.0  # all workers together
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def workers() -> list:
        import psutil

        out = []
        for p in psutil.Process().children(recursive=True):
            try:
                if "python" in p.name().lower():
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def _sample(self) -> None:
        import psutil

        sizes = []
        for p in self.workers():
            try:
                sizes.append(p.memory_info().rss / 2**20)
            except psutil.Error:
                pass
        if sizes:
            self.peak_worker_mb = max(self.peak_worker_mb, max(sizes))
            self.peak_total_mb = max(self.peak_total_mb, sum(sizes))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self) -> "WorkerMemory":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()  # a job shorter than one period is still seen: Spark keeps its workers for the next


def spark_versions(spark) -> dict:
    import pyspark

    return {"pyspark": pyspark.__version__, "spark": spark.version, "master": MASTER,
            "java_home": os.environ.get("JAVA_HOME")}


def caption(data: dict) -> str:
    """A plot's bottom line: the machine, Spark and its master."""
    return common.machine_caption(data["machine"]) + f", Spark {data['spark']['spark']} {MASTER}"

"""SparkSession settings of this project, in one place (used by the CLI,
``deploy/mta_spark_main.py`` and the tests).

:func:`spark_environment` sets what PySpark needs from the environment when
it is not set already: ``JAVA_HOME`` (from the ``java`` on PATH),
``PYSPARK_DRIVER_PYTHON``, and for ``local`` masters only ``PYSPARK_PYTHON``
(this interpreter, so executors see the same packages) and
``SPARK_LOCAL_IP`` (a cluster's executors have their own Python and must
reach the driver at its real address).

:data:`SESSION_DEFAULTS` and :func:`shuffle_partitions` are what a session
running ``mta-spark`` jobs has, whether ``mta-spark`` starts it or
spark-submit does (:func:`apply_session_defaults`).
"""

from __future__ import annotations

import os
import re
import shutil
import sys

#: Arrow batches to Python workers cut by rows alone
#: (``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 by default).
#: With a byte limit, Spark's Python runners measure the batch after every
#: row they write to it; ``mapInArrow``'s batch is one struct of the row's
#: columns, whose measure visits every column: the largest cost of a batch
#: ``sliding_window``'s plan in a profile (docs/benchmarks-spark.md,
#: "Spark's Arrow byte check").  Only ``Int.MaxValue`` turns the check off.
#: A batch of rows wider than 200 KB each can then pass Arrow's 2 GiB limit:
#: such a job lowers ``maxRecordsPerBatch``, or sets a byte limit again.
ARROW_BATCH_CONF = {"spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1)}

#: Timestamps written to Parquet as the format's standard type, 64-bit
#: microseconds since the epoch, UTC (what Iceberg, pyarrow, pandas, DuckDB
#: and Polars read as it is), not Spark's default INT96, which Parquet
#: deprecates and Spark keeps for old Hive and Impala readers.  INT96 is a
#: 12-byte binary per value, which Parquet's writer tries to dictionary-
#: encode by hashing, a large share of the demo's CPU per row
#: (docs/benchmarks-spark.md, "Against the library when issue 12 was
#: filed").  Spark reads both.
PARQUET_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}

#: Settings of a session that runs ``mta-spark`` jobs, unless its own
#: configuration says otherwise: timestamps without a zone are read as UTC,
#: every shuffle partition stays a task (adaptive execution would merge
#: the window partitions into fewer, longer tasks), Arrow batches are
#: cut by rows alone (:data:`ARROW_BATCH_CONF`) and Parquet timestamps are
#: written as microseconds (:data:`PARQUET_CONF`).
SESSION_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
    **ARROW_BATCH_CONF,
    **PARQUET_CONF,
}

#: PySpark's processes talk to the JVM over Unix domain sockets instead of
#: loopback TCP (Spark 4.1+, SPARK-51688): executors with their Python
#: workers, and the driver's transfers (collect, createDataFrame,
#: accumulators).  What it saves is mostly a cost per job of Python tasks,
#: which a short ``mapInArrow`` job, with a Python task on every partition,
#: pays more of than ``applyInPandas`` (docs/benchmarks-spark.md, "Python
#: tasks over a Unix socket").  A setting of the SparkContext: it holds for
#: sessions this project starts; one spark-submit starts takes it from the
#: submit configuration (the image's ``spark-defaults.conf``, the
#: Kubernetes applications' ``sparkConf``).
PYTHON_SOCKET_CONF = {"spark.python.unix.domain.socket.enabled": "true"}

#: What :func:`local_session` sets for small machines and notebooks.
LOCAL_SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    **ARROW_BATCH_CONF,
    **PARQUET_CONF,
    **PYTHON_SOCKET_CONF,
}


def shuffle_partitions(cores: int) -> int:
    """Shuffle partitions of an ``mta-spark`` job: four window tasks a core,
    so that a key-heavy partition does not leave the other cores idle."""
    return 4 * cores


def master_cores(master: str) -> int:
    """The cores of a ``local[N]`` master (``local``: 1); this machine's for
    ``local[*]`` and any other master."""
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master.strip())
    if master.strip() == "local":
        return 1
    if m and m.group(1) != "*":
        return int(m.group(1))
    return os.cpu_count() or 2


def application_cores(spark) -> int:
    """A running application's cores: from its configuration when it says,
    else what the cluster has registered so far (at least 2)."""
    conf = spark.sparkContext.getConf()
    instances, cores = conf.get("spark.executor.instances"), conf.get("spark.executor.cores")
    try:
        if instances and cores:
            return max(1, int(instances) * int(cores))
        if conf.get("spark.cores.max"):
            return max(1, int(conf.get("spark.cores.max")))
    except ValueError:
        pass
    return max(2, spark.sparkContext.defaultParallelism)


def apply_session_defaults(spark) -> None:
    """Give a session started elsewhere (spark-submit) the settings of
    :data:`SESSION_DEFAULTS` and :func:`shuffle_partitions` that its own
    configuration does not set."""
    conf = spark.sparkContext.getConf()
    for key, value in SESSION_DEFAULTS.items():
        if not conf.contains(key):
            spark.conf.set(key, value)
    if not conf.contains("spark.sql.shuffle.partitions"):
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions(application_cores(spark))))


def spark_environment(master: str | None = None) -> None:
    if "JAVA_HOME" not in os.environ:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("no java on PATH: install a JDK 17 (apt-get install openjdk-17-jre-headless)")
        os.environ["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is not None and master.startswith("local"):
        # local executors run on this machine, with this interpreter; a
        # cluster's have their own Python, and must reach the driver's address
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def local_session_conf(**conf) -> dict:
    """The settings :func:`local_session` starts a session with:
    :data:`LOCAL_SESSION_CONF`, under ``conf`` (the caller's win)."""
    return {**LOCAL_SESSION_CONF, **conf}


def local_session(master: str | None = "local[2]", app: str = "mta", **conf):
    """A session on ``master`` (``None``: the one spark-submit configured)
    with quiet logs and settings for small machines; ``conf`` is Spark
    settings, ``shuffle_partitions`` a shorthand."""
    spark_environment(master)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    partitions = conf.pop("shuffle_partitions", None)
    if partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(partitions)
    elif master is not None:  # a small machine's default; spark-submit's own otherwise
        conf.setdefault("spark.sql.shuffle.partitions", "4")
    for k, v in local_session_conf(**conf).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

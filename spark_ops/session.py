"""A SparkSession configured for this project (used by the CLI and tests).

Sets what PySpark needs from the environment when it is not set already:
``JAVA_HOME`` (from the ``java`` on PATH), ``PYSPARK_DRIVER_PYTHON``, and
for ``local`` masters only ``PYSPARK_PYTHON`` (this interpreter, so
executors see the same packages) and ``SPARK_LOCAL_IP`` (a cluster's
executors have their own Python and must reach the driver at its real
address).
"""

from __future__ import annotations

import os
import shutil
import sys


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
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

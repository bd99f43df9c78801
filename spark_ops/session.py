"""A SparkSession configured for this project (used by the CLI and tests).

Sets what PySpark needs from the environment when it is not set already:
``JAVA_HOME`` (from the ``java`` on PATH), ``PYSPARK_PYTHON`` (this
interpreter, so executors see the same packages) and ``SPARK_LOCAL_IP``.
"""

from __future__ import annotations

import os
import shutil
import sys


def spark_environment() -> None:
    if "JAVA_HOME" not in os.environ:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("no java on PATH: install a JDK 17 (apt-get install openjdk-17-jre-headless)")
        os.environ["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def local_session(master: str = "local[2]", app: str = "mta", **conf):
    """A session on ``master`` with quiet logs and settings for small machines."""
    spark_environment()
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", str(conf.pop("shuffle_partitions", 4)))
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

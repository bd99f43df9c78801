"""The job process of ``bench.spark_before``: one Spark session on the
library its ``PYTHONPATH`` puts first, running the demo's windows stage on
request.

Started as ``python -m bench.spark_before_job PARTITIONS`` from a directory
that is not the repository's (so that the ``mta``, ``stores`` and
``spark_ops`` found first are the ones ``PYTHONPATH`` names; the Spark
session's Python workers inherit that path).  It reads one JSON request a
line on standard input, ``{"input", "out", "store", "engine", "aggs"}``
(``aggs``: ``"ready"`` for the demo's names, ``"user"`` for
:data:`bench.spark_demo.USER_AGGS`), runs the stage and answers with one
line ``RESULT {"spark", "pyspark", "seconds", "jvm", "python", "checksums",
"library"}``: the versions, the stage's wall time, the CPU seconds of the
JVM and of the Python workers spent in it, the sums of its output columns (read after the timing) and
the directory the library was imported from.  Only the ``sliding_window``
call is asked of the library, with arguments it has taken since before the
work the comparison measures.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _session(partitions: int):
    from spark_ops.session import local_session

    spark = local_session("local[2]", app="mta bench before/now", shuffle_partitions=partitions,
                          **{"spark.ui.showConsoleProgress": "false", "spark.sql.adaptive.enabled": "false",
                             "spark.driver.memory": "4g"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _stage(spark, request: dict) -> dict:
    import pyspark
    from pyspark.sql import functions as F

    import spark_ops

    from bench.spark_demo import AGGS, USER_AGGS
    from bench.sparkbench import CpuMeter
    from spark_ops import sliding_window

    aggs = USER_AGGS if request["aggs"] == "user" else AGGS
    df = spark.read.parquet(request["input"])
    with CpuMeter() as cpu:
        t0 = time.perf_counter()
        (sliding_window(df, key="host", time="ts", value="mem_mb", aggs=aggs, range=3600, store=request["store"],
                        engine=request["engine"])
         .write.mode("overwrite").parquet(request["out"]))
        seconds = time.perf_counter() - t0
    row = spark.read.parquet(request["out"]).agg(*[F.sum(a).alias(a) for a in AGGS]).collect()[0]
    return {"spark": spark.version, "pyspark": pyspark.__version__, "seconds": seconds,
            "jvm": cpu.jvm, "python": cpu.python,
            "checksums": [row[a] for a in AGGS], "library": os.path.dirname(os.path.dirname(spark_ops.__file__))}


def main(argv: list[str]) -> int:
    import bench.spark_demo
    from bench.sparkbench import ship_by_value

    spark = _session(int(argv[0]))
    ship_by_value(bench.spark_demo.__name__)  # USER_AGGS' functions: the workers need not import bench
    try:
        for line in sys.stdin:
            if line.strip():
                print("RESULT " + json.dumps(_stage(spark, json.loads(line))), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

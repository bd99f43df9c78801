"""The Spark session a command runs on: the given one, the active one, or a
new one with the project's session defaults (:mod:`spark_ops.session`),
quiet unless ``--verbose``."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile

from ..session import SESSION_DEFAULTS, local_session, master_cores, shuffle_partitions
from .errors import PROG

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


def active_session():
    """The active SparkSession, or None (also without pyspark)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


def session_conf(args, master: str | None, log4j: str | None = None) -> dict[str, str]:
    """The settings of a session ``mta-spark`` starts on ``master``: the
    project's defaults, the shuffle partitions, the Spark UI on unless
    ``--no-ui``, Spark's logs through the ``log4j`` file if given, then
    ``--conf`` (which wins)."""
    conf = {"spark.ui.showConsoleProgress": "false", **SESSION_DEFAULTS}
    if log4j:
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
    if args.partitions or master is not None:
        conf["spark.sql.shuffle.partitions"] = str(args.partitions or shuffle_partitions(master_cores(master)))
    # the UI shows the window job's stages and tasks while it runs (local_session turns it off
    # for notebooks and tests)
    conf["spark.ui.enabled"] = "false" if args.no_ui else "true"
    conf.update(args.conf)
    return conf


@contextlib.contextmanager
def session(args, spark, app: str, progress=None):
    """The given session, the active one, or a new local one (stopped at the end)."""
    if not args.verbose:
        # pyspark logs analysis errors with their JVM stack trace; the CLI prints one line instead
        for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if spark is None:
        spark = active_session()
    if spark is not None:
        if args.partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions))
        yield spark
        return
    log_dir = None
    log4j = None
    if not args.verbose:
        log_dir = tempfile.mkdtemp(prefix="mta-spark-log4j-")
        log4j = os.path.join(log_dir, "log4j2.properties")
        with open(log4j, "w") as f:
            f.write(_LOG4J)
        os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    # under spark-submit the session takes its master (and the rest) from spark-submit
    master = args.master or (None if "PYSPARK_GATEWAY_PORT" in os.environ else args.default_master)
    conf = session_conf(args, master, log4j)
    started = None
    try:
        with (progress.stage("starting Spark", detail=master or "spark-submit's master")
              if progress else contextlib.nullcontext()):
            started = local_session(master, app=f"{PROG} {app}", **conf)
            if not args.verbose:
                started.sparkContext.setLogLevel("OFF")
        if progress and started.sparkContext.uiWebUrl:
            progress.line(f"    Spark UI: {started.sparkContext.uiWebUrl}")
        yield started
    finally:
        if started is not None:
            started.stop()
        if log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)

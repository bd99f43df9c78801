"""Driver entry file for ``spark-submit``: runs an ``mta-spark`` command.

``mta-spark`` is a console script and ``spark-submit`` wants a ``.py`` file,
so this file stands in for it::

    spark-submit [spark options] deploy/mta_spark_main.py COMMAND [mta-spark options]

e.g. ``spark-submit --master yarn --py-files mta_windows.zip
deploy/mta_spark_main.py run --input hdfs:///in --output hdfs:///out --key host
--time ts --value mem --agg max --range 3600 --engine amta --store redis://redis:6379/0``.

The session comes from spark-submit's own configuration (``--master``,
``--deploy-mode``, ``--conf``, ``spark-defaults.conf``), so ``mta-spark``'s
``--master``, ``--conf`` and ``--no-ui`` are ignored here, with a warning on
stderr.  Like a session started by ``mta-spark`` it
reads timestamps without a zone as UTC, keeps every shuffle partition a
task (adaptive coalescing off) and cuts Arrow batches by rows alone, unless
the submit configuration says otherwise (``spark_ops.session.SESSION_DEFAULTS``); the shuffle partitions
default to 4 x the application's cores (``--partitions`` overrides).  Exit
status as ``mta-spark``: 0 done, 1 the job failed, 2 a usage or input error.
"""

from __future__ import annotations

import sys

#: mta-spark's options for the session it starts, and what to give spark-submit instead.
SESSION_OPTIONS = (("master", "--master", "--master"), ("conf", "--conf", "--conf KEY=VALUE"),
                   ("no_ui", "--no-ui", "--conf spark.ui.enabled=false"))


def ignored_options(args) -> str | None:
    """A warning naming the session options given in ``args``, which a
    session spark-submit already started does not take; None if none."""
    given = [(flag, instead) for attr, flag, instead in SESSION_OPTIONS if getattr(args, attr, None)]
    if not given:
        return None
    return (f"mta-spark: warning: {', '.join(f for f, _ in given)} ignored under spark-submit, whose "
            f"session this is: give spark-submit {', '.join(i for _, i in given)}")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from spark_ops import cli

    # --help and usage errors are answered without starting Spark
    try:
        args = cli.build_parser().parse_args(argv)
    except cli.CLIError:
        return cli.main(argv)  # prints the one-line error, status 2
    except SystemExit as e:  # --help was printed
        return e.code if isinstance(e.code, int) else 0

    warning = ignored_options(args)
    if warning:
        print(warning, file=sys.stderr, flush=True)

    from pyspark.sql import SparkSession

    from spark_ops.session import apply_session_defaults

    spark = SparkSession.builder.getOrCreate()
    try:
        if not args.verbose:  # as mta-spark: Spark's own logs with --verbose only
            spark.sparkContext.setLogLevel("WARN")
        apply_session_defaults(spark)
        return cli.main(argv, spark=spark)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())

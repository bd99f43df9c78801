"""``mta-spark``: per-key sliding windows on Spark from the command line.

Subcommands:

* ``mta-spark demo`` -- the main job: generates a fleet's memory telemetry
  (hundreds of hosts, bursty irregular readings), runs per-host one-hour
  max / mean / stddev windows on local Spark with the windows' level queues
  in the embedded file store, prints a summary and plots one host.
* ``mta-spark run`` -- batch: a CSV, Parquet or JSON input to Parquet output
  with one column per aggregation.
* ``mta-spark stream`` -- the same over a directory where files arrive
  (Spark's file source), with a checkpoint; resumable.
* ``mta-spark gc`` -- delete from a store the windows no job has used for
  a while (killed task attempts', abandoned queries'); no Spark.

Usage errors (a missing column, an unknown aggregation, an unreachable
store, a missing input, both or neither of ``--range``/``--rows``) exit with
status 2 and one line on stderr; a failed job exits with status 1 (2 when
it met a row it cannot take).  ``--verbose`` shows Spark's logs and full
tracebacks.

:func:`main` takes ``argv`` and an optional ``spark`` session (tests run
several commands on one session); without one it uses the active session
if any, else starts a local one and stops it at the end.

The package: :mod:`.app` (the subcommand table, the parser, :func:`main`),
one module per subcommand with its options and its run function
(:mod:`.run`, :mod:`.stream`, :mod:`.demo` with :mod:`.demo_report`,
:mod:`.gc`), and
what they share: :mod:`.options` (option groups and argument types),
:mod:`.inputs` (input paths, formats, readers), :mod:`.store` (the
``--store`` URL), :mod:`.window` (the window job of ``run`` and ``stream``),
:mod:`.session` (the Spark session), :mod:`.progress` and :mod:`.errors`.

The ``mta-spark`` console script is :func:`.entry.main`: without the
``spark`` extra's packages it prints which extra to install instead of a
traceback, so this package loads its names on first use.
"""

from .. import _lazy

#: Each public name and the submodule it comes from.
_EXPORTS = {"COMMANDS": "app", "build_parser": "app", "main": "app", "CLIError": "errors", "EXIT_FAILED": "errors",
            "EXIT_OK": "errors", "EXIT_USAGE": "errors", "PROG": "errors", "failure_message": "errors"}

__all__ = ["COMMANDS", "CLIError", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "PROG", "build_parser",
           "failure_message", "main"]


__getattr__, __dir__ = _lazy.exports(__name__, _EXPORTS, __all__)

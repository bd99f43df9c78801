"""The subcommand table, the parser built from it, and :func:`main`."""

from __future__ import annotations

import argparse
import traceback

from mta import __version__

from . import demo, gc, run, stream
from .errors import EXIT_FAILED, EXIT_OK, PROG, CLIError, fail, failure_message
from .options import Command, Parser, spark_options, wrap

#: Every subcommand, in the order ``mta-spark --help`` lists them.
COMMANDS: tuple[Command, ...] = (demo.COMMAND, run.COMMAND, stream.COMMAND, gc.COMMAND)
_BY_NAME = {c.name: c for c in COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Per-key sliding-window aggregation on Spark with the Monoid Tree Aggregator: "
                    "one output row per input row, with the aggregations over that row's window.",
        epilog=f"Run '{PROG} COMMAND --help' for a command's options.  Exit status: 0 done, "
               "1 the job failed, 2 a usage or input error.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                        help="print the version of mta-windows and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    for command in COMMANDS:
        p = sub.add_parser(
            command.name, parents=[spark_options(command.master)] if command.master else [],
            formatter_class=argparse.RawDescriptionHelpFormatter, help=command.summary,
            description=wrap(command.description), epilog=command.epilog)
        command.add_arguments(p)
    return parser


def main(argv=None, *, spark=None) -> int:
    """Run ``mta-spark`` with ``argv`` (default ``sys.argv[1:]``); returns the
    exit status.  ``spark``: a session to use (else the active one, else a
    new local one, stopped at the end)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CLIError as e:
        return fail(str(e), e.code)
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else EXIT_OK
    verbose = getattr(args, "verbose", False)
    try:
        return _BY_NAME[args.command].run(args, spark) or EXIT_OK
    except CLIError as e:
        return fail(str(e), e.code)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as e:  # noqa: BLE001 - one line instead of a stack trace
        # --verbose adds the traceback; the status still tells an input error (2) from a failed job (1)
        if verbose:
            traceback.print_exc()
        message, code = failure_message(e)
        hint = " (--verbose shows the details)" * (code == EXIT_FAILED and not verbose)
        return fail(message + hint, code)

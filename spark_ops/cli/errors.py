"""Exit statuses, :class:`CLIError`, and the one-line message of a failed job."""

from __future__ import annotations

import re
import sys

from ..spec import SlidingWindowError

PROG = "mta-spark"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CLIError(Exception):
    """A usage or input problem: printed as one line, exit status 2."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int) -> int:
    """Print ``message`` as mta-spark's one error line; returns ``code``."""
    sys.stdout.flush()
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return code


_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")


def failure_message(exc: BaseException) -> tuple[str, int]:
    """A one-line message and exit status for an exception from a job:
    the Python exception raised in a worker when there is one, else the
    first line of Spark's message."""
    from stores.errors import StoreAuthenticationError, StoreConfigError, StoreError

    if isinstance(exc, (SlidingWindowError, StoreConfigError, StoreAuthenticationError)):
        return _clean(str(exc)), EXIT_USAGE
    if isinstance(exc, StoreError):  # the store failed during the job
        return f"{type(exc).__name__}: {_clean(str(exc))}", EXIT_FAILED
    text = str(exc)
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")
              or "Traceback (most recent call last)" in line]
    if starts:
        for line in lines[starts[-1] + 1:]:
            m = _PY_EXCEPTION.match(line)
            if m and not line[0].isspace():
                name, msg = m.group(1), m.group(2)
                short = name.rsplit(".", 1)[-1]
                bad_input = short in ("SlidingWindowError", "StoreConfigError", "StoreAuthenticationError")
                msg = _clean(msg)
                return (msg if short == "SlidingWindowError" else f"{short}: {msg}"), \
                    (EXIT_USAGE if bad_input else EXIT_FAILED)
    first = next((line.strip() for line in lines if line.strip()), type(exc).__name__)
    first = re.sub(r"\s*SQLSTATE: \w+\.?$", "", first)
    analysis = type(exc).__name__ in ("AnalysisException", "ParseException", "IllegalArgumentException")
    if not analysis:
        first = f"{type(exc).__name__}: {first}"
    return _clean(first), (EXIT_USAGE if analysis else EXIT_FAILED)


def _clean(message: str) -> str:
    message = message.replace("pass on_bad_row='flag'", "pass --on-bad-row flag")
    message = " ".join(message.split())
    return message if len(message) <= 600 else message[:597] + "..."

"""Exit statuses, :class:`CLIError`, and the one-line message of a failed job.

:func:`failure_message` looks at the exception itself and at its causes:
this project's own errors raised in the driver are recognised by class;
an error raised in a Python worker reaches the driver only as the text of
its traceback inside pyspark's ``PythonException``, so that text is read
(and the class it names is looked up among the loaded modules); anything
else gives the first line of Spark's message.
"""

from __future__ import annotations

import re
import sys

from mta.errors import MTAError
from stores.errors import StoreAuthenticationError, StoreConfigError, StoreError

from ..spec import SlidingWindowError

PROG = "mta-spark"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CLIError(MTAError):
    """A usage or input problem: printed as one line, exit status ``code`` (2)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int) -> int:
    """Print ``message`` as mta-spark's one error line; returns ``code``."""
    sys.stdout.flush()
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return code


#: The errors that mean bad input or configuration (exit status 2).
USAGE_ERRORS = (SlidingWindowError, StoreConfigError, StoreAuthenticationError)


def failure_message(exc: BaseException) -> tuple[str, int]:
    """A one-line message and exit status for an exception from a job:
    the project's error when one is in the exception's chain (raised here or
    in a Python worker), else the first line of Spark's message."""
    for e in _chain(exc):
        found = _ours(e)
        if found is None and _is_python_worker_error(e):
            found = _from_traceback(_worker_traceback(e))
        if found is not None:
            return _configured(found)
    # A cause pyspark did not turn into an exception object (a stream's, say)
    # is only text in the message: look there for the worker's traceback.
    found = _from_traceback(str(exc)) or _raised_rejection(str(exc))
    return _configured(found if found is not None else _spark_message(exc))


#: A store's refusal of a stream restarted with another count of tasks (:mod:`stores.runs`): the
#: user's configuration, its remedy the CLI's option.
_TASKS = re.compile(r"start it with spark\.sql\.shuffle\.partitions=(\d+) again")


def _configured(found: tuple[str, int]) -> tuple[str, int]:
    message, code = found
    if _TASKS.search(message):
        return _TASKS.sub(r"start it with --partitions \1 again", message), EXIT_USAGE
    return found


def _raised_rejection(text: str) -> tuple[str, int] | None:
    """A rejected row's message that a query raised with Spark's
    ``raise_error`` (``spark_ops.cli.window``: a stream in error mode)."""
    m = re.search(r"\[USER_RAISED_EXCEPTION\] (row rejected \(.*?) SQLSTATE", text, re.S)
    return (_clean(m.group(1)), EXIT_USAGE) if m else None


def _chain(exc: BaseException):
    """``exc`` and its causes: Python's chain (``__cause__``, else an
    unsuppressed ``__context__``), the causes pyspark converted from the
    JVM's, and for a raw Py4J error its Java exception as pyspark converts it."""
    seen, todo = set(), [exc]
    while todo and len(seen) < 32:
        e = todo.pop(0)
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.append(e.__cause__ if e.__cause__ is not None
                    else None if e.__suppress_context__ else e.__context__)
        # pyspark keeps the converted cause of a CapturedException only here
        todo.append(getattr(e, "_cause", None))
        todo.append(_converted_java_exception(e))


def _converted_java_exception(e: BaseException) -> BaseException | None:
    try:
        from py4j.protocol import Py4JJavaError
        from pyspark.errors.exceptions.captured import convert_exception
    except ImportError:
        return None
    if not isinstance(e, Py4JJavaError) or e.java_exception is None:
        return None
    try:
        return convert_exception(e.java_exception)
    except Exception:  # noqa: BLE001 - the JVM is gone: the text is all there is
        return None


def _ours(e: BaseException) -> tuple[str, int] | None:
    if isinstance(e, USAGE_ERRORS):
        return _clean(str(e)), EXIT_USAGE
    if isinstance(e, StoreError):  # the store failed during the job
        return f"{type(e).__name__}: {_clean(str(e))}", EXIT_FAILED
    return None


def _is_python_worker_error(e: BaseException) -> bool:
    try:
        from pyspark.errors import PythonException
    except ImportError:
        return False
    return isinstance(e, PythonException)


def _worker_traceback(e: BaseException) -> str:
    """The traceback text a Python worker sent back with its error."""
    try:
        params = e.getMessageParameters() or {}
    except Exception:  # noqa: BLE001 - the JVM is gone: fall back to the message
        params = {}
    return params.get("traceback") or str(e)


_TRACEBACK = "Traceback (most recent call last)"
_RAISED = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")


def _from_traceback(text: str) -> tuple[str, int] | None:
    """The message and status of the exception a Python traceback, given as
    text, ends with (its last traceback: the outermost of a chain).  The
    class it names is looked up among the loaded modules, so that the
    project's errors are known by class, not by name."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _TRACEBACK in line]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        m = _RAISED.match(line)
        if m and not line[0].isspace():
            name, message = m.group(1), _clean(m.group(2))
            cls = _loaded_class(name)
            usage = cls is not None and issubclass(cls, USAGE_ERRORS)
            if cls is not None and issubclass(cls, SlidingWindowError):
                return message, EXIT_USAGE
            return f"{name.rsplit('.', 1)[-1]}: {message}", (EXIT_USAGE if usage else EXIT_FAILED)
    return None


def _loaded_class(qualified: str) -> type | None:
    """The exception class ``module.Name`` if that module is loaded (none is
    imported on the strength of a name in a message)."""
    module, _, name = qualified.rpartition(".")
    cls = getattr(sys.modules.get(module), name, None) if module else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def _spark_message(exc: BaseException) -> tuple[str, int]:
    """The first line of the message, without its SQL state; an analysis or
    argument error (a missing column, a bad schema) is a usage error."""
    try:
        from pyspark.errors import AnalysisException, IllegalArgumentException

        usage = isinstance(exc, (AnalysisException, IllegalArgumentException))
    except ImportError:
        usage = False
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    root = _java_root_cause(exc)
    if root is not None:  # Py4J's own first line only names the JVM method that failed
        first = root
        # an argument the JVM refused while reading (a CSV header that differs from --schema) is the user's
        usage = usage or root.split(":", 1)[0].rsplit(".", 1)[-1] in _JAVA_USAGE
    first = re.sub(r"\s*SQLSTATE: \w+\.?$", "", first)
    if not usage:
        first = f"{type(exc).__name__}: {first}"
    return _clean(first), (EXIT_USAGE if usage else EXIT_FAILED)


#: Java exceptions (the innermost cause of a failed job) that mean bad input or arguments.
_JAVA_USAGE = ("IllegalArgumentException", "SparkIllegalArgumentException")


def _java_root_cause(exc: BaseException) -> str | None:
    """The innermost cause of a Py4J error's Java exception, or of the one
    pyspark converted (a stream's failure), as ``class: message``; or ``None``."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is None:
        return None
    try:
        while java.getCause() is not None:
            java = java.getCause()
        return str(java.toString())
    except Exception:  # noqa: BLE001 - the JVM may be gone: the Python message stands
        return None


def cli_remedy(message: str) -> str:
    """``message`` with the API's remedy for a rejected row spelled as the
    CLI option (:data:`spark_ops.rows.FLAG_IT`)."""
    return message.replace("pass on_bad_row='flag'", "pass --on-bad-row flag")


def _clean(message: str) -> str:
    message = cli_remedy(message)
    message = " ".join(message.split())
    return message if len(message) <= 600 else message[:597] + "..."

"""Which rows can enter a window, and what becomes of those that cannot.

A row is rejected for a null or NaN key (in any of a composite key's
columns), a null, NaN or infinite time, a null or NaN value (in any of
several value columns, :mod:`spark_ops.values`), a value that is not a
number, a time older than its key's newest (possible only across
streaming micro-batches: a batch job
sorts each key's rows), with ``frame="sql"`` a time equal to the newest
whose outputs an earlier micro-batch gave (its peers' shared output is
out already), or a value the aggregations cannot take (their ``lift``
raises, e.g. ``geomean`` of a value <= 0).  Plans that count time in
integer microseconds (``slide=``, watermarks) also reject a time too far
from 1970 for them (:data:`MICROS_RULES`).  The reasons are
written here once; batch and streaming, and every per-key window
(:mod:`spark_ops.windows`), use them.

:data:`COLUMN_RULES` holds the rules that read a row alone;
:func:`check_columns` applies them to a whole Arrow batch and
:func:`column_rules_sql` writes them as Spark SQL; :func:`check_row`
applies every rule to one row, for windows that take rows
one at a time.  :func:`settle` is the one place where ``on_bad_row``
acts: ``"error"`` raises naming the first rejected row, ``"flag"`` gives
rejected rows null aggregations and their reason in ``rejected``.
"""

from __future__ import annotations

import math
from typing import Sequence

from mta import LiftError

from . import values as value_columns
from .spec import MICROS_TIME_LIMIT, SlidingWindowError, WindowSpec

# null and NaN read the same: neither is a number a window can take
NULL_KEY = "null or NaN key"
NULL_TIME = "null or NaN time"
INFINITE_TIME = "infinite time"
BEYOND_MICROS = (f"time more than {MICROS_TIME_LIMIT:.3g} seconds from 1970, beyond the microseconds that "
                 "slide= windows and watermarks count in; an epoch in nanoseconds?")
NULL_VALUE = "null or NaN value"


def not_a_number(v) -> str:
    return f"value of type {type(v).__name__}, not a number"


def text_not_parsed(what: str = "value", kind: str = "a number") -> str:
    """A text input's ``what`` (value, time) that does not parse as ``kind``
    (``format_string`` arguments: the text and the file it came from), for
    readers that parse a text column themselves (the CLI's CSV input)."""
    return f"{what} '%s' is not {kind} (file %s)"


#: A record a text reader could not parse (JSON: Spark's ``_corrupt_record``), as :func:`text_not_parsed`.
MALFORMED = "malformed record '%s' (file %s)"


def utc(us: int) -> str:
    """Microseconds since 1970-01-01 00:00:00 UTC as a time of day in UTC."""
    import datetime as dt

    return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)).isoformat(sep=" ") + " UTC"


def shown_time(t, clock: str = "") -> str:
    """A time as the windows hold it (double seconds) written as the input
    column has it: ``clock`` is :attr:`spark_ops.spec.WindowSpec.clock`
    (``""``: a number, written as it is).  A time beyond the calendar's
    years 1 to 9999 stays a number."""
    import datetime as dt

    if not clock or not isinstance(t, (int, float)) or not math.isfinite(t):
        return str(t)
    try:
        if clock == "date":
            return (dt.date(1970, 1, 1) + dt.timedelta(days=math.floor(t / 86400))).isoformat()
        shown = utc(round(t * 1e6))
    except OverflowError:
        return str(t)
    return shown if clock == "timestamp" else shown[:-len(" UTC")]


def input_text(t) -> str:
    """A row's time as the input gave it: a timestamp or date as it reads,
    in UTC for a timestamp with a zone; anything else as its ``repr``."""
    import datetime as dt

    if isinstance(t, dt.datetime):
        if t.tzinfo is None:
            return t.isoformat(sep=" ")
        return t.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(sep=" ") + " UTC"
    if isinstance(t, dt.date):
        return t.isoformat()
    return repr(t)


def out_of_order(t, newest) -> str:
    return f"time {t} is older than the key's newest time {newest} (out of order)"


def behind_watermark(t, watermark, first: bool = False, at: bool = False) -> str:
    """``first``: the watermark is still Spark's first, 1970-01-01 UTC (it
    never goes back, so no time at or before it is ever on time); ``at``:
    the time is the watermark's own."""
    where = "at" if at else "behind"
    if first:
        return (f"time {t} is {where} the watermark {watermark}, where Spark's watermarks start (late: a query "
                "with a watermark takes no time at or before 1970-01-01 00:00:00 UTC)")
    return (f"time {t} is {where} the watermark {watermark} (late: rows of later times may have entered the "
            "window; a longer watermark delay keeps rows waiting longer)")


def peers_emitted(t) -> str:
    return (f"time {t} equals the key's newest time, whose rows' shared output (frame='sql': rows of equal time "
            "are peers) an earlier micro-batch gave (out of order; rows of one time belong in one micro-batch)")


def cannot_lift(exc: BaseException) -> str:
    """The reason when the aggregations' ``lift`` raised ``exc`` for the value."""
    cause = exc.__cause__ if isinstance(exc, LiftError) and exc.__cause__ is not None else exc
    return f"the aggregations cannot take the value: {type(cause).__name__}: {cause}"


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def null_key(key) -> bool:
    """No window takes the rows of this key (a composite key's, a tuple,
    when any of its columns is null or NaN)."""
    if type(key) is tuple:
        return any(_missing(k) for k in key)
    return _missing(key)


def check_row(key, t, v, newest, emitted=None, micros: bool = False, clock: str = "") -> str | None:
    """Why a row cannot enter its key's window (whose newest time is
    ``newest``, ``None`` if it has none), or ``None``; ``emitted``: with
    ``frame="sql"``, the newest time whose outputs were given in an earlier
    push (``None``: none, or the default frame); ``micros``: the plan
    counts time in microseconds (:data:`MICROS_RULES`); ``clock``: how the
    input writes its times (:func:`shown_time`), for the reasons that name them."""
    if null_key(key):
        return NULL_KEY
    if _missing(t):
        return NULL_TIME
    if isinstance(t, float) and math.isinf(t):
        return INFINITE_TIME
    if micros and abs(t) >= MICROS_TIME_LIMIT:
        return BEYOND_MICROS
    if value_columns.missing(v):  # a tuple of several value columns: any of them
        return NULL_VALUE
    for x in v if type(v) is tuple else (v,):
        if not isinstance(x, (int, float)) or isinstance(x, bool):
            return not_a_number(x)
    if newest is not None and t < newest:
        return out_of_order(shown_time(t, clock), shown_time(newest, clock))
    if emitted is not None and t == emitted:
        return peers_emitted(shown_time(t, clock))
    return None


#: The rules that read a row's key, time and value alone, whatever came
#: before it, in the order they are tried: ``(column, test, reason)``.
#: ``column``: ``"key"`` (any of a composite key's columns), ``"time"`` or
#: ``"value"`` (any of several value columns); ``test``: ``"missing"``
#: (null, or NaN in a floating column), ``"infinite"`` (+-inf) or
#: ``"beyond"`` (:data:`MICROS_TIME_LIMIT` or more either side of 0).  Both
#: forms of these rules are built from this table: :func:`check_columns`
#: (Arrow, on the worker) and :func:`column_rules_sql` (Spark SQL, before
#: a shuffle); :func:`check_row` tries them first, in this order.
COLUMN_RULES = (("key", "missing", NULL_KEY), ("time", "missing", NULL_TIME),
                ("time", "infinite", INFINITE_TIME), ("value", "missing", NULL_VALUE))
#: The rules of a plan that counts time in integer microseconds
#: (``micros=True`` in their forms): :data:`COLUMN_RULES` and a time within
#: :data:`MICROS_TIME_LIMIT`, tried after the other time rules.
MICROS_RULES = COLUMN_RULES[:3] + (("time", "beyond", BEYOND_MICROS),) + COLUMN_RULES[3:]


def _rules(micros: bool) -> tuple:
    return MICROS_RULES if micros else COLUMN_RULES


def _arrow_test(test: str, column):
    import pyarrow as pa
    import pyarrow.compute as pc

    if test == "missing":
        return pc.is_null(column, nan_is_null=pa.types.is_floating(column.type))
    if test == "beyond":
        return pc.greater_equal(pc.abs(pc.cast(column, pa.float64(), safe=False)), MICROS_TIME_LIMIT)
    return pc.is_inf(column) if pa.types.is_floating(column.type) else pc.is_null(column)


def _sql_test(test: str, sql: str, floating: bool) -> str:
    if test == "missing":
        return f"({sql}) IS NULL" + (f" OR isnan({sql})" if floating else "")
    if test == "beyond":
        return f"abs({sql}) >= {MICROS_TIME_LIMIT!r}D"
    return f"abs({sql}) = double('inf')" if floating else "false"


def _clean(test: str, column) -> bool:
    """Whether :func:`_arrow_test` ``test`` holds for no row of ``column``,
    told without building its mask where it can: Arrow's count of nulls,
    for a floating column one NumPy pass ("beyond": one Arrow pass).  O(n)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count:
        return False
    if test == "beyond":
        return not pc.any(_arrow_test(test, column)).as_py()
    if not pa.types.is_floating(column.type):
        return True
    x = column.to_numpy(zero_copy_only=False)
    return not (np.isnan(x) if test == "missing" else np.isinf(x)).any()


def check_columns(keys, times, values, micros: bool = False) -> list | None:
    """Per row of an Arrow batch, why it cannot enter a window (the first
    of :data:`COLUMN_RULES` that applies, :data:`MICROS_RULES` with
    ``micros``), or ``None`` when every row can.  ``keys``: the key column,
    or a list of a composite key's columns; ``values``: the value column,
    or a struct of several.  O(n) per rule for n rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = {"key": keys if isinstance(keys, list) else [keys], "time": [times],
               "value": ([pc.struct_field(values, [i]) for i in range(values.type.num_fields)]
                         if pa.types.is_struct(values.type) else [values])}
    rules = _rules(micros)
    if all(_clean(test, column) for read, test, _ in rules for column in columns[read]):
        return None  # the usual batch: no mask, no Arrow kernel per rule
    reasons = None
    for read, test, reason in rules:
        mask = None
        for column in columns[read]:
            one = _arrow_test(test, column)
            mask = one if mask is None else pc.or_(mask, one)
        if pc.any(mask).as_py():
            reasons = reasons or [None] * len(times)
            for i in pc.indices_nonzero(pc.fill_null(mask, False)).to_pylist():
                reasons[i] = reasons[i] or reason
    return reasons


def column_rules_sql(keys: list, time: str, values: list, micros: bool = False) -> list:
    """:data:`COLUMN_RULES` (:data:`MICROS_RULES` with ``micros``) as Spark
    SQL: ``(condition, reason)`` per rule, in order.  ``keys`` and
    ``values``: ``(sql, floating)`` per column (``floating``: whether it can
    hold NaN); ``time``: the SQL of the time as double seconds
    (:func:`spark_ops.plan.time_sql`)."""
    columns = {"key": keys, "time": [(time, True)], "value": values}
    return [(" OR ".join(f"({_sql_test(test, sql, floating)})" for sql, floating in columns[read]), reason)
            for read, test, reason in _rules(micros)]


def rejected_text(spec: WindowSpec, problem: str, key, t, v) -> str:
    """A rejected row named: its problem, key, time and value."""
    return (f"row rejected ({problem}): {spec.key_text(key)}, {spec.time}={input_text(t)}, "
            f"{value_columns.value_text(spec, v)}")


#: What a rejected row's error tells to do where ``on_bad_row="flag"`` is taken.
FLAG_IT = "fix the input or pass on_bad_row='flag'"


def rejected(spec: WindowSpec, problem: str, key, t, v, remedy: str = FLAG_IT) -> SlidingWindowError:
    """The error that names a rejected row (``on_bad_row="error"``) and ``remedy``."""
    return SlidingWindowError(f"{rejected_text(spec, problem, key, t, v)}; {remedy}")


def settle(spec: WindowSpec, key, accepted: list, problems: Sequence | None, times, values,
           shown: Sequence | None = None) -> list:
    """The output columns (Arrow arrays) of a run of one key's rows.

    ``accepted``: per aggregation, the results of the rows whose problem is
    ``None``, in order; ``problems``: per row its reason or ``None``
    (``None`` for all); ``times`` and ``values``: the rows (Arrow arrays);
    ``shown``: their times as the input has them, for the message."""
    import numpy as np
    import pyarrow as pa

    flag = spec.on_bad_row == "flag"
    n = len(times)
    if problems is not None and any(problems):
        if not flag:
            i = next(i for i, p in enumerate(problems) if p is not None)
            t = shown[i] if shown is not None else times[i].as_py()
            raise rejected(spec, problems[i], key, t, values[i].as_py())
        good = np.fromiter((p is None for p in problems), dtype=bool, count=n)
        at = pa.array(np.cumsum(good) - 1, mask=~good)  # each row's place among the accepted, null if none
        return [column.take(at) for column in accepted] + [pa.array(problems, type=pa.string())]
    return accepted + [pa.nulls(n, type=pa.string())] if flag else accepted

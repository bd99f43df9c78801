"""``mta_sliding_window``: :func:`spark_ops.sliding_window` as a SQL table
function, for SQL and dbt users::

    from spark_ops.sql import register_sql

    register_sql(spark)
    spark.sql('''
        SELECT * FROM mta_sliding_window(
            TABLE(readings),
            key => 'host', time => 'ts', value => 'mem',
            aggs => 'max,mean', range => 3600)''')

The result has the table's columns and one column per aggregation, one row
per input row, exactly as the DataFrame call gives them (every value exact;
``on_bad_row => 'flag'`` adds ``rejected``).  The function asks Spark to
partition its table by the key and order it by the time (its ``analyze``
returns them: a call with its own ``PARTITION BY`` is refused by Spark), so
all of a key's rows reach one instance, in time order, whatever the call.
A table has no input order, so rows of equal time come in the order of
the columns ``order =>`` names (``order => 'seq'``), else in any order;
the DataFrame call orders them by their position in the input.

The function is a Python UDTF: Spark hands it one row at a time, and it
pushes a key's rows through the key's window
(:func:`spark_ops.windows.open_key_window`, the per-key windows of the
DataFrame call, the engine chosen by the same rule) in chunks of
:data:`CHUNK` rows.  Batch tables only; the arguments (ready aggregations,
``range`` or ``rows``, ``frame``, ``engine``, ``store``, ``on_bad_row``)
are those of :func:`spark_ops.sliding_window` and must be constants;
several sizes are ``range => '5m,1h'``, ``array(300, 3600)`` or
``map('5m', 300, '1h', 3600)`` (columns ``max_5m``, ``max_1h``; a map's
smallest size first, since Spark gives a map in no set order).  Several
key or value columns are ``'dc,host'`` or ``array('dc', 'host')``, split by
the rule the command line's ``--key`` and ``--value`` share
(:func:`spark_ops.spec.split_columns`: blanks around a name are dropped
unless a column of the table has them, as for ``time =>``; an array's names
are taken as given); with several value columns (or a
struct column) each aggregation names the one it reads, ``aggs =>
'max(cpu),mean(mem)'`` (columns ``max_cpu``, ``mean_mem``), and the
columns reach the windows as one struct, as in the DataFrame call.

Spark's row-at-a-time hand-over costs far more than the windows: the
DataFrame call runs the same job many times faster (docs/benchmarks-spark.md,
"SQL").  Rows travel pickled, not through Arrow: Spark's Arrow transport
for Python UDTFs converts every row through pandas and measured slower
(the same page); its Arrow-native UDTFs take record batches but cannot
declare their output schema from the input table (no ``analyze``), which
a function returning the table's own columns needs.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import math
import time
import uuid
from typing import Any

from pyspark.sql.udtf import AnalyzeResult, OrderingColumn, PartitioningColumn, SelectedColumn

from . import aggregations, columnar, durations, frames, rows, values
from .names import missing_columns, spelled, trimmed
from .plan import TIME, VALUE, clock_of, holds, micro_time, quoted, time_sql
from .spec import SlidingWindowError, WindowSpec, split_columns

__all__ = ["CHUNK", "FUNCTION_NAME", "SlidingWindowFunction", "register_sql"]

#: The name :func:`register_sql` registers the function under by default.
FUNCTION_NAME = "mta_sliding_window"
#: Rows pushed through a key's window at once: long enough that the
#: columnar engine works on arrays, short enough that the function holds
#: little of a key's rows.
CHUNK = 4096
#: The arguments the function takes besides its table, and their defaults.
ARGUMENTS = {"key": None, "time": None, "value": None, "aggs": None, "range": None, "rows": None,
             "frame": "default", "engine": "auto", "store": None, "on_bad_row": "error", "order": None}


def register_sql(spark, name: str = FUNCTION_NAME) -> None:
    """Register the table function on ``spark``'s session as ``name``."""
    from pyspark.sql.functions import udtf

    spark.udtf.register(name, udtf(SlidingWindowFunction, useArrow=False))


@dataclasses.dataclass
class _Analyzed(AnalyzeResult):
    """What :meth:`SlidingWindowFunction.analyze` hands every instance:
    the output schema and the job."""

    spec: Any = None
    run: str = ""
    value_type: Any = None  # the value column's Arrow type as the engines take it
    zoned: tuple = ()  # the table's columns holding timestamps, at any depth: (position, name)


class SlidingWindowFunction:
    """The UDTF (register it with :func:`register_sql`)."""

    @staticmethod
    def analyze(table, **arguments):
        """The output schema and the job, checked before any row is read."""
        from pyspark.sql.pandas.types import to_arrow_type
        import pyarrow as pa
        from pyspark.sql.types import (ArrayType, DecimalType, DoubleType, FloatType, FractionalType, IntegralType,
                                       StructType, TimestampType)

        from .api import check_columns, check_output_names, engine_for

        if not getattr(table, "isTable", False):
            raise SlidingWindowError(f"{FUNCTION_NAME}'s first argument is the input: TABLE(name)")
        given = _constants(arguments)
        missing = [a for a in ("key", "time", "value", "aggs") if given.get(a) is None]
        if missing:
            raise SlidingWindowError(f"{FUNCTION_NAME} needs {', '.join(f'{a} =>' for a in missing)}; e.g. "
                                     "key => 'host', time => 'ts', value => 'mem', aggs => 'max,mean', range => 3600")
        sizes = [f"{a} =>" for a in ("range", "rows") if given.get(a) is not None]
        if len(sizes) != 1:
            raise SlidingWindowError(f"{FUNCTION_NAME} needs exactly one of range => (seconds, or a duration such "
                                     f"as '1h') or rows => (a count); got {' and '.join(sizes) or 'neither'}")
        names = given["aggs"].split(",") if isinstance(given["aggs"], str) else given["aggs"]
        unknown = aggregations.unknown([a for a in names if a.strip()]) if isinstance(names, list) else []
        if unknown:
            raise SlidingWindowError(f"{FUNCTION_NAME}'s aggs => names {', '.join(map(repr, unknown))}, not a "
                                     f"ready aggregation; ready ones are {', '.join(aggregations.READY)}")
        schema = table.dataType
        # 'dc,host' is several columns, as the CLI takes them; array('dc', 'host') keeps each name verbatim
        given.update({a: split_columns(given[a], schema.names) for a in ("key", "value", "order")
                      if isinstance(given[a], str)})
        if isinstance(given["time"], str):  # one column: not split, blanks dropped by the same rule
            given["time"] = trimmed(given["time"], schema.names)
        given.update({a: spelled(given[a], schema.names) for a in ("key", "time", "value", "order")})
        fields, types = check_columns(schema, given["key"], given["time"], given["value"])
        aggs = given["aggs"]
        if isinstance(aggs, dict):  # Spark hands a map over in no set order: the columns' would change
            raise SlidingWindowError(f"{FUNCTION_NAME}'s aggs => takes ready aggregations, 'max,mean' or "
                                     "array('max(cpu)', 'mean(mem)'), not a map; rename the output columns in "
                                     "the SELECT")
        spec = WindowSpec.build(key=given["key"], time=given["time"], value=given["value"],
                                aggs=aggs if isinstance(aggs, str) else list(aggs),
                                range=given["range"], rows=given["rows"], frame=given["frame"], store=given["store"],
                                engine=given["engine"], on_bad_row=given["on_bad_row"],
                                integral=values.per_column(types, IntegralType), value_fields=fields,
                                micros=micro_time(schema[given["time"]].dataType),
                                clock=clock_of(schema[given["time"]].dataType))
        check_output_names(spec, schema.names)
        for k in spec.keys:  # PySpark starts an instance per key value it sees: NaN != NaN in Python
            if isinstance(schema[k].dataType, (ArrayType, StructType)) and holds(
                    schema[k].dataType, lambda t: isinstance(t, (DoubleType, FloatType))):
                raise SlidingWindowError(
                    f"{FUNCTION_NAME}'s key column {k!r} is {schema[k].dataType.simpleString()}: a NaN inside it "
                    "would make each of its rows a key of its own here; key by a column without floating fields "
                    f"(e.g. to_json({k})), or call sliding_window on the DataFrame, which groups them as Spark does")
        order = given["order"] or []
        unknown = [c for c in order if c not in schema.names]
        if unknown:
            raise SlidingWindowError(f"{FUNCTION_NAME}'s order => names {unknown[0]!r}: "
                                     f"{missing_columns(unknown[:1], schema.names)}")
        engine, _ = engine_for(spec, streaming=False, fractional=values.per_column(types, FractionalType))
        # the kernels found here, on the driver, as the DataFrame call does (aggs renamed by a map)
        spec = dataclasses.replace(spec, engine=engine,
                                   kernels=tuple(columnar.kernel_names(spec)) if engine == "columnar" else ())
        out = StructType(list(schema.fields))
        for name, spark_type in spec.output_columns:  # the ready aggregations' types: long, double, string
            out = out.add(name, spark_type)
        # the table's columns as they are, then the time and value as the windows take them (several
        # value columns as one struct, as in the DataFrame call's plan)
        select = ([SelectedColumn(quoted(f.name)) for f in schema.fields]
                  + [SelectedColumn(time_sql(spec.time, schema[spec.time].dataType), TIME),
                     SelectedColumn(values.value_sql(spec.value, spec.value_fields,
                                                     {f.name: f.dataType for f in schema.fields}), VALUE)])
        taken = [to_arrow_type(DoubleType() if isinstance(t, DecimalType) else t) for t in types]
        value_type = (pa.struct([pa.field(f"v{i}", t) for i, t in enumerate(taken)]) if spec.value_fields
                      else taken[0])
        zoned = tuple((i, f.name) for i, f in enumerate(schema.fields)  # timestamps (with a zone) at any depth
                      if holds(f.dataType, lambda t: isinstance(t, TimestampType)))
        return _Analyzed(schema=out, select=select, spec=spec, run=f"sql-{uuid.uuid4().hex[:12]}",
                         value_type=value_type, zoned=zoned,
                         partitionBy=[PartitioningColumn(quoted(k)) for k in spec.keys],
                         orderBy=[OrderingColumn(quoted(c)) for c in [spec.time, *order]])

    def __init__(self, analyze_result=None) -> None:
        self.spec: WindowSpec = analyze_result.spec
        self.run = f"{analyze_result.run}/{uuid.uuid4().hex[:12]}"  # each key's instance its own windows
        self.value_type = analyze_result.value_type
        # PySpark's rows hold a timestamp as a naive datetime of the worker's zone: any zone but
        # UTC may have repeated an hour (daylight saving now or once, a change of offset)
        self.zoned = analyze_result.zoned if time.timezone or time.altzone or time.daylight else ()
        self.window = None
        self.key: Any = None
        self.newest = None  # the newest time seen, for the ORDER BY check
        self.buffer: list = []
        self.flush_at = CHUNK
        self.width = self.keys_at = self.shown_at = None  # positions in the rows, from the first

    def _positions(self, row) -> None:
        fields = list(row.__fields__)
        self.width = len(fields) - 2  # the table's columns; the time and value follow
        self.keys_at, self.shown_at = [fields.index(c) for c in self.spec.keys], fields.index(self.spec.time)

    def eval(self, row, **_arguments):
        """Take one row; yields the output of a full chunk."""
        from .windows import open_key_window

        if self.window is None:
            self._positions(row)
        if self.zoned:
            self._check_zoned(row)
        key = tuple(row[i] for i in self.keys_at) if len(self.keys_at) > 1 else row[self.keys_at[0]]
        if self.window is None:
            self.key, self.window = key, open_key_window(self.spec, key, self.run)
        elif not _same_key(key, self.key):
            raise SlidingWindowError(f"{FUNCTION_NAME} got the rows of {self.spec.key_text(self.key)} and of "
                                     f"{self.spec.key_text(key)} in one partition: {self._clauses()}")
        t = row[self.width]
        if t is not None and not math.isnan(t):
            if self.newest is not None and t < self.newest:
                raise SlidingWindowError(f"{FUNCTION_NAME} got the rows of {self.spec.key_text(key)} out of time "
                                         f"order ({self.spec.time}={row[self.shown_at]!r} after a later time): "
                                         f"{self._clauses()}")
            self.newest = t
        self.buffer.append(row)
        if len(self.buffer) >= self.flush_at:
            yield from self._flush(complete=False)
            self.flush_at = len(self.buffer) + CHUNK  # rows held back wait for a chunk more

    def _check_zoned(self, row) -> None:
        """Refuse a timestamp in an hour the worker's zone repeats (a
        daylight-saving or offset change).  PySpark hands the function each
        timestamp as a naive datetime of that zone: two instants an hour
        apart there compare equal (PySpark would give both keys one
        instance) and come back as one (its conversion of the output ignores
        ``fold``).  O(timestamps in the row)."""
        for i, name in self.zoned:
            t = _repeated(row[i])
            if t is not None:
                raise SlidingWindowError(
                    f"{FUNCTION_NAME}: column {name!r} holds {t.isoformat()} (local time of the Python workers), "
                    "in an hour their time zone repeats (a daylight-saving or offset change), where PySpark's "
                    "rows cannot tell two instants apart: run the workers in UTC (TZ=UTC in their environment, "
                    "spark.executorEnv.TZ=UTC on a cluster) or use spark_ops.sliding_window, whose rows "
                    "travel as Arrow")

    def _clauses(self) -> str:
        return "the function asks Spark to partition its table by the key and order it by the time"

    def terminate(self):
        """The key's last rows."""
        yield from self._flush(complete=True)

    def cleanup(self) -> None:
        if self.window is not None:
            self.window.close()  # a batch window's data goes with it

    def _flush(self, complete: bool):
        """Push the buffered rows through the window and yield their output
        rows; unless the key's rows are ``complete``, rows of the newest time
        wait for their peers when the frame makes ties share an output."""
        import pyarrow as pa

        width = self.width
        times = pa.array([r[width] for r in self.buffer], pa.float64())
        cut = len(self.buffer)
        if self.spec.peers and not complete:
            cut = frames.trailing_peers(_one_key(cut), times)
            times = times.slice(0, cut)
        chunk, self.buffer = self.buffer[:cut], self.buffer[cut:]
        if not chunk:
            return
        taken = pa.array([r[width + 1] for r in chunk], self.value_type)  # several: a struct of tuples
        problems = rows.check_columns(_one_key(len(chunk)), times, taken)
        outputs = self.window.push(times, taken, problems, shown=[r[self.shown_at] for r in chunk])
        columns = [column.to_pylist() for column in outputs]
        for i, r in enumerate(chunk):
            yield (*r[:width], *(column[i] for column in columns))


def _constants(arguments: dict) -> dict:
    """The scalar arguments' values (each must be a constant)."""
    unknown = sorted(set(arguments) - set(ARGUMENTS))
    if unknown:
        raise SlidingWindowError(f"{FUNCTION_NAME} has no argument {', '.join(map(repr, unknown))}; "
                                 f"it takes {', '.join(ARGUMENTS)}")
    given = dict(ARGUMENTS)
    for name, argument in arguments.items():
        if not argument.isConstantExpression:
            raise SlidingWindowError(f"{FUNCTION_NAME}'s {name} => must be a constant")
        value = argument.value
        if name in ("range", "rows"):
            value = _sizes(value, counts=name == "rows")
        texts = isinstance(value, str) or isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        if name in ("key", "value", "order", "aggs") and not (texts or value is None or name == "aggs" and
                                                              isinstance(value, dict)):
            raise SlidingWindowError(f"{FUNCTION_NAME}'s {name} => takes a string or an array of strings, got "
                                     f"{value!r}")
        if name in ("key", "value", "order") and isinstance(value, tuple):  # a string: split in analyze, by columns
            value = list(value)
        given[name] = float(value) if isinstance(value, decimal.Decimal) else value
    return given


def _sizes(value, counts: bool = False):
    """``range =>`` or ``rows =>`` (``counts``) as :func:`spark_ops.sliding_window`
    takes it: several sizes as ``'5m,1h'`` or ``array(300, 3600)`` (a list,
    labelled by their text) or ``map('5m', 300, '1h', 3600)`` (a dict of
    labels, smallest size first: Spark gives a map in no set order); SQL's
    decimal literals and intervals (``INTERVAL '10' MINUTE``) as seconds,
    counts typed as text (``'10,100'``) as ints."""
    def one(v):
        if isinstance(v, decimal.Decimal):
            return float(v)
        if isinstance(v, datetime.timedelta):
            return v.total_seconds()
        if isinstance(v, str):
            v = v.strip()
            return int(v) if counts and v.isdigit() else v
        return v

    if isinstance(value, str) and "," in value:
        return [one(v) for v in value.split(",")]
    if isinstance(value, (list, tuple)):  # array(5, 12.5) is decimal(3,1): label 5.0 as typed, 5
        labels = [_label(v) for v in value]
        if len(set(labels)) == len(labels) and any(isinstance(v, (decimal.Decimal, datetime.timedelta))
                                                   for v in value):
            return dict(zip(labels, map(one, value)))
        return [one(v) for v in value]  # sliding_window names a size given twice
    if isinstance(value, dict):  # Spark hands a map over in no set order: its sizes come smallest first
        sizes = {label: one(v) for label, v in value.items()}
        return dict(sorted(sizes.items(), key=lambda item: (_magnitude(item[1], counts), str(item[0]))))
    return one(value)


def _magnitude(size, counts: bool):
    """What orders a map's sizes: a count, or a range's seconds (a size the
    DataFrame call would refuse sorts first, and is refused there)."""
    try:
        return float(size) if counts else durations.seconds(size, "range")
    except (TypeError, ValueError):
        return -math.inf


def _label(v) -> str:
    """A size's label as the SQL typed it: a decimal without the scale its
    array gave it, an interval in whole seconds when it is whole (``60``)."""
    if isinstance(v, datetime.timedelta):
        seconds = v.total_seconds()
        return str(int(seconds)) if seconds.is_integer() else repr(seconds)
    return format(v.normalize(), "f") if isinstance(v, decimal.Decimal) else str(v).strip()


def _one_key(n: int):
    """A key column for ``n`` rows of one instance's key (its null rule is
    the window's: :func:`spark_ops.windows.open_key_window`)."""
    import pyarrow as pa

    return pa.repeat(pa.scalar(0, pa.int8()), n)


def _repeated(value):
    """The first ``datetime`` in ``value`` (a column's: a datetime, or a
    Row, list or dict holding them) that falls in an hour the process's
    local zone repeats, or ``None``."""
    if isinstance(value, datetime.datetime):
        return value if value.replace(fold=1 - value.fold).timestamp() != value.timestamp() else None
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (tuple, list)):  # a Row is a tuple
        for v in value:
            found = _repeated(v)
            if found is not None:
                return found
    return None


def _same_key(a, b) -> bool:
    return a == b or (rows.null_key(a) and rows.null_key(b))

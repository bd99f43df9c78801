"""The columns a sliding-window plan adds and returns, shared by the batch
and streaming plans."""

from __future__ import annotations

from .spec import WindowSpec

ARRIVAL = "__mta_arrival"
TIME = "__mta_time"
VALUE = "__mta_value"
#: A key's rows as Arrow IPC bytes (the streaming plan, :mod:`spark_ops.passthrough`).
PACKED = "__mta_rows"
INTERNAL = (ARRIVAL, TIME, VALUE, PACKED)
#: The order of a key's rows, as ``pyarrow.compute.sort_indices`` takes it:
#: by time, ties in arrival order (a null or NaN time last).
ROW_ORDER = [(TIME, "ascending"), (ARRIVAL, "ascending")]


def column(name: str):
    """A top-level column by its exact name (a name with dots is not a path)."""
    from pyspark.sql import functions as F

    return F.col(quoted(name))


def holds(data_type, test) -> bool:
    """Whether the Spark type ``data_type``, or one inside it (an array's
    element, a map's key or value, a struct's field, at any depth), passes
    ``test``."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if test(data_type):
        return True
    if isinstance(data_type, ArrayType):
        return holds(data_type.elementType, test)
    if isinstance(data_type, MapType):
        return holds(data_type.keyType, test) or holds(data_type.valueType, test)
    return isinstance(data_type, StructType) and any(holds(f.dataType, test) for f in data_type.fields)


def with_time_and_value(df, spec: WindowSpec):
    """Add the time as double seconds and the value as the engine takes it
    (decimals as doubles, like the aggregations' outputs; several value
    columns as one struct, :func:`spark_ops.values.value_sql`).  The
    streaming plans number the rows where they pack them
    (:func:`spark_ops.passthrough.pack_by_key`), in the same pass."""
    from pyspark.sql import functions as F

    from . import values

    types = {f.name: f.dataType for f in df.schema.fields}
    return (df.withColumn(TIME, F.expr(time_sql(spec.time, types[spec.time])))
              .withColumn(VALUE, F.expr(values.value_sql(spec.value, spec.value_fields, types))))


def number_rows(df):
    """``df`` with the arrival number (a batch DataFrame's input order)."""
    from pyspark.sql import functions as F

    return df.withColumn(ARRIVAL, F.monotonically_increasing_id())


def key_time_ordered(df, keys, time_column: str):
    """``df`` repartitioned by ``keys`` and sorted within partitions by
    ``(keys, time, arrival)`` when :func:`number_rows` numbered it, else by
    ``(keys, time)`` (``ties="any"``), the arrival number then dropped: the
    windows need the order, never the number, so it does not cross into
    Python (one column less for Arrow to write and read)."""
    by = [column(c) for c in keys]
    if ARRIVAL not in df.columns:
        return df.repartition(*by).sortWithinPartitions(*by, column(time_column))
    return df.repartition(*by).sortWithinPartitions(*by, column(time_column), column(ARRIVAL)).drop(ARRIVAL)


def lean_columns(df, spec: WindowSpec) -> tuple:
    """The batch plans' columns: ``(df, time, value)``, ``df`` with the
    arrival number (none with ``ties="any"``), and the names of the time and value columns the
    windows read: the input's own where the worker takes them as they are
    (a time column is sorted on as it is and converted to double seconds
    in the worker by :func:`seconds`, a value column the engines take as
    it is), else one added with :func:`time_sql` (:data:`TIME`, for a
    decimal time) or :func:`spark_ops.values.value_sql` (:data:`VALUE`,
    for a decimal value or several value columns).

    Sorting on the time itself orders rows as sorting on its double
    seconds would, but for distinct times the conversion to double merges
    (longs beyond 2^53, timestamps more than about 140 years from 1970):
    those keep their own order instead of the input's."""
    from pyspark.sql import functions as F

    from . import values

    types = {f.name: f.dataType for f in df.schema.fields}
    numbered, time, value = number_rows(df) if spec.ties == "input" else df, spec.time, spec.value
    if not plain_time(types[time]):
        numbered, time = numbered.withColumn(TIME, F.expr(time_sql(time, types[time]))), TIME
    expression = values.value_sql(spec.value, spec.value_fields, types)
    if spec.value_fields or expression != quoted(spec.value):
        numbered, value = numbered.withColumn(VALUE, F.expr(expression)), VALUE
    return numbered, time, value


def plain_time(data_type) -> bool:
    """A time column :func:`seconds` converts in the worker exactly as
    :func:`time_sql` does in the JVM: all but decimals."""
    from pyspark.sql.types import DecimalType

    return not isinstance(data_type, DecimalType)


def micro_time(data_type) -> bool:
    """A time column whose values are whole microseconds, and whose double
    seconds (:func:`seconds`, :func:`time_sql`) are their count over 10^6
    rounded once: a timestamp (with a zone or without), a date, a decimal
    of at most 6 decimal places.  Its ``range=`` edges are decided in
    microseconds (:func:`spark_ops.frames.range_edge`)."""
    from pyspark.sql.types import DateType, DecimalType, TimestampNTZType, TimestampType

    return (isinstance(data_type, (DateType, TimestampType, TimestampNTZType))
            or isinstance(data_type, DecimalType) and data_type.scale <= 6)


def clock_of(data_type) -> str:
    """How a time column of ``data_type`` writes its times, for messages
    (:attr:`spark_ops.spec.WindowSpec.clock`): ``""`` for a number."""
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    kinds = ((TimestampType, "timestamp"), (TimestampNTZType, "timestamp_ntz"), (DateType, "date"))
    return next((name for kind, name in kinds if isinstance(data_type, kind)), "")


def seconds(times):
    """An Arrow time column (one :func:`plain_time` allows, or the doubles
    of :data:`TIME`) as the windows take it, the same doubles as
    :func:`time_sql`'s: a number as a double, a timestamp's microseconds
    since the epoch (a timestamp without a zone: since the epoch's wall
    clock) over 1e6, a date's days times 86400.  O(n), in Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = times.type
    if kind == pa.float64():
        return times
    if pa.types.is_timestamp(kind):
        micros = times.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
        return pc.divide(micros.cast(pa.float64(), safe=False), 1e6)
    if pa.types.is_date32(kind):
        return pc.multiply(times.cast(pa.int32()).cast(pa.float64()), 86400.0)
    return times.cast(pa.float64(), safe=False)


def micros(times):
    """An Arrow time column (one :func:`seconds` takes) as integer
    microseconds since the epoch, an int64 NumPy array: a timestamp's and a
    date's exactly (double seconds tell microseconds apart only within
    about 140 years of 1970), a number of seconds rounded to the
    microsecond.  A null time gives 0 (a bad row: callers leave it out).
    O(n)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = times.type
    if pa.types.is_timestamp(kind):  # nulls filled first: NumPy would make the column floats
        return pc.fill_null(times.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64()), 0).to_numpy()
    if pa.types.is_date32(kind):
        return pc.fill_null(times.cast(pa.int32()), 0).to_numpy().astype(np.int64) * 86_400_000_000
    return np.round(seconds(times).to_numpy(zero_copy_only=False) * 1e6).astype(np.int64)


def micros_sql(name: str, data_type) -> str:
    """:func:`micros` in Spark SQL (a BIGINT), the same integers."""
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    if isinstance(data_type, DateType):
        return f"CAST(unix_date({quoted(name)}) AS BIGINT) * 86400000000"
    if isinstance(data_type, TimestampNTZType):
        return f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {quoted(name)})"
    if isinstance(data_type, TimestampType):
        return f"unix_micros({quoted(name)})"
    return f"CAST(rint(({time_sql(name, data_type)}) * 1000000.0) AS BIGINT)"


def time_sql(name: str, data_type) -> str:
    """The SQL expression of a time column as the windows take it: double
    seconds since the epoch (a timestamp without a zone: since the epoch's
    wall clock; a date: its midnight UTC, whatever the session's zone)."""
    from pyspark.sql.types import DateType, TimestampNTZType

    if isinstance(data_type, DateType):
        return f"CAST(unix_date({quoted(name)}) AS DOUBLE) * 86400"
    if isinstance(data_type, TimestampNTZType):
        return (f"CAST(timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {quoted(name)}) AS DOUBLE)"
                " / 1e6")
    return f"CAST({quoted(name)} AS DOUBLE)"


def value_sql(name: str, data_type) -> str:
    """The SQL expression of a value column as the engines take it (decimals
    as doubles, like the aggregations' outputs)."""
    return taken_sql(quoted(name), data_type)


def taken_sql(sql: str, data_type) -> str:
    """A numeric SQL expression of type ``data_type`` as the engines take
    it: decimals as doubles, other types as they are."""
    from pyspark.sql.types import DecimalType

    return f"CAST({sql} AS DOUBLE)" if isinstance(data_type, DecimalType) else sql


def quoted(name: str) -> str:
    """A column name as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def output_schema(df, spec: WindowSpec) -> str:
    """The input's columns (without the internal ones) and the outputs."""
    fields = [f"{quoted(f.name)} {f.dataType.simpleString()}" for f in df.schema.fields if f.name not in INTERNAL]
    return ", ".join(fields + [f"{quoted(n)} {t}" for n, t in spec.output_columns])


def output_arrow_schema(spark, schema: str):
    """The Arrow schema of rows of the Spark schema ``schema`` (a DDL
    string), as ``mapInArrow`` takes them (timestamps in the session's zone)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    return to_arrow_schema(_parse_datatype_string(schema), timezone=spark.conf.get("spark.sql.session.timeZone"))


class InputTimes:
    """The input's time column (an Arrow array) as Python values, converted
    only if a message about a rejected row needs them."""

    def __init__(self, column) -> None:
        self._column, self._values = column, None

    def __getitem__(self, i):
        if self._values is None:
            self._values = self._column.to_pylist()
        return self._values[i]

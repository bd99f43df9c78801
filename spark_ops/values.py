"""Several value columns: ``value=`` a list of numeric columns or a struct
column of numeric fields (its fields are the value columns).

With several value columns a ready aggregation names the column it reads,
``"max(cpu)"``, and its output column is named by :func:`output_name`,
``<aggregation>_<column>`` (``max_cpu``; with several sizes the size's label
follows, ``max_cpu_5m``).  ``"max(cpu)"`` also works with one value column
(``max_cpu``), and a bare ``"max"`` keeps its name (``max``).  ``aggs=`` may
be a dict naming the output columns: ``{"peak": "max(cpu)", "vwap":
aggregator}`` (an :class:`mta.Aggregator`, or ``(Aggregator, spark_type)``).
A user aggregator's ``lift`` gets the row's values as a tuple, in the order
of ``value=`` (a struct: its fields' order); with one value column, the
value itself, as before.

A row is bad (``on_bad_row``) when any of its value columns is null or NaN,
whichever aggregations read it: the rule is the same for every engine.

Inside a job several value columns travel as one struct column (the plan's
internal value column, :func:`value_sql`): Arrow keeps each field's type,
so integers stay exact, also through the streaming plan's Arrow IPC.  The
MTA windows take each row as a tuple (:func:`python_values`), the columnar
engine a NumPy structured array (:func:`numpy_values`) whose fields its
kernels read (:func:`rows_by_kernel`).
"""

from __future__ import annotations

import math
import operator
import re

from .names import missing_columns, spelled

#: ``"max(cpu)"``: a ready aggregation and the value column it reads.
_READS = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*")


def output_name(aggregation: str, column: str | None) -> str:
    """The output column of a ready aggregation reading ``column`` (``None``:
    the one value column, unnamed): ``max``, or ``max_cpu``.  The one
    naming rule; several sizes append ``_<label>`` to it
    (:attr:`spark_ops.spec.WindowSpec.columns`)."""
    return aggregation if column is None else f"{aggregation}_{column}"


def value_columns(value) -> str | tuple:
    """``value=`` as :class:`~spark_ops.spec.WindowSpec` holds it: one
    column's name (also for a list of one), or a tuple of several."""
    from .spec import column_names

    return column_names(value, "value")


def fields_of(schema, value) -> tuple[tuple, list]:
    """The value columns of ``value`` (:func:`value_columns`) in the input
    ``schema`` (a ``StructType``): ``(names, types)``, ``names`` empty for
    one numeric column (its values come alone, not in a tuple), else the
    list's columns or the struct's fields; each must be numeric."""
    from pyspark.sql.types import NumericType, StructType

    from .spec import SlidingWindowError

    value = value_columns(value)
    types = {f.name: f.dataType for f in schema.fields}
    for c in value if isinstance(value, tuple) else (value,):
        if c not in types:
            raise SlidingWindowError(missing_columns([c], list(types)))
    if isinstance(value, tuple):
        names, data = value, [types[c] for c in value]
    elif isinstance(types[value], StructType):
        names = tuple(f.name for f in types[value].fields)
        data = [f.dataType for f in types[value].fields]
        if not names:
            raise SlidingWindowError(f"value column {value!r} is a struct without fields")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SlidingWindowError(f"value struct {value!r} has the field {twice[0]!r} twice")
    else:
        names, data = (), [types[value]]
    for name, t in zip(names or (value,), data):
        if not isinstance(t, NumericType):
            what = f"value field {value}.{name}" if names and not isinstance(value, tuple) else f"value column {name!r}"
            raise SlidingWindowError(f"{what} is {t.simpleString()}, not numeric")
    return names, data


def types_of(schema, spec) -> list:
    """The Spark types of ``spec``'s value columns in ``schema``, unchecked
    (:func:`fields_of` checks them)."""
    types = {f.name: f.dataType for f in schema.fields}
    if isinstance(spec.value, tuple):
        return [types[c] for c in spec.value]
    if spec.value_fields:
        struct = {f.name: f.dataType for f in types[spec.value].fields}
        return [struct[f] for f in spec.value_fields]
    return [types[spec.value]]


def per_column(types: list, kind) -> bool | tuple:
    """Whether the value columns (their Spark ``types``) are instances of
    ``kind``: a bool for one, a tuple for several."""
    flags = tuple(isinstance(t, kind) for t in types)
    return flags if len(flags) > 1 else flags[0]


def flag_of(flags: bool | tuple, read: int | None) -> bool:
    """A value column's flag from :func:`per_column`'s answer (``read``:
    its position, ``None``: the one column, or every column)."""
    if not isinstance(flags, tuple):
        return flags
    return all(flags) if read is None else flags[read]


def resolve(aggs, fields: tuple, integral, single: str | None = None) -> tuple[list, tuple]:
    """``aggs`` as ``([(output column, Aggregator, spark type)], reads)``:
    ``reads`` per aggregation, the position of the value column it reads,
    or ``None`` for the whole value (a user aggregator, or a ready one
    over the one value column); ``()`` when none reads a column by name.
    ``aggs``: names separated by commas, a list, or a dict of output
    column to aggregation; ``fields``: the value columns (``()`` for one
    unnamed column, ``single`` its name); ``integral``: per :func:`per_column`."""
    from . import aggregations
    from .spec import SlidingWindowError

    if isinstance(aggs, str):
        aggs = [a.strip() for a in aggs.split(",") if a.strip()]
    if isinstance(aggs, dict):
        entries = [_dict_entry(name, agg) for name, agg in aggs.items()]
    elif isinstance(aggs, (list, tuple)):
        entries = [(None, a) for a in aggs]
    else:
        raise SlidingWindowError(f"aggs= is a list of aggregations or a dict of output column to aggregation, "
                                 f"got {type(aggs).__name__}")
    if not entries:
        raise SlidingWindowError("aggs= needs at least one aggregation, e.g. ['max', 'mean']")
    resolved, reads = [], []
    for name, agg in entries:
        read = None
        if isinstance(agg, str):
            named = _READS.fullmatch(agg) is not None  # "max(cpu)": the column is in the output's name
            agg, column = _ready(agg, fields, single)
            read = fields.index(column) if fields and column is not None else None
            out, aggregator, spark = aggregations.resolve_one(agg, flag_of(integral, read))
            resolved.append((name or output_name(out, column if named else None), aggregator, spark))
        else:
            resolved.append(aggregations.resolve_one(agg if name is None else (name, *agg), False))
        reads.append(read)
    names = [n for n, _, _ in resolved]
    if len(set(names)) != len(names):
        raise SlidingWindowError(f"aggregation output columns must be unique, got {names}")
    return resolved, (tuple(reads) if any(r is not None for r in reads) else ())


def _dict_entry(name, agg) -> tuple:
    from mta import Aggregator

    from .spec import SlidingWindowError

    if not isinstance(name, str) or not name:
        raise SlidingWindowError(f"aggs= dict keys are output column names, got {name!r}")
    if isinstance(agg, str):
        return name, agg
    if isinstance(agg, Aggregator):
        return name, (agg,)
    if isinstance(agg, tuple) and len(agg) == 2 and isinstance(agg[0], Aggregator):
        return name, agg
    raise SlidingWindowError(f"aggs= dict value for {name!r} is a ready aggregation such as 'max(cpu)', an "
                             f"Aggregator, or (Aggregator, spark_type), got {agg!r}")


def _ready(text: str, fields: tuple, single: str | None) -> tuple[str, str | None]:
    """``"max"`` or ``"max(cpu)"`` as ``(aggregation, the value column it
    names or None)``; several value columns need the column."""
    from .spec import SlidingWindowError

    m = _READS.fullmatch(text)
    if m is None:
        if len(fields) > 1:
            raise SlidingWindowError(f"aggregation {text.strip()!r} does not say which value column it reads; "
                                     f"with several value columns write it as '{text.strip()}(column)', the "
                                     f"columns being {', '.join(fields)}")
        return text, (fields[0] if fields else None)  # a struct of one field: that field
    agg, column = m.group(1), m.group(2).strip()
    columns = fields or ((single,) if single is not None else ())
    column = spelled(column, columns)
    if column not in columns:
        raise SlidingWindowError(f"aggregation {text.strip()!r} reads column {column!r}, which is not a value "
                                 f"column; the value column{'s are' if len(columns) > 1 else ' is'} "
                                 f"{', '.join(columns)}")
    return agg, column


def on_columns(aggregators: list, reads: tuple) -> list:
    """Each aggregator over the value it reads: a column of the row's tuple
    (``reads``), or the whole value."""
    if not reads:
        return list(aggregators)
    return [agg if r is None else agg.on(operator.itemgetter(r)) for agg, r in zip(aggregators, reads)]


def value_sql(value, fields: tuple, types: dict) -> str:
    """The SQL expression of the plan's internal value column: the one
    column (decimals as doubles, like the aggregations' outputs), or a
    struct of the value columns, fields in order."""
    from .plan import quoted, taken_sql as taken

    if not fields:
        return taken(quoted(value), types[value])
    if isinstance(value, tuple):
        parts = [(quoted(c), types[c]) for c in value]
    else:
        struct = {f.name: f.dataType for f in types[value].fields}
        parts = [(f"{quoted(value)}.{quoted(f)}", struct[f]) for f in fields]
    return "struct(" + ", ".join(f"{taken(sql, t)} AS {quoted(f'v{i}')}"
                                 for i, (sql, t) in enumerate(parts)) + ")"


def python_values(values) -> list:
    """An Arrow value column as Python values: a struct's rows as tuples."""
    import pyarrow as pa

    if not pa.types.is_struct(values.type):
        return values.to_pylist()
    return list(zip(*(f.to_pylist() for f in _fields(values))))


def _fields(values) -> list:
    """A struct column's fields (Arrow arrays or chunked arrays)."""
    import pyarrow.compute as pc

    return [pc.struct_field(values, [i]) for i in range(values.type.num_fields)]


def numpy_values(values):
    """An Arrow value column without nulls as NumPy: floats as float64,
    integers as int64; a struct as a structured array of such fields."""
    import numpy as np
    import pyarrow as pa

    def one(c):
        dtype = np.float64 if pa.types.is_floating(c.type) else np.int64
        return c.to_numpy(zero_copy_only=False).astype(dtype, copy=False)

    if not pa.types.is_struct(values.type):
        return one(values)
    columns = [one(f) for f in _fields(values)]
    out = np.empty(len(values), dtype=[(f"v{i}", c.dtype) for i, c in enumerate(columns)])
    for i, c in enumerate(columns):
        out[f"v{i}"] = c
    return out


def rows_by_kernel(rows, reads: tuple, n: int) -> list:
    """Per kernel the :class:`~spark_ops.kernels.Rows` it reads: ``rows``
    itself for one value column, else one ``Rows`` per value column read
    (its field of the structured values, contiguous), shared by the kernels
    reading it."""
    if rows.x.dtype.names is None:
        return [rows] * n
    import numpy as np

    from .kernels import Rows

    by_column = {}
    out = []
    for r in reads:
        if r not in by_column:
            by_column[r] = Rows(np.ascontiguousarray(rows.x[f"v{r}"]), rows.start, rows.end, rows.carried,
                                base=rows.base, stacks=rows.stacks, column=r)
        out.append(by_column[r])
    return out


def value_text(spec, v) -> str:
    """A row's value as messages name it: ``mem=3.0``, or for several value
    columns ``cpu=1.0, mem=None``."""
    if not spec.value_fields:
        return f"{spec.value}={v!r}"
    if isinstance(v, dict):
        v = tuple(v.values())
    if not isinstance(v, tuple):
        return f"{spec.value}={v!r}"
    return ", ".join(f"{name}={x!r}" for name, x in zip(spec.value_fields, v))


def missing(v) -> bool:
    """A null or NaN value, or a tuple of values holding one."""
    if type(v) is tuple:
        return any(missing(x) for x in v)
    return v is None or (isinstance(v, float) and math.isnan(v))

"""Rows carried through pandas untouched: Arrow IPC bytes in one binary column.

``applyInPandasWithState`` hands each key's rows to Python as pandas
frames, and pandas infers their dtypes: an integer column with a null
becomes float64 (2^53 + 1 comes back as 2^53), a timestamp beyond 2262
overflows nanoseconds.  A sliding window must give back every value as it
came, so the streaming plan (:mod:`spark_ops.streaming`) never lets pandas
see the rows: :func:`pack_by_key` turns each Arrow batch into one row per
key holding that key's rows as Arrow IPC bytes, the per-key function
unpacks them (:func:`unpack`), packs its output the same way
(:func:`pack`), and :func:`unpack_batches` turns the packs back into rows
of the declared output schema.  Pandas only ever holds ``bytes`` objects,
which it keeps as they are.

The group key is the one value the state API itself hands to Python
through pandas; a timestamp key column crosses as its microseconds (a
``long``, :class:`GroupKeys`) and becomes a ``datetime`` again in Python
(:func:`spark_ops.keys.key_time`), so keys at any time Spark holds work.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from .keys import exact, groupable, key_time, positive_zero
from .names import awkward
from .plan import ARRIVAL, PACKED, quoted

#: The columns of :func:`frame`.
_PACKED_COLUMNS = [PACKED]

#: Most rows in one pack (a pack is one binary value, and Arrow's binary
#: arrays hold at most 2 GiB per batch).
PACK_ROWS = 4096


def pack(table) -> list[bytes]:
    """``table`` (an Arrow table or record batch) as Arrow IPC stream bytes,
    in packs of at most :data:`PACK_ROWS` rows (none for no rows)."""
    import pyarrow as pa

    out = []
    for start in range(0, table.num_rows, PACK_ROWS):
        piece = table.slice(start, PACK_ROWS)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, piece.schema) as writer:
            writer.write(piece)
        out.append(sink.getvalue().to_pybytes())
    return out


def unpack(packs: Iterable[bytes]):
    """The Arrow table of the rows in ``packs`` (the packs' order kept), one
    chunk per column."""
    import pyarrow as pa

    tables = [pa.ipc.open_stream(p).read_all() for p in packs]
    if len(tables) == 1 and tables[0].num_columns and tables[0].column(0).num_chunks == 1:
        return tables[0]  # one batch: one chunk per column already
    return pa.concat_tables(tables).combine_chunks()


def frame(packs: list[bytes]):
    """A pandas frame of one column, :data:`spark_ops.plan.PACKED`, holding
    ``packs`` (what a per-key function of the state API yields), built from
    an object array: a third of the cost of building it from a dict."""
    import numpy as np
    import pandas as pd

    column = np.empty((len(packs), 1), dtype=object)
    column[:, 0] = packs
    return pd.DataFrame(column, columns=_PACKED_COLUMNS, copy=False)


class GroupKeys:
    """How the key columns ``keys`` of the input schema ``schema`` cross the
    state API: as they are, except timestamps (with or without a time
    zone), which travel as their microseconds since the epoch (UTC for a
    timestamp, the wall clock for a ``timestamp_ntz``) because pandas holds
    only the nanosecond range 1677-2262."""

    def __init__(self, schema, keys: list[str]) -> None:
        from pyspark.sql.types import TimestampNTZType, TimestampType

        types = {f.name: f.dataType for f in schema.fields}
        self.keys = list(keys)
        #: The key columns' names in the state API's grouping: their own, but
        #: a name PySpark cannot look up (:func:`spark_ops.names.awkward`).
        self.names = [f"__mta_key{i}" if awkward(k) else k for i, k in enumerate(self.keys)]
        #: Per key column: ``"utc"``, ``"ntz"`` (sent as microseconds) or ``None``.
        self.micros = [("utc" if isinstance(types[k], TimestampType) else
                        "ntz" if isinstance(types[k], TimestampNTZType) else None) for k in self.keys]
        self.ddl = ", ".join(f"{quoted(n)} " + ("long" if m else types[k].simpleString())
                             for n, k, m in zip(self.names, self.keys, self.micros))

    def value(self, key: tuple) -> tuple:
        """The key's column values as Python values (timestamps by
        :func:`spark_ops.keys.key_time`, as a batch plan reads them) from
        the grouping key Spark hands the per-key function."""
        values = []
        for part, micros in zip(key, self.micros):
            part = _python(part)
            if micros is not None and part is not None:  # pandas hands a null long over as NaN
                part = None if part != part else key_time(int(part), micros == "utc")
            values.append(part)
        return tuple(values)


def _python(value):
    """A grouping key's value from pandas as Python's: NumPy scalars and
    arrays (an array key's, a struct's field's) as numbers and lists."""
    import numpy as np

    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_python(v) for v in value]
    return value


def pack_by_key(keys: str | list[str] | GroupKeys, *, numbered: bool = False):
    """A ``mapInArrow`` function: each input batch as rows ``(*keys, packed)``,
    one per key of the batch (its rows, in input order, as IPC bytes; a
    composite key's columns ``keys`` together), so the rows travel to their
    key's group without pandas reading them; a :class:`GroupKeys` sends its
    timestamp key columns as microseconds.  ``numbered``: each row first
    gets its arrival number, :data:`spark_ops.plan.ARRIVAL` (the task's
    partition, then the row's position in it: the input order, as a batch
    plan's ``monotonically_increasing_id``), in this same pass over the rows."""
    micros = keys.micros if isinstance(keys, GroupKeys) else None
    names = keys.names if isinstance(keys, GroupKeys) else None
    keys = keys.keys if isinstance(keys, GroupKeys) else [keys] if isinstance(keys, str) else list(keys)
    micros, names = micros or [None] * len(keys), names or keys

    def packed(batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in (number_rows(batches) if numbered else batches):
            if not batch.num_rows:
                continue
            at, blobs = [], []
            for group in key_groups(batch, keys):
                for blob in pack(batch.take(pa.array(group, pa.int64()))):
                    at.append(group[0])
                    blobs.append(blob)
            firsts = pa.array(at, pa.int64())
            yield pa.RecordBatch.from_arrays([_key_array(batch.column(k).take(firsts), m) for k, m in zip(keys, micros)]
                                             + [pa.array(blobs, pa.binary())], names=[*names, PACKED])

    return packed


def number_rows(batches: Iterator) -> Iterator:
    """A ``mapInArrow`` function: each row with its arrival number appended,
    :data:`spark_ops.plan.ARRIVAL` (the task's partition, then the row's
    position in it: the input order, as a batch plan's
    ``monotonically_increasing_id``; the same on every attempt of the task
    for a deterministic source)."""
    import pyarrow as pa

    arrival = _partition() << 33
    for batch in batches:
        ids = pa.array(range(arrival, arrival + batch.num_rows), pa.int64())
        arrival += batch.num_rows
        yield pa.RecordBatch.from_arrays(batch.columns + [ids], names=batch.schema.names + [ARRIVAL])


def _partition() -> int:
    """The partition of the Spark task running this."""
    from pyspark import TaskContext

    return TaskContext.get().partitionId()


def _key_array(column, micros):
    """A key column as it crosses the state API: a timestamp's microseconds,
    floats with ``-0.0`` as ``0.0`` at any depth (Spark's grouping by the
    state API tells the zeros apart; :func:`key_groups` puts them together,
    so the key a group crosses as must not be whichever its first row has)."""
    import pyarrow as pa

    if micros:
        return column.cast(pa.timestamp("us", column.type.tz)).cast(pa.int64())
    if pa.types.is_nested(column.type):
        return pa.array([positive_zero(v) for v in exact(column).to_pylist()], type=column.type)
    return _normal_zero(column)


def key_groups(batch, keys: list[str]) -> list[list[int]]:
    """The row positions of each key of ``batch`` (a record batch or a
    table), in input order, keys grouped as Spark groups them: ``-0.0`` with
    ``0.0``, every NaN together, nulls together.  Arrow groups the key types
    it can, O(n); nested ones (arrays, structs) are grouped on their Python
    values, O(n) with a larger constant."""
    import pyarrow as pa

    n = batch.num_rows
    columns = {f"k{j}": _normal_zero(batch.column(k)) for j, k in enumerate(keys)}
    try:
        table = pa.table({**columns, "i": pa.array(range(n), pa.int64())})
        grouped = table.group_by(list(columns), use_threads=False).aggregate([("i", "list")])
        return [sorted(g) for g in grouped.column("i_list").to_pylist()]
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        groups: dict = {}
        for i, values in enumerate(zip(*(exact(c).to_pylist() for c in columns.values()))):
            groups.setdefault(groupable(values), []).append(i)
        return list(groups.values())


def first_key(rows, keys: GroupKeys) -> tuple:
    """The key columns' values of the first row of ``rows`` as the state API
    hands a group's key to Python: timestamps as microseconds, ``-0.0`` as
    ``0.0`` at any depth (a struct's or an array's), so that every row of a
    group (:func:`key_groups`) names the same window."""
    return tuple(positive_zero(_key_array(rows.column(k).slice(0, 1), m).to_pylist()[0])
                 for k, m in zip(keys.keys, keys.micros))


def _normal_zero(column):
    """A floating column with ``-0.0`` as ``0.0`` and every NaN as one NaN
    (Spark groups each as one key; Arrow tells them apart by their bits)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_floating(column.type):
        column = pc.if_else(pc.is_nan(column), pa.scalar(float("nan"), column.type), column)
        return pc.if_else(pc.equal(column, 0), pa.scalar(0, column.type), column)
    return column


def unpack_batches(schema):
    """A ``mapInArrow`` function: the packed output rows back as rows of
    ``schema`` (the output's Arrow schema; a column Arrow inferred
    differently, e.g. a user aggregation's, is cast to its declared type)."""

    def unpacked(batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in batches:
            for blob in batch.column(PACKED).to_pylist():
                for piece in pa.ipc.open_stream(blob):
                    yield conform(piece, schema)

    return unpacked


def conform(piece, schema):
    """The record batch or table ``piece`` as ``schema`` (the output's Arrow
    schema): a column Arrow inferred differently, e.g. a user aggregation's,
    is cast to its declared type."""
    if piece.schema == schema:
        return piece
    return type(piece).from_arrays([c if c.type == f.type else c.cast(f.type) for c, f in zip(piece.columns, schema)],
                                   schema=schema)

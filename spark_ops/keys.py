"""A key as the windows take it: what Spark groups together is one key.

A plan reads its key columns from Arrow batches (:func:`key_reader`) and
compares keys in Python, where values Spark groups as one can differ: a
timestamp read in the session's zone compares by its wall clock (two
instants of a daylight-saving fold are one), a NaN is not equal to itself,
``-0.0`` is a value of its own.  So a timestamp key is its instant
(:func:`key_time`; inside a struct or an array, its count,
:func:`exact`), keys are compared by :func:`same_key` (NaNs inside equal,
:func:`groupable`) and a key written out has ``0.0`` for both zeros
(:func:`positive_zero`).  Batch, ``slide=`` and streaming plans share
these rules.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["KeyMicros", "exact", "groupable", "key_part", "key_reader", "key_time", "positive_zero", "same_key"]


def key_reader(positions: list[int]):
    """For a key at column ``positions`` of an Arrow batch (one column, or
    several for a composite key): ``(columns, key_of)``, where
    ``columns(batch)`` gives the key column (or the list of a composite
    key's columns, as :func:`spark_ops.batch.runs` and
    :func:`spark_ops.rows.check_columns` take them) and ``key_of(keys, i)``
    row ``i``'s key, a Python value (:func:`key_part`) or a tuple of them."""
    if len(positions) == 1:
        (at,) = positions
        return (lambda batch: batch.column(at)), key_part
    return ((lambda batch: [batch.column(i) for i in positions]),
            (lambda keys, i: tuple(key_part(c, i) for c in keys)))


def exact(column):
    """A key column (Arrow) with every timestamp in it, at any depth (a
    struct's field, an array's item), as its integer count (Spark's:
    microseconds since the epoch): Python values that compare as instants,
    where datetimes of one zone compare wall clocks (see :func:`key_time`),
    at any time Spark holds.  O(1) without a timestamp, else one cast."""
    plain = _exact_type(column.type)
    return column if plain is None else column.cast(plain)


def _exact_type(kind):
    """``kind`` with its timestamps as int64; ``None`` if it has none."""
    import pyarrow as pa

    if pa.types.is_timestamp(kind):
        return pa.int64()
    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        plain = [_exact_type(f.type) for f in fields]
        return None if plain == [None] * len(fields) else pa.struct(
            [f if p is None else f.with_type(p) for f, p in zip(fields, plain)])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        plain = _exact_type(kind.value_type)
        make = pa.list_ if pa.types.is_list(kind) else pa.large_list
        return None if plain is None else make(kind.value_field.with_type(plain))
    if pa.types.is_map(kind):
        key, item = _exact_type(kind.key_type), _exact_type(kind.item_type)
        return None if key is None and item is None else pa.map_(key or kind.key_type, item or kind.item_type)
    return None


class KeyMicros(int):
    """A timestamp key outside Python's years 1 to 9999 in UTC (Spark holds
    wider ones: '9999-12-31 23:59:59' in a session zone west of UTC): its
    microseconds since the epoch, compared exactly."""

    def __repr__(self) -> str:
        return f"KeyMicros({int(self)})"


_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICROS_PER = {"s": 1_000_000, "ms": 1_000, "us": 1}


def key_time(us: int, utc: bool):
    """A timestamp key column's value from its microseconds since the epoch:
    a ``datetime`` in UTC (``utc``; a ``timestamp_ntz``: naive, its wall
    clock), a :class:`KeyMicros` where Python has no such date.  Never in
    the session's zone: two instants an hour apart at a daylight-saving
    fold are one wall-clock time there, and Python compares datetimes of
    one zone by their wall clock."""
    try:
        return (_EPOCH_UTC if utc else _EPOCH) + dt.timedelta(microseconds=us)
    except OverflowError:
        return KeyMicros(us)


_NAN = object()


def groupable(value):
    """``value`` (a key's Python value) as a dict key equal exactly for the
    values Spark groups together: lists and structs as tuples, every NaN as
    one marker (Python's NaN is not equal to itself).  O(size of value)."""
    if isinstance(value, float):
        return _NAN if value != value else value
    if isinstance(value, (list, tuple)):
        return tuple(groupable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, groupable(v)) for k, v in value.items())
    return value


def positive_zero(value):
    """``value`` (a key's Python value, or a tuple of them) with every
    ``-0.0`` as ``0.0``, at any depth: the value of the key Spark's
    grouping gives a group of both zeros.  O(size of value)."""
    if isinstance(value, float):
        return 0.0 if value == 0 else value
    if isinstance(value, (list, tuple)):
        return type(value)(positive_zero(v) for v in value)
    if isinstance(value, dict):
        return {k: positive_zero(v) for k, v in value.items()}
    return value


def same_key(a, b) -> bool:
    """Whether keys ``a`` and ``b`` (:func:`key_part` values, or tuples of
    them) are one key to Spark: equal, or equal but for NaNs inside a
    struct or an array (a NaN key itself is a bad row, never a key)."""
    return a == b or groupable(a) == groupable(b)


def key_part(column, i: int):
    """Row ``i`` of a key column (Arrow) as the windows take it: its Python
    value, a timestamp's by :func:`key_time`, one inside a struct or an
    array as its count (:func:`exact`).  O(1)."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_nested(kind):
        return exact(column.slice(i, 1))[0].as_py()
    if not pa.types.is_timestamp(kind):
        return column[i].as_py()
    scalar = column[i]
    if not scalar.is_valid:
        return None
    us = scalar.value // 1000 if kind.unit == "ns" else scalar.value * _MICROS_PER[kind.unit]
    return key_time(us, kind.tz is not None)

"""Periodic output (``slide=``) by panes: Spark aggregates each pane, the
worker combines a key's panes into its windows.

Every window of ``slide=`` is ``R / S`` consecutive *panes* ``[p S, (p +
1) S)`` (``S`` divides each size ``R``, :mod:`spark_ops.periodic`), so a
window's max, min, count and float sum are those of its panes' partial
results (the Panes technique: Li et al., SIGMOD Record 2005, as the
multi-query paper of Shein and Chrysanthis applies it: a partial
aggregation per pane, then a final one per window).  The plan:

* ``groupBy(key..., pane = floor(t_us / S))`` with Spark's own aggregate
  functions: Spark aggregates map-side before its shuffle, so the raw rows
  are neither shuffled nor sorted, only one partial row per key and pane;
* the partial rows repartitioned by key and sorted by pane, then per key
  :class:`spark_ops.periodic.PeriodicWindow` over the panes as rows (the
  columnar kernels: a window's max is the max of its panes' maxes, its
  count and sum the sum of their counts and sums, its mean their ratio).

Times are taken as the row plan takes them, in whole microseconds
(:func:`spark_ops.plan.micros_sql`, the SQL of :func:`spark_ops.plan.micros`:
a timestamp's or a date's exactly, a number's rounded half to even), so
the windows and their rows are the same.  Bad rows are not dropped by the aggregation: each
pane also carries whether it holds one and, if so, one such row's key,
time and value (``min_by``, fixed-width, so Spark keeps its hash
aggregation), and the worker raises :func:`spark_ops.rows.rejected` for it
before any window.

:func:`ineligible` is the rule for which jobs run here (see its
docstring); the others keep the row plan of :mod:`spark_ops.periodic`.
"""

from __future__ import annotations

import numpy as np

from . import rows, values as value_columns, worker_gc
from .keys import key_reader
from .names import map_in_arrow
from .plan import column, micros_sql, quoted, seconds as time_seconds, time_sql
from .spec import WindowSpec

PANE = "__mta_pane"
BAD = "__mta_bad"
#: The ready aggregations a pane plan computes: their window result is a
#: function of the panes' partial results whatever the rows' order within
#: a pane (first and last need that order; the spreads' moments and the
#: geomean's logs have no Spark partial that gives the columnar kernels'
#: values).
PANE_AGGREGATIONS = ("max", "min", "count", "sum", "mean")


def ineligible(spec: WindowSpec) -> str | None:
    """Why ``spec``'s periodic job, already on the columnar engine, keeps
    the row plan, or ``None`` when it runs on panes.  The one rule: every
    aggregation is one of :data:`PANE_AGGREGATIONS` (the columnar engine
    already requires a floating column for ``sum`` and ``mean``, whose
    integer sums NumPy would let overflow).  Those need only a partial per
    pane that Spark computes itself, and the partial aggregation before
    Spark's shuffle replaces the shuffle and sort of every raw row by those
    of one row per key and pane.  User monoids, ``first``/``last``, the
    spreads and ``engine="amta"``/``"lmta"`` keep the row plan."""
    for kernel in spec.kernels:
        if kernel not in PANE_AGGREGATIONS:
            return f"aggregation {kernel!r} is not computed from pane partials ({', '.join(PANE_AGGREGATIONS)} are)"
    return None


def _partials(spec: WindowSpec, floating: list) -> tuple[list, list, list]:
    """``(fields, steps, zeros)``: the pane partials Spark computes, ``(name,
    function, read)`` each (``read``: the value column, ``None`` for the
    row count); per aggregation how its windows come from them: ``(kernel
    over panes, field index)`` or, for ``mean``, ``("mean", (sum field,
    count field))``; and the sign-of-zero repairs (:func:`_signed_zeros`),
    ``(field, helper fields)`` for each max, min or sum of a floating
    column (``floating``: per value column)."""
    fields: list = []

    def field(function, read):
        if (function, read) not in [(f, r) for _, f, r in fields]:
            fields.append((f"__mta_p{len(fields)}", function, read))
        return next(i for i, (_, f, r) in enumerate(fields) if (f, r) == (function, read))

    steps, zeros = [], []
    reads = spec.reads or [None] * len(spec.kernels)
    for kernel, read in zip(spec.kernels, reads):
        if kernel in ("max", "min"):
            steps.append((kernel, field(kernel, read)))
            if floating[read or 0]:
                zeros.append((field(kernel, read), (field("first -0.0", read), field("first 0.0", read))))
        elif kernel == "count":
            steps.append(("sum", field("count", None)))
        else:  # sum, mean
            total = field("sum", read)
            steps.append(("sum", total) if kernel == "sum" else ("mean", (total, field("count", None))))
            if floating[read or 0]:
                zeros.append((total, (field("all -0.0", read),)))
    return fields, steps, list(dict.fromkeys(zeros))


def _partial_column(function: str, value: str, t_us: str):
    """The Spark aggregate of one pane partial over the SQL ``value``."""
    from pyspark.sql import functions as F

    negative_zero = f"({value}) = 0 AND CAST(({value}) AS STRING) = '-0.0'"
    if function == "count":
        return F.count(F.lit(1))
    if function == "first -0.0":  # the earliest time of a -0.0
        return F.min(F.expr(f"CASE WHEN {negative_zero} THEN {t_us} END"))
    if function == "first 0.0":
        return F.min(F.expr(f"CASE WHEN ({value}) = 0 AND NOT ({negative_zero}) THEN {t_us} END"))
    if function == "all -0.0":
        return F.expr(f"bool_and(coalesce({negative_zero}, false))")
    return {"max": F.max, "min": F.min, "sum": F.sum}[function](F.expr(value))


def _signed_zeros(out: np.ndarray, zeros: list, helpers) -> None:
    """Give zero partials the sign the row plan gives them.  The kernels
    make a max or min of 0 the window's oldest zero (sign included) and a
    float sum -0.0 only when every value is -0.0; Spark's aggregates
    return either zero.  A pane's max or min of 0 becomes the sign of its
    earliest zero (so the kernels' oldest-zero rule over the panes picks
    the window's), a pane's sum -0.0 when all its values are -0.0.  One
    case differs: a -0.0 and a 0.0 at one key's same time, the window's
    oldest zeros, give 0.0 here where the row plan gives the one that came
    first in the input (the partial aggregation does not see arrival order).
    ``helpers(j)``: field ``j`` as a NumPy array, nulls as ``None``."""
    for j, extra in zeros:
        column = out[f"v{j}"]
        zero = column == 0
        if not zero.any():
            continue
        if len(extra) == 2:
            big = np.iinfo(np.int64).max
            first_negative, first_positive = (helpers(i, big) for i in extra)
            column[zero] = np.where(first_negative[zero] < first_positive[zero], -0.0, 0.0)
        else:
            all_negative = helpers(extra[0], False)
            column[zero & all_negative] = -0.0


def pane_plan(df, spec: WindowSpec, schema: str, arrow_schema):
    """``df``'s periodic windows (rows of ``schema``, the row plan's) by
    panes.  Spark: one hash aggregation of the rows into ``(key, pane)``
    partials and a shuffle and sort of those; the worker: O(p log p) per
    key for p panes (the kernels' range reductions over the panes)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import FractionalType

    from .periodic import PeriodicWindow, slide_and_ranges_us, windows_batch, windows_by_key

    types = {f.name: f.dataType for f in df.schema.fields}
    k = len(spec.keys)
    seconds = time_sql(spec.time, types[spec.time])
    value = value_columns.value_sql(spec.value, spec.value_fields, types)
    value_types = value_columns.types_of(df.schema, spec)
    if spec.value_fields:
        parts = [f"{value}.{quoted(f'v{i}')}" for i in range(len(spec.value_fields))]
    else:
        parts = [value]
    floating = [isinstance(t, FractionalType) for t in value_types]
    bad = " OR ".join(f"({condition})" for condition, _ in rows.column_rules_sql(
        [(quoted(c), isinstance(types[c], FractionalType)) for c in spec.keys], seconds, list(zip(parts, floating)),
        micros=True))
    slide_us, ranges_us = slide_and_ranges_us(spec)
    # a bad row's time is not converted (an infinite one cannot be): its pane is null
    t_us = f"CASE WHEN {bad} THEN NULL ELSE {micros_sql(spec.time, types[spec.time])} END"
    pane = f"({t_us} - pmod({t_us}, {slide_us})) div {slide_us}"
    order = f"CASE WHEN {bad} THEN 0 END"  # min_by's ordering: any bad row, the same one for each column

    fields, steps, zeros = _partials(spec, floating)
    aggregates = [F.min(F.expr(order)).alias(BAD), F.min_by(column(spec.time), F.expr(order)).alias("__mta_bad_t")]
    aggregates += [F.min_by(F.expr(p), F.expr(order)).alias(f"__mta_bad_v{i}") for i, p in enumerate(parts)]
    aggregates += [_partial_column(function, parts[read or 0], t_us).alias(name) for name, function, read in fields]
    keys = [column(c) for c in spec.keys]
    panes = df.groupBy(*keys, F.expr(pane).alias(PANE)).agg(*aggregates)
    first_field = k + 3 + len(parts)
    kernels = [kernel for kernel, _ in steps if kernel != "mean"] + ["sum", "sum"] * sum(
        kernel == "mean" for kernel, _ in steps)
    reads = [at for kernel, at in steps if kernel != "mean"] + [i for kernel, at in steps if kernel == "mean"
                                                                for i in at]
    key_columns, key_of = key_reader(list(range(k)))
    n_sizes = len(ranges_us)

    def check(batch):
        """Raise for a pane holding a row no window can take."""
        flags = batch.column(k + 1)
        if flags.null_count == len(flags):
            return
        i = next(i for i, f in enumerate(flags.to_pylist()) if f is not None)
        key = key_of(key_columns(batch), i)
        vs = tuple(batch.column(k + 3 + j)[i].as_py() for j in range(len(parts)))
        v = vs if spec.value_fields else vs[0]
        shown = batch.column(k + 2).slice(i, 1)
        t_shown, t = shown[0].as_py(), time_seconds(shown)[0].as_py()
        raise rows.rejected(spec, rows.check_row(key, t, v, None, micros=True) or rows.NULL_VALUE, key, t_shown, v)

    def partials(batch, start, n):
        import pyarrow as pa
        import pyarrow.compute as pc

        columns = [batch.column(first_field + j).slice(start, n) for j in range(len(fields))]
        kinds = [np.float64 if pa.types.is_floating(c.type) else bool if pa.types.is_boolean(c.type) else np.int64
                 for c in columns]
        out = np.empty(n, dtype=[(f"v{j}", kind) for j, kind in enumerate(kinds)])
        for j, c in enumerate(columns):
            if c.null_count == 0:
                out[f"v{j}"] = c.to_numpy(zero_copy_only=False)
        if zeros:
            _signed_zeros(out, zeros, lambda j, fill: pc.fill_null(columns[j], fill).to_numpy(zero_copy_only=False))
        return out

    def finish(results):
        """Per aggregation and size (aggregation-major), from the pane kernels' results."""
        by_kernel = [results[i * n_sizes:(i + 1) * n_sizes] for i in range(len(kernels))]
        direct, means = iter(by_kernel), iter(by_kernel[sum(kernel != "mean" for kernel, _ in steps):])
        out = []
        for kernel, _ in steps:
            if kernel != "mean":
                out += next(direct)
                continue
            sums, counts = next(means), next(means)
            for (s, _), (c, _) in zip(sums, counts):
                empty = c == 0
                with np.errstate(divide="ignore", invalid="ignore"):
                    out.append((s / np.where(empty, 1, c), empty if empty.any() else None))
        return out

    def checked(batches):
        for batch in batches:
            check(batch)
            yield batch

    def push(window, batch, start, end):
        panes_at = batch.column(k).slice(start, end - start).to_numpy(zero_copy_only=False)
        return window.push(panes_at * slide_us, partials(batch, start, end - start))

    def windows_of_partition(batches):
        return windows_by_key(checked(batches), key_columns, key_of,
                              lambda key: PeriodicWindow(kernels, ranges_us, slide_us, tuple(reads)), push,
                              lambda key, ends_us, results: windows_batch(spec, arrow_schema, key, ends_us,
                                                                          finish(results)))

    return map_in_arrow(panes.repartition(*keys).sortWithinPartitions(*keys, column(PANE)),
                        worker_gc.settling(windows_of_partition), schema)


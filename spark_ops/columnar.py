"""The columnar engine: batch windows of the ready aggregations in NumPy.

A batch job knows each key's rows in advance, sorted by (time, arrival), so
every row's window is a contiguous range ``[s_i, i]`` of them: ``s_i = i - N
+ 1`` for ``rows=N``, the first row newer than the frame's edge
(:func:`spark_ops.frames.range_edge`) for ``range=``.  When the
aggregations are ready ones that NumPy computes (:mod:`spark_ops.kernels`),
a whole Arrow batch of one key is answered at once instead of row by row.
Several value columns come as one NumPy structured array, and each
aggregation's kernel reads the field of the column it names
(:mod:`spark_ops.values`): every column in the same pass.

Between batches a key keeps the rows its next windows can still reach (the
newest N - 1, or those newer than the last time minus the range): O(window)
values in a NumPy buffer in executor memory (:class:`spark_ops.carried.Carried`,
at most twice the window and the largest batch), as the in-memory MTA
keeps O(window) pairs.  A batch job with a store runs here too (its windows in
executor memory, the store unused) unless it asks for an MTA with
``engine="amta"`` or ``"lmta"``: the way to keep a batch job's windows in
the store, for windows larger than executor memory.  Jobs with a custom
policy, a user or other aggregation, or a ``sum`` or ``mean`` of an
integral column (:data:`FLOAT_ONLY`: NumPy would let the sum overflow) run
through the MTA (:class:`spark_ops.sorted_window.SortedWindow`).  A ready
aggregator under a type of one's own runs here: its results are
converted to that type by the rule every engine's are
(:func:`spark_ops.aggregations.arrow_column`).
"""

from __future__ import annotations

import numpy as np

from mta import aggregators

from . import frames, values as value_columns
from . import rows as row_rules
from .carried import Carried
from .kernels import AGGREGATIONS, FLOAT_ONLY, KERNELS, Rows
from .key_window import RowWindow

__all__ = ["AGGREGATIONS", "FLOAT_ONLY", "KERNELS", "ColumnarKeyWindow", "ColumnarWindow", "ineligible",
           "kernel_names"]


def ineligible(spec, floating: bool | tuple) -> str | None:
    """Why ``spec``'s batch job cannot run on the columnar engine, or ``None``
    when it can; ``floating``: the value column holds floating-point numbers
    (per value column for several, :func:`spark_ops.values.per_column`).
    A store does not stop it: the job's windows then stay in executor memory."""
    if spec.policy is not None:
        return "it has a custom slide policy (the columnar engine does rows= and range=)"
    reads = spec.reads or [None] * len(spec.aggs)
    for (name, _, _), kernel, read in zip(spec.aggs, kernel_names(spec), reads):
        if kernel is None:
            return (f"aggregation {name!r} is not one the columnar engine computes "
                    f"({', '.join(AGGREGATIONS)})")
        if spec.value_fields and read is None:
            return f"aggregation {name!r} reads every value column (the columnar engine's kernels read one each)"
        if kernel in FLOAT_ONLY and not value_columns.flag_of(floating, read):
            return f"aggregation {name!r} of an integral column is exact only in the MTA (NumPy sums overflow)"
    return None


def kernel_names(spec) -> list:
    """Per aggregation of ``spec``, the ready aggregation whose kernel
    computes it, or ``None``: a ready aggregator is recognised by identity,
    whatever the output column is named (``("peak", READY["max"].aggregator,
    "double")`` runs the ``max`` kernel)."""
    by_aggregator = {id(aggregators.READY[name].aggregator): name for name in KERNELS}
    return [by_aggregator.get(id(agg)) for _, agg, _ in spec.aggs]


class ColumnarKeyWindow(RowWindow):
    """A key's :class:`ColumnarWindow` behind the per-key window interface:
    Arrow arrays in and out, NumPy in between, no Python per row (but for
    the rows ``geomean`` rejects)."""

    def __init__(self, spec, key) -> None:
        super().__init__(spec, key)
        sizes = spec.size_values if spec.sizes else None
        kernels = list(spec.kernels) or [name for name, _, _ in spec.aggs]  # found on the driver
        self.window = ColumnarWindow(kernels,
                                     rows=sizes if sizes and spec.rows is not None else spec.rows,
                                     range=sizes if sizes and spec.range is not None else spec.range,
                                     frame=spec.frame, reads=spec.reads, micros=spec.micros)
        self._positive = "geomean" in self.window.names

    def aggregate(self, times, values, problems):
        import pyarrow as pa

        if self._positive:
            problems = not_positive(self.spec, self.window.names, values, problems)
        if problems is not None and any(problems):
            keep = pa.array([p is None for p in problems])
            times, values = times.filter(keep), values.filter(keep)
        if not len(times):
            return [pa.nulls(0, type=t) for t in self.types], problems
        results = self.window.push(times.to_numpy(), value_columns.numpy_values(values))
        # in the kernels' own types: RowWindow.push converts them to the declared ones by the engines' one rule
        return [pa.array(a, mask=null) for a, null in results], problems

    def close(self) -> None:
        self.window.close()


def not_positive(spec, names, values, problems):
    """``problems`` (per row of an Arrow batch, or ``None``) with the rows
    whose value ``geomean`` (one of the kernels ``names``) cannot take (not
    > 0), each with the reason the MTA's lift gives for it.  O(rows)."""
    import pyarrow.compute as pc

    if spec.value_fields:  # the columns geomean reads
        read = {r for (name, r) in zip(names, spec.reads) if name == "geomean"}
        columns = [pc.struct_field(values, [r]) for r in sorted(read)]
    else:
        columns = [values]
    bad = None
    for column in columns:  # a null value has its problem already
        below = pc.invert(pc.fill_null(pc.greater(column, 0), True))
        bad = below if bad is None else pc.or_(bad, below)
    if not pc.any(bad).as_py():
        return problems
    problems = list(problems) if problems is not None else [None] * len(values)
    lift = spec.value_aggregator().lift
    python = value_columns.python_values(values) if spec.value_fields else None
    for i in pc.indices_nonzero(bad).to_pylist():
        if problems[i] is None:
            try:
                lift(python[i] if python is not None else values[i].as_py())
            except Exception as exc:  # noqa: BLE001 - the row is rejected with the reason
                problems[i] = row_rules.cannot_lift(exc)
    return problems


class ColumnarWindow:
    """One key's window in a batch job: rows pushed in batches, sorted by
    time; each row's results over its own window (with ``frame="sql"``,
    :class:`ColumnarKeyWindow` gives peers the last one's).  ``rows`` or
    ``range`` is one size or a list of sizes: every size is computed on the
    same rows (the carried rows are those the largest still reaches);
    ``micros``: the times count microseconds (:func:`spark_ops.frames.range_edge`)."""

    def __init__(self, names, *, rows=None, range=None, frame: str = "default", reads: tuple = (),
                 micros: bool = False) -> None:
        self.names = list(names)
        self.reads = tuple(reads)  # per kernel, the field of structured values it reads
        self.several = isinstance(rows if rows is not None else range, (list, tuple))
        if rows is not None:
            # a count beyond any key's rows behaves as "all of them" (and fits an int64)
            self.sizes = [min(n, 1 << 62) for n in (rows if self.several else [rows])]
        else:
            self.sizes = list(range if self.several else [range])
        self.rows, self.range = rows, range
        self._edges = [frames.range_edge(r, frame, micros) for r in self.sizes] if range is not None else None
        self._values, self._times = Carried(), Carried()  # the carried rows
        self._base = 0  # the position of the first carried row among all of the key's rows
        self._stacks = [{} for _ in self.sizes]  # per size, the reductions' CarriedStacks
        self._kernels = [KERNELS[name] for name in self.names]
        self._empty = [aggregators.READY[name].empty for name in self.names]

    def push(self, times: np.ndarray, values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """The next rows of the key, in order (``values``: an array, or a
        structured array of several value columns whose fields ``v<i>`` the
        kernels read, ``reads``): per aggregation (and, for
        several sizes, per size within each aggregation), the results
        and the mask of the rows whose result is null (``None`` if none is).
        An empty window gives what the aggregation declares
        (:attr:`mta.aggregators.Ready.empty`: 0 for ``count`` and ``sum``,
        else null), and only a range too small to tell a time from itself
        makes one (e.g. 1 at 1e17, in the default frame).  O(k (n + c) log
        L) for k sizes, n rows, c carried rows and windows of up to L rows."""
        if not len(values):
            none = values[:0] if values.dtype.names is None else np.empty(0)
            return [(none, None) for _ in self.names for _ in self.sizes]
        carried = len(self._values)
        x = self._values.append(values)
        end = np.arange(carried, len(x))
        if self.rows is not None:
            starts = [np.maximum(end - (n - 1), 0) for n in self.sizes]
        else:
            t = self._times.append(times)
            starts = [np.searchsorted(t, edge(t[carried:]), side="right") for edge in self._edges]
        keep = min(int(start[-1]) for start in starts)  # later windows start there or later
        by_size = [self._results(x, start, end, carried, stacks) for start, stacks in zip(starts, self._stacks)]
        self._values.keep_from(keep)
        if self.range is not None:
            self._times.keep_from(keep)
        self._base += keep
        return [by_size[s][a] for a in range(len(self.names)) for s in range(len(self.sizes))]

    def _results(self, x, start, end, carried, stacks: dict) -> list:
        """Every aggregation over the windows ``[start, end]`` of one size."""
        empty = start > end
        if empty.any():
            start = np.minimum(start, end)  # the rows' own values stand in, then are masked or replaced
        else:
            empty = None
        rows = Rows(x, start, end, carried, base=self._base, stacks=stacks)
        return aggregate(self._kernels, self._empty, rows, empty, self.reads)

    def close(self) -> None:
        """The key is done: drop the carried rows and the reductions' stacks."""
        self._values.clear()
        self._times.clear()
        self._base = 0
        self._stacks = [{} for _ in self.sizes]


def aggregate(kernels, empties, rows, empty, reads: tuple = ()) -> list:
    """``(result, null mask)`` of every kernel over ``rows``' windows;
    windows marked in ``empty`` (``None``: none) hold no row and give the
    aggregation's empty value (``empties``), or null where it has none.
    Several value columns (``rows.x`` a structured array): each kernel
    reads the field ``reads`` gives it (:func:`spark_ops.values.rows_by_kernel`)."""
    out = []
    for kernel, when_empty, kernel_rows in zip(kernels, empties,
                                                value_columns.rows_by_kernel(rows, reads, len(kernels))):
        result, null = kernel(kernel_rows)
        if empty is not None:
            if when_empty is not None:
                result[empty] = when_empty
            else:
                null = empty if null is None else null | empty
        out.append((result, null))
    return out

"""The columnar engine: batch windows of the built-in aggregations in NumPy.

A batch job knows each key's rows in advance, sorted by (time, arrival), so
every row's window is a contiguous range ``[s_i, i]`` of them: ``s_i = i - N
+ 1`` for ``rows=N``, the first row newer than ``t_i - range`` for
``range=``.  When the aggregations are built-in ones that NumPy computes
(:data:`KERNELS`) and the windows stay in executor memory, a whole
Arrow batch of one key is answered at once instead of row by row:

* ``count``, ``first`` and ``last`` read the range's ends;
* ``max``, ``min`` and ``sum`` (and ``mean``, ``sum / count``) reduce each
  range without an inverse: a window that reaches back before the batch is
  a suffix of the earlier rows combined with a prefix of the batch (two
  accumulations, Two-Stacks' front and back stacks built in bulk); a
  window inside the batch is reduced with B-Int (Arasu and Widom, VLDB
  2004, section 4): level 0 is the values, level j + 1 combines the pairs
  of level j (the MTA's levels with every pair kept), and a range is the
  combination of at most two aligned blocks per level, found for all rows
  at once, O(log L) vectorized passes for ranges up to L rows.

Between batches a key keeps the rows its next windows can still reach (the
newest N - 1, or those newer than the last time minus the range): O(window)
values in a NumPy array, as the in-memory MTA keeps O(window) pairs.  Jobs
with a store, a custom policy, a user or other aggregation, or sums of an
integral column (which NumPy would let overflow) run through the MTA
(:class:`spark_ops.sorted_window.SortedWindow`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from mta import aggregators

from .key_window import RowWindow


def ineligible(spec, floating: bool) -> str | None:
    """Why ``spec``'s batch job cannot run on the columnar engine, or ``None``
    when it can; ``floating``: the value column holds floating-point numbers."""
    if spec.store:
        return "its windows are in a store (the columnar engine keeps them in executor memory)"
    if spec.policy is not None:
        return "it has a custom slide policy (the columnar engine does rows= and range=)"
    for name, agg, _ in spec.aggs:
        if name not in KERNELS or agg is not aggregators.READY[name].aggregator:
            return (f"aggregation {name!r} is not one the columnar engine computes "
                    f"({', '.join(AGGREGATIONS)})")
        if name in FLOAT_ONLY and not floating:
            return f"aggregation {name!r} of an integral column is exact only in the MTA (NumPy sums overflow)"
    return None


class ColumnarKeyWindow(RowWindow):
    """A key's :class:`ColumnarWindow` behind the per-key window interface:
    Arrow arrays in and out, NumPy in between, no Python per row."""

    def __init__(self, spec, key) -> None:
        super().__init__(spec, key)
        self.window = ColumnarWindow([name for name, _, _ in spec.aggs], rows=spec.rows, range=spec.range)

    def aggregate(self, times, values, problems):
        import pyarrow as pa

        if problems is not None and any(problems):
            keep = pa.array([p is None for p in problems])
            times, values = times.filter(keep), values.filter(keep)
        if not len(times):
            return [pa.nulls(0, type=t) for t in self.types], problems
        dtype = np.float64 if pa.types.is_floating(values.type) else np.int64
        results = self.window.push(times.to_numpy(), values.to_numpy().astype(dtype, copy=False))
        return [pa.array(a, mask=null, type=t) for (a, null), t in zip(results, self.types)], problems

    def close(self) -> None:
        self.window.close()


class ColumnarWindow:
    """One key's window in a batch job: rows pushed in batches, sorted by time."""

    def __init__(self, names, *, rows: int | None = None, range: float | None = None) -> None:
        # a count beyond any key's rows behaves as "all of them" (and fits an int64)
        self.names, self.rows, self.range = list(names), rows if rows is None else min(rows, 1 << 62), range
        self._values = self._times = None  # the carried rows
        self._kernels = [KERNELS[name] for name in self.names]
        self._empty = [aggregators.READY[name].empty for name in self.names]

    def push(self, times: np.ndarray, values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """The next rows of the key, in order: per aggregation, the results
        and the mask of the rows whose result is null (``None`` if none is).
        An empty window gives what the aggregation declares
        (:attr:`mta.aggregators.Ready.empty`: 0 for ``count`` and ``sum``,
        else null), and only a range too small to tell a time from itself
        makes one (e.g. 1 at 1e17)."""
        if not len(values):
            return [(values[:0], None) for _ in self.names]
        carried = 0 if self._values is None else len(self._values)
        x = values if not carried else np.concatenate((self._values, values))
        end = np.arange(carried, len(x))
        if self.rows is not None:
            start = np.maximum(end - (self.rows - 1), 0)
        else:
            t = times if not carried else np.concatenate((self._times, times))
            start = np.searchsorted(t, t[carried:] - self.range, side="right")
        keep = int(start[-1])  # later windows start there or later
        self._values = x[keep:].copy()
        if self.range is not None:
            self._times = t[keep:].copy()
        empty = start > end
        if empty.any():
            start = np.minimum(start, end)  # the rows' own values stand in, then are masked or replaced
        else:
            empty = None
        out = []
        for kernel, when_empty in zip(self._kernels, self._empty):
            result, null = kernel(x, start, end, carried), empty
            if empty is not None and when_empty is not None:
                result[empty], null = when_empty, None
            out.append((result, null))
        return out

    def close(self) -> None:
        """The key is done: drop the carried rows."""
        self._values = self._times = None


# -- kernels: (values, window starts, window ends, carried rows) -> results ------
def _count(x, start, end, carried):
    return end - start + 1


def _first(x, start, end, carried):
    return x[start]


def _last(x, start, end, carried):
    return x[end]


def _mean(x, start, end, carried):
    return reduce_windows(np.add, x, start, end, carried) / (end - start + 1)


def _reduce(ufunc, x, start, end, carried):
    result = reduce_windows(ufunc, x, start, end, carried)
    if ufunc is not np.add and x.dtype.kind == "f":
        _oldest_zero(x, start, result)
    return result


def _oldest_zero(x: np.ndarray, start: np.ndarray, result: np.ndarray) -> None:
    """A max or min of 0 is the window's oldest zero, sign included (as the
    MTA keeps the older of two equal values; NumPy keeps either): only when
    the rows hold a -0.0."""
    zeros = x == 0
    if not np.signbit(x[zeros]).any():
        return
    hit = np.flatnonzero(result == 0)
    if len(hit):
        nearest = np.where(zeros, np.arange(len(x)), len(x))
        next_zero = np.minimum.accumulate(nearest[::-1])[::-1]  # first zero at or after each position
        result[hit] = x[next_zero[start[hit]]]


#: The ready aggregations the columnar engine computes (a job runs on it
#: only if it has a kernel for each of its aggregations).
KERNELS = {"max": partial(_reduce, np.maximum), "min": partial(_reduce, np.minimum), "count": _count,
           "first": _first, "last": _last, "sum": partial(_reduce, np.add), "mean": _mean}
AGGREGATIONS = tuple(KERNELS)
#: Kernels exact only on floating-point values (an integral sum may overflow int64).
FLOAT_ONLY = ("sum", "mean")


def reduce_windows(ufunc, x: np.ndarray, start: np.ndarray, end: np.ndarray, carried: int) -> np.ndarray:
    """``ufunc.reduce(x[start[i] : end[i] + 1])`` for the rows of a batch:
    ``x`` is the carried rows then the batch's (from ``carried`` on), ``end``
    the rows' own positions, ``start`` non-decreasing, and ``ufunc``
    commutative (max, min, add).  A window that starts among the carried
    rows is a suffix of them and a prefix of the batch (two accumulations,
    as Two-Stacks' two stacks: O(carried + batch)); one that starts in the
    batch is reduced by :func:`reduce_ranges` over the batch alone."""
    out = np.empty(len(end), dtype=x.dtype)
    crossing = int(np.searchsorted(start, carried))  # rows [0, crossing) start among the carried rows
    if crossing:
        first = int(start[0])
        with np.errstate(all="ignore"):
            suffix = ufunc.accumulate(x[first:carried][::-1])[::-1]  # suffix[j] = x[first + j : carried]
            prefix = ufunc.accumulate(x[carried : int(end[crossing - 1]) + 1])
            out[:crossing] = ufunc(suffix[start[:crossing] - first], prefix[end[:crossing] - carried])
    if crossing < len(end):
        batch = x[carried:]
        out[crossing:] = reduce_ranges(ufunc, batch, start[crossing:] - carried, end[crossing:] + 1 - carried)
    return out


def _identity(ufunc, dtype):
    if ufunc is np.add:
        return dtype.type(-0.0) if dtype.kind == "f" else dtype.type(0)  # -0.0 + x is x, sign of zero included
    bounds = np.iinfo(dtype) if dtype.kind in "iu" else None
    if ufunc is np.maximum:
        return bounds.min if bounds is not None else -np.inf
    return bounds.max if bounds is not None else np.inf


def reduce_ranges(ufunc, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, identity=None) -> np.ndarray:
    """``ufunc.reduce(x[lo[i]:hi[i]])`` for every i, for an associative binary
    ``ufunc`` (B-Int's decomposition into aligned blocks, combined in order,
    so it need not be commutative) and its ``identity`` (found for
    ``np.maximum``, ``np.minimum`` and ``np.add``)."""
    if identity is None:
        identity = _identity(ufunc, x.dtype)
    left = np.full(len(lo), identity, dtype=x.dtype)
    right = left.copy()
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    level = x
    with np.errstate(all="ignore"):  # inf + -inf is nan, as in Python
        while True:
            take = (lo < hi) & (lo & 1).astype(bool)  # an odd left end: its block, then move right
            if take.any():
                left = np.where(take, ufunc(left, level[np.where(take, lo, 0)]), left)
                lo += take
            take = (lo < hi) & (hi & 1).astype(bool)  # an odd right end: its block, then move left
            if take.any():
                hi -= take
                right = np.where(take, ufunc(level[np.where(take, hi, 0)], right), right)
            lo >>= 1
            hi >>= 1
            if not (lo < hi).any():
                return ufunc(left, right)
            pairs = len(level) >> 1
            level = ufunc(level[0 : 2 * pairs : 2], level[1 : 2 * pairs : 2])

"""The columnar engine: batch windows of the built-in aggregations in NumPy.

A batch job knows each key's rows in advance, sorted by (time, arrival), so
every row's window is a contiguous range ``[s_i, i]`` of them: ``s_i = i - N
+ 1`` for ``rows=N``, the first row newer than ``t_i - range`` for
``range=``.  When the aggregations are built-in ones that NumPy computes
(:data:`AGGREGATIONS`) and the windows stay in executor memory, a whole
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
(:class:`spark_ops.spec.SortedWindow`).
"""

from __future__ import annotations

import numpy as np

#: Built-in aggregations the columnar engine computes; ``sum`` and ``mean``
#: only over a floating-point value column.
AGGREGATIONS = ("max", "min", "count", "first", "last", "sum", "mean")
FLOAT_ONLY = ("sum", "mean")
#: What an empty window gives (as the MTA's identities): 0 for these, null for the others.
ZERO_WHEN_EMPTY = ("count", "sum")


def ineligible(spec, floating: bool) -> str | None:
    """Why ``spec``'s batch job cannot run on the columnar engine, or ``None``
    when it can; ``floating``: the value column holds floating-point numbers."""
    from mta import aggregators

    if spec.store:
        return "its windows are in a store (the columnar engine keeps them in executor memory)"
    if spec.policy is not None:
        return "it has a custom slide policy (the columnar engine does rows= and range=)"
    for name, agg, _ in spec.aggs:
        if name not in AGGREGATIONS or agg is not aggregators.BY_NAME.get(name):
            return (f"aggregation {name!r} is not one the columnar engine computes "
                    f"({', '.join(AGGREGATIONS)})")
        if name in FLOAT_ONLY and not floating:
            return f"aggregation {name!r} of an integral column is exact only in the MTA (NumPy sums overflow)"
    return None


class ColumnarWindow:
    """One key's window in a batch job: rows pushed in batches, sorted by time."""

    def __init__(self, names, *, rows: int | None = None, range: float | None = None) -> None:
        # a count beyond any key's rows behaves as "all of them" (and fits an int64)
        self.names, self.rows, self.range = list(names), rows if rows is None else min(rows, 1 << 62), range
        self._values = self._times = None  # the carried rows

    def push(self, times: np.ndarray, values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """The next rows of the key, in order: per aggregation, the results
        and the mask of the rows whose result is null (``None`` if none is).
        Only an empty window gives null (or 0 for ``count`` and ``sum``),
        and only a range too small to tell a time from itself makes one
        (e.g. 1 at 1e17)."""
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
            start = np.minimum(start, end)  # the rows' own values stand in, then are masked or zeroed
        else:
            empty = None
        out = []
        for name in self.names:
            result, null = _aggregate(name, x, start, end, carried), empty
            if empty is not None and name in ZERO_WHEN_EMPTY:
                result[empty], null = 0, None
            out.append((result, null))
        return out

    def close(self) -> None:
        """The key is done: drop the carried rows."""
        self._values = self._times = None


def _aggregate(name: str, x: np.ndarray, start: np.ndarray, end: np.ndarray, carried: int) -> np.ndarray:
    if name == "count":
        return end - start + 1
    if name == "first":
        return x[start]
    if name == "last":
        return x[end]
    if name == "mean":
        return reduce_windows(np.add, x, start, end, carried) / (end - start + 1)
    result = reduce_windows(_UFUNCS[name], x, start, end, carried)
    if name != "sum" and x.dtype.kind == "f":
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


_UFUNCS = {"max": np.maximum, "min": np.minimum, "sum": np.add}


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

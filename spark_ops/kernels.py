"""The columnar engine's kernels: each ready aggregation over every row's
window of a batch, in NumPy (:data:`KERNELS`), and the range reductions
they share.

A kernel takes a :class:`Rows`: the values ``x`` (the rows carried from
earlier batches, then the batch's, from ``carried`` on) and per row of the
batch its window ``x[start[i] : end[i] + 1]``, and returns the results and
the mask of the results that are null (``None`` when none is).

* ``count``, ``first`` and ``last`` read the range's ends;
* ``max``, ``min`` and ``sum`` (``mean``: ``sum / count``; ``geomean``:
  ``exp`` of the mean of the logs, as the MTA's geomean lifts a value to
  its log) reduce each range with a ufunc (:func:`reduce_windows`);
* ``variance``, ``stddev``, ``var_pop`` and ``stddev_pop`` reduce each
  range in the moments monoid ``(count, mean, M2)`` with Chan et al.'s
  parallel formula (Chan, Golub and LeVeque, 1979), the MTA's own
  :data:`mta.aggregators.MOMENTS`: no sum of squares, so no cancellation
  when the values are far from 0.  A window holding an infinite value has
  a NaN M2, as in the MTA.  Sliding windows go through Two-Stacks in C
  (:data:`mta.native.window_moments`, O(1) per row amortized); any others, or all
  without the compiled core, through the block decomposition below.

``max`` and ``min`` of a range inside the batch come from a monotonic
deque in C (:data:`mta.native.window_extreme`, O(1) per row amortized);
``sum``, and all without the compiled core, take it as a block's suffix
and the next block's prefix (van Herk, 1992; Gil and Werman, 1993:
:func:`reduce_blocked`), which is O(1) per row.  A range that
starts in an earlier batch comes from the key's :class:`CarriedStacks`
(Two-Stacks over batches: O(1) per row amortized, however long the
window, where accumulating the carried rows again for every batch would
cost O(window / batch) per row); otherwise both
reductions decompose a range as B-Int does (Arasu and Widom, VLDB
2004, section 4): level 0 is the values, level j + 1 combines the pairs of
level j (the MTA's levels with every pair kept), and a range is the
combination, in order, of at most two aligned blocks per level, found for
all rows at once: O(log L) vectorized passes for ranges up to L rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

from mta import native


@dataclass
class Rows:
    """What a kernel reads: the values, each row's window ``[start, end]``
    (``end`` the row's own position) and how many of the values were
    carried from earlier batches; ``shared`` holds what several kernels of
    one push reuse (the windows' moments, a reduction that ``sum`` and
    ``mean`` both take).  ``stacks``, if given, keeps a
    :class:`CarriedStacks` per value column and ufunc from push to push of
    one key's windows of one size, ``base`` being the position of ``x[0]``
    among all the key's rows and ``column`` the value column ``x`` is."""

    x: np.ndarray
    start: np.ndarray
    end: np.ndarray
    carried: int
    shared: dict = field(default_factory=dict)
    base: int = 0
    stacks: dict | None = None
    column: int | None = None

    def reduced(self, ufunc, lift=None) -> np.ndarray:
        """:func:`reduce_windows` of every row's window (of each value
        lifted by ``lift``, an element-wise function of an array), once
        per push."""
        key = ("reduced", ufunc.__name__, lift)
        if key not in self.shared:
            stacks = None
            if self.stacks is not None:
                stacks = self.stacks.setdefault((self.column,) + key[1:], CarriedStacks(ufunc))
            self.shared[key] = reduce_windows(ufunc, self.x, self.start, self.end, self.carried, stacks, self.base,
                                              lift)
        return self.shared[key]

    @property
    def count(self) -> np.ndarray:
        return self.end - self.start + 1


# -- kernels ---------------------------------------------------------------------
def _count(rows):
    return rows.count, None


def _first(rows):
    return rows.x[rows.start], None


def _last(rows):
    return rows.x[rows.end], None


def _reduce(ufunc, rows):
    result = rows.reduced(ufunc).copy()  # the copy is this kernel's: mean reads the shared sum
    if ufunc is not np.add and rows.x.dtype.kind == "f":
        _oldest_zero(rows.x, rows.start, result)
    return result, None


def _mean(rows):
    return rows.reduced(np.add) / rows.count, None


def _logs(values: np.ndarray) -> np.ndarray:
    """The geomean's lift: each value's natural log, as a double."""
    with np.errstate(divide="ignore"):
        return np.log(values.astype(np.float64))


def _geomean(rows):
    """Rows whose value is not positive never get here (the window rejects
    them as the MTA's lift does).  A carried row's log is taken once
    more, when it moves to the front of the key's stacks, not again on
    every push."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(rows.reduced(np.add, _logs) / rows.count), None


def _spread(ddof: int, root: bool, rows):
    """The variance (``ddof`` 1: sample, 0: population) or its square root;
    null below ``ddof + 1`` rows, as the MTA's lower gives ``None``."""
    m2 = rows.shared.get("m2")
    if m2 is None:
        m2 = rows.shared["m2"] = window_moments(rows.x, rows.start, rows.end)[2]
    n = rows.count
    few = n <= ddof
    with np.errstate(divide="ignore", invalid="ignore"):
        result = m2 / np.where(few, 1, n - ddof)
    if root:
        result = np.sqrt(result)
    return result, (few if few.any() else None)


def _oldest_zero(x: np.ndarray, start: np.ndarray, result: np.ndarray) -> None:
    """A max or min of 0 is the window's oldest zero, sign included (as the
    MTA keeps the older of two equal values; NumPy keeps either): only when
    the rows hold a -0.0.  ``start`` is non-decreasing, as a push's
    windows are.  O(rows) without a result of 0, else O(rows from the
    first such window's start): not the carried rows of every push."""
    hit = np.flatnonzero(result == 0)
    if not len(hit):
        return
    first = int(start[hit[0]])
    x = x[first:]
    zeros = x == 0
    if not np.signbit(x[zeros]).any():
        return
    nearest = np.where(zeros, np.arange(len(x)), len(x))
    next_zero = np.minimum.accumulate(nearest[::-1])[::-1]  # first zero at or after each position
    result[hit] = x[next_zero[start[hit] - first]]


#: The ready aggregations the columnar engine computes (a job runs on it
#: only if it has a kernel for each of its aggregations).
KERNELS: dict[str, Callable[[Rows], tuple]] = {
    "max": partial(_reduce, np.maximum), "min": partial(_reduce, np.minimum), "count": _count,
    "first": _first, "last": _last, "sum": partial(_reduce, np.add), "mean": _mean, "geomean": _geomean,
    "variance": partial(_spread, 1, False), "stddev": partial(_spread, 1, True),
    "var_pop": partial(_spread, 0, False), "stddev_pop": partial(_spread, 0, True),
}
AGGREGATIONS = tuple(KERNELS)
#: Kernels exact only on floating-point values (an integral sum may overflow int64).
FLOAT_ONLY = ("sum", "mean")


# -- the moments monoid on arrays ----------------------------------------------------
def moments_combine(a: tuple, b: tuple) -> tuple:
    """:func:`mta.aggregators._moments_combine` element-wise, the same
    operations in the same order; where a side is empty (count 0, the
    identity) the result is exactly the other side."""
    na, ma, qa = a
    nb, mb, qb = b
    n = na + nb
    with np.errstate(all="ignore"):
        delta = mb - ma
        mean = ma + delta * nb / n
        m2 = qa + qb + delta * delta * na * nb / n
    a_empty, b_empty = na == 0, nb == 0
    return (n, np.where(a_empty, mb, np.where(b_empty, ma, mean)),
            np.where(a_empty, qb, np.where(b_empty, qa, m2)))


MOMENTS_IDENTITY = (0.0, 0.0, 0.0)


def window_moments(x: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple:
    """``(count, mean, M2)`` of every window ``x[start[i] : end[i] + 1]``.
    A value lifts to ``(1, x, 0)``, or ``(1, x, nan)`` when infinite, as
    :data:`mta.aggregators.VARIANCE` lifts it (the spread of a window
    holding an infinite value is undefined).

    Sliding windows (both ends non-decreasing, as every batch's are) go
    through the compiled Two-Stacks (:data:`mta.native.window_moments`):
    at most three combines per row amortized, in C, O(n).  Otherwise, and without the
    compiled core, :func:`window_moments_blocked` (NumPy)."""
    v = np.ascontiguousarray(x, dtype=np.float64)
    if native.window_moments is not None and len(start):
        mean, m2 = np.empty(len(start)), np.empty(len(start))
        if native.window_moments(v, np.ascontiguousarray(start, dtype=np.int64),
                                 np.ascontiguousarray(end, dtype=np.int64), mean, m2):
            return (end - start + 1).astype(np.float64), mean, m2
    return window_moments_blocked(v, start, end)


def window_moments_blocked(x: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple:
    """:func:`window_moments` for any windows, in NumPy: B-Int's aligned
    blocks (:func:`reduce_ranges_of`), O(log(longest window)) passes."""
    v = x.astype(np.float64)
    lifted = (np.ones(len(v)), v, np.where(np.isfinite(v), 0.0, np.nan))
    return reduce_ranges_of(moments_combine, lifted, start, end + 1, MOMENTS_IDENTITY)


# -- range reductions ------------------------------------------------------------------
def reduce_windows(ufunc, x: np.ndarray, start: np.ndarray, end: np.ndarray, carried: int,
                   stacks: CarriedStacks | None = None, base: int = 0, lift=None) -> np.ndarray:
    """``ufunc.reduce(x[start[i] : end[i] + 1])`` for the rows of a batch
    (of ``lift(x)`` with ``lift``, an element-wise function of an array):
    ``x`` is the carried rows then the batch's (from ``carried`` on), ``end``
    the rows' own positions, ``start`` non-decreasing, and ``ufunc``
    commutative (max, min, add).  A window that starts in the batch is
    reduced by :func:`reduce_sliding` over the batch alone.  One that
    starts among the carried rows is a suffix of them and a prefix of the
    batch: with ``stacks`` (the key's :class:`CarriedStacks`, ``base`` the
    position of ``x[0]`` among the key's rows), O(batch) plus O(1) per row
    amortized over the key's pushes, a carried row lifted again only as it
    moves to the stacks' front; without,
    the carried rows' suffixes are lifted and accumulated again, O(carried
    + batch)."""
    batch = x[carried:] if lift is None else lift(x[carried:])
    out = np.empty(len(end), dtype=batch.dtype)
    crossing = int(np.searchsorted(start, carried))  # rows [0, crossing) start among the carried rows
    with np.errstate(all="ignore"):  # inf + -inf is nan, as in Python; integers wrap
        if crossing and stacks is not None:
            out[:crossing] = stacks.crossing(x, batch, start[:crossing], end[:crossing], carried, base, lift)
        elif crossing:
            first = int(start[0])
            older = x[first:carried] if lift is None else lift(x[first:carried])
            suffix = ufunc.accumulate(older[::-1])[::-1]  # suffix[j] = x[first + j : carried], lifted
            prefix = ufunc.accumulate(batch[: int(end[crossing - 1]) + 1 - carried])
            out[:crossing] = ufunc(suffix[start[:crossing] - first], prefix[end[:crossing] - carried])
        if stacks is not None:
            stacks.pushed(batch)
    if crossing < len(end):
        out[crossing:] = reduce_sliding(ufunc, batch, start[crossing:] - carried, end[crossing:] + 1 - carried)
    return out


def reduce_sliding(ufunc, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """:func:`reduce_blocked` for ranges ``[lo[i], hi[i])`` that slide (both
    ends non-decreasing, as a batch's windows do): ``max`` and ``min`` of
    float64 or int64 values in C when the compiled core is in use
    (:data:`mta.native.window_extreme`, a monotonic deque, O(n + m), one
    pass), anything else, or ranges that do not slide, by
    :func:`reduce_blocked`."""
    if (ufunc is np.maximum or ufunc is np.minimum) and native.window_extreme is not None and len(lo) \
            and x.dtype in (np.float64, np.int64):
        out = np.empty(len(lo), dtype=x.dtype)
        if native.window_extreme(np.ascontiguousarray(x), np.ascontiguousarray(lo, dtype=np.int64),
                                 np.ascontiguousarray(hi - 1, dtype=np.int64), out, ufunc is np.maximum):
            return out
    return reduce_blocked(ufunc, x, lo, hi)


class CarriedStacks:
    """Two-Stacks (Tangwongsan et al., VLDB 2015) over a key's batches, for
    one ufunc and one window size: the windows that start among the rows
    carried from earlier batches combine a *front*, the suffix reductions
    of a run of rows accumulated once, with the *back*, the reduction of
    every row after that run up to the batch, and the batch's own prefix.
    When a window starts past the front, the back's rows become the new
    front (each row enters a front once), so a push costs O(batch) plus
    O(1) amortized per row, whatever the window's length.  Positions are
    among all of the key's rows; ``ufunc`` is commutative (max, min, add)."""

    def __init__(self, ufunc) -> None:
        self.ufunc = ufunc
        self.front = None  # front[j]: the reduction of the rows [f0 + j, f1)
        self.f0 = self.f1 = 0
        self.back = None  # the reduction of the rows [f1, the batch's first row); None: none yet

    def crossing(self, x, batch, start, end, carried: int, base: int, lift=None) -> np.ndarray:
        """The reductions of windows ``[start[i], end[i]]`` (positions in
        ``x``, whose first is the key's row ``base``) that start before the
        batch, which begins at ``x[carried]`` (``batch``: its rows, lifted
        by ``lift``).  O(rows + batch), plus the rows moved to the front,
        each lifted then."""
        op = self.ufunc
        prefix = op.accumulate(batch[: int(end[-1]) + 1 - carried])[end - carried]  # [batch start, end]
        at = start + base
        out = np.empty(len(start), dtype=batch.dtype)
        old = int(np.searchsorted(at, self.f1))  # rows [0, old) start in the front
        if old:
            tail = prefix[:old] if self.back is None else op(self.back, prefix[:old])
            out[:old] = op(self.front[at[:old] - self.f0], tail)
        if old < len(start):  # the back's rows become the front
            lo = max(self.f1, base)  # rows before base were dropped: no window reaches them
            moved = x[lo - base : carried] if lift is None else lift(x[lo - base : carried])
            self.front = op.accumulate(moved[::-1])[::-1]
            self.f0, self.f1, self.back = lo, base + carried, None
            out[old:] = op(self.front[at[old:] - self.f0], prefix[old:])
        return out

    def pushed(self, batch: np.ndarray) -> None:
        """The batch's rows join the back.  O(batch)."""
        if len(batch):
            total = self.ufunc.reduce(batch)
            self.back = total if self.back is None else self.ufunc(self.back, total)


def reduce_blocked(ufunc, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``ufunc.reduce(x[lo[i]:hi[i]])`` for non-empty ranges and a
    commutative ``ufunc`` (max, min, add), as van Herk and Gil-Werman
    compute a running max: ``x`` cut into aligned blocks of B values, B the
    longest range (at most ``len(x)``), each block accumulated from its
    start and from its end.  A range is then at most two blocks' pieces: a
    block's suffix and the next one's prefix, or one block's prefix; only a
    range inside one block that does not start at its start goes through
    :func:`reduce_ranges`, as do all if none is of the first two kinds.
    O(n + m) for n values and m ranges (plus O(k log B) for k ranges of
    the third kind): a count window of W rows never has one."""
    m = len(lo)
    if not m:
        return np.empty(0, dtype=x.dtype)
    n = len(x)
    block = max(1, min(int((hi - lo).max()), n))
    last = hi - 1
    one_block = lo // block == last // block
    head = one_block & (lo % block == 0)
    inside = one_block & ~head
    if inside.all():
        return reduce_ranges(ufunc, x, lo, hi)
    identity = _identity(ufunc, x.dtype)
    blocks = -(-n // block)
    grid = np.full(blocks * block, identity, dtype=x.dtype)
    grid[:n] = x
    grid = grid.reshape(blocks, block)
    out = np.empty(m, dtype=x.dtype)
    with np.errstate(all="ignore"):  # inf + -inf is nan, as in Python
        prefix = ufunc.accumulate(grid, axis=1).ravel()
        suffix = ufunc.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()
        two = ~one_block
        out[two] = ufunc(suffix[lo[two]], prefix[last[two]])
    out[head] = prefix[last[head]]
    if inside.any():
        out[inside] = reduce_ranges(ufunc, x, lo[inside], hi[inside], identity)
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
    ``ufunc`` (combined in order, so it need not be commutative) and its
    ``identity`` (found for ``np.maximum``, ``np.minimum`` and ``np.add``)."""
    if identity is None:
        identity = _identity(ufunc, x.dtype)
    return reduce_ranges_of(partial(_apply, ufunc), (x,), lo, hi, (identity,))[0]


def _apply(ufunc, a: tuple, b: tuple) -> tuple:
    return (ufunc(a[0], b[0]),)


def reduce_ranges_of(combine, xs: tuple, lo: np.ndarray, hi: np.ndarray, identity: tuple) -> tuple:
    """The monoid reduction of ``xs[lo[i]:hi[i]]`` for every i, where a
    monoid value is a tuple of arrays' elements (``xs``: one array per
    component), ``combine(a, b)`` combines tuples of arrays element-wise
    (associative, not necessarily commutative: blocks are combined in
    order) and ``identity`` is its identity, one scalar per component.
    B-Int's decomposition into aligned blocks, O(log(max(hi - lo)))
    passes over all the ranges at once."""
    m = len(lo)
    left = tuple(np.full(m, e, dtype=x.dtype) for e, x in zip(identity, xs))
    right = tuple(c.copy() for c in left)
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    level = xs
    with np.errstate(all="ignore"):  # inf + -inf is nan, as in Python
        while True:
            take = (lo < hi) & (lo & 1).astype(bool)  # an odd left end: its block, then move right
            if take.any():
                at = np.where(take, lo, 0)
                left = _where(take, combine(left, tuple(c[at] for c in level)), left)
                lo += take
            take = (lo < hi) & (hi & 1).astype(bool)  # an odd right end: its block, then move left
            if take.any():
                hi -= take
                at = np.where(take, hi, 0)
                right = _where(take, combine(tuple(c[at] for c in level), right), right)
            lo >>= 1
            hi >>= 1
            if not (lo < hi).any():
                return combine(left, right)
            pairs = len(level[0]) >> 1
            level = combine(tuple(c[0 : 2 * pairs : 2] for c in level), tuple(c[1 : 2 * pairs : 2] for c in level))


def _where(take: np.ndarray, new: tuple, old: tuple) -> tuple:
    return tuple(np.where(take, n, o) for n, o in zip(new, old))

"""Which rows a row's window holds: the two frames of ``sliding_window``.

Both frames order a key's rows by ``(time, arrival)`` (arrival: the input
order in batch, the order within a micro-batch in streaming) and give one
output per row.  They differ only for ``range=R``:

* ``frame="default"``: the window of row i at time t holds the rows at or
  before it in that order with time in ``(t - R, t]``; rows of equal time
  come in arrival order, each seeing the ones that arrived before it (as
  pandas' ``rolling("R")`` does);
* ``frame="sql"``: the rows with time in ``[t - R, t]``, all of them: rows
  of equal time are peers and share one output, the aggregate after the
  last of them, as Spark SQL's ``RANGE BETWEEN R PRECEDING AND CURRENT
  ROW`` (``Window.orderBy(t).rangeBetween(-R, 0)``) gives.

For ``rows=N`` both are the newest N rows in ``(time, arrival)`` order,
``rowsBetween(-(N - 1), 0)`` over that order.

The edge ``t - R`` is decided as ``rangeBetween`` decides it over the time
column: in integer microseconds for one that counts them (a timestamp, a
date, a decimal of at most 6 places), in doubles for a number of seconds
(:func:`range_edge`).

``ties=`` says what orders rows of equal time (:data:`TIES`).  ``"input"``
(the default): their arrival, so a job's output depends on its input
alone; a batch plan numbers the rows before the shuffle and sorts on
``(key, time, arrival)``.  ``"any"``: whatever order the shuffle leaves
them in, as Spark's window functions and pandas' ``sort_values`` +
``rolling`` in ``applyInPandas`` do; a batch plan then sorts on ``(key,
time)`` alone, one column less through the shuffle and sort (its cost:
docs/benchmarks-spark.md).  With distinct times in each key the outputs
are the same either way; with ties, whatever depends on their order can
differ from run to run: ``rows=N``, the default frame's ``range=``,
``first`` and ``last``, floating sums, means and spreads (cancellation can
make that more than the last bits), the sign of a zero ``max`` or
``min``, user aggregators, even among ``frame="sql"`` peers and in
``slide=`` windows; ``count`` and an integral ``sum`` never do.
Streaming orders a micro-batch's ties by arrival at no cost.

Each rule is written once here: :func:`range_edge` (the lower edge, for
every engine's eviction) and :func:`last_peers` (the peers, applied to
every engine's results by :class:`spark_ops.key_window.RowWindow`).  A
push of rows into a key window must then end where a time ends: the batch
plan holds back a trailing run of equal times until the next Arrow batch
shows it complete, and a streaming row whose time equals one whose outputs
an earlier micro-batch gave is a bad row (:func:`spark_ops.rows.check_row`).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

#: What ``frame=`` takes.
FRAMES = ("default", "sql")
#: What ``ties=`` takes: rows of equal time in input order, or in any order.
TIES = ("input", "any")


def refused(frame: str, ties: str, policy) -> str | None:
    """Why ``frame=`` and ``ties=`` cannot be taken (with ``policy=``, a
    custom policy or ``None``), or ``None``."""
    if frame not in FRAMES:
        return f"frame must be one of {FRAMES}, got {frame!r}"
    if frame != "default" and policy is not None:
        return (f"frame={frame!r} is for range= and rows=; a custom policy decides its window itself, so it "
                "takes the default frame")
    if not isinstance(ties, str) or ties not in TIES:
        return (f"ties must be one of {TIES} (rows of equal time in input order, or in whatever order the "
                f"shuffle leaves them), got {ties!r}")
    return None


def range_edge(span: float, frame: str, micros: bool = False) -> Callable:
    """``edge(t)``: the window of a row at time ``t`` holds the rows with
    time ``> edge(t)`` (and ``<= t``).  ``t`` is a float or a NumPy array of
    them (double seconds, as every window takes its times).

    ``micros``: the time column counts whole microseconds (a timestamp, a
    date, a decimal of at most 6 decimal places, :func:`spark_ops.plan.micro_time`), and
    its double seconds are ``us / 10^6`` rounded once: the edge is then decided
    in integer microseconds, as Spark SQL's ``rangeBetween`` over such a
    column is, ``span`` taken in whole microseconds (:func:`span_micros`);
    exact for times within :data:`MICRO_EXACT` seconds of 1970.  Else
    (a number of seconds), in doubles, as Spark's over a double column:
    ``"default"``: ``t - span``; ``"sql"``: the largest double below ``t -
    span``, so ``> edge(t)`` is exactly ``>= t - span`` with ``t - span``
    rounded as Spark rounds a double frame's bound."""
    def in_doubles(t):
        return np.nextafter(t - span, -np.inf) if frame == "sql" else t - span

    return _micro_edge(span_micros(span), frame, in_doubles) if micros else in_doubles


#: Double seconds tell every microsecond apart, and map back to it, within
#: 2^33 seconds of 1970 (the years 1698 to 2242): the spacing of doubles
#: there is below a microsecond.
MICRO_EXACT = 2.0 ** 33


def span_micros(span: float) -> int:
    """A ``range=`` of ``span`` seconds in whole microseconds, the finest
    a timestamp tells apart (a duration's text is exact to them; a number
    is rounded to the nearest); ``ValueError`` for a span that rounds to
    none (:func:`spark_ops.durations.micros`)."""
    from .durations import micros

    return micros(span, "range on a timestamp, date or decimal time column")


def _micro_edge(span_us: int, frame: str, in_doubles: Callable) -> Callable:
    """:func:`range_edge` for times counting microseconds.  A row at ``s_us``
    is in the window of one at ``t_us`` when ``s_us >= low_us``, ``low_us =
    t_us - span_us`` (``+ 1`` in the default frame, whose edge is open).
    Rounding ``us / 10^6`` to a double keeps the order of microseconds and,
    within :data:`MICRO_EXACT`, tells them apart, so that is ``s >=
    fl(low_us / 10^6)``: the edge is the double below it.  ``t_us`` is
    ``t * 10^6`` rounded, corrected by one where that product's own rounding
    lands on the neighbour (from 2^31 seconds on).  Beyond :data:`MICRO_EXACT`
    (and for an infinite time), where doubles no longer tell microseconds
    apart, the edge is ``in_doubles(t)``, as for a number of seconds."""
    drop = float(span_us - (1 if frame == "default" else 0))

    def edge(t):
        if isinstance(t, np.ndarray):
            us = np.rint(t * 1e6)
            us = np.where((us - 1) / 1e6 == t, us - 1, np.where((us + 1) / 1e6 == t, us + 1, us))
            exact = np.nextafter((us - drop) / 1e6, -np.inf)
            return np.where(np.abs(t) < MICRO_EXACT, exact, in_doubles(t))
        if not abs(t) < MICRO_EXACT:  # NaN and infinities too
            return in_doubles(t)
        us = round(t * 1e6)
        us = us - 1 if (us - 1) / 1e6 == t else us + 1 if (us + 1) / 1e6 == t else us
        return math.nextafter((us - drop) / 1e6, -math.inf)
    return edge


def last_peers(times: np.ndarray) -> np.ndarray | None:
    """Per row of non-decreasing ``times``, the position of the last row
    with its time (where the row's peers' shared output is), or ``None``
    when no two rows share a time.  O(n)."""
    n = len(times)
    if n < 2:
        return None
    tied = times[1:] == times[:-1]
    if not tied.any():
        return None
    ends = np.flatnonzero(np.append(~tied, True))  # the last row of each time
    group = np.concatenate(([0], np.cumsum(~tied)))  # each row's time, counted from 0
    return ends[group]


def trailing_peers(keys, times) -> int:
    """Where the run of rows sharing the last row's key and time starts in
    Arrow arrays ``keys`` (the key column, or a list of a composite key's
    columns) and ``times`` (rows sorted by key, then time); ``len`` when
    the last row's key or time is null, which no later row can share.  The
    batch plan holds these rows back (see the module)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = (keys if isinstance(keys, list) else [keys]) + [times]
    n = len(times)
    if not n or not all(c[n - 1].is_valid for c in columns):
        return n
    try:
        same = None
        for c in columns:
            equal = pc.equal(c, c[n - 1])
            same = equal if same is None else pc.and_(same, equal)
    except pa.ArrowNotImplementedError:  # key types Arrow cannot compare: in Python, from the end
        last, start = [c[n - 1].as_py() for c in columns], n - 1
        while start and [c[start - 1].as_py() for c in columns] == last:
            start -= 1
        return start
    other = pc.indices_nonzero(pc.invert(pc.fill_null(same, False)))
    return int(other[-1].as_py()) + 1 if len(other) else 0

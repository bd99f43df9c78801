"""Store round trips of a session's window jobs, counted where they happen.

The windows' level queues are read and written on the executors, each
process through its pooled store (:func:`stores.pooled_store`), whose
:class:`stores.stats.StoreStats` counts every request.  A plan that keeps
windows in a store wraps the work of each partition (batch) or key call
(streaming) in :func:`counted`, which adds that work's requests to a Spark
accumulator of the session; :func:`round_trips` reads the total on the
driver (``mta-spark`` prints it in its summary).  As with any accumulator
updated in a transformation, a task that runs again (a retry, a speculative
attempt) counts again: the figure is the traffic the store served.
"""

from __future__ import annotations

from contextlib import contextmanager

import stores

from .counters import SessionCounter

__all__ = ["accumulator", "counted", "round_trips"]

_ROUND_TRIPS = SessionCounter()


def accumulator(spark):
    """The store round-trip accumulator of ``spark``'s context (driver side)."""
    return _ROUND_TRIPS.accumulator(spark)


def round_trips(spark) -> int:
    """The store round trips of every window job run in ``spark``'s context
    so far (0 before the first job with a store)."""
    return _ROUND_TRIPS.value(spark)


@contextmanager
def counted(count, spec):
    """On an executor: add the requests this process's store for
    ``spec.store`` serves inside the block to ``count`` (an accumulator from
    :func:`accumulator`; nothing is counted when ``count`` is ``None`` or the
    job has no store)."""
    if count is None or not spec.store:
        yield
        return
    stats = stores.pooled_store(spec.store, spec.store_options).stats
    before = stats.round_trips
    try:
        yield
    finally:
        count.add(stats.round_trips - before)

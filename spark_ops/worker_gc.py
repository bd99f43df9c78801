"""The cyclic garbage collector in a reused PySpark worker.

A reused Python worker (``spark.python.worker.reuse``, Spark's default)
runs a full ``gc.collect()`` after every task (``pyspark/daemon.py``), and
a full collection walks every object the process tracks: pandas, pyarrow,
PySpark's and this project's modules, the stores' caches.  A streaming
query runs two Python tasks per partition and micro-batch, so with a
thousand keys per micro-batch those walks are a large share of the Python
time per key (``docs/benchmarks-spark.md``, streaming per key).

The functions that run the windows (a batch partition's, a streaming
task's, a key's in the state API) are :func:`settling`: once the first of
them in a process has produced its output, what the worker holds then
(the modules its plan imported, the stores' caches, the pooled stores) is
collected once and moved to the collector's permanent generation
(``gc.freeze``, the CPython documentation's remedy for long-lived heaps),
so the collections after later tasks walk only what came after.  Frozen
objects are still freed by reference counting; only a reference cycle
among them that becomes garbage later is never collected: the first
task's own closure at most, since everything else frozen is long-lived
by then.  Freezing at every task would leak every task's closure (a
user's policy class pickled by value is a cycle), so it is done again
only when the process has imported modules since (a later job of another
kind, a store's client, pandas for a user's own UDF): their objects are
as long-lived, and otherwise every later collection would walk them (a
few tens of thousands of objects, tens of milliseconds per task on the
benchmark machine); one closure at most per such import.  A worker that
is not reused runs one task and exits:
nothing to gain, so nothing is done (a worker run without PySpark's
daemon, ``spark.python.use.daemon=false``, with reuse on, still makes the
one collection, needlessly: the daemon is Spark's default on Linux).

The same functions free the level queues' graveyard when they end
(:func:`mta.level_queue.reclaim_all`): the elements a window dropped wait
there to be freed a few per later append, which a worker whose next tasks
append little would never make, and every full collection after every
later task would walk them.
"""

from __future__ import annotations

import functools
import gc
import os
import sys

from mta.level_queue import reclaim_all

_settled = False
_modules_frozen = 0  # len(sys.modules) when the heap was last frozen


def settle() -> None:
    """Freeze what this reused worker holds: once per process, and again
    after it imported modules.  One full collection (O(objects tracked))
    each time, else O(1)."""
    global _settled, _modules_frozen
    if _settled and len(sys.modules) == _modules_frozen:
        return
    _settled, _modules_frozen = True, len(sys.modules)
    if os.environ.get("SPARK_REUSE_WORKER") and gc.isenabled():
        gc.collect()
        gc.freeze()


def settling(fn):
    """``fn``, a function Spark calls in a Python worker that returns an
    iterator (a ``mapInArrow`` or ``applyInPandasWithState`` function),
    freeing the graveyard when it ends and calling :func:`settle` once its
    output is consumed."""
    @functools.wraps(fn)
    def settled(*args):
        try:
            yield from fn(*args)
        finally:
            reclaim_all()
        settle()

    return settled

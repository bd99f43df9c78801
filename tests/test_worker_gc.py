"""spark_ops.worker_gc: a reused PySpark worker's heap is frozen once.

* In a process flagged as a reused worker (``SPARK_REUSE_WORKER``, set by
  Spark's Python daemon), a :func:`settling` function's output comes
  unchanged and, once consumed (not before), the first :func:`settle`
  collects garbage cycles (a cycle dropped before it is freed, not
  frozen), then freezes what is left; later calls do not collect again.  Without the flag, or
  with the collector disabled, nothing is frozen.  Each case runs in a
  child process, so the test process's own collector is left alone.
* In a real Spark session, the workers that ran a ``sliding_window`` job
  have a frozen heap afterwards, and the job's output is the brute-force
  oracle's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.spark_fixtures import ship_by_value

ship_by_value(sys.modules[__name__])

_CHILD = r"""
import gc, json, sys, weakref
if sys.argv[1] == "disabled":
    gc.disable()
from spark_ops import worker_gc

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a garbage cycle once dropped
dead = weakref.ref(a)
del a, b
kept = [Node() for _ in range(100)]
full = gc.get_stats()[2]["collections"]
wrapped = worker_gc.settling(lambda x, y: iter([x + y, x * y]))
output = wrapped(2, 3)
started = next(output)
before = gc.get_freeze_count()  # the output not consumed yet
result = [started, *output]
first = {"frozen": gc.get_freeze_count(), "frozen_before_the_end": before, "cycle_freed": dead() is None,
         "full_collections": gc.get_stats()[2]["collections"] - full}
worker_gc.settle()
print(json.dumps({"result": result, "first": first, "name": wrapped.__name__,
                  "second_full_collections": gc.get_stats()[2]["collections"] - full - first["full_collections"]}))
"""


def _child(case: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REUSE_WORKER"}
    if case != "not reused":
        env["SPARK_REUSE_WORKER"] = "1"
    done = subprocess.run([sys.executable, "-c", _CHILD, case], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_reused_worker_collects_then_freezes_once():
    out = _child("reused")
    assert out["result"] == [5, 6] and out["name"] == "<lambda>"
    first = out["first"]
    assert first["frozen_before_the_end"] == 0, first  # frozen once the output is consumed
    assert first["full_collections"] == 1 and first["cycle_freed"], first  # collected before anything is frozen
    assert first["frozen"] >= 100, first  # what was alive, the list's nodes among it
    assert out["second_full_collections"] == 0, out


@pytest.mark.parametrize("case", ["not reused", "disabled"])
def test_nothing_is_frozen_outside_a_reused_worker_or_with_the_collector_off(case):
    out = _child(case)
    assert out["result"] == [5, 6]
    assert out["first"]["frozen"] == 0 and out["first"]["full_collections"] == 0, out


def _freeze_counts(batches):
    import gc
    import os

    import pyarrow as pa

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "frozen": [gc.get_freeze_count()]})


def test_workers_that_ran_a_job_have_their_heap_frozen(spark):
    """A batch ``sliding_window`` job (every count against brute force),
    then a job over more partitions than the session has cores: the
    workers it lands on are the reused ones, and one at least holds a
    frozen heap."""
    from spark_ops import sliding_window

    rows = [(k, float(t), float(t % 7)) for k in range(6) for t in range(40)]
    df = spark.createDataFrame(rows, "k long, t double, v double").repartition(4)
    out = sliding_window(df, key="k", time="t", value="v", aggs=["count"], range=10).collect()
    assert sorted((r.k, r.t, r["count"]) for r in out) == \
        sorted((k, t, sum(1 for kk, tt, _ in rows if kk == k and t - 10 < tt <= t)) for k, t, _ in rows)
    reports = spark.range(0, 8, 1, 8).mapInArrow(_freeze_counts, "pid long, frozen long").collect()
    assert any(r.frozen > 0 for r in reports), reports

"""spark_ops.worker_gc: a reused PySpark worker's heap is frozen once.

* In a process flagged as a reused worker (``SPARK_REUSE_WORKER``, set by
  Spark's Python daemon), a :func:`settling` function's output comes
  unchanged and, once consumed (not before), the first :func:`settle`
  collects garbage cycles (a cycle dropped before it is freed, not
  frozen), then freezes what is left; later calls do not collect again
  unless a module was imported since (then once).  Without the flag, or
  with the collector disabled, nothing is frozen.  Each case runs in a
  child process, so the test process's own collector is left alone.
* In a real Spark session, the workers that ran a ``sliding_window`` job
  have a frozen heap afterwards, and the job's output is the brute-force
  oracle's.
* A settling function frees the level queues' graveyard when it ends,
  however it ends; in a real Spark session, no worker holds a grave after a
  time-window job on the MTA engine whose times queue dropped elements.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from tests.spark_fixtures import session_conf, ship_by_value

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
second = gc.get_stats()[2]["collections"] - full - first["full_collections"]
was_imported = "statistics" in sys.modules
import statistics  # a module imported after the freeze: its objects are frozen at the next settle
full, frozen = gc.get_stats()[2]["collections"], gc.get_freeze_count()
worker_gc.settle()
imported = {"was_imported": was_imported, "full_collections": gc.get_stats()[2]["collections"] - full,
            "frozen_more": gc.get_freeze_count() - frozen}
full = gc.get_stats()[2]["collections"]
worker_gc.settle()
imported["full_collections_after"] = gc.get_stats()[2]["collections"] - full
print(json.dumps({"result": result, "first": first, "name": wrapped.__name__, "second_full_collections": second,
                  "imported": imported}))
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
    imported = out["imported"]  # modules imported since: frozen at the next settle, once
    assert not imported["was_imported"] and imported["full_collections"] == 1, imported
    assert imported["frozen_more"] >= 100 and imported["full_collections_after"] == 0, imported


@pytest.mark.parametrize("case", ["not reused", "disabled"])
def test_nothing_is_frozen_outside_a_reused_worker_or_with_the_collector_off(case):
    out = _child(case)
    assert out["result"] == [5, 6]
    assert out["first"]["frozen"] == 0 and out["first"]["full_collections"] == 0, out
    assert out["imported"]["frozen_more"] == 0 and out["imported"]["full_collections"] == 0, out


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


def _graves(batches):
    import os

    import pyarrow as pa

    from mta.level_queue import graveyard_size

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "graves": [graveyard_size()]})


def test_a_settling_function_frees_the_graveyard_however_it_ends(monkeypatch):
    from mta import level_queue
    from spark_ops import worker_gc

    monkeypatch.setattr(worker_gc, "settle", lambda: None)  # nothing frozen in the test process

    def dropping(fail):
        q = level_queue.MemoryLevelQueue()
        q.extend(list(range(5000)))
        q.discard()  # the level removed: its list waits in the graveyard
        yield len(q)
        if fail:
            raise RuntimeError("the task failed")

    for fail in (False, True):
        monkeypatch.setattr(level_queue, "_graveyard", [])
        output = worker_gc.settling(dropping)(fail)
        assert next(output) == 0 and level_queue.graveyard_size() == 5000
        with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
            assert list(output) == []
        assert level_queue.graveyard_size() == 0


def test_no_worker_holds_a_grave_after_a_time_window_job(spark):
    """One key of 4,000 rows in Arrow batches of 250 through a 1,500-second
    window on the MTA engine: the pushes drop times from the head of the
    window's times queue (compaction moves its old lists to the graveyard),
    and the output is brute force's; afterwards every worker reports an
    empty graveyard."""
    from spark_ops import sliding_window

    n, width = 4_000, 1_500
    df = spark.range(0, n, 1, 2).selectExpr("0L AS k", "CAST(id AS DOUBLE) AS t", "CAST(id % 13 AS DOUBLE) AS v")
    with session_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": "250"}):
        out = sliding_window(df, key="k", time="t", value="v", aggs=["count"], range=width, engine="amta")
        got = sorted((r.t, r["count"]) for r in out.select("t", "count").collect())
    assert got == [(float(t), min(t + 1, width)) for t in range(n)]
    reports = spark.range(0, 8, 1, 8).mapInArrow(_graves, "pid long, graves long").collect()
    assert all(r.graves == 0 for r in reports), reports

"""The streaming plan of a query without a watermark or ``expire_after``:
no Spark state, one Python call per task.

``repartition`` by key brings each key's rows of a micro-batch to one task,
and one ``mapInArrow`` call takes the task's whole partition: it groups the
rows by key and runs each key's window, resumed from the store, over them.
Against a state-API plan (:mod:`spark_ops.streaming`) this saves, per key
and micro-batch, the state API's pandas hand-over and its Spark state, the
largest part of a key's cost when a micro-batch brings it few rows
(``docs/benchmarks-spark.md``, streaming per key); rows stay Arrow from
end to end, so every value stays exact.

What Spark's state held, the store holds: each key's window is opened with
``resume=stores.Before(query id, micro-batch id)`` (both from the task's
local properties), which resumes the checkpoint of the latest earlier
micro-batch of this query, and every checkpoint carries the key's newest
time and the job's fingerprint as its label (:mod:`stores.steps`).  A
micro-batch replayed after a failure therefore resumes what the last
committed one left, however often it is replayed; an attempt running
beside another is fenced, and a stale attempt of an older micro-batch is
refused.  Each task's progress record (:mod:`stores.runs`), read before
its keys and stamped after them, makes a store that lost or rolled back
the windows an error rather than a restart from empty or from older state.
The records hold only if every micro-batch runs the same tasks, so the
shuffle names its count, ``spark.sql.shuffle.partitions`` as read when
the plan is built: adaptive execution coalesces a shuffle by key alone
into as many tasks as each micro-batch's size calls for, never one with
a count, and Spark restores no count from the checkpoint location, so
the records keep it (a restart with another count fails naming both).
Rows are ordered within a key by ``(time, arrival)``, the arrival number
given before the shuffle
(:func:`spark_ops.passthrough.number_rows`), so a replay sees them in the
same order.

The task's windows are not claimed, written and synced one by one: a
:class:`stores.Batch` told the task's windows claims them ahead, many in
one round trip, and its commit writes their checkpoints together (where
the store pipelines them: the file store, standalone Redis;
:mod:`stores.batch`); one ``Store.sync()``
makes them durable before the output rows they stand behind leave the
task (one fsync per task on the file store).  A task
holds its partition's rows of one micro-batch in memory (Arrow) while it
runs their keys.
"""

from __future__ import annotations

from typing import Iterator

import stores

from . import passthrough, traffic, worker_gc
from .names import map_in_arrow
from .plan import ARRIVAL, INTERNAL, ROW_ORDER, TIME, column, output_arrow_schema, output_schema, with_time_and_value
from .spec import SlidingWindowError, WindowSpec
from .streaming import _check_job, _pushed, key_value, micro_batch
from .windows import open_key_window, window_names


def task_streaming_plan(df, spec: WindowSpec, run: str):
    """``df`` with the windows' output columns; ``run``: the query's name."""
    from pyspark.sql.types import LongType, StructField, StructType

    ordered = with_time_and_value(df, spec)
    schema = output_schema(ordered, spec)
    target = output_arrow_schema(df.sparkSession, schema)
    passed = [c for c in ordered.columns if c not in INTERNAL]
    numbered = map_in_arrow(ordered, passthrough.number_rows,
                            StructType(ordered.schema.fields + [StructField(ARRIVAL, LongType(), False)]))
    group_keys = passthrough.GroupKeys(ordered.schema, list(spec.keys))
    tasks = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    windows = task_windows(spec, run, passed, group_keys, target, traffic.accumulator(df.sparkSession), tasks)
    shuffled = numbered.repartition(tasks, *[column(c) for c in spec.keys])
    return map_in_arrow(shuffled, worker_gc.settling(windows), schema)


def task_windows(spec: WindowSpec, run: str, passed: list[str], group_keys: passthrough.GroupKeys, target,
                 count=None, tasks: int | None = None):
    """The ``mapInArrow`` function of a task, one of ``tasks`` of each
    micro-batch: every key of its partition through its window, resumed as
    of before this micro-batch and checkpointed after its rows.  A null or
    NaN key's rows are rejected without a window (:func:`open_key_window`
    opens none, :func:`window_names` names none)."""
    fingerprint = spec.fingerprint()

    def windows_of_task(batches: Iterator) -> Iterator:
        import pyarrow as pa

        query, step, partition = _task()
        batches = list(batches)
        rows = pa.Table.from_batches(batches) if batches else None
        with traffic.counted(count, spec):
            store = stores.pooled_store(spec.store, spec.store_options)
            progress = stores.check_run(store, spec.run_record(run, partition), query, step, tasks=tasks)
            before = stores.Before(query, step)
            batch = stores.Batch(store)
            keys = [(key_value(spec, key), key_rows) for key, key_rows in _by_key(rows, group_keys)]
            batch.expect([name for k, _ in keys for name in window_names(spec, k, run)])
            results, held = [], 0
            for k, key_rows in keys:
                window = open_key_window(spec, k, run, streaming=True, resume=before, durable=False, batch=batch)
                try:
                    job, newest = window.resumed_label or (None, None)
                    _check_job(spec, k, job, fingerprint)
                    window.newest = newest
                    results.append(_pushed(window, key_rows, None, spec, passed))
                    window.checkpoint([fingerprint, window.newest])
                finally:
                    window.close()
                held += results[-1].num_rows
                if batch.waiting >= stores.batch.CHUNK:  # a waiting checkpoint holds its record
                    batch.commit()
                if held >= _OUTPUT_ROWS:
                    yield from _synced(store, batch, results, target)
                    results, held = [], 0
            batch.commit()
            stores.finish_run(store, query, step, progress)  # after every checkpoint, before the last sync
            yield from _synced(store, batch, results, target)

    return windows_of_task


#: Output rows a task holds before it hands them to Spark (after a sync):
#: many keys' rows per Arrow batch, and one disk sync per so many rows.
_OUTPUT_ROWS = 65536


def _synced(store, batch: stores.Batch, results: list, target) -> Iterator:
    """The output tables ``results`` as record batches of the schema
    ``target``, once the checkpoints made for them are written and
    durable: the batch committed and the store synced first (no output
    leaves the task ahead of the checkpoints behind it).  Each key's table is cast first: a user aggregation's column
    may come out as another type for each key, null for all-null."""
    import pyarrow as pa

    batch.commit()
    store.sync()
    if results:
        yield from pa.concat_tables([passthrough.conform(r, target) for r in results]).combine_chunks().to_batches()


_GROUP = "__mta_group"


def _by_key(rows, group_keys: passthrough.GroupKeys):
    """``(key values, rows)`` per key of the table ``rows``, each key's rows
    in ``(time, arrival)`` order (a null or NaN time last, as
    :func:`spark_ops.streaming._in_order` places it): the key's column values
    as the state API hands them (:meth:`GroupKeys.value`).  One sort and
    one take of the whole table, then a slice per key: O(n log n)."""
    from itertools import chain

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows is None or rows.num_rows == 0:
        return
    groups = passthrough.key_groups(rows, group_keys.keys)
    group_of = np.empty(rows.num_rows, np.int64)
    group_of[np.fromiter(chain.from_iterable(groups), np.int64, rows.num_rows)] = \
        np.repeat(np.arange(len(groups), dtype=np.int64), [len(g) for g in groups])
    order = pc.sort_indices(pa.table({_GROUP: group_of, TIME: rows.column(TIME), ARRIVAL: rows.column(ARRIVAL)}),
                            [(_GROUP, "ascending")] + ROW_ORDER)
    grouped, start = rows.take(order), 0
    for group in groups:
        key_rows = grouped.slice(start, len(group))
        start += len(group)
        yield group_keys.value(passthrough.first_key(key_rows, group_keys)), key_rows


def _task() -> tuple[str, int, int]:
    """The streaming query's id, the micro-batch's and the task's partition,
    as Spark sets them on the tasks of a micro-batch."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query = context.getLocalProperty("sql.streaming.queryId") if context else None
    step = micro_batch()
    if not query or step is None:
        raise SlidingWindowError("a streaming sliding_window's task ran outside a streaming query's micro-batch "
                                 "(no query or batch id in its Spark task properties)")
    return query, step, context.partitionId()

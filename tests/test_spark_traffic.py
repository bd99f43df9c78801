"""Store round trips of window jobs: counted on the executors (a Spark
accumulator, :mod:`spark_ops.traffic`), summed on the driver and printed in
``mta-spark run``'s summary.

The oracle replays the job's windows in this process, key by key in time
order through the same window class with a fresh store of the same kind,
and counts the requests that store served: the plan must report exactly
that many (each key's rows are one Arrow batch there, as in the replay; a
streaming task's keys share one :class:`stores.Batch` in both).
"""

from __future__ import annotations

import os
import random
import re
import sys

import pytest

import stores
from spark_ops import cli, sliding_window, traffic
from spark_ops.spec import WindowSpec
from spark_ops.windows import open_key_window, window_names
from tests.spark_fixtures import (SCHEMA, as_tuples, assert_outputs, expected, random_rounds, random_rows, read_sink,
                                  run_available_now, ship_by_value, stream_source, write_parquet)

ship_by_value(sys.modules[__name__])


def replayed_round_trips(data, store_url: str, *, streaming: bool = False, tasks=None, **job) -> int:
    """``tasks``: a streaming micro-batch's tasks, each a list of its keys:
    each task reads its progress record (:func:`stores.check_run`) before
    its keys, opens their windows through one :class:`stores.Batch` told
    them in advance (claims and checkpoints sent together where the store
    pipelines windows), and commits it, stamps the record
    (:func:`stores.finish_run`) and syncs the store
    (:meth:`stores.Store.sync`) after them."""
    import pyarrow as pa

    spec = WindowSpec.build(key="k", time="t", value="v", store=store_url, **job)
    store = stores.pooled_store(store_url)
    before = store.stats.round_trips
    by_key: dict = {}
    for arrival, r in enumerate(data):
        by_key.setdefault(r["k"], []).append((r["t"], arrival, r["v"]))

    def replay(key, batch=None):
        items = sorted(by_key[key])
        window = open_key_window(spec, key, "replay", streaming=streaming,
                                 **({} if batch is None else dict(durable=False, batch=batch)))
        try:
            window.push(pa.array([t for t, _, _ in items]), pa.array([v for _, _, v in items]), None)
            if streaming:
                window.checkpoint()
        finally:
            window.close()

    if tasks is None:
        for key in by_key:
            replay(key)
    for task, keys in enumerate(tasks or []):
        progress = stores.check_run(store, f"replay/~task-{task}", "replay", 0)
        batch = stores.Batch(store)
        batch.expect([name for key in keys for name in window_names(spec, key, "replay")])
        for key in keys:
            replay(key, batch)
        batch.commit()
        stores.finish_run(store, "replay", 0, progress)
        store.sync()
    return store.stats.round_trips - before


def keys_by_task(spark, keys, tasks: int) -> list[list]:
    """The keys of each of the ``tasks`` partitions Spark's repartition by
    key gives them (as the streaming plan's), sorted as a task takes them."""
    from pyspark.sql import functions as F

    found = spark.createDataFrame([(k,) for k in keys], "k string").repartition(tasks, "k") \
        .select("k", F.spark_partition_id().alias("p")).collect()
    return [sorted(r.k for r in found if r.p == task) for task in range(tasks)]


@pytest.mark.parametrize("job", [dict(aggs=["max", "mean"], range=7.0, engine="amta", buffer_size=2, cache_size=2),
                                 dict(aggs=["sum"], rows=5, engine="lmta", buffer_size=3, cache_size=1),
                                 dict(aggs=["max"], range=[3.0, 9.0], engine="amta", buffer_size=2, cache_size=2)])
def test_batch_job_counts_the_round_trips_its_windows_make(spark, tmp_path, job):
    rows = random_rows(random.Random(3), keys=12, per_key=(10, 80))
    df = spark.createDataFrame(as_tuples(rows), SCHEMA)
    before = traffic.round_trips(spark)
    sliding_window(df, key="k", time="t", value="v", store=f"file://{tmp_path}/a", **job).collect()
    counted = traffic.round_trips(spark) - before
    want = replayed_round_trips(rows, f"file://{tmp_path}/b", **job)
    assert want > len({r["k"] for r in rows})  # every key's window read and wrote the store
    assert counted == want


def test_streaming_micro_batch_counts_the_round_trips_of_its_keys(spark, tmp_path):
    """One micro-batch (each key's rows in one call): the windows stay in
    the store with a checkpoint, every task reads and stamps its progress
    record; the count equals the replay's."""
    rows = random_rows(random.Random(6), keys=8, per_key=(10, 60))
    write_parquet(str(tmp_path / "in"), rows)
    job = dict(aggs=["max", "count"], range=6.0, buffer_size=2, cache_size=2)
    out = sliding_window(stream_source(spark, str(tmp_path / "in")), key="k", time="t", value="v",
                         store=f"file://{tmp_path}/a", name="traffic", **job)
    before = traffic.round_trips(spark)
    run_available_now(out, str(tmp_path / "out"), str(tmp_path / "ckpt"))
    counted = traffic.round_trips(spark) - before
    tasks = int(spark.conf.get("spark.sql.shuffle.partitions"))  # the plan's repartition by key
    assert counted == replayed_round_trips(rows, f"file://{tmp_path}/b", streaming=True,
                                           tasks=keys_by_task(spark, {r["k"] for r in rows}, tasks), **job) > 0


def test_streaming_on_redis_sends_a_tasks_windows_requests_together(spark, tmp_path, redis_url):
    """Two micro-batches of 40 keys on standalone Redis: the second
    resumes every key's window, yet makes fewer store round trips than it
    has keys (a window on its own makes at least two: its claim and its
    checkpoint), since each task claims its keys' windows, reads their
    heads and writes their checkpoints together (:class:`stores.Batch`);
    the outputs equal the brute force's."""
    rounds = random_rounds(random.Random(9), 2, keys=40, per_key=(30, 60))
    source, sink, ckpt = (str(tmp_path / d) for d in ("in", "out", "ckpt"))
    os.makedirs(source)
    aggs = ["max", "count"]
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=aggs, range=6.0,
                         store=redis_url, name="together")
    counted = []
    for batch in rounds:
        write_parquet(source, batch)
        before = traffic.round_trips(spark)
        run_available_now(out, sink, ckpt)
        counted.append(traffic.round_trips(spark) - before)
    keys = len({r["k"] for r in rounds[1]})
    assert keys == 40 and 0 < counted[1] < keys
    rows = rounds[0] + rounds[1]
    assert_outputs(read_sink(spark, sink), rows, expected(rows, aggs, range=6.0), aggs)


def test_columnar_job_with_a_store_makes_no_round_trips(spark, tmp_path):
    df = spark.createDataFrame(as_tuples(random_rows(random.Random(4), keys=4)), SCHEMA)
    before = traffic.round_trips(spark)
    sliding_window(df, key="k", time="t", value="v", aggs=["max"], range=5.0, store=f"file://{tmp_path}/s").collect()
    assert traffic.round_trips(spark) == before


def test_cli_run_summary_names_the_round_trips(spark, tmp_path, capsys):
    rows = random_rows(random.Random(5), keys=5, per_key=(20, 30))
    src = tmp_path / "in.csv"
    src.write_text("k,t,v\n" + "".join(f"{r['k']},{r['t']},{r['v']}\n" for r in rows))
    for engine, trips in (("amta", replayed_round_trips(rows, f"file://{tmp_path}/oracle", aggs=["max"], range=10.0,
                                                         engine="amta")), ("auto", 0)):
        out = tmp_path / f"out-{engine}"
        assert cli.main(["run", "--input", str(src), "--output", str(out), "--key", "k", "--time", "t", "--value", "v",
                         "--agg", "max", "--range", "10", "--engine", engine, "--store", f"file:{tmp_path}/{engine}"],
                        spark=spark) == 0
        line = capsys.readouterr().out.strip().splitlines()[-1]
        found = re.search(r"; store file:\S+: ([\d,]+) round trips$", line)
        assert found, line
        assert int(found.group(1).replace(",", "")) == trips, line

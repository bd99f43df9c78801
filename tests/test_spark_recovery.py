"""Recovery: a Spark job that loses work gives the output of a run without failure.

Failures come from outside the production code: a user aggregation (the
``joined`` trace of the window's values, non-commutative, so a lost, doubled
or reordered row shows) whose ``lift`` fails or sleeps, and SIGKILL of a real
executor JVM.  Every run is compared exactly (all columns, floats bit for
bit) with a failure-free run of the same data, and that run with the
brute-force oracle of tests/spark_fixtures.py.

* ``local[2,3]`` (a task is tried up to 3 times): the lift raises in the
  first attempt of a task when it meets a marker value in the middle of a
  key that is processed after other keys of its partition, so the failing
  attempt has pushed rows (in batch, into the store through a 2-pair
  buffer; in streaming, other keys' windows are already checkpointed in the
  store).  The retry must recompute the partition (batch) or resume each
  key's window at the version kept in Spark's state (streaming), not at
  what the failed attempt committed.  Written evidence proves the failure
  happened where intended.
* ``local-cluster[2,1,1024]`` (two executor JVMs): while a task is in the
  middle of its partition (it reports after 20 rows), its executor JVM is
  killed with SIGKILL; Spark reschedules the task (and the lost shuffle
  output) and the standalone master launches a new executor.  Batch: the
  job completes.  Streaming: the kill hits a micro-batch that resumes
  windows from the store; the query recovers, or fails and is restarted
  from its checkpoint location; the sink's final content is identical.

Stores: the file store (tmp_path) and the Redis fixture, with tiny buffers.
"""

from __future__ import annotations

import glob
import json
import os
import random
import sys
import time
import uuid

import pytest

from spark_ops import sliding_window
from tests.spark_fixtures import (SCHEMA, ExecutorKiller, FailFirstAttempt, Sleepy, as_tuples, is_executor,
                                  assert_outputs, canonical, executor_jvms, expected, key_coded,
                                  middle_row, random_rounds, random_rows, read_sink, run_available_now,
                                  ship_by_value, spark_session, split_by_key, stream_source, trace,
                                  write_parquet)

ship_by_value(sys.modules[__name__])

AGGS = ["sum", "count", "max", "mean", "stddev", "first", "last"]
NAMES = AGGS + ["joined"]
RANGE = 10


def aggs(lift=None) -> list:
    return AGGS + [("joined", trace(lift), "string")]


def store_url(kind: str, tmp_path, request) -> str:
    if kind == "file":
        return f"file://{tmp_path}/store"
    return request.getfixturevalue("redis_url")


def batch_data(seed: int, **kw) -> list[dict]:
    rng = random.Random(seed)
    return key_coded(random_rows(rng, **kw), rng)


def stream_data(seed: int, rounds: int, **kw) -> list[list[dict]]:
    rng = random.Random(seed)
    out = random_rounds(rng, rounds, **kw)
    for batch in out:
        key_coded(batch, rng)
    return out


def set_marker(rows: list[dict], key: str) -> float:
    """Make the middle row of ``key`` (in its window order) the marker."""
    marker = 1000 * int(key[1:]) + 0.5
    middle_row(rows, key)["v"] = marker
    return marker


def batch_run(spark, rows, lift=None, **kw):
    kw.setdefault("engine", "amta")  # a batch job keeps its windows in the store only on an MTA
    df = spark.createDataFrame(as_tuples(rows), SCHEMA)
    return sliding_window(df, key="k", time="t", value="v", aggs=aggs(lift), range=RANGE,
                          buffer_size=2, cache_size=2, **kw).collect()


def stream_run(spark, directory, rounds, lift=None, *, store, before_round=None, restarts=None, queries=None):
    """Each round: add its files, run the query (availableNow) from its
    checkpoint.  A failed run is restarted once from the checkpoint when
    ``restarts`` (a list collecting the failures) is given; ``queries``
    collects the run ids of the query's runs."""
    queries = [] if queries is None else queries
    source, sink, ckpt = (os.path.join(directory, d) for d in ("in", "out", "ckpt"))
    os.makedirs(source)
    out = sliding_window(stream_source(spark, source), key="k", time="t", value="v", aggs=aggs(lift),
                         range=RANGE, store=store, buffer_size=2, cache_size=2,
                         name=f"rec-{uuid.uuid4().hex[:8]}")
    for i, batch in enumerate(rounds):
        if before_round is not None:
            before_round(i)
        for part in split_by_key(batch, 3):
            write_parquet(source, part)
        try:
            run_available_now(out, sink, ckpt, run_ids=queries)
        except Exception as exc:
            if restarts is None:
                raise
            restarts.append(f"round {i}: {type(exc).__name__}: {str(exc)[:500]}")
            run_available_now(out, sink, ckpt, run_ids=queries)  # restart from the checkpoint location
    return read_sink(spark, sink)


def _stream_rounds():
    """Three micro-batches; markers in the middle of round 1 and round 2 (in
    the key sorted last among the round's keys, so that its partition has
    processed other keys first)."""
    rounds = stream_data(22, 3)
    markers = []
    for batch in rounds[1:]:
        key = max(k for k in {r["k"] for r in batch} if sum(r["k"] == k for r in batch) >= 3)
        markers.append(set_marker(batch, key))
    return rounds, markers


STREAM_ROUNDS, STREAM_MARKERS = _stream_rounds()
_reference: dict = {}


def by_id(rows) -> dict:
    return {r.id: tuple(r) for r in rows}


def stream_reference(spark, tmp_path_factory) -> dict:
    """Row id -> output row of the failure-free streaming run of
    STREAM_ROUNDS (file store), checked against the oracle; computed once per
    module, on whichever session asks first."""
    if not _reference:
        directory = tmp_path_factory.mktemp("reference")
        got = stream_run(spark, str(directory), STREAM_ROUNDS, store=f"file://{directory}/store")
        rows = [r for batch in STREAM_ROUNDS for r in batch]
        assert_outputs(got, rows, expected(rows, NAMES, range=RANGE), NAMES)
        _reference.update(by_id(got))
    return _reference


def read_evidence(directory) -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "fail-*.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


# =====================================================================================
# local[2,3]: a task's first attempt fails in the middle of its partition
# =====================================================================================
@pytest.fixture(scope="class")
def spark():
    """local[2,3]: two cores, a task tried up to 3 times."""
    session = spark_session("local[2,3]")
    yield session
    session.stop()


class TestTaskRetry:
    @pytest.mark.parametrize("kind", ["file", "redis"])
    def test_batch_retry_gives_the_failure_free_output(self, spark, kind, tmp_path, request):
        rows = batch_data(21)
        marker = set_marker(rows, "k19")
        url = store_url(kind, tmp_path, request)
        clean = batch_run(spark, rows, store=url)
        assert_outputs(clean, rows, expected(rows, NAMES, range=RANGE), NAMES)

        evidence = tmp_path / "evidence"
        evidence.mkdir()
        got = batch_run(spark, rows, FailFirstAttempt({marker}, str(evidence)), store=url)
        (failure,) = read_evidence(evidence)  # the first attempt failed, once
        print("injected failure:", failure)
        k19_before = sum(r["k"] == "k19" for r in rows) // 2  # k19's rows before its middle one
        assert "k19" in failure["keys_before"] and len(failure["keys_before"]) >= 2, failure
        assert failure["lifted_before"] > k19_before, failure
        assert canonical(got) == canonical(clean)

    @pytest.mark.parametrize("kind", ["file", "redis"])
    def test_streaming_retry_gives_the_failure_free_output(self, spark, kind, tmp_path, tmp_path_factory, request):
        reference = stream_reference(spark, tmp_path_factory)
        markers = STREAM_MARKERS
        evidence = tmp_path / "evidence"
        evidence.mkdir()
        got = stream_run(spark, str(tmp_path / "run"), STREAM_ROUNDS, FailFirstAttempt(markers, str(evidence)),
                         store=store_url(kind, tmp_path, request))
        failures = read_evidence(evidence)
        print("injected failures:", failures)
        assert sorted(f["marker"] for f in failures) == sorted(markers), failures
        assert all(f["lifted_before"] > 0 for f in failures), failures
        # some failing attempt had already pushed and checkpointed other keys' windows
        assert any(len(f["keys_before"]) >= 2 for f in failures), failures
        assert by_id(got) == reference


# =====================================================================================
# local-cluster[2,1,1024]: an executor JVM is killed mid-task
# =====================================================================================
def cluster_diagnostics() -> str:
    """The tail of every executor's stderr under SPARK_HOME/work."""
    home = os.environ.get("SPARK_HOME", "")
    parts = [f"SPARK_HOME={home}", f"PYSPARK_PYTHON={os.environ.get('PYSPARK_PYTHON')}"]
    for path in sorted(glob.glob(os.path.join(home, "work", "*", "*", "stderr")))[-4:]:
        with open(path, errors="replace") as f:
            parts.append(f"--- {path}\n" + "".join(f.readlines()[-30:]))
    return "\n".join(parts)


def executor_count(spark) -> int:
    """Registered executors (the driver excluded)."""
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


def lost_work(spark, job_groups) -> list[str]:
    """The stages of the jobs of ``job_groups`` that lost a task or were
    resubmitted (a later stage attempt)."""
    tracker = spark.sparkContext.statusTracker()
    out = []
    for group in job_groups:
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                s = tracker.getStageInfo(stage)
                if s is not None and (s.numFailedTasks > 0 or s.currentAttemptId > 0):
                    out.append(f"job {job} stage {stage} attempt {s.currentAttemptId}: "
                               f"{s.numFailedTasks} failed tasks")
    return out


def wait_for_executors(spark, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while executor_count(spark) < n or len(executor_jvms()) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{executor_count(spark)} executors registered, {len(executor_jvms())} "
                                 f"executor JVMs after {timeout} s, expected {n}\n{cluster_diagnostics()}")
        time.sleep(0.25)


@pytest.fixture(scope="class")
def cluster():
    """local-cluster[2,1,1024]: two executor JVMs of one core and 1 GiB."""
    session = spark_session("local-cluster[2,1,1024]")
    try:
        assert session.range(10).count() == 10
        wait_for_executors(session, 2, timeout=120)
    except Exception as exc:
        diagnostics = cluster_diagnostics()
        session.stop()
        raise AssertionError(f"local-cluster did not start: {exc!r}\n{diagnostics}") from exc
    yield session
    session.stop()


class TestExecutorLoss:
    def _kill_during(self, spark, run, tmp_path, delay):
        """``run(lift, control_dir, killer, job_groups)`` with a lift sleeping
        ``delay`` per row; an executor is killed after one of its tasks
        pushed 10 rows.  Returns the run's result."""
        control = tmp_path / "control"
        control.mkdir()
        killer = ExecutorKiller(str(control))
        groups: list[str] = []
        result = run(Sleepy(delay, str(control), after=10), str(control), killer, groups)
        killer.join()
        assert killer.error is None, killer.error
        assert killer.killed is not None and not is_executor(killer.killed)  # dead (or a zombie)
        killer.reap()
        # the executor died with a task running: Spark failed it and ran it again
        lost = lost_work(spark, groups)
        print(f"executor {killer.killed.pid} killed; lost and redone: {lost}")
        assert lost, "no task or stage was lost to the kill"
        # the standalone master replaced the executor
        wait_for_executors(spark, 2, timeout=120)
        assert killer.killed.pid not in {p.pid for p in executor_jvms()}
        return result

    def test_batch_completes_after_an_executor_is_killed(self, cluster, tmp_path, redis_url):
        rows = batch_data(31, per_key=(30, 50))
        clean = batch_run(cluster, rows, store=redis_url)
        assert_outputs(clean, rows, expected(rows, NAMES, range=RANGE), NAMES)

        def run(lift, control, killer, groups):
            groups.append(f"kill-{uuid.uuid4().hex[:8]}")
            cluster.sparkContext.setJobGroup(groups[0], "batch with an executor killed")
            open(os.path.join(control, "armed"), "w").close()
            killer.start()
            try:
                return batch_run(cluster, rows, lift, store=redis_url)
            finally:
                cluster.sparkContext._jsc.clearJobGroup()

        got = self._kill_during(cluster, run, tmp_path, delay=0.02)
        assert canonical(got) == canonical(clean)

    def test_streaming_recovers_after_an_executor_is_killed(self, cluster, tmp_path, tmp_path_factory):
        """The first two micro-batches of the retry test's data; the executor
        is killed in the second, which resumes every window from the store."""
        reference = stream_reference(cluster, tmp_path_factory)
        rounds = STREAM_ROUNDS[:2]
        restarts: list[str] = []

        def run(lift, control, killer, groups):
            def before_round(i):
                if i == 1:
                    open(os.path.join(control, "armed"), "w").close()
                    killer.start()

            return stream_run(cluster, str(tmp_path / "run"), rounds, lift, store=f"file://{tmp_path}/store",
                              before_round=before_round, restarts=restarts, queries=groups)

        got = self._kill_during(cluster, run, tmp_path, delay=0.05)
        print("query restarts after the kill:", restarts or "none (the query recovered by itself)")
        # a row's output depends on the rows before it only: the reference's rows of rounds 0 and 1
        assert by_id(got) == {r["id"]: reference[r["id"]] for batch in rounds for r in batch}

    def test_event_time_recovers_after_an_executor_is_killed(self, cluster, tmp_path):
        """A watermarked query (tests/test_spark_event_time.py) stops with rows
        waiting in Spark's state; restarted from its checkpoint, the executor is
        killed while released rows enter their windows.  The sink equals the
        oracle: no waiting row lost or released twice."""
        from tests import test_spark_event_time as et

        rows = et.out_of_order(5)
        cut = len(rows) // 2
        restarts: list[str] = []

        def run(lift, control, killer, groups):
            stream = et.Stream(cluster, str(tmp_path / "run"), lift=lift)
            stream.run(rows[:cut])
            open(os.path.join(control, "armed"), "w").close()
            killer.start()
            try:
                return stream.run(rows[cut:] + [et.closing_row(rows, len(rows))], run_ids=groups)
            except Exception as exc:  # noqa: BLE001 - the query may fail; it restarts from its checkpoint
                restarts.append(f"{type(exc).__name__}: {str(exc)[:500]}")
                return stream.run([], run_ids=groups)

        got = self._kill_during(cluster, run, tmp_path, delay=0.05)
        print("query restarts after the kill:", restarts or "none (the query recovered by itself)")
        assert_outputs(got, rows, et.oracle(rows), et.NAMES)

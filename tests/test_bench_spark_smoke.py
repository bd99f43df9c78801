"""Smoke test of the Spark benchmarks (``python -m bench spark-*``) with tiny sizes.

Each runs for real on local[2] (the file store and a private redis-server
included) and must write its JSON and PNG, with the methods computing the
same windows agreeing on their checksums.  No timing assertions.
"""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("matplotlib")

from bench import spark_batch, spark_before, spark_demo, spark_event_time, spark_growth, spark_keys, spark_stream  # noqa: E402
from bench import spark_batch_jobs  # noqa: E402
from bench.common import RunConfig  # noqa: E402


def _run(module, out):
    data = module.run(RunConfig(profile="tiny", out=out, verbose=False))
    saved = json.loads((out / f"{module.NAME}.json").read_text())
    assert saved["experiment"] == module.NAME and saved["records"] == json.loads(json.dumps(data["records"]))
    assert (out / f"{module.NAME}.png").stat().st_size > 1000
    assert data["machine"]["cpu_model"] and data["spark"]["spark"] == "4.3.0"
    assert module.report(data)
    return data


def test_spark_batch(tmp_path):
    data = _run(spark_batch, tmp_path)
    methods = {r["method"] for r in data["records"]}
    assert methods == set(spark_batch.METHODS)
    assert data["checksums_agree"]
    for r in data["records"]:
        assert r["rows_per_s"] > 0 and r["rows"] == data["config"]["keys"] * data["config"]["rows_per_key"]
        # interleaved rounds: every method timed each round, the default frame once
        assert len(r["checksum_each_run"]) == (1 if r["method"] == spark_batch.SQL_DEFAULT else 2)
    top2 = {(r["window"], r["frame"]): r["checksum"] for r in data["records"] if r["method"] == spark_batch.MTA_TOP2}
    maxima = {(r["window"], r["frame"]): r["checksum"] for r in data["records"] if r["method"] == spark_batch.MTA}
    assert all(top2[k] < maxima[k] for k in top2)  # the second largest is below the largest
    # the floors all return each value as its result: one sum, however they run
    floors = [r["checksum"] for r in data["records"] if r["method"] in spark_batch.FLOORS]
    assert len(floors) == 1 + 2 * len(data["config"]["windows"]), floors  # the pipeline at the first W only
    assert all(math.isclose(c, floors[0], rel_tol=1e-9) for c in floors), floors
    assert all(r["jvm_cpu_us_per_row"] > 0 and r["python_cpu_us_per_row"] >= 0 for r in data["records"])
    assert len(spark_batch.floor_lines(data)) == len(data["config"]["windows"])
    # the byte-checked methods ran at Spark's default, the others as the session has it (the check off)
    from spark_ops.session import ARROW_BATCH_CONF

    for r in data["records"]:
        expected = "Spark's default" if r["method"] in spark_batch.BYTE_CHECKED else ARROW_BATCH_CONF[spark_batch.BYTE_LIMIT]
        assert r["arrow_max_bytes_per_batch"] == expected, r


def test_pandas_baseline_with_ties_in_input_order_gives_sliding_windows_answer():
    """spark-batch's "ties in input order" pandas baseline (and
    sliding_window) on keys with six rows per time, against brute force
    over each key's rows in input order: a key's window is its newest W
    rows in (time, input order)."""
    import random

    from bench import sparkbench
    from spark_ops import sliding_window

    rng, w = random.Random(7), 4
    rows = [(k, float(i // 6), rng.random()) for i in range(60) for k in (1, 2, 3)]
    rng.shuffle(rows)  # input order: a key's rows of one time in no particular value order
    expected = []
    for key in (1, 2, 3):
        ordered = sorted((r for r in rows if r[0] == key), key=lambda r: r[1])  # stable: input order at ties
        expected += [(k, t, v, max(x[2] for x in ordered[max(0, i - w + 1):i + 1]))
                     for i, (k, t, v) in enumerate(ordered)]
    spark = sparkbench.session(RunConfig(profile="tiny"), 4)
    try:
        df = spark.createDataFrame(rows, "k int, t double, v double")
        got = sorted(tuple(r) for r in spark_batch_jobs.pandas_rolling(df, w, "rows", ties=True).collect())
        ours = sorted(tuple(r) for r in sliding_window(df, key="k", time="t", value="v", aggs=["max"], rows=w)
                      .select("k", "t", "v", "max").collect())
    finally:
        spark.stop()
    assert got == sorted(expected)
    assert ours == sorted(expected)
    # a local shuffle keeps input order: a key's rows shuffled here show the sort on (time, number) at work
    import pandas as pd

    key_rows = [(k, t, v, n) for n, (k, t, v) in enumerate(rows) if k == 1]
    frame = pd.DataFrame(rng.sample(key_rows, len(key_rows)), columns=["k", "t", "v", "n"])
    assert list(spark_batch_jobs.rolling_max(frame, w, "rows", ties=True).itertuples(index=False, name=None)) == \
        [e for e in expected if e[0] == 1]


def test_cpu_meter_counts_a_process_that_exits_during_the_block():
    """A child that burns CPU and exits inside the block is counted (as a
    Python worker that Spark stops mid-job, reaped by the kernel, must
    be): its CPU reaches no counter this process reads once it is gone, so
    reading counters only at both ends would give it none."""
    import subprocess
    import sys

    from bench.sparkbench import CpuMeter

    burn = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
            "time.sleep(0.6)")  # idle before exiting: the sampler sees the whole burn
    with CpuMeter(every=0.05) as cpu:
        subprocess.run([sys.executable, "-c", burn], check=True)
    assert cpu.python >= 0.36, cpu.python
    assert cpu.jvm >= 0


def test_cpu_meter_counts_the_redis_server_apart_from_the_jvm(tmp_path):
    """A child named redis-server (the store server bench/redis_server.py
    starts) is counted as :attr:`store`, not as JVM: spark-keys would
    otherwise publish the store's CPU as Spark's.  A Python interpreter
    under that name stands in for it, so the test needs no redis-server."""
    import subprocess
    import sys

    from bench.sparkbench import CpuMeter

    fake = tmp_path / "redis-server"
    fake.symlink_to(sys.executable)
    burn = ("import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
            "time.sleep(0.6)")
    with CpuMeter(every=0.05) as cpu:
        subprocess.run([str(fake), "-c", burn], check=True)
    assert cpu.store >= 0.36, cpu.store
    assert cpu.jvm < 0.2 and cpu.python < 0.2, (cpu.jvm, cpu.python)


def test_spark_keys_table_labels_the_jvm_cpu_of_records_before_the_split():
    """Records without the redis-server's own figure show their JVM CPU as
    measured, under a header saying it includes the store server's; new
    records get a column of their own."""
    base = {"keys": 10, "window": spark_keys.FRESH, "method": "MTA, redis store", "micro_batches": 2, "rows": 20,
            "rows_per_s": 5.0, "python_ms_per_key_batch": 1.0, "jvm_ms_per_key_batch": 3.0,
            "round_trips_per_key_batch": 1.0, "load_average": 0.5}
    ((_, old_header, old_rows),) = spark_keys.tables({"records": [base]})
    assert "JVM CPU ms / key / batch (includes the redis-server's)" in old_header
    assert len(old_header) == len(old_rows[0]) and "3.00" in old_rows[0]
    new = {**base, spark_keys.STORE_SERVER: 0.25}
    ((_, header, rows),) = spark_keys.tables({"records": [new]})
    assert "JVM CPU ms / key / batch" in header and "redis-server CPU ms / key / batch" in header
    assert rows[0][header.index("redis-server CPU ms / key / batch")] == "0.25"
    ((_, header, rows),) = spark_keys.tables({"records": [base, new]})
    assert rows[0][header.index("redis-server CPU ms / key / batch")] == "?"


def test_spark_demo(tmp_path):
    data = _run(spark_demo, tmp_path)
    assert [r["method"] for r in data["records"]] == spark_demo.METHODS  # interleaved, one run each (tiny)
    assert data["summary"]["windows_stage_speedup"]["pipeline_over_before"] > 0
    assert data["checksums_agree"]
    for r in data["records"]:
        assert r["rows"] == spark_demo.PROFILES["tiny"]["rows"] and r["rows_per_s"] > 0 and r["cpu_seconds"] > 0


def test_spark_before(tmp_path):
    """The before/now machinery (tiny: the committed HEAD as "before"): each
    side's job process imported its own library, and both compute the same
    windows."""
    data = _run(spark_before, tmp_path)
    assert [r["method"] for r in data["records"]] == list(spark_before.METHODS)
    libraries = data["libraries"]
    assert libraries["now"] == str(spark_before.REPO)
    assert libraries["before"] != libraries["now"] and libraries["before"].endswith("before-lib")
    assert data["checksums_agree"] and set(data["summary"]) == {name for name, *_ in spark_before.TARGETS}
    for r in data["records"]:
        assert r["rows"] == spark_before.PROFILES["tiny"]["rows"] and r["rows_per_s"] > 0 and r["cpu_us_per_row"] > 0


def test_spark_growth(tmp_path):
    data = _run(spark_growth, tmp_path)
    assert {(r["store"], r["window"]) for r in data["records"]} == {
        (s, w) for s in spark_growth.STORES for w in spark_growth.PROFILES["tiny"]["windows"]}
    assert all(r["peak_worker_mb"] > 10 and r["rows"] == 2 * 2 * r["window"] for r in data["records"])
    # every store computes the same windows: per W, the same rows and sum(max)
    assert all(isinstance(r["checksum"], float) for r in data["records"])
    assert data["checksums_agree"] == {w: True for w in spark_growth.PROFILES["tiny"]["windows"]}
    assert "checksums (rows, sum(max)) of the stores agree, per W: 50 yes, 500 yes" in spark_growth.report(data)


class _Started(Exception):
    """Raised by the stand-in for storebench.backends: the test ends there."""


@pytest.mark.parametrize("module", [spark_growth, spark_keys])
def test_spark_store_benches_start_only_the_stores_configured(module, tmp_path, monkeypatch):
    """``--stores file`` keeps a Spark benchmark from starting redis-server
    (a machine without one runs it with the file store): the stores it asks
    storebench.backends for are those configured."""
    from bench import storebench

    asked = []

    def backends(cfg, wanted=storebench.BACKENDS):
        asked.append(tuple(wanted))
        raise _Started

    monkeypatch.setattr(storebench, "backends", backends)
    for stores in (("file",), ("redis", "file")):
        with pytest.raises(_Started):
            module.run(RunConfig(profile="tiny", out=tmp_path, verbose=False, store_backends=stores))
    assert "redis" not in asked[0] and "redis" in asked[1], asked


def test_spark_event_time_counts_a_fractional_delays_waiting_reading():
    """With readings at whole seconds, a watermark delay of 2.5 s holds
    back the readings 0, 1 and 2 s old: ceil(d) per host, not floor(d)."""
    config = {"hosts": 2, "range_s": 1000}
    assert spark_event_time.emitted({"events": 100, "watermark_fraction": 0.0025}, config) == 100 - 2 * 3
    assert spark_event_time.emitted({"events": 100, "watermark_fraction": 0.003}, config) == 100 - 2 * 3
    assert spark_event_time.emitted({"events": 100, "watermark_fraction": None}, config) == 100


def test_spark_stream(tmp_path):
    data = _run(spark_stream, tmp_path)
    # the MTA's stores give the same outputs: one per event, the same sum of max
    for r in data["records"]:
        if r["method"].startswith("MTA"):
            assert r["output_rows"] == r["events"] and isinstance(r["checksum"], float)
    assert data["checksums_agree"] == {"small": True, "large": True}
    assert "checksums (output rows, sum(max)) of the MTA's stores agree: small yes, large yes" in \
        spark_stream.report(data)
    methods = {(r["input"], r["method"]) for r in data["records"]}
    assert ("small", "hopping windows") in methods and ("large", "MTA, redis store") in methods
    for r in data["records"]:
        assert r["input_rows"] == r["events"] and r["micro_batches"] >= 2
        # the MTA's plan keeps no Spark state (its windows are in the store); hopping windows keep many rows per key
        if r["method"] == "hopping windows":
            assert r["state_rows"] > 10 * r["hosts"]
        else:
            assert "state_rows" not in r


def test_spark_keys(tmp_path):
    data = _run(spark_keys, tmp_path)
    p = spark_keys.PROFILES["tiny"]
    span = data["config"]["range_s"]
    cases = {(k, spark_keys.FRESH) for k in p["keys"]} | {(k, spark_keys.FULL) for k in p["full_keys"]}
    assert {spark_keys.FULL} < {w for _, w in cases}  # the tiny profile measures both window cases
    assert {(r["keys"], r["window"], r["method"]) for r in data["records"]} == {
        (k, w, m) for k, w in cases for m in spark_keys.METHODS}
    for r in data["records"]:
        # the timed run reads exactly the timed files: a full window's history is not counted
        assert r["rows"] == r["input_rows"] == r["keys"] * p["files"] * p["rows_per_key"]
        assert r["micro_batches"] == p["files"] and r["python_ms_per_key_batch"] > 0
        assert r["history_rows"] == (r["keys"] * span if r["window"] == spark_keys.FULL else 0)
        # one row of Spark state per key for the do-nothing query; none for the MTA's plan, in both cases
        if r["method"] == spark_keys.BASELINE:
            assert r["state_rows"] == r["keys"]
        else:
            assert "state_rows" not in r
    assert set(data["summary"]) == {f"{k} keys, {w} window, {m}" for k, w in cases for m in spark_keys.METHODS[1:]}
    lines = spark_keys.summary_lines(data)
    for k, w in cases:
        for m in spark_keys.METHODS[1:]:
            assert sum(line.startswith(f"[ratio] {k} keys, {w} window, {m} / ") for line in lines) == 1


def test_spark_keys_ratios_are_of_each_round_then_the_median():
    """With several rounds, each method's rows/s is divided by the
    do-nothing query's of its own round (run beside it), and the median of
    those ratios (and of the Python CPU beyond) is what the summary says."""
    rates = {0: (1000, 900), 1: (2000, 1200), 2: (1500, 1650)}  # round: (do-nothing, file store) rows/s
    records = [{"keys": 1000, "window": spark_keys.FULL, "method": method, "round": round_, "rows_per_s": rate,
                "python_ms_per_key_batch": 0.5 + 0.1 * round_ + (0.3 if method != spark_keys.BASELINE else 0)}
               for round_, pair in rates.items() for method, rate in zip((spark_keys.BASELINE, "MTA, file store"), pair)]
    s = spark_keys.summary({"records": records})["1000 keys, full window, MTA, file store"]
    assert s["rows_per_s_ratio_each_round"] == pytest.approx([0.9, 0.6, 1.1])
    assert s["rows_per_s_ratio"] == pytest.approx(0.9) and s["python_ms_beyond"] == pytest.approx(0.3)
    assert s["rounds"] == 3
    (line,) = spark_keys.summary_lines({"records": records})
    assert "0.90x (median of 3 rounds: 0.90x, 0.60x, 1.10x)" in line and line.endswith("1 ms: met)")


def test_spark_keys_full_window_holds_the_history(tmp_path):
    """The full case's protocol on the benchmark's own input and query
    (file store, the tiny profile's sizes), with a Parquet sink instead of
    ``noop``: after the history run, the timed run from the same checkpoint
    reads only the timed files, and each of its rows gets the max over its
    key's readings of the last ``range_s`` seconds, history included (brute
    force over every file written)."""
    import pyarrow.parquet as pq

    from bench import sparkbench
    from tests.spark_fixtures import run_available_now

    p = spark_keys.PROFILES["tiny"]
    keys, span = p["full_keys"][0], p["range_s"]
    source, checkpoint = str(tmp_path / "in"), str(tmp_path / "ckpt")
    (tmp_path / "in").mkdir()
    spark = sparkbench.session(RunConfig(profile="tiny", verbose=False), spark_keys.PARTITIONS)
    try:
        out = spark_keys._query(spark, source, keys, "MTA, file store", None, f"file://{tmp_path}/store", span)
        spark_keys.write_input(source, keys, 1, span, prefix="history", seed=8)
        run_available_now(out, str(tmp_path / "sink-history"), checkpoint)
        timed = spark_keys.write_input(source, keys, p["files"], p["rows_per_key"], start=span)
        run_available_now(out, str(tmp_path / "sink-timed"), checkpoint)
    finally:
        spark.stop()
    # the timed run's output files alone (Spark's reader would want the sink's log from the first batch on)
    got = pq.read_table(tmp_path / "sink-timed").to_pylist()
    readings = pq.read_table(source).to_pylist()
    assert len(readings) == keys * span + timed
    assert sorted((r["k"], r["t"]) for r in got) == sorted((r["k"], r["t"]) for r in readings if r["t"] >= span)

    def max_over(k, t, since):
        return max(r["v"] for r in readings if r["k"] == k and since < r["t"] <= t)

    assert all(r["max"] == max_over(r["k"], r["t"], r["t"] - span) for r in got)
    # the check tells a full window from a fresh one: some maxima come from the history
    assert any(r["max"] != max_over(r["k"], r["t"], span - 1) for r in got)


def test_spark_event_time(tmp_path):
    data = _run(spark_event_time, tmp_path)
    methods = {(r["store"], r["method"]) for r in data["records"]}
    assert {("file", spark_event_time.BASELINE), ("redis", "out of order, 10%")} <= methods
    for r in data["records"]:
        assert r["input_rows"] == r["events"] and r["micro_batches"] >= 2
        # with a watermark, one row of Spark state per key, waiting rows inside it; without, no Spark state
        if r["watermark_fraction"] is None:
            assert "state_rows" not in r
        else:
            assert r["state_rows"] == spark_event_time.PROFILES["tiny"]["hosts"]
        assert (r["waiting_per_key_mean"] > 0) == (r["watermark_fraction"] is not None)
    assert set(data["summary"]["ratio_to_in_order"]) == {f"{s}: {m}" for s, m in methods
                                                         if m != spark_event_time.BASELINE}


def test_spark_sizes(tmp_path):
    from bench import spark_sizes

    data = _run(spark_sizes, tmp_path)
    p = spark_sizes.PROFILES["tiny"]
    assert {(r["engine"], r["k"], r["method"]) for r in data["records"] if r["part"] == "sizes"} == {
        (e, k, m) for e in spark_sizes.ENGINES for k in p["ks"] for m in (spark_sizes.ONE, spark_sizes.JOINED)}
    assert {r["method"] for r in data["records"] if r["part"] == "periodic"} == {spark_sizes.OURS, spark_sizes.SPARK}
    assert data["checksums_agree"]
    for r in data["records"]:
        assert r["rows_per_s"] > 0 and r["output_rows"] > 0


def test_spark_tasks(tmp_path):
    """Sessions with either Python socket each time every job at both
    partition counts and both count-window methods; the summary derives
    from those records."""
    from bench import spark_tasks

    data = _run(spark_tasks, tmp_path)
    p = spark_tasks.PROFILES["tiny"]
    jobs = {(r["socket"], r["partitions"], r["method"]) for r in data["records"] if "partitions" in r}
    assert jobs == {(s, n, m) for s in spark_tasks.SOCKETS for n in p["partitions"] for m in spark_tasks.METHODS}
    count = {(r["socket"], r["method"]) for r in data["records"] if "partitions" not in r}
    assert count == {(s, m) for s in spark_tasks.SOCKETS for m in (spark_tasks.COLUMNAR, spark_tasks.ROLLING)}
    assert all(r["seconds"] > 0 and r["setting"] == spark_tasks.SOCKETS[r["socket"]] for r in data["records"])
    assert set(data["summary"]) == {*spark_tasks.SOCKETS, "few_partitions_mapinarrow_tcp_over_unix"}
    for socket in spark_tasks.SOCKETS:
        assert len(data["summary"][socket]["columnar_vs_pandas_rolling_each_round"]) == p["rounds"]


def test_spark_batch_summary_compares_each_tie_contract_with_its_pandas_counterpart():
    """The targets against pandas rolling: the lowest ratio over W of the
    default columnar max to plain pandas, of ties in any order to plain
    pandas, and of the default to pandas with ties in input order; a pair
    missing at one W has no target (it is not met on part of the sizes)."""
    rates = {(100, spark_batch.COLUMNAR): 9.0, (1000, spark_batch.COLUMNAR): 12.0,
             (100, spark_batch.COLUMNAR_ANY): 11.0, (1000, spark_batch.COLUMNAR_ANY): 13.0,
             (100, spark_batch.PANDAS): 10.0, (1000, spark_batch.PANDAS): 10.0,
             (100, spark_batch.PANDAS_TIES): 8.0}
    data = {"config": {"windows": [100, 1000], "frames": ["rows"]},
            "records": [{"window": w, "frame": "rows", "method": m, "rows_per_s": v} for (w, m), v in rates.items()]}
    s = spark_batch.summarize(data)
    assert s["columnar_rows_vs_pandas_rolling"] == {"ratio": 0.9, "target": ">= 1 at every W", "met": False}
    assert s["columnar_rows_ties_any_vs_pandas_rolling"]["ratio"] == 1.1
    assert s["columnar_rows_ties_any_vs_pandas_rolling"]["met"]
    assert "columnar_rows_vs_pandas_rolling_input_ties" not in s  # pandas with ties measured at W=100 alone

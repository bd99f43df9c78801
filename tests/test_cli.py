"""End-to-end tests of ``mta-spark`` (spark_ops.cli) against a brute-force oracle.

Most tests call :func:`spark_ops.cli.main` in-process on ONE shared local
session (a Spark session takes ~10 s to start); two run the CLI as a
subprocess to check the real exit-code path (``--help``, a usage error, and
a failing job whose error must be one line without a Java stack trace).

The oracle: per key, rows in ``(time, input order)``; a row's time window
holds the key's rows up to it with time in ``(t - range, t]``, its count
window the key's newest ``rows`` rows up to it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

from spark_ops import cli
from tests.spark_fixtures import ORACLE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# -- oracle -------------------------------------------------------------------------
def oracle(rows, aggs, *, range=None, count=None):
    """``{(key, time, value): {agg: result}}`` for rows ``(key, time, value)``
    in input order (``time`` in seconds); (key, time, value) are unique."""
    by_key = defaultdict(list)
    for i, (k, t, v) in enumerate(rows):
        by_key[k].append((t, i, v))
    out = {}
    for k, items in by_key.items():
        items.sort(key=lambda x: (x[0], x[1]))  # (time, input order)
        for j, (t, i, v) in enumerate(items):
            upto = items[: j + 1]
            if range is not None:
                window = [x[2] for x in upto if x[0] > t - range]
            else:
                window = [x[2] for x in upto[-count:]]
            out[(k, t, v)] = {a: ORACLE[a](window) for a in aggs}
    return out


def make_rows(n=300, keys=4, seed=0, t_lo=0, t_hi=120):
    """Rows ``(key, time, value)`` in a shuffled input order: times on a
    half-second grid (many ties within a key), unique values."""
    rng = random.Random(seed)
    seen, rows = set(), []
    while len(rows) < n:
        v = round(rng.uniform(-100, 100), 3)
        if v in seen:
            continue
        seen.add(v)
        rows.append((f"k{rng.randrange(keys)}", rng.randint(int(2 * t_lo), int(2 * t_hi)) / 2, v))
    return rows


def assert_matches(got, rows, aggs, *, range=None, count=None, time_of=lambda t: t):
    """``got``: Spark Rows with key, time, value and the aggregation columns."""
    expected = oracle(rows, aggs, range=range, count=count)
    assert len(got) == len(rows), "one output row per input row, no duplicates"
    seen = set()
    for r in got:
        ident = (r[0], time_of(r[1]), r[2])
        assert ident not in seen, f"duplicate output row {ident}"
        seen.add(ident)
        want = expected[ident]
        for a in aggs:
            g, w = r[a], want[a]
            if w is None or g is None:
                assert g is None and w is None, (ident, a, g, w)
            else:
                assert math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9), (ident, a, g, w)


# -- input files ---------------------------------------------------------------------
def write_csv(path, rows, header=("key", "t", "v")):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for k, t, v in rows:
            f.write(f"{k},{'' if t is None else repr(t)},{'' if v is None else repr(v)}\n")


def write_json(path, rows):
    with open(path, "w") as f:
        for k, t, v in rows:
            f.write(json.dumps({"key": k, "t": t, "v": v}) + "\n")


def write_parquet_timestamps(path, rows):
    """Naive datetimes (Spark reads them as TIMESTAMP_NTZ) for the seconds in ``rows``."""
    import pandas as pd

    base = pd.Timestamp("2024-03-04 00:00:00")
    pd.DataFrame({"host": [k for k, _, _ in rows],
                  "ts": [base + pd.Timedelta(seconds=t) for _, t, _ in rows],
                  "mem": [v for _, _, v in rows]}).to_parquet(path, index=False, coerce_timestamps="us")
    return base


# -- fixtures ------------------------------------------------------------------------
#: The module's session (tests/conftest.py's ``spark``): sorts spill every
#: 64 rows, so rows tying on time come out of the shuffle in no particular
#: order unless the job orders them by arrival, as it must.
SPARK_CONF = {"app": "test_cli", "shuffle_partitions": 2, "spark.sql.session.timeZone": "UTC",
              "spark.sql.adaptive.coalescePartitions.enabled": "true"}


def run_cli(spark, *argv):
    return cli.main([str(a) for a in argv], spark=spark)


def job_descriptions(spark) -> set[str]:
    """The descriptions of the session's jobs, as the Spark UI lists them."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found = (jobs.apply(i).description() for i in range(jobs.size()))
    return {d.get() for d in found if d.isDefined()}


def executed_plans(spark) -> list[str]:
    """The physical plans of the session's SQL executions so far, oldest first."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return [executions.apply(i).physicalPlanDescription() for i in range(executions.size())]


def one_error_line(err: str) -> str:
    """The one error line on stderr, besides the progress lines ("[2] stage ...",
    indented status lines)."""
    lines = [line for line in err.splitlines()
             if line.strip() and not re.match(r"\[\d+(/\d+)?\] |    ", line)]
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("mta-spark: error: "), lines[0]
    assert "Traceback" not in err and "\tat " not in err
    return lines[0]


# -- run --------------------------------------------------------------------------------
def test_run_csv_time_window(spark, tmp_path, capsys):
    rows = make_rows(300, keys=4, seed=1)
    src = tmp_path / "in.csv"
    write_csv(src, rows)
    aggs = ["max", "min", "sum", "mean", "count", "stddev", "first", "last"]
    out = tmp_path / "out"
    assert run_cli(spark, "run", "--input", src, "--output", out, "--key", "key", "--time", "t",
                   "--value", "v", "--agg", ",".join(aggs), "--range", 15) == 0
    result = spark.read.parquet(str(out))
    assert result.columns == ["key", "t", "v", *aggs]
    assert_matches(result.collect(), rows, aggs, range=15)
    printed = capsys.readouterr().out
    assert "wrote 300 rows" in printed and "rejected" not in printed
    # the window job is named in its Spark jobs' descriptions (the Spark UI's jobs page)
    assert f"mta-spark run: sliding window {', '.join(aggs)} over range 15 s per key, engine columnar" \
        in job_descriptions(spark)


def test_run_parquet_count_window_with_timestamps_and_file_store(spark, tmp_path):
    rows = make_rows(250, keys=5, seed=2)
    src = tmp_path / "readings.parquet"
    base = write_parquet_timestamps(src, rows)
    aggs = ["max", "mean", "variance", "last"]
    out = tmp_path / "out"
    assert run_cli(spark, "run", "--input", src, "--output", out, "--key", "host", "--time", "ts",
                   "--value", "mem", "--agg", ",".join(aggs), "--rows", 5,
                   "--store", f"file:{tmp_path / 'state'}", "--engine", "amta") == 0
    result = spark.read.parquet(str(out))
    assert result.columns == ["host", "ts", "mem", *aggs]
    assert dict(result.dtypes)["ts"] == "timestamp_ntz"  # the input's time column, unchanged
    assert_matches(result.collect(), rows, aggs, count=5,
                   time_of=lambda ts: (ts - base.to_pydatetime()).total_seconds())


class _OnCluster:
    """The session, as a job sees it, with ``master`` for its master: what a
    command run under spark-submit on a cluster finds."""

    def __init__(self, spark, master):
        self._spark, self._master = spark, master

    def __getattr__(self, name):
        return getattr(self._spark, name)

    @property
    def sparkContext(self):  # noqa: N802 - pyspark's name
        session = self

        class Context:
            master = session._master

            def __getattr__(self, name):
                return getattr(session._spark.sparkContext, name)

        return Context()


def test_a_file_store_on_a_cluster_is_warned_about_where_windows_go_there(spark, tmp_path, caplog):
    """The file store is one machine's: a job whose windows go there (an
    MTA) on a master that is not local gets a warning on stderr, and still
    runs; one whose windows stay in executor memory, or on a local master,
    does not."""
    rows = make_rows(60, keys=2, seed=4)
    src = tmp_path / "in.csv"
    write_csv(src, rows)
    job = ["run", "--input", src, "--key", "key", "--time", "t", "--value", "v", "--agg", "max", "--range", 15,
           "--store", f"file:{tmp_path / 'state'}"]
    cluster = _OnCluster(spark, "spark://spark-master.example.com:7077")
    warned = lambda: [r for r in caplog.records if "SQLite file on one machine" in r.getMessage()]  # noqa: E731
    with caplog.at_level(logging.WARNING):
        assert run_cli(spark, *job, "--output", tmp_path / "local", "--engine", "amta") == 0
        assert run_cli(cluster, *job, "--output", tmp_path / "columnar") == 0
        assert warned() == []
        assert run_cli(cluster, *job, "--output", tmp_path / "amta", "--engine", "amta") == 0
    assert len(warned()) == 1 and "spark://spark-master.example.com:7077" in warned()[0].getMessage()
    assert spark.read.parquet(str(tmp_path / "amta")).count() == len(rows)


def test_run_json_time_window_format_option_and_overwrite(spark, tmp_path):
    rows = make_rows(200, keys=3, seed=3)
    src = tmp_path / "events.txt"  # no telling extension: --format json
    write_json(src, rows)
    aggs = ["min", "var_pop", "stddev_pop", "count"]
    out = tmp_path / "out"
    out.mkdir()
    base = ["run", "--input", src, "--output", out, "--format", "json", "--key", "key", "--time", "t",
            "--value", "v", "--agg", ",".join(aggs), "--range", 10.5]
    assert run_cli(spark, *base) == 2  # the output exists
    assert run_cli(spark, *base, "--overwrite") == 0
    result = spark.read.parquet(str(out))
    assert result.columns == ["key", "t", "v", *aggs]
    assert_matches(result.collect(), rows, aggs, range=10.5)


@pytest.mark.parametrize("ties", ["input", "any"])
def test_run_frame_sql_equals_spark_range_between(spark, tmp_path, capsys, ties):
    """``--frame sql``: every row's outputs equal Spark's own window functions
    over ``RANGE BETWEEN 5 PRECEDING AND CURRENT ROW`` (rows on a half-second
    grid: many ties, and rows exactly 5 s before others), whatever orders the
    ties (``--ties any``: the shuffle's order; peers share their outputs)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = make_rows(300, keys=4, seed=11, t_hi=40)
    src = tmp_path / "in.csv"
    write_csv(src, rows)
    aggs = ["max", "min", "sum", "count", "mean"]
    out = tmp_path / "out"
    before = len(executed_plans(spark))
    assert run_cli(spark, "run", "--input", src, "--output", out, "--key", "key", "--time", "t",
                   "--value", "v", "--agg", ",".join(aggs), "--range", 5, "--frame", "sql", "--ties", ties) == 0
    told = capsys.readouterr().err
    assert "frame sql" in told and ("rows of equal time in any order" in told) == (ties == "any")
    windows = [plan for plan in executed_plans(spark)[before:] if "MapInArrow" in plan]
    assert windows and all(("monotonically_increasing_id" in plan) == (ties == "input") for plan in windows)
    got = {(r["key"], r["t"], r["v"]): r for r in spark.read.parquet(str(out)).collect()}
    frame = Window.partitionBy("key").orderBy("t").rangeBetween(-5, 0)
    df = spark.createDataFrame(rows, "key string, t double, v double")
    want = df.select("key", "t", "v", *[getattr(F, a if a != "mean" else "avg")("v").over(frame).alias(a)
                                        for a in aggs]).collect()
    assert len(got) == len(want) == len(rows)
    for w in want:
        g = got[(w["key"], w["t"], w["v"])]
        for a in aggs:
            assert math.isclose(g[a], w[a], rel_tol=1e-9, abs_tol=1e-9), (w, a, g[a])


def test_run_refuses_an_output_that_overlaps_the_input(spark, tmp_path, capsys):
    """An output that is, holds or lies in the input is refused before any
    job: replacing it would delete the input's files (and others beside)."""
    data = tmp_path / "d"
    data.mkdir()
    write_csv(data / "readings.csv", make_rows(20, keys=2, seed=7))
    (data / "other.txt").write_text("keep me")
    base = ["--key", "key", "--time", "t", "--value", "v", "--agg", "max", "--range", 5, "--overwrite"]
    for src, out in ((data / "readings.csv", data), (data, data / "out"), (data, data)):
        capsys.readouterr()
        assert run_cli(spark, "run", "--input", src, "--output", out, *base) == 2
        assert "overlap" in one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in data.iterdir()) == ["other.txt", "readings.csv"]


def test_run_overwrite_that_fails_keeps_the_earlier_output(spark, tmp_path, capsys):
    """--overwrite replaces the output only once the new one is written: a
    run that fails on a bad row leaves the earlier output whole, and no
    directory of its own beside it."""
    rows = make_rows(40, keys=2, seed=8)
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    write_csv(good, rows)
    write_csv(bad, rows + [("k0", 99.0, None)])
    out = tmp_path / "out"
    args = ["--output", out, "--key", "key", "--time", "t", "--value", "v", "--agg", "max", "--range", 5]
    assert run_cli(spark, "run", "--input", good, *args) == 0
    before = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
    assert run_cli(spark, "run", "--input", bad, *args, "--overwrite") == 2
    assert "row rejected" in one_error_line(capsys.readouterr().err)
    assert sorted(tuple(r) for r in spark.read.parquet(str(out)).collect()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "good.csv", "out"]
    assert run_cli(spark, "run", "--input", good, *args[:-4], "--agg", "min", "--range", 5, "--overwrite") == 0
    assert spark.read.parquet(str(out)).columns == ["key", "t", "v", "min"]  # the one that works replaced it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "good.csv", "out"]


def test_run_csv_keys_are_text_and_a_schema_matches_columns_by_name(spark, tmp_path, capsys):
    """Inferred CSV types leave a key as its text ("007" and "7" are two
    windows, not one number); a --schema whose columns are in another
    order than the header's is an error, not values laid over the wrong
    columns."""
    src = tmp_path / "lead.csv"
    src.write_text("host,ts,mem,cpu\n007,10,1,100\n7,20,5,200\n007,30,2,300\n")
    out = tmp_path / "o"
    args = ["--key", "host", "--time", "ts", "--value", "mem", "--agg", "max,count", "--range", 100]
    assert run_cli(spark, "run", "--input", src, "--output", out, *args) == 0
    got = sorted((r["host"], r["ts"], r["max"], r["count"]) for r in spark.read.parquet(str(out)).collect())
    assert got == [("007", 10, 1, 1), ("007", 30, 2, 2), ("7", 20, 5, 1)]
    capsys.readouterr()
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o2", *args,
                   "--schema", "host STRING, ts DOUBLE, cpu DOUBLE, mem DOUBLE") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "header" in line.lower() and "mem" in line, line
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o3", *args,
                   "--schema", "host STRING, ts DOUBLE, mem DOUBLE, cpu DOUBLE") == 0
    assert [r["max"] for r in spark.read.parquet(str(tmp_path / "o3")).orderBy("ts").collect()] == [1.0, 5.0, 2.0]


def test_run_blanks_around_a_name_belong_to_the_column_that_has_them(spark, tmp_path):
    """A CSV header's `` v`` beside ``v``: ``--value ' v'`` reads `` v``, as
    ``sliding_window(value=' v')`` and SQL's ``value => ' v'`` do; blanks
    around a name no column has are dropped (``--key ' k '``)."""
    src = tmp_path / "blanks.csv"
    src.write_text("k,t, v,v\na,1,100,1\na,2,200,2\nb,3,400,4\n")

    def sums(*names):
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        args = ["--key", names[0], "--time", names[1], "--value", names[2], "--agg", "sum", "--range", 10]
        assert run_cli(spark, "run", "--input", src, "--output", out, *args) == 0
        return [r["sum"] for r in spark.read.parquet(str(out)).orderBy("t").collect()]

    assert sums("k", "t", " v") == [100, 300, 400]
    assert sums(" k ", " t", "v ") == [1, 3, 4]


def test_run_input_not_in_its_format_is_a_usage_error_naming_the_file(spark, tmp_path, capsys):
    """A CSV read as Parquet (a wrong --format, or a misleading file name)
    is the input's problem: exit 2 with the path, the format and Spark's
    reason; with the right --format the same input runs."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "part.csv").write_text("host,ts,mem\na,1,2\nb,2,3\n")
    args = ["--key", "host", "--time", "ts", "--value", "mem", "--agg", "max", "--rows", 2]
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", "--format", "parquet", *args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"cannot read {src} as parquet" in line and "not a Parquet file" in line and "--format" in line, line
    assert not (tmp_path / "o").exists()
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", "--format", "csv", *args) == 0


def test_run_json_text_timestamps_name_the_remedy_which_works(spark, tmp_path, capsys):
    """JSON has no timestamp type: times written as ISO text are a string
    column, refused with the --schema that reads them; with it the windows
    come out as over the same times given as seconds."""
    src = tmp_path / "ts.json"
    src.write_text("".join(f'{{"host": "a", "ts": "2026-01-01T00:00:{s:02d}Z", "mem": {v}}}\n'
                           for s, v in [(0, 3.0), (10, 1.0), (30, 2.0)]))
    args = ["--key", "host", "--time", "ts", "--value", "mem", "--agg", "max", "--range", 15]
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", *args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "time column 'ts' is string" in line and "--schema '..., ts TIMESTAMP, ...'" in line, line
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", *args,
                   "--schema", "host STRING, ts TIMESTAMP, mem DOUBLE") == 0
    assert [r["max"] for r in spark.read.parquet(str(tmp_path / "o")).orderBy("ts").collect()] == [3.0, 3.0, 2.0]


def test_run_bad_rows_error_or_flag(spark, tmp_path, capsys, caplog):
    rows = make_rows(60, keys=3, seed=4)
    bad = [("k1", 30.0, None), ("k2", None, 1.5)]
    src = tmp_path / "in.csv"
    write_csv(src, rows[:30] + bad + rows[30:])
    args = ["run", "--input", src, "--key", "key", "--time", "t", "--value", "v", "--agg", "max,count",
            "--range", 20]
    capsys.readouterr()
    assert run_cli(spark, *args, "--output", tmp_path / "o1") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "row rejected" in line and "--on-bad-row flag" in line

    with caplog.at_level(logging.WARNING, logger="spark_ops"):
        assert run_cli(spark, *args, "--output", tmp_path / "o2", "--on-bad-row", "flag") == 0
    # the summary and a warning count the flagged rows (Spark's observed metrics of the job)
    assert re.search(r"^wrote 62 rows to .* rows/s; 2 rejected, flagged in column 'rejected'$",
                     capsys.readouterr().out, re.M)
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("spark_ops")]
    assert warnings == [f"mta-spark run: 2 of 62 rows rejected (flagged in column 'rejected' of {tmp_path / 'o2'})"]
    result = spark.read.parquet(str(tmp_path / "o2"))
    assert result.columns == ["key", "t", "v", "max", "count", "rejected"]
    got = result.collect()
    flagged = [r for r in got if r["rejected"] is not None]
    assert sorted(r["rejected"] for r in flagged) == ["null or NaN time", "null or NaN value"]
    assert all(r["max"] is None and r["count"] is None for r in flagged)
    assert_matches([r for r in got if r["rejected"] is None], rows, ["max", "count"], range=20)


def test_run_text_value_flags_that_row_and_keeps_the_rest(spark, tmp_path, capsys):
    """One value that is not a number makes Spark read the column as text:
    flag mode flags that row, naming the text and its file, and keeps the
    others; error mode refuses naming them."""
    rows = make_rows(60, keys=3, seed=8)
    src = tmp_path / "in.csv"
    write_csv(src, rows)
    with open(src, "a") as f:
        f.write("k1,31.0,abc\n")
    args = ["run", "--input", src, "--key", "key", "--time", "t", "--value", "v", "--agg", "max,count",
            "--range", 20]
    assert run_cli(spark, *args, "--output", tmp_path / "o2", "--on-bad-row", "flag") == 0
    got = spark.read.parquet(str(tmp_path / "o2")).collect()
    flagged = [r for r in got if r["rejected"] is not None]
    assert len(flagged) == 1 and (flagged[0]["key"], flagged[0]["t"]) == ("k1", 31.0)
    assert "value 'abc' is not a number" in flagged[0]["rejected"] and "in.csv" in flagged[0]["rejected"]
    assert flagged[0]["max"] is None and flagged[0]["count"] is None
    assert_matches([r for r in got if r["rejected"] is None], rows, ["max", "count"], range=20)

    capsys.readouterr()
    assert run_cli(spark, *args, "--output", tmp_path / "o1") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "value 'abc' is not a number" in line and "in.csv" in line and "--on-bad-row flag" in line


def _stream_with_text_value(tmp_path):
    """A stream's first file with one value that is not a number (k0 at
    t=200.0, 'abc'), read with a double schema: (incoming dir, its good
    rows, the stream arguments)."""
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    rows = make_rows(40, keys=2, seed=3)
    write_csv(incoming / "part-1.csv", rows)
    with open(incoming / "part-1.csv", "a") as f:
        f.write("k0,200.0,abc\n")
    args = ["stream", "--input", incoming, "--output", tmp_path / "out", "--checkpoint", tmp_path / "ckpt",
            "--store", f"file:{tmp_path / 'state'}", "--key", "key", "--time", "t", "--value", "v",
            "--agg", "max", "--range", 30, "--schema", "key STRING, t DOUBLE, v DOUBLE"]
    return incoming, rows, args


def test_stream_text_value_with_a_double_schema_is_flagged_as_not_a_number(spark, tmp_path, capsys):
    _, rows, args = _stream_with_text_value(tmp_path)
    args += ["--on-bad-row", "flag"]
    capsys.readouterr()
    assert run_cli(spark, *args) == 0
    assert "processed 41 rows in 1 micro-batch, 1 row rejected (flagged in column 'rejected');" \
        in capsys.readouterr().out
    # each micro-batch's jobs are described by the query's name
    assert any(re.match(r"mta-spark stream \(stream-\w+\): sliding window max over range 30 s per key\n", d)
               for d in job_descriptions(spark)), job_descriptions(spark)
    got = spark.read.parquet(str(tmp_path / "out")).collect()
    flagged = [r for r in got if r["rejected"] is not None]
    assert [(r["key"], r["t"]) for r in flagged] == [("k0", 200.0)]
    assert "value 'abc' is not a number" in flagged[0]["rejected"] and "part-1.csv" in flagged[0]["rejected"]
    assert_matches([r for r in got if r["rejected"] is None], rows, ["max"], range=30)


def test_stream_text_value_in_error_mode_fails_naming_the_text_and_file(spark, tmp_path, capsys):
    """The same file without --on-bad-row flag: the micro-batch fails on the
    row, saying its text is not a number (not "null or NaN value"), and
    commits nothing: fixed, the file is processed in full from the checkpoint."""
    incoming, rows, args = _stream_with_text_value(tmp_path)
    capsys.readouterr()
    assert run_cli(spark, *args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "row rejected (value 'abc' is not a number (file " in line and "part-1.csv" in line, line
    assert "key='k0', t=200.0, v='abc'" in line and "--on-bad-row flag" in line, line
    write_csv(incoming / "part-1.csv", rows)  # the bad line fixed in place
    assert run_cli(spark, *args) == 0
    assert_matches(spark.read.parquet(str(tmp_path / "out")).collect(), rows, ["max"], range=30)


# -- stream -------------------------------------------------------------------------------
def test_stream_csv_keys_are_text_and_a_file_with_its_columns_moved_is_an_error(spark, tmp_path, capsys):
    """The schema inferred from the files already there reads the key as
    text ("007" and "7": two windows); a later file whose header puts the
    columns in another order fails the query naming the header, never
    read by position into the wrong columns."""
    incoming, out = tmp_path / "in", tmp_path / "out"
    incoming.mkdir()
    (incoming / "a.csv").write_text("host,ts,mem,cpu\n007,10,1,100\n7,20,5,200\n007,30,2,300\n")
    args = ["stream", "--input", incoming, "--output", out, "--checkpoint", tmp_path / "ckpt",
            "--store", f"file:{tmp_path / 'state'}", "--key", "host", "--time", "ts", "--value", "mem",
            "--agg", "max,count", "--range", 100, "--trigger", "available-now"]
    assert run_cli(spark, *args) == 0
    got = sorted((r["host"], r["ts"], r["max"], r["count"]) for r in spark.read.parquet(str(out)).collect())
    assert got == [("007", 10, 1, 1), ("007", 30, 2, 2), ("7", 20, 5, 1)]
    (incoming / "b.csv").write_text("host,ts,cpu,mem\n007,40,900,3\n")
    capsys.readouterr()
    given = ["--schema", "host STRING, ts DOUBLE, mem DOUBLE, cpu DOUBLE"]
    assert run_cli(spark, *args[:4], tmp_path / "out2", "--checkpoint", tmp_path / "ckpt2", *args[7:], *given) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "header" in line.lower() and "b.csv" in line, line


def test_stream_two_runs_available_now(spark, tmp_path, capsys):
    """Files arriving between two available-now runs: the output equals the
    oracle over all rows, each row once."""
    incoming, out, ckpt = tmp_path / "incoming", tmp_path / "out", tmp_path / "ckpt"
    incoming.mkdir()
    first = make_rows(120, keys=4, seed=5, t_lo=0, t_hi=100)
    second = make_rows(80, keys=4, seed=6, t_lo=100.5, t_hi=160)  # later than the first file
    third = make_rows(80, keys=4, seed=7, t_lo=160.5, t_hi=220)
    values = {v for _, _, v in first}
    second = [r for r in second if r[2] not in values]
    values |= {v for _, _, v in second}
    third = [r for r in third if r[2] not in values]
    aggs = ["max", "mean", "count", "first"]
    args = ["stream", "--input", incoming, "--output", out, "--checkpoint", ckpt,
            "--store", f"file:{tmp_path / 'state'}", "--key", "key", "--time", "t", "--value", "v",
            "--agg", ",".join(aggs), "--range", 30, "--trigger", "available-now"]

    write_csv(incoming / "part-1.csv", first)
    assert run_cli(spark, *args) == 0
    assert "processed 120 rows" in capsys.readouterr().out
    assert_matches(spark.read.parquet(str(out)).collect(), first, aggs, range=30)

    write_csv(incoming / "part-2.csv", second)
    write_csv(incoming / "part-3.csv", third)
    assert run_cli(spark, *args) == 0
    assert f"processed {len(second) + len(third)} rows" in capsys.readouterr().out
    result = spark.read.parquet(str(out))
    assert result.columns == ["key", "t", "v", *aggs]
    assert_matches(result.collect(), first + second + third, aggs, range=30)

    assert run_cli(spark, *args) == 0  # nothing new: nothing added
    assert "processed 0 rows" in capsys.readouterr().out
    assert result.count() == len(first) + len(second) + len(third)


def test_stream_restarted_without_partitions_resumes_the_count_of_tasks_it_ran_as(spark, tmp_path, capsys):
    """A stream run with --partitions 3, then restarted without it on a
    session whose count is 2 (the module's, as on a machine with other
    cores): the restart runs as the 3 tasks its records keep, says so, and
    the output equals the oracle over all rows; every task's record says 3
    tasks, stamped by the second micro-batch.  A --partitions the user gives
    stays, and the query fails naming both counts."""
    import stores

    incoming, out, ckpt, state = tmp_path / "incoming", tmp_path / "out", tmp_path / "ckpt", tmp_path / "state"
    incoming.mkdir()
    first = make_rows(120, keys=5, seed=11, t_lo=0, t_hi=100)
    second = make_rows(90, keys=5, seed=12, t_lo=100.5, t_hi=160)  # later than the first file
    second = [r for r in second if r[2] not in {v for _, _, v in first}]
    aggs = ["max", "mean", "count", "first"]
    args = ["stream", "--input", incoming, "--output", out, "--checkpoint", ckpt, "--store", f"file:{state}",
            "--key", "key", "--time", "t", "--value", "v", "--agg", ",".join(aggs), "--range", 30,
            "--trigger", "available-now"]
    default = spark.conf.get("spark.sql.shuffle.partitions")
    assert default == "2"  # the count a restart without --partitions would otherwise run as
    try:
        write_csv(incoming / "part-1.csv", first)
        assert run_cli(spark, *args, "--partitions", 3) == 0
        assert "processed 120 rows" in capsys.readouterr().out
        assert_matches(spark.read.parquet(str(out)).collect(), first, aggs, range=30)

        spark.conf.set("spark.sql.shuffle.partitions", default)  # --partitions set it on the shared session
        write_csv(incoming / "part-2.csv", second)
        code = run_cli(spark, *args)
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert f"processed {len(second)} rows" in captured.out
        assert "resuming as 3 tasks, as this query ran before" in captured.err
        assert_matches(spark.read.parquet(str(out)).collect(), first + second, aggs, range=30)
        with stores.open_store(f"file:{state}") as store:
            records = [n for n in store.window_names() if "/~task-" in n]
            assert sorted(n.rsplit("-", 1)[1] for n in records) == ["0", "1", "2"]
            for record in records:
                meta = stores.decode(store.read_meta(record)[0])
                assert (meta["tasks"], meta["step"]) == (3, 1), record

        write_csv(incoming / "part-3.csv", [("k0", 170.0, 0.5)])
        # the user's count stays, and fails: a usage error whose remedy is the option
        assert run_cli(spark, *args, "--partitions", 2) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "ran as 3 tasks and now run as 2" in line and "start it with --partitions 3 again" in line, line
        assert "spark.sql.shuffle.partitions=" not in line, line
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", default)


@pytest.mark.parametrize("names", [("key", "t", "v"), ("KEY", "T", "V")])
def test_stream_slide_writes_each_window_once_the_watermark_passes_it(spark, tmp_path, capsys, names):
    """--watermark 5s --slide 5s --range 10 over two available-now runs (a
    restart from the checkpoint with windows open), rows out of order
    within the delay, no --store: the windows written are those brute force
    gives over every row that end at or before the final watermark (the
    newest time minus the delay), each once; also with --key, --time and
    --value named but for case, as Spark resolves names."""
    import datetime as dt

    base = dt.datetime(2026, 1, 1)
    incoming, out, ckpt = tmp_path / "incoming", tmp_path / "out", tmp_path / "ckpt"
    incoming.mkdir()
    rows = sorted(make_rows(160, keys=3, seed=23, t_hi=80), key=lambda r: r[1] + random.Random(r[2]).uniform(0, 4))
    args = ["stream", "--input", incoming, "--output", out, "--checkpoint", ckpt, "--schema",
            "key STRING, t TIMESTAMP, v DOUBLE", "--format", "csv", "--key", names[0], "--time", names[1],
            "--value", names[2], "--agg", "max,count", "--range", "10", "--slide", "5s", "--watermark", "5s"]

    def write(name, part):
        with open(incoming / name, "w") as f:
            f.write("key,t,v\n" + "".join(f"{k},{base + dt.timedelta(seconds=t)},{v!r}\n" for k, t, v in part))

    write("part-1.csv", rows[:80])
    assert run_cli(spark, *args) == 0
    first = spark.read.parquet(str(out)).count()
    write("part-2.csv", rows[80:])
    assert run_cli(spark, *args) == 0
    assert "windows in Spark state" in capsys.readouterr().out
    got = [((r["key"], (r["window_end"] - base).total_seconds()), (r["max"], r["count"]))
           for r in spark.read.parquet(str(out)).collect()]
    assert len(got) == len(dict(got)), "a window was written twice"
    want = _slide_windows(rows)
    assert dict(got) == want
    assert 0 < first < len(want)


def _slide_windows(rows) -> dict:
    """Brute force for ``--range 10 --slide 5s --watermark 5s``: (key,
    window end in seconds) -> (max, count) of every window holding rows
    that ends at or before the final watermark (the newest time minus 5)."""
    watermark = max(t for _, t, _ in rows) - 5
    want = {}
    for k in {r[0] for r in rows}:
        times = [t for key, t, _ in rows if key == k]
        for e in range(5 * math.floor(min(times) / 5), 5 * (math.floor(watermark / 5) + 1), 5):
            inside = [v for key, t, v in rows if key == k and e - 10 <= t < e]
            if inside:
                want[(k, float(e))] = (max(inside), len(inside))
    return want


def test_stream_slide_flag_leaves_a_late_row_out_and_counts_it(spark, tmp_path, capsys, caplog):
    """--slide --on-bad-row flag: a row behind the watermark when it arrives
    is left out of every window; the summary and a warning count it, and
    the windows written are those of the other rows."""
    import datetime as dt

    base = dt.datetime(2026, 1, 1)
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    rows = sorted(make_rows(60, keys=2, seed=5, t_hi=40), key=lambda r: r[1])
    late = (rows[0][0], max(t for _, t, _ in rows[:30]) - 6, 999.0)  # the second micro-batch's watermark is past it
    args = ["stream", "--input", incoming, "--output", out, "--checkpoint", tmp_path / "ckpt", "--schema",
            "key STRING, t TIMESTAMP, v DOUBLE", "--format", "csv", "--key", "key", "--time", "t", "--value", "v",
            "--agg", "max,count", "--range", "10", "--slide", "5s", "--watermark", "5s", "--on-bad-row", "flag"]
    for name, part in (("part-1.csv", rows[:30]), ("part-2.csv", [late] + rows[30:])):
        with open(incoming / name, "w") as f:
            f.write("key,t,v\n" + "".join(f"{k},{base + dt.timedelta(seconds=t)},{v!r}\n" for k, t, v in part))
        capsys.readouterr()
        with caplog.at_level(logging.WARNING, logger="spark_ops"):
            assert run_cli(spark, *args) == 0
    assert "1 row rejected (left out of the windows);" in capsys.readouterr().out
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("spark_ops.cli")]
    assert warnings == [f"mta-spark stream: 1 of 31 rows rejected (left out of the windows of {out})"], warnings
    got = [((r["key"], (r["window_end"] - base).total_seconds()), (r["max"], r["count"]))
           for r in spark.read.parquet(str(out)).collect()]
    assert len(got) == len(dict(got)), "a window was written twice"
    assert dict(got) == _slide_windows(rows)


def test_stream_slide_usage_errors(tmp_path, capsys):
    os.makedirs(tmp_path / "in")
    argv = ["stream", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "o"), "--checkpoint",
            str(tmp_path / "c"), "--key", "k", "--time", "t", "--value", "v", "--agg", "max", "--range", "10"]
    assert cli.main(argv + ["--slide", "5"]) == 2
    assert "--slide in a stream writes each window once the watermark" in one_error_line(capsys.readouterr().err)
    assert cli.main(argv) == 2
    assert "needs --store URL" in one_error_line(capsys.readouterr().err)
    state = tmp_path / "state"
    assert cli.main(argv + ["--slide", "5", "--watermark", "5s", "--store", f"file:{state}"]) == 2
    assert "slide= keeps its windows in Spark's state" in one_error_line(capsys.readouterr().err)
    assert not state.exists(), "the unused store was made"
    batch = ["run", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "o"), "--key", "k", "--time", "t",
             "--value", "v", "--agg", "max", "--range", "10", "--slide", "5", "--store", f"file:{state}"]
    assert cli.main(batch) == 2, "a batch --slide job would not use its --store either"
    assert "store= would never be used" in one_error_line(capsys.readouterr().err)
    assert not state.exists(), "the unused store was made"


def test_stream_interval_trigger_stops_cleanly_on_sigint(spark, tmp_path, capsys):
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    rows = make_rows(50, keys=3, seed=8)
    write_json(incoming / "a.json", rows)

    def interrupt_when_written():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (out / "_spark_metadata" / "0").exists():  # the first micro-batch is committed
                time.sleep(0.5)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.2)

    threading.Thread(target=interrupt_when_written, daemon=True).start()
    code = run_cli(spark, "stream", "--input", incoming, "--output", out, "--checkpoint", tmp_path / "ckpt",
                   "--store", f"file:{tmp_path / 'state'}", "--key", "key", "--time", "t", "--value", "v",
                   "--agg", "sum", "--rows", 3, "--trigger", "1s")
    assert code == 0
    assert "stopped on request" in capsys.readouterr().out
    assert not spark.streams.active
    assert_matches(spark.read.parquet(str(out)).collect(), rows, ["sum"], count=3)


def test_stream_row_older_than_its_window_is_an_error(spark, tmp_path, capsys):
    """Streaming can't go back in time: a key's row older than its newest is
    rejected (status 2, one line naming the row)."""
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    args = ["stream", "--input", incoming, "--output", tmp_path / "out", "--checkpoint", tmp_path / "ckpt",
            "--store", f"file:{tmp_path / 'state'}", "--key", "key", "--time", "t", "--value", "v",
            "--agg", "max", "--range", 10]
    write_csv(incoming / "1.csv", [("a", 100.0, 1.0), ("b", 5.0, 2.0)])
    assert run_cli(spark, *args) == 0
    write_csv(incoming / "2.csv", [("a", 50.0, 3.0)])
    capsys.readouterr()
    assert run_cli(spark, *args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "row rejected" in line and "older" in line and "key='a'" in line


def test_stream_empty_directory_needs_a_schema(spark, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    args = ["stream", "--input", tmp_path / "empty", "--output", tmp_path / "o", "--checkpoint",
            tmp_path / "c", "--store", f"file:{tmp_path / 's'}", "--key", "k", "--time", "t", "--value", "v",
            "--agg", "max", "--range", 5]
    assert run_cli(spark, *args) == 2
    assert "--schema" in one_error_line(capsys.readouterr().err)


# -- demo ----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["auto", "amta"])
def test_demo_tiny(spark, tmp_path, capsys, engine):
    """The demo on the columnar engine (its default), and with --engine amta
    on the MTA with the windows in the embedded file store."""
    out = tmp_path / "demo"
    assert run_cli(spark, "demo", "--hosts", 5, "--rows", 3000, "--out", out, "--engine", engine) == 0
    printed = capsys.readouterr()
    assert "top 5 hosts by peak memory" in printed.out
    assert "match pandas rolling" in printed.out
    assert "3,000 from 5 hosts" in printed.out
    assert "running windows: done" in printed.err  # progress lines
    assert f"engine         {'columnar' if engine == 'auto' else engine}: " in printed.out
    assert (f"mta-spark demo: sliding window max, mean, stddev over 1 h per host, "
            f"engine {'columnar' if engine == 'auto' else engine}") in job_descriptions(spark)
    windows = spark.read.parquet(str(out / "windows"))
    assert windows.columns == ["host", "ts", "mem_mb", "max", "mean", "stddev"]
    assert windows.count() == 3000
    assert windows.select("host").distinct().count() == 5
    png = (out / "host.png").read_bytes()
    assert len(png) > 1000 and png.startswith(PNG_SIGNATURE)
    # an MTA's default store is the run's own, in its scratch directory, gone with it: no state is left
    assert ("each moving to the store file://" in printed.out) == (engine == "amta")
    assert sorted(os.listdir(out)) == [".mta-demo", "host.png", "input", "windows"]


def test_demo_refuses_an_out_directory_holding_files_it_did_not_write(spark, tmp_path, capsys):
    """--out with an input/ (or windows/) of the user's is refused, the
    files kept; an --out the demo wrote before is its to replace."""
    out = tmp_path / "mine"
    (out / "input").mkdir(parents=True)
    (out / "input" / "raw-2023.csv").write_text("precious")
    (out / "notes.txt").write_text("mine too")
    args = ["demo", "--hosts", 2, "--rows", 200, "--out", out]
    assert run_cli(spark, *args) == 2
    assert "holds input, which mta-spark demo did not write" in one_error_line(capsys.readouterr().err)
    assert (out / "input" / "raw-2023.csv").read_text() == "precious"
    fresh = tmp_path / "fresh"
    (fresh).mkdir()
    (fresh / "notes.txt").write_text("mine")
    assert run_cli(spark, "demo", "--hosts", 2, "--rows", 200, "--out", fresh) == 0
    assert run_cli(spark, "demo", "--hosts", 2, "--rows", 300, "--out", fresh) == 0  # its own outputs, replaced
    assert spark.read.parquet(str(fresh / "windows")).count() == 300 and (fresh / "notes.txt").read_text() == "mine"


def test_telemetry_generator_shape():
    from spark_ops.telemetry import fleet_memory

    df = fleet_memory(20, 20_000, seed=3)
    assert len(df) == 20_000 and df["host"].nunique() == 20
    assert df["ts"].is_monotonic_increasing
    gaps = df.groupby("host")["ts"].diff().dt.total_seconds().dropna()
    assert (gaps == 0).any()  # equal timestamps happen
    assert (gaps < 1).mean() > 0.1 and (gaps > 120).any()  # bursts and quiet spells
    assert (df["mem_mb"] > 0).all()
    assert fleet_memory(20, 20_000, seed=3).equals(df)


# -- errors ---------------------------------------------------------------------------------
def test_run_slide_gives_one_row_per_key_and_window(spark, tmp_path, capsys):
    """--range 10 --slide 5: per key, one row per window [e - 10, e) ending at
    a multiple of 5 that holds rows, against brute force over the input."""
    import math

    rows = make_rows(120, keys=3, seed=21, t_hi=60)
    write_csv(tmp_path / "in.csv", rows)
    assert run_cli(spark, *_run_args(tmp_path / "in.csv", tmp_path / "out", "--slide", "5s", agg="max,count")) == 0
    got = {(r["key"], r["window_end"]): (r["max"], r["count"])
           for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    want = {}
    for k in {r[0] for r in rows}:
        times = [t for key, t, _ in rows if key == k]
        for e in range(5 * (math.floor(min(times) / 5) + 1), 5 * (math.floor(max(times) / 5) + 3), 5):
            inside = [v for key, t, v in rows if key == k and e - 10 <= t < e]
            if inside:
                want[(k, float(e))] = (max(inside), len(inside))
    assert got == want
    assert run_cli(spark, *_run_args(tmp_path / "in.csv", tmp_path / "o2", "--slide", "5", "--keep-columns")) == 2
    assert "--keep-columns" in one_error_line(capsys.readouterr().err)


def test_run_slide_over_a_date_column_names_the_schema_that_reads_it(spark, tmp_path, capsys):
    """--slide over a CSV time column read as a date is refused with the
    --schema that reads it as a timestamp (a CLI user cannot cast); that
    schema then gives the windows brute force gives over the days' midnights."""
    import datetime as dt

    rows = [(f"h{i % 2}", dt.date(2026, 1, 1) + dt.timedelta(days=(i * 7) % 9), float(i)) for i in range(30)]
    src = tmp_path / "in.csv"
    src.write_text("key,t,v\n" + "".join(f"{k},{d.isoformat()},{v}\n" for k, d, v in rows))
    args = _run_args(src, tmp_path / "out", "--slide", "1d", size=("--range", "2d"))
    capsys.readouterr()
    assert run_cli(spark, *args, "--schema", "key STRING, t DATE, v DOUBLE") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "time column 't' is date" in line and "--schema '..., t TIMESTAMP, ...'" in line, line
    assert "cast it" not in line, line
    assert run_cli(spark, *args, "--schema", "key STRING, t TIMESTAMP, v DOUBLE") == 0
    got = {(r["key"], r["window_end"].date()): r["max"] for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    want = {}
    for k, d, _ in rows:
        for end in (d + dt.timedelta(days=1), d + dt.timedelta(days=2)):  # windows [end - 2d, end) holding d
            want[(k, end)] = max(v for key, day, v in rows if key == k and end - dt.timedelta(days=2) <= day < end)
    assert got == want


def test_run_output_that_cannot_be_written_names_the_cause(spark, tmp_path, capsys):
    """An output directory Spark cannot create: the one error line is the
    JVM's root cause (what failed and where), not Py4J's name of the call."""
    src = tmp_path / "in.csv"
    write_csv(src, make_rows(20, keys=2, seed=9))
    capsys.readouterr()
    assert run_cli(spark, *_run_args(src, "/proc/mta-no-such-output")) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "Mkdirs failed to create file:/proc/mta-no-such-output" in line, line
    assert "An error occurred while calling" not in line, line


def _run_args(src, out, *extra, agg="max", size=("--range", "10")):
    return ["run", "--input", str(src), "--output", str(out), "--key", "key", "--time", "t",
            "--value", "v", "--agg", agg, *size, *extra]


@pytest.fixture
def small_csv(tmp_path):
    src = tmp_path / "in.csv"
    write_csv(src, make_rows(20, keys=2, seed=9))
    return src


def test_error_missing_column(spark, small_csv, tmp_path, capsys):
    args = ["run", "--input", small_csv, "--output", tmp_path / "o", "--key", "host", "--time", "t",
            "--value", "v", "--agg", "max", "--range", 10]
    assert run_cli(spark, *args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "'host'" in line and "key, t, v" in line


@pytest.mark.parametrize("case, extra, expect", [
    ("unknown aggregation", dict(agg="max,median"), "unknown aggregation 'median'"),
    ("bad --conf", dict(size=("--rows", "3", "--conf", "spark.executor.memory")), "expected KEY=VALUE"),
    ("bad --buffer-size", dict(size=("--rows", "3", "--buffer-size", "0")), "must be at least 1"),
    ("both sizes", dict(size=("--range", "10", "--rows", "3")), "not allowed with"),
    ("neither size", dict(size=()), "one of the arguments --range --rows is required"),
    ("negative range", dict(size=("--range", "-4")), "must be positive, got '-4'"),
    ("bad range", dict(size=("--range", "4 parsecs")), "must be a number of seconds or a duration"),
    ("unknown frame", dict(size=("--range", "4", "--frame", "pandas")), "invalid choice: 'pandas'"),
])
def test_usage_errors(small_csv, tmp_path, capsys, case, extra, expect):
    assert cli.main(_run_args(small_csv, tmp_path / "o", **extra)) == 2  # no Spark needed
    assert expect in one_error_line(capsys.readouterr().err)


def test_stream_expire_after_needs_an_interval_trigger(tmp_path, capsys):
    os.makedirs(tmp_path / "in")
    argv = ["stream", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "o"), "--checkpoint",
            str(tmp_path / "c"), "--store", f"file:{tmp_path / 's'}", "--key", "k", "--time", "t", "--value", "v",
            "--agg", "max", "--range", "10", "--expire-after", "60"]
    assert cli.main(argv) == 2  # the default trigger is available-now
    assert "--expire-after needs an interval --trigger" in one_error_line(capsys.readouterr().err)


def test_error_unreachable_store(small_csv, tmp_path, capsys):
    assert cli.main(_run_args(small_csv, tmp_path / "o", "--store", "redis://127.0.0.1:1")) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "redis://127.0.0.1:1" in line and "unavailable" in line
    assert "after 2 attempt(s)" in line, line  # checked up front with few retries, before Spark


def test_verbose_keeps_an_input_errors_exit_status(spark, tmp_path, capsys):
    """--verbose adds the traceback but a row the job cannot take still exits 2."""
    src = tmp_path / "in.csv"
    write_csv(src, [("a", 1.0, 2.0), ("a", 2.0, None)])
    assert run_cli(spark, *_run_args(src, tmp_path / "o"), "-v") == 2
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert "mta-spark: error: row rejected (null or NaN value)" in err
    assert "--verbose shows the details" not in err


def test_error_missing_input(tmp_path, capsys):
    assert cli.main(_run_args(tmp_path / "nope.csv", tmp_path / "o")) == 2
    assert "does not exist" in one_error_line(capsys.readouterr().err)
    assert cli.main(["stream", "--input", str(tmp_path / "nodir"), "--output", "o", "--checkpoint", "c",
                     "--store", "file:" + str(tmp_path / "s"), "--key", "k", "--time", "t", "--value", "v",
                     "--agg", "max", "--rows", "2"]) == 2
    assert "does not exist" in one_error_line(capsys.readouterr().err)


def test_error_unreadable_input(small_csv, tmp_path):
    """A subprocess that cannot read the input (as root: without the
    capabilities that let root read any file, dropped with setpriv)."""
    prefix = []
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, and no setpriv (util-linux) to drop root's read-anything capabilities")
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", "--"]
    small_csv.chmod(0)
    try:
        done = _subprocess(*_run_args(small_csv, tmp_path / "o"), prefix=prefix)
    finally:
        small_csv.chmod(0o644)
    assert done.returncode == 2, done.stderr
    assert "permission denied" in one_error_line(done.stderr)


def test_failure_message_from_the_exception_chain():
    """The project's errors count wherever they are in the chain; a worker's,
    known only from its traceback text, by the class that text names."""
    from spark_ops.spec import SlidingWindowError
    from stores.errors import StoreUnavailable

    try:
        try:
            raise SlidingWindowError("row rejected (null or NaN value): pass on_bad_row='flag'")
        except SlidingWindowError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as e:
        assert cli.failure_message(e) == ("row rejected (null or NaN value): pass --on-bad-row flag", 2)
    assert cli.failure_message(StoreUnavailable("down")) == ("StoreUnavailable: down", 1)

    def worker(last_line):
        return RuntimeError(f'Traceback (most recent call last):\n  File "w.py", line 1, in f\n{last_line}\n')

    assert cli.failure_message(worker("stores.errors.StoreConfigError: bad x")) == ("StoreConfigError: bad x", 2)
    assert cli.failure_message(worker("ValueError: nope")) == ("ValueError: nope", 1)
    assert cli.failure_message(worker("elsewhere.SlidingWindowError: nope")) == ("SlidingWindowError: nope", 1)


def test_session_ui_on_unless_no_ui():
    """A session mta-spark starts has the Spark UI on; --no-ui turns it off,
    and --conf still has the last word."""
    from spark_ops.cli.session import session_conf

    def ui(*argv):
        return session_conf(cli.build_parser().parse_args(["demo", *argv]), "local[2]")["spark.ui.enabled"]

    assert ui() == "true"
    assert ui("--no-ui") == "false"
    assert ui("--conf", "spark.ui.enabled=false") == "false"
    assert ui("--no-ui", "--conf", "spark.ui.enabled=true") == "true"


def test_sessions_cut_arrow_batches_by_rows_alone_unless_configured(spark):
    """Sessions of this project (mta-spark's, local_session's: this module's)
    turn off Spark's Arrow byte check, the JVM reads the setting, and a
    session's own configuration keeps the last word: ``--conf`` for
    mta-spark, the submit configuration for a session started elsewhere."""
    from spark_ops.cli.session import session_conf
    from spark_ops.session import ARROW_BATCH_CONF, apply_session_defaults

    (key, value), = ARROW_BATCH_CONF.items()
    assert int(value) == 2**31 - 1  # Spark skips the check for Int.MaxValue only
    assert spark._jsparkSession.sessionState().conf().arrowMaxBytesPerBatch() == 2**31 - 1

    def conf(*argv):
        return session_conf(cli.build_parser().parse_args(["demo", *argv]), "local[2]")[key]

    assert conf() == value
    assert conf("--conf", f"{key}=1048576") == "1048576"

    class Submitted:  # a session spark-submit started: its SparkConf, and what was set on it since
        def __init__(self, submitted):
            self.submitted, self.set_since = submitted, {}
            self.sparkContext = self.conf = self

        def getConf(self):
            return self

        def contains(self, k):
            return k in self.submitted

        def get(self, k, default=None):
            return self.submitted.get(k, default)

        def set(self, k, v):
            self.set_since[k] = v

    cluster = {"spark.executor.instances": "2", "spark.executor.cores": "1"}
    session = Submitted(cluster)
    apply_session_defaults(session)
    assert session.set_since[key] == value
    session = Submitted({**cluster, key: "1048576"})
    apply_session_defaults(session)
    assert key not in session.set_since


def test_sessions_write_parquet_timestamps_as_microseconds(spark, tmp_path):
    """Sessions of this project write Parquet's standard timestamp (int64
    microseconds, UTC), which pyarrow reads as it is, not INT96; Spark
    reads the values back unchanged, and mta-spark's sessions have it
    unless ``--conf`` says otherwise."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_ops.cli.session import session_conf
    from spark_ops.session import PARQUET_CONF

    (key, value), = PARQUET_CONF.items()
    times = [dt.datetime(2024, 3, 1, 12, 0, 0, 123456), dt.datetime(1900, 1, 1), dt.datetime(9999, 12, 31, 23, 59)]
    df = spark.createDataFrame([(t,) for t in times], "ts timestamp")
    df.write.parquet(str(tmp_path / "out"))
    column = pq.read_schema(next((tmp_path / "out").glob("*.parquet"))).field("ts")
    assert column.type == pa.timestamp("us", tz="UTC"), column.type  # INT96 reads as timestamp[ns]
    assert sorted(r.ts for r in spark.read.parquet(str(tmp_path / "out")).collect()) == sorted(times)

    def conf(*argv):
        return session_conf(cli.build_parser().parse_args(["demo", *argv]), "local[2]")[key]

    assert conf() == value
    assert conf("--conf", f"{key}=INT96") == "INT96"


def test_python_workers_talk_to_the_jvm_over_a_unix_socket(spark):
    """Sessions of this project connect executors to their Python workers
    over a Unix domain socket, not loopback TCP (PYTHON_SOCKET_CONF): a
    worker running a task holds a Unix socket and no TCP connection;
    mta-spark's sessions take ``--conf`` over it."""
    from spark_ops.cli.session import session_conf
    from spark_ops.session import PYTHON_SOCKET_CONF, local_session_conf

    def sockets(batches):
        import psutil
        import pyarrow as pa

        me = psutil.Process()
        for _ in batches:
            yield pa.record_batch([pa.array([len(me.net_connections("tcp"))]),
                                   pa.array([len(me.net_connections("unix"))])], names=["tcp", "unix"])

    rows = spark.range(4, numPartitions=2).mapInArrow(sockets, "tcp long, unix long").collect()
    assert len(rows) == 2 and all(r.tcp == 0 and r.unix >= 1 for r in rows), rows
    (key, value), = PYTHON_SOCKET_CONF.items()
    assert local_session_conf()[key] == value
    chosen = session_conf(cli.build_parser().parse_args(["demo", "--conf", f"{key}=false"]), "local[2]")
    assert local_session_conf(**chosen)[key] == "false"  # what mta-spark's local_session starts with


def test_help_in_process(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(c in text for c in ("demo", "run", "stream"))
    for command in ("demo", "run", "stream"):
        assert cli.main([command, "--help"]) == 0
        assert "--" in capsys.readouterr().out


# -- the real exit-code path: subprocesses ------------------------------------------------------
def _subprocess(*argv, timeout=180, prefix=()):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([*prefix, sys.executable, "-m", "spark_ops.cli", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def test_subprocess_help_and_usage_error(small_csv, tmp_path):
    done = _subprocess("--help")
    assert done.returncode == 0 and "mta-spark" in done.stdout and "stream" in done.stdout
    done = _subprocess(*_run_args(small_csv, tmp_path / "o", agg="max,nope"))
    assert done.returncode == 2 and done.stdout == ""
    assert "unknown aggregation 'nope'" in one_error_line(done.stderr)


@pytest.mark.slow
def test_subprocess_failing_job_prints_one_line(tmp_path):
    """A job that fails inside Spark (a null value) exits 2 with one line:
    no Java stack trace, no Python traceback (only the JVM's start-up notice)."""
    src = tmp_path / "in.csv"
    write_csv(src, [("a", 1.0, 2.0), ("a", 2.0, None)])
    done = _subprocess(*_run_args(src, tmp_path / "o"), "--master", "local[1]", "--partitions", "1")
    assert done.returncode == 2, done.stderr
    err = "\n".join(line for line in done.stderr.splitlines()
                    if not line.startswith("WARNING: Using incubator modules"))
    assert "row rejected (null or NaN value)" in one_error_line(err)
    assert "Exception" not in done.stderr


@pytest.mark.slow
def test_subprocess_run_with_a_schema(tmp_path):
    """--schema in a process with no Spark session before mta-spark starts
    one (the console script's case): the input is read with it, and a bad
    one is a usage error naming it."""
    from pyspark.sql import Row
    import pyarrow.parquet as pq

    rows = make_rows(40, keys=2, seed=6)
    src, out = tmp_path / "in.csv", tmp_path / "out"
    write_csv(src, rows)
    args = [*_run_args(src, out, agg="max,count"), "--master", "local[1]", "--partitions", "1"]
    done = _subprocess(*args, "--schema", "key STRING, t DOUBLE, v DOUBLE")
    assert done.returncode == 0, done.stderr
    assert_matches([Row(**r) for r in pq.read_table(out).to_pylist()], rows, ["max", "count"], range=10)
    done = _subprocess(*args, "--overwrite", "--schema", "key STRING, t DOUBLE, v")
    assert done.returncode == 2, done.stderr
    err = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("WARNING: Using incubator"))
    assert "bad --schema 'key STRING, t DOUBLE, v'" in one_error_line(err)


@pytest.mark.slow
def test_subprocess_conf_and_store_sizes(tmp_path):
    """--conf reaches the session mta-spark starts (one shuffle partition:
    one output file), and --buffer-size/--cache-size of 1 pair send nearly
    every pair through the file store; the output is still exact."""
    from pyspark.sql import Row
    import pyarrow.parquet as pq

    rows = make_rows(200, keys=3, seed=4)
    src, out = tmp_path / "in.csv", tmp_path / "out"
    write_csv(src, rows)
    done = _subprocess(*_run_args(src, out, agg="max,mean,count", size=("--range", "12")), "--master", "local[1]",
                       "--conf", "spark.sql.shuffle.partitions=1", "--buffer-size", "1", "--cache-size", "1",
                       "--store", f"file:{tmp_path / 'state'}", "--engine", "amta")
    assert done.returncode == 0, done.stderr
    assert len([f for f in os.listdir(out) if f.endswith(".parquet")]) == 1
    got = [Row(**r) for r in pq.read_table(out).to_pylist()]
    assert_matches(got, rows, ["max", "mean", "count"], range=12)

"""``mta-spark stream`` restarts: the schema and the name in the store a
query keeps across them, paths it refuses, and its progress; and the CSV
time column read as text (``run``).  Helpers and the session's settings are
tests/test_cli.py's."""

from __future__ import annotations

import json
import os
import re

import pytest

from spark_ops import cli
from spark_ops.cli import checkpoint as checkpoint_
from spark_ops.cli import progress as progress_
# SPARK_CONF: the module session's settings, which the spark fixture reads from this module
from tests.test_cli import SPARK_CONF, assert_matches, make_rows, one_error_line, run_cli, write_csv  # noqa: F401


def _stream_args(incoming, out, ckpt, state, *extra, agg="max,sum", size=("--range", "100")):
    return ["stream", "--input", incoming, "--output", out, "--checkpoint", ckpt, "--store", f"file:{state}",
            "--key", "host", "--time", "ts", "--value", "mem", "--agg", agg, *size, *extra]


def test_stream_restart_keeps_the_schema_it_started_with(spark, tmp_path, capsys):
    """The first run infers integers; a file with decimals arriving later
    changes no output column's type (Spark reads the output back whole),
    its rows flagged naming the text and file; a --schema that changes an
    output column's type is refused naming both types."""
    incoming = tmp_path / "in"
    incoming.mkdir()
    args = _stream_args(incoming, tmp_path / "out", tmp_path / "ckpt", tmp_path / "state", "--on-bad-row", "flag")
    (incoming / "p1.csv").write_text("host,ts,mem\na,10,1\na,20,2\n")
    assert run_cli(spark, *args) == 0
    (incoming / "p2.csv").write_text("host,ts,mem\na,30.5,3\na,40,4.5\na,50,5\n")
    capsys.readouterr()
    assert run_cli(spark, *args) == 0
    captured = capsys.readouterr()
    assert "schema as the query started with" in captured.err
    assert "processed 3 rows in 1 micro-batch, 2 rows rejected" in captured.out, captured.out
    result = spark.read.parquet(str(tmp_path / "out"))
    types = dict(result.dtypes)
    assert (types["ts"], types["mem"], types["max"], types["sum"]) == ("int", "int", "bigint", "bigint"), types
    got = {r["ts"]: (r["max"], r["sum"], r["rejected"]) for r in result.collect()}
    assert got[10] == (1, 1, None) and got[20] == (2, 3, None) and got[50] == (5, 8, None), got
    rejected = sorted(r["rejected"] for r in result.collect() if r["rejected"])
    kept = json.loads((tmp_path / "ckpt" / checkpoint_.FILE).read_text())
    assert kept["format"] == "csv" and kept["name"].startswith("stream-")
    assert rejected[0].startswith("time '30.5' is not an integer (file ") and "p2.csv" in rejected[0], rejected
    assert rejected[1].startswith("value '4.5' is not an integer (file ") and "p2.csv" in rejected[1], rejected

    capsys.readouterr()
    assert run_cli(spark, *args, "--schema", "host STRING, ts DOUBLE, mem INT") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "'ts' DOUBLE" in line and "started with 'ts' INT" in line and "new --checkpoint" in line, line


def test_stream_refuses_an_output_or_checkpoint_that_overlaps_the_input(tmp_path, capsys):
    """As run refuses (one rule): the sink's log in the input would hide the
    input's files, a checkpoint's files there would be read as input."""
    incoming = tmp_path / "in"
    incoming.mkdir()
    write_csv(incoming / "a.csv", [("a", 1.0, 2.0)], header=("host", "ts", "mem"))
    cases = [(incoming, tmp_path / "ckpt", "--output"), (incoming / "out", tmp_path / "ckpt", "--output"),
             (tmp_path / "out", incoming / "ckpt", "--checkpoint"), (tmp_path, tmp_path / "ckpt", "--output")]
    for out, ckpt, option in cases:
        assert cli.main([str(a) for a in _stream_args(incoming, out, ckpt, tmp_path / "state")]) == 2  # no Spark
        line = one_error_line(capsys.readouterr().err)
        assert f"{option} " in line and "overlap" in line, line
    assert sorted(p.name for p in incoming.iterdir()) == ["a.csv"]


def test_stream_checkpoint_reached_by_another_path_finds_its_windows(spark, tmp_path, capsys, monkeypatch):
    """The same checkpoint through a symlink or with a trailing slash keeps
    the query's windows; so does a checkpoint an earlier version started
    (no mta-spark.json: named by its location as typed), whether typed as
    then or resolved."""
    base = tmp_path / "real"
    incoming = base / "in"
    incoming.mkdir(parents=True)
    os.symlink(base, tmp_path / "link")
    rows = [("a", float(t), float(t % 7)) for t in range(10, 130, 10)]

    def run(ckpt, part):
        write_csv(incoming / f"p{part}.csv", rows[3 * part: 3 * part + 3], header=("host", "ts", "mem"))
        code = run_cli(spark, *_stream_args(incoming, base / "out", ckpt, base / "state", agg="count,sum"))
        assert code == 0, capsys.readouterr().err
        assert_matches(spark.read.parquet(str(base / "out")).select("host", "ts", "mem", "count", "sum").collect(),
                       rows[: 3 * part + 3], ["count", "sum"], range=100)

    run(base / "ckpt", 0)
    run(f"{tmp_path / 'link' / 'ckpt'}/", 1)  # the same directory through a symlink, a trailing slash
    (base / "ckpt" / checkpoint_.FILE).unlink()  # as an earlier version left it, its path typed resolved
    run(base / "ckpt", 2)
    assert (base / "ckpt" / checkpoint_.FILE).exists()

    # an earlier version's query started through the symlink: named by that path
    base = tmp_path / "real2"
    incoming = base / "in"
    incoming.mkdir(parents=True)
    os.symlink(base, tmp_path / "link2")
    typed = checkpoint_.Checkpoint.names
    with monkeypatch.context() as m:
        m.setattr(checkpoint_.Checkpoint, "names", lambda self: typed(self)[-1:])
        run(tmp_path / "link2" / "ckpt", 0)
    (base / "ckpt" / checkpoint_.FILE).unlink()
    run(tmp_path / "link2" / "ckpt", 1)  # its resolved name holds nothing: found by its first task's record
    assert json.loads((base / "ckpt" / checkpoint_.FILE).read_text())["name"] == \
        checkpoint_._name(str(tmp_path / "link2" / "ckpt"))


def test_stream_prints_task_progress_during_a_micro_batch(spark, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress_, "EVERY", 0.0)
    incoming = tmp_path / "in"
    incoming.mkdir()
    write_csv(incoming / "p.csv", make_rows(3000, keys=4, seed=2, t_hi=3000), header=("host", "ts", "mem"))
    args = _stream_args(incoming, tmp_path / "out", tmp_path / "ckpt", tmp_path / "state", agg="max")
    assert run_cli(spark, *args) == 0
    err = capsys.readouterr().err
    assert re.search(r"^    streaming: \d+/\d+ tasks done, \d+ running", err, re.M), err


# -- a CSV time column read as text (run) ------------------------------------------------
@pytest.mark.parametrize("times, bad, kind", [
    ([str(t) for t in range(10, 70, 10)], "x2", "a number"),
    ([f"2026-01-01T00:{t // 60:02d}:{t % 60:02d}Z" for t in range(10, 70, 10)], "noon", "a timestamp"),
])
def test_run_csv_time_with_a_text_flags_that_row_and_keeps_the_rest(spark, tmp_path, capsys, times, bad, kind):
    src = tmp_path / "in.csv"
    src.write_text("host,ts,mem\n" + "".join(f"a,{t},{i}\n" for i, t in enumerate(times)) + f"a,{bad},9\n")
    args = ["run", "--input", src, "--key", "host", "--time", "ts", "--value", "mem", "--agg", "count",
            "--range", 25]
    assert run_cli(spark, *args, "--output", tmp_path / "o1", "--on-bad-row", "flag") == 0
    assert "wrote 7 rows" in capsys.readouterr().out
    got = spark.read.parquet(str(tmp_path / "o1")).orderBy("mem").collect()
    assert [r["count"] for r in got] == [1, 2, 3, 3, 3, 3, None]
    reason = got[-1]["rejected"]
    assert reason.startswith(f"time '{bad}' is not {kind} (file ") and "in.csv" in reason, reason
    capsys.readouterr()
    assert run_cli(spark, *args, "--output", tmp_path / "o2") == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"row rejected (time '{bad}' is not {kind} (file " in line and "in.csv" in line, line
    assert f"ts='{bad}'" in line and "--on-bad-row flag" in line, line


def test_run_time_as_text_names_the_type_its_texts_have(spark, tmp_path, capsys):
    """JSON times as text: the --schema remedy names the type they parse as."""
    src = tmp_path / "ts.json"
    src.write_text("".join(f'{{"host": "a", "ts": "{t}", "mem": 1.0}}\n' for t in (10, 20, 30)))
    args = ["--key", "host", "--time", "ts", "--value", "mem", "--agg", "max", "--range", 15]
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", *args) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "time column 'ts' is string" in line and "--schema '..., ts DOUBLE (seconds), ...'" in line, line
    assert "df.withColumn" not in line, line  # the API's remedy is for Python callers


def test_run_csv_with_a_header_alone_says_it_has_no_rows(spark, tmp_path, capsys):
    src = tmp_path / "empty.csv"
    src.write_text("host,ts,mem\n")
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", "--key", "host", "--time", "ts",
                   "--value", "mem", "--agg", "max", "--range", 15) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "has no rows" in line and "--schema" in line, line


def test_run_schema_value_that_is_not_a_number_is_named_as_in_stream(spark, tmp_path, capsys):
    """A --schema DOUBLE value column: its text is kept for the reason, as stream does."""
    src = tmp_path / "in.csv"
    src.write_text("host,ts,mem\na,1,1.5\na,2,abc\n")
    assert run_cli(spark, "run", "--input", src, "--output", tmp_path / "o", "--key", "host", "--time", "ts",
                   "--value", "mem", "--agg", "max", "--range", 15, "--on-bad-row", "flag",
                   "--schema", "host STRING, ts DOUBLE, mem DOUBLE") == 0
    got = spark.read.parquet(str(tmp_path / "o")).orderBy("ts").collect()
    assert got[0]["max"] == 1.5 and got[1]["rejected"].startswith("value 'abc' is not a number (file "), got


def test_output_that_cannot_be_made_is_a_usage_error_before_spark(tmp_path, capsys):
    src = tmp_path / "in.csv"
    write_csv(src, [("a", 1.0, 2.0)])
    (tmp_path / "r.csv").write_text("not a directory")
    argv = ["run", "--input", str(src), "--output", str(tmp_path / "r.csv" / "windows"), "--key", "key", "--time", "t",
            "--value", "v", "--agg", "max", "--range", "10"]
    assert cli.main(argv) == 2  # no Spark
    line = one_error_line(capsys.readouterr().err)
    assert "cannot write --output" in line and "is a file" in line, line


def test_run_malformed_json_line_is_named_as_malformed(spark, tmp_path, capsys):
    """Spark's text of a JSON line it could not parse names the row, not a null key."""
    src = tmp_path / "in.json"
    src.write_text('{"host": "a", "ts": 1, "mem": 1.0}\n{"host": "a", "ts": 2, "mem": \n'
                   '{"host": "a", "ts": 3, "mem": 3.0}\n')
    args = ["run", "--input", src, "--key", "host", "--time", "ts", "--value", "mem", "--agg", "max", "--range", 15]
    assert run_cli(spark, *args, "--output", tmp_path / "o1", "--on-bad-row", "flag") == 0
    got = spark.read.parquet(str(tmp_path / "o1")).collect()
    assert sorted(r["max"] for r in got if r["rejected"] is None) == [1.0, 3.0]
    (reason,) = [r["rejected"] for r in got if r["rejected"] is not None]
    assert reason.startswith("""malformed record '{"host": "a", "ts": 2, "mem":' (file """) and "in.json" in reason
    capsys.readouterr()
    assert run_cli(spark, *args, "--output", tmp_path / "o2") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "row rejected (malformed record '" in line and "in.json" in line and "--on-bad-row flag" in line, line

"""``mta-spark run`` and ``stream`` with several value columns (``--value
cpu,mem``, ``--agg 'max(cpu)'``) against the brute-force oracle of
tests/values_oracle.py, and ``run --slide --on-bad-row flag``, whose bad
rows are left out of the windows and counted, against brute force over
the good rows.  The session and helpers are tests/test_cli.py's.
"""

from __future__ import annotations

import logging
import math
import random
import re

import pytest

from spark_ops import cli
from tests.test_cli import SPARK_CONF as TEST_CLI_SPARK_CONF, _run_args, make_rows, one_error_line, run_cli, write_csv


#: tests/test_cli.py's session settings.
SPARK_CONF = dict(TEST_CLI_SPARK_CONF, app="test_cli_values")


def _usage_csv(path, rows, extra=""):
    """tests/values_oracle.py's rows as a CSV ``id,k,t,cpu,mem`` (a null as
    an empty field, NaN as ``NaN``), and ``extra`` lines appended."""
    def field(x):
        if isinstance(x, str):
            return x
        return "" if x is None else "NaN" if isinstance(x, float) and math.isnan(x) else repr(x)

    with open(path, "w") as f:
        f.write("id,k,t,cpu,mem\n")
        for r in rows:
            f.write(",".join(field(r[c]) for c in ("id", "k", "t", "cpu", "mem")) + "\n")
        f.write(extra)


def test_run_several_value_columns_against_the_oracle(spark, tmp_path, capsys):
    """--value cpu,mem with --agg naming each aggregation's column, repeated
    and comma-separated: columns max_cpu, ...; each row equals the
    brute-force oracle over (cpu, mem) tuples, a null in either column is a
    flagged row, and mem's longs stay exact (2^53 + 1)."""
    from tests.values_oracle import assert_rows, expected, names_of, random_rows

    rows = random_rows(random.Random(41), nulls=0.1)
    _usage_csv(tmp_path / "in.csv", rows)
    aggs = ["max(cpu)", "mean(cpu)", "min(mem)", "sum(mem)", "count(mem)", "last(mem)"]
    assert run_cli(spark, "run", "--input", tmp_path / "in.csv", "--output", tmp_path / "out", "--key", "k",
                   "--time", "t", "--value", "cpu,mem", "--agg", "max(cpu)", "--agg", "mean(cpu), min(mem)",
                   "--agg", "sum(mem),count(mem),last(mem)", "--range", "7", "--keep-columns",
                   "--on-bad-row", "flag") == 0
    names = names_of(aggs)
    result = spark.read.parquet(str(tmp_path / "out"))
    assert result.columns == ["id", "k", "t", "cpu", "mem", *names, "rejected"]
    got = result.collect()
    assert_rows(got, rows, expected(rows, names, range=7), names, flag=True)
    rejected = sum(1 for r in rows if any(r[c] is None or r[c] != r[c] for c in ("cpu", "mem")))
    assert rejected and f"; {rejected} rejected, flagged in column 'rejected'" in capsys.readouterr().out


def test_run_several_value_columns_text_value_and_slide(spark, tmp_path, capsys):
    """A mem that is not a number: flagged naming its text and file (the
    other rows kept), an error naming them without --on-bad-row flag;
    --slide with two value columns equals brute force over each window."""
    from tests.values_oracle import random_rows

    rows = random_rows(random.Random(42), keys=3, strict=True)
    _usage_csv(tmp_path / "in.csv", rows, extra=f"{len(rows)},k1,500.0,3.5,lots\n")
    args = ["run", "--input", tmp_path / "in.csv", "--key", "k", "--time", "t", "--value", "cpu, mem",
            "--agg", "max(cpu),count(mem)"]
    assert run_cli(spark, *args, "--range", 10, "--output", tmp_path / "o1", "--on-bad-row", "flag") == 0
    got = spark.read.parquet(str(tmp_path / "o1")).collect()
    flagged = [r for r in got if r["rejected"] is not None]
    assert [(r["k"], r["t"], r["cpu"]) for r in flagged] == [("k1", 500.0, 3.5)]
    assert "value 'lots' is not a number (file " in flagged[0]["rejected"] and "in.csv" in flagged[0]["rejected"]
    assert len(got) == len(rows) + 1
    capsys.readouterr()
    assert run_cli(spark, *args, "--range", 10, "--output", tmp_path / "o2") == 2
    line = one_error_line(capsys.readouterr().err)
    assert "value 'lots' is not a number (file " in line and "cpu=3.5, mem='lots'" in line, line

    good = tmp_path / "good.csv"
    _usage_csv(good, rows)
    args[2] = good
    assert run_cli(spark, *args, "--range", 10, "--slide", 5, "--output", tmp_path / "o3") == 0
    got = {(r["k"], r["window_end"]): (r["max_cpu"], r["count_mem"])
           for r in spark.read.parquet(str(tmp_path / "o3")).collect()}
    want = {}
    for k in {r["k"] for r in rows}:
        times = [r["t"] for r in rows if r["k"] == k]
        for e in range(5 * (math.floor(min(times) / 5) + 1), 5 * (math.floor(max(times) / 5) + 3), 5):
            inside = [r for r in rows if r["k"] == k and e - 10 <= r["t"] < e]
            if inside:
                want[(k, float(e))] = (max(r["cpu"] for r in inside), len(inside))
    assert got == want


def test_stream_several_value_columns_against_the_oracle(spark, tmp_path, capsys):
    """stream --value cpu,mem with a --schema of numbers: a mem that is not
    a number is flagged naming its text, the other rows equal the oracle."""
    from tests.values_oracle import assert_rows, expected, names_of, random_rows

    from pyspark.sql import Row

    rows = random_rows(random.Random(43), keys=3, strict=True)  # (k, t) names a row: stream keeps no other column
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    _usage_csv(incoming / "part-1.csv", rows, extra=f"{len(rows)},k0,900.0,1.0,abc\n")
    aggs = ["max(cpu)", "sum(mem)", "count(cpu)"]
    assert run_cli(spark, "stream", "--input", incoming, "--output", tmp_path / "out", "--checkpoint",
                   tmp_path / "ckpt", "--store", f"file:{tmp_path / 'state'}", "--key", "k", "--time", "t",
                   "--value", "cpu,mem", "--agg", ",".join(aggs), "--rows", 5,
                   "--schema", "id LONG, k STRING, t DOUBLE, cpu DOUBLE, mem LONG", "--on-bad-row", "flag") == 0
    assert f"processed {len(rows) + 1} rows in 1 micro-batch, 1 row rejected" in capsys.readouterr().out
    ids = {(r["k"], r["t"]): r["id"] for r in rows}
    got = spark.read.parquet(str(tmp_path / "out")).collect()
    flagged = [r for r in got if r["rejected"] is not None]
    assert [(r["k"], r["t"], r["cpu"]) for r in flagged] == [("k0", 900.0, 1.0)]
    assert "value 'abc' is not a number" in flagged[0]["rejected"]
    got = [Row(id=ids[(r["k"], r["t"])], **r.asDict()) for r in got if r["rejected"] is None]
    names = names_of(aggs)
    assert_rows(got, rows, expected(rows, names, count=5), names)


@pytest.mark.parametrize("value, agg, expect", [
    ("v,w", "max", "aggregation 'max' does not say which value column it reads"),
    ("v", "max(w)", "reads column 'w', which is not a value column"),
    ("v,v", "max(v)", "given more than once"),
    ("v,w", "median(v)", "unknown aggregation 'median(v)'"),
])
def test_several_value_columns_usage_errors(tmp_path, capsys, value, agg, expect):
    write_csv(tmp_path / "in.csv", make_rows(20, keys=2, seed=9))
    argv = _run_args(tmp_path / "in.csv", tmp_path / "o", agg=agg)
    argv[argv.index("--value") + 1] = value
    assert cli.main(argv) == 2  # no Spark needed
    assert expect in one_error_line(capsys.readouterr().err)


def test_run_slide_flag_leaves_bad_rows_out_and_counts_them(spark, tmp_path, capsys, caplog):
    """--slide with --on-bad-row flag: no output row can carry a flag, so
    the bad rows (a null value, a null time, a value that is not a number)
    are left out of the windows, counted in the summary and logged; the
    windows equal brute force over the good rows."""
    import math

    rows = make_rows(90, keys=3, seed=22, t_hi=60)
    write_csv(tmp_path / "in.csv", rows[:40] + [("k1", 30.0, None), ("k2", None, 1.5)] + rows[40:])
    with open(tmp_path / "in.csv", "a") as f:
        f.write("k0,12.0,abc\n")
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="spark_ops"):
        assert run_cli(spark, *_run_args(tmp_path / "in.csv", tmp_path / "out", "--slide", "5",
                                         "--on-bad-row", "flag", agg="max,count")) == 0
    assert re.search(r"^wrote \d+ rows to .* rows/s; 3 rejected, left out of the windows$", capsys.readouterr().out,
                     re.M)
    assert f"mta-spark run: 3 rows rejected, left out of the windows of {tmp_path / 'out'}" in [
        r.getMessage() for r in caplog.records if r.name.startswith("spark_ops")]
    got = {(r["key"], r["window_end"]): (r["max"], r["count"])
           for r in spark.read.parquet(str(tmp_path / "out")).collect()}
    want = {}
    for k in {r[0] for r in rows}:
        times = [t for key, t, _ in rows if key == k]
        for e in range(5 * math.floor(min(times) / 5), 5 * (math.floor(max(times) / 5) + 3), 5):
            inside = [v for key, t, v in rows if key == k and e - 10 <= t < e]
            if inside:
                want[(k, float(e))] = (max(inside), len(inside))
    assert got == want

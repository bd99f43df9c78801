"""``mta-spark demo`` (spark_ops.cli.demo) and its generator
(spark_ops.telemetry): the store rule it shares with ``run``, option values
checked when parsed, outputs replaced only by a run that succeeded, the
span of the readings, its summary and help; two runs on Spark checked
against a brute-force oracle over the input they wrote.

Most tests stop the demo where Spark would start (a stand-in for the
session), so they take no Spark time."""

from __future__ import annotations

import contextlib
import math
import os
import re
import socket
from collections import defaultdict

import numpy as np
import pytest

from spark_ops import cli
from spark_ops.cli import demo
from spark_ops.telemetry import LIMITS, START, fleet_memory

SPARK_CONF = {"app": "test_demo", "shuffle_partitions": 2, "spark.sql.session.timeZone": "UTC"}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _SessionStarted(Exception):
    pass


@pytest.fixture
def no_spark(monkeypatch):
    """The demo's session replaced by one that fails as Spark starting
    would; the list holds the runs that got that far."""
    reached = []

    @contextlib.contextmanager
    def failing(args, spark, app, progress=None):
        reached.append(args)
        raise _SessionStarted("Java gateway process exited before sending its port number")
        yield

    monkeypatch.setattr(demo, "session", failing)
    return reached


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("mta-spark: error: ")]
    assert len(lines) == 1, err
    return lines[0]


# -- the store: mta-spark run's rule ------------------------------------------------------
@pytest.mark.parametrize("engine", ["auto", "columnar", "amta", "lmta"])
def test_a_store_given_is_pinged_before_spark_whatever_the_engine(no_spark, tmp_path, capsys, engine):
    """As ``mta-spark run``: --store is checked before Spark starts on every
    engine (the columnar engine's summary then says the windows are not
    there), not ignored unless --engine amta or lmta."""
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    status = cli.main(["demo", "--hosts", "2", "--rows", "20", "--out", str(tmp_path / "out"), "--engine", engine,
                       "--store", url])
    assert status == 2
    assert "cannot use --store" in _error_line(capsys.readouterr().err)
    assert no_spark == []


@pytest.mark.parametrize("where", ["state", "windows/store", f"{demo.SCRATCH}x"])
def test_a_file_store_in_what_a_run_replaces_is_refused(no_spark, tmp_path, capsys, where):
    out = tmp_path / "out"
    assert cli.main(["demo", "--hosts", "2", "--rows", "20", "--out", str(out), "--engine", "amta",
                     "--store", f"file:{out / where}"]) == 2
    assert "which a run of the demo replaces" in _error_line(capsys.readouterr().err)
    assert not (out / where).exists() and no_spark == []


# -- option values the generator cannot take: usage errors ------------------------------
@pytest.mark.parametrize("option, value, allowed", [
    ("--seed", "-1", "at least 0"),
    ("--hours", "1e9", "more than 0 and at most 8,784 (366 days)"),
    ("--hours", "0", "more than 0 and at most 8,784"),
    ("--hours", "-2", "more than 0 and at most 8,784"),
    ("--hours", "nan", "more than 0 and at most 8,784"),
    ("--hours", "inf", "more than 0 and at most 8,784"),
    ("--rows", str(LIMITS["rows"][1] + 1), f"at least 1 and at most {LIMITS['rows'][1]:,}"),
    ("--hosts", str(LIMITS["hosts"][1] + 1), f"at least 1 and at most {LIMITS['hosts'][1]:,}"),
    ("--hosts", "0", f"at least 1 and at most {LIMITS['hosts'][1]:,}"),
])
def test_values_the_generator_cannot_take_are_usage_errors(monkeypatch, tmp_path, capsys, option, value, allowed):
    """Status 2 and one line naming the option and its range, when the
    arguments are parsed: no output directory made, no generator run."""
    def not_reached(*args, **kwargs):
        raise AssertionError("the generator ran")

    monkeypatch.setattr("spark_ops.telemetry.fleet_memory", not_reached)
    out = tmp_path / "out"
    assert cli.main(["demo", "--out", str(out), option, value]) == 2
    line = _error_line(capsys.readouterr().err)
    assert f"argument {option}: must be {allowed}" in line, line
    assert not out.exists()


@pytest.mark.parametrize("given", [dict(seed=-1), dict(span=0.0), dict(span=LIMITS["span"][1] * 2),
                                   dict(hosts=LIMITS["hosts"][1] + 1, rows=LIMITS["hosts"][1] + 1),
                                   dict(rows=LIMITS["rows"][1] + 1),
                                   dict(span=math.nan)])
def test_the_generator_refuses_what_is_outside_its_limits(given):
    args = {"hosts": 2, "rows": 10, **given}
    with pytest.raises(ValueError, match=next(iter(given))):
        fleet_memory(args.pop("hosts"), args.pop("rows"), **args)


# -- the span of the readings -------------------------------------------------------------
@pytest.mark.parametrize("hosts, rows, hours", [
    (300, 20_000, 24), (300, 20_000, 1), (300, 20_000, 0.1), (10, 20_000, 24), (300, 1_000, 24), (5, 3_000, 2),
    (2, 2, 1), (1, 50, 0.01), (40, 4_000, 24 * 366),
])
def test_readings_span_the_hours_asked(hosts, rows, hours):
    """The first reading at START, the last ``hours`` later (the clock's
    millisecond aside); still exactly ``rows`` readings, every host with at
    least one, in time order, ties among a host's readings where there are
    many."""
    df = fleet_memory(hosts, rows, seed=7, span=hours * 3600.0)
    ts = df["ts"].dt.tz_convert(None).to_numpy()
    first, last = ts.min(), ts.max()
    assert first == START
    assert abs((last - first) / np.timedelta64(1, "us") / 1e6 - hours * 3600.0) <= 0.0005
    assert len(df) == rows and df["host"].nunique() == hosts
    assert df["ts"].is_monotonic_increasing
    if rows // hosts >= 100:
        assert df.duplicated(["host", "ts"]).any()  # equal timestamps within a host: the windows' ties


def test_the_demo_data_keeps_its_shape():
    """The default profile's fleet over 24 h: bursts (sub-second gaps, equal
    timestamps), quiet spells, busy and quiet hosts, values within RAM."""
    df = fleet_memory(300, 200_000, seed=0)
    gaps = df.groupby("host")["ts"].diff().dt.total_seconds().dropna()
    assert (gaps == 0).any() and (gaps < 1).mean() > 0.1 and (gaps > 120).any()
    per_host = df.groupby("host").size()
    assert per_host.max() > 5 * per_host.median()  # log-normal rates
    assert (df["mem_mb"] > 0).all() and df["mem_mb"].max() < 65_536


# -- outputs: replaced only by a run that succeeded ------------------------------------------
def _previous_run(out) -> dict:
    """``out`` as a previous run left it (the marker, its four outputs, a
    killed run's scratch directory); returns :func:`_outputs`."""
    out.mkdir()
    (out / demo.MARKER).write_text("written by mta-spark demo\n")
    for name, data in (("input/part-00000.parquet", b"old input"), ("windows/part-0.parquet", b"old windows"),
                       ("host.png", b"old plot"), ("state/mta.sqlite3", b"old store")):
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_bytes(data)
    (out / f"{demo.SCRATCH}killed" / "input").mkdir(parents=True)
    return _outputs(out)


def _outputs(out) -> dict:
    """The bytes of each file in ``out`` but the marker and scratch directories."""
    return {p: p.read_bytes() for p in out.rglob("*")
            if p.is_file() and p.name != demo.MARKER and demo.SCRATCH not in str(p)}


def test_a_run_that_fails_leaves_the_previous_outputs_as_they_were(no_spark, tmp_path, capsys):
    out = tmp_path / "out"
    before = _previous_run(out)
    assert cli.main(["demo", "--hosts", "3", "--rows", "300", "--out", str(out), "--engine", "amta"]) == 1
    assert "Java gateway process exited" in _error_line(capsys.readouterr().err)
    assert len(no_spark) == 1  # it failed as Spark started: its input was written by then
    assert _outputs(out) == before, "the previous run's outputs, and nothing of the failed run's"
    assert not list(out.glob(f"{demo.SCRATCH}*"))  # its own, and the killed run's


def test_an_interrupted_run_leaves_the_previous_outputs_as_they_were(monkeypatch, tmp_path, capsys):
    out = tmp_path / "out"
    before = _previous_run(out)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "report", interrupted)
    monkeypatch.setattr(demo, "_windows", lambda *args: ("columnar", "why", 0, "local[2]", 1.0))
    assert cli.main(["demo", "--hosts", "3", "--rows", "300", "--out", str(out)]) == 130
    assert _outputs(out) == before
    assert not list(out.glob(f"{demo.SCRATCH}*"))


def test_an_out_with_outputs_the_demo_did_not_write_is_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "state").mkdir(parents=True)
    (out / "state" / "notes").write_text("mine")
    assert cli.main(["demo", "--hosts", "2", "--rows", "20", "--out", str(out)]) == 2
    assert "holds state, which mta-spark demo did not write" in _error_line(capsys.readouterr().err)
    assert (out / "state" / "notes").read_text() == "mine" and not (out / demo.MARKER).exists()


# -- the summary and the help ---------------------------------------------------------------
def _summary(capsys, on):
    readings = fleet_memory(2, 20, seed=1)
    summary = {"rows": 20, "overall": "o", "top": "t", "host": "host-000",
               "check": {"hosts": 2, "rows": 20, "ok": True, "differs": None, "diff": 0.0}}

    class Times:
        times = {"running windows": 2.0}

    demo._print_summary(readings, summary, "/x", 1, Times, engine="columnar", why="w", own_store=False, on=on,
                        seconds=(2.0, 4.0))
    return capsys.readouterr().out


def _brute_windows(readings):
    """Every reading's one-hour max, mean and sample stddev by brute force
    (a host's rows in time order, ties in input order), the rows shuffled."""
    rows = []
    for host, part in readings.groupby("host", sort=False):
        part = part.sort_values("ts", kind="stable")
        ts, vs = list(part["ts"]), list(part["mem_mb"])
        for j in range(len(part)):
            window = [v for t, v in zip(ts[:j + 1], vs[:j + 1]) if t > ts[j] - np.timedelta64(3600, "s")]
            mean = sum(window) / len(window)
            std = math.sqrt(sum((v - mean) ** 2 for v in window) / (len(window) - 1)) if len(window) > 1 else math.nan
            rows.append((host, ts[j], vs[j], max(window), mean, std))
    windows = __import__("pandas").DataFrame(rows, columns=["host", "ts", "mem_mb", "max", "mean", "stddev"])
    return windows.sample(frac=1, random_state=3).reset_index(drop=True)


def test_the_check_finds_the_host_whose_windows_differ():
    """The demo's check compares every host's windows with pandas' rolling
    ones (brute force agrees with it, rows of equal time included, in any
    row order of the output) and names the host a wrong value, a missing
    row or a swapped tie is in."""
    from spark_ops.cli.demo_report import _check

    readings = fleet_memory(3, 90, seed=2, span=4 * 3600.0)
    readings["ts"] = readings["ts"].dt.floor("10min")  # ties, kept in input order
    assert readings.duplicated(["host", "ts"]).any()
    windows = _brute_windows(readings)
    assert _check(windows, readings) == (None, pytest.approx(0.0, abs=1e-6))
    host = sorted(set(readings["host"]))[1]
    for spoil in ("value", "row", "tie"):
        bad = windows.copy()
        at = bad.index[bad["host"] == host][5]
        if spoil == "value":
            bad.loc[at, "mean"] += 0.5
        elif spoil == "row":
            bad = bad.drop(index=at)
        else:  # two readings of equal time with their windows exchanged: their values in the other's order
            tie = bad[(bad["host"] == host) & bad.duplicated(["host", "ts"], keep=False)].index[:2]
            bad.loc[tie, "mem_mb"] = bad.loc[tie[::-1], "mem_mb"].to_numpy()
        assert _check(bad, readings)[0] == host, spoil


def test_the_summary_says_a_new_sessions_rows_per_second_are_a_cold_runs(capsys):
    """The demo's one job starts its session's Python workers: its rows
    per second are not the warm figures of the benchmarks (README)."""
    line = next(x for x in _summary(capsys, "local[2]").splitlines() if x.startswith("  windows        20 "))
    assert "10 rows/s on a cold run (the session's first job: its Python workers start in it)" in line
    assert "cold" not in _summary(capsys, None)  # an active session's workers may be warm


def test_help_says_where_an_mta_keeps_the_windows(capsys):
    """The help's --engine and description say what the engine line says:
    a window in executor memory until it outgrows buffer + cache rows."""
    assert cli.main(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    spill = "each window in executor memory until it outgrows --buffer-size + --cache-size rows"
    assert text.count(spill) == 2, text  # --engine and the description
    assert "windows in the store" not in text and "keeps them in the embedded file store" not in text


def test_the_benchmarks_of_the_demos_windows_stage_run_its_job(monkeypatch):
    """bench.spark_demo (and so spark_before, which imports its AGGS) calls
    sliding_window with the demo's own window, not a copy of it."""
    from unittest import mock

    import spark_ops
    from bench import spark_demo
    from spark_ops.cli import demo_report

    calls = []
    monkeypatch.setattr(spark_ops, "sliding_window", lambda df, **kw: calls.append(kw) or mock.MagicMock())
    monkeypatch.setitem(demo_report.DEMO_WINDOW, "range", 1800)  # a change of the demo's window reaches them
    spark_demo._windows_stage(mock.MagicMock(), "input", "windows", None, "auto")
    assert calls == [dict(demo_report.DEMO_WINDOW, aggs=spark_demo.AGGS, store=None, engine="auto")]
    assert tuple(spark_demo.AGGS) == demo_report.DEMO_AGGS


# -- on Spark ------------------------------------------------------------------------------
def _sort_key(outputs: tuple) -> tuple:
    return tuple(-math.inf if x is None else x for x in outputs)


def _oracle_check(out) -> int:
    """Every output row of ``out``/windows against brute force over
    ``out``/input in plain Python: per host, the readings in (t - 1 h, t]
    up to the row in (time, input order); sample stddev.  Rows with equal
    (host, ts, mem_mb) are compared as a multiset.  Returns the rows."""
    import pyarrow.parquet as pq

    readings = pq.read_table(out / "input").to_pandas()
    got = pq.read_table(out / "windows").to_pandas()
    assert len(got) == len(readings)
    by_host = defaultdict(list)
    for host, ts, v in zip(readings["host"], readings["ts"], readings["mem_mb"]):
        by_host[host].append((ts.value / 1e9, v))  # the input's order: ties stay in it
    want = defaultdict(list)
    for host, rows in by_host.items():
        rows = sorted(rows, key=lambda r: r[0])  # stable: equal times keep the input order
        for j, (t, v) in enumerate(rows):
            window = [x for s, x in rows[:j + 1] if s > t - 3600]
            mean = sum(window) / len(window)
            std = math.sqrt(sum((x - mean) ** 2 for x in window) / (len(window) - 1)) if len(window) > 1 else None
            want[(host, t, v)].append((max(window), mean, std))
    have = defaultdict(list)
    for host, ts, v, mx, mn, sd in zip(*(got[c] for c in ("host", "ts", "mem_mb", "max", "mean", "stddev"))):
        have[(host, ts.value / 1e9, v)].append((mx, mn, None if sd is None or math.isnan(sd) else sd))
    assert have.keys() == want.keys()
    for key, expected in want.items():
        for g, w in zip(sorted(have[key], key=_sort_key), sorted(expected, key=_sort_key)):
            for a, b in zip(g, w):
                assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6), (key, g, w)
    return len(readings)


def test_runs_on_spark_replace_the_outputs_and_leave_no_store(spark, tmp_path, capsys):
    """An amta run whose windows outgrow buffer + cache rows (so its own
    file store is used), then a columnar run with a --store of the user's
    into the same --out, where an older run left a state directory: each
    run's outputs are its own (checked against brute force), no state
    stays, and the summary says where the windows were."""
    out = tmp_path / "out"
    args = ["demo", "--hosts", "3", "--rows", "600", "--hours", "3", "--out", str(out)]
    assert cli.main([*args, "--engine", "amta", "--buffer-size", "2", "--cache-size", "2"], spark=spark) == 0
    printed = capsys.readouterr().out
    engine = re.search(r"^  engine +(.*)$", printed, re.M).group(1)
    scratch = f"file://{out}/{demo.SCRATCH}"
    assert engine.startswith(f"amta: engine='amta' asked for, its windows in executor memory, each moving to the "
                             f"store {scratch}"), engine
    trips = int(re.search(r"; store file://\S+: ([\d,]+) round trips$", engine).group(1).replace(",", ""))
    assert trips > 0  # the windows of 200 rows an hour outgrew 4 rows
    assert "  state          none kept" in printed
    assert sorted(os.listdir(out)) == sorted([demo.MARKER, *demo.MADE])
    assert _oracle_check(out) == 600

    (out / "state").mkdir()  # as an older run left its store
    (out / "state" / "mta.sqlite3").write_bytes(b"")
    mine = tmp_path / "my-store"
    assert cli.main([*args[:4], "250", *args[5:], "--store", f"file:{mine}"], spark=spark) == 0
    printed = capsys.readouterr().out
    engine = re.search(r"^  engine +(.*)$", printed, re.M).group(1)
    assert engine == (f"columnar: its windows in executor memory, not in the store file://{mine} (a batch job keeps "
                      "its windows in the store with engine='amta' or 'lmta', for windows larger than executor "
                      f"memory); store file://{mine}: 0 round trips"), engine
    assert not re.search(r"^  state ", printed, re.M)
    assert sorted(os.listdir(out)) == sorted([demo.MARKER, *demo.MADE])
    assert _oracle_check(out) == 250
    assert (mine / "mta.sqlite3").exists()  # the user's store: pinged, kept

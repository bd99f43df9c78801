"""Smoke test of the benchmark driver (``python -m bench``) with tiny sizes.

Checks the JSON each experiment writes: the expected engines are there and
every number is positive.  No timing assertions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from bench import exp1, exp2, exp3, latency  # noqa: E402
from bench.common import RunConfig  # noqa: E402
from bench.engines import ENGINES  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ALL = set(ENGINES)
#: Engines that cannot run a non-invertible, non-selective monoid (exp3 max, longest_run).
NEEDS_FLAGS = {"SlickDeque", "SubtractOnEvict"}


def _config(out: Path) -> RunConfig:
    return RunConfig(profile="tiny", out=out, verbose=False)


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and x > 0


def _check_common(data: dict, name: str, out: Path) -> None:
    assert data["experiment"] == name
    assert data["profile"] == "tiny"
    m = data["machine"]
    assert m["cpu_model"] and m["python"] and m["platform"] and m["date_utc"]
    assert (out / f"{name}.json").is_file()
    assert (out / f"{name}.png").stat().st_size > 1000
    assert json.loads((out / f"{name}.json").read_text())["experiment"] == name
    assert not [r for r in data["records"] if "error" in r]


def test_cli_exp1(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "exp1", "--tiny", "--quiet", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "AMTA/DABA" in proc.stdout
    data = json.loads((tmp_path / "exp1.json").read_text())
    _check_common(data, "exp1", tmp_path)
    assert {r["engine"] for r in data["records"]} == ALL
    sizes = set(data["config"]["sizes"])
    for r in data["records"]:
        assert r["size"] in sizes
        assert _positive(r["mean_ns"]) and _positive(r["mean_cpu_ns"]) and _positive(r["calls_per_update"])
        assert r["updates"] >= r["size"]
        assert r["result"] == r["size"]  # the count of a full window
    # every engine at every size, except Recalc's capped sizes
    for e in ALL - {"Recalc"}:
        assert {r["size"] for r in data["records"] if r["engine"] == e} == sizes


def test_exp2(tmp_path):
    data = exp2.run(_config(tmp_path))
    _check_common(data, "exp2", tmp_path)
    assert {r["engine"] for r in data["records"]} == ALL
    ks = data["config"]["evictions"]
    assert ks[0] == 1 and ks[-1] == data["config"]["window"] - 1
    for e in ALL:
        recs = [r for r in data["records"] if r["engine"] == e]
        assert [r["k"] for r in recs] == ks
        for r in recs:
            assert _positive(r["enforce_ns"]) and _positive(r["enforce_cpu_ns"]) and _positive(r["enforce_calls"])
    assert "AMTA" in data["summary"]["engines"]
    assert exp2.report(data)


def test_exp3(tmp_path):
    data = exp3.run(_config(tmp_path))
    _check_common(data, "exp3", tmp_path)
    labels = [a[0] for a in exp3.AGGREGATIONS]
    for label in labels:
        engines = {r["engine"] for r in data["records"] if r["aggregation"] == label}
        expected = ALL - NEEDS_FLAGS if label in ("max", "longest_run") else ALL
        assert engines == expected, label
    for r in data["records"]:
        assert _positive(r["mean_ns"]) and _positive(r["updates"])
    assert all(v is not False for v in data["summary"]["results_agree"].values())
    assert exp3.report(data)


def test_latency(tmp_path):
    data = latency.run(_config(tmp_path))
    _check_common(data, "latency", tmp_path)
    assert {r["engine"] for r in data["records"]} == ALL
    for r in data["records"]:
        for key in ("mean_ns", "p50_ns", "p99_ns", "p99.9_ns", "max_ns"):
            assert _positive(r[key]), key
        assert r["p50_ns"] <= r["p99_ns"] <= r["p99.9_ns"] <= r["max_ns"]
    assert latency.report(data)


def test_exp1_report_from_json(tmp_path):
    data = exp1.run(RunConfig(profile="tiny", out=tmp_path, verbose=False, engines=["AMTA", "DABA"], plot=False))
    assert {r["engine"] for r in data["records"]} == {"AMTA", "DABA"}
    assert "AMTA/DABA" in exp1.report(json.loads((tmp_path / "exp1.json").read_text()))

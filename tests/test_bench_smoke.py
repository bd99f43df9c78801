"""Smoke test of the benchmark driver (``python -m bench``) with tiny sizes.

Checks the JSON each experiment writes: the expected engines are there and
every number is positive.  No timing assertions.
"""

from __future__ import annotations

import json
import os
import re
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


# -- store experiments (kvs1, kvs2, exp4): a private redis-server and a temporary file store

STORE_CONFIGS = {f"{e}/{b}" for e in ("AMTA", "LMTA") for b in ("memory", "redis", "file")}


def _check_store_header(data: dict) -> None:
    s = data["stores"]
    assert s["redis_server_version"] and s["msgpack"] and s["sqlite"]
    assert s["backends"]["redis"]["started_by_benchmark"] is True
    assert s["backends"]["file"]["temporary"] is True
    m = data["machine"]
    assert len(m["load_average_at_start"]) == 3 and len(m["load_average_at_end"]) == 3
    assert m["memory_gb"] > 0 and m["logical_cores"] >= 1
    assert set(data["configs"]) == STORE_CONFIGS


def test_kvs1(tmp_path):
    from bench import kvs1

    data = kvs1.run(_config(tmp_path))
    _check_common(data, "kvs1", tmp_path)
    _check_store_header(data)
    sizes = data["config"]["sizes"]
    assert {(r["config"], r["size"]) for r in data["records"]} == {(c, n) for c in STORE_CONFIGS for n in sizes}
    for r in data["records"]:
        assert r["result"] == r["size"] and r["updates"] >= r["size"]
        assert _positive(r["mean_ns"]) and _positive(r["mean_process_cpu_ns"]) and _positive(r["fill_ns_per_insert"])
        t = r["traffic"]
        assert all(v >= 0 for v in t.values()), t
        if r["backend"] == "memory":
            assert not any(t.values()) and r["local_size"] is None
            continue
        assert r["local_size"] > 0
        if r["size"] == max(sizes):  # a window bigger than buffer + cache: the store is used
            # two elements of at least one byte each per pair (the values are stored in groups)
            assert t["pairs_written"] > 0 and t["pairs_read"] > 0 and t["bytes_written"] >= 2 * t["pairs_written"]
            assert t["cache_hits"] > 0 and 0 < t["round_trips"] <= r["updates"] / 100
        if r["backend"] == "redis":
            assert r["mean_server_cpu_ns"] is not None and r["mean_server_cpu_ns"] >= 0
    s = data["summary"]
    assert set(s["ratios"]) == {c for c in STORE_CONFIGS if not c.endswith("/memory")}
    assert isinstance(s["targets"]["redis_latency_within_2x"]["met"], bool)
    assert s["targets"]["round_trips_per_update"]["met"] is True
    text = kvs1.report(json.loads((tmp_path / "kvs1.json").read_text()))
    assert "Target: Redis per-update latency within 2x" in text and "round trips per update" in text


def test_kvs2(tmp_path):
    from bench import kvs2

    data = kvs2.run(_config(tmp_path))
    _check_common(data, "kvs2", tmp_path)
    _check_store_header(data)
    ks = data["config"]["evictions"]
    assert ks[0] == 1 and ks[-1] == data["config"]["window"] - 1
    for c in STORE_CONFIGS:
        recs = [r for r in data["records"] if r["config"] == c]
        assert [r["k"] for r in recs] == ks
        for r in recs:
            assert _positive(r["enforce_ns"]) and r["enforce_min_ns"] <= r["enforce_ns"] <= r["enforce_max_ns"]
            t = r["enforce_traffic"]
            assert all(v >= 0 for v in t.values()), t
            # a bulk eviction reads O(log n) levels' heads: at most a few round trips per level
            assert t["round_trips"] <= 4 * data["config"]["window"].bit_length()
    assert data["builds"]["AMTA/redis"]["local_size"] > 0
    assert isinstance(data["summary"]["targets"]["redis_bulk_eviction"]["met"], bool)
    assert data["summary"]["targets"]["redis_bulk_eviction"]["applies"] is False  # tiny: not 2^22
    assert "Target: bulk eviction of 2^22 - 1 on Redis" in kvs2.report(data)


def test_exp4_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "exp4", "--tiny", "--quiet", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "exp4.json").read_text())
    _check_common(data, "exp4", tmp_path)
    _check_store_header(data)
    assert {r["config"] for r in data["records"]} == STORE_CONFIGS
    for r in data["records"]:
        assert 5 < r["baseline_rss_mb"] <= r["peak_rss_mb"] < 2000
        assert r["local_size"] > 0 and r["height"] > 1 and _positive(r["fill_ns_per_insert"])
        if r["backend"] != "memory":
            assert r["traffic"]["pairs_written"] > 0 and r["store_used_mb"] > 0 and r["checkpoint_version"] >= 1
    assert "peak RSS" in proc.stdout and "Target:" in proc.stdout


@pytest.mark.parametrize("page, module", [("benchmarks.md", "bench.report"),
                                          ("benchmarks-spark.md", "bench.report"),
                                          ("benchmarks-stores.md", "bench.report_stores")])
def test_benchmark_pages_match_results(page, module):
    """The tables of docs/<page> are what ``python -m <module> --update``
    generates from the committed bench/results: no page shows numbers its
    JSON does not hold, and every generated section is filled."""
    import importlib

    secs = importlib.import_module(module).sections(REPO / "bench" / "results")
    text = (REPO / "docs" / page).read_text()
    found = re.findall(r"<!-- BEGIN generated:([\w-]+) -->\n(.*?)<!-- END generated:\1 -->", text, re.S)
    assert found, f"docs/{page} has no generated sections"
    stale = [name for name, body in found if name not in secs or body != secs[name] + "\n"]
    assert not stale, (f"docs/{page}: sections {stale} differ from the results; "
                       f"run .venv/bin/python -m {module} --update docs/{page}")


def test_run_full_script(tmp_path):
    """bench/run_full.sh runs experiments from a snapshot of the sources."""
    proc = subprocess.run(["bash", str(REPO / "bench" / "run_full.sh"), "--tiny", "--quiet", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "EXPERIMENTS": "latency"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "snapshot" in proc.stderr
    data = json.loads((tmp_path / "latency.json").read_text())
    assert data["experiment"] == "latency" and data["profile"] == "tiny"
    assert (tmp_path / "latency.log").stat().st_size > 0

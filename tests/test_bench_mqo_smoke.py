"""Smoke test of ``python -m bench mqo`` at the tiny size: the JSON has every
part, the plans cover the queries, calls and estimates are positive.  No
timing assertions."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from bench import mqo  # noqa: E402
from bench.common import RunConfig  # noqa: E402


def test_mqo_tiny(tmp_path):
    data = mqo.run(RunConfig(profile="tiny", out=tmp_path, verbose=False))
    assert json.loads((tmp_path / "mqo.json").read_text())["experiment"] == "mqo"
    assert (tmp_path / "mqo.png").stat().st_size > 1000
    records = data["records"]
    assert not [r for r in records if "error" in r]
    parts = {r["part"] for r in records}
    assert parts == {"plans", "exp67", "sweep_estimate", "sweep_measured", "slickdeque_mq", "params"}
    for r in records:
        if "calls_per_element" in r:
            assert r["calls_per_element"] > 0 and r["estimate"] > 0 and r["held"] > 0
    plans = {r["plan"] for r in records if r["part"] == "plans"}
    assert {"auto", "weaveshare", "triweave", "separate", "panes", "panes+naive"} <= plans
    assert "targets" in data["summary"]
    params = {(r["s_max"], r["o_max"]) for r in records if r["part"] == "params"}
    assert params == {tuple(x) for x in data["config"]["params"]}
    assert {(e["s_max"], e["o_max"]) for e in data["summary"]["params"]} == params
    assert "Targets:" in mqo.report(data)


def test_mqo_tiny_plans_agree_on_the_answers(tmp_path):
    """Every plan of an aggregation computes the same windows over the same
    pushes: the JSON keeps each plan's count and sum of answers, and the
    summary says they agree."""
    mqo.run(RunConfig(profile="tiny", out=tmp_path, verbose=False, plot=False))
    data = json.loads((tmp_path / "mqo.json").read_text())
    for agg in mqo.AGGS:
        plans = [r for r in data["records"] if r["part"] == "plans" and r["agg"] == agg]
        assert len(plans) == len(mqo.plan_list(data["config"]["queries"], agg))
        assert all(r["answers"] > 0 and isinstance(r["checksum"], float) for r in plans)
        assert len({r["answers"] for r in plans}) == 1
        assert data["summary"][agg]["checksums_agree"] is True
    assert "checksums of the plans (count and sum of answers) agree: yes" in mqo.report(data)

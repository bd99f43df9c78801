"""The README's main-job command runs the demo; check it end to end (small)."""

import statistics

from mta import demo
from mta.streams import memory_usage_stream


def test_demo_engines_agree_with_brute_force(capsys):
    summary = demo.run(3000, 600.0)
    stream = list(memory_usage_stream(3000, seed=7))
    last_t = stream[-1][0]
    window = [mem for t, mem in stream if t > last_t - 600.0]
    mx, mean, sd = summary["AmortizedMTA"]["last"]
    assert mx == max(window)
    assert abs(mean - statistics.mean(window)) < 1e-6
    assert abs(sd - statistics.stdev(window)) < 1e-6
    assert all(s["agrees_with_AmortizedMTA"] for s in summary.values())
    assert summary["AmortizedMTA"]["window_length_at_end"] == len(window)


def test_demo_main_prints_summary(capsys):
    assert demo.main(["--readings", "2000", "--range", "300"]) == 0
    out = capsys.readouterr().out
    assert "monoid calls/update" in out and "AmortizedMTA" in out and "TwoStacks" in out

"""A synthetic stream for the benchmarks (Experiment 3).

:func:`memory_usage_stream` stands in for the MTA paper's Experiment 3 data
(section 5.6: "computer memory usage, one reading per second for two
years"), which is not public.  It is deterministic for a given ``seed`` and
uses only :mod:`random` and :mod:`math`, so the same stream comes out on
every machine and Python version (``random.Random`` with an integer seed is
stable across versions for ``random()``, ``gauss()`` and ``expovariate()``).
"""

from __future__ import annotations

import math
import random
from typing import Iterator

__all__ = ["memory_usage_stream"]

_DAY = 86_400.0
_WEEK = 7 * _DAY


def memory_usage_stream(
    n: int, seed: int = 0, *, start: int = 0, total_mb: float = 16_384.0
) -> Iterator[tuple[int, float]]:
    """Yield ``n`` memory readings ``(t, used_mb)``, one per second.

    ``t`` is an int, seconds since ``start`` (``start, start + 1, ...``);
    ``used_mb`` is a float rounded to 0.1 MB, always strictly positive and
    below ``total_mb`` (a machine with ``total_mb`` of RAM).  The reading is
    the sum of

    * a base load (30 % of RAM) with a daily cycle (+-8 %, peaking in the
      afternoon) and a weekly one (+-3 %, quieter at weekends);
    * a slow mean-reverting drift (Ornstein-Uhlenbeck, about +-4 %, hours);
    * a leak: a service that grows by a few MB an hour and is restarted
      (dropping back to zero) every one to five days;
    * a garbage-collector sawtooth (up to 1.5 % over ~10 minutes, then a drop);
    * bursts: about one every two hours, a jump of 2-25 % of RAM that
      decays exponentially over one to twenty minutes;
    * Gaussian measurement noise (0.15 %);

    clamped to ``[2 %, 98 %]`` of RAM.  Runs of strictly increasing readings
    are short (noise) except during leaks and burst ramps, so the longest
    increasing run of a window is a meaningful, data-dependent quantity.
    """
    if n < 0:
        raise ValueError(f"memory_usage_stream needs n >= 0, got {n!r}")
    rng = random.Random(seed)
    gauss, uniform = rng.gauss, rng.uniform
    total = float(total_mb)
    base = 0.30 * total
    lo, hi = 0.02 * total, 0.98 * total
    two_pi = 2.0 * math.pi
    # Ornstein-Uhlenbeck drift: x += -x/tau + sigma * N(0, 1), tau ~ 3 h
    drift, tau = 0.0, 3 * 3600.0
    drift_sigma = 0.04 * total * math.sqrt(2.0 / tau)
    # leak: MB per second and the time of the next restart
    leak, leak_rate = 0.0, uniform(1.0, 6.0) / 3600.0 * total / 1024.0
    next_restart = start + uniform(1.0, 5.0) * _DAY
    # garbage-collector sawtooth
    gc_level, gc_period = 0.0, uniform(300.0, 900.0)
    gc_step = 0.015 * total / gc_period
    # bursts: a decaying extra load
    burst, burst_decay = 0.0, 1.0
    burst_rate = 1.0 / 7200.0
    noise_sigma = 0.0015 * total
    phase_day = uniform(0.0, two_pi)
    for t in range(start, start + n):
        day = math.sin(two_pi * t / _DAY + phase_day)
        week = math.cos(two_pi * t / _WEEK)
        drift += -drift / tau + drift_sigma * gauss(0.0, 1.0)
        leak += leak_rate
        if t >= next_restart:
            leak = 0.0
            leak_rate = uniform(1.0, 6.0) / 3600.0 * total / 1024.0
            next_restart = t + uniform(1.0, 5.0) * _DAY
        gc_level += gc_step
        if gc_level >= 0.015 * total:
            gc_level = 0.0
            gc_period = uniform(300.0, 900.0)
            gc_step = 0.015 * total / gc_period
        if burst > 0.5:
            burst *= burst_decay
        else:
            burst = 0.0
        if rng.random() < burst_rate:
            burst += uniform(0.02, 0.25) * total
            burst_decay = math.exp(-1.0 / uniform(60.0, 1200.0))
        value = base + 0.08 * total * day + 0.03 * total * week + drift + leak + gc_level + burst
        value += gauss(0.0, noise_sigma)
        if value < lo:
            value = lo
        elif value > hi:
            value = hi
        yield t, round(value, 1)

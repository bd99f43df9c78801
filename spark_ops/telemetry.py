"""A fast, vectorized generator of fleet memory telemetry (for ``mta-spark demo``).

:func:`fleet_memory` returns one reading per row ``(host, ts, mem_mb)`` for
hundreds of hosts, in arrival order (by time).  Each host follows the memory
model of :func:`bench.streams.memory_usage_stream` -- base load with daily and
weekly cycles, a mean-reverting drift, a leak with restarts, a
garbage-collector sawtooth, decaying bursts and measurement noise, clamped to
``[2 %, 98 %]`` of the host's RAM -- but evaluated with numpy at irregular
times instead of once a second in pure Python, so a million readings take a
second or two:

* the deterministic parts (cycles, leak, sawtooth, bursts) are closed-form
  functions of time evaluated at every reading;
* the Ornstein-Uhlenbeck drift is simulated on a one-minute grid (one
  numpy step per minute for all hosts at once) and interpolated; the grid
  is coarser where hosts x minutes exceed :data:`GRID_CELLS`, so that its
  memory stays bounded.

Arrival is irregular and bursty, host by host: ordinary gaps are
exponential, bursts put several readings a second (gaps in quarter
seconds before the scaling to the span below, zero included: equal
timestamps happen), and quiet spells of
minutes interrupt a host now and then.  Hosts differ in RAM, base load,
reading rate (log-normal, some hosts report ten times as often as others)
and leak rate (restarted every half day to two and a half days); a few
hosts leak fast, so the fleet's peaks are worth looking at.  Deterministic
for a given ``seed``.

The readings span ``span`` seconds: each host's arrival times are scaled
to the span (a Poisson process's times given their count are spread the
same way), and the fleet's are stretched so that the first reading is at
``start`` and the last at ``start + span``, to the millisecond of the
clock (given two readings at different times; gaps keep their shape, and
equal timestamps stay equal).  :data:`LIMITS` bounds what the generator
takes (``mta-spark demo`` checks its options against them).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fleet_memory", "LIMITS", "START"]

_DAY = 86_400.0
_WEEK = 7 * _DAY
#: What :func:`fleet_memory` takes, as (least, most): the readings are held in
#: memory (about 150 bytes each while they are made), and the per-host work
#: and the drift's grid grow with the hosts and the span.
LIMITS = {"hosts": (1, 100_000), "rows": (1, 100_000_000), "span": (0.0, 366 * _DAY), "seed": (0, None)}
#: Cells (hosts x grid steps) of the drift's grid, at most: its two arrays of doubles stay within 64 MB each.
GRID_CELLS = 2 ** 23
#: Default start of the generated telemetry: 2024-03-04 00:00:00 UTC (a Monday).
START = np.datetime64("2024-03-04T00:00:00", "us")
_RAM_MB = np.array([8_192.0, 16_384.0, 32_768.0, 65_536.0])


def _arrival_gaps(rng: np.random.Generator, n: int, span: float) -> np.ndarray:
    """``n + 1`` gaps in seconds whose sum is about ``span``: the first is
    the offset of the first reading, the last the time after the last one;
    bursts, ordinary gaps and quiet spells (the caller scales them to the
    span)."""
    burst = np.zeros(n, dtype=bool)
    starts = np.flatnonzero(rng.random(n) < 0.04)  # a burst starts at ~4 % of readings
    if starts.size:
        lengths = 2 + rng.geometric(0.25, starts.size)  # ~6 readings a burst
        idx = np.repeat(starts, lengths) + (np.arange(lengths.sum())
                                           - np.repeat(np.cumsum(lengths) - lengths, lengths))
        burst[idx[idx < n]] = True
    burst[0] = False
    quiet = np.zeros(n, dtype=bool)  # ~ten quiet spells a day, wherever they fall
    quiet[rng.integers(1, max(2, n), min(n // 10, rng.poisson(span / 8640.0)))] = True
    quiet &= ~burst
    normal = ~burst & ~quiet
    gaps = np.empty(n)
    # bursts: quarter seconds, zero included (equal timestamps)
    gaps[burst] = 0.25 * (rng.geometric(0.55, burst.sum()) - 1)
    gaps[quiet] = 120.0 + rng.exponential(480.0, quiet.sum())  # quiet for 2 to ~20 minutes
    rest = span - gaps[burst].sum() - gaps[quiet].sum()
    mean = max(1.0, rest / max(1, normal.sum()))
    gaps[normal] = rng.exponential(mean, normal.sum())
    return np.append(gaps, rng.exponential(mean))


def fleet_memory(hosts: int = 300, rows: int = 1_000_000, *, seed: int = 0, span: float = _DAY,
                 start=START):
    """A pandas DataFrame ``host`` (str), ``ts`` (datetime64[us, UTC]), ``mem_mb``
    (float, 0.1 MB resolution): exactly ``rows`` readings from ``hosts``
    hosts (at least one each), the first at ``start`` and the last ``span``
    seconds later (see the module's notes), sorted by ``ts`` (ties keep
    each host's own order).  Arguments outside :data:`LIMITS`, or fewer
    rows than hosts, raise ValueError."""
    import pandas as pd

    _check(hosts=hosts, rows=rows, span=span, seed=seed)
    if rows < hosts:
        raise ValueError(f"need rows >= hosts, got hosts={hosts}, rows={rows}")
    rng = np.random.default_rng(seed)
    # readings per host: log-normal rates, at least one reading each
    weights = rng.lognormal(0.0, 0.8, hosts)
    counts = 1 + rng.multinomial(rows - hosts, weights / weights.sum())

    host_of = np.repeat(np.arange(hosts), counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    t = np.empty(rows)
    for h in range(hosts):
        a, b = offsets[h], offsets[h + 1]
        arrivals = np.cumsum(_arrival_gaps(rng, b - a, span))
        t[a:b] = arrivals[:-1] * (span / arrivals[-1])  # the host's readings within the span
    lo, hi = t.min(), t.max()
    t = (t - lo) * (span / (hi - lo)) if hi > lo else np.zeros(rows)  # the fleet's: from 0 to span
    t = np.round(t, 3)  # millisecond clock: equal timestamps inside bursts

    # per-host parameters, broadcast to readings with host_of
    total = rng.choice(_RAM_MB, hosts)
    base = rng.uniform(0.2, 0.38, hosts) * total
    phase = rng.uniform(0.0, 2 * np.pi, hosts)
    leak_rate = rng.uniform(1.0, 6.0, hosts) / 3600.0 * total / 1024.0
    fast = rng.random(hosts) < 0.05  # a few hosts leak 2.5 times faster
    leak_rate[fast] *= 2.5
    restart_every = rng.uniform(0.5, 2.5, hosts) * _DAY
    restart_phase = rng.uniform(0.0, 1.0, hosts) * restart_every
    gc_period = rng.uniform(300.0, 900.0, hosts)
    gc_phase = rng.uniform(0.0, 1.0, hosts) * gc_period

    tot = total[host_of]
    value = base[host_of].copy()
    value += 0.08 * tot * np.sin(2 * np.pi * t / _DAY + phase[host_of])
    value += 0.03 * tot * np.cos(2 * np.pi * t / _WEEK)
    # leak: grows since the last restart
    since = np.mod(t + restart_phase[host_of], restart_every[host_of])
    value += leak_rate[host_of] * since
    # garbage-collector sawtooth, up to 1.5 % of RAM
    value += 0.015 * tot * np.mod(t + gc_phase[host_of], gc_period[host_of]) / gc_period[host_of]

    # Ornstein-Uhlenbeck drift (+-4 %, tau 3 h) on a one-minute grid (coarser past GRID_CELLS), all hosts at once
    tau, step = 3 * 3600.0, max(60.0, span * hosts / GRID_CELLS)
    steps = int(np.ceil(t.max() / step)) + 2
    phi = np.exp(-step / tau)
    noise = rng.standard_normal((steps, hosts)) * (0.04 * total * np.sqrt(1.0 - phi * phi))
    grid = np.empty((steps, hosts))
    grid[0] = rng.standard_normal(hosts) * 0.04 * total
    for i in range(1, steps):
        grid[i] = phi * grid[i - 1] + noise[i]
    pos = t / step
    i0 = np.minimum(pos.astype(np.int64), steps - 2)
    frac = pos - i0
    value += grid[i0, host_of] * (1.0 - frac) + grid[i0 + 1, host_of] * frac

    value += _bursts(rng, t, offsets, total)
    value += rng.standard_normal(rows) * 0.0015 * tot
    value = np.round(np.clip(value, 0.02 * tot, 0.98 * tot), 1)

    order = np.lexsort((np.arange(rows), t))  # by time; ties keep generation order
    width = len(str(hosts - 1))
    names = np.array([f"host-{h:0{max(3, width)}d}" for h in range(hosts)], dtype=object)
    ts = np.datetime64(start, "us") + np.round(t[order] * 1e6).astype("timedelta64[us]")
    return pd.DataFrame({"host": names[host_of[order]], "ts": pd.DatetimeIndex(ts).tz_localize("UTC"),
                         "mem_mb": value[order]})


def _check(**given) -> None:
    """Each of ``given`` (hosts, rows, span, seed) within :data:`LIMITS`
    (a span more than its least, 0: a reading needs a time); a seed of
    None (NumPy's fresh entropy) passes."""
    for name, value in given.items():
        if name == "seed" and value is None:
            continue
        low, high = LIMITS[name]
        above = value > low if name == "span" else value >= low
        if not above or (high is not None and not value <= high):
            raise ValueError(f"{name} must be {'more than' if name == 'span' else 'at least'} {low:g}"
                             + (f" and at most {high:g}" if high is not None else "") + f", got {value!r}")


def _bursts(rng: np.random.Generator, t: np.ndarray, offsets: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Memory bursts at the readings ``t`` (host by host between
    ``offsets``): ~one every two hours per host, 2-20 % of its RAM
    (``total``), decaying over 1-20 minutes.  Python work per host, not per
    burst: each host's bursts are placed at once, and their effect on every
    reading they reach (up to 12 decay times) summed in one pass."""
    firsts, lasts, whens, sizes, decays = [], [], [], [], []
    for h in range(len(offsets) - 1):
        a, b = offsets[h], offsets[h + 1]
        th = t[a:b]
        n_events = rng.poisson(max(th[-1], 1.0) / 7200.0)
        when = rng.uniform(0.0, th[-1], n_events)
        sizes.append(rng.uniform(0.02, 0.2, n_events) * total[h])
        decay = rng.uniform(60.0, 1200.0, n_events)
        firsts.append(a + np.searchsorted(th, when, side="left"))
        lasts.append(a + np.searchsorted(th, when + 12 * decay, side="right"))
        whens.append(when)
        decays.append(decay)
    first, last = np.concatenate(firsts), np.concatenate(lasts)
    reach = last - first  # the readings each burst reaches
    event = np.repeat(np.arange(reach.size), reach)
    at = np.repeat(first, reach) + np.arange(reach.sum()) - np.repeat(np.cumsum(reach) - reach, reach)
    when, size, decay = (np.concatenate(x)[event] for x in (whens, sizes, decays))
    return np.bincount(at, weights=size * np.exp(-(t[at] - when) / decay), minlength=t.size)

"""The demo's files and report: its input written as Parquet, the summary
tables, the check of every host against pandas' rolling windows, and the plot."""

from __future__ import annotations

import os
import shutil

#: The demo's aggregations, over one hour per host.
DEMO_AGGS = ("max", "mean", "stddev")
#: The demo's windows besides their aggregations: ``sliding_window``'s key,
#: time, value and range (the benchmarks of the demo's windows stage run these).
DEMO_WINDOW = {"key": "host", "time": "ts", "value": "mem_mb", "range": 3600}
#: The demo's data by default: the hours the readings span and the seed.
DEMO_HOURS = 24.0
DEMO_SEED = 0


def demo_readings(hosts: int, rows: int, *, hours: float = DEMO_HOURS, seed: int = DEMO_SEED):
    """The demo's readings (:func:`spark_ops.telemetry.fleet_memory`): ``rows``
    from ``hosts`` hosts spanning ``hours``."""
    from ..telemetry import fleet_memory

    return fleet_memory(hosts, rows, seed=seed, span=hours * 3600.0)


def write_parquet_input(readings, directory: str, rows_per_file: int = 125_000) -> int:
    """Write the readings as a few Parquet files, in time order, cutting only
    between distinct timestamps (ties stay in one file, so their input order
    is unambiguous).  Returns the number of files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    table = pa.Table.from_pandas(readings, preserve_index=False)
    ts = readings["ts"].to_numpy()
    cuts, start, n = [], 0, len(readings)
    while start < n:
        end = min(n, start + rows_per_file)
        while end < n and ts[end] == ts[end - 1]:
            end += 1
        cuts.append((start, end))
        start = end
    for i, (a, b) in enumerate(cuts):
        pq.write_table(table.slice(a, b - a), os.path.join(directory, f"part-{i:05d}.parquet"))
    return len(cuts)


def report(readings, windows_dir: str, plot: str) -> dict:
    """Summary tables of the windows, the check of every host against
    pandas (:func:`_check`), and the plot of the top host written to ``plot``."""
    import pyarrow.parquet as pq

    w = pq.read_table(windows_dir).to_pandas()
    stats = w[["mem_mb", *DEMO_AGGS]].describe(percentiles=[0.5, 0.99]).T
    stats = stats[["mean", "50%", "99%", "max"]].rename(columns={"50%": "p50", "99%": "p99"})
    stats.index = ["reading", "1 h max", "1 h mean", "1 h stddev"]
    overall = stats.to_string(float_format=lambda x: f"{x:,.1f}")

    per_host = w.groupby("host").agg(readings=("mem_mb", "size"), peak=("mem_mb", "max"),
                                     top_mean=("mean", "max"), top_stddev=("stddev", "max"),
                                     median_max=("max", "median"))
    top = per_host.sort_values(["peak", "top_mean"], ascending=False).head(5)
    top.columns = ["readings", "peak MB", "highest 1h mean", "highest 1h stddev", "median 1h max"]
    top.index.name = None
    top_text = top.to_string(float_format=lambda x: f"{x:,.1f}", formatters={"readings": "{:,}".format})

    host = top.index[0]
    mine = w[w["host"] == host].sort_values("ts", kind="stable").reset_index(drop=True)
    differs, diff = _check(w, readings)
    _plot_host(mine, host, plot)
    return {"rows": len(w), "overall": overall, "top": top_text, "host": host,
            "check": {"hosts": int(readings["host"].nunique()), "rows": len(w), "ok": differs is None,
                      "differs": differs, "diff": diff}}


def _check(windows, readings) -> tuple[str | None, float]:
    """Every host's windows against pandas' rolling one-hour windows of its
    readings (a host's rows in time order, ties in input order, as
    ``sliding_window`` orders them), whatever the order of the output's
    rows: both sides sorted on every column (:func:`_sorted`), so readings
    of equal host and time meet by value (identical readings compare as a
    multiset).  Returns the first host whose rows or windows differ (None if
    none does) and the largest difference.  O(n log n) for n readings."""
    import numpy as np

    expected = readings.sort_values(["host", "ts"], kind="stable").reset_index(drop=True)  # lexsort: stable
    # grouped in sorted order, each host's rows in theirs: the results line up with the rows
    rolled = expected.groupby("host", sort=False).rolling("3600s", on="ts")["mem_mb"]
    expected = expected.assign(max=rolled.max().to_numpy(), mean=rolled.mean().to_numpy(),
                               stddev=rolled.std().to_numpy())
    if len(windows) != len(expected):
        counts = windows["host"].value_counts().sub(expected["host"].value_counts(), fill_value=0)
        return str(counts[counts != 0].index.min()), float("nan")
    hosts = sorted(set(expected["host"]))
    (got_host, *got), (want_host, *want) = _sorted(windows, hosts), _sorted(expected, hosts)
    wrong = (got_host != want_host) | (got[0] != want[0]) | (got[1] != want[1])  # host, time, reading
    diff = 0.0
    for have, should in zip(got[2:], want[2:]):
        wrong |= ~(np.isclose(have, should, rtol=1e-6, atol=1e-3) | np.isnan(have) & np.isnan(should))
        finite = ~np.isnan(have) & ~np.isnan(should)
        if finite.any():
            diff = max(diff, float(np.abs(have[finite] - should[finite]).max()))
    first = np.flatnonzero(wrong)
    return (hosts[want_host[first[0]]] if len(first) else None), diff


def _sorted(frame, hosts: list) -> list:
    """The columns host (its index in ``hosts``, -1 if not there), time (ns
    since the epoch), reading and :data:`DEMO_AGGS` as NumPy arrays, rows
    sorted on all of them in that order (NaN last)."""
    import numpy as np
    import pandas as pd

    columns = [pd.Categorical(frame["host"], categories=hosts).codes,
               pd.to_datetime(frame["ts"], utc=True).dt.as_unit("ns").astype("int64").to_numpy(),
               *(frame[c].to_numpy(dtype=float) for c in ("mem_mb", *DEMO_AGGS))]
    order = np.lexsort(columns[::-1])
    return [c[order] for c in columns]


def _plot_host(frame, host: str, path: str) -> None:
    """One host's readings with its sliding one-hour max and mean (and mean +- stddev)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    ts = frame["ts"].dt.tz_convert("UTC").dt.tz_localize(None) if frame["ts"].dt.tz is not None else frame["ts"]
    fig = Figure(figsize=(12, 5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    mean, std = frame["mean"].to_numpy(dtype=float), frame["stddev"].to_numpy(dtype=float)
    ax.plot(ts, frame["mem_mb"], ".", ms=2.5, color="0.35", alpha=0.7, label="readings")
    ax.fill_between(ts, mean - std, mean + std, step="post", color="tab:blue", alpha=0.15, lw=0,
                    label="1 h mean \u00b1 stddev")
    ax.step(ts, frame["max"], where="post", color="tab:red", lw=1.2, label="1 h sliding max")
    ax.step(ts, mean, where="post", color="tab:blue", lw=1.2, label="1 h sliding mean")
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("memory used (MB)")
    ax.set_title(f"{host}: {len(frame):,} readings and their one-hour sliding windows (mta-spark demo)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", markerscale=6)
    fig.tight_layout()
    fig.savefig(path)

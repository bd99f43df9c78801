"""Spark batch: per-row sliding windows, MTA against Spark SQL and pandas.

For each window size W (10^2 .. 10^5 rows) and frame (count: the newest W
rows; time: the last W seconds, which hold W rows in this data), every
method computes, for every row of every key, an aggregation over that row's
window, in the same Spark session on the same cached data:

* ``columnar max``: ``spark_ops.sliding_window(..., aggs=["max"], rows=W |
  range=W)`` as a user calls it (``engine="auto"``: the columnar engine,
  a batch of rows at a time in NumPy, windows in executor memory);
* ``columnar max, ties in any order``: the same with ``ties="any"``: no
  arrival number, the sort on ``(key, time)`` alone, the tie contract of
  Spark's window functions and of ``pandas rolling max`` below (this
  data has no ties, so every max method gives the same answer);
* ``MTA max``: the same with ``engine="amta"``, each row through an
  Amortized MTA in process memory; ``MTA max, file store``: the same with
  the windows' level queues in the embedded SQLite store;
* ``MTA top-2``: a user-defined monoid (the two largest values; its result
  is the second largest), which Spark SQL's window functions cannot express;
* ``SQL max, default frame``: ``max(v) OVER (PARTITION BY k ORDER BY t ROWS
  BETWEEN W-1 PRECEDING AND CURRENT ROW)`` (``RANGE BETWEEN W-1 PRECEDING``
  for time windows), Spark's default sliding frame; its cost per row grows
  with W, so it only runs up to the profile's ``default_frame_max``;
* ``SQL max, segment tree``: the same query with
  ``spark.sql.window.segmentTree.enabled=true`` (built-in aggregates only);
* ``pandas rolling max``: ``Series.rolling(W, min_periods=1).max()`` per
  key inside ``applyInPandas`` (count windows), or ``rolling("<W>s")`` on
  the times as a ``TimedeltaIndex`` (time windows: the rows in ``(t - W,
  t]``, as ``range=W``);
* ``pandas rolling max, ties in input order``: the same with rows of equal
  time in input order, ``sliding_window``'s answer (the plain method takes
  the shuffle's order): rows numbered before ``groupBy``, sorted on ``(t, number)``;
* ``..., Spark's byte check``: the columnar max and pandas rolling max jobs
  with ``spark.sql.execution.arrow.maxBytesPerBatch`` at Spark's default
  (the benchmark's session, like every session of this project, turns the
  check off: :data:`spark_ops.session.ARROW_BATCH_CONF`), so that both
  settings are measured in the same run;
* ``plan alone`` and ``applyInPandas alone``: the floors of the two ways
  to run count windows, without a window (at every W, count windows only): ``sliding_window``'s batch plan
  (rows numbered in input order, shuffled by key, sorted by ``(key, time,
  arrival)``, ``mapInArrow``) with a function that returns each batch's
  values as its result column as they are, and ``groupBy(k).applyInPandas``
  with a function that sorts each key's rows by time (what the pandas
  method does before ``rolling``) and returns the values as its result.
  What a method costs beyond its floor is its windows; where the two
  floors differ, only the windows' difference can make up for it;
* ``pipeline alone``: what ``sliding_window``'s batch plan costs without
  any window: the same columns (the input's; the arrival number is sorted
  on and dropped before Python), the same shuffle by key, sort and Arrow
  round trip to Python, with a Python
  function that returns each value as its own result.  No
  method that runs Python per row in this plan can beat it; it is the
  ceiling of this design on this machine.

A job's rows per second = rows / wall time of the job, the median of
``repeats`` runs, in rounds that run each method once in turn (the
default frame, minutes long, runs once), after one untimed run of every
method before the first W, so that no method is timed on a colder JVM
than another; every job
ends in the sum of its result column, and methods computing the same thing
must agree on it (``checksums_agree``).
"""

from __future__ import annotations

import contextlib
import math
import statistics

from . import common, spark_batch_jobs, sparkbench
from .common import RunConfig, fmt_num
from .experiment import Run, save_figure, verdict
from .spark_batch_jobs import (BYTE_LIMIT, pandas_floor, pandas_rolling, pipeline, plan_floor, sliding,
                               spark_byte_check, sql, top2)

NAME = "spark-batch"

PROFILES = {
    # the same rows for every W: twice the largest window per key
    "full": dict(windows=[100, 1_000, 10_000, 100_000], keys=8, rows_per_key=200_000,
                 frames=["rows", "range"], default_frame_max=10_000, repeats=5),
    "quick": dict(windows=[100, 10_000], keys=4, rows_per_key=20_000, frames=["rows", "range"],
                  default_frame_max=1_000),
    "tiny": dict(windows=[10, 100], keys=2, rows_per_key=400, frames=["rows", "range"], default_frame_max=100,
                 repeats=2),
}

COLUMNAR = "columnar max"
COLUMNAR_ANY = "columnar max, ties in any order"
MTA = "MTA max"
MTA_FILE = "MTA max, file store"
MTA_TOP2 = "MTA top-2 (user monoid)"
SQL_DEFAULT = "SQL max, default frame"
SQL_TREE = "SQL max, segment tree"
PANDAS = "pandas rolling max"
PANDAS_TIES = "pandas rolling max, ties in input order"
PIPELINE = "pipeline alone (no window)"
PLAN_FLOOR = "plan alone, values as results"
PANDAS_FLOOR = "applyInPandas alone, sorted, values as results"
#: Methods without a window (count windows only; the pipeline at the first W only).
FLOORS = (PIPELINE, PLAN_FLOOR, PANDAS_FLOOR)
COLUMNAR_CHECKED = "columnar max, Spark's byte check"
PANDAS_CHECKED = "pandas rolling max, Spark's byte check"
#: The methods run with Spark's Arrow byte check on, and the method each repeats.
BYTE_CHECKED = {COLUMNAR_CHECKED: COLUMNAR, PANDAS_CHECKED: PANDAS}
METHODS = [COLUMNAR, COLUMNAR_ANY, MTA, MTA_FILE, MTA_TOP2, SQL_DEFAULT, SQL_TREE, PANDAS, PANDAS_TIES,
           COLUMNAR_CHECKED, PANDAS_CHECKED, PIPELINE, PLAN_FLOOR, PANDAS_FLOOR]


def _column(method: str) -> str:
    """The result column a method's job is summed over."""
    return "top2" if method == MTA_TOP2 else "max"


def run(cfg: RunConfig) -> dict:
    sparkbench.ship_by_value(spark_batch_jobs.__name__)  # the functions the workers run
    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "methods": METHODS, "master": sparkbench.MASTER, "shuffle_partitions": p["keys"]})
    data = job.data
    data["notes"] = [
        "Rows/s = all rows of the job / its wall time; each job ends in sum() of its result column.",
        f"Each job runs {p.get('repeats', 1)} time(s), in rounds that run every method once in turn, and its "
        "median wall time counts (the default frame's jobs run once); before the first W, every method runs "
        "once untimed (Python workers started, the JVM's compiler warmed up).",
        f"{p['keys']} keys x {p['rows_per_key']:,} rows for every W; one reading a second per key, "
        "so a time window of W seconds holds W rows.",
        f"The default frame is O(W) per row: it runs only up to W = {p['default_frame_max']:,}.",
        "pandas rolling: by count, or by time on a TimedeltaIndex of the times (time windows); \"ties in input "
        "order\": rows numbered before the shuffle, each key sorted on (time, number), as sliding_window orders them.",
        "columnar max: sliding_window's default engine='auto', which runs this job on the columnar engine.",
        "MTA windows: Amortized MTA, buffer and cache of 512 pairs per level (the defaults).",
        "The session cuts Arrow batches by rows alone (spark.sql.execution.arrow.maxBytesPerBatch=2147483647, "
        "as every session of this project); the methods named \"Spark's byte check\" run with Spark's default.",
    ]
    records = data["records"] = []
    with sparkbench.spark_run(cfg, data, p["keys"], "mta-bench-state-") as (spark, state):
        df = sparkbench.readings(spark, p["keys"], p["rows_per_key"])
        rows = p["keys"] * p["rows_per_key"]
        for w in p["windows"]:
            for frame in p["frames"]:
                jobs = {
                    COLUMNAR: lambda: sliding(df, w, frame, ["max"], engine="auto"),
                    COLUMNAR_ANY: lambda: sliding(df, w, frame, ["max"], engine="auto", ties="any"),
                    MTA: lambda: sliding(df, w, frame, ["max"]),
                    MTA_FILE: lambda: sliding(df, w, frame, ["max"], store=f"file://{state}"),
                    MTA_TOP2: lambda: sliding(df, w, frame, [("top2", top2(), "double")]),
                    SQL_TREE: lambda: sql(spark, df, w, frame, True),
                }
                if w <= p["default_frame_max"]:
                    jobs[SQL_DEFAULT] = lambda: sql(spark, df, w, frame, False)
                jobs[PANDAS] = lambda: pandas_rolling(df, w, frame)
                jobs[PANDAS_TIES] = lambda: pandas_rolling(df, w, frame, ties=True)
                jobs.update({checked: jobs[method] for checked, method in BYTE_CHECKED.items()})
                if frame == "rows":
                    jobs.update({PLAN_FLOOR: lambda: plan_floor(df), PANDAS_FLOOR: lambda: pandas_floor(df)})
                    if w == p["windows"][0]:
                        jobs[PIPELINE] = lambda: pipeline(df)
                if not records:  # every method once, untimed: the Python workers, NumPy and the JIT warmed up
                    for method in jobs:
                        sparkbench.timed(jobs[method](), _column(method))
                methods = [m for m in METHODS if m in jobs]
                runs = {m: [] for m in methods}
                for round_ in range(p.get("repeats", 1)):  # interleaved: no method always runs on a colder JVM
                    for method in methods:
                        if method == SQL_DEFAULT and round_:
                            continue  # O(W) per row: run once
                        with spark_byte_check(spark) if method in BYTE_CHECKED else contextlib.nullcontext():
                            byte_limit = spark.conf.get(BYTE_LIMIT, None) or "Spark's default"
                            job_df = jobs[method]()
                            with sparkbench.CpuMeter() as cpu:
                                seconds, checksum, n = sparkbench.timed(job_df, _column(method))
                        assert n == rows, (method, n, rows)
                        runs[method].append((seconds, checksum, byte_limit, 1e6 * cpu.jvm / rows,
                                             1e6 * cpu.python / rows))
                for method in methods:
                    seconds = statistics.median(r[0] for r in runs[method])
                    byte_limit = runs[method][0][2]
                    rec = {"window": w, "frame": frame, "method": method, "rows": rows, "seconds": seconds,
                           "seconds_each_run": [r[0] for r in runs[method]], "rows_per_s": rows / seconds,
                           "checksum": runs[method][0][1], "checksum_each_run": [r[1] for r in runs[method]],
                           "arrow_max_bytes_per_batch": byte_limit,
                           "jvm_cpu_us_per_row": statistics.median(r[3] for r in runs[method]),
                           "python_cpu_us_per_row": statistics.median(r[4] for r in runs[method])}
                    records.append(rec)
                    cfg.log(f"  spark-batch W={w:>7,} {frame:<5} {method:<26} {rec['rows_per_s']:>10,.0f} rows/s "
                            f"({seconds:.1f} s, {rows:,} rows; CPU us/row JVM {rec['jvm_cpu_us_per_row']:.2f}, "
                            f"Python {rec['python_cpu_us_per_row']:.2f})")
                job.save()
    return sparkbench.finish_checked(job, plot, checksums_agree, summarize)


def checksums_agree(records) -> bool:
    """Every run of every max method agrees with every other on each (window, frame)."""
    sums: dict = {}
    for r in records:
        if r["method"] not in (MTA_TOP2, *FLOORS):
            sums.setdefault((r["window"], r["frame"]), []).extend(r.get("checksum_each_run", [r["checksum"]]))
    return all(math.isclose(s, v[0], rel_tol=1e-9) for v in sums.values() for s in v)


def _record(data, method, w=None, frame="rows"):
    return next((r for r in data["records"] if r["method"] == method and r["frame"] == frame
                 and (w is None or r["window"] == w)), None)


def _rate(data, method, w, frame="rows"):
    r = _record(data, method, w, frame)
    return r["rows_per_s"] if r else None


#: Whose targets the summary checks: the default (columnar) and the MTA engine.
ENGINES = {"columnar": COLUMNAR, "mta": MTA}


def summarize(data: dict) -> dict:
    """The issue's targets, for the columnar engine (what ``sliding_window``
    runs by default for this job) and for the MTA engine."""
    windows = data["config"]["windows"]
    s: dict = {}
    for engine, method in ENGINES.items():
        for frame in data["config"]["frames"]:
            ours = {w: _rate(data, method, w, frame) for w in windows}
            ours = {w: v for w, v in ours.items() if v}
            key = f"{engine}_{frame}"
            if 10_000 in ours and _rate(data, SQL_DEFAULT, 10_000, frame):
                ratio = ours[10_000] / _rate(data, SQL_DEFAULT, 10_000, frame)
                s[f"{key}_vs_default_at_1e4"] = {"ratio": ratio, "target": ">= 10", "met": ratio >= 10}
            if 100_000 in ours and _rate(data, SQL_TREE, 100_000, frame):
                ratio = ours[100_000] / _rate(data, SQL_TREE, 100_000, frame)
                s[f"{key}_vs_segment_tree_at_1e5"] = {"ratio": ratio, "target": ">= 1", "met": ratio >= 1}
            if engine == "columnar":
                s.update(_against_pandas(data, key, frame, windows))
            if len(ours) >= 2:
                spread = max(ours.values()) / min(ours.values())
                s[f"{key}_per_row_cost_spread"] = {
                    "windows": f"{min(ours):,}..{max(ours):,}", "max_over_min": spread, "target": "<= 1.5",
                    "met": spread <= 1.5}
    return s


#: The columnar max against pandas rolling max: ``(summary key suffix,
#: ours, pandas)``.  sliding_window's default (ties in input order)
#: against the plain sort (ties in the shuffle's order), and like for
#: like: ties in any order against the plain sort, ties in input order
#: against pandas sorting on the arrival number too.
AGAINST_PANDAS = (("vs_pandas_rolling", COLUMNAR, PANDAS),
                  ("ties_any_vs_pandas_rolling", COLUMNAR_ANY, PANDAS),
                  ("vs_pandas_rolling_input_ties", COLUMNAR, PANDAS_TIES))


def _against_pandas(data: dict, key: str, frame: str, windows) -> dict:
    """The lowest ratio over ``windows`` of each pair, for the pairs
    measured at every one of them."""
    out = {}
    for suffix, ours, theirs in AGAINST_PANDAS:
        pairs = [(_rate(data, ours, w, frame), _rate(data, theirs, w, frame)) for w in windows]
        if pairs and all(a and b for a, b in pairs):
            ratio = min(a / b for a, b in pairs)
            out[f"{key}_{suffix}"] = {"ratio": ratio, "target": ">= 1 at every W", "met": ratio >= 1}
    return out


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """Rows per second, per frame: one row per window size."""
    cfg = data["config"]
    methods = [m for m in METHODS if any(r["method"] == m for r in data["records"]) and m not in FLOORS]
    out = []
    for frame in cfg["frames"]:
        ratios = [(COLUMNAR, SQL_TREE, "columnar/segtree"), (COLUMNAR, PANDAS, "columnar/pandas"),
                  (COLUMNAR_ANY, PANDAS, "columnar, ties any/pandas"),
                  (COLUMNAR, PANDAS_TIES, "columnar/pandas, ties in input order"),
                  (COLUMNAR_CHECKED, PANDAS_CHECKED, "columnar/pandas, byte check"),
                  (MTA, SQL_DEFAULT, "MTA/default"), (MTA, SQL_TREE, "MTA/segtree")]
        head = ["W"] + methods + [label for _, _, label in ratios]
        rows = []
        for w in cfg["windows"]:
            row = [f"{w:,}"] + [fmt_num(_rate(data, m, w, frame)) for m in methods]
            for ours, other, _ in ratios:
                a, b = _rate(data, ours, w, frame), _rate(data, other, w, frame)
                row.append(f"{a / b:.2f}" if a and b else "-")
            rows.append(row)
        out.append(("count windows (ROWS frame), rows/s" if frame == "rows" else "time windows (RANGE frame), rows/s",
                    head, rows))
    return out


def summary_lines(data: dict) -> list[str]:
    lines = []
    ceiling = next((r["rows_per_s"] for r in data["records"] if r["method"] == PIPELINE), None)
    if ceiling:
        best = {m: max((r["rows_per_s"] for r in data["records"] if r["method"] == m), default=0)
                for m in (COLUMNAR, MTA)}
        lines.append(f"pipeline alone (shuffle, sort, Arrow round trip to Python objects, no window): "
                     f"{ceiling:,.0f} rows/s; the best columnar max run reaches {best[COLUMNAR] / ceiling:.2f} "
                     f"of it, the best MTA max run {best[MTA] / ceiling:.2f}")
    lines.extend(floor_lines(data))
    lines.extend(round_lines(data))
    same = []
    for frame in data["config"]["frames"]:
        ratios = [(_rate(data, COLUMNAR, w, frame), _rate(data, PANDAS_TIES, w, frame))
                  for w in data["config"]["windows"]]
        if all(a and b for a, b in ratios):
            same.append(f"{'count' if frame == 'rows' else 'time'} windows "
                        + "/".join(f"{a / b:.2f}" for a, b in ratios) + "x")
    if same:
        lines.append("columnar max against pandas rolling max giving sliding_window's answer at equal times (rows "
                     "numbered before the shuffle, each key sorted on time and number), W = "
                     + ", ".join(f"{w:,}" for w in data["config"]["windows"]) + ": " + "; ".join(same))
    lines.append(f"checksums of the max methods agree: {'yes' if data.get('checksums_agree') else 'NO'}")
    for key, v in (data.get("summary") or summarize(data)).items():
        lines.append(f"[target] {key}: {v.get('ratio', v.get('max_over_min')):.2f}, target {v['target']}: "
                     f"{verdict(v['met'])}")
    return lines


def round_lines(data: dict) -> list[str]:
    """Per frame, the columnar max (both tie orders) against pandas rolling
    max round by round: the runs of one round are interleaved, so their
    ratio shares the machine's load at the time (the targets take the ratio
    of the medians)."""
    lines = []
    for frame in data["config"]["frames"]:
        for ours in (COLUMNAR, COLUMNAR_ANY):
            per_w = []
            for w in data["config"]["windows"]:
                mine, theirs = _record(data, ours, w, frame), _record(data, PANDAS, w, frame)
                if mine and theirs:
                    ratios = [b / a for a, b in zip(mine["seconds_each_run"], theirs["seconds_each_run"])]
                    per_w.append(f"W = {w:,}: " + "/".join(f"{x:.2f}" for x in ratios))
            if per_w:
                lines.append(f"{ours} / {PANDAS}, rows/s each round, {'count' if frame == 'rows' else 'time'} "
                             f"windows: " + "; ".join(per_w))
    return lines


def floor_lines(data: dict) -> list[str]:
    """Per W of the count windows: the two floors side by side, and what
    the columnar max and pandas rolling max cost beyond their own floor
    (CPU per row: the medians of the JVM's and the Python workers' CPU,
    each over the rounds)."""
    def cpu(r):
        return r["jvm_cpu_us_per_row"] + r["python_cpu_us_per_row"]

    lines = []
    for w in data["config"]["windows"]:
        ours, theirs = _record(data, PLAN_FLOOR, w), _record(data, PANDAS_FLOOR, w)
        if not (ours and theirs and "jvm_cpu_us_per_row" in ours):
            continue
        line = (f"floors, count windows, W = {w:,}: plan alone {ours['rows_per_s']:,.0f} rows/s, CPU "
                f"{cpu(ours):.2f} us/row (JVM {ours['jvm_cpu_us_per_row']:.2f}); applyInPandas alone "
                f"{theirs['rows_per_s']:,.0f} rows/s, CPU {cpu(theirs):.2f} (JVM {theirs['jvm_cpu_us_per_row']:.2f}); "
                f"plan/applyInPandas {ours['rows_per_s'] / theirs['rows_per_s']:.2f}x")
        col, pan = _record(data, COLUMNAR, w), _record(data, PANDAS, w)
        if col and pan:
            line += (f"; beyond its floor: columnar max {cpu(col) - cpu(ours):+.2f} us CPU/row "
                     f"({col['rows_per_s'] / ours['rows_per_s']:.2f}x its rows/s), pandas rolling max "
                     f"{cpu(pan) - cpu(theirs):+.2f} ({pan['rows_per_s'] / theirs['rows_per_s']:.2f}x)")
        lines.append(line)
    return lines


report = sparkbench.reporter("Spark batch, per-row sliding max", tables, summary_lines)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    frames = data["config"]["frames"]
    fig, axes = plt.subplots(1, len(frames), figsize=(7 * len(frames), 5), squeeze=False)
    for ax, frame in zip(axes[0], frames):
        for method in METHODS:
            pts = sorted((r["window"], r["rows_per_s"]) for r in data["records"]
                         if r["method"] == method and r["frame"] == frame)
            if method == PIPELINE and pts:
                ax.axhline(pts[0][1], color="0.4", ls="--", lw=1, label=method + ", any W")
            elif pts:
                ax.plot([w for w, _ in pts], [v for _, v in pts], marker="o", ms=4, label=method,
                        ls=":" if method in FLOORS else "-")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows per window W")
        ax.set_ylabel("rows per second (higher is better)")
        ax.set_title(f"per-row sliding max, {'count' if frame == 'rows' else 'time'} windows", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    save_figure(plt, fig, path, sparkbench.caption(data))

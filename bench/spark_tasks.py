"""Spark: the fixed cost of a Python task, over loopback TCP and over a Unix socket.

Every Python task of a job talks to its executor over a socket: loopback
TCP by default, a Unix domain socket with
``spark.python.unix.domain.socket.enabled=true`` (Spark 4.1+), which this
project's sessions set (:data:`spark_ops.session.PYTHON_SOCKET_CONF`).
The run alternates sessions with either setting (the setting belongs to
the SparkContext) and times, in each, on the same few rows of 8 keys
repartitioned into 8 and into 64 partitions:

* ``mapInArrow``: an identity function after the shuffle and sort by key,
  as ``sliding_window``'s plan runs its windows: Spark starts a Python
  task for every partition, empty ones included;
* ``applyInPandas``: an identity function per key: Spark starts Python
  only for partitions that hold a key;
* ``no Python``: the shuffle and sort alone.

The 56 partitions more at 64 are (nearly all) empty: the difference in
wall time over them is the fixed cost of a Python task, on 2 cores.  Then
the count-window job of ``spark-batch`` (W = 1,000), the columnar max
against pandas rolling max in ``applyInPandas``, with either setting.

Each job runs once untimed, then ``repeats`` times; the median counts,
and the median over the rounds of sessions.
"""

from __future__ import annotations

import statistics

from . import common, sparkbench
from .common import RunConfig
from .experiment import Run, report_text, save_figure

NAME = "spark-tasks"

PROFILES = {
    "full": dict(rounds=3, repeats=3, keys=8, rows_per_key=10, partitions=[8, 64], count_rows_per_key=200_000),
    "quick": dict(rounds=2, repeats=3, keys=8, rows_per_key=10, partitions=[8, 64], count_rows_per_key=20_000),
    "tiny": dict(rounds=1, repeats=1, keys=4, rows_per_key=10, partitions=[4, 8], count_rows_per_key=500),
}
SOCKETS = {"loopback TCP": "false", "Unix socket": "true"}
SOCKET_SETTING = "spark.python.unix.domain.socket.enabled"
ARROW, PANDAS, JVM = "mapInArrow", "applyInPandas", "no Python"
METHODS = [ARROW, PANDAS, JVM]
COLUMNAR, ROLLING = "columnar max, count window", "pandas rolling max, count window"
WINDOW = 1_000
SCHEMA = "k int, t double, v double"


def _identity_batches(batches):
    yield from batches


def _identity_frame(frame):
    return frame


def _jobs(df):
    by_key = df.repartition("k").sortWithinPartitions("k")
    return {ARROW: lambda: by_key.mapInArrow(_identity_batches, SCHEMA),
            PANDAS: lambda: df.groupBy("k").applyInPandas(_identity_frame, SCHEMA),
            JVM: lambda: by_key}


def _median_seconds(job, column: str, repeats: int) -> float:
    sparkbench.timed(job(), column)
    return statistics.median(sparkbench.timed(job(), column)[0] for _ in range(repeats))


def run(cfg: RunConfig) -> dict:
    from . import spark_batch

    sparkbench.ship_by_value(__name__)
    sparkbench.ship_by_value(spark_batch.__name__)
    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "sockets": SOCKETS, "master": sparkbench.MASTER, "window": WINDOW})
    data = job.data
    data["notes"] = [
        f"Sessions alternate the two settings of {SOCKET_SETTING}, {p['rounds']} round(s); medians over the rounds.",
        f"{p['keys']} keys x {p['rows_per_key']} rows, repartitioned into each number of partitions; each job ends "
        f"in sum(v); once untimed, then {p['repeats']} timed runs, the median counted.",
        "Fixed cost of a Python task = (wall at the most partitions - wall at the fewest) / the partitions added "
        "(nearly all of them empty: the Python tasks of mapInArrow, none for applyInPandas).",
        f"Count windows: spark-batch's columnar max and pandas rolling max at W = {WINDOW:,}, "
        f"{p['keys']} keys x {p['count_rows_per_key']:,} rows.",
    ]
    records = data["records"] = []
    for round_ in range(p["rounds"]):
        for socket, enabled in SOCKETS.items():
            spark = sparkbench.session(cfg, p["partitions"][0], **{SOCKET_SETTING: enabled})
            try:
                data.setdefault("spark", sparkbench.spark_versions(spark))
                df = sparkbench.readings(spark, p["keys"], p["rows_per_key"])
                for partitions in p["partitions"]:
                    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
                    for method, make in _jobs(df).items():
                        seconds = _median_seconds(make, "v", p["repeats"])
                        records.append({"round": round_, "socket": socket, "partitions": partitions,
                                        "method": method, "seconds": seconds})
                        cfg.log(f"  spark-tasks {socket:<12} {partitions:>3} partitions {method:<14} "
                                f"{seconds * 1000:8.1f} ms")
                spark.conf.set("spark.sql.shuffle.partitions", str(p["keys"]))
                big = sparkbench.readings(spark, p["keys"], p["count_rows_per_key"])
                rows = p["keys"] * p["count_rows_per_key"]
                for method, make in ((COLUMNAR, lambda: spark_batch._sliding_window(big, WINDOW, "rows", ["max"],
                                                                                    engine="auto")),
                                     (ROLLING, lambda: spark_batch._pandas(big, WINDOW, "rows"))):
                    seconds = _median_seconds(make, "max", p["repeats"])
                    records.append({"round": round_, "socket": socket, "method": method, "rows": rows,
                                    "seconds": seconds, "rows_per_s": rows / seconds})
                    cfg.log(f"  spark-tasks {socket:<12} {method:<34} {rows / seconds:>12,.0f} rows/s")
            finally:
                spark.stop()
            job.save()
    return job.finish(plot, summary=summarize)


def _median(data, socket, method, partitions=None, key="seconds"):
    values = [r[key] for r in data["records"]
              if r["socket"] == socket and r["method"] == method and r.get("partitions") == partitions]
    return statistics.median(values) if values else None


def summarize(data: dict) -> dict:
    few, many = data["config"]["partitions"]
    out = {}
    for socket in SOCKETS:
        per_task = {m: 1000 * (_median(data, socket, m, many) - _median(data, socket, m, few)) / (many - few)
                    for m in METHODS}
        columnar, rolling = (_median(data, socket, m, key="rows_per_s") for m in (COLUMNAR, ROLLING))
        out[socket] = {"ms_per_partition": per_task, "columnar_vs_pandas_rolling": columnar / rolling}
    tcp, unix = (out[s]["ms_per_partition"][ARROW] for s in SOCKETS)
    out["python_task_cost_tcp_over_unix"] = tcp / unix if unix > 0 else None
    return out


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    few, many = data["config"]["partitions"]
    s = data.get("summary") or summarize(data)
    jobs = [[socket, method] + [f"{1000 * _median(data, socket, method, n):.0f}" for n in (few, many)]
            + [f"{s[socket]['ms_per_partition'][method]:.1f}"] for socket in SOCKETS for method in METHODS]
    count = [[socket] + [f"{_median(data, socket, m, key='rows_per_s'):,.0f}" for m in (COLUMNAR, ROLLING)]
             + [f"{s[socket]['columnar_vs_pandas_rolling']:.2f}"] for socket in SOCKETS]
    return [("wall time per job (ms), median over rounds",
             ["socket", "job", f"{few} partitions", f"{many} partitions", "ms per partition added"], jobs),
            (f"count windows, W = {WINDOW:,}, rows/s",
             ["socket", COLUMNAR, ROLLING, "columnar/pandas"], count)]


def summary_lines(data: dict) -> list[str]:
    s = data.get("summary") or summarize(data)
    tcp, unix = (s[socket] for socket in SOCKETS)
    ratio = s["python_task_cost_tcp_over_unix"]
    few = data["config"]["partitions"][0]
    jobs = [_median(data, socket, ARROW, few) for socket in SOCKETS]
    return [f"a mapInArrow Python task costs {tcp['ms_per_partition'][ARROW]:.1f} ms of wall time over loopback TCP, "
            f"{unix['ms_per_partition'][ARROW]:.1f} ms over a Unix socket"
            + (f" ([ratio] {ratio:.1f}x)" if ratio else "")
            + f"; a partition without Python {tcp['ms_per_partition'][JVM]:.1f} / {unix['ms_per_partition'][JVM]:.1f} ms",
            "a mapInArrow job at {0} partitions: {1:.0f} ms over loopback TCP, {2:.0f} ms over a Unix socket "
            "([ratio] {3:.2f}x)".format(few, *(1000 * t for t in jobs), jobs[0] / jobs[1]),
            f"count windows, columnar max / pandas rolling max: {tcp['columnar_vs_pandas_rolling']:.2f} over "
            f"loopback TCP, {unix['columnar_vs_pandas_rolling']:.2f} over a Unix socket"]


def report(data: dict) -> str:
    head = f"Spark: the fixed cost of a Python task, loopback TCP against a Unix socket ({data['profile']} profile)"
    return report_text([head, common.render_tables(tables(data)), "", *summary_lines(data)], data)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    s = data.get("summary") or summarize(data)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.38
    for i, socket in enumerate(SOCKETS):
        axes[0].bar([j + (i - 0.5) * width for j in range(len(METHODS))],
                    [s[socket]["ms_per_partition"][m] for m in METHODS], width, label=socket)
        axes[1].bar([j + (i - 0.5) * width for j in range(2)],
                    [_median(data, socket, m, key="rows_per_s") / 1e6 for m in (COLUMNAR, ROLLING)], width,
                    label=socket)
    axes[0].set_xticks(range(len(METHODS)), METHODS)
    axes[0].set_ylabel("ms of wall time per partition added (2 cores)")
    axes[0].set_title("fixed cost of a task", fontsize=10)
    axes[1].set_xticks(range(2), ["columnar max", "pandas rolling max"])
    axes[1].set_ylabel("million rows/s")
    axes[1].set_title(f"count windows, W = {WINDOW:,}", fontsize=10)
    for ax in axes:
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]))

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

One untimed session first warms the JVM (every session of the run shares
it); then each round runs one session of each setting, the rounds
alternating which goes first.  In a session each job runs once untimed,
then ``repeats`` times, the median counted; each record notes the setting
the session really had.  Reported: medians over the rounds, and the
count-window ratio taken within each session (paired), round by round.
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


def _median_seconds(job, column: str, repeats: int) -> float | None:
    """Once untimed, then the median of ``repeats`` timed runs (``None`` for none)."""
    sparkbench.timed(job(), column)
    return statistics.median(sparkbench.timed(job(), column)[0] for _ in range(repeats)) if repeats else None


def _session_jobs(cfg, p, session, records, round_, socket, timed=True) -> None:
    """Every job of the run in ``session``: timed into ``records``, or
    once each, untimed (``timed=False``)."""
    from . import spark_batch_jobs

    setting = session.sparkContext.getConf().get(SOCKET_SETTING, "false")  # what the session really has
    df = sparkbench.readings(session, p["keys"], p["rows_per_key"])
    repeats = p["repeats"] if timed else 0
    for partitions in p["partitions"]:
        session.conf.set("spark.sql.shuffle.partitions", str(partitions))
        for method, make in _jobs(df).items():
            seconds = _median_seconds(make, "v", repeats)
            if timed:
                records.append({"round": round_, "socket": socket, "setting": setting, "partitions": partitions,
                                "method": method, "seconds": seconds})
                cfg.log(f"  spark-tasks {socket:<12} {partitions:>3} partitions {method:<14} "
                        f"{seconds * 1000:8.1f} ms")
    session.conf.set("spark.sql.shuffle.partitions", str(p["keys"]))
    big = sparkbench.readings(session, p["keys"], p["count_rows_per_key"])
    rows = p["keys"] * p["count_rows_per_key"]
    for method, make in ((COLUMNAR, lambda: spark_batch_jobs.sliding(big, WINDOW, "rows", ["max"], engine="auto")),
                         (ROLLING, lambda: spark_batch_jobs.pandas_rolling(big, WINDOW, "rows"))):
        seconds = _median_seconds(make, "max", repeats)
        if timed:
            records.append({"round": round_, "socket": socket, "setting": setting, "method": method, "rows": rows,
                            "seconds": seconds, "rows_per_s": rows / seconds})
            cfg.log(f"  spark-tasks {socket:<12} {method:<34} {rows / seconds:>12,.0f} rows/s")


def run(cfg: RunConfig) -> dict:
    from . import spark_batch_jobs

    sparkbench.ship_by_value(__name__)
    sparkbench.ship_by_value(spark_batch_jobs.__name__)
    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "sockets": SOCKETS, "master": sparkbench.MASTER, "window": WINDOW})
    data = job.data
    data["notes"] = [
        f"Sessions alternate the two settings of {SOCKET_SETTING}, {p['rounds']} round(s), each round starting "
        "with the other setting than the round before, after one untimed session (the JVM warmed up); "
        "medians over the rounds.",
        f"{p['keys']} keys x {p['rows_per_key']} rows, repartitioned into each number of partitions; each job ends "
        f"in sum(v); once untimed, then {p['repeats']} timed runs, the median counted.",
        "Fixed cost of a Python task = (wall at the most partitions - wall at the fewest) / the partitions added "
        "(nearly all of them empty: the Python tasks of mapInArrow, none for applyInPandas), per round.",
        f"Count windows: spark-batch's columnar max and pandas rolling max at W = {WINDOW:,}, "
        f"{p['keys']} keys x {p['count_rows_per_key']:,} rows; their ratio is taken within each session.",
    ]
    records = data["records"] = []
    spark = sparkbench.session(cfg, p["partitions"][0])
    try:
        data["spark"] = sparkbench.spark_versions(spark)
        _session_jobs(cfg, p, spark, records, None, None, timed=False)
    finally:
        spark.stop()
    for round_ in range(p["rounds"]):
        for socket in list(SOCKETS)[:: 1 if round_ % 2 == 0 else -1]:
            spark = sparkbench.session(cfg, p["partitions"][0], **{SOCKET_SETTING: SOCKETS[socket]})
            try:
                _session_jobs(cfg, p, spark, records, round_, socket)
            finally:
                spark.stop()
            job.save()
    return job.finish(plot, summary=summarize)


def _of(data, round_, socket, method, partitions=None, key="seconds"):
    for r in data["records"]:
        if (r["round"], r["socket"], r["method"], r.get("partitions")) == (round_, socket, method, partitions):
            return r[key]
    return None


def _per_round(data, socket, value) -> list:
    """``value(round)`` for every round that has what it needs (a run cut
    short leaves some out)."""
    rounds = sorted({r["round"] for r in data["records"] if r["socket"] == socket})
    out = []
    for round_ in rounds:
        try:
            out.append(value(round_))
        except TypeError:  # a missing record
            continue
    return out


def _median(values: list):
    return statistics.median(values) if values else None


def summarize(data: dict) -> dict:
    few, many = data["config"]["partitions"]
    out = {}
    for socket in SOCKETS:
        per_task = {m: _median(_per_round(data, socket, lambda k, m=m: 1000 * (
            _of(data, k, socket, m, many) - _of(data, k, socket, m, few)) / (many - few))) for m in METHODS}
        job = _median(_per_round(data, socket, lambda k: 1000 * _of(data, k, socket, ARROW, few)))
        ratios = _per_round(data, socket, lambda k: _of(data, k, socket, COLUMNAR, key="rows_per_s")
                            / _of(data, k, socket, ROLLING, key="rows_per_s"))
        out[socket] = {"ms_per_partition": per_task, "few_partitions_mapinarrow_ms": job,
                       "columnar_vs_pandas_rolling": _median(ratios), "columnar_vs_pandas_rolling_each_round": ratios}
    tcp, unix = (out[s]["few_partitions_mapinarrow_ms"] for s in SOCKETS)
    out["few_partitions_mapinarrow_tcp_over_unix"] = tcp / unix if tcp and unix else None
    return out


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    few, many = data["config"]["partitions"]
    s = data.get("summary") or summarize(data)

    def ms(v):
        return "-" if v is None else f"{v:.1f}"

    jobs = [[socket, method] + [ms(_median(_per_round(data, socket, lambda k, n=n, m=method: 1000 * _of(
        data, k, socket, m, n)))) for n in (few, many)] + [ms(s[socket]["ms_per_partition"][method])]
        for socket in SOCKETS for method in METHODS]
    count = []
    for socket in SOCKETS:
        rates = [_median(_per_round(data, socket, lambda k, m=m: _of(data, k, socket, m, key="rows_per_s")))
                 for m in (COLUMNAR, ROLLING)]
        each = s[socket]["columnar_vs_pandas_rolling_each_round"]
        count.append([socket] + ["-" if r is None else f"{r:,.0f}" for r in rates]
                     + [f"{s[socket]['columnar_vs_pandas_rolling']:.2f}" if each else "-",
                        ", ".join(f"{r:.2f}" for r in each)])
    return [("wall time per job (ms), median over rounds",
             ["socket", "job", f"{few} partitions", f"{many} partitions", "ms per partition added"], jobs),
            (f"count windows, W = {WINDOW:,}, rows/s (median over rounds)",
             ["socket", COLUMNAR, ROLLING, "columnar/pandas (median)", "columnar/pandas, each round"], count)]


def summary_lines(data: dict) -> list[str]:
    s = data.get("summary") or summarize(data)
    few = data["config"]["partitions"][0]
    tcp, unix = (s[socket] for socket in SOCKETS)
    lines = []
    ratio = s.get("few_partitions_mapinarrow_tcp_over_unix")
    if ratio:
        lines.append(f"a mapInArrow job at {few} partitions: {tcp['few_partitions_mapinarrow_ms']:.0f} ms over "
                     f"loopback TCP, {unix['few_partitions_mapinarrow_ms']:.0f} ms over a Unix socket "
                     f"([ratio] {ratio:.2f}x)")
    if tcp["ms_per_partition"][ARROW] is not None and unix["ms_per_partition"][ARROW] is not None:
        lines.append(f"each further mapInArrow Python task: {tcp['ms_per_partition'][ARROW]:.1f} ms over loopback "
                     f"TCP, {unix['ms_per_partition'][ARROW]:.1f} ms over a Unix socket; a partition without "
                     f"Python {tcp['ms_per_partition'][JVM]:.1f} / {unix['ms_per_partition'][JVM]:.1f} ms")
    if tcp["columnar_vs_pandas_rolling"] and unix["columnar_vs_pandas_rolling"]:
        lines.append("count windows, columnar max / pandas rolling max, median of the rounds' ratios: "
                     f"{tcp['columnar_vs_pandas_rolling']:.2f} over loopback TCP "
                     f"({', '.join(f'{r:.2f}' for r in tcp['columnar_vs_pandas_rolling_each_round'])}), "
                     f"{unix['columnar_vs_pandas_rolling']:.2f} over a Unix socket "
                     f"({', '.join(f'{r:.2f}' for r in unix['columnar_vs_pandas_rolling_each_round'])})")
    return lines


def report(data: dict) -> str:
    head = (f"Spark: the fixed cost of a Python task, loopback TCP against a Unix socket ({data['profile']} "
            f"profile, {sparkbench.MASTER}, Spark {data.get('spark', {}).get('spark', '?')})")
    return report_text([head, common.render_tables(tables(data))], data, summary_lines(data))


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    s = data.get("summary") or summarize(data)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.38
    for i, socket in enumerate(SOCKETS):
        axes[0].bar([j + (i - 0.5) * width for j in range(len(METHODS))],
                    [s[socket]["ms_per_partition"][m] or 0 for m in METHODS], width, label=socket)
        each = s[socket]["columnar_vs_pandas_rolling_each_round"]
        axes[1].plot(range(len(each)), each, marker="o", label=socket)
    axes[0].set_xticks(range(len(METHODS)), METHODS)
    axes[0].set_ylabel("ms of wall time per partition added (2 cores)")
    axes[0].set_title("fixed cost of a task", fontsize=10)
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set_xlabel("round")
    axes[1].set_ylabel("columnar max / pandas rolling max (rows/s)")
    axes[1].set_title(f"count windows, W = {WINDOW:,}, each round", fontsize=10)
    for ax in axes:
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    save_figure(plt, fig, path, common.machine_caption(data["machine"]))

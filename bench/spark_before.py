"""Spark batch: the library when issue 12 was filed beside the library now,
on the same machine in the same run.

Issue 12's targets compare the library with itself as it was when the
issue was filed ("at least 5x faster than now", "at least 2x its rows per
second now").  This experiment checks that commit's ``mta``, ``stores`` and
``spark_ops`` out of git (``git archive``, :data:`BEFORE`) and runs the
same job on either library, each in its own process and Spark session
(:mod:`bench.spark_before_job`: a session's Python workers import one
library), on the same Parquet input, the requests alternating between the
two (before, now, now, now, before, ...), after one unmeasured run of
each.  The job is the demo's windows stage as in :mod:`bench.spark_demo`:
the demo's readings (:func:`spark_ops.telemetry.fleet_memory`, seed 0),
one-hour windows per host, Parquet in and out, 8 shuffle partitions.

* ``before: MTA, file store`` -- what the demo ran when the issue was
  filed: ``engine="amta"``, ``store=`` the embedded file store, the ready
  ``max``, ``mean``, ``stddev``;
* ``before: MTA user monoids, file store`` -- the same with the three
  results written as user monoids (:data:`bench.spark_demo.USER_AGGS`);
* ``now: columnar`` -- the same call with the default engine (what the
  demo runs now);
* ``now: MTA, file store`` and ``now: MTA user monoids, file store`` --
  the two MTA rows on today's library.

Targets: the demo's windows stage (``now: columnar`` over ``before: MTA,
file store``) at least 5x the rows per second; the user-monoid path (its
two rows) at least 2x.  Every method's output must have the same sums of
max, mean and stddev.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import common, sparkbench
from .common import RunConfig
from .experiment import Run, save_figure, verdict
from .spark_demo import AGGS, PARTITIONS, cpu_table, median_of

NAME = "spark-before"

#: ``main`` when issue 12 was filed: the last commit before the work on
#: issues 11 to 15 was merged (the issue builds on issue 11's redesign).
BEFORE = "76a4d22"
PROFILES = {
    "full": dict(rows=1_000_000, hosts=300, repeats=3, before=BEFORE),
    "quick": dict(rows=200_000, hosts=60, repeats=2, before=BEFORE),
    # the smoke test: the machinery on a tiny input, today's commit on both sides
    "tiny": dict(rows=3_000, hosts=5, repeats=1, before="HEAD"),
}
OLD = "before: MTA, file store"
OLD_USER = "before: MTA user monoids, file store"
NEW = "now: columnar"
NEW_MTA = "now: MTA, file store"
NEW_USER = "now: MTA user monoids, file store"
#: method -> (library, engine, aggregations)
METHODS = {OLD: ("before", "amta", "ready"), OLD_USER: ("before", "amta", "user"), NEW: ("now", "auto", "ready"),
           NEW_MTA: ("now", "amta", "ready"), NEW_USER: ("now", "amta", "user")}
#: The targets: (name, faster method, slower method, ratio wanted).
TARGETS = [("demo_windows_stage", NEW, OLD, 5.0), ("user_monoid_path", NEW_USER, OLD_USER, 2.0)]
REPO = Path(__file__).resolve().parent.parent


def checkout(commit: str, into: str) -> str:
    """``commit``'s three packages extracted under ``into``; its full hash."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", sha, "mta", "stores", "spark_ops"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return sha


class JobProcess:
    """One library's job process (:mod:`bench.spark_before_job`)."""

    def __init__(self, library: str, cwd: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([library, str(REPO)])}
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.spark_before_job", str(PARTITIONS)], cwd=cwd,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, **request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        raise RuntimeError(f"the job process ended (exit status {self.proc.wait()}); its errors are above")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def run(cfg: RunConfig) -> dict:
    from spark_ops.cli.demo_report import DEMO_HOURS, DEMO_SEED, DEMO_WINDOW, demo_readings, write_parquet_input

    p = PROFILES[cfg.profile]
    job = Run(NAME, cfg, {**p, "aggs": AGGS, "range_seconds": DEMO_WINDOW["range"], "methods": list(METHODS),
                          "master": sparkbench.MASTER, "shuffle_partitions": PARTITIONS})
    data = job.data
    work = tempfile.mkdtemp(prefix="mta-bench-before-")
    processes: dict[str, JobProcess] = {}
    try:
        libraries = {"before": os.path.join(work, "before-lib"), "now": str(REPO)}
        os.mkdir(libraries["before"])
        data["before_commit"] = checkout(p["before"], libraries["before"])
        data["notes"] = [
            f"before: the library at commit {data['before_commit'][:10]} (git archive of mta, stores, spark_ops); "
            f"now: the working tree at {data['machine'].get('git_commit', '?')[:10]}.",
            f"{p['rows']:,} readings from {p['hosts']} hosts over {DEMO_HOURS:g} h (the demo's generator, seed "
            f"{DEMO_SEED}), windows of {DEMO_WINDOW['range']:,} s, max, mean and stddev per host, Parquet in and "
            "out; every method reads the same files.",
            "Each library runs in its own process and Spark session (local[2]); the requests alternate, "
            f"{p['repeats']} run(s) each after one unmeasured run; the medians count.",
            "CPU: user + system seconds of the JVM and of the Python workers below each job process (psutil).",
        ]
        if any(Path(libraries["before"], "mta").glob("*.c")):
            data["notes"].append("before: its C extension is not built here, so it runs its pure-Python engines.")
        input_dir = os.path.join(work, "input")
        write_parquet_input(demo_readings(p["hosts"], p["rows"]), input_dir)
        for side, library in libraries.items():
            processes[side] = JobProcess(library, work)

        def request(method: str) -> dict:
            side, engine, aggs = METHODS[method]
            return processes[side].run(input=input_dir, out=os.path.join(work, f"out-{side}"), engine=engine,
                                       aggs=aggs, store=f"file://{work}/state-{side}")

        data["libraries"] = {}
        for method in METHODS:
            got = request(method)
            data["libraries"][METHODS[method][0]] = got["library"]  # where the job process imported it from
            data["spark"] = {"pyspark": got["pyspark"], "spark": got["spark"], "master": sparkbench.MASTER,
                             "java_home": os.environ.get("JAVA_HOME")}
            cfg.log(f"  spark-before warm-up {method:<38} {got['seconds']:.1f} s ({got['library']})")
        records = data["records"] = []
        n = p["rows"]
        for repeat in range(p["repeats"]):
            for method in METHODS:
                load = os.getloadavg()[0]
                got = request(method)
                rec = {"method": method, "repeat": repeat, "rows": n, "seconds": got["seconds"],
                       "rows_per_s": n / got["seconds"], "cpu_us_per_row": 1e6 * (got["jvm"] + got["python"]) / n,
                       "jvm_cpu_us_per_row": 1e6 * got["jvm"] / n, "python_cpu_us_per_row": 1e6 * got["python"] / n,
                       "load_average_before": round(load, 2), "checksums": got["checksums"]}
                records.append(rec)
                cfg.log(f"  spark-before {method:<38} {rec['rows_per_s']:>10,.0f} rows/s, "
                        f"{rec['cpu_us_per_row']:6.2f} us CPU/row (JVM {rec['jvm_cpu_us_per_row']:.2f}, "
                        f"Python {rec['python_cpu_us_per_row']:.2f}; load {load:.2f})")
                job.save()
    finally:
        for proc in processes.values():
            proc.close()
        shutil.rmtree(work, ignore_errors=True)
    return sparkbench.finish_checked(job, plot, checksums_agree, summarize)


def checksums_agree(records) -> bool:
    """Every run of every method gives the same sums of max, mean and stddev."""
    first = records[0]["checksums"]
    return all(math.isclose(a, b, rel_tol=1e-9) for r in records for a, b in zip(r["checksums"], first))


def summarize(data: dict) -> dict:
    """Issue 12's two targets against the library it was filed on."""
    out = {}
    for name, new, old, wanted in TARGETS:
        rate = {m: median_of(data, m, "rows_per_s") for m in (new, old)}
        if all(rate.values()):
            cpu = {m: median_of(data, m, "cpu_us_per_row") for m in (new, old)}
            ratio = rate[new] / rate[old]
            out[name] = {"ratio": ratio, "faster": new, "slower": old, "cpu_per_row_ratio": cpu[old] / cpu[new],
                         "target": f">= {wanted:g}", "met": ratio >= wanted}
    return out


def tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    return [("the demo's windows stage, library before and now (median of the runs)",
             *cpu_table(data, METHODS, wall=False))]


def summary_lines(data: dict) -> list[str]:
    lines = [f"before: commit {data.get('before_commit', '?')[:10]}; checksums (sums of {', '.join(AGGS)}) "
             f"agree: {'yes' if data.get('checksums_agree') else 'NO'}"]
    for key, v in (data.get("summary") or summarize(data)).items():
        lines.append(f"[target] {key}: {v['ratio']:.2f}x the rows per second ({v['faster']} over {v['slower']}; "
                     f"{v['cpu_per_row_ratio']:.2f}x less CPU per row), target {v['target']}: {verdict(v['met'])}")
    return lines


report = sparkbench.reporter("Spark: the demo's windows stage, library before and now", tables, summary_lines)


def plot(data: dict, path) -> None:
    plt = common.pyplot()
    methods = [m for m in METHODS if median_of(data, m, "rows_per_s")]
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(methods) + 1.5))
    ax.barh(range(len(methods)), [median_of(data, m, "rows_per_s") for m in methods],
            color=["tab:gray" if METHODS[m][0] == "before" else "tab:red" for m in methods])
    ax.set_yticks(range(len(methods)), methods, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("rows per second (higher is better)")
    ax.set_title("the demo's windows stage: library before (grey) and now (red)")
    save_figure(plt, fig, path, sparkbench.caption(data))

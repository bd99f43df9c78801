"""Helpers for the Spark tests (tests/test_spark.py, tests/test_spark_recovery.py).

* :func:`spark_session` -- one SparkSession at a time per test process: a
  session on another master stops the running one first (a Python process
  has a single SparkContext).  ``SPARK_HOME`` and ``PYSPARK_PYTHON`` are set
  on import, before any JVM starts, so ``local-cluster`` executors find the
  Spark jars and this virtualenv's Python.
* :func:`random_rows` -- keyed rows with bursts, equal times and gaps, in a
  random (arrival) order; :func:`expected` -- the brute-force oracle over
  the raw rows, pure Python and independent of ``mta``;
  :func:`assert_outputs` -- compare Spark's rows with it by row id.
* :func:`joined` -- a NON-commutative user aggregation (the window's values
  as a comma-joined string), so a lost, duplicated or reordered row shows.
* streaming: :func:`write_parquet` adds an input file atomically,
  :func:`run_available_now` runs a query with ``trigger(availableNow=True)``
  from its checkpoint location into a parquet sink (exactly-once), and
  :func:`read_sink` reads everything the sink committed.

Functions shipped to executors are defined here or in the test modules;
:func:`ship_by_value` makes cloudpickle send those modules by value, so
executors whose working directory is not the repository (``local-cluster``)
need not import ``tests``.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import sys
import uuid

import pyspark

os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from mta import Aggregator, Monoid  # noqa: E402
from spark_ops import READY  # noqa: E402

SCHEMA = "id long, k string, t double, v double"
#: Absolute and relative tolerance for float aggregations.
ABS_TOL = 1e-6
REL_TOL = 1e-9


def ship_by_value(*modules) -> None:
    from pyspark import cloudpickle

    for m in modules:
        cloudpickle.register_pickle_by_value(m)


ship_by_value(sys.modules[__name__])


#: Rows a sort holds before it spills (see :func:`spark_session`).
FORCE_SPILL = 64


# -- sessions --------------------------------------------------------------------
@contextlib.contextmanager
def session_conf(spark, settings: dict):
    """``spark`` with ``settings`` while the block runs, its own restored
    after (a setting it did not have is unset)."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def spark_session(master: str, **conf):
    """A new session on ``master``; a running session is stopped first (its
    master and settings would otherwise be reused by ``getOrCreate``)."""
    from pyspark import SparkContext

    from spark_ops.session import local_session

    if SparkContext._active_spark_context is not None:
        from pyspark.sql import SparkSession

        SparkSession.builder.getOrCreate().stop()
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    # Sorts spill every FORCE_SPILL rows and merge the spills: rows that tie on
    # the sort columns then come out in no particular order, as they do on big
    # data.  Without this, a local shuffle plus a stable in-memory sort keep
    # the input order, and a missing tie-break by arrival would go unnoticed.
    conf.setdefault("spark.shuffle.spill.numElementsForceSpillThreshold", str(FORCE_SPILL))
    # Keep every shuffle partition (adaptive execution would coalesce the
    # small test data into one task): keys are processed by concurrent tasks.
    conf.setdefault("spark.sql.adaptive.coalescePartitions.enabled", "false")
    return local_session(master, **conf)


# -- data --------------------------------------------------------------------------
def key_times(rng: random.Random, n: int, start: float = 0.0) -> list[float]:
    """``n`` non-decreasing integer-valued times: steps of 0 (equal times),
    small steps, bursts of equal times and gaps longer than any window."""
    times, t = [], start
    while len(times) < n:
        kind = rng.random()
        if kind < 0.15:  # a burst at one instant
            times += [t] * rng.randint(2, 6)
        elif kind < 0.25:  # a gap
            t += rng.randint(15, 40)
            times.append(t)
        else:
            t += rng.choice([0, 0, 1, 1, 2, 3, 5])
            times.append(t)
    return [float(x) for x in times[:n]]


def random_rows(rng: random.Random, *, keys: int = 20, per_key=(20, 60), start: float = 0.0,
                first_id: int = 0, values=None) -> list[dict]:
    """Rows ``{id, k, t, v}`` of ``keys`` keys, shuffled: the list order is
    the input (arrival) order, so rows of equal time and key come in random
    relative order.  Values are positive (the geometric mean needs it) and
    often repeat; ``values(rng)`` overrides them."""
    rows = []
    for i in range(keys):
        n = rng.randint(*per_key)
        for t in key_times(rng, n, start):
            v = values(rng) if values else rng.choice([rng.randint(1, 9), round(rng.uniform(0.5, 200), 2)])
            rows.append({"k": f"k{i:02d}", "t": t, "v": float(v)})
    rng.shuffle(rows)
    for j, r in enumerate(rows):
        r["id"] = first_id + j
    return rows


def random_rounds(rng: random.Random, rounds: int, *, keys: int = 20, per_key=(20, 60),
                  first_id: int = 0) -> list[list[dict]]:
    """Rows for ``rounds`` micro-batches: each key's non-decreasing times are
    cut into consecutive runs, one per round (so windows span micro-batches,
    and a round may start at its key's newest time of the round before);
    each round is shuffled."""
    out: list[list[dict]] = [[] for _ in range(rounds)]
    for i in range(keys):
        times = key_times(rng, rng.randint(*per_key))
        cuts = sorted(rng.randint(0, len(times)) for _ in range(rounds - 1))
        for r, (a, b) in enumerate(zip([0] + cuts, cuts + [len(times)])):
            for t in times[a:b]:
                v = rng.choice([rng.randint(1, 9), round(rng.uniform(0.5, 200), 2)])
                out[r].append({"k": f"k{i:02d}", "t": t, "v": float(v)})
    n = first_id
    for batch in out:
        rng.shuffle(batch)
        for row in batch:
            row["id"] = n
            n += 1
    return out


def as_tuples(rows: list[dict], columns=("id", "k", "t", "v")) -> list[tuple]:
    return [tuple(r[c] for c in columns) for r in rows]


# -- the non-commutative user aggregation ----------------------------------------
def _concat(a: str, b: str) -> str:
    return a + b


def _fmt(v) -> str:
    return f"{v:g},"


def joined() -> Aggregator:
    """The window's values, oldest first, as ``"v1,v2,...,"``."""
    return Aggregator(Monoid(_concat, ""), lift=_fmt, name="joined")


def joined_expected(values) -> str:
    return "".join(f"{v:g}," for v in values)


# -- the oracle ----------------------------------------------------------------------
def _mean(xs):
    return math.fsum(xs) / len(xs)


def _var(xs, ddof):
    if len(xs) <= ddof:
        return None
    m = _mean(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - ddof)


def _sqrt(x):
    return None if x is None else math.sqrt(x)


ORACLE = {
    "sum": math.fsum,
    "count": len,
    "min": min,
    "max": max,
    "mean": _mean,
    "geomean": lambda xs: math.exp(math.fsum(math.log(x) for x in xs) / len(xs)),
    "variance": lambda xs: _var(xs, 1),
    "stddev": lambda xs: _sqrt(_var(xs, 1)),
    "var_pop": lambda xs: _var(xs, 0),
    "stddev_pop": lambda xs: _sqrt(_var(xs, 0)),
    "first": lambda xs: xs[0],
    "last": lambda xs: xs[-1],
    "joined": joined_expected,
}
assert set(READY) <= set(ORACLE)


def is_bad(row: dict) -> str | None:
    """Why the oracle leaves a row out (the rules of spark_ops.rows.check_row,
    minus the streaming out-of-order rule, which depends on micro-batches)."""
    k, t, v = row["k"], row["t"], row["v"]
    if k is None or (isinstance(k, float) and math.isnan(k)):
        return "null or NaN key"
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "null or NaN time"
    if isinstance(t, float) and math.isinf(t):
        return "infinite time"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "null or NaN value"
    return None


#: Results on an empty window (a policy may evict every row).
EMPTY = {"sum": 0, "count": 0, "joined": ""}


def expected(rows: list[dict], aggs, *, range=None, count=None, sum_at_most=None,
             rejected=None) -> dict[int, dict]:
    """Row id -> {aggregation: value} by brute force.

    ``rows`` in arrival order.  A row's window: the rows of its key that come
    at or before it in (time, arrival) order, with time in ``(t - range, t]``
    (``range``), or the newest ``count`` of them, or (``sum_at_most``, for
    non-negative values) the longest run of the newest of them whose values
    sum to at most the bound.  Rows in ``rejected`` (id -> reason) and rows
    with a null key, time or value get ``None`` aggregations and the reason
    under ``"rejected"``.
    """
    assert [range, count, sum_at_most].count(None) == 2
    rejected = dict(rejected or {})
    by_key: dict = {}
    out: dict[int, dict] = {}
    for arrival, r in enumerate(rows):
        reason = rejected.get(r["id"]) or is_bad(r)
        if reason:
            out[r["id"]] = {**{a: None for a in aggs}, "rejected": reason}
            continue
        by_key.setdefault(r["k"], []).append((r["t"], arrival, r["v"], r["id"]))
    for items in by_key.values():
        items.sort(key=lambda x: (x[0], x[1]))
        for pos, (t, _, _, rid) in enumerate(items):
            before = items[: pos + 1]
            if range is not None:
                window = [x[2] for x in before if x[0] > t - range]
            elif count is not None:
                window = [x[2] for x in before[-count:]]
            else:
                window = []
                for x in reversed(before):
                    if math.fsum(window) + x[2] > sum_at_most:
                        break
                    window.insert(0, x[2])
            out[rid] = {**{a: ORACLE[a](window) if window else EMPTY.get(a) for a in aggs}, "rejected": None}
    return out


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def assert_outputs(actual_rows, rows: list[dict], want: dict[int, dict], aggs, *, flag: bool = False) -> None:
    """Spark's output rows equal the oracle: one per input row, the input's
    columns passed through, every aggregation (floats within tolerance)."""
    inputs = {r["id"]: r for r in rows}
    got = [r.asDict() if hasattr(r, "asDict") else dict(r) for r in actual_rows]
    ids = [g["id"] for g in got]
    assert len(ids) == len(set(ids)), "an input row came out more than once"
    assert sorted(ids) == sorted(inputs), (
        f"{len(set(inputs) - set(ids))} input rows missing, {len(set(ids) - set(inputs))} unexpected")
    columns = list(aggs) + (["rejected"] if flag else [])
    mismatches = []
    for g in got:
        r, w = inputs[g["id"]], want[g["id"]]
        for c in ("k", "t", "v"):
            assert g[c] == r[c] or (g[c] != g[c] and r[c] != r[c]), (g, r)
        for c in columns:
            if c == "rejected":
                ok = (g[c] is None) == (w[c] is None) and (w[c] is None or w[c] in g[c])
            else:
                ok = _close(g[c], w[c])
            if not ok:
                mismatches.append((g["id"], g["k"], g["t"], c, g[c], w[c]))
    assert not mismatches, f"{len(mismatches)} mismatches, first ones (id, k, t, column, got, want): " \
                           f"{mismatches[:10]}"
    if not flag:
        assert all("rejected" not in g for g in got)


def canonical(actual_rows) -> list[tuple]:
    """Output rows as sorted tuples, for comparing two runs exactly."""
    return sorted(tuple(r) for r in actual_rows)


# -- streaming ---------------------------------------------------------------------
def write_parquet(directory: str, rows: list[dict], schema=None) -> str:
    """Add ``rows`` (in this order) to a file source directory as one new
    parquet file, atomically (written under a hidden name, then renamed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = schema or pa.schema([("id", pa.int64()), ("k", pa.string()), ("t", pa.float64()),
                                  ("v", pa.float64())])
    table = pa.Table.from_pylist([{f.name: r[f.name] for f in schema} for r in rows], schema=schema)
    os.makedirs(directory, exist_ok=True)
    name = f"part-{uuid.uuid4().hex}.parquet"
    hidden = os.path.join(directory, "." + name)
    pq.write_table(table, hidden)
    final = os.path.join(directory, name)
    os.rename(hidden, final)
    return final


def stream_source(spark, directory: str, schema: str = SCHEMA):
    return spark.readStream.schema(schema).parquet(directory)


def run_available_now(out_df, sink: str, checkpoint: str, timeout: float = 240, run_ids=None):
    """Process every file now in the source, from ``checkpoint``, then stop.
    Raises what the query failed with.  ``run_ids`` collects the run's id
    (its Spark job group)."""
    q = (out_df.writeStream.format("parquet").option("path", sink)
         .option("checkpointLocation", checkpoint).outputMode("append")
         .trigger(availableNow=True).start())
    if run_ids is not None:
        run_ids.append(str(q.runId))
    try:
        finished = q.awaitTermination(timeout)
        assert finished, f"streaming query did not finish within {timeout} s"
    finally:
        if q.isActive:
            q.stop()
    return q


def read_sink(spark, sink: str):
    return spark.read.parquet(sink).collect()


def split_by_key(rows: list[dict], files: int) -> list[list[dict]]:
    """The rows cut into ``files`` groups with every key in one group (the
    order within a key kept): ties between rows of one key then have a known
    arrival order in a micro-batch (their order in one file), whatever order
    Spark reads the files in."""
    keys = sorted({r["k"] for r in rows}, key=str)
    group = {k: i % files for i, k in enumerate(keys)}
    out: list[list[dict]] = [[] for _ in range(files)]
    for r in rows:
        out[group[r["k"]]].append(r)
    return [g for g in out if g]


# -- recovery: failures injected from user code, executors killed -----------------------
def key_coded(rows: list[dict], rng: random.Random) -> list[dict]:
    """Give each row a value that tells its key: ``1000 * key index + 1..999``
    (so evidence written by an aggregator can name the keys it saw)."""
    for r in rows:
        r["v"] = float(1000 * int(r["k"][1:]) + rng.randint(1, 999))
    return rows


def key_of_value(v: float) -> str:
    return f"k{int(v // 1000):02d}"


def middle_row(rows: list[dict], key: str) -> dict:
    """The row of ``key`` in the middle of its (time, arrival) order."""
    mine = sorted(((r["t"], i, r) for i, r in enumerate(rows) if r["k"] == key), key=lambda x: x[:2])
    return mine[len(mine) // 2][2]


class FailFirstAttempt:
    """A ``lift`` for :func:`trace`: raises in the first attempt of a task when
    it meets a value in ``markers``, after writing what that attempt lifted
    before (a JSON file in ``evidence_dir``).  No marker: never fails."""

    def __init__(self, markers=(), evidence_dir: str | None = None) -> None:
        self.markers = frozenset(markers)
        self.evidence_dir = evidence_dir
        self.seen: dict = {}

    def __call__(self, v):
        if self.markers:
            import json

            from pyspark import TaskContext

            ctx = TaskContext.get()
            seen = self.seen.setdefault(ctx.taskAttemptId(), [])
            if v in self.markers and ctx.attemptNumber() == 0:
                evidence = {"stage": ctx.stageId(), "partition": ctx.partitionId(), "marker": v,
                            "lifted_before": len(seen), "keys_before": sorted({key_of_value(x) for x in seen})}
                path = os.path.join(self.evidence_dir, f"fail-{ctx.stageId()}-{ctx.partitionId()}.json")
                with open(path + ".tmp", "w") as f:
                    json.dump(evidence, f)
                os.rename(path + ".tmp", path)
                raise RuntimeError(f"injected failure at value {v!r} in the first attempt of a task")
            seen.append(v)
        return f"{v:g},"


class Sleepy:
    """A ``lift`` for :func:`trace` that, while ``control_dir/armed`` exists,
    sleeps ``delay`` s per row and, after ``after`` rows in one task, writes
    ``control_dir/started-<pid>`` (the Python worker's pid)."""

    def __init__(self, delay: float = 0.0, control_dir: str | None = None, after: int = 20) -> None:
        self.delay, self.control_dir, self.after = delay, control_dir, after
        self.n = 0

    def __call__(self, v):
        if self.delay and os.path.exists(os.path.join(self.control_dir, "armed")):
            import time

            time.sleep(self.delay)
            self.n += 1
            if self.n == self.after:
                path = os.path.join(self.control_dir, f"started-{os.getpid()}")
                with open(path + ".tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.rename(path + ".tmp", path)
        return f"{v:g},"


def trace(lift=None) -> Aggregator:
    """The ``joined`` aggregation (window values as a string) with another lift."""
    return Aggregator(Monoid(_concat, ""), lift=lift or _fmt, name="joined")


def is_executor(proc) -> bool:
    import psutil

    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return "CoarseGrainedExecutorBackend" in cmd or "org.apache.spark.executor" in cmd


def executor_jvms() -> list:
    """The executor JVMs of a local-cluster: descendants of this process."""
    import psutil

    return [p for p in psutil.Process().children(recursive=True) if is_executor(p)]


class ExecutorKiller:
    """A thread that waits for a ``started-<pid>`` file in ``control_dir``,
    then SIGKILLs the executor JVM running that Python worker."""

    def __init__(self, control_dir: str, timeout: float = 180.0) -> None:
        import threading

        self.control_dir, self.timeout = control_dir, timeout
        self.killed = None  # psutil.Process of the executor
        self.orphans: list = []  # its Python daemon and workers at the kill
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name="executor-killer", daemon=True)

    def start(self) -> "ExecutorKiller":
        self.thread.start()
        return self

    def _run(self) -> None:
        import glob
        import signal
        import time

        import psutil

        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            started = glob.glob(os.path.join(self.control_dir, "started-*"))
            for path in started:
                if path.endswith(".tmp"):
                    continue
                pid = int(path.rsplit("-", 1)[1])
                try:
                    jvm = next((p for p in psutil.Process(pid).parents() if is_executor(p)), None)
                except psutil.NoSuchProcess:
                    continue
                if jvm is None:
                    self.error = f"python worker {pid} has no executor JVM among its parents"
                    return
                self.orphans = jvm.children(recursive=True)
                jvm.send_signal(signal.SIGKILL)
                self.killed = jvm
                try:  # the retries need not be slow
                    os.remove(os.path.join(self.control_dir, "armed"))
                except FileNotFoundError:
                    pass
                return
            time.sleep(0.05)
        self.error = f"no task reported progress within {self.timeout} s"

    def join(self) -> None:
        self.thread.join(self.timeout + 10)

    def reap(self, timeout: float = 30.0) -> list:
        """Wait for the killed executor's Python processes to exit; kill
        those still there after ``timeout`` (they were started by the test)."""
        import psutil

        _, alive = psutil.wait_procs(self.orphans, timeout=timeout)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        return alive

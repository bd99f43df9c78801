"""Stage lines with elapsed times and Spark task counts, on stderr."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid


#: Seconds between task-count lines when stderr is not a terminal.
EVERY = 15.0


class Progress:
    """Stage lines on ``stream`` (stderr) with elapsed times, and while a
    Spark stage runs, its completed/total tasks from ``sc.statusTracker()``
    (a live line on a terminal, a line every ``every`` seconds otherwise)."""

    def __init__(self, stream=None, *, stages: int | None = None, every: float | None = None):
        self.stream = stream or sys.stderr
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.stages = stages
        self.every = EVERY if every is None else every
        self._shown = False  # a live line is on the terminal
        self.number = 0
        self.started = time.monotonic()
        self.times: dict[str, float] = {}

    def line(self, text: str, *, end="\n") -> None:
        """Print ``text`` among the progress lines (over a live line, which it clears)."""
        if self._shown and not text.startswith("\r"):
            text = "\r\033[K" + text
        self._shown = False
        print(text, file=self.stream, end=end, flush=True)

    @contextlib.contextmanager
    def stage(self, label: str, spark=None, detail: str = "", job: str | None = None):
        """A stage called ``label`` (its time is ``times[label]``), described
        further by ``detail`` on its first line; ``job``: the description of
        its Spark jobs in the UI (default ``label``)."""
        self.number += 1
        head = f"[{self.number}/{self.stages}]" if self.stages else f"[{self.number}]"
        self.line(f"{head} {label}{': ' + detail if detail else ''} ...")
        t0 = time.monotonic()
        stop = threading.Event()
        poller = None
        jobs = Jobs()
        if spark is not None:
            sc = spark.sparkContext
            jobs.group = f"mta-spark-{uuid.uuid4().hex[:8]}"
            sc.setJobGroup(jobs.group, label)
            if job:
                sc.setJobDescription(job)
            poller = threading.Thread(target=self._poll, args=(sc, jobs, label, t0, stop), daemon=True)
            poller.start()
        try:
            yield jobs
        finally:
            stop.set()
            if poller is not None:
                poller.join(timeout=5)
                sc.setLocalProperty("spark.jobGroup.id", None)
                sc.setLocalProperty("spark.job.description", None)
            elapsed = time.monotonic() - t0
            self.times[label] = elapsed
            if self.live:
                self.line("\r\033[K", end="")
            ok = sys.exc_info()[0] is None
            self.line(f"{head} {label}: {'done' if ok else 'failed'} in {duration(elapsed)}")

    def _poll(self, sc, jobs: Jobs, label: str, t0: float, stop: threading.Event) -> None:
        last_text, last_print = None, time.monotonic()
        while not stop.wait(0.5 if self.live else min(1.0, max(0.1, self.every))):
            try:
                text = self._tasks(sc, jobs.group, jobs.running)
            except Exception:  # noqa: BLE001 - progress is best effort (session stopping, ...)
                continue
            if text is None:
                continue
            line = f"    {label}: {text}, {duration(time.monotonic() - t0)}"
            if self.live:
                self.line("\r\033[K" + line, end="")
                self._shown = True
            elif text != last_text and time.monotonic() - last_print >= self.every:
                self.line(line)
                last_text, last_print = text, time.monotonic()

    @staticmethod
    def _tasks(sc, group: str, running: bool = False) -> str | None:
        tracker = sc.statusTracker()
        jobs = tracker.getJobIdsForGroup(group)
        if not jobs:
            return None
        stage_ids = set()
        for j in jobs:
            info = tracker.getJobInfo(j)
            if info is not None and (not running or info.status == "RUNNING"):
                stage_ids.update(info.stageIds)
        if running and not stage_ids:  # between micro-batches: nothing to report
            return None
        done = total = running = stages = 0
        for s in sorted(stage_ids):
            info = tracker.getStageInfo(s)
            if info is None or (info.numActiveTasks == 0 and info.numCompletedTasks == 0
                                and s not in tracker.getActiveStageIds()):
                continue  # not started, or skipped
            stages += 1
            total += info.numTasks
            done += info.numCompletedTasks
            running += info.numActiveTasks
        if not stages:
            return "waiting for tasks"
        return f"{done}/{total} tasks done, {running} running ({stages} stage{'s' * (stages > 1)})"


class Jobs:
    """The Spark jobs a stage's progress counts: those of job group
    ``group`` (the stage's own, or one the stage's work sets itself, as a
    streaming query does, :meth:`follow`); ``running``: only the jobs still
    running (a query's earlier micro-batches are done)."""

    def __init__(self) -> None:
        self.group: str | None = None
        self.running = False

    def follow(self, group: str) -> None:
        self.group, self.running = group, True


def rows(n: int) -> str:
    return f"{n:,} row{'s' * (n != 1)}"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d} min" if m < 60 else f"{m // 60}:{m % 60:02d}:{s:02d} h"

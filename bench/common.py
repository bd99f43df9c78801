"""Shared pieces of the benchmark driver: machine info, timing, output."""

from __future__ import annotations

import datetime as _dt
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice, repeat
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parent.parent


# -- run configuration --------------------------------------------------------

@dataclass
class RunConfig:
    profile: str = "full"  # "full", "quick" or "tiny"
    out: Path = field(default_factory=lambda: REPO / "bench" / "results")
    engines: list[str] | None = None  # None: every applicable engine
    gc_enabled: bool = False  # False: the cyclic GC is off while timing (as timeit)
    plot: bool = True
    verbose: bool = True
    argv: list[str] = field(default_factory=list)
    # store benchmarks (kvs1, kvs2, exp4)
    redis_url: str | None = None  # None: start a private redis-server
    store_dir: str | None = None  # None: the file store in a temporary directory
    store_backends: tuple[str, ...] = ("redis", "file")

    def log(self, *args) -> None:
        if self.verbose:
            print(*args, flush=True)


# -- machine ------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.rstrip()
    except (OSError, subprocess.SubprocessError):
        return ""


def source_digest() -> str:
    """SHA-256 over the engine sources (mta/**/*.py), to tell code versions
    apart when the working tree is not a clean commit."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted((REPO / "mta").rglob("*.py")):
        h.update(str(path.relative_to(REPO)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def machine_info() -> dict:
    """CPU, cores, memory, Python, platform, date and git commit."""
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "python_build": " ".join(platform.python_build()),
        "platform": platform.platform(),
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", "mta")),
        "git_changed_files": sorted(line[3:] for line in _git("status", "--porcelain", "--", "mta").splitlines()),
        "mta_source_sha256": source_digest(),
    }
    try:
        info["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        import psutil

        info["physical_cores"] = psutil.cpu_count(logical=False)
        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
        freq = psutil.cpu_freq()
        if freq is not None:
            info["cpu_mhz"] = round(freq.current)
    except Exception:  # psutil missing or unsupported platform
        pass
    return info


def rss_mb() -> float | None:
    try:
        import psutil

        return round(psutil.Process().memory_info().rss / 2**20, 1)
    except Exception:
        return None


# -- timing -------------------------------------------------------------------

@contextmanager
def gc_paused(cfg: RunConfig):
    """Collect, then keep the cyclic GC off (unless ``cfg.gc_enabled``)."""
    gc.collect()
    was = gc.isenabled()
    if not cfg.gc_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _timed_loop(call, values: Iterable) -> int:
    """``call(v)`` for every value; the wall time in ns."""
    t0 = time.perf_counter_ns()
    for v in values:
        call(v)
    return time.perf_counter_ns() - t0


def fill(engine, values: Iterable) -> int:
    """Insert ``values`` (no enforcement); returns the wall time in ns."""
    return _timed_loop(engine.insert, values)


def push_all(engine, values: Iterable) -> int:
    """Push ``values`` untimed-style (returns the wall time in ns)."""
    return _timed_loop(engine.push, values)


def time_pushes(engine, values: Iterable, m: int, *, budget_s: float | None = None,
                chunk: int = 4096, min_updates: int = 1) -> tuple[int, int, int]:
    """Time ``m`` pushes of the next values of ``values``.

    Pushes go in chunks (1, 2, 4, ... then ``chunk``); only the loops are
    timed, by wall clock (``perf_counter_ns``) and by this thread's CPU time
    (``thread_time_ns``: unaffected by other processes taking the CPU).
    With ``budget_s`` the run stops after the first chunk that ends past the
    budget (once ``min_updates`` were done).  Returns ``(updates, wall_ns,
    cpu_ns)``.
    """
    push = engine.push
    it = iter(values)
    done = wall = cpu = 0
    pc, tt = time.perf_counter_ns, time.thread_time_ns
    deadline = None if budget_s is None else pc() + int(budget_s * 1e9)
    size = 1  # chunks grow 1, 2, 4, ... up to ``chunk``: slow engines see the budget early
    while done < m:
        step = min(size, m - done)
        size = min(2 * size, chunk)
        batch = islice(it, step)
        c0 = tt()
        t0 = pc()
        for v in batch:
            push(v)
        t1 = pc()
        cpu += tt() - c0
        wall += t1 - t0
        done += step
        if deadline is not None and t1 > deadline and done >= min_updates:
            break
    return done, wall, cpu


def harness_overhead_ns(m: int = 1 << 16) -> float:
    """Per-update cost of the timing loop itself (a no-op Python call)."""

    def noop(v):
        return v

    it = repeat(1, m)
    t0 = time.perf_counter_ns()
    for v in it:
        noop(v)
    return (time.perf_counter_ns() - t0) / m


# -- output -------------------------------------------------------------------

def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(o):
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def header(experiment: str, cfg: RunConfig, config: dict) -> dict:
    return {
        "experiment": experiment,
        "profile": cfg.profile,
        "command": "python -m bench " + " ".join(cfg.argv) if cfg.argv else None,
        "gc_disabled_while_timing": not cfg.gc_enabled,
        "machine": machine_info(),
        "config": config,
    }


def finish(data: dict, started: float) -> dict:
    data["wall_seconds"] = round(time.perf_counter() - started, 1)
    try:
        data["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return data


def sums_agree(pairs) -> bool | None:
    """Checksums ``(count, sum)`` of methods computing the same answers all
    agree: counts exactly, sums within a relative 1e-9 (floats summed in each
    method's own order); None when there are none (results recorded before
    the checksums were kept)."""
    pairs = list(pairs)
    return None if not pairs else all(
        n == pairs[0][0] and math.isclose(c, pairs[0][1], rel_tol=1e-9) for n, c in pairs)


def fmt_ns(ns: float | None) -> str:
    """Human-readable duration from nanoseconds."""
    if ns is None:
        return "-"
    if ns < 1e4:
        return f"{ns:,.0f} ns"
    if ns < 1e7:
        return f"{ns / 1e3:,.1f} us"
    if ns < 1e10:
        return f"{ns / 1e6:,.1f} ms"
    return f"{ns / 1e9:,.2f} s"


def fmt_num(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x)}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or not b:
        return "-"
    return f"{a / b:.2f}"


def pow2(n: int) -> str:
    """``2^k`` for powers of two, ``2^k-1`` just below, else the number."""
    if n > 0 and n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    if n > 2 and (n + 1) & n == 0:
        return f"2^{n.bit_length()}-1"
    return str(n)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain-text table, columns right-aligned except the first."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def render_tables(tables: list[tuple[str, list[str], list[list[str]]]], *, markdown: bool = False) -> str:
    """``(title, headers, rows)`` tables as plain text or markdown."""
    out = []
    for title, headers, rows in tables:
        if title:
            out.append(title + (":" if markdown else ""))
        out.append(markdown_table(headers, rows) if markdown else table(headers, rows))
    return "\n\n".join(out)


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    out.extend("| " + " | ".join(str(c) for c in r) + " |" for r in rows)
    return "\n".join(out)


# -- plots --------------------------------------------------------------------

#: One colour and marker per engine, stable across plots.
STYLE = {
    "AMTA": ("tab:red", "o"),
    "LMTA": ("tab:orange", "s"),
    "DABA": ("tab:blue", "^"),
    "TwoStacks": ("tab:green", "v"),
    "FlatFAT": ("tab:purple", "D"),
    "FlatFIT": ("tab:brown", "P"),
    "SlickDeque": ("tab:pink", "X"),
    "Recalc": ("tab:gray", "*"),
    "SubtractOnEvict": ("tab:olive", "h"),
}


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log_axes(ax, xlabel: str, ylabel: str, title: str, *, base: int = 2) -> None:
    """A panel with both axes logarithmic (x in powers of ``base``), labelled, gridded."""
    ax.set_xscale("log", base=base)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)


def machine_caption(machine: dict) -> str:
    return (f"{machine.get('cpu_model', '?')}, {machine.get('logical_cores', '?')} cores, "
            f"Python {machine.get('python', '?')}, {machine.get('date_utc', '')[:10]}")

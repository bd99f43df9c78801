"""The experiment contract: what every experiment of ``python -m bench`` is
and how each one starts and ends.

An experiment is a module of ``bench/`` (listed in
``bench.__main__.EXPERIMENTS``) with:

* ``NAME``: its results are ``<out>/<NAME>.json`` and ``<out>/<NAME>.png``;
* ``PROFILES``: ``{"full": ..., "quick": ..., "tiny": ...}``, its sizes;
* ``run(cfg) -> dict``: measures, writing the JSON as it goes, and returns
  what it wrote; it opens a :class:`Run` and ends in :meth:`Run.finish`;
* ``report(data) -> str``: the plain-text report, from the JSON alone
  (:func:`report_text` ends it: notes, then the summary lines);
* ``plot(data, path)``: the PNG, from the JSON alone (:func:`save_figure`
  ends it: the machine caption, layout, file).

The results JSON is: :func:`bench.common.header`'s keys, the experiment's
own, ``wall_seconds`` and, where the experiment has one, its summary.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable, Protocol

from . import common
from .common import RunConfig


class Experiment(Protocol):
    """The module interface ``bench.__main__`` and the report pages use."""

    NAME: str
    PROFILES: dict[str, dict]

    def run(self, cfg: RunConfig) -> dict: ...

    def report(self, data: dict) -> str: ...

    def plot(self, data: dict, path: Path) -> None: ...


GC_OFF = "The cyclic garbage collector is off during the timed loops (as timeit does)."


class Run:
    """One run of an experiment: its JSON (``data``, opened with the shared
    header), the progress writes and the shared end."""

    def __init__(self, name: str, cfg: RunConfig, config: dict) -> None:
        self.name = name
        self.cfg = cfg
        self.started = time.perf_counter()
        self.data = common.header(name, cfg, config)

    def gc_note(self, text: str = GC_OFF) -> None:
        """Say in the notes that the cyclic GC was off while timing (unless ``--gc``)."""
        if not self.cfg.gc_enabled:
            self.data["notes"].append(text)

    def save(self) -> dict:
        """Write the JSON as it stands (progress: a long run can be read
        before it ends)."""
        common.write_json(self.cfg.out / f"{self.name}.json", common.finish(self.data, self.started))
        return self.data

    def finish(self, plot: Callable[[dict, Path], None] | None = None,
               **summaries: Callable[[dict], object]) -> dict:
        """The end every experiment shares: each ``key=summarize`` of
        ``summaries`` stored as ``data[key]`` (in the order given), the wall
        time, the JSON, and the PNG (``plot(data, path)``, unless
        ``--no-plot``)."""
        for key, summarize in summaries.items():
            self.data[key] = summarize(self.data)
        self.save()
        if plot is not None and self.cfg.plot:
            plot(self.data, self.cfg.out / f"{self.name}.png")
        return self.data


def report_text(lines: Iterable[str], data: dict, summary: Iterable[str] = ()) -> str:
    """A report's end: its ``lines``, a blank line, the run's notes, then
    the ``summary`` lines."""
    return "\n".join([*lines, "", *("note: " + n for n in data.get("notes", [])), *summary])


def save_figure(plt, fig, path, caption: str, *, y: float = 0.01, bottom: float = 0.03, dpi: int = 100) -> None:
    """A plot's end: ``caption`` (the machine) at the bottom, the layout
    above it, the PNG at ``path``."""
    fig.suptitle(caption, fontsize=8, y=y, va="bottom")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def verdict(met: bool, applies: bool = True, otherwise: str = "not checked") -> str:
    """A target's verdict in a report: MET or MISSED where the run's sizes
    are the target's, ``otherwise`` where they are not."""
    return ("MET" if met else "MISSED") if applies else otherwise

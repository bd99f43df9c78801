"""Checkpoints tagged with the step of a run that made them, so that a step
replayed after a failure resumes what the steps before it left, without
anyone remembering versions.

A Spark streaming query is a *run* (its id survives restarts from the same
checkpoint location) made of *steps* (its micro-batches, numbered from 0).
A step that fails after some of its windows checkpointed is run again; the
replay must resume each window as the last *committed* step left it, not
as the failed attempt did.  A window opened with
``resume=Before(run, step)`` resumes the checkpoint of the latest step
below ``step`` that ``run`` made (of that step's attempts, the newest; or
starts empty if there is none: the key is new to the run), and every
checkpoint it makes is tagged ``(run, step)``.  Attempts of a step all
resume the same checkpoint, which is therefore their *parent* and stays
retained however many of them commit (:class:`stores.window.WindowStorage`
keeps every retained checkpoint's parent), so a replay is exactly-once; a
concurrent attempt is fenced as usual.  Attempts of one step push the same
rows in the same order, so whichever of them checkpointed last left the
same window.  An opening whose run has checkpointed the window at a *later*
step is refused with a :class:`~stores.errors.FencingError`: it is a stale
attempt that reached this key after the next step did, or the run lost
steps the store kept (Spark's checkpoint rolled back), and resuming would
drop what those steps added.

A checkpoint may also carry a *label*, a small value stored with it and
given back to whoever resumes it (:attr:`WindowStorage.label`): what the
caller needs with the window but the levels do not hold (a streaming key's
newest time and the job that built it).

Tags live beside the checkpoints in the metadata record, under ``"tags"``,
one ``[version, run, step, label]`` per tagged retained checkpoint; a
record without them (written before tags existed, or never tagged) reads
as untagged.  Each operation below is O(retained checkpoints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Before", "label_of", "resume_point", "retained_tags"]


@dataclass(frozen=True)
class Before:
    """``resume=`` for a window opened by step ``step`` of run ``run``: the
    newest retained checkpoint ``run`` made at a step below ``step``, else
    empty."""

    run: str
    step: int

    def __post_init__(self) -> None:
        if not isinstance(self.run, str) or not self.run:
            raise ValueError(f"Before: run must be a non-empty str, got {self.run!r}")
        if type(self.step) is not int or self.step < 0:
            raise ValueError(f"Before: step must be an int >= 0, got {self.step!r}")


def resume_point(meta: dict, before: Before) -> tuple[int | None, int | None]:
    """``(version, later)``: of the retained checkpoints of ``meta`` that
    ``before.run`` made at steps below ``before.step``, the version of the
    latest step's (of its attempts, the newest; ``None``: there is none),
    and the latest step above ``before.step`` the run has checkpointed the
    window at (``None``: none), which the caller refuses: the opener is a
    stale attempt of an older step, or the run lost steps the store kept."""
    best, later = None, None
    for version, run, step, _ in meta.get("tags", ()):
        if run != before.run or step is None:
            continue
        if step > before.step:
            later = step if later is None else max(later, step)
        elif step < before.step and (best is None or (step, version) > best):
            best = (step, version)
    return (best[1] if best is not None else None), later


def label_of(meta: dict, version: int) -> Any:
    """The label checkpoint ``version`` of ``meta`` was made with (``None``: none)."""
    for t in meta.get("tags", ()):
        if t[0] == version:
            return t[3]
    return None


def retained_tags(meta: dict, keep: set[int], version: int, before: Before | None, label: Any) -> list | None:
    """The ``"tags"`` of the record after checkpoint ``version`` (made under
    ``before``, with ``label``): those of the checkpoints in ``keep``, and the
    new one's if it has a tag or a label; ``None`` when there are none."""
    tags = [t for t in meta.get("tags", ()) if t[0] in keep]
    if before is not None or label is not None:
        tags.append([version, before and before.run, before and before.step, label])
    return tags or None

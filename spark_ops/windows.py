"""Which window a key gets (:func:`open_key_window`), and the two windows
not tied to an engine of their own: :class:`PolicyWindow` (an
:class:`mta.Window`, any slide policy, one row at a time; the streaming
window) and :class:`RejectingWindow` (a null or NaN key's rows)."""

from __future__ import annotations

from typing import Any, Sequence

import stores
from mta import LiftError, Window

from . import rows
from .columnar import ColumnarKeyWindow
from .key_window import KeyWindow, RowWindow, StreamingKeyWindow
from .sorted_window import SizesSortedWindow, SortedWindow
from .spec import WindowSpec
from .values import python_values

__all__ = ["KeyWindow", "PolicyWindow", "RejectingWindow", "SizesWindow", "StreamingKeyWindow", "open_key_window"]


def open_key_window(spec: WindowSpec, key: Any, run: str, *, streaming: bool = False,
                    resume: bool | int | stores.Before = False, newest: float | None = None,
                    durable: bool = True) -> KeyWindow:
    """The window of ``key`` in run ``run`` (its windows' names in the store).

    Batch (``spec.engine`` as chosen for the job: ``"columnar"``, ``"amta"``
    or ``"lmta"``): a null or NaN key's rows are rejected, the columnar
    engine's jobs get a :class:`ColumnarKeyWindow`, ``range=`` and
    ``rows=`` a :class:`SortedWindow`, custom policies a
    :class:`PolicyWindow`; every one is deleted when closed.  Streaming: a
    :class:`PolicyWindow` kept in the store, fresh or resumed at checkpoint
    version ``resume`` (or as of before a micro-batch, a
    :class:`stores.Before`) with its newest time ``newest``; ``durable=False``:
    its checkpoints wait for the task's ``store.sync()``."""
    if streaming:
        kept = dict(resume=resume, newest=newest, keep=True, durable=durable)
        if spec.sizes:
            return SizesWindow(spec, key, [PolicyWindow(spec.one_size(size), key, f"{run}~{i}", **kept)
                                           for i, size in enumerate(spec.size_values)])
        return PolicyWindow(spec, key, run, **kept)
    if rows.null_key(key):
        return RejectingWindow(spec, key)
    if spec.engine == "columnar":
        return ColumnarKeyWindow(spec, key)
    if spec.sizes and spec.policy is None:
        return SizesSortedWindow(spec, key, run)
    if spec.policy is None:
        return SortedWindow(spec, key, run)
    return PolicyWindow(spec, key, run)


class PolicyWindow(RowWindow):
    """One key's :class:`mta.Window` over ``(time, value)`` records, rows
    pushed one at a time (the policy decides what leaves); in the pooled
    store when the job names one."""

    def __init__(self, spec: WindowSpec, key: Any, run: str, *, resume: bool | int | stores.Before = False,
                 newest: float | None = None, keep: bool = False, durable: bool = True) -> None:
        super().__init__(spec, key)
        self.window = Window(*_aggregator_and_policy(spec), engine=spec.mta_engine,
                             **spec.storage_options(key, run, resume=resume, durable=durable))
        self.newest = newest
        self._keep = keep

    def aggregate(self, times, values, problems: Sequence | None):
        key, window, newest = self.key, self.window, self.newest
        emitted = newest if self.spec.peers else None  # outputs given by an earlier push
        found = list(problems) if problems is not None else None
        columns = [[] for _ in self.types]
        for i, (t, v) in enumerate(zip(times.to_pylist(), python_values(values))):
            problem = found[i] if found is not None else None
            if problem is None:
                problem = rows.check_row(key, t, v, newest, emitted)
            if problem is None:
                try:
                    results = window.push((t, v))
                except LiftError as exc:  # raised before the window changed
                    problem = rows.cannot_lift(exc)
                else:
                    for column, result in zip(columns, results):
                        column.append(result)
                    newest = t
                    continue
            found = found if found is not None else [None] * len(times)
            found[i] = problem
        self.newest = newest
        return columns, found

    def checkpoint(self, label=None, *, one_version: bool = True) -> int:
        return self.window.checkpoint(label)

    @property
    def resumed_label(self):
        return self.window.resumed_label

    def close(self) -> None:
        self.window.close(delete=not self._keep)

    def expire(self) -> None:
        self.window.close(delete=True)


#: The last spec's aggregator and slide policy: a task opens every key's
#: window with the same spec, and both are immutable descriptions that
#: windows share.
_built: list = [None, None]


def _aggregator_and_policy(spec: WindowSpec) -> tuple:
    if _built[0] is not spec:
        _built[:] = spec, (spec.aggregator(), spec.slide_policy())
    return _built[1]


class SizesWindow(RowWindow):
    """Several sizes of an MTA job's window: one MTA window per size (each in
    the store under the run's name and the size's position), every row
    pushed through each in the same pass over the key's rows.  The windows
    take the same rows in the same order, so they find the same problems;
    their versions stay equal unless an attempt dies between their
    checkpoints, which only a plan resuming by version minds
    (:meth:`checkpoint`).  O(k) times one window's cost for k sizes; the
    columnar engine computes all sizes on one window instead."""

    def __init__(self, spec: WindowSpec, key: Any, windows: list) -> None:
        super().__init__(spec, key)
        self.windows = windows

    @property
    def newest(self):
        return self.windows[0].newest

    @newest.setter
    def newest(self, newest) -> None:
        for window in self.windows:
            window.newest = newest

    @property
    def resumed_label(self):
        return self.windows[0].resumed_label

    def aggregate(self, times, values, problems: Sequence | None):
        by_size, found = [], problems
        for window in self.windows:
            results, found = window.aggregate(times, values, problems)
            by_size.append(results)
        width = len(self.spec.aggs)
        return [by_size[s][a] for a in range(width) for s in range(len(self.windows))], found

    def checkpoint(self, label=None, *, one_version: bool = True) -> int:
        versions = {window.checkpoint(label) for window in self.windows}
        if len(versions) != 1 and one_version:
            # a plan that resumes by version needs one for all sizes; the sizes take the same
            # pushes, but an attempt that died between their checkpoints leaves them apart
            raise RuntimeError(f"the windows of key {self.key!r} checkpointed at different versions {versions}")
        return max(versions)

    def close(self) -> None:
        for window in self.windows:
            window.close()

    def expire(self) -> None:
        for window in self.windows:
            window.expire()


class RejectingWindow(RowWindow):
    """The rows of a null or NaN key: no window takes them."""

    def aggregate(self, times, values, problems: Sequence | None):
        import pyarrow as pa

        return [pa.nulls(0, type=t) for t in self.types], [rows.NULL_KEY] * len(times)

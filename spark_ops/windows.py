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

__all__ = ["KeyWindow", "PolicyWindow", "RejectingWindow", "SizesWindow", "StreamingKeyWindow", "open_key_window",
           "window_names"]


def open_key_window(spec: WindowSpec, key: Any, run: str, *, streaming: bool = False,
                    resume: bool | int | stores.Before = False, newest: float | None = None,
                    durable: bool = True, batch: stores.Batch | None = None) -> KeyWindow:
    """The window of ``key`` in run ``run`` (its windows' names in the store).

    A null or NaN key's rows are rejected, in batch and streaming alike: no
    window takes them, and none is opened in the store.  Batch
    (``spec.engine`` as chosen for the job: ``"columnar"``, ``"amta"`` or
    ``"lmta"``): the columnar engine's jobs get a
    :class:`ColumnarKeyWindow`, ``range=`` and ``rows=`` a
    :class:`SortedWindow`, custom policies a :class:`PolicyWindow`; every
    one is deleted when closed.  Streaming: a
    :class:`PolicyWindow` kept in the store, fresh or resumed at checkpoint
    version ``resume`` (or as of before a micro-batch, a
    :class:`stores.Before`) with its newest time ``newest``; ``durable=False``:
    its checkpoints wait for the task's ``store.sync()``; ``batch``: they
    are written at its ``commit()``, with the other keys' (:mod:`stores.batch`)."""
    if rows.null_key(key):
        return RejectingWindow(spec, key)
    if streaming:
        kept = dict(newest=newest, keep=True, durable=durable, batch=batch)
        if spec.sizes:
            return SizesWindow.opened(spec, key, run, resume, **kept)
        return PolicyWindow(spec, key, run, resume=resume, **kept)
    if spec.engine == "columnar":
        return ColumnarKeyWindow(spec, key)
    if spec.sizes and spec.policy is None:
        return SizesSortedWindow(spec, key, run)
    if spec.policy is None:
        return SortedWindow(spec, key, run)
    return PolicyWindow(spec, key, run)


def window_names(spec: WindowSpec, key: Any, run: str) -> list[str]:
    """The store's names of ``key``'s streaming windows, in the order
    :func:`open_key_window` opens them (a task tells its
    :class:`stores.Batch` so, :meth:`stores.Batch.expect`); none for a null
    or NaN key, which gets no window.  O(sizes)."""
    if rows.null_key(key):
        return []
    if spec.sizes:
        return [spec.one_size(size).window_id(key, size_run(run, i)) for i, size in enumerate(spec.size_values)]
    return [spec.window_id(key, run)]


def size_run(run: str, i: int) -> str:
    """The run name of size ``i``'s window of a job with several sizes."""
    return f"{run}~{i}"


class PolicyWindow(RowWindow):
    """One key's :class:`mta.Window` over ``(time, value)`` records, rows
    pushed one at a time (the policy decides what leaves); in the pooled
    store when the job names one."""

    def __init__(self, spec: WindowSpec, key: Any, run: str, *, resume: bool | int | stores.Before = False,
                 newest: float | None = None, keep: bool = False, durable: bool = True,
                 batch: stores.Batch | None = None) -> None:
        super().__init__(spec, key)
        self.window = Window(*_aggregator_and_policy(spec), engine=spec.mta_engine,
                             **spec.storage_options(key, run, resume=resume, durable=durable, batch=batch))
        self.newest = newest
        self._keep = keep

    def aggregate(self, times, values, problems: Sequence | None):
        key, window, newest, clock = self.key, self.window, self.newest, self.spec.clock
        emitted = newest if self.spec.peers else None  # outputs given by an earlier push
        found = list(problems) if problems is not None else None
        columns = [[] for _ in self.types]
        for i, (t, v) in enumerate(zip(times.to_pylist(), python_values(values))):
            problem = found[i] if found is not None else None
            if problem is None:
                problem = rows.check_row(key, t, v, newest, emitted, clock=clock)
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

    def checkpoint(self, label=None) -> int:
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
    pushed through each in the same pass over the key's rows.  O(k) times
    one window's cost for k sizes; the columnar engine computes all sizes
    on one window instead.

    The sizes take the same rows in the same order, so they find the same
    problems, but their checkpoint versions drift apart once an attempt
    dies between their checkpoints.  Resumed by micro-batch
    (:class:`stores.Before`), each size finds its own checkpoint.  Resumed
    by version (Spark's state holds one per key), the version is size 0's,
    and size 0's checkpoint is made last, its label carrying the versions
    the other sizes just checkpointed (:meth:`checkpoint`), so each size
    resumes exactly the checkpoint taken with it, and a store that loses a
    suffix of its writes cannot keep size 0's checkpoint without the
    others'."""

    def __init__(self, spec: WindowSpec, key: Any, windows: list, by_version: bool) -> None:
        super().__init__(spec, key)
        self.windows, self._by_version = windows, by_version

    @classmethod
    def opened(cls, spec: WindowSpec, key: Any, run: str, resume: bool | int | stores.Before,
               **kept) -> SizesWindow:
        """Every size's window of ``key`` resumed at ``resume`` (a version:
        size 0's, the others' from its label); a window opened before one
        that cannot be is closed again."""
        sizes = [spec.one_size(size) for size in spec.size_values]
        by_version = not isinstance(resume, stores.Before)
        windows = []
        try:
            windows.append(PolicyWindow(sizes[0], key, size_run(run, 0), resume=resume, **kept))
            others = [resume] * (len(sizes) - 1)
            if by_version and windows[0].resumed_label is not None:
                others = _size_versions(windows[0].resumed_label, len(others), key)
            for i, (one, version) in enumerate(zip(sizes[1:], others), 1):
                windows.append(PolicyWindow(one, key, size_run(run, i), resume=version, **kept))
        except BaseException:
            _close_quietly(windows)  # the opening's own error is the one to report
            raise
        return cls(spec, key, windows, by_version)

    @property
    def newest(self):
        return self.windows[0].newest

    @newest.setter
    def newest(self, newest) -> None:
        for window in self.windows:
            window.newest = newest

    @property
    def resumed_label(self):
        label = self.windows[0].resumed_label
        return label[0] if self._by_version and label is not None else label

    def aggregate(self, times, values, problems: Sequence | None):
        by_size, found = [], problems
        for window in self.windows:
            results, found = window.aggregate(times, values, problems)
            by_size.append(results)
        width = len(self.spec.aggs)
        return [by_size[s][a] for a in range(width) for s in range(len(self.windows))], found

    def checkpoint(self, label=None) -> int:
        """Every size checkpointed with ``label``; the version to resume at:
        by version, size 0's, made last with ``[label, the others'
        versions]``; by micro-batch, the newest of the sizes'."""
        if not self._by_version:
            return max(window.checkpoint(label) for window in self.windows)
        others = [window.checkpoint() for window in self.windows[1:]]
        return self.windows[0].checkpoint([label, others])

    def close(self) -> None:
        _on_every(self.windows, lambda window: window.close())

    def expire(self) -> None:
        """Every size's window deleted, size 0's first: its delete is
        fenced as the key's (its checkpoint label names the other sizes'
        versions), so when it fails (refused, a newer attempt having
        claimed the key since, or stopped part-way) the others are closed
        and kept, for that attempt or the next expiry, and its error is
        the one raised."""
        try:
            self.windows[0].expire()
        except BaseException:
            _close_quietly(self.windows[1:])  # size 0's error is the one to report
            raise
        _on_every(self.windows[1:], lambda window: window.expire())


def _on_every(windows: list, act) -> None:
    """``act`` on every size's window, the others still closed (or deleted)
    when one raises; the first error is raised once all were tried."""
    error = None
    for window in windows:
        try:
            act(window)
        except BaseException as exc:  # noqa: BLE001 - raised below, after the other sizes
            error = exc if error is None else error
    if error is not None:
        raise error


def _close_quietly(windows: list) -> None:
    """Close each of ``windows`` while another error is on its way: a
    close's own error is dropped for it."""
    for window in windows:
        try:
            window.close()
        except Exception:  # noqa: BLE001 - the caller raises the error that matters
            pass


def _size_versions(label, count: int, key) -> list[int]:
    """The other sizes' versions in size 0's checkpoint label ``[label,
    versions]`` (:meth:`SizesWindow.checkpoint`)."""
    versions = label[1] if isinstance(label, (list, tuple)) and len(label) == 2 else None
    if not isinstance(versions, (list, tuple)) or len(versions) != count or any(type(v) is not int for v in versions):
        raise stores.StoreError(f"the window of key {key!r}, size 0, carries no versions of the other {count} sizes "
                                f"in its checkpoint label ({label!r}): it was not checkpointed by this job's sizes")
    return list(versions)


class RejectingWindow(RowWindow):
    """The rows of a null or NaN key: no window takes them.  As a streaming
    window it has nothing in the store to resume, checkpoint or delete."""

    newest = None
    resumed_label = None

    def aggregate(self, times, values, problems: Sequence | None):
        import pyarrow as pa

        return [pa.nulls(0, type=t) for t in self.types], [rows.NULL_KEY] * len(times)

    def checkpoint(self, label=None) -> None:
        """Nothing to keep: no version (a plan with Spark's state keeps none
        for the key, and resumes it afresh, again without a window)."""

    def expire(self) -> None:
        pass

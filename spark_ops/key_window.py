"""The per-key window interface: what batch and streaming tasks call.

A task opens one window per key (:func:`spark_ops.windows.open_key_window`)
and pushes the key's rows through it in runs, in ``(time, arrival)``
order; each push gives the run's output columns.  Every implementation
derives from :class:`RowWindow`, which leaves it one job, aggregating the
rows it accepts, each over its own window; rejected rows are settled in
one place for all of them (:func:`spark_ops.rows.settle`), and so are
peers (``frame="sql"``: rows of equal time share the last one's results,
:func:`spark_ops.frames.last_peers`), so a push must then hold every row
of the times it holds.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from . import aggregations, frames, rows
from .spec import WindowSpec


class KeyWindow(Protocol):
    """One key's window in a task."""

    def push(self, times, values, problems: Sequence | None, *, shown: Sequence | None = None) -> list:
        """The key's next rows: ``times`` (double seconds) and ``values``
        as Arrow arrays; ``problems``, per row the reason it is rejected
        (:mod:`spark_ops.rows`) or ``None`` (``None`` for all); ``shown``,
        the rows' times as the input has them, for messages.  Returns one
        Arrow array per :attr:`WindowSpec.output_columns` entry (with
        ``rejected`` when flagging), or raises naming the first rejected
        row (``on_bad_row="error"``)."""

    def close(self) -> None:
        """The key is done in this task: a batch window deletes its data,
        a streaming window keeps what it checkpointed."""


class StreamingKeyWindow(KeyWindow, Protocol):
    """A window that outlives the micro-batch, in the store."""

    #: The newest time the window took (``None`` before its first row).
    newest: float | None

    def checkpoint(self, label=None) -> int:
        """Make the window durable, with ``label`` (a small value the
        store's codec encodes); the version to resume it at."""

    @property
    def resumed_label(self):
        """The label of the checkpoint the window resumed (``None``: none)."""

    def expire(self) -> None:
        """Delete the window from the store (the key has been idle too long)."""


class RowWindow:
    """The shared half of every key window: :meth:`push` settles the rows
    that :meth:`aggregate` did not accept."""

    def __init__(self, spec: WindowSpec, key) -> None:
        self.spec, self.key = spec, key
        self.types = [aggregations.arrow_type(t) for _, _, t in spec.columns]

    def push(self, times, values, problems: Sequence | None, *, shown: Sequence | None = None) -> list:
        accepted, problems = self.aggregate(times, values, problems)
        if self.spec.peers:
            accepted = self._peers(accepted, times, problems)
        columns = []
        for (name, _, spark), results in zip(self.spec.columns, accepted):
            try:
                columns.append(aggregations.arrow_column(results, spark))
            except aggregations.OutOfRange as exc:
                row = exc.index if problems is None else [i for i, p in enumerate(problems) if p is None][exc.index]
                t = shown[row] if shown is not None else times[row].as_py()
                raise aggregations.overflow_error(self.spec, self.key, name, t, exc.value, spark) from None
            except aggregations.NotOfType as exc:
                raise aggregations.not_of_type(name, spark, str(exc)) from None
        return rows.settle(self.spec, self.key, columns, problems, times, values, shown)

    @staticmethod
    def _peers(accepted: list, times, problems: Sequence | None) -> list:
        """Each accepted row's results replaced by those of the last
        accepted row of its time (its peers' shared results)."""
        import numpy as np
        import pyarrow as pa

        if problems is not None and any(problems):
            times = times.filter(pa.array([p is None for p in problems], type=pa.bool_()))
        at = frames.last_peers(times.to_numpy(zero_copy_only=False).astype(np.float64, copy=False))
        if at is None:
            return accepted
        return [results.take(pa.array(at)) if isinstance(results, pa.Array) else [results[i] for i in at]
                for results in accepted]

    def aggregate(self, times, values, problems: Sequence | None) -> tuple[list, Sequence | None]:
        """The results of the rows without a problem (per aggregation, in
        row order: an Arrow array of :attr:`types`, or a list of Python
        values that :meth:`push` converts by the overflow rule,
        :func:`spark_ops.aggregations.arrow_column`), and the problems, with
        any the window found itself (a value its aggregations cannot take,
        a row out of order)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

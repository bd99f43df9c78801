"""The batch plan: rows numbered in input order (their arrival),
repartitioned by key, sorted within partitions by ``(key, time, arrival)``
(``ties="any"``: not numbered, sorted by ``(key, time)``) and streamed
through one window per key with ``mapInArrow``.

The plan ships the input's columns, nothing else where it can
(:func:`spark_ops.plan.lean_columns`): a floating or small integral time
column is sorted on as it is and cast to double seconds in the worker, and
a value column the engines take as it is is read as it is.  The arrival
number is sorted on and dropped before Python (:func:`spark_ops.plan.key_time_ordered`):
rows of equal time reach the windows in input order, which every per-row
output of the default frame depends on (each row sees only the rows before
it), and the windows need nothing else from it.

Each Arrow batch is cut into runs of one key; a run goes through the key's
window (:func:`spark_ops.windows.open_key_window`) in one push.  With
``frame="sql"`` a push holds every row of its times (rows of equal time
share one output, :mod:`spark_ops.frames`): the rows of a batch that share
its last row's key and time wait for the next batch.  A retried
task recomputes its partition from the start: batch windows never resume,
so a retry's output equals a run without failure (with ``ties="any"``, a
run whose shuffle left the ties in the retry's order).
"""

from __future__ import annotations

from mta.markers import EMPTY

from . import frames, rows, traffic, worker_gc
from .keys import exact, key_reader, same_key
from .names import map_in_arrow
from .plan import INTERNAL, InputTimes, key_time_ordered, lean_columns, output_schema, seconds
from .spec import WindowSpec
from .windows import open_key_window


def batch_plan(df, spec: WindowSpec, run: str):
    """``df`` with the windows' output columns (``spec.engine`` as chosen for the job)."""
    numbered, time_column, value_column = lean_columns(df, spec)
    ordered = key_time_ordered(numbered, spec.keys, time_column)
    schema = output_schema(ordered, spec)  # the internal columns do not come back
    columns = ordered.columns
    passed = [i for i, c in enumerate(columns) if c not in INTERNAL]
    names = [columns[i] for i in passed] + [n for n, _ in spec.output_columns]
    time_at, value_at, shown_at = (columns.index(c) for c in (time_column, value_column, spec.time))
    key_columns, key_of = key_reader([columns.index(c) for c in spec.keys])
    count = traffic.accumulator(df.sparkSession) if spec.store and spec.engine != "columnar" else None

    def windows_of_partition(batches):
        with traffic.counted(count, spec):
            yield from partition_windows(batches)

    def partition_windows(batches):
        import pyarrow as pa
        from pyspark import TaskContext

        from .aggregations import arrow_type

        types = [arrow_type(t) for _, t in spec.output_columns]
        # each task attempt has windows of its own: a speculative or retried
        # attempt never deletes the windows another attempt is using
        attempt = f"{run}/{TaskContext.get().taskAttemptId()}"
        current, window = EMPTY, None

        def windowed(batch):
            nonlocal current, window
            keys, times, values = key_columns(batch), seconds(batch.column(time_at)), batch.column(value_at)
            problems = rows.check_columns(keys, times, values)
            out = [[] for _ in spec.output_columns]
            for start, end in runs(keys):
                key = key_of(keys, start)
                if rows.null_key(key) or current is EMPTY or not same_key(key, current):
                    if window is not None:
                        window.close()
                    current, window = key, open_key_window(spec, key, attempt)
                n = end - start
                pieces = window.push(times.slice(start, n), values.slice(start, n),
                                     problems[start:end] if problems else None,
                                     shown=InputTimes(batch.column(shown_at).slice(start, n)))
                for column_pieces, piece in zip(out, pieces):
                    column_pieces.append(piece)
            arrays = [_concat(pieces, t) for pieces, t in zip(out, types)]
            return pa.RecordBatch.from_arrays([batch.column(i) for i in passed] + arrays, names=names)

        held = None  # the rows that wait for the rest of their time (frame="sql")
        try:  # the open window is deleted however the task ends (error, early stop)
            for batch in batches:
                if spec.peers:
                    if held is not None:
                        batch = pa.Table.from_batches([held, batch]).combine_chunks().to_batches()[0]
                    cut = frames.trailing_peers(key_columns(batch), seconds(batch.column(time_at)))
                    held = batch.slice(cut) if cut < batch.num_rows else None
                    batch = batch.slice(0, cut)
                    if not batch.num_rows:
                        continue
                yield windowed(batch)
            if held is not None:
                yield windowed(held)
        finally:
            if window is not None:
                window.close()

    return map_in_arrow(ordered, worker_gc.settling(windows_of_partition), schema)


def _concat(pieces: list, arrow_type):
    """One output column from the runs' pieces."""
    import pyarrow as pa

    if not pieces:
        return pa.array([], type=arrow_type)
    if len(pieces) == 1:  # a batch of one key's rows: its column as it is, not a copy
        return pieces[0]
    try:
        return pa.concat_arrays(pieces)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a user type Arrow inferred differently in different runs
        return pa.array([v for piece in pieces for v in piece.to_pylist()], type=arrow_type)


def runs(keys) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal keys in an Arrow array, or in
    a list of a composite key's columns (each null or NaN key a run of its
    own)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = keys if isinstance(keys, list) else [keys]
    n = len(columns[0])
    if n < 2:
        return [(0, n)] if n else []
    kind = columns[0].type
    if len(columns) == 1 and not columns[0].null_count and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        x = columns[0].to_numpy(zero_copy_only=False)  # NaN != NaN: each NaN a run, as in Arrow below
        starts = [0] + (np.flatnonzero(x[1:] != x[:-1]) + 1).tolist()
        return list(zip(starts, starts[1:] + [n]))
    try:
        change = None
        for c in columns:
            differs = pc.fill_null(pc.not_equal(c.slice(1), c.slice(0, n - 1)), True)
            change = differs if change is None else pc.or_(change, differs)
        starts = [0] + [i + 1 for i in pc.indices_nonzero(change).to_pylist()]
    except pa.ArrowNotImplementedError:  # key types Arrow cannot compare: in Python
        values = list(zip(*(exact(c).to_pylist() for c in columns)))
        starts = [0] + [i for i in range(1, n) if None in values[i] or not same_key(values[i], values[i - 1])]
    return list(zip(starts, starts[1:] + [n]))

"""The streaming plan: ``applyInPandasWithState``, one call per key and
micro-batch.

The rows reach the per-key function and leave it as Arrow IPC bytes
(:mod:`spark_ops.passthrough`): pandas, which the state API goes through,
would otherwise change them (an integer column with a null becomes
float64), so every value, and every aggregation's input, stays exact.

Each key's level queues stay in the shared store between micro-batches;
Spark's own state holds only the key's checkpoint version, newest time and
the job's fingerprint.  A micro-batch replayed after a failure resumes that
version (retained by the store even if the failed attempt checkpointed past
it), so nothing is lost or counted twice.
"""

from __future__ import annotations

from . import passthrough
from .plan import (ARRIVAL, INTERNAL, PACKED, TIME, VALUE, InputTimes, column, output_arrow_schema, output_schema,
                   with_order_columns)
from .spec import SlidingWindowError, WindowSpec
from .windows import open_key_window

#: Spark's state per key: the checkpoint version of its window in the
#: store, its newest time, and the job that built it (WindowSpec.fingerprint).
STATE_SCHEMA = "version long, newest double, job string"


def streaming_plan(df, spec: WindowSpec, run: str, expire_after: float | None):
    """``df`` with the windows' output columns; ``run``: the query's name."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    ordered = with_order_columns(df, spec)
    schema = output_schema(ordered, spec)
    target = output_arrow_schema(df.sparkSession, schema)
    passed = [c for c in ordered.columns if c not in INTERNAL]
    fingerprint = spec.fingerprint()

    def windows_of_key(key, frames, state):
        import pandas as pd
        import pyarrow.compute as pc

        k = key[0].item() if hasattr(key[0], "item") else key[0]  # numpy scalars as Python values
        if state.hasTimedOut:  # no rows for expire_after: the window goes
            open_key_window(spec, k, run, streaming=True, resume=state.get[0]).expire()
            state.remove()
            return
        rows = passthrough.unpack(blob for frame in frames for blob in frame[PACKED])
        rows = rows.take(pc.sort_indices(rows, [(TIME, "ascending"), (ARRIVAL, "ascending")]))
        version, newest, job = state.get if state.exists else (None, None, None)
        if job is not None and job != fingerprint:
            raise SlidingWindowError(
                f"{spec.key}={k!r}: the query's windows were built by another job ({job}), not by this one "
                f"({fingerprint}); restart a changed query with a new name= and checkpoint location")
        window = open_key_window(spec, k, run, streaming=True, resume=version if version is not None else False,
                                 newest=newest)
        try:
            outputs = window.push(rows.column(TIME).combine_chunks(), rows.column(VALUE).combine_chunks(), None,
                                  shown=InputTimes(rows.column(spec.time)))
            version = window.checkpoint()
        finally:
            window.close()
        state.update((version, window.newest, fingerprint))
        if expire_after is not None:
            state.setTimeoutDuration(int(expire_after * 1000))
        result = rows.select(passed)
        for (name, _), output in zip(spec.output_columns, outputs):
            result = result.append_column(name, output)
        yield pd.DataFrame({PACKED: passthrough.pack(result)})

    timeout = GroupStateTimeout.NoTimeout if expire_after is None else GroupStateTimeout.ProcessingTimeTimeout
    key_type = ordered.schema[spec.key].dataType.simpleString()
    packed = ordered.mapInArrow(passthrough.pack_by_key(spec.key), f"`{spec.key}` {key_type}, {PACKED} binary")
    return (packed.groupBy(column(spec.key))
                  .applyInPandasWithState(windows_of_key, f"{PACKED} binary", STATE_SCHEMA, "append", timeout)
                  .mapInArrow(passthrough.unpack_batches(target), schema))

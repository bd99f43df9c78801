"""The streaming plan: ``applyInPandasWithState``, one call per key and
micro-batch.

Each key's level queues stay in the shared store between micro-batches;
Spark's own state holds only the key's checkpoint version, newest time and
the job's fingerprint.  A micro-batch replayed after a failure resumes that
version (retained by the store even if the failed attempt checkpointed past
it), so nothing is lost or counted twice.
"""

from __future__ import annotations

from .plan import ARRIVAL, INTERNAL, TIME, VALUE, column, output_schema, with_order_columns
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
    passthrough = [c for c in ordered.columns if c not in INTERNAL]
    fingerprint = spec.fingerprint()

    def windows_of_key(key, frames, state):
        import pandas as pd
        import pyarrow as pa

        k = key[0].item() if hasattr(key[0], "item") else key[0]  # numpy scalars as Python values
        if state.hasTimedOut:  # no rows for expire_after: the window goes
            open_key_window(spec, k, run, streaming=True, resume=state.get[0]).expire()
            state.remove()
            return
        rows = pd.concat(list(frames), ignore_index=True).sort_values([TIME, ARRIVAL], kind="stable")
        version, newest, job = state.get if state.exists else (None, None, None)
        if job is not None and job != fingerprint:
            raise SlidingWindowError(
                f"{spec.key}={k!r}: the query's windows were built by another job ({job}), not by this one "
                f"({fingerprint}); restart a changed query with a new name= and checkpoint location")
        window = open_key_window(spec, k, run, streaming=True, resume=version if version is not None else False,
                                 newest=newest)
        try:
            # from NumPy, not pandas: a NaN stays a NaN (a rejected row's message shows the input's value)
            outputs = window.push(pa.array(rows[TIME].to_numpy()), pa.array(rows[VALUE].to_numpy()), None,
                                  shown=rows[spec.time].tolist())
            version = window.checkpoint()
        finally:
            window.close()
        state.update((version, window.newest, fingerprint))
        if expire_after is not None:
            state.setTimeoutDuration(int(expire_after * 1000))
        result = rows[passthrough].reset_index(drop=True)
        for (name, _), output in zip(spec.output_columns, outputs):
            result[name] = output.to_pylist()
        yield result

    timeout = GroupStateTimeout.NoTimeout if expire_after is None else GroupStateTimeout.ProcessingTimeTimeout
    return (ordered.groupBy(column(spec.key))
                   .applyInPandasWithState(windows_of_key, schema, STATE_SCHEMA, "append", timeout))


"""A run's record: how a run resumed by step (:mod:`stores.steps`) tells a
store that lost its windows from keys that are new.

A window opened with ``resume=Before(run, step)`` starts empty when the
store holds no checkpoint of the run's earlier steps.  That is right for a
key the run has not seen, and silently wrong when the store lost the run's
windows (a Redis restarted without persistence, a file store deleted, every
window swept by ``mta-spark gc``).  Each task of each step therefore calls
:func:`check_run` first: step 0 creates the run's record, every later step
must find it, or the run fails with a :class:`~stores.errors.StoreError`
instead of forgetting its windows.  Every step stamps the record, so a
later step that finds it stamped by a step older than the one before has
met a store that rolled back (a Redis restored from an older snapshot, a
file store with ``synchronous="normal"`` after a power loss), and one that
finds a newer stamp a run that rolled back (its checkpoint location lost
steps): both fail too.  This needs every step to run the task that stamps
(a Spark ``foreachBatch`` that skips running its DataFrame would trip it).
The record names its run, so a run
whose windows another run has taken over since (the same query name
started again with a new checkpoint location, then the old checkpoint
location resumed) fails too rather than resume them.  The stamps also
renew the record's time of use, so that :mod:`stores.gc` holds it while
the run lives and sweeps it with the windows of a run abandoned for longer
than its age.

What the record cannot tell is the loss of *one* window (a key idle for
longer than the age ``mta-spark gc`` sweeps at): that key's window starts
again empty, as if it had expired.  Sweep with an age longer than any key of
a live query stays idle.

The record is a window record without checkpoints (so ``mta-spark gc``
lists, ages and deletes it like any window), holding the run under
``"run"`` and the newest step stamped under ``"step"``.  Round trips per
call: one read, plus one compare-and-set for the stamping task of a step.
"""

from __future__ import annotations

from .codec import encode
from .errors import CasMismatch, StoreError
from .window_meta import clock_of, decode_meta, new_meta, owner

__all__ = ["check_run"]


def check_run(store, record: str, run: str, step: int, *, stamp: bool) -> None:
    """Step ``step`` of run ``run``, whose record is ``record`` (a window
    name) in ``store``, is starting: a StoreError when a step after the
    first finds no record, another run's, or one stamped by a step other
    than this one or the one before (the store or the run rolled back).
    ``stamp`` (one task of each step, so that the round trips do not depend
    on how tasks race): write the record at step 0 (taking it over from an
    earlier run), stamp it with each later step."""
    blob, token = store.read_meta(record)
    meta = decode_meta(blob, f"run record {record!r} in {store.url}") if blob is not None else None
    if step > 0 and meta is None:
        raise StoreError(
            f"{store.url} has lost the windows of this query (its record {record!r}, made by its first "
            f"micro-batch, is gone at micro-batch {step}: the store was replaced, restarted without "
            "persistence, its directory deleted, or swept by mta-spark gc); restart the query with a new "
            "checkpoint location")
    if step > 0 and meta.get("run") != run:
        raise StoreError(
            f"another query (id {meta.get('run')}) has taken over the windows of this one (id {run}) in "
            f"{store.url} under the same name= ({record!r}): give every query its own name=")
    stamped = meta.get("step", -1) if meta is not None and meta.get("run") == run else None
    if step > 0 and stamped < step - 1:
        raise StoreError(
            f"{store.url} has rolled back: the record of this query ({record!r}) was last stamped by "
            f"micro-batch {stamped}, and micro-batch {step} is starting, so the store lost what micro-batches "
            f"{stamped + 1} to {step - 1} wrote (restored from an older snapshot, or a power loss with "
            "synchronous='normal'); restart the query with a new checkpoint location")
    if stamped is not None and stamped > step:
        raise StoreError(
            f"this query is running micro-batch {step}, and {store.url} holds its record stamped by micro-batch "
            f"{stamped}: the query's checkpoint location lost micro-batches the store kept (restored, or not "
            "synced before a power loss); restart the query with a new checkpoint location")
    if not stamp or stamped == step:
        return
    record_meta = dict(meta or new_meta(0, 1), run=run, step=step, used=clock_of(store)(), owner=owner())
    record_meta["epochs"] = record_meta["epochs"] or [0]  # a record without epochs reads as a deletion left half-done
    try:
        # not synced here: the stamping task syncs the store (Store.sync) before it ends,
        # so the step is durable before Spark commits it
        store.cas_meta(record, token, encode(record_meta), durable=False)
    except CasMismatch:
        pass  # an attempt of this step running beside this one stamped it meanwhile

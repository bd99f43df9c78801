"""A run's progress records: how a run resumed by step (:mod:`stores.steps`)
tells a store that lost or rolled back its windows from keys that are new.

A window opened with ``resume=Before(run, step)`` starts empty when the
store holds no checkpoint of the run's earlier steps, and resumes an older
step's checkpoint when the store lost the newer one.  That is right for a
key the run has not seen, and silently wrong when the store lost the run's
windows (a Redis restarted without persistence, a file store deleted, every
window swept by ``mta-spark gc``) or went back to an older state (a Redis
restored from a snapshot or losing its last second of AOF, a file store
with ``synchronous="normal"`` after a power loss).

So each *task* of a step keeps a record of its own (one per partition of
the run's work, which the run partitions the same way at every step, so a
key's rows reach the same task each time): :func:`check_run` reads it
before the task opens any window, and :func:`finish_run` stamps it with the
step after the task's checkpoints and before its sync (``Store.sync``).  A
store on one server (SQLite, a standalone Redis) keeps its writes in order
and loses, if anything, a suffix of them, so a stamp that survived means
every checkpoint the task made before it did too (a store spread over
several servers, Redis Cluster or Couchbase, gives no such order across
them: a failover that loses one server's last writes is caught only where
it loses a task's stamp).  At step ``n`` the record must therefore hold
step ``n - 1`` or ``n`` (``n`` when the step is replayed): a missing record
(after step 0) means the store lost the run's windows, an older stamp that
it rolled back past the end of that task, a newer one that the run rolled
back (its checkpoint location lost steps the store kept); each fails the
run with a :class:`~stores.errors.StoreError` instead of resuming wrong
windows.  This needs every step to run every partition's task (a Spark
``foreachBatch`` that skips running its DataFrame would trip it) and the
partitioning to stay the same, since a record vouches only for the keys
of its own task.  The caller gives the count of tasks (``tasks=``), which
the record keeps: a step run as another count fails naming both counts
(a Spark query shuffles into ``spark.sql.shuffle.partitions`` tasks as
read when its plan is built; Spark restores no such explicit count from
the checkpoint location, and adaptive execution leaves it as it is).

The record also names its run, so a run whose windows another run has
taken over since (the same query name started again with a new checkpoint
location, then the old checkpoint location resumed) fails too.  The stamps
renew the record's time of use, so that :mod:`stores.gc` holds it while the
run lives and sweeps it with the windows of a run abandoned for longer than
its age.

What the records cannot tell is the loss of *one* window alone (a key idle
for longer than the age ``mta-spark gc`` sweeps at, a key evicted under
memory pressure): that key's window starts again empty, as if it had
expired.  Give Redis no eviction policy for these keys, and sweep with an
age longer than any key of a live query stays idle.

A record is a window record without checkpoints (so ``mta-spark gc`` lists,
ages and deletes it like any window), holding the run under ``"run"``, the
step last finished under ``"step"`` and the count of tasks that step ran
as under ``"tasks"`` (absent when the caller gives none).  Round trips per
task: one read, one compare-and-set.  :func:`tasks_of` reads that count
back, for a restart that resumes it (``mta-spark stream``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .codec import encode
from .errors import CasMismatch, CorruptValue, StoreError
from .window_meta import clock_of, decode_meta, new_meta, owner

__all__ = ["Progress", "check_run", "finish_run", "tasks_of"]


class Progress(NamedTuple):
    """A task's record as :func:`check_run` read it, for :func:`finish_run`."""

    record: str
    meta: Any  # the decoded record, None when absent
    token: Any
    tasks: int | None = None  # the step's count of tasks, for the stamp


def check_run(store, record: str, run: str, step: int, *, tasks: int | None = None) -> Progress:
    """Step ``step`` of run ``run`` is starting a task whose record is
    ``record`` (a window name) in ``store``, one of ``tasks`` tasks of the
    step (``None``: not told): a StoreError when, after the first step, the
    record is missing, another run's, or stamped by a step other than this
    one or the one before; and when this run's stamp was made by a step
    run as another count of tasks.  O(1), one round trip."""
    meta, token = _read(store, record)
    if step > 0 and meta is None:
        grown = "" if tasks is None else (
            f"; or, if spark.sql.shuffle.partitions grew since the query started (it now runs as {tasks} tasks), "
            "start it with the count it had")
        raise StoreError(
            f"{store.url} has lost the windows of this query (its record {record!r}, made by its first "
            f"micro-batch, is gone at micro-batch {step}: the store was replaced, restarted without "
            "persistence, its directory deleted, or swept by mta-spark gc), or the query was restarted with "
            "another name= than it ran with (its windows are under that name: restart it with that one); else "
            f"restart the query with a new checkpoint location{grown}")
    if step > 0 and meta.get("run") != run:
        raise StoreError(
            f"another query (id {meta.get('run')}) has taken over the windows of this one (id {run}) in "
            f"{store.url} under the same name= ({record!r}): give every query its own name=")
    stamped = meta.get("step", -1) if meta is not None and meta.get("run") == run else None
    ran_as = meta.get("tasks") if stamped is not None else None
    if tasks is not None and ran_as is not None and ran_as != tasks:
        raise StoreError(
            f"this query's micro-batches ran as {ran_as} tasks and now run as {tasks} (its record {record!r} in "
            f"{store.url}, stamped by micro-batch {stamped}): its keys reach other tasks than the ones whose "
            f"records vouch for their windows; start it with spark.sql.shuffle.partitions={ran_as} again, or "
            "with a new checkpoint location")
    if step > 0 and stamped < step - 1:
        raise StoreError(
            f"{store.url} has rolled back: the record {record!r} of this query was last stamped by micro-batch "
            f"{stamped}, and micro-batch {step} is starting, so the store lost what later micro-batches wrote "
            "(restored from an older snapshot, or writes lost to a power loss or a failover); restart the query "
            "with a new checkpoint location")
    if stamped is not None and stamped > step:
        raise StoreError(
            f"this query is running micro-batch {step}, and {store.url} holds its record {record!r} stamped by "
            f"micro-batch {stamped}: the query's checkpoint location lost micro-batches the store kept "
            "(restored, or not synced before a power loss); restart the query with a new checkpoint location")
    return Progress(record, meta, token, tasks)


def tasks_of(store, record: str) -> int | None:
    """The count of tasks the step that last stamped ``record`` (a task's
    record in ``store``) ran as; ``None`` when there is no record or it
    holds no count (stamped by a caller that gave none).  Whichever run
    stamped it: the run's id is the query's, which a restart learns only
    once it runs.  CorruptValue when the count is not a positive integer.
    O(1), one round trip."""
    meta, _ = _read(store, record)
    tasks = meta.get("tasks") if meta is not None else None
    if tasks is not None and (type(tasks) is not int or tasks < 1):
        raise CorruptValue(f"run record {record!r} in {store.url}: its count of tasks {tasks!r} is not a "
                           "positive integer")
    return tasks


def _read(store, record: str):
    """``record``'s decoded record (msgpack through :mod:`stores.codec`,
    never pickle; ``None`` when absent) and its token.  One round trip."""
    blob, token = store.read_meta(record)
    return (decode_meta(blob, f"run record {record!r} in {store.url}") if blob is not None else None), token


def finish_run(store, run: str, step: int, progress: Progress) -> None:
    """The task of step ``step`` that read ``progress`` has made its
    checkpoints: stamp its record with the step and the step's count of
    tasks (taking it over from an earlier run at step 0), unless it holds
    this step or a later one already (an attempt of the step that ran
    beside this one).  Not synced here: the caller syncs the store next,
    which makes the stamp durable with the checkpoints before it.  O(1), at
    most one round trip."""
    meta = progress.meta
    if meta is not None and meta.get("run") == run and meta.get("step", -1) >= step:
        return
    stamped = dict(meta or new_meta(0, 1), run=run, step=step, used=clock_of(store)(), owner=owner())
    stamped["epochs"] = stamped["epochs"] or [0]  # a record without epochs reads as a deletion left half-done
    if progress.tasks is None:
        stamped.pop("tasks", None)  # an earlier run's count says nothing of this one
    else:
        stamped["tasks"] = progress.tasks
    try:
        store.cas_meta(progress.record, progress.token, encode(stamped), durable=False)
    except CasMismatch:
        pass  # an attempt of this step running beside this one stamped it meanwhile

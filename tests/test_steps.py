"""Windows resumed by step (stores/steps.py) and a run's record
(stores/runs.py): what a streaming query without Spark state relies on.

The property test plays a run's steps as Spark replays micro-batches: a
step is tried by attempts that fail before or after checkpointing, or keep
running beside the attempt that succeeds (a zombie), before one attempt
commits it; some steps bring the key no rows.  Every attempt must resume
exactly what the committed steps left (against the brute-force oracle of
the committed rows, CONCAT: ordered, non-commutative, ``()`` values equal
to the identity), with the label the last committed step wrote, however
many failed attempts checkpointed; a zombie's checkpoint is fenced, and
an attempt of an older step that comes after a later step committed is
refused.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stores
from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA
from tests.oracle import CONCAT, BruteForceWindow
from tests.store_fixtures import fresh_window, settle_background, store_url  # noqa: F401  (fixture)
from tests.strategies import sane_settings

ENGINES = [pytest.param(LogMTA, id="LogMTA"), pytest.param(AmortizedMTA, id="AmortizedMTA")]

ATTEMPTS = st.lists(st.sampled_from(["fails before", "fails after checkpoint", "zombie"]), max_size=4)
VALUES = st.lists(st.one_of(st.just(()), st.tuples(st.integers(0, 99))), max_size=12)


def _keep(n: int):
    def wsp(t, p):
        return len(t) - len(p) >= n
    return wsp


@pytest.mark.parametrize("cls", ENGINES)
@sane_settings(40)
@given(data=st.data())
def test_replayed_steps_resume_what_the_committed_steps_left(cls, store_url, data):  # noqa: F811
    window, run = fresh_window("steps"), "query-a"
    keep = data.draw(st.integers(1, 12), label="window keeps")
    wsp = _keep(keep)
    sizes = dict(buffer_size=data.draw(st.integers(1, 4)), cache_size=data.draw(st.integers(1, 4)),
                 retain=data.draw(st.integers(1, 2), label="retain"))  # Spark's windows retain 1
    store = stores.open_store(store_url)
    committed = BruteForceWindow(CONCAT, wsp)  # the rows of the committed steps
    label = None  # what the last committed step's checkpoint carries

    def attempt(step: int):
        e = cls(CONCAT, wsp, store=store, window_id=window, resume=stores.Before(run, step), **sizes)
        assert len(e) == len(committed.items) and e.query() == committed.query(), f"step {step} resumed"
        assert e.resumed_label == label
        return e

    for step in range(data.draw(st.integers(1, 6), label="steps")):
        if data.draw(st.booleans(), label="no rows for the key"):
            continue
        values = data.draw(VALUES, label=f"step {step} values")
        zombies = []
        for kind in data.draw(ATTEMPTS, label=f"step {step} failed attempts"):
            e, o = attempt(step), BruteForceWindow(CONCAT, wsp)
            o.items = list(committed.items)
            cut = data.draw(st.integers(0, len(values)))
            for v in values[:cut] if kind == "fails before" else values:
                assert e.push(v) == o.push(v)
            if kind == "zombie":
                zombies.append(e)
                continue
            if kind == "fails after checkpoint":
                e.checkpoint(("failed", step))
            e.close()
        e = attempt(step)
        for v in values:
            assert e.push(v) == committed.push(v)
        e.checkpoint(("committed", step))
        e.close()
        label = ("committed", step)
        for z in zombies:
            with pytest.raises(stores.FencingError):
                z.checkpoint(("zombie", step))
            z.close()
        if step and data.draw(st.booleans(), label="a stale attempt of an older step"):
            older = data.draw(st.integers(0, step - 1))
            with pytest.raises(stores.FencingError, match=f"step {older} of run {run} cannot resume it"):
                cls(CONCAT, wsp, store=store, window_id=window, resume=stores.Before(run, older), **sizes)
    attempt(99).close()
    settle_background()
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_another_runs_checkpoints_are_not_resumed(cls, store_url):  # noqa: F811
    """A run resumes only its own steps' checkpoints: another run's window
    of the same name starts empty for it; an untagged checkpoint is never
    resumed by step (nor labelled); a run's checkpoint written by the other
    engine is refused."""
    window, store = fresh_window("runs"), stores.open_store(store_url)
    e = cls(CONCAT, None, store=store, window_id=window, resume=stores.Before("a", 0))
    e.push((1,))
    e.checkpoint("a's")
    e.close()
    other = cls(CONCAT, None, store=store, window_id=window, resume=stores.Before("b", 5))
    assert len(other) == 0 and other.resumed_label is None
    other.push((2,))
    other.checkpoint("b's")
    other.close()
    again = cls(CONCAT, None, store=store, window_id=window, resume=stores.Before("a", 1))
    assert again.query() == (1,) and again.resumed_label == "a's"
    again.close()
    plain = cls(CONCAT, None, store=store, window_id=window)  # resume=True: the newest, whoever made it
    assert plain.query() == (2,) and plain.resumed_label == "b's"
    plain.push((3,))
    plain.checkpoint()  # untagged, unlabelled
    plain.close()
    assert cls(CONCAT, None, store=store, window_id=window).resumed_label is None
    assert len(cls(CONCAT, None, store=store, window_id=window, resume=stores.Before("c", 9))) == 0
    newest = cls(CONCAT, None, store=store, window_id=window, resume=stores.Before("b", 6))
    assert newest.query() == (2,) and newest.resumed_label == "b's"
    newest.close()
    wrong = LogMTA if cls is AmortizedMTA else AmortizedMTA
    with pytest.raises(stores.StoreError, match=f"written by {cls.__name__}, not {wrong.__name__}"):
        wrong(CONCAT, None, store=store, window_id=window, resume=stores.Before("b", 6))
    settle_background()
    store.close()


def test_a_label_the_codec_cannot_encode_leaves_the_checkpoint_as_it_was(store_url):  # noqa: F811
    window, store = fresh_window("label"), stores.open_store(store_url)
    e = AmortizedMTA(CONCAT, None, store=store, window_id=window)
    e.push((1,))
    assert e.checkpoint(("fine", 1.5, None)) == 1
    e.push((2,))
    with pytest.raises(TypeError, match="cannot encode value of type builtins.object"):
        e.checkpoint(object())
    e.close()
    r = AmortizedMTA(CONCAT, None, store=store, window_id=window)
    assert r.query() == (1,) and r.resumed_label == ("fine", 1.5, None)
    r.close()
    store.close()


@pytest.mark.parametrize("bad", [dict(run="", step=0), dict(run=3, step=0), dict(run="a", step=-1),
                                 dict(run="a", step=1.0), dict(run="a", step=True)])
def test_bad_steps_are_refused(bad):
    with pytest.raises(ValueError, match="Before: "):
        stores.Before(**bad)


def test_a_tasks_progress_record_tells_a_lost_or_rolled_back_store(store_url):  # noqa: F811
    """A task's record is read before its keys and stamped after them.
    After step 0, a record that is missing (the store lost the windows),
    another run's (the windows were taken over), stamped by a step older
    than the one before (the store rolled back past the end of that task) or
    newer than this one (the run rolled back) is a StoreError naming what
    happened; a replayed step, and a task that starts before or after the
    stamp of the step before, pass; a stamp never goes back; a new run takes
    an old record over at its step 0.  The record is a window gc lists and
    ages like any other."""
    store, record = stores.open_store(store_url), fresh_window("run") + "/~task-0"

    def task(run, step):
        stores.finish_run(store, run, step, stores.check_run(store, record, run, step))

    progress = stores.check_run(store, record, "a", 0)  # nothing yet: step 0 starts the run
    with pytest.raises(stores.StoreError, match="has lost the windows of this query.*micro-batch 1.*or the query "
                                                "was restarted with another name= than it ran with"):
        stores.check_run(store, record, "a", 1)
    stores.finish_run(store, "a", 0, progress)
    snapshot = store.read_meta(record)[0]  # the store as it was after step 0's task
    for step in range(1, 3):
        task("a", step)
    stale = stores.check_run(store, record, "a", 3)  # an attempt of step 3 that will finish late
    for step in range(3, 5):
        task("a", step)
    task("a", 4)  # a replay of the last step
    late = stores.check_run(store, record, "a", 5)
    task("a", 5)
    stores.finish_run(store, "a", 5, late)  # an attempt that ran beside: the stamp is there already
    stores.finish_run(store, "a", 3, stale)  # the stale attempt of step 3 finishing: never back
    assert stores.decode(store.read_meta(record)[0])["step"] == 5
    with pytest.raises(stores.StoreError, match="running micro-batch 3.*stamped by micro-batch 5.*checkpoint location"):
        stores.check_run(store, record, "a", 3)  # Spark's checkpoint lost micro-batches 3 to 5
    store.cas_meta(record, store.read_meta(record)[1], snapshot)  # the store restored from a snapshot of step 0
    with pytest.raises(stores.StoreError, match="has rolled back.*last stamped by micro-batch 0.*micro-batch 6"):
        stores.check_run(store, record, "a", 6)
    task("b", 0)  # a new query under the same name
    with pytest.raises(stores.StoreError, match=r"another query \(id b\) has taken over .* \(id a\)"):
        stores.check_run(store, record, "a", 7)
    task("b", 1)
    (info,) = [w for w in store.windows(older_than=3600) if w.name == record]
    assert info.kind == "window" and info.held
    (aged,) = [w for w in store.windows(older_than=60, now=info.used + 61) if w.name == record]
    assert not aged.held
    trips = store.stats.round_trips
    task("b", 2)
    assert store.stats.round_trips == trips + 2  # one read, one compare-and-set
    store.close()


def test_a_tasks_progress_record_keeps_the_count_of_tasks_its_step_ran_as(store_url):  # noqa: F811
    """A step told its count of tasks stamps the record with it; a later
    step, or a replay, run as another count is a StoreError naming both
    counts and the setting that restores the first; a record missing at a
    grown count names that cause too.  A record stamped without a count (by
    a caller that gives none) takes any, and a new run's stamp keeps its
    own count, not the one the record had."""
    store, prefix = stores.open_store(store_url), fresh_window("run") + "/~task-"

    def task(run, step, tasks, partition=0):
        record = f"{prefix}{partition}"
        stores.finish_run(store, run, step, stores.check_run(store, record, run, step, tasks=tasks))
        return stores.decode(store.read_meta(record)[0])

    for partition in range(8):
        assert task("a", 0, 8, partition)["tasks"] == 8
    assert task("a", 1, 8)["tasks"] == 8
    with pytest.raises(stores.StoreError, match=r"micro-batches ran as 8 tasks and now run as 4 .*stamped by "
                                                r"micro-batch 1.*spark\.sql\.shuffle\.partitions=8 again"):
        stores.check_run(store, f"{prefix}0", "a", 2, tasks=4)
    with pytest.raises(stores.StoreError, match="ran as 8 tasks and now run as 16"):
        stores.check_run(store, f"{prefix}0", "a", 1, tasks=16)  # a replay of step 1
    with pytest.raises(stores.StoreError, match=r"has lost the windows.*spark\.sql\.shuffle\.partitions grew "
                                                r"since the query started \(it now runs as 9 tasks\)"):
        stores.check_run(store, f"{prefix}8", "a", 2, tasks=9)  # the ninth task of a grown count: no record
    with pytest.raises(stores.StoreError, match="has lost the windows") as lost:
        stores.check_run(store, f"{prefix}8", "a", 2)
    assert "shuffle" not in str(lost.value)  # no count given, none to blame
    assert "tasks" not in task("b", 0, None)  # a new run that gives no count: the old run's is dropped
    assert task("b", 1, 3)["tasks"] == 3  # a record without a count takes the one given
    assert task("c", 0, 5)["tasks"] == 5  # a new run's stamp holds its own count
    assert task("c", 1, 5)["step"] == 1
    store.close()


def test_tasks_of_reads_back_the_count_of_tasks_a_record_keeps(store_url):  # noqa: F811
    """``tasks_of`` gives the count the step that last stamped a task's
    record was told (the count given to ``check_run``), whichever run
    stamped it; None without a record or a count; a count that is not a
    positive integer is a CorruptValue naming the record.  One round trip."""
    store, record = stores.open_store(store_url), fresh_window("run") + "/~task-0"

    def task(run, step, tasks):
        stores.finish_run(store, run, step, stores.check_run(store, record, run, step, tasks=tasks))

    assert stores.tasks_of(store, record) is None  # no record: a first run
    task("a", 0, 6)
    trips = store.stats.round_trips
    assert stores.tasks_of(store, record) == 6
    assert store.stats.round_trips == trips + 1
    task("a", 1, 6)
    assert stores.tasks_of(store, record) == 6
    task("b", 0, None)  # a new run that gives no count
    assert stores.tasks_of(store, record) is None
    task("c", 0, 3)  # another run's count is read as well: a restart knows no run id yet
    assert stores.tasks_of(store, record) == 3
    for bad in ("3", 0, True, 2.0):
        blob, token = store.read_meta(record)
        store.cas_meta(record, token, stores.encode(dict(stores.decode(blob), tasks=bad)))
        with pytest.raises(stores.CorruptValue, match=f"run record '{re.escape(record)}'.*count of tasks"):
            stores.tasks_of(store, record)
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_stale_attempt_of_an_older_step_is_refused(cls, store_url):  # noqa: F811
    """Steps 0 to 3 committed, then an attempt of step 2 opens the window
    (a task that reached the key after step 3 did, or a run whose
    checkpoint location lost steps 2 and 3): refused with a FencingError
    before it claims anything, and step 4 resumes every committed row."""
    window, store = fresh_window("stale"), stores.open_store(store_url)
    for retain in (1, 2):
        name = f"{window}-{retain}"
        for step in range(4):
            e = cls(CONCAT, None, store=store, window_id=name, resume=stores.Before("q", step), retain=retain)
            e.push((step,))
            e.checkpoint(("committed", step))
            e.close()
        with pytest.raises(stores.FencingError, match="step 2 of run q cannot resume it.*at step 3 already"):
            cls(CONCAT, None, store=store, window_id=name, resume=stores.Before("q", 2), retain=retain)
        e = cls(CONCAT, None, store=store, window_id=name, resume=stores.Before("q", 4), retain=retain)
        assert e.query() == (0, 1, 2, 3) and e.resumed_label == ("committed", 3)
        e.close()
    settle_background()
    store.close()

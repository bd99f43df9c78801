"""Claims and checkpoints of many windows sent together (stores.batch).

A window opened with ``batch=`` hands its checkpoint's compare-and-set to
the batch, whose commit writes every one waiting in one round trip where
the store pipelines them (the file store, in one transaction, and
standalone Redis), and claims ahead the windows
its task said it would open.  These tests check that nothing of a window's
meaning changes: what a commit wrote resumes exactly (brute-force oracle,
non-commutative monoid), nothing is written before the commit, a stale
window is still refused (and the others of its batch committed), a claim
ahead whose remembered record went stale still resumes the store's
record, and an error of one window's claim is raised by its own opening.
On the memory store and a Redis Cluster a batch defers nothing: each
window writes at its checkpoint, as without one.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stores
from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA
from stores import FencingError
from stores.meta_cache import cache_of
from tests.oracle import CONCAT, BruteForceWindow
from tests.store_fixtures import fresh_window, persistent_url, settle_background, store_url  # noqa: F401  (fixtures)
from tests.strategies import sane_settings

ENGINES = [pytest.param(LogMTA, id="LogMTA"), pytest.param(AmortizedMTA, id="AmortizedMTA")]


def _newest_10(t, p):
    return len(t) - len(p) >= 10


def _open(cls, store, window, **options):
    return cls(CONCAT, _newest_10, store=store, window_id=window, buffer_size=2, cache_size=1, **options)


def _oracle():
    return BruteForceWindow(CONCAT, _newest_10)


def _store(url):
    store = stores.open_store(url)
    cache_of(store)._current = 1.0  # claims swap what the process remembers
    return store


def _resumes(cls, url, window, oracle) -> None:
    """A store object of its own (no remembered records) resumes ``window``
    exactly as ``oracle`` holds it."""
    other = stores.open_store(url)
    try:
        e = _open(cls, other, window)
        assert len(e) == len(oracle.items) and e.query() == oracle.query()
        e.close()
    finally:
        other.close()


def _micro_batch(e, oracle, values) -> None:
    """``e`` resumed as ``oracle`` holds it: push ``values`` against the
    oracle, checkpoint, close."""
    assert len(e) == len(oracle.items) and e.query() == oracle.query()
    for v in values:
        assert e.push((v,)) == oracle.push((v,))
    e.checkpoint()
    e.close()


def _through_a_batch(cls, store, windows, oracles, values) -> None:
    """One micro-batch of every window (:func:`_micro_batch`), as a task
    runs them: a batch told the windows, committed at the end."""
    batch = stores.Batch(store)
    batch.expect(windows)
    for w in windows:
        _micro_batch(_open(cls, store, w, batch=batch), oracles[w], values)
    batch.commit()


def _all_resume(cls, url, windows, oracles) -> None:
    settle_background()
    for w in windows:
        _resumes(cls, url, w, oracles[w])


@pytest.mark.parametrize("cls", ENGINES)
@settings(sane_settings(max_examples=25))
@given(steps=st.lists(st.tuples(st.integers(0, 2), st.lists(st.sampled_from(["", "a", "b"]), max_size=12),
                                st.booleans()), min_size=1, max_size=6))
def test_what_a_commit_wrote_resumes_exactly(cls, store_url, steps):  # noqa: F811
    """Micro-batches over three windows, each opened, pushed (values equal
    to the identity among them), checkpointed into a batch and closed, the
    batch committed after some of them: on a deferring store nothing of a
    checkpoint is written before its commit (the record stays as the claim
    left it), and in the end each window resumes exactly its oracle."""
    store = _store(store_url)
    windows = [fresh_window("batch") for _ in range(3)]
    oracles = [_oracle() for _ in windows]
    batch = stores.Batch(store)
    batch.expect([windows[which] for which, _, _ in steps])  # the first opening claims the others ahead
    try:
        for which, values, commit in steps:
            e = _open(cls, store, windows[which], batch=batch)
            claimed = store.read_meta(windows[which])
            oracle = oracles[which]
            assert e.query() == oracle.query()
            for v in values:
                assert e.push((v,)) == oracle.push((v,))
            e.checkpoint()
            e.close()
            assert (store.read_meta(windows[which]) == claimed) == batch.defers
            if commit:
                batch.commit()
        batch.commit()
        settle_background()
        for window, oracle in zip(windows, oracles):
            _resumes(cls, store_url, window, oracle)
    finally:
        store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_stale_window_is_refused_at_the_commit_and_the_others_stand(cls, store_url):  # noqa: F811
    """Two windows checkpointed into a batch; a newer owner claims one of
    them before the commit: the commit raises its FencingError, and the
    other window's checkpoint is committed."""
    store = _store(store_url)
    stale, fine = fresh_window("stale"), fresh_window("fine")
    oracles = {w: _oracle() for w in (stale, fine)}
    batch = stores.Batch(store)
    try:
        engines = {w: _open(cls, store, w, batch=batch) for w in (stale, fine)}
        for w, e in engines.items():
            for v in "xyz":
                assert e.push((v,)) == oracles[w].push((v,))
        other = stores.open_store(store_url)
        newer = _open(cls, other, stale)  # claims it: the engine above is now stale
        if not batch.defers:
            with pytest.raises(FencingError):
                engines[stale].checkpoint()
            engines[fine].checkpoint()
        else:
            engines[stale].checkpoint()  # waits, ahead of the fine one: refused at the commit
            engines[fine].checkpoint()
            with pytest.raises(FencingError, match="checkpoint refused"):
                batch.commit()
        assert batch.waiting == 0
        for e in engines.values():
            e.close()
        newer.close()
        other.close()
        _resumes(cls, store_url, fine, oracles[fine])
        _resumes(cls, store_url, stale, _oracle())  # nothing of the stale engine's
    finally:
        store.close()


@pytest.mark.parametrize("cls", ENGINES)
@pytest.mark.parametrize("background", [True, False])
@settings(sane_settings(max_examples=25))
@given(steps=st.lists(st.tuples(st.lists(st.sampled_from(["", "a", "b"]), max_size=12), st.booleans(), st.booleans()),
                      min_size=1, max_size=8))
def test_a_window_written_past_a_waiting_checkpoint_resumes_it(cls, background, store_url, steps):  # noqa: F811
    """One window kept open: values pushed (groups written to the store,
    in background threads or not) while a checkpoint waits in the batch,
    checkpoints and commits at random points, then a last commit and a
    close without a checkpoint: another store object resumes exactly what
    the window held at its last checkpoint (nothing the clean-up of a
    waiting checkpoint deletes or forgets is needed by it or by what was
    written after it)."""
    store = _store(store_url)
    window, oracle, checkpointed = fresh_window("open"), _oracle(), _oracle()
    batch = stores.Batch(store)
    try:
        e = _open(cls, store, window, batch=batch, background=background)
        for values, checkpoint, commit in steps:
            for v in values:
                assert e.push((v,)) == oracle.push((v,))
            if checkpoint:
                e.checkpoint()
                checkpointed = _copy(oracle)
            if commit:
                batch.commit()
        batch.commit()
        e.close()
        settle_background()
        _resumes(cls, store_url, window, checkpointed)
    finally:
        store.close()


def _copy(oracle):
    """A new oracle holding what ``oracle`` holds now."""
    copy = _oracle()
    for item in oracle.items:
        copy.push(item)
    return copy


def test_a_window_whose_checkpoint_waits_commits_before_its_next(store_url):  # noqa: F811
    """A second checkpoint of a window commits the batch first (it builds
    on the first), and deleting a window commits it too."""
    store = _store(store_url)
    window, oracle = fresh_window("twice"), _oracle()
    batch = stores.Batch(store)
    try:
        e = _open(AmortizedMTA, store, window, batch=batch)
        for v in "abc":
            assert e.push((v,)) == oracle.push((v,))
        first = e.checkpoint()
        assert batch.waiting == int(batch.defers)
        for v in "de":
            assert e.push((v,)) == oracle.push((v,))
        assert e.checkpoint() == first + 1
        assert batch.waiting == int(batch.defers)
        batch.commit()
        e.close()
        _resumes(AmortizedMTA, store_url, window, oracle)
        gone = _open(AmortizedMTA, store, window, batch=batch)
        gone.checkpoint()
        gone.close(delete=True)
        assert batch.waiting == 0 and store.read_meta(window) == (None, None)
    finally:
        store.close()


def _warm(cls, store, windows, oracles, values="ab") -> None:
    """One micro-batch of each window without a batch: the process then
    remembers each record."""
    for w in windows:
        e = _open(cls, store, w)
        for v in values:
            assert e.push((v,)) == oracles[w].push((v,))
        e.checkpoint()
        e.close()


def _warmed(cls, store, prefix: str, count: int) -> tuple[list, dict]:
    """``count`` fresh windows, each after one micro-batch (:func:`_warm`),
    and their oracles."""
    windows = [fresh_window(prefix) for _ in range(count)]
    oracles = {w: _oracle() for w in windows}
    _warm(cls, store, windows, oracles)
    return windows, oracles


@pytest.mark.parametrize("cls", ENGINES)
def test_expected_windows_are_claimed_ahead_in_one_round_trip(cls, store_url):  # noqa: F811
    """A batch told five windows claims all of them when the first opens:
    one round trip for their swaps where the store pipelines windows, none more to open
    the other four; each resumes exactly its last checkpoint."""
    store = _store(store_url)
    try:
        windows, oracles = _warmed(cls, store, "ahead", 5)
        batch = stores.Batch(store)
        batch.expect(windows)
        trips = store.stats.round_trips
        engines = [_open(cls, store, windows[0], batch=batch)]
        if batch.defers:
            assert store.stats.round_trips - trips == 1
        trips = store.stats.round_trips
        engines += [_open(cls, store, w, batch=batch) for w in windows[1:]]
        if batch.defers:
            assert store.stats.round_trips == trips
        for w, e in zip(windows, engines):
            _micro_batch(e, oracles[w], "cd")
        batch.commit()
        _all_resume(cls, store_url, windows, oracles)
    finally:
        store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_batch_saves_three_round_trips_per_window(cls, store_url):  # noqa: F811
    """The same micro-batch on two sets of five windows holding 40 values
    each (levels in the store, heads to read at the first eviction): with a
    batch, where the store pipelines windows, the claims, the heads and the checkpoints of
    the five cost one round trip each instead of five; both resume exactly."""
    store = _store(store_url)
    sets = [[fresh_window(f"set{i}") for _ in range(5)] for i in range(2)]
    oracles = {w: _oracle() for ws in sets for w in ws}
    try:
        for ws in sets:
            _warm(cls, store, ws, oracles, values=[str(i % 3) for i in range(40)])
        trips = []
        for ws, batch in zip(sets, (stores.Batch(store), None)):
            before = store.stats.round_trips
            if batch is not None:
                batch.expect(ws)
            for w in ws:
                e = _open(cls, store, w, **({"batch": batch} if batch is not None else {}))
                for v in "xy":
                    assert e.push((v,)) == oracles[w].push((v,))
                e.checkpoint()
                e.close()
            if batch is not None:
                batch.commit()
            settle_background()
            trips.append(store.stats.round_trips - before)
        if stores.Batch(store).defers:
            assert trips[0] <= trips[1] - 3 * (5 - 1)
        for w in sets[0] + sets[1]:
            _resumes(cls, store_url, w, oracles[w])
    finally:
        store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_claim_ahead_that_lost_its_swap_resumes_the_stores_record(cls, store_url):  # noqa: F811
    """Another process checkpointed one of the windows since this one
    remembered it: its swap ahead loses, and its opening still resumes what
    the other process wrote; the other windows are claimed as before."""
    store = _store(store_url)
    try:
        windows, oracles = _warmed(cls, store, "lost", 3)
        other = stores.open_store(store_url)
        _warm(cls, other, windows[1:2], oracles, values="xyz")
        other.close()
        _through_a_batch(cls, store, windows, oracles, "q")
        _all_resume(cls, store_url, windows, oracles)
    finally:
        store.close()


def test_a_claim_error_is_raised_by_its_own_opening(store_url):  # noqa: F811
    """One expected window cannot be resumed as asked (a stale attempt of
    an older micro-batch): the windows before and after it open, and its
    own opening raises the error."""
    store = _store(store_url)
    windows = [fresh_window("error") for _ in range(3)]
    try:
        for step in (0, 2):  # the middle window is checkpointed by step 2 already
            for w in windows if step == 0 else windows[1:2]:
                e = _open(AmortizedMTA, store, w, resume=stores.Before("q", step))
                e.push(("a",))
                e.checkpoint()
                e.close()
        batch = stores.Batch(store)
        batch.expect(windows)
        opened = [_open(AmortizedMTA, store, windows[0], resume=stores.Before("q", 1), batch=batch)]
        with pytest.raises(FencingError, match="cannot resume"):
            _open(AmortizedMTA, store, windows[1], resume=stores.Before("q", 1), batch=batch)
        opened.append(_open(AmortizedMTA, store, windows[2], resume=stores.Before("q", 1), batch=batch))
        assert [e.query() for e in opened] == [("a",), ("a",)]
        for e in opened:
            e.close()
    finally:
        store.close()


def test_windows_opened_otherwise_are_built_alone(store_url):  # noqa: F811
    """A window not expected, or opened with other options than those it
    was claimed ahead with, gets a storage of its own, claimed at its
    opening; a window opened again is not claimed ahead again, nor are the
    windows after it."""
    store = _store(store_url)
    first, second, other = (fresh_window(name) for name in ("first", "second", "other"))
    oracles = {w: _oracle() for w in (first, second, other)}
    try:
        _warm(AmortizedMTA, store, [first, second, other], oracles)
        batch = stores.Batch(store)
        batch.expect([first, second])
        e = _open(AmortizedMTA, store, first, batch=batch)  # claims both ahead
        assert e.query() == oracles[first].query()
        e.close()
        e = LogMTA(CONCAT, _newest_10, store=store, window_id=second, buffer_size=2, cache_size=1, batch=batch,
                   resume=False)
        assert e.query() == ()  # its own options (another engine, resume=False), not the claim ahead's
        e.close()
        e = _open(AmortizedMTA, store, other, batch=batch)
        assert e.query() == oracles[other].query()
        e.close()
        token = store.read_meta(second)[1]
        e = _open(AmortizedMTA, store, first, batch=batch, resume=False)
        assert e.query() == ()
        e.close()
        assert store.read_meta(second)[1] == token  # not claimed again
    finally:
        store.close()


def test_a_batch_takes_windows_of_its_own_store(store_url):  # noqa: F811
    """A batch of another store object (here of the same URL, so one that
    defers where this one would) is refused, before anything is claimed."""
    store, elsewhere = _store(store_url), stores.open_store(store_url)
    window = fresh_window()
    try:
        with pytest.raises(ValueError, match="a stores.Batch of the window's own store"):
            _open(AmortizedMTA, store, window, batch=stores.Batch(elsewhere))
        assert store.read_meta(window) == (None, None)
    finally:
        store.close()
        elsewhere.close()


def test_window_names_are_those_of_the_windows_a_key_opens(store_url):  # noqa: F811
    """spark_ops.windows.window_names (what a task tells its batch) names
    the windows open_key_window opens, one per size."""
    from spark_ops.spec import WindowSpec
    from spark_ops.windows import open_key_window, window_names

    for size in ({"range": 5.0}, {"range": [5.0, 60.0, 3600.0]}):
        spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], store=store_url, **size)
        opened = open_key_window(spec, "host-1", "run", streaming=True)
        windows = getattr(opened, "windows", [opened])
        try:
            assert window_names(spec, "host-1", "run") == [w.window.engine._storage.window for w in windows]
        finally:
            opened.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_more_windows_than_a_chunk_are_claimed_and_committed_in_chunks(cls, store_url, monkeypatch):  # noqa: F811
    """Five windows with chunks of two: claims ahead and commits go two
    windows at a time (three round trips each on a deferring store), and
    every window resumes exactly."""
    monkeypatch.setattr(stores.batch, "CHUNK", 2)
    store = _store(store_url)
    try:
        windows, oracles = _warmed(cls, store, "chunks", 5)
        batch = stores.Batch(store)
        batch.expect(windows)
        for w in windows:
            _micro_batch(_open(cls, store, w, batch=batch), oracles[w], "xy")
        assert batch.waiting == (5 if batch.defers else 0)
        before = store.stats.round_trips
        batch.commit()
        assert store.stats.round_trips - before >= (3 if batch.defers else 0)
        _all_resume(cls, store_url, windows, oracles)
    finally:
        store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_windows_read_their_own_heads_when_the_read_ahead_fails(cls, store_url, monkeypatch):  # noqa: F811
    """The heads read ahead fails (the store went away for it): each window
    reads its own at its first miss, and resumes exactly."""
    store = _store(store_url)
    try:
        windows, oracles = _warmed(cls, store, "heads", 3)
        for w in windows:  # enough for levels in the store
            _micro_batch(_open(cls, store, w), oracles[w], [str(i % 3) for i in range(40)])

        def unavailable(ranges):
            raise stores.StoreUnavailable("the store went away for the heads")

        monkeypatch.setattr(store, "read_ranges", unavailable)
        _through_a_batch(cls, store, windows, oracles, "xy")
        _all_resume(cls, store_url, windows, oracles)
    finally:
        store.close()


def _waiting_in_a_batch(store, prefix: str, count: int) -> tuple:
    """``count`` warmed windows (:func:`_warmed`) opened with one batch,
    each pushed two values and checkpointed into it: ``(windows, oracles
    (holding the pushes), batch, engines, oracles as last committed)``."""
    windows, oracles = _warmed(AmortizedMTA, store, prefix, count)
    batch = stores.Batch(store)
    engines = [_open(AmortizedMTA, store, w, batch=batch) for w in windows]
    committed = {w: _copy(oracles[w]) for w in windows}
    for w, e in zip(windows, engines):
        for v in "pq":
            assert e.push((v,)) == oracles[w].push((v,))
        e.checkpoint()
    return windows, oracles, batch, engines, committed


def test_a_commit_that_fails_leaves_its_windows_unsure(persistent_url, monkeypatch):  # noqa: F811
    """A commit whose round trip fails (the file store and standalone
    Redis, where a batch defers): the failure is raised after every window is dealt with; the
    windows of that round trip take no more checkpoints (whether theirs
    was written is unknown) and open again from whatever their record
    holds."""
    store = _store(persistent_url)
    try:
        windows, oracles, batch, engines, committed = _waiting_in_a_batch(store, "unsure", 2)

        def broken(requests, **options):
            raise stores.StoreError("the connection broke mid-commit")

        monkeypatch.setattr(store, "swap_meta_many", broken)
        with pytest.raises(stores.StoreError, match="broke mid-commit"):
            batch.commit()
        monkeypatch.undo()
        assert batch.waiting == 0
        with pytest.raises(stores.StoreError, match="is unknown"):
            engines[0].checkpoint()
        for e in engines:
            e.close()
        for w in windows:  # nothing was written: each resumes its last committed checkpoint
            _resumes(AmortizedMTA, persistent_url, w, committed[w])
    finally:
        store.close()


@pytest.mark.parametrize("landed", [False, True])
def test_an_interrupted_commit_leaves_every_window_unsure(persistent_url, monkeypatch, landed):  # noqa: F811
    """An interrupt (``KeyboardInterrupt``, not an ``Exception``) out of the
    first of a commit's two round trips, before or after the store wrote its
    records: it is raised at once, and every window of both is left unsure
    (no more checkpoints, whose refusal says why, never a fencing error
    against the window's own claim) and opens again from its record."""
    monkeypatch.setattr(stores.batch, "CHUNK", 2)
    store = _store(persistent_url)
    try:
        windows, oracles, batch, engines, committed = _waiting_in_a_batch(store, "interrupted", 4)
        real = store.swap_meta_many

        def interrupted(requests, **options):
            if landed:
                real(requests, **options)
            raise KeyboardInterrupt

        store.swap_meta_many = interrupted
        with pytest.raises(KeyboardInterrupt):
            batch.commit()
        store.swap_meta_many = real
        assert batch.waiting == 0
        for e in engines:
            with pytest.raises(stores.StoreError, match="is unknown"):
                e.checkpoint()
            e.close()
        for i, w in enumerate(windows):  # the first round trip's records landed or not; the second never went
            _resumes(AmortizedMTA, persistent_url, w, oracles[w] if landed and i < 2 else committed[w])
    finally:
        store.close()


@pytest.mark.parametrize("landed", [False, True])
@pytest.mark.parametrize("error", [KeyboardInterrupt, stores.StoreError])
def test_a_checkpoint_whose_write_fails_leaves_its_window_unsure(store_url, landed, error):  # noqa: F811
    """Without a batch: a checkpoint whose write fails (a store error past
    its retries, or an interrupt), before or after the store wrote it,
    leaves its window unsure, as a batch's failed commit does: the next
    checkpoint is refused saying so (never a fencing error against the
    window's own claim), and the window opens again from its record."""
    store = _store(store_url)
    try:
        (w,), oracles = _warmed(AmortizedMTA, store, "alone", 1)
        committed = _copy(oracles[w])
        e = _open(AmortizedMTA, store, w)
        for v in "pq":
            assert e.push((v,)) == oracles[w].push((v,))
        real = store.cas_meta_epochs

        def failing(*args, **options):
            if landed:
                real(*args, **options)
            raise error("the reply was lost")

        store.cas_meta_epochs = failing
        with pytest.raises(error, match="the reply was lost"):
            e.checkpoint()
        store.cas_meta_epochs = real
        with pytest.raises(stores.StoreError, match="is unknown"):
            e.checkpoint()
        e.close()
        _resumes(AmortizedMTA, store_url, w, oracles[w] if landed else committed)
    finally:
        store.close()


@pytest.mark.parametrize("stage", ["read_meta_many", "swap_meta_many", "claiming"])
def test_an_interrupted_claim_ahead_claims_each_window_at_its_opening(persistent_url, stage,  # noqa: F811
                                                                      monkeypatch):
    """An interrupt out of the round trip that claims expected windows
    ahead (the stores that pipeline windows), or out of building the second
    window's claim: none of them is left looking claimed; each opened
    afterwards is claimed then, resumes its checkpoint and checkpoints on."""
    store = _store(persistent_url)
    assert store.pipelines_windows
    try:
        windows, oracles = _warmed(AmortizedMTA, store, "claim-interrupted", 3)
        cache_of(store)._current = 0.0 if stage == "read_meta_many" else 1.0  # claims read, or swap, first
        batch = stores.Batch(store)
        batch.expect(windows)
        if stage == "claiming":
            from stores.window import WindowStorage

            real_claiming, built = WindowStorage.claiming, []

            def claiming(self, *args):
                built.append(self)
                if len(built) == 2:
                    raise KeyboardInterrupt
                return real_claiming(self, *args)

            monkeypatch.setattr(WindowStorage, "claiming", claiming)
        else:
            monkeypatch.setattr(store, stage, lambda *args, **options: (_ for _ in ()).throw(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            _open(AmortizedMTA, store, windows[0], batch=batch)
        monkeypatch.undo()
        for w in windows:
            e = _open(AmortizedMTA, store, w, batch=batch)
            assert len(e) == len(oracles[w].items) and e.query() == oracles[w].query()
            _micro_batch(e, oracles[w], "r")
        batch.commit()
        _all_resume(AmortizedMTA, persistent_url, windows, oracles)
    finally:
        store.close()


def test_a_delete_whose_commit_fails_still_lets_go_of_the_levels(persistent_url, monkeypatch):  # noqa: F811
    """Deleting a window whose checkpoint waits commits the batch first;
    when that fails, the window is closed without being deleted, raises
    the commit's error, and still lets go of its levels (a level refers to
    its storage: a cycle a task would leave per key)."""
    store = _store(persistent_url)
    try:
        (window,), _ = _warmed(AmortizedMTA, store, "undeleted", 1)
        batch = stores.Batch(store)
        e = _open(AmortizedMTA, store, window, batch=batch)
        e.push(("p",))
        e.checkpoint()
        monkeypatch.setattr(store, "swap_meta_many", lambda requests, **options: 1 / 0)
        storage = e._storage
        with pytest.raises(ZeroDivisionError):
            e.close(delete=True)
        monkeypatch.undo()
        assert storage._queues == [] and storage.levels is None
        assert store.read_meta(window)[0] is not None  # not deleted
    finally:
        store.close()


def _stored_groups(store, window, levels: int = 8, groups: int = 24) -> list:
    """Which groups of pairs ``window`` holds in the store: per epoch (in
    order, numbered from 0) and level, the indices of the groups present."""
    out = []
    for n, epoch in enumerate(sorted(store.list_epochs(window))):
        for level in range(levels):
            blobs = store.read_pairs(window, epoch, level, 0, groups)
            present = [g for g, blob in enumerate(blobs) if blob is not None]
            if present:
                out.append((n, level, present))
    return out


def _counting_deletions(store, monkeypatch) -> list:
    """A list that gets, per call of the store's deletion hooks (a round
    trip each), the hook's name."""
    calls = []
    for hook in ("_delete_pairs", "_delete_ranges"):
        real = getattr(store, hook)
        monkeypatch.setattr(store, hook, lambda *a, _real=real, _hook=hook: (calls.append(_hook), _real(*a))[1])
    return calls


@pytest.mark.parametrize("cls", ENGINES)
def test_a_commit_deletes_what_each_clean_up_deletes_alone(cls, store_url, monkeypatch):  # noqa: F811
    """Three windows through a batch and three twins without, the same
    values in six micro-batches of 40 (enough for clean-ups to delete
    groups of pairs): the store holds the same groups of each twin (the
    clean-up alone is the oracle), each resumes exactly, and on standalone
    Redis each commit deletes its windows' groups in at most one round
    trip, which it took at least once."""
    store = _store(store_url)
    try:
        batched, alone = [fresh_window("cleaned") for _ in range(3)], [fresh_window("alone") for _ in range(3)]
        oracles = {w: _oracle() for w in batched + alone}
        calls = _counting_deletions(store, monkeypatch)
        per_commit = []
        for step in range(6):
            values = [str((step + i) % 3) for i in range(40)]
            for w in alone:
                _micro_batch(_open(cls, store, w), oracles[w], values)
            del calls[:]
            _through_a_batch(cls, store, batched, oracles, values)
            per_commit.append(list(calls))
        settle_background()
        for b, a in zip(batched, alone):
            assert _stored_groups(store, b) == _stored_groups(store, a)
        assert any(_stored_groups(store, a) for a in alone)
        if stores.Batch(store).defers:
            assert all(len(c) <= 1 for c in per_commit), per_commit
            assert ["_delete_ranges"] in per_commit, per_commit
        _all_resume(cls, store_url, batched + alone, oracles)
    finally:
        store.close()


@pytest.mark.parametrize("error", [stores.StoreError, KeyboardInterrupt])
def test_a_commit_whose_deletions_fail_leaves_them_to_the_next_clean_up(persistent_url, monkeypatch,  # noqa: F811
                                                                          error):
    """A commit (the file store, standalone Redis) whose deletions fail (a
    store error, or an interrupt) raises after its checkpoints were
    written; its windows keep their clean-up marks, so that the next
    micro-batch's clean-up deletes those groups: the store then holds what
    twins that never failed hold, and the windows' counters (summed over
    their openings) count the pairs deleted as the twins' do, once."""
    store = _store(persistent_url)
    try:
        batched, alone = [fresh_window("retried") for _ in range(2)], [fresh_window("twin") for _ in range(2)]
        oracles = {w: _oracle() for w in batched + alone}
        counted = []  # (window, its counters) per opening, read once every commit has finished

        def opened(w, **options):
            e = _open(AmortizedMTA, store, w, **options)
            counted.append((w, e.store_stats))
            return e

        def broken(*request):
            raise error("the deletions broke")

        failed = None
        for step in range(8):
            values = [str((step + i) % 3) for i in range(40)]
            for w in alone:
                _micro_batch(opened(w), oracles[w], values)
            if failed is None:  # until a commit has deletions to make
                monkeypatch.setattr(store, "_delete_ranges", broken)
                monkeypatch.setattr(store, "_delete_pairs", broken)
            batch = stores.Batch(store)
            batch.expect(batched)
            try:
                for w in batched:
                    _micro_batch(opened(w, batch=batch), oracles[w], values)
                batch.commit()
            except error as exc:
                assert "deletions broke" in str(exc)
                failed = step
            monkeypatch.undo()
        assert failed is not None and failed < 7  # micro-batches with deletions to make followed it
        settle_background()
        for b, a in zip(batched, alone):
            assert _stored_groups(store, b) == _stored_groups(store, a)
        deleted = {w: sum(c.pairs_deleted for v, c in counted if v == w) for w in batched + alone}
        for b, a in zip(batched, alone):
            assert deleted[b] == deleted[a] > 0
        _all_resume(AmortizedMTA, persistent_url, batched + alone, oracles)
    finally:
        store.close()

"""The engine property suite on store-backed level queues.

Both MTA engines keep their levels in every available store -- ``memory://``,
the SQLite file store (``tmp_path``) and the real Redis fixture -- with
``buffer_size``, ``cache_size`` and ``group_size`` (pairs per stored value,
fixed when the window is created) drawn from 1..4 pairs, so nearly every
pair travels through the store (written by a flush, read back by a cache
miss or a prefetch), with background I/O on and off.  Random interleavings
of insert, evict, enforce, push and query (:func:`tests.strategies.operations`)
are cut into segments separated by store operations:

* ``checkpoint`` -- the returned version is the next one, and the oracle's
  contents at that point are remembered;
* ``resume`` -- a new engine object (on a new store object) resumes the newest
  checkpoint; the oracle goes back to that checkpoint's contents.  The
  old engine is abandoned, or first keeps working as a *zombie* (pushes,
  then a checkpoint that must raise FencingError) -- its writes must never
  show in what the new owner reads;
* ``resume_old`` -- a new engine resumes an older *retained* checkpoint
  (``resume=v``): the newest ``retain`` ones and the checkpoint each of them
  started from (stores/window.py);
* ``restart_empty`` -- a new engine with ``resume=False``.

Every result is compared with :class:`tests.oracle.BruteForceWindow`; at the
end the engine is drained against the oracle, and a fresh engine resumes the
newest and then every retained checkpoint, each compared with the oracle's
contents at that checkpoint (and drained).  Monoids: CONCAT (the exact,
ordered window contents; ``()`` values equal to the identity are ordinary
elements) with the count / sum / time WSPs of :func:`tests.strategies.concat_wsps`,
and CONCAT next to the library's own Count and TimeRange policies (times
non-decreasing).

Also here: process memory (``local_size``) bounded by levels x (buffer +
cache) whatever the window length, and round trips per update with the
default-sized buffer and cache.
"""

from __future__ import annotations

import gc
import random
from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stores
from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA
from mta.monoid import product_monoid
from mta.policies import COUNT_MONOID, AllOf, AnyOf, Count, TimeRange
from stores import codec
from stores.level_queue import MISS_BATCH
from stores.meta_cache import cache_of
from tests.oracle import CONCAT, BruteForceWindow
from tests.store_fixtures import fresh_window, persistent_url, settle_background, store_url  # noqa: F401  (fixtures)
from tests.strategies import (AFFINE, CONCAT_SPEC, NEVER, PrefixOracle, Wsp, apply_operation, drain_against_oracle,
                              operations, sane_settings)
from tests.test_engines import churn_both, insert_both

ENGINES = [pytest.param(LogMTA, id="LogMTA"), pytest.param(AmortizedMTA, id="AmortizedMTA")]

# ---------------------------------------------------------------------------
# strategies

sizes = st.integers(1, 4)
storage_options = st.fixed_dictionaries(
    {"buffer_size": sizes, "cache_size": sizes, "group_size": sizes, "background": st.booleans(),
     "retain": st.integers(1, 3)}
)
store_ops = st.one_of(
    st.just(("none",)),
    st.just(("checkpoint",)),
    st.just(("checkpoint",)),
    st.tuples(st.just("resume"), storage_options, st.booleans()),
    st.tuples(st.just("resume_old"), st.integers(0, 6), storage_options, st.booleans()),
    st.tuples(st.just("restart_empty"), storage_options),
)


def segments(raws) -> st.SearchStrategy:
    """``[(engine operations, store operation), ...]``: at most 8 store
    operations (the file store fsyncs on every checkpoint and every open)."""
    return st.lists(st.tuples(operations(raws, max_ops=8, max_run=16), store_ops), min_size=1, max_size=8)


def _fst(raw):
    return raw[0]


_count = st.integers(1, 8).map(Count)
_time = st.integers(1, 10).map(lambda r: TimeRange(r, time=_fst))
_base = st.one_of(_count, _time)
policies = st.one_of(_base, _base, st.builds(AnyOf, _base, _base), st.builds(AllOf, _base, _base))
#: ``(dt, value)``: times are the running sum of the dt's (non-decreasing).
TIMED_RAWS = st.tuples(st.integers(0, 3), st.integers(0, 5))


# ---------------------------------------------------------------------------
# one window across engine objects, against the oracle


class StoreRun:
    """A window in a store, its current engine and the oracle, plus what the
    checkpoints committed so far hold."""

    def __init__(self, cls: type, monoid, wsp, url: str, make: Callable[[Any, int], Any],
                 process: str = "cold") -> None:
        self.cls, self.monoid, self.wsp, self.url, self.make = cls, monoid, wsp, url, make
        self.warm = process == "warm"  # every engine on one store object: claims through its memory of the record
        self.window = fresh_window("prop")
        self.oracle = BruteForceWindow(monoid, wsp)
        self.opened: list = []  # every store object, closed by close()
        self.snapshots: dict[int, list] = {}  # version -> oracle contents
        self.retained: list[tuple[int, int | None]] = []  # (version, parent) still resumable
        self.version = 0  # newest committed version
        self.parent: int | None = None  # the checkpoint the current engine started from
        self.retain = 2
        self.counter = 0
        self.engine = None
        self.zombie_value = 0

    # -- engines ----------------------------------------------------------
    def open(self, resume, options: dict):
        if not (self.warm and self.opened):
            self.opened.append(stores.open_store(self.url))
        store = self.opened[-1]
        engine = self.cls(self.monoid, self.wsp, store=store, window_id=self.window, resume=resume, **options)
        self.retain = options.get("retain", 2)
        return engine

    def start(self, options: dict) -> None:
        self.engine = self.open(True, options)
        assert len(self.engine) == 0 and self.engine.query() == self.monoid.identity

    def switch(self, resume, options: dict, zombie: bool) -> None:
        """A new engine object takes the window over; the old one is
        abandoned, or keeps working as a stale owner first."""
        old = self.engine
        if resume is False:
            target = None
        elif resume is True:
            target = self.version if self.version else None
        else:
            target = resume
        self.engine = self.open(resume, options)
        self.parent = target
        self.oracle.items = list(self.snapshots[target]) if target else []
        self.check_state("after resume")
        if zombie:
            self.zombie(old)

    def zombie(self, old) -> None:
        """The former owner pushes (its flushes land in its own epoch) and
        fails to checkpoint; the new owner must not notice anything."""
        for _ in range(5):
            self.zombie_value += 1
            old.push(self.value_of_zombie())
        with pytest.raises(stores.FencingError) as info:
            old.checkpoint()
        assert repr(self.window) in str(info.value)
        self.check_state("after a zombie's writes")

    def value_of_zombie(self):
        # values no other part of the test inserts
        raw = (99, self.zombie_value)
        return self.make(raw, -1)

    def checkpoint(self) -> None:
        v = self.engine.checkpoint()
        assert v == self.version + 1, (v, self.version)
        self.version = v
        self.snapshots[v] = list(self.oracle.items)
        # stores/window.py: the newest `retain` checkpoints stay resumable,
        # with the checkpoint each of them started from
        everything = self.retained + [(v, self.parent)]
        newest = everything[-self.retain :]
        keep = {c for c, _ in newest} | {p for _, p in newest}
        self.retained = [c for c in everything if c[0] in keep]
        self.parent = v

    def retained_versions(self) -> list[int]:
        return sorted(v for v, _ in self.retained)

    # -- operations -------------------------------------------------------
    def value(self, raw):
        self.counter += 1
        return self.make(raw, self.counter)

    def apply(self, op, where: str) -> None:
        apply_operation(self.engine, self.oracle, op, self.value, where)
        assert len(self.engine) == len(self.oracle), where

    def store_op(self, op, where: str) -> None:
        kind = op[0]
        if kind == "checkpoint":
            self.checkpoint()
        elif kind == "resume":
            self.switch(True, op[1], op[2])
        elif kind == "resume_old":
            versions = self.retained_versions()
            if versions:
                self.switch(versions[op[1] % len(versions)], op[2], op[3])
        elif kind == "restart_empty":
            self.switch(False, op[1], False)
        self.check_state(where)

    def check_state(self, where: str) -> None:
        assert len(self.engine) == len(self.oracle), where
        assert self.engine.query() == self.oracle.query(), where

    # -- the end ----------------------------------------------------------
    def finish(self) -> None:
        """Drain the live engine; then resume the newest and every retained
        checkpoint in a new engine object and drain it against the oracle's
        contents at that checkpoint."""
        drain_against_oracle(self.engine, self.oracle)
        if not self.version:
            return
        for target in [True] + self.retained_versions():
            options = {"buffer_size": 2, "cache_size": 1, "background": target is True}
            e = self.open(target, options)
            v = self.version if target is True else target
            o = BruteForceWindow(self.monoid, self.wsp)
            o.items = list(self.snapshots[v])
            assert len(e) == len(o), f"resume={target!r}"
            assert e.query() == o.query(), f"resume={target!r}"
            assert e.enforce() == o.enforce()
            drain_against_oracle(e, o)
        with pytest.raises(stores.StoreError, match="checkpoint"):
            self.open(self.version + 1, {})  # never committed

    def close(self) -> None:
        settle_background()  # abandoned engines may still be flushing
        for s in self.opened:
            s.close()


def run_segments(run: StoreRun, options: dict, segs) -> None:
    run.start(options)
    try:
        for n, (ops, store_op) in enumerate(segs):
            for step, op in enumerate(ops):
                run.apply(op, f"segment {n} step {step} {op!r}")
            run.store_op(store_op, f"segment {n} {store_op!r}")
        run.finish()
    finally:
        run.close()


#: Where each new engine object runs: a process of its own (a store object of
#: its own), or the process that checkpointed the window (one store object:
#: claims through its memory of the record, levels' heads from the caches
#: the checkpoint left, stores.meta_cache).
PROCESSES = ["cold", "warm"]


@pytest.mark.parametrize("process", PROCESSES)
@pytest.mark.parametrize("cls", ENGINES)
@sane_settings(50)
@given(data=st.data())
def test_concat_random_operations_on_store(cls, process, store_url, data):  # noqa: F811
    """CONCAT with count / sum / time WSPs; identity values included."""
    spec = CONCAT_SPEC
    wsp = data.draw(spec.wsps, label="wsp")
    options = data.draw(storage_options, label="options")
    segs = data.draw(segments(spec.raws), label="segments")
    run_segments(StoreRun(cls, spec.monoid, wsp, store_url, spec.make, process), options, segs)


@pytest.mark.parametrize("cls", ENGINES)
@sane_settings(25)
@given(data=st.data())
def test_ready_policies_on_store(cls, store_url, data):  # noqa: F811
    """CONCAT of ``(time, value)`` raws next to Count / TimeRange policies
    (and their AnyOf / AllOf); a value 0 lifts to CONCAT's identity ``()``."""
    policy = data.draw(policies, label="policy")
    options = data.draw(storage_options, label="options")
    segs = data.draw(segments(TIMED_RAWS), label="segments")
    monoid = product_monoid([CONCAT, policy.monoid])
    clock = [0]

    def make(raw, i):
        if i < 0:  # a zombie's value: a value no raw has, at the current time
            raw = (0, 100 + raw[1])
        clock[0] += raw[0]
        timed = (clock[0], raw[1])
        return (() if raw[1] == 0 else (timed,), policy.lift(timed))

    def wsp(total, prefix):
        return policy.holds(total[1], prefix[1])

    run_segments(StoreRun(cls, monoid, wsp, store_url, make), options, segs)


@pytest.mark.parametrize("process", PROCESSES)
@pytest.mark.parametrize("cls", ENGINES)
@sane_settings(12)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(100, 600),
    keep=st.integers(0, 200),
    options=storage_options,
)
def test_long_windows_on_store(cls, process, store_url, seed, n, keep, options):  # noqa: F811
    """Deeper trees than the operation lists reach (as test_engines'
    test_long_windows): hundreds of elements, bulk evictions of whole
    subtrees whose heads were rewritten while their pairs sat in the store,
    single evictions; after each phase a checkpoint, and a new engine object
    resumes it (sometimes the one before), against an O(n) oracle over
    AFFINE x count (an O(1), non-commutative monoid)."""
    rng = random.Random(seed)
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    wsp = _keep(keep)
    window = fresh_window("long")
    opened = [stores.open_store(store_url)]

    def engine(resume):
        if process == "cold":
            opened.append(stores.open_store(store_url))
        return cls(monoid, wsp, store=opened[-1], window_id=window, resume=resume, **options)

    def value():
        return monoid.identity if rng.random() < 0.05 else _element(rng)

    e, o = engine(True), PrefixOracle(monoid, wsp)
    snapshots = {}
    parent = None  # the checkpoint the current engine started from
    try:
        insert_both(e, o, value, n)
        for phase in range(5):
            assert e.enforce() == o.enforce(), phase
            assert len(e) == len(o) and e.query() == o.query(), phase
            churn_both(e, o, value, rng, keep)
            assert len(e) == len(o) and e.query() == o.query(), phase
            v = e.checkpoint()
            snapshots[v] = list(o.items)
            # the newest checkpoint and the one it started from are retained
            back = parent if parent and rng.random() < 0.3 else v
            e, parent = engine(back), back
            o.items = list(snapshots[back])
            assert len(e) == len(o) and e.query() == o.query(), (phase, back)
        drain_against_oracle(e, o)
    finally:
        settle_background()
        for s in opened:
            s.close()


# ---------------------------------------------------------------------------
# an older retained checkpoint, explicitly


@pytest.mark.parametrize("cls", ENGINES)
def test_resume_older_retained_checkpoints(cls, store_url):  # noqa: F811
    """Checkpoints 1..5 with retain=3: 3, 4 and 5 resume exactly (each equal
    to the oracle at that point), and so does 2 (the checkpoint 3 started
    from); 1 is gone with a clear StoreError.  Resuming 3 and checkpointing
    6 keeps 3 (6 started from it) while older ones go."""
    window = fresh_window("old")
    keep = 9

    def wsp(t, p):
        return len(t) - len(p) >= keep

    store = stores.open_store(store_url)
    opts = dict(store=store, window_id=window, buffer_size=1, cache_size=1, retain=3)
    e, o = cls(CONCAT, wsp, **opts), BruteForceWindow(CONCAT, wsp)
    snapshots = {}
    i = 0
    for v in range(1, 6):
        for _ in range(7 * v):
            i += 1
            assert e.push((i,)) == o.push((i,))
        assert e.checkpoint() == v
        snapshots[v] = list(o.items)
    for v in (2, 3, 4, 5):
        r = cls(CONCAT, wsp, resume=v, **opts)
        ro = BruteForceWindow(CONCAT, wsp)
        ro.items = list(snapshots[v])
        assert len(r) == len(ro) and r.query() == ro.query(), v
    for v in (1,):
        with pytest.raises(stores.StoreError, match=rf"checkpoint {v} is not retained"):
            cls(CONCAT, wsp, resume=v, **opts)
    # resume 3, go on, checkpoint 6 (started from 3): 3 stays resumable
    r = cls(CONCAT, wsp, resume=3, **opts)
    ro = BruteForceWindow(CONCAT, wsp)
    ro.items = list(snapshots[3])
    for j in range(1000, 1020):
        assert r.push((j,)) == ro.push((j,))
    assert r.checkpoint() == 6
    snapshots[6] = list(ro.items)
    # retained now: 5, 6 (the newest 3 are 4, 5, 6) and their parents 4, 3
    for v in (3, 4, 5, 6, True):
        again = cls(CONCAT, wsp, resume=v, **opts)
        want = snapshots[6 if v is True else v]
        assert again.query() == tuple(x for t in want for x in t), v
        assert len(again) == len(want)
    for v in (1, 2):
        with pytest.raises(stores.StoreError, match=rf"checkpoint {v} is not retained"):
            cls(CONCAT, wsp, resume=v, **opts)
    store.close()


# ---------------------------------------------------------------------------
# process memory and round trips


def _element(rng: random.Random):
    return ((rng.randrange(1, 1 << 61), rng.randrange(1 << 61)), 1)


def _keep(n: int) -> Wsp:
    return Wsp(f"keep {n}", lambda t, p: t[1] - p[1] >= n)


def _local_bound(height: int, buffer_size: int, cache_size: int) -> int:
    """Elements a store-backed level may hold: its tail and write buffer (one
    batch in flight and the next filling: 2 x buffer pairs), its cache (the
    cache, a prefetch of cache_size pairs and a miss batch), plus the
    engine's O(levels) state."""
    per_level = 2 * (2 * buffer_size) + 2 * (2 * cache_size) + 2 * MISS_BATCH + 4
    return height * (per_level + 4) + 16


def _fill_and_slide(engine, n: int, seed: int, slide: int, samples: int = 64) -> tuple[int, int]:
    """Push n + slide elements through a count window of n; returns (max
    sampled local_size, final local_size); checks the last query against an
    oracle of the last n elements."""
    rng = random.Random(seed)
    monoid = engine.monoid
    tail = []
    biggest = 0
    every = max(1, (n + slide) // samples)
    for k in range(n + slide):
        v = _element(rng)
        engine.push(v)
        tail.append(v)
        if k % every == 0:
            biggest = max(biggest, engine.local_size())
    tail = tail[-n:]
    want = monoid.identity
    for v in tail:
        want = monoid.combine(want, v)
    assert len(engine) == n and engine.query() == want
    return max(biggest, engine.local_size()), engine.local_size()


@pytest.mark.parametrize("url_kind", ["memory", "file"])
@pytest.mark.parametrize("cls", ENGINES)
def test_local_size_does_not_grow_with_the_window(cls, url_kind, tmp_path):
    """buffer 8, cache 8: windows of 2**10 and 2**16 elements hold about the
    same number of elements in process memory (the bound grows with the
    number of levels only), far below n; the in-memory engine holds >= n."""
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    url = "memory://" if url_kind == "memory" else f"file://{tmp_path}"
    big = 1 << 16 if cls is AmortizedMTA else 1 << 14  # LogMTA: O(log n) per push
    results = {}
    for n in (1 << 10, big):
        store = stores.open_store(url)
        e = cls(monoid, _keep(n), store=store, window_id=f"local-{n}", buffer_size=8, cache_size=8)
        peak, final = _fill_and_slide(e, n, seed=n, slide=max(n // 4, 1024))
        bound = _local_bound(e.height(), 8, 8)
        assert peak <= bound, (n, peak, bound, e.height())
        assert final <= bound, (n, final, bound)
        results[n] = (peak, final, e.height())
        store.close()
    (p1, _, h1), (p2, _, h2) = results[1 << 10], results[big]
    # growth from 2**10 to `big` is the log factor (levels), not n
    assert p2 <= p1 * h2 / h1 * 1.5 + 64, results
    assert p2 < big / 20, results
    mem = cls(monoid, _keep(big))
    _, mem_final = _fill_and_slide(mem, big, seed=big, slide=0, samples=4)
    assert mem_final >= big, mem_final  # the in-memory engine is linear
    print(f"{cls.__name__} {url_kind}: (peak, final, levels) {results}; in memory {mem_final}")


@pytest.mark.parametrize("url_kind", ["memory", "file", "redis"])
@pytest.mark.parametrize("cls", ENGINES)
def test_round_trips_per_update(cls, url_kind, tmp_path, request):
    """buffer = cache = 512 pairs (the defaults), a constant window of 4096:
    after warm-up, at most one round trip per 100 pushes."""
    if url_kind == "redis":
        url = request.getfixturevalue("redis_url")
    else:
        url = "memory://" if url_kind == "memory" else f"file://{tmp_path}"
    n, warm, measured = 4096, 3 * 4096, 20_000
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    store = stores.open_store(url)
    e = cls(monoid, _keep(n), store=store, window_id=fresh_window("trips"), buffer_size=512, cache_size=512)
    o = PrefixOracle(monoid, None)
    rng = random.Random(7)
    for _ in range(warm):
        e.push(_element(rng))
    before = e.store_stats.round_trips
    last = []
    for k in range(measured):
        v = _element(rng)
        e.push(v)
        if k >= measured - n:
            last.append(v)
    trips = e.store_stats.round_trips - before
    assert trips <= measured / 100, (trips, measured, e.store_stats)
    o.items = last
    assert len(e) == n and e.query() == o.query()
    assert e.store_stats.pairs_written > 0  # the store was used
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_closed_window_is_freed_without_the_garbage_collector(cls, tmp_path):
    """A task opens and closes a window per key: once closed and dropped,
    the engine, its storage and its levels are freed by reference counting
    alone (no cycle left for the collector), and its counters stay
    readable after close."""
    import gc
    import weakref

    store = stores.open_store(f"file://{tmp_path}")
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    rng = random.Random(3)
    gc.collect()
    gc.disable()
    try:
        refs = []
        for k in range(5):
            e = cls(monoid, _keep(64), store=store, window_id=fresh_window(f"freed-{k}"), buffer_size=4, cache_size=4)
            for _ in range(300):
                e.push(_element(rng))
            e.checkpoint()
            e.close()
            assert e.store_stats.pairs_written > 0
            refs += [weakref.ref(e), weakref.ref(e._storage)]
            del e
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()
        store.close()


def _resumed_full_windows(cls, opts: dict, seed: int, opened: Callable[[], None] = lambda: None):
    """A full window (4096 elements) checkpointed, then resumed six times
    for two pushes each, as a streaming key is in each micro-batch (after
    ``opened()``); yields each resumed engine once checked against the
    oracle, checkpointed and closed (its store_stats count its open), with
    its height."""
    n = 4096
    monoid = product_monoid([AFFINE, COUNT_MONOID])
    rng = random.Random(seed)
    e = cls(monoid, _keep(n), **opts)
    pushed = [_element(rng) for _ in range(n + 100)]
    for v in pushed:
        e.push(v)
    version = e.checkpoint()
    e.close()
    for _ in range(6):
        opened()
        r = cls(monoid, _keep(n), resume=version, **opts)
        for _ in range(2):
            pushed.append(_element(rng))
            r.push(pushed[-1])
        want = monoid.identity
        for v in pushed[-n:]:
            want = monoid.combine(want, v)
        assert len(r) == n and r.query() == want
        version = r.checkpoint()
        height = r.height()
        r.close()  # waits for the reads in flight, which count
        yield r, height


@pytest.mark.parametrize("url_kind", ["memory", "file"])
@pytest.mark.parametrize("cls", ENGINES)
def test_a_resumed_window_reads_ahead_only_as_far_as_it_goes(cls, url_kind, tmp_path):
    """A full window resumed for two pushes at a time
    (:func:`_resumed_full_windows`): an open reads at most two short reads
    per level (its first miss's, then a read-ahead that starts at
    MISS_BATCH pairs; each rounded up to whole groups), far from the 512
    pairs per level a cache refill would read; a long run's read-ahead
    grows back to the cache size (test_round_trips_per_update)."""
    url = "memory://" if url_kind == "memory" else f"file://{tmp_path}"
    store = stores.open_store(url)
    opts = dict(store=store, window_id=fresh_window("resumed"), buffer_size=512, cache_size=512)
    for r, height in _resumed_full_windows(cls, opts, 11):
        group = r._storage.group
        read = r.store_stats.pairs_read
        assert read <= height * 2 * (MISS_BATCH + group), (read, height, group)
    store.close()


def _store_counting_reads(url_kind: str, tmp_path, request) -> tuple:
    """A store of ``url_kind`` and the list its reads of pairs made on this
    thread go to, as ``(method, ranges)`` (the engine's own reads: a
    background prefetch runs on another thread)."""
    import threading

    if url_kind == "redis":
        url = request.getfixturevalue("redis_url")
    else:
        url = "memory://" if url_kind == "memory" else f"file://{tmp_path}"
    store = stores.open_store(url)
    main, calls = threading.get_ident(), []
    for name in ("read_pairs", "read_pairs_many"):
        def counted(*args, _name=name, _read=getattr(store, name)):
            if threading.get_ident() == main:
                calls.append((_name, len(args[1]) if _name == "read_pairs_many" else 1))
            return _read(*args)
        setattr(store, name, counted)
    return store, calls


@pytest.mark.parametrize("url_kind", ["memory", "file", "redis"])
@pytest.mark.parametrize("cls", ENGINES)
def test_a_resumed_window_reads_its_levels_heads_in_one_round_trip(cls, url_kind, tmp_path, request):
    """A full window resumed for two pushes at a time
    (:func:`_resumed_full_windows`) in a process that does not remember
    its record (:mod:`stores.meta_cache`): the engine's reads on its own
    thread are one read of several levels' heads per open
    (Store.read_pairs_many), not a read per level."""
    store, calls = _store_counting_reads(url_kind, tmp_path, request)
    opts = dict(store=store, window_id=fresh_window("heads"), buffer_size=512, cache_size=512)
    ranges = []

    def opened():
        calls.clear()
        cache_of(store).forget(opts["window_id"])

    for _ in _resumed_full_windows(cls, opts, 13, opened=opened):
        assert [c for c in calls if c[0] == "read_pairs"] == [], calls
        assert len(calls) <= 1, calls
        ranges += [c[1] for c in calls]
    assert ranges and max(ranges) > 1, ranges  # the heads of several levels were read at once
    store.close()


@pytest.mark.parametrize("url_kind", ["memory", "file", "redis"])
@pytest.mark.parametrize("cls", ENGINES)
def test_a_window_resumed_where_it_was_checkpointed_reads_no_heads(cls, url_kind, tmp_path, request):
    """A full window resumed for two pushes at a time
    (:func:`_resumed_full_windows`, which checks every open against the
    oracle) by the process that checkpointed it: each open takes its
    levels' heads from the caches the checkpoint left
    (:func:`stores.head_cache.snapshot`), so no open reads any, while the
    same opens in a process that does not remember the record read them
    every time (the test above)."""
    store, reads = _store_counting_reads(url_kind, tmp_path, request)
    opts = dict(store=store, window_id=fresh_window("warm-heads"), buffer_size=512, cache_size=512)
    opens = 0
    for r, height in _resumed_full_windows(cls, opts, 17, opened=reads.clear):
        assert reads == []
        opens += 1
        heads = cache_of(store).get(opts["window_id"]).heads
        assert heads and len(heads) <= height
        if codec.PACKS_IN_C:  # kept untracked by the collector, as the rest of the record (test_meta_cache)
            assert not any(gc.is_tracked(part) for level in heads.values() for part in (level, level[1]))
    assert opens == 6
    store.close()


def test_a_background_read_keeps_the_epochs_it_was_started_with(tmp_path, monkeypatch):
    """A read of a level's pairs in the background (a prefetch) takes each
    pair's epoch from the level's owner segments as they were when it
    started, on the engine's thread: a checkpoint's clean-up may trim the
    segments while the read waits for the store.  Two owners wrote level 0
    (two segments); the read across both is held at its first round trip
    while the segments lose an entry, and still returns the pairs a read
    made alone returns."""
    import threading

    url = f"file://{tmp_path}"
    first_owner, second_owner = stores.open_store(url), stores.open_store(url)
    try:
        e = AmortizedMTA(CONCAT, NEVER, store=first_owner, window_id="w", buffer_size=2, cache_size=1)
        for i in range(40):
            e.push((str(i % 7),))
        e.checkpoint()
        e.close()
        settle_background()
        e = AmortizedMTA(CONCAT, NEVER, store=second_owner, window_id="w", buffer_size=2, cache_size=1)
        for i in range(40):
            e.push((str(i % 5),))
        e.checkpoint()
        storage = e._storage
        q = next(q for q in storage._queues if len(q.segments) > 1 and q.stored > q.segments[1][1])
        first, count = q.lo >> 1, q.stored - (q.lo >> 1)
        assert first < q.segments[1][1] < first + count  # the read crosses both owners' pairs
        alone = storage.read(q, first, count)
        held, release, real = threading.Event(), threading.Event(), second_owner.read_pairs

        def read_pairs(*request):
            held.set()
            assert release.wait(30)
            return real(*request)

        monkeypatch.setattr(second_owner, "read_pairs", read_pairs)
        pending = storage.start_read(q, first, count)
        assert held.wait(30)
        segments = [list(s) for s in q.segments]
        del q.segments[1:]  # a walk of the list while a clean-up trims it may miss an entry so
        release.set()
        got = pending.result()
        q.segments[:] = segments
        monkeypatch.undo()
        assert got == alone
        e.close()
        settle_background()
    finally:
        first_owner.close()
        second_owner.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_a_stale_owner_from_before_the_window_was_made_anew_is_fenced(cls, store_url):  # noqa: F811
    """The window is deleted (an expired key, gc) and made anew while a
    stale owner of its earlier life still runs; however many checkpoints
    the new window takes, the stale owner's checkpoint is refused (the
    record hands out no token of the earlier life) and the new window
    keeps its own contents."""
    store, window = stores.open_store(store_url), fresh_window("lives")
    newest_10 = lambda t, p: len(t) - len(p) >= 10  # noqa: E731

    def opened(resume):
        return cls(CONCAT, newest_10, store=store, window_id=window, resume=resume, buffer_size=2, cache_size=1)

    first = opened(False)
    for v in range(5):
        first.push((v,))
    first.checkpoint()
    first.close()
    stale = opened(True)
    stale_token = store.read_meta(window)[1]
    stale.push((99,))
    store.delete_window(window)
    new, oracle = opened(False), BruteForceWindow(CONCAT, newest_10)
    for v in range(100, 160):  # well past as many record updates as the earlier life saw
        assert new.push((v,)) == oracle.push((v,))
        new.checkpoint()
        if store.read_meta(window)[1] == stale_token:
            break  # a record reusing tokens: the stale owner's compare-and-set would match now
    with pytest.raises(stores.FencingError, match="made anew"):
        stale.checkpoint()
    new.close()
    again = opened(True)
    assert again.query() == oracle.query()
    again.close()
    settle_background()
    store.close()


@pytest.mark.parametrize("deleted_by", ["close", "delete_window"])
def test_a_window_made_anew_never_reads_pairs_of_its_earlier_life(deleted_by, persistent_url):  # noqa: F811
    """A stale engine of a window's earlier life keeps flushing groups after
    the window was deleted and made anew under its name: the new window
    resumes exactly its own checkpoint (its epochs start elsewhere, so those
    groups go to keys it never reads), and the stale checkpoint is refused."""
    from mta import Window, aggregators, policies

    store, window = stores.open_store(persistent_url), fresh_window("life")
    options = dict(store=store, window_id=window, buffer_size=16, cache_size=16)
    newest = policies.Count(150)
    stale = Window(aggregators.MAX, newest, resume=False, **options)
    owner = Window(aggregators.MAX, newest, **options)  # takes the first life over: `stale` is stale
    if deleted_by == "close":
        owner.close(delete=True)
    else:
        owner.close()
        store.delete_window(window)
    new, oracle = Window(aggregators.MAX, newest, resume=False, **options), Window(aggregators.MAX, newest)
    values = list(range(200, 0, -1))
    assert new.extend(values) == oracle.extend(values)
    new.checkpoint()
    new.close()
    stale.extend([10_000] * 200)  # full groups of the earlier life, flushed in the background
    with pytest.raises(stores.FencingError, match="made anew"):
        stale.checkpoint()
    stale.close()
    resumed = Window(aggregators.MAX, newest, **options)
    assert resumed.extend([0] * 150) == oracle.extend([0] * 150)
    resumed.close(delete=True)
    settle_background()
    store.close()


def test_a_stored_record_keeps_its_epochs(persistent_url):  # noqa: F811
    """A record already in the store (epochs counted from 1, as every record
    had before new ones started at a random epoch) is claimed one above its
    epoch and resumed as it is: only a new record starts elsewhere."""
    from mta import Window, aggregators, policies
    from stores.window_meta import new_meta

    store, window = stores.open_store(persistent_url), fresh_window("kept")
    store.cas_meta(window, None, codec.encode(dict(new_meta(3, 2), epochs=[1, 3])))
    w = Window(aggregators.SUM, policies.Count(10), store=store, window_id=window, buffer_size=2)
    assert w.engine._storage.epoch == 4 and len(w) == 0
    assert w.extend(range(20))[-1] == sum(range(10, 20)) and w.checkpoint() == 1
    w.close()
    again = Window(aggregators.SUM, policies.Count(10), store=store, window_id=window, buffer_size=2)
    assert again.engine._storage.epoch == 5 and again.extend([0])[-1] == sum(range(11, 20))
    fresh = Window(aggregators.SUM, policies.Count(10), store=store, window_id=fresh_window("new"))
    assert fresh.engine._storage.epoch > 5  # a new record: a random epoch, not 1
    again.close(delete=True)
    fresh.close(delete=True)
    settle_background()
    store.close()


@pytest.mark.parametrize("option, value, problem", [
    ("group_size", 0, "group_size must be a positive int, got 0"),
    ("group_size", -3, "group_size must be a positive int"),
    ("group_size", 2.0, "group_size must be a positive int"),
    ("retain", 0, "retain must be a positive int"),
    ("durable", "no", "durable must be True or False, got 'no'"),
    ("durable", 0, "durable must be True or False"),
    ("background", None, "background must be True or False"),
    ("resume", "yes", "resume must be True .*got 'yes'"),
    ("resume", -1, "resume must be True"),
])
def test_a_bad_window_option_is_refused_before_the_claim(option, value, problem):
    """An option of the wrong type or out of range is refused with a
    ValueError naming it, before the open claims the window: its owner
    keeps it (its checkpoint is not fenced)."""
    from mta import Window, aggregators, policies

    store, window = stores.open_store(f"memory://{fresh_window('opts')}"), fresh_window("opts")
    owner = Window(aggregators.MAX, policies.Count(100), store=store, window_id=window)
    owner.extend(range(10))
    owner.checkpoint()
    with pytest.raises(ValueError, match=problem):
        Window(aggregators.MAX, policies.Count(100), store=store, window_id=window, **{option: value})
    owner.push(11)
    assert owner.checkpoint() == 2  # still the owner
    owner.close(delete=True)

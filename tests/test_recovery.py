"""Crash, resume, fencing, garbage collection and faults of store-backed windows.

* Crash and resume: a child process builds a window on the file store and on
  Redis, checkpoints, keeps working (pushing, flushing more pairs under its
  epoch) and is SIGKILLed mid-work; a new engine in this process resumes the
  checkpoint exactly (same len, same query) and then behaves like an oracle
  that replayed the same deterministic stream up to the checkpoint.  Also
  killed at a random moment of a loop that checkpoints every few steps: the
  resumed window is exactly the last committed checkpoint.
* Fencing: two owners of one window (the older one's checkpoint raises
  FencingError naming the window and both epochs; its writes never reach
  what the newer owner or a third resumer reads), and two processes racing
  to open, push and checkpoint: every resumed state is one some writer
  committed, each version is committed once, and the final state is the
  newest commit.
* Garbage collection: a constant window over a long run keeps a number of
  pair keys proportional to its length, and the epochs of former owners
  disappear.
* Faults: a Redis restart without persistence (MissingData, never a wrong
  result), corrupt pair blobs (CorruptValue naming window, level and pair),
  unknown format version bytes (FormatVersionError), a store that is down
  (StoreUnavailable, fast, naming store and window), metadata of an
  incompatible format, and a window resumed by the other engine class.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import stores
from stores.window import group_place
from mta.amortized_mta import AmortizedMTA
from mta.errors import EngineFailedError
from mta.log_mta import LogMTA
from tests.conftest import free_port
from tests.oracle import CONCAT, BruteForceWindow
from tests.store_fixtures import (  # noqa: F401  (fixtures)
    backend_of,
    count_pair_keys,
    fresh_window,
    overwrite_pair,
    pair_keys,
    persistent_url,
    racing_writer,
    read_pair,
    settle_background,
    store_url,
)
from tests.strategies import PrefixOracle, drain_against_oracle

REPO = Path(__file__).resolve().parent.parent
ENGINES = [pytest.param(LogMTA, id="LogMTA"), pytest.param(AmortizedMTA, id="AmortizedMTA")]
CLASSES = {"LogMTA": LogMTA, "AmortizedMTA": AmortizedMTA}

# ---------------------------------------------------------------------------
# a deterministic stream, shared with the child processes (exec'd on both sides)

STREAM = textwrap.dedent(
    """
    from mta.monoid import product_monoid
    from mta.policies import COUNT_MONOID
    from tests.oracle import CONCAT

    #: CONCAT (the exact contents) next to a count; every 7th value is CONCAT's
    #: identity (), still counted.
    MONOID = product_monoid([CONCAT, COUNT_MONOID])
    KEEP = 40


    def wsp(total, prefix):
        return total[1] - prefix[1] >= KEEP


    def value(i):
        return ((), 1) if i % 7 == 3 else ((i,), 1)


    def step(engine, i):
        \"\"\"Operation i of the stream, on an engine or an oracle alike.\"\"\"
        if i % 11 == 5:
            engine.insert(value(i))
            return None
        if i % 13 == 7 and len(engine) > 0:
            engine.evict()
            return None
        if i % 17 == 9:
            return engine.enforce()
        return engine.push(value(i))
    """
)
S: dict = {}
exec(STREAM, S)

CHILD = STREAM + textwrap.dedent(
    """
    import os
    import sys

    import stores
    from mta.amortized_mta import AmortizedMTA
    from mta.log_mta import LogMTA

    url, window, engine_name, marker = sys.argv[1:5]
    start, first_checkpoint, every = map(int, sys.argv[5:8])
    cls = {"LogMTA": LogMTA, "AmortizedMTA": AmortizedMTA}[engine_name]
    store = stores.open_store(url)
    engine = cls(MONOID, wsp, store=store, window_id=window, buffer_size=2, cache_size=2)
    out = open(marker, "a")


    def report(line):
        out.write(line + "\\n")
        out.flush()
        os.fsync(out.fileno())


    report(f"opened {len(engine)}")
    i = start
    while True:
        step(engine, i)
        i += 1
        if i == first_checkpoint or (every and i > first_checkpoint and (i - first_checkpoint) % every == 0):
            version = engine.checkpoint()
            report(f"checkpoint {version} {i} {engine.store_stats.pairs_written}")
        elif i % 25 == 0:
            report(f"progress {i} {engine.store_stats.pairs_written}")
    """
)


def oracle_at(i: int) -> PrefixOracle:
    """The oracle after operations 0 .. i-1 of the stream."""
    o = PrefixOracle(S["MONOID"], S["wsp"])
    for k in range(i):
        S["step"](o, k)
    return o


class Child:
    """A child process running :data:`CHILD`; ``lines()`` reads its reports."""

    def __init__(self, tmp_path: Path, url: str, window: str, engine: str, start: int, first: int, every: int):
        self.marker = tmp_path / f"marker-{window}-{start}"
        self.marker.write_text("")
        script = tmp_path / "child.py"
        script.write_text(CHILD)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        args = [sys.executable, str(script), url, window, engine, str(self.marker), str(start), str(first), str(every)]
        self.proc = subprocess.Popen(args, cwd=REPO, env=env, stderr=subprocess.PIPE)

    def lines(self) -> list[list[str]]:
        complete = self.marker.read_text().split("\n")[:-1]  # the last one may be half-written
        return [line.split() for line in complete]

    def wait_for(self, predicate, timeout: float = 60.0) -> list[list[str]]:
        deadline = time.monotonic() + timeout
        while True:
            lines = self.lines()
            if predicate(lines):
                return lines
            if self.proc.poll() is not None:
                raise AssertionError(f"child exited with {self.proc.returncode}: {self.proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"child made no progress: {lines[-3:]}")
            time.sleep(0.01)

    def kill(self) -> list[list[str]]:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL
        self.proc.stderr.close()
        return self.lines()


def checkpoints_of(lines) -> list[tuple[int, int, int]]:
    """``(version, stream index, pairs written)`` of each reported checkpoint."""
    return [(int(v), int(i), int(w)) for kind, v, i, w in (l for l in lines if l[0] == "checkpoint")]


def progress_of(lines) -> list[tuple[int, int]]:
    return [(int(i), int(w)) for kind, i, w in (l for l in lines if l[0] == "progress")]


def continue_against_oracle(engine, oracle, start: int, steps: int) -> None:
    """Operations start .. start+steps-1 of the stream on both, compared."""
    for i in range(start, start + steps):
        assert S["step"](engine, i) == S["step"](oracle, i), i
        assert len(engine) == len(oracle), i
        if i % 5 == 0:
            assert engine.query() == oracle.query(), i


# ---------------------------------------------------------------------------
# crash and resume


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cls", ENGINES)
def test_killed_after_checkpoint_resumes_exactly(cls, persistent_url, tmp_path):  # noqa: F811
    """The child checkpoints at operation 150, then works on (flushing more
    pairs) until it is SIGKILLed; the parent resumes operation 150's state."""
    window = fresh_window("crash")
    child = Child(tmp_path, persistent_url, window, cls.__name__, start=0, first=150, every=0)

    def worked_on(lines):
        cps = checkpoints_of(lines)
        return cps and any(i >= 450 and w > cps[0][2] for i, w in progress_of(lines))

    child.wait_for(worked_on)
    lines = child.kill()
    [(version, at, written)] = checkpoints_of(lines)
    assert at == 150 and max(w for _, w in progress_of(lines)) > written  # it flushed more pairs after

    store = stores.open_store(persistent_url)
    keys_before = pair_keys(persistent_url, window)
    assert len({e for e, _, _ in keys_before}) == 1  # only the child's epoch, with post-checkpoint pairs
    engine = cls(S["MONOID"], S["wsp"], store=store, window_id=window, buffer_size=2, cache_size=2)
    oracle = oracle_at(at)
    assert len(engine) == len(oracle) and engine.query() == oracle.query()
    continue_against_oracle(engine, oracle, at, 300)
    assert engine.checkpoint() == version + 1
    again = cls(S["MONOID"], S["wsp"], store=store, window_id=window, buffer_size=3, cache_size=1)
    assert len(again) == len(oracle) and again.query() == oracle.query()
    continue_against_oracle(again, oracle, at + 300, 100)
    drain_against_oracle(again, oracle)
    settle_background()
    store.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cls", ENGINES)
def test_killed_at_random_moments_resumes_the_last_commit(cls, persistent_url, tmp_path):  # noqa: F811
    """Twice: a child resumes the window and checkpoints every 23 operations
    until it is SIGKILLed at a random moment (maybe inside a checkpoint).  The
    resumed window is the state of the last reported checkpoint, or of the
    next one if its commit landed before the report; it then goes on like
    the oracle."""
    window = fresh_window("random-kill")
    rng = random.Random(f"{cls.__name__}-{backend_of(persistent_url)}")
    start = 0
    store = stores.open_store(persistent_url)
    every = 23
    for round_ in range(2):
        child = Child(tmp_path, persistent_url, window, cls.__name__, start=start, first=start + every, every=every)
        child.wait_for(lambda lines: len(checkpoints_of(lines)) >= 3)
        time.sleep(rng.uniform(0, 0.05))
        lines = child.kill()
        cps = checkpoints_of(lines)
        version, at, _ = cps[-1]
        assert [v for v, _, _ in cps] == list(range(cps[0][0], version + 1))
        engine = cls(S["MONOID"], S["wsp"], store=store, window_id=window, buffer_size=2, cache_size=2)
        candidates = {at: oracle_at(at), at + every: oracle_at(at + every)}
        matching = [i for i, o in candidates.items() if len(o) == len(engine) and o.query() == engine.query()]
        assert len(matching) == 1, (at, len(engine))
        at = matching[0]
        oracle = candidates[at]
        continue_against_oracle(engine, oracle, at, 60)
        v = engine.checkpoint()
        assert v in (version + 1, version + 2)
        start = at + 60  # the next child resumes this checkpoint
        if round_ == 1:
            drain_against_oracle(engine, oracle)
    settle_background()
    store.close()


# ---------------------------------------------------------------------------
# fencing

_FENCED = re.compile(r"owned by epoch (\d+) and this engine holds epoch (\d+)")


def _newest_25(t, p):
    return len(t) - len(p) >= 25


def _owner_a(cls, store_url, window):
    """Engine A owning ``window`` with 60 elements checkpointed, its oracle,
    the store, the options a second owner opens it with, and A's version."""
    store = stores.open_store(store_url)
    opts = dict(store=store, window_id=window, buffer_size=1, cache_size=1)
    a, oracle = cls(CONCAT, _newest_25, **opts), BruteForceWindow(CONCAT, _newest_25)
    for i in range(60):
        assert a.push((i,)) == oracle.push((i,))
    return store, opts, a, oracle, a.checkpoint()


@pytest.mark.parametrize("cls", ENGINES)
def test_stale_owner_is_fenced(cls, store_url):  # noqa: F811
    """A opens and checkpoints; B takes over; A keeps pushing (its flushes
    write the same pair indices as B's, under its own epoch), its checkpoint
    raises FencingError; B's checkpoints succeed; neither B nor C (resuming
    B's checkpoints) ever sees A's writes."""
    window = fresh_window("fence")
    store, opts, a, oa, v1 = _owner_a(cls, store_url, window)

    b = cls(CONCAT, _newest_25, **opts)
    ob = BruteForceWindow(CONCAT, _newest_25)
    ob.items = list(oa.items)
    assert b.query() == ob.query()
    for i in range(60, 100):  # A and B interleaved, different values at the same positions
        assert a.push((1000 + i,)) == oa.push((1000 + i,))
        assert b.push((i,)) == ob.push((i,))
    with pytest.raises(stores.FencingError) as info:
        a.checkpoint()
    msg = str(info.value)
    assert repr(window) in msg and store.url in msg, msg
    newer, stale = map(int, _FENCED.search(msg).groups())
    assert newer > stale, msg
    # both wrote level-0 pairs at the same indices, each under its epoch
    keys = pair_keys(store_url, window)
    a_idx = {i for e, l, i in keys if e == stale and l == 0}
    b_idx = {i for e, l, i in keys if e == newer and l == 0}
    assert a_idx & b_idx, (sorted(a_idx), sorted(b_idx))

    v2 = b.checkpoint()
    assert v2 == v1 + 1
    for i in range(100, 160):  # A goes on writing (or fails on a pair B cleaned up)
        try:
            a.push((1000 + i,))
        except (stores.StoreError, EngineFailedError):
            pass
        assert b.push((i,)) == ob.push((i,))
        if i % 20 == 0:
            b.checkpoint()
    with pytest.raises(stores.FencingError):
        a.checkpoint()
    v3 = b.checkpoint()

    c = cls(CONCAT, _newest_25, store=stores.open_store(store_url), window_id=window, buffer_size=2, cache_size=1)
    assert len(c) == len(ob) and c.query() == ob.query()
    drain_against_oracle(c, ob)
    assert v3 == v2 + 4
    settle_background()
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_stale_close_delete_is_fenced(cls, store_url):  # noqa: F811
    """A stale engine's close(delete=True) is refused like its checkpoint:
    the window B took over keeps its data, B checkpoints and C resumes it."""
    window = fresh_window("fence-close")
    store, opts, a, o, _ = _owner_a(cls, store_url, window)
    b = cls(CONCAT, _newest_25, **opts)
    with pytest.raises(stores.FencingError) as info:
        a.close(delete=True)
    assert "delete refused" in str(info.value) and repr(window) in str(info.value)
    for i in range(60, 90):
        assert b.push((i,)) == o.push((i,))
    b.checkpoint()
    c = cls(CONCAT, _newest_25, store=stores.open_store(store_url), window_id=window, buffer_size=2, cache_size=1)
    assert len(c) == len(o) and c.query() == o.query()
    drain_against_oracle(c, o)
    c.close(delete=True)  # the owner's delete removes everything
    assert store.read_meta(window) == (None, None) and store.list_epochs(window) == []
    settle_background()
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_stale_owner_reading_cleaned_up_data_is_fenced(cls, store_url):  # noqa: F811
    """B took the window over and its clean-up dropped A's epoch: A's next
    read of a dropped pair is a FencingError, not MissingData."""
    window = fresh_window("fence-read")
    store, opts, a, oa, _ = _owner_a(cls, store_url, window)
    stale = max(store.list_epochs(window))  # A's, the only one written so far
    b = cls(CONCAT, _newest_25, **opts)
    for i in range(60, 200):  # far enough that nothing of A's epoch is referenced
        b.push((i,))
        if i % 20 == 0:
            b.checkpoint()
    b.checkpoint()
    assert stale not in store.list_epochs(window)  # B's clean-up dropped A's epoch
    err = _run_until(stores.FencingError, lambda: a, oa)
    assert repr(window) in str(err) and "owned by epoch" in str(err)
    settle_background()
    store.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine", ["LogMTA", "AmortizedMTA"])
def test_two_processes_racing(engine, persistent_url):  # noqa: F811
    """Two processes repeatedly open (take over), push tagged values and
    checkpoint one window.  Every state a writer resumed is empty or one a
    writer committed, no version is committed twice, every push of a writer
    matches its oracle (or, for a writer already superseded, may find pairs
    the new owner cleaned up missing), and the window finally resumes to the
    newest commit, exactly."""
    window = fresh_window("race")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    rounds, pushes, keep = 15, 12, 10
    procs = [
        ctx.Process(target=racing_writer, args=(persistent_url, window, engine, tag, rounds, pushes, keep, queue))
        for tag in (1, 2)
    ]
    for p in procs:
        p.start()
    resumed, committed, fenced, missing, done = [], {}, [], [], 0
    try:
        while done < 2:
            kind, tag, payload = queue.get(timeout=100)
            if kind == "error":
                raise AssertionError(f"writer {tag} failed:\n{payload}")
            if kind == "done":
                done += 1
            elif kind == "resumed":
                resumed.append(payload)
            elif kind == "committed":
                version, contents = payload
                assert version not in committed, f"version {version} committed twice"
                committed[version] = contents
            elif kind == "fenced":
                fenced.append(payload)
                assert repr(window) in payload and _FENCED.search(payload), payload
            elif kind == "missing":  # a stale owner reading what the new owner cleaned up
                stale, message = payload
                assert stale, f"the window's current owner found pairs missing: {message}"
                missing.append(message)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():  # pragma: no cover
                p.kill()
    assert len(committed) + len(fenced) + len(missing) == 2 * rounds
    assert committed
    states = set(committed.values()) | {()}
    for contents in resumed:
        assert contents in states, contents
    for contents in committed.values():  # each writer's values in order, the newest `keep`
        assert len(contents) == keep
        for tag in (1, 2):
            ks = [k for t, k in contents if t == tag]
            assert ks == sorted(ks)
    cls = CLASSES[engine]

    def wsp(t, p):
        return len(t) - len(p) >= keep

    store = stores.open_store(persistent_url)
    final = cls(CONCAT, _newest_25, store=store, window_id=window)
    assert final.query() == committed[max(committed)]
    o = BruteForceWindow(CONCAT, _newest_25)
    o.items = [(x,) for x in final.query()]
    drain_against_oracle(final, o)
    settle_background()
    store.close()


# ---------------------------------------------------------------------------
# garbage collection


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cls", ENGINES)
def test_garbage_collection_long_run(cls, persistent_url):  # noqa: F811
    """A window of 64 elements, buffer 4, a checkpoint every 50 pushes for
    5000 pushes, a new owner (epoch) every 1000: at every checkpoint the
    window has at most 4 x (64 + levels x 4) pair keys, and 500 pushes after
    a takeover the former owners' epochs are gone.  (The checkpoints retained
    after the window turned over still reference the old epoch for a few
    more checkpoints; on Redis an epoch stays listed until it is dropped.)"""
    window = fresh_window("gc")
    n, buffer_size = 64, 4

    def wsp(t, p):
        return len(t) - len(p) >= n

    store = stores.open_store(persistent_url)

    def open_engine():
        return cls(CONCAT, wsp, store=store, window_id=window, buffer_size=buffer_size, cache_size=buffer_size)

    e = open_engine()
    older: set = set()
    most = 0
    for i in range(1, 5001):
        e.push((i,))
        if i % 50 == 0:
            e.checkpoint()
            assert e.query() == tuple(range(max(1, i - n + 1), i + 1)) and len(e) == min(i, n)
            keys = count_pair_keys(persistent_url, window)
            bound = 4 * (n + e.height() * buffer_size)
            assert keys <= bound, (i, keys, bound)
            most = max(most, keys)
            epochs = set(store.list_epochs(window))
            if i % 1000 == 500 and i > 1000:  # 10 checkpoints after the takeover
                assert not epochs & older, (i, sorted(epochs), sorted(older))
                assert len(epochs) == 1, (i, sorted(epochs))
        if i % 1000 == 0 and i < 5000:
            older = set(store.list_epochs(window))
            e = open_engine()  # takes over: a new epoch
    assert most > n // 2  # the pairs did go to the store
    settle_background()
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_stale_owner_late_writes_are_collected(cls, store_url):  # noqa: F811
    """A stale owner that wakes up after the new owner dropped its epoch
    and flushes more pairs there (as a zombie task would), then dies: later
    checkpoints of the new owner clean its epoch up, like any dead owner's
    writes after its last checkpoint."""
    window = fresh_window("late")

    def wsp(t, p):
        return len(t) - len(p) >= 8

    store = stores.open_store(store_url)
    opts = dict(store=store, window_id=window, buffer_size=1, background=False)
    a = cls(CONCAT, wsp, cache_size=64, **opts)
    for i in range(40):
        a.push((i,))
    a.checkpoint()
    stale_epochs = set(store.list_epochs(window))
    b = cls(CONCAT, wsp, cache_size=1, **opts)
    o = BruteForceWindow(CONCAT, wsp)
    o.items = [(x,) for x in b.query()]
    for i in range(40, 200):
        assert b.push((i,)) == o.push((i,))
        if i % 10 == 0:
            b.checkpoint()
    assert not set(store.list_epochs(window)) & stale_epochs  # A's epoch was dropped
    for i in range(1000, 1040):  # A wakes up: appends only (its tail is cached), flushing under its epoch
        a.insert((i,))
    assert set(store.list_epochs(window)) & stale_epochs
    del a  # and dies
    for i in range(200, 600):
        assert b.push((i,)) == o.push((i,))
        if i % 10 == 0:
            b.checkpoint()
    assert not set(store.list_epochs(window)) & stale_epochs, "a stale owner's late pairs are never collected"
    assert count_pair_keys(store_url, window) <= 4 * (8 + b.height() * 1)
    store.close()


# ---------------------------------------------------------------------------
# faults


def _fill(cls, store, window, pushes=200, keep=100, **options):
    def wsp(t, p):
        return len(t) - len(p) >= keep

    opts = dict(buffer_size=2, cache_size=2)
    opts.update(options)
    e = cls(CONCAT, wsp, store=store, window_id=window, **opts)
    o = BruteForceWindow(CONCAT, wsp)
    for i in range(pushes):
        v = () if i % 9 == 4 else (i,)
        assert e.push(v) == o.push(v)
    return e, o, wsp


def _run_until(exc_type, engine_factory, oracle, more: int = 0):
    """Build the engine, compare it with the oracle while draining it (after
    ``more`` pushes); every result must be right until ``exc_type`` is
    raised, which it must be.  Returns the exception."""
    with pytest.raises(exc_type) as info:
        e = engine_factory()
        assert len(e) == len(oracle)
        for k in range(more):
            v = (5000 + k,)
            assert e.push(v) == oracle.push(v)
        assert e.query() == oracle.query()
        while len(oracle):
            e.evict()
            oracle.evict()
            assert e.query() == oracle.query()
    return info.value


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cls", ENGINES)
def test_redis_restart_resumed_engine_raises_missing_data(cls, redis_server_factory):
    """Redis restarts without persistence; the window's metadata survives
    (restored by hand, as after a partial loss): a resumed engine finds its
    pairs missing and raises MissingData -- never a wrong result."""
    server = redis_server_factory()
    window = fresh_window("restart")
    store = stores.open_store(server.url, retries=3, backoff=0.01)
    e, o, wsp = _fill(cls, store, window)
    e.checkpoint()
    client = server.client()
    meta_key = f"mta:{{{window}}}:meta"
    meta = client.hgetall(meta_key)
    client.close()
    settle_background()
    server.stop()
    server.start()
    client = server.client()
    client.hset(meta_key, mapping=meta)
    client.close()
    err = _run_until(
        stores.MissingData,
        lambda: cls(CONCAT, wsp, store=store, window_id=window, buffer_size=2, cache_size=2),
        o,
    )
    msg = str(err)
    assert repr(window) in msg and "missing" in msg and "level" in msg, msg
    store.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("background", [True, False])
@pytest.mark.parametrize("cls", ENGINES)
def test_redis_restart_live_engine_raises_missing_data(cls, background, redis_server_factory):
    """Redis restarts under a live engine: it keeps answering right while
    its cache lasts, then a cache miss raises MissingData (the engine is then
    failed), and its checkpoint is refused."""
    server = redis_server_factory()
    window = fresh_window("live-restart")
    store = stores.open_store(server.url, retries=3, backoff=0.01)
    e, o, wsp = _fill(cls, store, window, pushes=300, background=background)
    v = e.checkpoint()
    settle_background()
    server.stop()
    server.start()
    err = _run_until(stores.MissingData, lambda: e, o, more=200)
    assert repr(window) in str(err) and "missing" in str(err)
    with pytest.raises(EngineFailedError):
        e.query()
    with pytest.raises(EngineFailedError) as failed:
        e.checkpoint()  # a failed engine never checkpoints
    assert isinstance(failed.value.__cause__, stores.MissingData)
    with pytest.raises(stores.StoreError, match=f"no checkpoint {v}"):
        cls(CONCAT, wsp, store=store, window_id=window, resume=v)  # asking for it by version: detected
    store.close()


def _corrupt_head_pair(cls, url, blob_of):
    """A checkpointed window whose level-0 head pair is replaced by
    ``blob_of(original blob)``; returns (window, index, engine factory, oracle)."""
    window = fresh_window("corrupt")
    store = stores.open_store(url)
    e, o, wsp = _fill(cls, store, window, keep=60, retain=1, buffer_size=1, cache_size=1)
    e.checkpoint()
    settle_background()
    keys = [k for k in pair_keys(url, window) if k[1] == 0]
    epoch, _, index = min(keys, key=lambda k: k[2])
    original = read_pair(url, window, epoch, 0, index)
    overwrite_pair(url, window, epoch, 0, index, blob_of(original, group_place(window, epoch, 0, index)))

    def factory():
        return cls(CONCAT, wsp, store=stores.open_store(url), window_id=window, buffer_size=1, cache_size=1)

    return window, index, factory, o


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b, place: b"\x02\x00\x00\x00\x00garbage", id="bad-checksum"),
        pytest.param(lambda b, place: b[:-3], id="truncated"),
        pytest.param(lambda b, place: b"\x02", id="header-only"),
        pytest.param(lambda b, place: stores.encode((0, []), bind=place), id="not-the-group"),
        pytest.param(lambda b, place: stores.encode(["a", "list"], bind=place), id="not-a-group"),
    ],
)
@pytest.mark.parametrize("cls", ENGINES)
def test_corrupt_pair_raises_corrupt_value(cls, store_url, damage):  # noqa: F811
    window, index, factory, oracle = _corrupt_head_pair(cls, store_url, damage)
    err = _run_until(stores.CorruptValue, factory, oracle)
    msg = str(err)
    assert repr(window) in msg and f"group {index} (pairs {index}..{index}) of level 0" in msg, msg


@pytest.mark.parametrize("source", ["other-window", "other-index"])
@pytest.mark.parametrize("cls", ENGINES)
def test_valid_value_copied_to_another_place_is_refused(cls, store_url, source):  # noqa: F811
    """A valid group copied from another key's window (same epoch, level and
    index) or from another index of the same window is CorruptValue, never
    read as this place's data."""
    store = stores.open_store(store_url)

    def wsp(t, p):
        return len(t) - len(p) >= 60

    windows, oracles = [fresh_window("bound"), fresh_window("bound")], []
    for n, window in enumerate(windows):
        e = cls(CONCAT, wsp, store=store, window_id=window, buffer_size=1, cache_size=1, retain=1)
        o = BruteForceWindow(CONCAT, wsp)
        for i in range(100):
            assert e.push((1000 * n + i,)) == o.push((1000 * n + i,))
        e.checkpoint()
        oracles.append(o)
    settle_background()
    victim, donor = windows
    keys = sorted(k for k in pair_keys(store_url, victim) if k[1] == 0)
    epoch, _, index = keys[0]
    if source == "other-window":
        # the donor's group as its window would hold it at the victim's epoch (windows start at random epochs)
        [(donor_epoch, _, _)] = [k for k in pair_keys(store_url, donor) if k[1:] == (0, index)]
        value = stores.decode(read_pair(store_url, donor, donor_epoch, 0, index),
                              bind=group_place(donor, donor_epoch, 0, index))
        blob = stores.encode(value, bind=group_place(donor, epoch, 0, index))
    else:
        blob = read_pair(store_url, victim, epoch, 0, keys[1][2])
    overwrite_pair(store_url, victim, epoch, 0, index, blob)

    def factory():
        return cls(CONCAT, wsp, store=stores.open_store(store_url), window_id=victim, buffer_size=1, cache_size=1)

    err = _run_until(stores.CorruptValue, factory, oracles[0])
    msg = str(err)
    assert repr(victim) in msg and f"group {index} " in msg and "copied from another window or position" in msg, msg
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_unknown_pair_format_raises_format_version_error(cls, store_url):  # noqa: F811
    window, index, factory, oracle = _corrupt_head_pair(cls, store_url, lambda b, place: bytes([7]) + b[1:])
    err = _run_until(stores.FormatVersionError, factory, oracle)
    msg = str(err)
    assert repr(window) in msg and f"group {index} (pairs {index}..{index}) of level 0" in msg, msg
    assert "version 7" in msg, msg


@pytest.mark.timeout(30)
@pytest.mark.parametrize("cls", ENGINES)
def test_store_down_at_start(cls):
    url = f"redis://127.0.0.1:{free_port()}/0"
    store = stores.open_store(url, retries=1, backoff=0.01, backoff_max=0.02)
    window = fresh_window("down")
    with pytest.raises(stores.StoreUnavailable) as info:
        cls(CONCAT, None, store=store, window_id=window)
    assert info.value.attempts == 2  # retries=1; the timeout mark bounds the time
    msg = str(info.value)
    assert url in msg and repr(window) in msg, msg
    assert info.value.window == window and info.value.url == url
    store.close()


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param(lambda: stores.encode({"format": 1, "engine": "AmortizedMTA", "epoch": 1}), id="format-1"),
        pytest.param(lambda: stores.encode({"format": 3, "engine": "AmortizedMTA", "epoch": 1}), id="format-3"),
        pytest.param(lambda: stores.encode(["not", "a", "record"]), id="not-a-record"),
        pytest.param(lambda: bytes([9]) + stores.encode({"format": 1})[1:], id="version-byte-9"),
    ],
)
@pytest.mark.parametrize("cls", ENGINES)
def test_incompatible_metadata_raises_format_version_error(cls, store_url, meta):  # noqa: F811
    window = fresh_window("meta")
    store = stores.open_store(store_url)
    store.cas_meta(window, None, meta())
    with pytest.raises(stores.FormatVersionError) as info:
        cls(CONCAT, None, store=store, window_id=window)
    assert repr(window) in str(info.value) and "format" in str(info.value)
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_incomplete_metadata_raises_corrupt_value(cls, store_url):  # noqa: F811
    window = fresh_window("meta")
    store = stores.open_store(store_url)
    store.cas_meta(window, None, stores.encode({"format": 2, "engine": "AmortizedMTA", "epoch": 1}))
    with pytest.raises(stores.CorruptValue) as info:
        cls(CONCAT, None, store=store, window_id=window)
    msg = str(info.value)
    assert repr(window) in msg and "metadata lacks" in msg and "'checkpoints'" in msg, msg
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_corrupt_metadata_raises_corrupt_value(cls, store_url):  # noqa: F811
    window = fresh_window("meta")
    store = stores.open_store(store_url)
    blob = stores.encode({"format": 1})
    store.cas_meta(window, None, blob[:5] + b"\xff" + blob[6:])
    with pytest.raises(stores.CorruptValue) as info:
        cls(CONCAT, None, store=store, window_id=window)
    assert repr(window) in str(info.value) and "metadata" in str(info.value)
    store.close()


@pytest.mark.parametrize(("writer", "reader"), [(AmortizedMTA, LogMTA), (LogMTA, AmortizedMTA)])
def test_resume_with_the_other_engine_is_refused(writer, reader, store_url):  # noqa: F811
    """The level layouts differ: a clear StoreError naming both engines; the
    owner is not disturbed (it still checkpoints) and the window resumes
    intact with its own engine class.  ``resume=False`` may start afresh."""
    window = fresh_window("engine")
    store = stores.open_store(store_url)
    e, o, wsp = _fill(writer, store, window, pushes=80, keep=30)
    v = e.checkpoint()
    with pytest.raises(stores.StoreError) as info:
        reader(CONCAT, wsp, store=store, window_id=window)
    msg = str(info.value)
    assert writer.__name__ in msg and reader.__name__ in msg and repr(window) in msg, msg
    assert not isinstance(info.value, stores.FencingError)
    assert e.push((999,)) == o.push((999,))
    assert e.checkpoint() == v + 1  # not fenced by the refused open
    again = writer(CONCAT, wsp, store=store, window_id=window)
    assert again.query() == o.query()
    fresh = reader(CONCAT, wsp, store=store, window_id=window, resume=False)
    assert len(fresh) == 0
    settle_background()
    store.close()


def _wsp_failing_at(call: int, keep: int):
    """A prefix-monotone WSP (keep the newest ``keep``) whose ``call``-th
    evaluation raises, as a buggy user policy would; armed by ``arm()``."""
    state = {"calls": 0, "armed": False}

    def wsp(total, prefix):
        if state["armed"]:
            state["calls"] += 1
            if state["calls"] == call:
                raise RuntimeError("user policy bug")
        return len(total) - len(prefix) >= keep

    def arm():
        state["armed"] = True

    return wsp, arm


@pytest.mark.parametrize("cls", ENGINES)
def test_failed_engine_cannot_checkpoint(cls, store_url):  # noqa: F811
    """An engine marked failed (user code raised half-way through an
    enforce) refuses to checkpoint: its half-updated levels never become
    the window's newest checkpoint, which still resumes to the last good
    state.  (Every evaluation of the policy is tried as the failing one.)"""
    store = stores.open_store(store_url)
    half_updated, replaced = [], []
    for call in range(1, 13):
        window = fresh_window(f"failed-{call}")
        wsp, arm = _wsp_failing_at(call, keep=5)
        e = cls(CONCAT, wsp, store=store, window_id=window, buffer_size=1, cache_size=1)
        for i in range(16):
            e.insert((i,))
        good = e.checkpoint()
        arm()
        try:
            e.enforce()
        except RuntimeError:
            pass
        else:
            continue  # fewer evaluations than `call`
        with pytest.raises(EngineFailedError):
            e.query()
        try:
            e.checkpoint()
        except EngineFailedError:
            pass
        else:
            replaced.append(f"call {call}: checkpoint {good} replaced")
        r = cls(CONCAT, None, store=store, window_id=window)
        n, contents = len(r), r.query()
        if contents != tuple(range(16 - n, 16)):
            half_updated.append(f"call {call}: resumed len {n} but contents {contents}")
        elif n != 16:
            replaced.append(f"call {call}: resumed {n} elements, not the 16 checkpointed")
    assert not half_updated, "a failed engine checkpointed a half-updated window:\n" + "\n".join(half_updated)
    assert not replaced, "a failed engine replaced the last good checkpoint:\n" + "\n".join(replaced)
    settle_background()
    store.close()


@pytest.mark.parametrize("cls", ENGINES)
def test_refused_open_does_not_fence_the_owner(cls, store_url):  # noqa: F811
    """Opening with ``resume=`` a checkpoint that does not exist (or is no
    longer retained) is refused with a StoreError -- and, like an open
    refused for the wrong engine class, leaves the live owner in charge."""
    window = fresh_window("refused")
    store = stores.open_store(store_url)
    with pytest.raises(stores.StoreError, match="no checkpoint 3: the store has lost the window.*new checkpoint location"):
        cls(CONCAT, None, store=store, window_id=window, resume=3)  # nothing checkpointed yet
    owner = cls(CONCAT, None, store=store, window_id=window, buffer_size=1, cache_size=1)
    for i in range(10):
        owner.push((i,))
    v = owner.checkpoint()
    with pytest.raises(stores.StoreError, match=f"checkpoint {v + 5} is not retained"):
        cls(CONCAT, None, store=store, window_id=window, resume=v + 5)
    owner.push((10,))
    assert owner.checkpoint() == v + 1  # not fenced by the refused open
    r = cls(CONCAT, None, store=store, window_id=window)
    assert r.query() == tuple(range(11))
    store.close()


@pytest.mark.parametrize(("writer", "reader"), [(AmortizedMTA, LogMTA), (LogMTA, AmortizedMTA)])
def test_checkpoints_of_the_other_engine_are_never_resumed(writer, reader, store_url):  # noqa: F811
    """After the other engine class restarted the window (``resume=False``),
    the retained checkpoints are still the first engine's: resuming one of
    them must never hand its levels to the other class (a StoreError is
    fine, a wrong window is not) -- neither before the newcomer checkpoints
    (``resume=True`` finds the first engine's newest) nor after
    (``resume=v`` of the first engine's checkpoint)."""
    window = fresh_window("switch")
    store = stores.open_store(store_url)
    e, o, wsp = _fill(writer, store, window, pushes=80, keep=30)
    v = e.checkpoint()

    def never_wrong(cls, **options):
        try:
            r = cls(CONCAT, wsp, store=store, window_id=window, **options)
        except stores.StoreError:
            return None
        got = (len(r), r.query())
        assert got == (len(o), o.query()), f"{cls.__name__} resumed {writer.__name__}'s checkpoint {v} as {got}"
        return r

    reader(CONCAT, wsp, store=store, window_id=window, resume=False)  # restarts the window, no checkpoint yet
    never_wrong(reader)
    never_wrong(writer)
    newcomer = reader(CONCAT, wsp, store=store, window_id=window, resume=False)
    newcomer.push((1,))
    assert newcomer.checkpoint() == v + 1
    never_wrong(reader, resume=v)  # still retained (retain=2)
    never_wrong(writer, resume=v)
    settle_background()
    store.close()

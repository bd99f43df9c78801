"""Fixtures and helpers for the store-backed engine tests
(tests/test_store_engines.py and tests/test_recovery.py).

* ``store_url`` (module scope, parametrized over memory, file and redis) --
  a store URL shared by every test of a module using it; tests use a fresh
  window name each (:func:`fresh_window`), so they never see each other's
  data, and hypothesis may use the fixture (it is not function-scoped).
* :func:`pair_keys` / :func:`count_pair_keys` / :func:`overwrite_pair` /
  :func:`restore_meta` reach into a backend directly (SQLite tables, Redis
  keys, the memory store's dicts), bypassing the store API, to count, inspect
  or damage what a window left there.
* :func:`racing_writer` runs in a child process (multiprocessing, spawn) for
  the two-writers race of tests/test_recovery.py.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import uuid
from urllib.parse import urlsplit

import pytest

BACKENDS = ["memory", "file", "redis"]
PERSISTENT_BACKENDS = ["file", "redis"]


def fresh_window(prefix: str = "w") -> str:
    """A window name no other test (or hypothesis example) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def url_for(backend: str, request, tmp_path_factory) -> str:
    if backend == "memory":
        return f"memory://shared-{uuid.uuid4().hex}"
    if backend == "file":
        return f"file://{tmp_path_factory.mktemp('store')}"
    if backend == "redis":
        return request.getfixturevalue("redis_server").url
    raise AssertionError(backend)


@pytest.fixture(scope="module", params=BACKENDS)
def store_url(request, tmp_path_factory):
    url = url_for(request.param, request, tmp_path_factory)
    yield url
    if url.startswith("memory://"):
        from stores.memory_store import reset_memory

        reset_memory(url[len("memory://"):])


@pytest.fixture(scope="module", params=PERSISTENT_BACKENDS)
def persistent_url(request, tmp_path_factory):
    """A store another process can open: the file store or the Redis fixture."""
    return url_for(request.param, request, tmp_path_factory)


def settle_background(timeout: float = 30.0) -> None:
    """Wait until the background pool of stores.background has finished every
    task submitted so far (flushes and prefetches of live or abandoned
    engines).

    Needed before closing a store that abandoned engines still use: closing a
    file store while a pool thread is inside SQLite crashes the interpreter
    (SIGSEGV), and there is no public way to wait for an engine's background
    I/O.  One task per worker waits on a barrier; the pool runs its tasks in
    submission order, so when all of them meet, everything before is done.
    """
    from stores.background import _pool

    pool = _pool()
    workers = pool._max_workers
    barrier = threading.Barrier(workers + 1, timeout=timeout)
    futures = [pool.submit(barrier.wait) for _ in range(workers)]
    barrier.wait()
    for f in futures:
        f.result(timeout)


def backend_of(url: str) -> str:
    return url.split(":", 1)[0].split("+", 1)[0]


# ---------------------------------------------------------------------------
# reaching into the backends

_REDIS_PAIRS = re.compile(r":e(\d+):l(\d+)$")


def _sqlite_path(url: str) -> str:
    from stores.sqlite_store import DB_NAME, parse_file_url

    return os.path.join(parse_file_url(url), DB_NAME)


def _redis_client(url: str):
    import redis

    parts = urlsplit(url)
    return redis.Redis(host=parts.hostname, port=parts.port, db=int(parts.path.strip("/") or 0))


def _memory_space(url: str):
    from stores.memory_store import _spaces

    return _spaces[url[len("memory://"):]]


def pair_keys(url: str, window: str) -> list[tuple[int, int, int]]:
    """Every ``(epoch, level, index)`` holding a pair of ``window``, read from
    the backend directly."""
    backend = backend_of(url)
    if backend == "file":
        conn = sqlite3.connect(_sqlite_path(url))
        try:
            rows = conn.execute("SELECT epoch, level, idx FROM pairs WHERE window = ?", (window,)).fetchall()
        finally:
            conn.close()
        return sorted(rows)
    if backend == "redis":
        client = _redis_client(url)
        out = []
        try:
            for key in client.scan_iter(match=f"mta:{{{window}}}:e*", count=1000):
                m = _REDIS_PAIRS.search(key.decode())
                if m:
                    epoch, level = int(m.group(1)), int(m.group(2))
                    out.extend((epoch, level, int(f)) for f in client.hkeys(key))
        finally:
            client.close()
        return sorted(out)
    if backend == "memory":
        space = _memory_space(url)
        with space.lock:
            return sorted(
                (e, l, i) for e, levels in space.pairs.get(window, {}).items() for l, idx in levels.items() for i in idx
            )
    raise AssertionError(url)


def count_pair_keys(url: str, window: str) -> int:
    """The number of pair keys of ``window``: ``SELECT count(*)`` in SQLite,
    the sum of HLEN over the window's level hashes in Redis."""
    backend = backend_of(url)
    if backend == "file":
        conn = sqlite3.connect(_sqlite_path(url))
        try:
            return conn.execute("SELECT count(*) FROM pairs WHERE window = ?", (window,)).fetchone()[0]
        finally:
            conn.close()
    if backend == "redis":
        client = _redis_client(url)
        try:
            return sum(
                client.hlen(key)
                for key in client.scan_iter(match=f"mta:{{{window}}}:e*", count=1000)
                if _REDIS_PAIRS.search(key.decode())
            )
        finally:
            client.close()
    return len(pair_keys(url, window))


def read_pair(url: str, window: str, epoch: int, level: int, index: int) -> bytes | None:
    backend = backend_of(url)
    if backend == "file":
        conn = sqlite3.connect(_sqlite_path(url))
        try:
            row = conn.execute(
                "SELECT blob FROM pairs WHERE window = ? AND epoch = ? AND level = ? AND idx = ?",
                (window, epoch, level, index),
            ).fetchone()
        finally:
            conn.close()
        return None if row is None else bytes(row[0])
    if backend == "redis":
        client = _redis_client(url)
        try:
            return client.hget(f"mta:{{{window}}}:e{epoch}:l{level}", index)
        finally:
            client.close()
    space = _memory_space(url)
    with space.lock:
        return space.pairs[window][epoch][level].get(index)


def overwrite_pair(url: str, window: str, epoch: int, level: int, index: int, blob: bytes) -> None:
    """Replace one stored pair blob behind the store's back."""
    backend = backend_of(url)
    if backend == "file":
        conn = sqlite3.connect(_sqlite_path(url))
        try:
            with conn:
                cur = conn.execute(
                    "UPDATE pairs SET blob = ? WHERE window = ? AND epoch = ? AND level = ? AND idx = ?",
                    (blob, window, epoch, level, index),
                )
            assert cur.rowcount == 1
        finally:
            conn.close()
    elif backend == "redis":
        client = _redis_client(url)
        try:
            key = f"mta:{{{window}}}:e{epoch}:l{level}"
            assert client.hexists(key, index)
            client.hset(key, index, blob)
        finally:
            client.close()
    else:
        space = _memory_space(url)
        with space.lock:
            assert index in space.pairs[window][epoch][level]
            space.pairs[window][epoch][level][index] = blob


# ---------------------------------------------------------------------------
# two processes racing on one window (tests/test_recovery.py)


def racing_writer(url: str, window: str, engine_name: str, tag: int, rounds: int, pushes: int, keep: int,
                  queue) -> None:
    """Repeatedly: open the window (resuming the newest checkpoint), check it
    against an oracle rebuilt from its CONCAT aggregate, push ``pushes``
    values tagged ``(tag, k)`` comparing every result, checkpoint.  Reports
    ``("resumed", tag, contents)`` for every open, ``("committed", tag,
    (version, contents))`` for every successful checkpoint, ``("fenced",
    tag, message)`` for every FencingError (a refused checkpoint, or a push
    needing a pair the new owner cleaned up), ``("missing", tag, (stale,
    message))`` when a push found pairs missing (then the round is
    abandoned), then ``("done", tag, None)`` (or ``("error", tag,
    traceback)``)."""
    try:
        import stores
        from stores.codec import decode
        from mta.amortized_mta import AmortizedMTA
        from mta.log_mta import LogMTA
        from tests.oracle import CONCAT, BruteForceWindow

        def wsp(total, prefix):
            return len(total) - len(prefix) >= keep

        store = stores.open_store(url)
        k = 0
        cls = {"LogMTA": LogMTA, "AmortizedMTA": AmortizedMTA}[engine_name]
        for _ in range(rounds):
            engine = cls(CONCAT, wsp, store=store, window_id=window, buffer_size=2, cache_size=2)
            contents = engine.query()
            queue.put(("resumed", tag, contents))
            oracle = BruteForceWindow(CONCAT, wsp)
            oracle.items = [(x,) for x in contents]
            assert len(engine) == len(oracle), (len(engine), len(oracle))
            try:
                for _ in range(pushes):
                    v = ((tag, k),)
                    k += 1
                    got, want = engine.push(v), oracle.push(v)
                    assert got == want, (got, want)
            except stores.MissingData as exc:
                # Only a stale owner may find pairs gone (the new owner's
                # clean-up deleted what it no longer needs): the window must
                # have a newer owner by now.
                now = decode(store.read_meta(window)[0])["epoch"]
                mine = engine._storage.epoch
                queue.put(("missing", tag, (now > mine, f"epoch {mine}, window now at {now}: {exc}")))
                continue
            except stores.FencingError as exc:
                # A stale owner needing a pair the new owner's clean-up dropped.
                queue.put(("fenced", tag, str(exc)))
                continue
            try:
                version = engine.checkpoint()
            except stores.FencingError as exc:
                queue.put(("fenced", tag, str(exc)))
            else:
                queue.put(("committed", tag, (version, engine.query())))
        settle_background()  # abandoned engines may still be flushing
        store.close()
        queue.put(("done", tag, None))
    except BaseException as exc:  # pragma: no cover - reported by the parent
        import traceback

        queue.put(("error", tag, traceback.format_exc() + repr(exc)))

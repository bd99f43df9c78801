"""The file store's writers' lock (stores.writer_lock): held around each
write transaction, a waiting writer woken when it is let go, and never a
wait beyond the timeout (the writer then goes on under SQLite's lock)."""

from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest

from stores import writer_lock
from stores.sqlite_store import WRITER_LOCK, SQLiteStore
from stores.writer_lock import open_writer_lock


def _held_elsewhere(path: str) -> bool:
    """Whether another descriptor holds the lock file now."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the only descriptor that took it lets it go
    return False


def _until(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_acquire_excludes_other_descriptors_until_released(tmp_path):
    path = str(tmp_path / "lock")
    lock = open_writer_lock(path)
    assert lock.acquire(1.0)
    assert _held_elsewhere(path)
    lock.release()
    assert not _held_elsewhere(path)
    lock.close()
    with pytest.raises(OSError):
        os.fstat(lock.fd)


def test_a_waiting_writer_takes_the_lock_once_the_holder_lets_go(tmp_path):
    path = str(tmp_path / "lock")
    holder, waiter = open_writer_lock(path), open_writer_lock(path)
    assert holder.acquire(1.0)
    events = []

    def let_go():
        time.sleep(0.2)
        events.append("released")
        holder.release()

    threading.Thread(target=let_go).start()
    assert waiter.acquire(30.0)  # woken by the release, long before the timeout
    events.append("taken")
    assert events == ["released", "taken"] and waiter.usable
    assert _held_elsewhere(path)
    waiter.release()
    assert waiter.acquire(1.0)  # the same lock again, uncontended
    waiter.release()
    holder.close()
    waiter.close()


def test_a_holder_that_never_lets_go_costs_the_timeout_then_the_lock_is_left_alone(tmp_path):
    path = str(tmp_path / "lock")
    stuck = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(stuck, fcntl.LOCK_EX)
    lock = open_writer_lock(path)
    t0 = time.monotonic()
    assert not lock.acquire(0.3)
    assert time.monotonic() - t0 >= 0.3
    assert not lock.usable and not lock.acquire(0.3)  # no second wait on a lock that timed out once
    # the stuck holder lets go: the waiter thread takes the file and gives it back at once (the
    # pause lets it take the file before this test's own tries could)
    os.close(stuck)
    time.sleep(0.5)
    assert _until(lambda: not _held_elsewhere(path), 5.0)
    lock.close()
    assert _until(lambda: not lock.waiter.is_alive())  # the waiter ends, closing the descriptor


def test_without_fcntl_there_is_no_lock_and_the_store_still_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_lock, "fcntl", None)
    assert open_writer_lock(str(tmp_path / "lock")) is None
    store = SQLiteStore(f"file://{tmp_path}")
    try:
        store.write_pairs("w", 1, 0, 0, [b"a", b"b"])
        assert store.read_pairs("w", 1, 0, 0, 2) == [b"a", b"b"]
        assert not (tmp_path / WRITER_LOCK).exists()
    finally:
        store.close()


def test_store_writes_hold_the_lock_file_and_go_on_past_a_stuck_holder(tmp_path):
    store = SQLiteStore(f"file://{tmp_path}", busy_timeout=0.3)
    path = str(tmp_path / WRITER_LOCK)
    try:
        conn = store._conn()
        seen = []
        store._tx(conn, lambda: seen.append(_held_elsewhere(path)))
        assert seen == [True] and not _held_elsewhere(path)  # held during the transaction only
        store.write_pairs("w", 1, 0, 0, [b"a"])
        assert not _held_elsewhere(path)
        # another process's writer stopped while holding the file: writes go on under SQLite's lock
        stuck = os.open(path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(stuck, fcntl.LOCK_EX)
        try:
            store.write_pairs("w", 1, 0, 1, [b"b"])
            store.delete_pairs("w", 1, 0, 0, 1)
            assert store.read_pairs("w", 1, 0, 0, 2) == [None, b"b"]
        finally:
            os.close(stuck)
    finally:
        store.close()


def test_writers_in_several_processes_take_turns_and_lose_nothing(tmp_path):
    """Four processes each append 200 pairs to their own window, each
    write its own transaction under the lock file: every pair is there."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_append, args=(str(tmp_path), f"w{i}")) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = SQLiteStore(f"file://{tmp_path}")
    try:
        for i in range(4):
            assert store.read_pairs(f"w{i}", 1, 0, 0, 200) == [f"w{i}-{k}".encode() for k in range(200)]
    finally:
        store.close()


def _append(directory: str, window: str) -> None:
    store = SQLiteStore(f"file://{directory}")
    try:
        for k in range(200):
            store.write_pairs(window, 1, 0, k, [f"{window}-{k}".encode()])
    finally:
        store.close()


def test_an_interrupted_wait_neither_keeps_the_lock_nor_lets_the_waiter_keep_it(tmp_path, monkeypatch):
    path = str(tmp_path / "lock")
    holder, lock = open_writer_lock(path), open_writer_lock(path)
    assert holder.acquire(1.0)
    waits = []

    class Interrupted(threading.Event):  # Ctrl-C while the writer waits
        def wait(self, timeout=None):
            raise KeyboardInterrupt

    class Wait(writer_lock._Wait):
        def __init__(self):
            super().__init__()
            self.done = Interrupted()
            waits.append(self.done)

    monkeypatch.setattr(writer_lock, "_Wait", Wait)
    with pytest.raises(KeyboardInterrupt):
        lock.acquire(30.0)
    assert not lock.usable
    holder.release()  # the waiter takes the file now, and must let it go at once
    assert waits and _until(lambda: waits[0].is_set())
    assert _until(lambda: not _held_elsewhere(path))
    holder.close()
    lock.close()


def test_a_forked_child_does_not_keep_the_parents_hold(tmp_path):
    """A child forked while the parent holds the lock closes its copy: the
    parent's release (or its death) frees the file whatever the child does."""
    import multiprocessing

    path = str(tmp_path / "lock")
    lock = open_writer_lock(path)
    assert lock.acquire(1.0)
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    child = context.Process(target=_linger, args=(lock.fd, ready, done))
    child.start()
    try:
        assert ready.wait(60)
        os.close(lock.fd)  # the parent's only descriptor goes (as when it dies): the hold must go with it
        lock._closed = True
        assert not _held_elsewhere(path)
    finally:
        done.set()
        child.join(60)
    assert child.exitcode == 0


def _linger(fd: int, ready, done) -> None:
    ready.set()  # alive, with whatever it inherited, until the parent has looked
    done.wait(60)

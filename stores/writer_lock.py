"""The file store's writers' lock: ``flock`` on a file beside the database,
held around each write transaction of :mod:`stores.sqlite_store`.

SQLite's busy handler sleeps 1, 2, 5, 10 ms ... between tries of its write
lock, so two processes that write small transactions in turn (two Spark
tasks checkpointing their keys) spend longer asleep than writing.  A writer
blocked in ``flock`` is woken by the kernel as soon as the holder lets go
(docs/benchmarks-spark.md, streaming per key).  Trying again after short
sleeps instead does not do as well there: the holder takes the lock again
for its next key before the sleeper looks.

``flock`` cannot time out, and a writer must not wait forever for a holder
that is stopped mid-write.  So a contended wait runs in the lock's own
waiter thread while the writer waits for it at most ``timeout`` seconds;
after that the writer goes on without the lock (SQLite's own lock, with its
busy timeout, keeps the database consistent, as it does for a writer
without ``fcntl``), and this lock is not used again: its waiter may still
take the file later, and lets it go at once.
"""

from __future__ import annotations

import os
import queue
import threading
import weakref

try:
    import fcntl
except ImportError:  # not POSIX: writers wait in SQLite's busy handler alone
    fcntl = None

__all__ = ["WriterLock", "open_writer_lock"]

#: Every lock of this process, for :func:`_after_fork_in_child`.
_open: "weakref.WeakSet[WriterLock]" = weakref.WeakSet()


def open_writer_lock(path: str) -> "WriterLock | None":
    """A descriptor of its own on the lock file ``path`` (``flock``
    excludes other open files, not this one nor its copies in forked
    children), or ``None`` where there is no ``fcntl`` or the file cannot be
    opened (a directory this process may not write to): then SQLite's lock
    alone orders the writers."""
    if fcntl is None:
        return None
    try:
        return WriterLock(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError:
        return None


class _Wait:
    """One contended wait, shared by the writer and the waiter thread."""

    __slots__ = ("taken", "abandoned", "done", "guard")

    def __init__(self) -> None:
        self.taken = self.abandoned = False
        self.done = threading.Event()
        self.guard = threading.Lock()


def _waiter(fd: int, requests: queue.SimpleQueue) -> None:
    """The waiter thread: takes the file for each request, until ``None``,
    then closes the descriptor (nothing else may, while it could be in
    ``flock`` with it)."""
    try:
        while (wait := requests.get()) is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with wait.guard:
                if wait.abandoned:  # the writer went on without it
                    fcntl.flock(fd, fcntl.LOCK_UN)
                else:
                    wait.taken = True
            wait.done.set()
    finally:
        os.close(fd)


class WriterLock:
    """The lock file, through one connection's descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.usable = True
        self.waiter: threading.Thread | None = None  # started at the first contended wait
        self._requests: queue.SimpleQueue | None = None  # to the waiter
        self._closed = False
        _open.add(self)

    def acquire(self, timeout: float) -> bool:
        """Take the file; ``False`` (not taken) after ``timeout`` seconds,
        or if an earlier wait timed out.  O(1) when it is free."""
        if not self.usable:
            return False
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if self._requests is None:
            requests = queue.SimpleQueue()
            waiter = threading.Thread(target=_waiter, args=(self.fd, requests), name="mta-file-writer-lock",
                                      daemon=True)
            waiter.start()  # set only once it runs: a lock whose thread failed to start still closes its file
            self._requests, self.waiter = requests, waiter
        wait = _Wait()
        self._requests.put(wait)
        try:
            wait.done.wait(timeout)
        except BaseException:  # interrupted (KeyboardInterrupt): neither keep the file nor leave it to the waiter
            if self._settle(wait):
                self.release()
            raise
        return self._settle(wait)

    def _settle(self, wait: _Wait) -> bool:
        """Whether the waiter took the file for ``wait``; if not, it lets
        the file go when it takes it, and this lock is not used again (the
        waiter may yet take the file with this descriptor)."""
        with wait.guard:
            taken = wait.taken
            wait.abandoned = not taken
        if not taken:
            self.usable = False
        return taken

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the descriptor (through the waiter thread, if it runs)."""
        if self._closed:
            return
        self._closed = True
        if self._requests is None:
            os.close(self.fd)
        else:
            self._requests.put(None)

    def _drop_inherited(self) -> None:
        """In a forked child: close the child's copy of the descriptor, so
        that a hold of the parent's is not kept alive by the child (a hold
        belongs to the open file, which fork shares), and never use it."""
        if not self._closed:
            self._closed, self.usable = True, False
            os.close(self.fd)


def _after_fork_in_child() -> None:
    for lock in list(_open):
        lock._drop_inherited()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

"""Store I/O off the engine's thread: one small thread pool per process for
the level queues' flushes, prefetches and deletes, and what waits on it.

The level queues (:mod:`stores.level_queue`) overlap store round trips with
the engine's work: a write or a read-ahead is submitted here and its result
taken when needed.  Backends that can send a request and read its reply
later (Redis's :class:`stores.redis_wire.DeferredChannel`) need no thread.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """One small pool per process for flushes, prefetches and deletes."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mta-store")
        return _executor


#: Background tasks submitted and not finished yet (see drain_background).
_inflight = 0
_idle = threading.Condition(threading.Lock())


def submit(fn, *args) -> Future:
    """Run ``fn(*args)`` on the background pool, counted in ``_inflight``."""
    global _inflight
    with _idle:
        _inflight += 1
    try:
        return _pool().submit(_counted, fn, args)
    except BaseException:
        _finished()
        raise


def _counted(fn, args):
    try:
        return fn(*args)
    finally:
        _finished()


def _finished() -> None:
    global _inflight
    with _idle:
        _inflight -= 1
        if not _inflight:
            _idle.notify_all()


def drain_background(timeout: float = 60.0) -> None:
    """Wait until every background task submitted so far (the flushes and
    prefetches of every engine in this process) has finished; returns at
    once when none is running.  Benchmarks use it to charge that work to the
    engine that queued it.  Raises ``TimeoutError`` after ``timeout`` s."""
    with _idle:
        if not _idle.wait_for(lambda: not _inflight, timeout):
            raise TimeoutError(f"background store I/O still running after {timeout} s")


def ready(future) -> bool:
    """Whether ``future``'s result is in, without reading from the network
    (a deferred request's reply is read only when its result is asked for)."""
    ready = getattr(future, "ready", None)
    return ready() if ready is not None else future.done()


class _Decoded:
    """A deferred read whose blobs become a level's elements when taken."""

    __slots__ = ("request", "queue", "first", "count", "group", "value", "error", "taken")

    def __init__(self, request, queue, first: int, count: int, group: int) -> None:
        self.request, self.queue, self.first, self.count, self.group = request, queue, first, count, group
        self.value = self.error = None
        self.taken = False

    def done(self) -> bool:
        return self.taken or self.request.done()

    def ready(self) -> bool:
        return self.taken or self.request.ready()

    def result(self):
        if not self.taken:
            self.taken = True
            try:
                self.value = self.queue.elements(self.first, self.count, self.group, self.request.result())
            except BaseException as exc:
                self.error = exc
        if self.error is not None:
            raise self.error
        return self.value

    def exception(self):
        try:
            self.result()
        except BaseException as exc:
            return exc
        return None

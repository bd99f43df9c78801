"""Store I/O off the engine's thread: one small thread pool per process for
the level queues' flushes, prefetches and deletes, and what waits on it.

The level queues (:mod:`stores.level_queue`) overlap store round trips with
the engine's work: a write or a read-ahead is submitted here and its result
taken when needed.  Backends that can send a request and read its reply
later (Redis's :class:`stores.redis_wire.DeferredChannel`) need no thread.
A forked child (PySpark's workers are forked) starts with a pool of its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Optional

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


def _forked() -> None:
    """In a forked child: a pool of its own.  The parent's pool object came
    along without its threads (a task submitted to it would never run, and
    a flush waiting for it would wait forever), its lock may have been held
    by a thread that is not here, and the parent's tasks are not the
    child's to wait for."""
    global _executor, _executor_lock, _inflight, _idle
    _executor, _executor_lock = None, threading.Lock()
    _inflight, _idle = 0, threading.Condition(threading.Lock())


os.register_at_fork(after_in_child=_forked)


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
    (a :class:`Pending` reply is read only when its result is asked for)."""
    return future.ready() if isinstance(future, Pending) else future.done()


class Pending:
    """A result that may not be in yet, read or computed when asked for:
    ``concurrent.futures.Future``'s consumer side (``done``, ``result``,
    ``exception``) plus ``ready``, which never does I/O.  The store's one
    hand-written future: a deferred Redis reply
    (:class:`stores.redis_wire.Request`), a read decoded when taken
    (:class:`Decoded`), and work that already ran (:meth:`of`).

    A producer finishes it with ``set_result`` / ``set_exception``;
    subclasses say how to make progress without blocking (``_poll``) and
    how to wait for it (``_wait``).  Each call is O(1) plus that hook."""

    __slots__ = ("_finished", "_value", "_error")

    def __init__(self) -> None:
        self._finished = False
        self._value: Any = None
        self._error: Optional[BaseException] = None

    @classmethod
    def of(cls, fn, *args) -> "Pending":
        """``fn(*args)`` run now, its value or its exception kept for ``result``."""
        done = cls()
        done.run(fn, *args)
        return done

    # -- the producer's side ----------------------------------------------
    def set_result(self, value: Any) -> None:
        self._value, self._finished = value, True

    def set_exception(self, exc: BaseException) -> None:
        self._error, self._finished = exc, True

    def run(self, fn, *args) -> None:
        """Finish with ``fn(*args)``'s value, or with what it raised."""
        try:
            self.set_result(fn(*args))
        except BaseException as exc:
            self.set_exception(exc)

    def _poll(self) -> None:
        """Make progress without blocking (read replies already there)."""

    def _wait(self) -> None:
        """Block until finished."""
        raise RuntimeError("a Pending with nothing to wait for was never finished")

    # -- the consumer's side ----------------------------------------------
    def ready(self) -> bool:
        """Whether the result is in (no I/O)."""
        return self._finished

    def done(self) -> bool:
        """Whether the result is in, reading what already arrived."""
        if not self.ready():
            self._poll()
        return self.ready()

    def result(self) -> Any:
        if not self._finished:
            self._wait()
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> Optional[BaseException]:
        try:
            self.result()
        except BaseException as exc:
            return exc
        return None


class Decoded(Pending):
    """A read whose blobs become a level's elements when taken (decoding
    and checking stay on the engine's thread)."""

    __slots__ = ("request", "queue", "first", "count", "group", "epoch")

    def __init__(self, request, queue, first: int, count: int, group: int, epoch: int) -> None:
        super().__init__()
        self.request, self.queue, self.first, self.count, self.group = request, queue, first, count, group
        self.epoch = epoch

    def ready(self) -> bool:
        return self._finished or ready(self.request)

    def _poll(self) -> None:
        self.request.done()

    def _wait(self) -> None:
        self.run(lambda: self.queue.elements(self.first, self.count, self.group, self.request.result(), self.epoch))

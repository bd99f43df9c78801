"""Claims and checkpoints of many windows of one store, each sent together.

A Spark task of a streaming query checkpoints every key's window of its
partition, one after the other, and makes them durable with one
:meth:`~stores.base.Store.sync` before its output leaves
(:mod:`spark_ops.task_stream`).  Each checkpoint ends in a compare-and-set
of its window's record: a round trip per key on a server.  A window opened
with ``batch=`` (:class:`stores.window.WindowStorage`) hands that
compare-and-set to its :class:`Batch` instead, and :meth:`Batch.commit`
sends every one waiting (:meth:`~stores.base.Store.swap_meta_many`: one
round trip per :data:`CHUNK` windows on the file store, one transaction,
and on standalone Redis; a store that cannot pipeline them has each window
write its own, :attr:`Batch.defers`), then finishes each checkpoint as it
would have finished alone: the window's new token, its clean-up, its
record remembered (:mod:`stores.meta_cache`).  The clean-ups' deletions of
pairs no checkpoint reads any more go out together after the last window
is finished (:meth:`~stores.base.Store.delete_ranges`: one round trip on
the file store and standalone Redis); one that fails is raised like a
failed clean-up (the records written still count, and the next clean-up
deletes them again).

Claims go the same way.  A window's claim swaps the record this process
remembers (:mod:`stores.meta_cache`): a round trip per key and micro-batch.
A task tells its batch the windows it will open, in order
(:meth:`Batch.expect`); opening the first builds it and the next ones up to
:data:`CHUNK` (:meth:`Batch.open`), their swaps sent in one round trip, and
opening each of those takes its storage, claimed.  A claim that reads the
record first (one this process does not remember, or whose remembered
records are seldom current), or whose swap lost, goes on in the next round
with the others that do, one round trip for their reads and one for their
compare-and-sets (:meth:`stores.window_owner.Ownership.claiming`); an error
is raised by the opening of its own window.  The heads of their resumed
levels, which each window would read at its first eviction, are read
together too.  A window claimed ahead and never opened is like
a claim whose owner died before it wrote: the next claim goes above it.

A checkpoint counts from its commit: nothing may rely on it before (the
task commits, syncs, then lets its output go).  Fencing is unchanged: a
stale window's compare-and-set is refused, and :meth:`Batch.commit`
raises its :class:`~stores.errors.FencingError` once every other window of
the batch is finished.  A window whose checkpoint waits commits the batch
before anything that must see it or that its clean-up must not: the
window's next checkpoint, its deletion, its opening again, a write of its
pairs.  A commit that fails part-way still deals with every window: those
whose round trip failed cannot tell if their checkpoint landed and take
no more checkpoints (opening the window again reads its record).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from .meta_cas import Swap
from .window_owner import CLAIM_DURABLE, READ, answer

__all__ = ["CHUNK", "Batch"]

#: Compare-and-sets per round trip, and windows claimed ahead at once:
#: bounds what a round trip writes (a streaming key's record is a few KB to
#: tens of KB) and the windows built before their keys run.
CHUNK = 128


class _Waiting(NamedTuple):
    window: str
    expected: Any  #: the token the window holds
    value: bytes  #: the record its checkpoint writes
    durable: bool
    finish: Callable[[Any, list], None]  #: finish(new token, epochs listed) once written
    refused: Callable[[], Exception]  #: the error for a refused compare-and-set
    lost: Callable[[BaseException], None]  #: told a commit failed before saying if it was written


class Batch:
    """The checkpoints waiting to be committed, of windows of ``store``
    (see the module docstring).  Used from one thread."""

    def __init__(self, store) -> None:
        self.store = store
        self._waiting: list[_Waiting] = []
        self._waiting_windows: set[str] = set()
        self._expected: list[str] = []
        self._at: dict[str, int] = {}  # window -> its place in _expected
        self._ahead: dict[str, tuple] = {}  # window -> (storage or None, error or None, its options)
        self._deletes: list | None = None  # the clean-up's deletions of the commit running, if one runs

    def expect(self, windows: Sequence[str]) -> None:
        """The windows the caller will open with this batch, in that order
        (replacing any told before): each opening then claims the next ones
        ahead.  O(windows)."""
        self._expected = list(windows)
        self._at = {w: i for i, w in enumerate(self._expected)}
        self._ahead = {}

    def open(self, window: str, options: dict):
        """The storage of ``window`` opened with ``options`` (those of
        :meth:`stores.base.Store.open_window`): the one claimed ahead, or
        claimed now with the expected windows after it (one round trip for
        their swaps), or built alone when not expected or claimed ahead with
        other options.  A checkpoint of it waiting in the batch is committed
        first: a window opened again resumes it.  Raises what its own claim
        raised.  O(:data:`CHUNK`) claims when it claims ahead, else
        O(waiting checkpoints)."""
        from .window import WindowStorage

        if window in self._waiting_windows:
            self.commit()  # its claim must see the checkpoint it made before
        if window not in self._ahead and window in self._at:
            self._claim_ahead(window, options)
        storage, error, given = self._ahead.pop(window, (None, None, None))
        self._at.pop(window, None)  # opened: never claimed ahead again
        if given != options:
            return WindowStorage(self.store, window, **options)
        if error is not None:
            raise error
        return storage

    def _claim_ahead(self, window: str, options: dict) -> None:
        """Build ``window``'s storage and those of up to :data:`CHUNK` - 1
        expected after it, without their claims, then make the claims in
        rounds: each round reads the records some claims need in one round
        trip and makes the compare-and-sets the others ask for in another
        (:meth:`stores.window_owner.Ownership.claiming`); a claim usually
        needs one round (a remembered record swapped) or two."""
        from .window import WindowStorage

        at = self._at[window]
        built = []
        active = []  # (storage, its claim's steps, the request it makes)
        added = []  # the windows this call put in _ahead
        try:
            for name in self._expected[at:at + CHUNK]:
                if name in self._ahead or name not in self._at or name in self._waiting_windows:
                    continue  # a window with a checkpoint waiting is claimed at its opening, after the commit
                added.append(name)
                try:
                    storage = WindowStorage(self.store, name, **options, _claim_later=True)
                    steps = storage.claiming(*storage.claim_options)
                    active.append((storage, steps, next(steps)))
                except StopIteration:  # pragma: no cover - a claim always asks the store something
                    pass
                except Exception as exc:  # noqa: BLE001 - raised by the opening of that window
                    self._ahead[name] = (None, exc, options)
                    continue
                self._ahead[name] = (storage, None, options)
                built.append(storage)
            while active:
                reads = [a for a in active if a[2] is READ]
                writes = [a for a in active if a[2] is not READ]
                try:
                    replies = self.store.read_meta_many([storage.window for storage, _, _ in reads]) if reads else []
                    if writes:
                        replies += map(Swap._make, self.store.swap_meta_many(
                            [(storage.window, *request) for storage, _, request in writes], durable=CLAIM_DURABLE))
                except Exception as exc:  # noqa: BLE001 - raised by the opening of each window
                    for storage, _, _ in active:
                        self._ahead[storage.window] = (None, exc, options)
                    return
                active = self._answered(reads + writes, replies, options)
        except BaseException:  # an interrupt: no window opens half-claimed, each is claimed at its opening
            for name in added:
                self._ahead.pop(name, None)
            raise
        self._read_heads([storage for storage in built if self._ahead[storage.window][0] is storage])

    def _answered(self, active: list, replies: list, options: dict) -> list:
        """Send each claim its reply; those that ask for more."""
        more = []
        for (storage, steps, _), reply in zip(active, replies):
            try:
                request = answer(steps, reply)
            except Exception as exc:  # noqa: BLE001 - raised by the opening of that window
                self._ahead[storage.window] = (None, exc, options)
                continue
            if request is not None:
                more.append((storage, steps, request))
        return more

    def _read_heads(self, storages: list) -> None:
        """The heads of the claimed windows' resumed levels, in one round
        trip (:meth:`stores.base.Store.read_ranges`), which each would read
        alone at its first miss (:meth:`stores.window.WindowStorage.read_heads`:
        a streaming key's window evicts every micro-batch).  A level's head
        is a group (:data:`stores.head_cache.MISS_BATCH` pairs), and its
        blobs wait as bytes until the window decodes them.  If the read
        fails, each window reads its own."""
        reads = [(storage, [r for _, _, r in storage.head_reads()]) for storage in storages if storage.heads_due]
        ranges = [(storage.window, *r) for storage, requests in reads for r in requests]
        if not ranges:
            return
        try:
            replies = iter(self.store.read_ranges(ranges))
        except Exception:  # noqa: BLE001 - each window reads its heads at its first miss, and raises there
            return
        for storage, requests in reads:
            storage.heads_ahead({r: next(replies) for r in requests})

    @property
    def defers(self) -> bool:
        """Whether checkpoints wait for :meth:`commit`: only where the store
        sends many compare-and-sets in one round trip
        (:attr:`~stores.base.Store.pipelines_windows`); elsewhere each window
        writes its record at its checkpoint, as it would without a batch,
        which then costs nothing held."""
        return self.store.pipelines_windows

    @property
    def waiting(self) -> int:
        """Checkpoints waiting for :meth:`commit`.  O(1)."""
        return len(self._waiting)

    def defer(self, window: str, expected: Any, value: bytes, durable: bool, finish: Callable[[Any, list], None],
              refused: Callable[[], Exception], lost: Callable[[BaseException], None]) -> None:
        """Wait to write ``value`` over the record of ``window`` (token
        ``expected``) until :meth:`commit`, which calls ``finish(token,
        epochs)`` once it is written, ``refused()`` for the error if the
        record changed, or ``lost(error)`` if the commit failed before it
        could tell.  O(1)."""
        self._waiting.append(_Waiting(window, expected, value, durable, finish, refused, lost))
        self._waiting_windows.add(window)

    def commit(self) -> None:
        """Write every waiting record by compare-and-set (a round trip per
        :data:`CHUNK` where the store pipelines them), finish each
        checkpoint written, send their clean-ups' deletions (one round trip
        where it pipelines them), then raise the first error: a refused window's
        :class:`~stores.errors.FencingError`, or what failed a round trip
        (its windows then cannot tell if they were written, and take no
        more checkpoints) or a checkpoint's clean-up.  Every window is
        dealt with, and nothing waits afterwards, whatever is raised.
        O(waiting)."""
        waiting, self._waiting, self._waiting_windows = self._waiting, [], set()
        errors: list[BaseException] = []
        if self._deletes is not None:  # within a commit: its deletions join that one's
            self._commit(waiting, errors)
        else:
            self._deletes = deletes = []
            sent = False
            try:
                self._commit(waiting, errors)
                if deletes:
                    self.store.delete_ranges([request for request, _ in deletes])
                sent = True
            except Exception as exc:  # noqa: BLE001 - a clean-up's failure, raised after the others
                errors.append(exc)
            finally:
                self._deletes = None
                if not sent:  # the windows keep their marks: their next clean-ups delete these
                    for _, undo in deletes:
                        undo()
        if errors:
            raise errors[0]

    def deleting(self, request: tuple, undo: Callable[[], None]) -> bool:
        """Take a clean-up's deletion ``(window, epoch, level, first group,
        groups)`` to send with the others of the commit running now, after
        every window of it is finished (one round trip where the store
        sends many windows' requests at once), ``undo()`` called if that
        fails; ``False`` when no commit runs.  O(1)."""
        if self._deletes is None:
            return False
        self._deletes.append((request, undo))
        return True

    def _commit(self, waiting: list, errors: list) -> None:
        """:meth:`commit`'s compare-and-sets and finishes, each error added
        to ``errors``; an interrupt (an error not an ``Exception``:
        ``KeyboardInterrupt``) leaves the windows not dealt with unsure,
        as a failed round trip does, and is raised at once."""
        dealt = 0  # the windows of ``waiting`` dealt with
        try:
            for start in range(0, len(waiting), CHUNK):
                part = waiting[start:start + CHUNK]
                try:
                    results = self.store.swap_meta_many([(w.window, w.expected, None, w.value) for w in part],
                                                        listing=True, durable=any(w.durable for w in part))
                except Exception as exc:  # noqa: BLE001 - raised once every window is dealt with
                    for w in part:
                        w.lost(exc)
                    errors.append(exc)
                    dealt += len(part)
                    continue
                for w, (done, token, epochs) in zip(part, results):
                    try:
                        if done:
                            w.finish(token, epochs)
                        else:
                            errors.append(w.refused())
                    except Exception as exc:  # noqa: BLE001 - a clean-up's failure, raised after the others
                        errors.append(exc)
                    dealt += 1
        except BaseException as exc:  # whether their records were written is unknown
            for w in waiting[dealt:]:
                w.lost(exc)
            raise

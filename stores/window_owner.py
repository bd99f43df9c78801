"""Who owns a window: the claim and the fencing of
:class:`stores.window.WindowStorage` (its ownership half).

Opening a window claims it (:meth:`Ownership._claim`): the checkpoint to
resume is chosen and checked, then the epoch in the metadata record is
raised by compare-and-set, or swapped without reading the record first when
this process wrote it last (:mod:`stores.meta_cache`).  A stale owner's
checkpoint, delete or read of a group a newer owner cleaned up is refused
with a :class:`~stores.errors.FencingError`, logged at WARNING on the
``stores.window`` logger.
"""

from __future__ import annotations

import logging
from typing import Any, Generator

from .errors import CasMismatch, FencingError, MissingData, StoreError
from .meta_cas import Swap
from .level_queue import StoreLevelQueue
from .meta_cache import Remembered, cache_of
from .steps import Before, label_of, resume_point
from .window_meta import clock_of, decode_meta, delete_fenced, epoch_base, new_meta, owner
from .window_packing import claimed_payloads

__all__ = ["CLAIM_DURABLE", "READ", "Ownership", "answer"]

#: What :meth:`Ownership.claiming` yields to have the window's record read.
READ = "read the record"

#: A claim's compare-and-sets are not synced: a claim lost to a power loss
#: goes with every write after it (the store orders them), and what makes
#: the checkpoint that commits those writes durable (its own sync, or the
#: Store.sync after a batch of them) syncs it too.
CLAIM_DURABLE = False

#: A stale engine's refused write, at WARNING (the ``stores`` package's logger;
#: named after :mod:`stores.window`, whose storage it fences).
_log = logging.getLogger("stores.window")


class Ownership:
    """The claim and the fencing of a :class:`stores.window.WindowStorage`
    (which holds the state: ``store``, ``window``, ``engine``, ``epoch``,
    ``_token``, ``_meta``, ``_packed``, ``_elements``)."""

    store: Any
    window: str
    engine: str
    epoch: int
    _token: Any
    _meta: dict
    _packed: dict
    _elements: dict
    label: Any

    def _claim(self, resume: bool | int | Before, group: int) -> None:
        """Become the window's owner: raise its epoch by compare-and-set
        (:meth:`claiming`, its requests made here one by one)."""
        steps = self.claiming(resume, group)
        request = next(steps, None)
        while request is not None:
            if request is READ:
                reply = self._call(self.store.read_meta, self.window)
            else:  # one request: swap_meta or cas_meta, as a batch's claim-ahead makes many
                reply = Swap._make(self._call(self.store.swap_meta_many, [(self.window, *request)],
                                              durable=CLAIM_DURABLE)[0])
            request = answer(steps, reply)

    def claiming(self, resume: bool | int | Before, group: int) -> Generator:
        """The claim, as a generator of the store requests it needs, each
        sent its reply: :data:`READ` (the record's ``(blob, token)``,
        :meth:`stores.base.Store.read_meta`) or ``(token, old blob, new
        blob)``, a compare-and-set of the record (``old`` ``None``: on the
        token alone), not durable (:data:`CLAIM_DURABLE`), whose outcome it is sent as a
        :class:`~stores.base.Swap` (what :meth:`stores.base.Store.swap_meta_many`
        returns for it).  :meth:`_claim`
        makes each request at once, a batch's claim-ahead those of many
        windows in one round trip (:mod:`stores.batch`).

        The checkpoint to resume is chosen and checked first, so an open that
        is refused (no such checkpoint, another engine's levels) leaves the
        current owner in charge.  A record this process wrote last
        (:mod:`stores.meta_cache`) is swapped without reading it first while
        such swaps tend to succeed, and is not decoded again when read
        unchanged."""
        cache = cache_of(self.store)
        known = cache.get(self.window)  # the record as this process left it
        swap = known is not None and cache.swapping()
        judged = swap  # whether this claim told the cache if its record was current
        record = None  # (blob, token) a failed swap returned: no need to read it again
        for _ in range(100):
            if swap:
                blob, token = known.blob, known.token  # assumed; the swap checks both
            else:
                blob, token = record if record is not None else (yield READ)
                record = None
                if not judged and known is not None:
                    cache.observed(token == known.token and blob == known.blob)
                    judged = True
            decoded = not (known is not None and token == known.token and blob == known.blob)
            if not decoded:
                meta, self._packed, self._elements = dict(known.meta), known.packed, known.elements
            else:
                meta = self._decode_meta(blob) if blob is not None else new_meta(epoch_base(), group)
            try:
                checkpoint = self._checkpoint_to_resume(meta, resume)
            except StoreError:
                if not swap:
                    raise
                swap = False  # what this process remembers may be outdated: the store's record decides
                continue
            if decoded:  # the record's parts as packed, for the next checkpoint to reuse
                self._packed, self._elements = claimed_payloads(blob, meta, checkpoint) if blob is not None \
                    else ({}, {})
            meta["epoch"] += 1
            meta["epochs"] = sorted(set(meta["epochs"]) | {meta["epoch"]})
            meta.update(used=clock_of(self.store)(), owner=owner())
            value = self._encode_meta(meta)
            if swap:
                done = yield token, blob, value
                cache.observed(done.done)
                swap = False
                if not done.done:  # another process wrote the record since: claim above what it holds
                    record = (done.blob, done.token)
                    continue
                self._token = done.token
            else:
                done = yield token, None, value
                if not done.done:
                    continue  # another process claimed it meanwhile: claim above it
                self._token = done.token
            break
        else:
            raise StoreError(f"window {self.window!r} in {self.store.url}: could not claim ownership")
        self._remember(value, meta)
        self.epoch = meta["epoch"]
        self.group = meta["group"]  # pairs per stored value, fixed for the window's life
        self.buffer_size = max(self.buffer_size, self.group)  # a group is written once complete
        self._meta = meta
        if checkpoint is not None:
            self.version, _, records, _ = checkpoint
            self.label = label_of(meta, self.version)
            if records:
                self.levels = [StoreLevelQueue.restore(self, m, rec) for m, rec in enumerate(records)]
                self.heads_due = True
                if not decoded and known.heads and self.version == known.meta["version"]:
                    # the record is the one this process wrote at this checkpoint: so are the head caches
                    for q in self.levels:
                        if q.level in known.heads:
                            q.adopt(*known.heads[q.level])

    def _checkpoint_to_resume(self, meta: dict, resume: bool | int | Before) -> list | None:
        """The retained ``[version, parent, records, engine]`` that ``resume``
        asks for (``None``: start empty), or a StoreError saying why not."""
        if isinstance(resume, Before):  # the run's latest step before this one (stores.steps)
            version, later = resume_point(meta, resume)
            if later is not None:
                raise FencingError(
                    f"window {self.window!r} in {self.store.url}: step {resume.step} of run {resume.run} cannot "
                    f"resume it, the run has checkpointed it at step {later} already (a stale attempt of an "
                    "older micro-batch, or a query whose checkpoint location lost micro-batches the store kept)")
            found = [c for c in meta["checkpoints"] if c[0] == version]
            return self._resumable(found[0]) if found else None
        if resume is False or (resume is True and not meta["checkpoints"]):
            return None
        version = meta["version"] if resume is True else resume
        found = [c for c in meta["checkpoints"] if c[0] == version]
        if not found:
            if not meta["checkpoints"]:
                raise StoreError(f"window {self.window!r} in {self.store.url} has no checkpoint {resume}: the store "
                                 "has lost the window since that checkpoint (replaced, restarted without persistence, "
                                 "its directory deleted, or swept by mta-spark gc), or the query was restarted with "
                                 "another name= than it ran with (its windows are under that name: restart it with "
                                 "that one); else restart the query with a new checkpoint location")
            raise StoreError(
                f"window {self.window!r} in {self.store.url}: checkpoint {version} is not "
                f"retained (have {sorted(c[0] for c in meta['checkpoints'])}); raise retain= to keep more"
            )
        return self._resumable(found[0])

    def _resumable(self, checkpoint: list) -> list:
        """``checkpoint``, or a StoreError if another engine wrote it."""
        if checkpoint[3] != self.engine:
            raise StoreError(
                f"window {self.window!r} in {self.store.url}: checkpoint {checkpoint[0]} was written by "
                f"{checkpoint[3]}, not {self.engine}: their level layouts differ (open it with "
                f"{checkpoint[3]}, or with resume=False to start the window afresh)"
            )
        return checkpoint

    def _remember(self, blob: bytes, meta: dict, heads: dict | None = None) -> None:
        """The record now holds ``blob`` (token ``self._token``): the next
        claim in this process may swap it without reading it, and resuming
        its newest checkpoint may take ``heads`` (the levels' head caches
        then, :func:`stores.head_cache.snapshot`) instead of reading them.
        ``meta`` (what the window holds, the clean-up's marks included) is
        never mutated after this."""
        self._meta = meta
        cache_of(self.store).put(self.window, Remembered(self._token, blob, meta, self._packed, self._elements, heads))

    def _delete(self) -> None:
        """Remove the window, fenced like a checkpoint: a stale engine must
        not delete what a newer owner took over (see :func:`delete_fenced`)."""
        # a window that never held a checkpoint (a batch window) has nothing durable to
        # protect: losing its emptied record to a power loss leaves at most a record
        # without checkpoints, which nothing resumes and stores.gc deletes as an orphan
        durable = bool(self._meta["checkpoints"])
        cache_of(self.store).forget(self.window, self._token)
        try:
            delete_fenced(self.store, self.window, self._meta, self._token, self._call, self._emptied,
                          durable=durable)
        except CasMismatch:
            raise self._fenced("delete") from None

    def _emptied(self, token, tombstone: dict) -> None:
        # a close(delete=True) retried after a failure part-way goes on from here
        self._token, self._meta = token, tombstone

    def missing(self, where: str) -> StoreError:
        """The error for a group that must exist but is gone: a FencingError
        when another owner holds the window (a newer one's clean-up may drop
        the stale engine's epochs, and a window made anew starts at another
        epoch, :func:`~stores.window_meta.epoch_base`, below this one's or
        above), else MissingData (the store lost it)."""
        blob, _ = self._call(self.store.read_meta, self.window)
        meta = self._decode_meta(blob) if blob is not None else None
        if meta is not None and meta["epoch"] != self.epoch:
            return self._fenced("read", where)
        return MissingData(f"{where} is missing from the store (was it restarted without "
                           "persistence?); resume from a store that kept the data")

    def _fenced(self, what: str, where: str | None = None) -> FencingError:
        blob, _ = self._call(self.store.read_meta, self.window)
        now = self._decode_meta(blob) if blob is not None else {"epoch": "none (deleted)"}
        # a window made anew starts at a random epoch (window_meta.epoch_base): above this one's or below
        taken = ("the window was deleted since this engine opened it" if blob is None
                 else "a newer owner took it over, or the window was deleted and made anew since this engine "
                 "opened it" if now["epoch"] > self.epoch
                 else "the window was deleted and made anew since this engine opened it")
        error = FencingError(
            f"{where or f'window {self.window!r} in {self.store.url}'}: {what} refused, the window "
            f"is now owned by epoch {now['epoch']} and this engine holds epoch {self.epoch}; "
            f"{taken} (this engine is stale and must stop)")
        _log.warning("%s", error)
        return error

    def _decode_meta(self, blob: bytes) -> dict:
        return decode_meta(blob, f"window {self.window!r} in {self.store.url}")


def answer(steps: Generator, reply: Any) -> Any:
    """``steps.send(reply)``: the generator's next request, or ``None`` when
    it has finished."""
    try:
        return steps.send(reply)
    except StopIteration:
        return None

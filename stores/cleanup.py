"""A window's clean-up after each checkpoint: the pairs no retained
checkpoint can read any more, and the epochs nothing references.

Called by :meth:`stores.window.WindowStorage.checkpoint` once the new
record is committed; its marks (``gc``, ``epochs``) are committed with the
next write of the record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .window import WindowStorage


def level_marks(levels: list) -> list[tuple]:
    """What :func:`collect_garbage` reads of each level at a checkpoint:
    ``(level, lo, written, segments)``, the segments list itself (the
    clean-up trims it).  Held instead of the levels while a checkpoint
    waits in a batch (:mod:`stores.batch`): a level holds its buffer and
    cache.  O(levels)."""
    return [(q.level, q.lo, q.written, q.segments) for q in levels]


def collect_garbage(storage: "WindowStorage", marks: list[tuple], written: dict[int, int],
                    listed: list[int]) -> None:
    """After a checkpoint of levels ``marks`` (:func:`level_marks`) of
    ``storage``, whose levels had written ``written`` pairs (level ->
    pairs, the discarded levels' too, ``WindowStorage._written``): delete pairs below
    the head of the live levels and of every retained checkpoint, and drop
    epochs nothing references (``listed``: the epochs the store held pairs
    of when the checkpoint committed).  One ``delete_pairs`` per level and
    epoch whose head moved past a group (sent with the other windows' in
    one round trip where a batch commits them), one ``drop_epoch`` per epoch
    dropped; O(levels x retained checkpoints) otherwise.

    The clean-up is committed with the next checkpoint; repeating it
    after a crash is harmless (deleting a missing key is a no-op)."""
    meta = storage._meta
    heads: dict[int, int] = {}  # level -> lowest pair anyone may still read
    live_epochs = {storage.epoch}
    for level, lo, _, segments in marks:
        heads[level] = lo >> 1
        live_epochs.update(e for e, _ in segments)
    ends = dict(written)  # level -> pairs possibly written
    for _, _, records, _ in meta["checkpoints"]:
        for m, rec in enumerate(records):
            heads[m] = min(heads.get(m, rec["lo"] >> 1), rec["lo"] >> 1)
            ends[m] = max(ends.get(m, 0), rec["stored"])
            live_epochs.update(e for e, _ in rec["segments"])
    gc, deleted = list(meta["gc"]), 0
    for m in range(max([len(gc)] + [m + 1 for m in ends])):
        if m == len(gc):
            gc.append(0)
        end = min(heads.get(m, ends.get(m, 0)), ends.get(m, 0))
        if gc[m] < end:
            first, stop = gc[m] // storage.group, end // storage.group  # groups wholly below end
            for epoch in meta["epochs"]:
                if epoch in live_epochs and first < stop:
                    storage.clean_pairs(epoch, m, first, stop - first)
            deleted += end - gc[m]
            gc[m] = end
    storage.counters.pairs_deleted += deleted  # after every clean_pairs: a batch's undo takes it back whole
    # The store's own list, not the record's: an epoch it does not list
    # holds no pairs (a claim that never wrote leaves nothing to drop),
    # and a zombie owner may have written again under an epoch this
    # window already dropped; epochs above ours belong to a newer owner
    # and are never touched.
    for epoch in listed:
        if epoch not in live_epochs and epoch < storage.epoch:
            storage._call(storage.store.drop_epoch, storage.window, epoch)
    meta["gc"] = gc
    meta["epochs"] = sorted(live_epochs)
    for level, lo, written, segments in marks:  # forget segments wholly below the head
        if written <= lo >> 1:  # the head is past every pair this level wrote
            segments.clear()
        while len(segments) > 1 and segments[1][1] <= gc[level]:
            del segments[0]

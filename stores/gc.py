"""Finding and deleting orphaned windows (``Store.windows``, ``Store.sweep``,
``mta-spark gc``).

A window stays in its store until an engine deletes it: a killed batch task
attempt, a job whose executors died, an abandoned streaming query leave
theirs behind.  No key has a time to live (a live streaming window may go
untouched for as long as its key gets no rows), so orphans are found by
age instead: every open and checkpoint records the wall-clock time in the
window's metadata (``used``, see :mod:`stores.window`), and a window not
used for ``older_than`` seconds is taken to be abandoned.

What each window found is (:attr:`WindowInfo.kind`):

* ``"window"`` -- a record with a time: held while ``used`` is less than
  ``older_than`` ago, an orphan after that;
* ``"deleting"`` -- an emptied record, left by a delete that was
  interrupted: it holds no checkpoint, so it is never held;
* ``"no record"`` -- pairs without a metadata record (written by a stale
  engine after its window was deleted): nobody can resume them, never held;
* ``"untimed"`` -- a record written before records had a time: its age is
  unknown, so it is always held (reopening or checkpointing it once stamps it);
* ``"unreadable"`` -- a record that does not decode (another version's, or
  damaged): always held, never deleted.

Deleting is fenced exactly like an engine's own delete
(:func:`stores.window.delete_fenced`): the record read when listing is
emptied by compare-and-set, so a window opened or checkpointed between the
listing and the deletion is left alone (counted in :attr:`Sweep.changed`),
and an owner that opens it after that starts afresh above the deleted
epochs (once the record is gone, at a random epoch:
:func:`stores.window_meta.epoch_base`).  Every pair of every epoch goes
(``drop_epoch``), then the record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .checks import check_window
from .errors import CasMismatch, CorruptValue, FormatVersionError, StoreConfigError, StoreError
from .window import GROUP_SIZE, clock_of, decode_meta, delete_fenced, new_meta

#: Kinds of :class:`WindowInfo` a sweep may delete once unused for long enough.
AGED = "window"
DELETING = "deleting"
NO_RECORD = "no record"
UNTIMED = "untimed"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class WindowInfo:
    """One window of a store, as :meth:`Store.windows` found it."""

    name: str
    #: see the module docstring: window, deleting, no record, untimed, unreadable
    kind: str
    #: wall-clock seconds of its last open or checkpoint (None: not recorded)
    used: Optional[float]
    #: seconds since ``used`` at the time of the listing (None: unknown)
    idle: Optional[float]
    #: who last opened it ("host pid N"), when recorded
    owner: Optional[str]
    #: the epoch of its current (or last) owner
    epoch: Optional[int]
    #: a live owner may hold it: a sweep with the same ``older_than`` keeps it
    held: bool
    token: Any = field(default=None, repr=False, compare=False)
    meta: Optional[dict] = field(default=None, repr=False, compare=False)


@dataclass
class Sweep:
    """What :meth:`Store.sweep` did (or, with ``dry_run``, would do)."""

    #: windows found in the store
    found: int
    #: held windows, left alone
    kept: int
    #: windows deleted (dry run: that would be deleted)
    deleted: list = field(default_factory=list)
    #: orphans not deleted because they were used (or deleted) since the listing
    changed: list = field(default_factory=list)
    dry_run: bool = False


def check_age(older_than: Any) -> float:
    if isinstance(older_than, bool) or not isinstance(older_than, (int, float)) \
            or not 0 <= older_than < float("inf"):
        raise StoreConfigError(f"older_than must be a number of seconds >= 0, got {older_than!r}")
    return float(older_than)


def list_windows(store, older_than: Optional[float] = None, *,
                 now: Optional[float] = None) -> list[WindowInfo]:
    """Every window of ``store``, sorted by name, with whether a live owner
    may hold it: a window whose record was used less than ``older_than``
    seconds before ``now`` (default: the store's clock) is held; without
    ``older_than`` every timed record is.

    Round trips: :meth:`Store.window_names`, then one ``read_meta`` per
    window: O(windows)."""
    if older_than is not None:
        older_than = check_age(older_than)
    now = clock_of(store)() if now is None else float(now)
    out = []
    for name in store.window_names():
        try:
            check_window(name)
        except StoreError:
            continue  # a key another application wrote under the same prefix
        blob, token = store.read_meta(name)
        out.append(_info(store, name, blob, token, older_than, now))
    return out


def _info(store, name: str, blob: Optional[bytes], token: Any, older_than: Optional[float],
          now: float) -> WindowInfo:
    if blob is None:
        return WindowInfo(name, NO_RECORD, None, None, None, None, False, token, None)
    try:
        meta = decode_meta(blob, f"window {name!r} in {store.url}")
    except (CorruptValue, FormatVersionError):
        return WindowInfo(name, UNREADABLE, None, None, None, None, True, token, None)
    used = meta.get("used")
    used = float(used) if isinstance(used, (int, float)) and not isinstance(used, bool) else None
    owner = meta.get("owner") if isinstance(meta.get("owner"), str) else None
    idle = None if used is None else now - used
    if not meta["epochs"] and not meta["checkpoints"]:
        kind, held = DELETING, False
    elif used is None:
        kind, held = UNTIMED, True
    else:
        # a record from the future (clocks apart) is as recent as can be
        kind, held = AGED, older_than is None or idle < older_than
    return WindowInfo(name, kind, used, idle, owner, meta["epoch"], held, token, meta)


def sweep(store, older_than: float, *, dry_run: bool = False, now: Optional[float] = None,
          progress: Optional[Callable[[int, int], None]] = None) -> Sweep:
    """Delete every window not held with ``older_than`` (see
    :func:`list_windows`): every pair of every epoch, then the record.
    ``dry_run`` deletes nothing and reports what would go.  ``progress(done,
    total)`` is called after each orphan.

    Round trips: the listing's, then about 4 + the window's epochs per
    orphan deleted (its pairs: O(pairs) keys removed)."""
    older_than = check_age(older_than)
    return sweep_listed(store, list_windows(store, older_than, now=now), dry_run=dry_run,
                        progress=progress)


def sweep_listed(store, found: list[WindowInfo], *, dry_run: bool = False,
                 progress: Optional[Callable[[int, int], None]] = None) -> Sweep:
    """:func:`sweep` of a listing already made by :func:`list_windows` (a
    window used since is left alone, as in a sweep)."""
    orphans = [w for w in found if not w.held]
    result = Sweep(found=len(found), kept=len(found) - len(orphans), dry_run=dry_run)
    for done, w in enumerate(orphans, 1):
        if dry_run:
            result.deleted.append(w.name)
        else:
            meta = w.meta if w.meta is not None else new_meta(0, GROUP_SIZE)
            try:
                delete_fenced(store, w.name, meta, w.token)
            except CasMismatch:
                result.changed.append(w.name)
            else:
                result.deleted.append(w.name)
        if progress is not None:
            progress(done, len(orphans))
    return result

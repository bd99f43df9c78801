"""The window-storage protocol: what an engine built with ``store=`` needs.

``mta`` never imports a store.  A level engine (:class:`mta.tree.LevelEngine`)
built with ``store=s, window_id=w`` calls ``s.open_window(w, engine=...,
mutable_tail=..., buffer_size=..., cache_size=..., **options)`` and uses the
:class:`WindowStorage` it returns; any object with that method is a
:class:`WindowStore`.  The package ``stores`` implements both for memory,
SQLite files, Redis and Couchbase.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from .level_queue import LevelQueue

#: Final pairs a store-backed level buffers before one write round trip.
DEFAULT_BUFFER_SIZE = 512
#: Pairs a store-backed level reads ahead of its head.
DEFAULT_CACHE_SIZE = 512


class WindowStorage(Protocol):
    """One window's storage, as the engine sees it."""

    #: The checkpointed level queues when resuming, else ``None``.
    levels: Optional[list[LevelQueue]]

    def new_level(self, level: int, lo: int) -> LevelQueue:
        """A fresh, empty level queue whose first position is ``lo``."""

    #: The label of the checkpoint resumed (``None``: none, or started empty).
    label: Any

    def checkpoint(self, levels: list[LevelQueue], label: Any = None) -> int:
        """Make ``levels`` durable with ``label``, fenced by owner epoch; the
        checkpoint's version."""

    def close(self, levels: list[LevelQueue], delete: bool = False) -> None:
        """Wait for background I/O; with ``delete``, remove the window from the store."""

    @property
    def stats(self) -> Any:
        """Round trips, pairs written and read, cache hits and misses."""


@runtime_checkable
class WindowStore(Protocol):
    """Where windows live: claims, resumes and opens one window's storage."""

    def open_window(self, window: str, *, engine: str, mutable_tail: int, buffer_size: int,
                    cache_size: int, **options: Any) -> WindowStorage:
        """Claim ``window`` for a new owner; ``engine`` names the level layout
        (a checkpoint is resumed only by the engine that wrote it) and
        ``mutable_tail`` how many trailing elements the engine may rewrite.

        A store may also have ``check_value(value)``, raising ``TypeError``
        for a value it cannot hold: :class:`mta.Window` calls it on each
        lifted value before the value enters the engine; and a true
        ``TAKES_ELEMENT_ARITY``, when ``open_window`` takes
        ``element_arity=k`` (each element is a tuple of ``k`` values, and a
        stored element of another shape is corrupt): :class:`mta.Window`
        then passes its own, 2."""

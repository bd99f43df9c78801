"""``memory://`` -- an in-process store (tests, single-process runs).

``memory://`` opens a private, empty store.  ``memory://NAME`` shares one
in-process space among every store opened with the same name (in this
process only: a forked child gets a copy as of the fork, and nothing is
persisted).  :func:`reset_memory` forgets a named space.

Thread-safe (one lock per space).  Round trips are counted exactly like on
the other backends, so tests can reason about them.
"""

from __future__ import annotations

import threading
from typing import Any, Optional
from urllib.parse import urlsplit

from .base import STORE_OPTIONS, Store, Token, cas_mismatch
from .meta_cas import first_token
from .errors import StoreConfigError
from .urls import redact_url


class _Space:
    """The data of one memory store: window -> epoch -> level -> {idx: blob}
    and window -> (version, blob)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pairs: dict[str, dict[int, dict[int, dict[int, bytes]]]] = {}
        self.meta: dict[str, tuple[int, bytes]] = {}


_spaces: dict[str, _Space] = {}
_spaces_lock = threading.Lock()


def reset_memory(name: Optional[str] = None) -> None:
    """Forget the named memory space (every space when ``name`` is None)."""
    with _spaces_lock:
        if name is None:
            _spaces.clear()
        else:
            _spaces.pop(name, None)


def memory_name(url: str) -> str:
    """The space a ``memory://NAME`` URL names (``""``: a store of its own)."""
    parts = urlsplit(url)
    if parts.scheme != "memory":
        raise StoreConfigError(f"not a memory:// URL: {redact_url(url)!r}")
    if parts.query or parts.fragment:
        raise StoreConfigError(f"memory:// URLs take no query or fragment: {redact_url(url)!r}")
    return (parts.netloc + parts.path).strip("/")


class MemoryStore(Store):
    scheme = "memory"

    def __init__(self, url: str = "memory://", **options: Any) -> None:
        name = memory_name(url)
        unknown = set(options) - STORE_OPTIONS
        if unknown:
            raise StoreConfigError(f"unknown option(s) for memory:// stores: "
                                   f"{', '.join(sorted(unknown))}")
        super().__init__(f"memory://{name}", **options)
        self.name = name or None
        if name:
            with _spaces_lock:
                self._space = _spaces.setdefault(name, _Space())
        else:
            self._space = _Space()

    def _levels(self, window: str, epoch: int) -> Optional[dict[int, dict[int, bytes]]]:
        return self._space.pairs.get(window, {}).get(epoch)

    def _write_pairs(self, window: str, epoch: int, level: int, first: int,
                     blobs: list[bytes]) -> None:
        sp = self._space
        with sp.lock:
            lvl = sp.pairs.setdefault(window, {}).setdefault(epoch, {}).setdefault(level, {})
            for i, b in enumerate(blobs, first):
                lvl[i] = b

    def _read_pairs(self, window: str, epoch: int, level: int, first: int,
                    count: int) -> list[Optional[bytes]]:
        sp = self._space
        with sp.lock:
            lvl = (self._levels(window, epoch) or {}).get(level)
            if not lvl:
                return [None] * count
            get = lvl.get
            return [get(i) for i in range(first, first + count)]

    def _read_pairs_many(self, window: str, ranges: list) -> list[list[Optional[bytes]]]:
        return [self._read_pairs(window, *r) for r in ranges]  # a stored group never changes

    def _delete_pairs(self, window: str, epoch: int, level: int, first: int,
                      count: int) -> None:
        sp = self._space
        with sp.lock:
            lvl = (self._levels(window, epoch) or {}).get(level)
            if not lvl:
                return
            if count > len(lvl):
                for i in [i for i in lvl if first <= i < first + count]:
                    del lvl[i]
            else:
                pop = lvl.pop
                for i in range(first, first + count):
                    pop(i, None)

    def _drop_epoch(self, window: str, epoch: int, ranges: Any) -> None:
        sp = self._space
        with sp.lock:
            epochs = sp.pairs.get(window)
            if epochs is not None:
                epochs.pop(epoch, None)
                if not epochs:
                    del sp.pairs[window]

    def _list_epochs(self, window: str) -> list[int]:
        with self._space.lock:
            return list(self._space.pairs.get(window, {}))

    def _read_meta(self, window: str) -> tuple[Optional[bytes], Token]:
        with self._space.lock:
            rec = self._space.meta.get(window)
        if rec is None:
            return None, None
        return rec[1], rec[0]

    def _cas_meta(self, window: str, expected: Token, value: bytes, retry: bool) -> Token:
        sp = self._space
        with sp.lock:
            rec = sp.meta.get(window)
            current = None if rec is None else rec[0]
            if current != expected or (expected is None and rec is not None):
                raise cas_mismatch(window, expected, current)
            version = first_token(window, value) if rec is None else rec[0] + 1
            sp.meta[window] = (version, value)
            return version

    def _delete_meta(self, window: str, expected: Token) -> None:
        sp = self._space
        with sp.lock:
            rec = sp.meta.get(window)
            if rec is not None and rec[0] != expected:
                raise cas_mismatch(window, expected, rec[0])
            sp.meta.pop(window, None)

    def _delete_window(self, window: str) -> None:
        sp = self._space
        with sp.lock:
            sp.pairs.pop(window, None)
            sp.meta.pop(window, None)

    def _window_names(self) -> list[str]:
        with self._space.lock:
            return [*self._space.meta, *self._space.pairs]

    def _ping(self) -> None:
        pass

    def _close(self) -> None:
        self._space = _Space() if self.name is None else self._space

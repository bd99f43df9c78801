"""The few store calls spark_ops makes: a stand-in for the stores API that
the stores package is gaining (``stores.normalize_url``,
``stores.pooled_store``, ``Store.open_fifo``, ``mta.storage``'s default
sizes), written with those names so that switching is a change of imports
here and nowhere else."""

from __future__ import annotations

import functools
import re
import threading

#: Pairs per level a store-backed window buffers and caches (``buffer_size``, ``cache_size``).
DEFAULT_BUFFER_SIZE = 512
DEFAULT_CACHE_SIZE = 512


def normalize_url(url: str) -> str:
    """File stores as absolute ``file://`` URLs (executors may not share the
    driver's working directory); other URLs unchanged.  Raises
    :class:`stores.StoreConfigError` for a bad file URL."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*):", url)
    if m is None or m.group(1).lower() == "file" or (len(m.group(1)) == 1 and "://" not in url):
        from stores.errors import StoreConfigError, StoreError
        from stores.sqlite_store import parse_file_url

        try:
            return "file://" + parse_file_url(url)
        except StoreError as e:
            raise StoreConfigError(str(e)) from None
    return url


_pool: dict = {}
_pool_lock = threading.Lock()


def pooled_store(url: str, options: dict):
    """The process's store for ``url`` (one connection pool per executor process)."""
    import stores

    key = (url, tuple(sorted(options.items())))
    with _pool_lock:
        store = _pool.get(key)
        if store is None or store.closed:
            store = _pool[key] = stores.open_store(url, **options)
        return store


@functools.cache
def _fifo_class():
    from stores.window import StoreLevelQueue

    class Fifo(StoreLevelQueue):
        __slots__ = ()

        def close(self, *, delete: bool = False) -> None:
            self._w.close([self], delete=delete)

    return Fifo


def open_fifo(store, window_id: str, *, buffer_size: int, cache_size: int):
    """A fresh FIFO level queue in ``store`` next to a window's levels, with ``close(*, delete=False)``."""
    queue = store.open_window(window_id, engine="TimeFIFO", mutable_tail=0, buffer_size=buffer_size,
                              cache_size=cache_size, resume=False).new_level(0, 0)
    queue.__class__ = _fifo_class()  # the stand-in's one reach into the queue: its storage, to close it
    return queue

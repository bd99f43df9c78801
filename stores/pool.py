"""One open store per URL and options per process.

Spark runs many tasks, one after another and side by side, in each
executor's Python workers; they share the worker's store (and so its
connection pool) instead of connecting once per window.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

_pool: dict = {}
_lock = threading.Lock()


def pooled_store(url: str, options: Optional[dict[str, Any]] = None):
    """The process's store for ``url`` and ``options`` (opened on first use,
    and again if it was closed)."""
    from . import open_store

    options = dict(options or {})
    key = (url, tuple(sorted(options.items())))
    with _lock:
        store = _pool.get(key)
        if store is None or store.closed:
            store = _pool[key] = open_store(url, **options)
        return store

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
    and again if it was closed).  Options equal as values share a store,
    dicts and lists among them (Couchbase's ``cluster_options``)."""
    from . import open_store

    options = dict(options or {})
    key = (url, tuple(sorted((name, frozen(value, name)) for name, value in options.items())))
    with _lock:
        store = _pool.get(key)
        if store is None or store.closed:
            store = _pool[key] = open_store(url, **options)
        return store


def frozen(value: Any, name: str) -> Any:
    """A hashable form of ``value`` equal for equal values: a dict as its
    items sorted by key, a list, tuple or set as a tuple tagged with its
    type (a list and a tuple of the same items are different options), any
    other value as itself.  ``name``: the option it is, for the TypeError
    of a value that is not hashable (its value is not shown: it may be a
    secret).  O(size of ``value``)."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda item: (type(item[0]).__name__, repr(item[0])))
        return (dict, tuple((k, frozen(v, f"{name}[{k!r}]")) for k, v in items))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(frozen(v, f"{name}[{i}]") for i, v in enumerate(value)))
    if isinstance(value, (set, frozenset)):
        return (frozenset, frozenset(frozen(v, name) for v in value))
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"pooled_store: option {name} is a {type(value).__name__}, which cannot key the "
                        "process's pool of stores (give a dict, list, tuple, set or a hashable value)") from None
    return value

"""A Couchbase store's window index, kept up to date as windows come and go.

Couchbase cannot list keys, so a store names its windows in the index
documents (:mod:`stores.couchbase_layout` gives their layout and cost): a
window's name is added before its metadata record is created and removed
after the record is deleted.  These functions work on a
:class:`stores.couchbase_store.CouchbaseStore` through its collection,
``_get`` and ``_kw``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import codec
from . import couchbase_layout as layout
from .couchbase_errors import CAS, EXISTS, NOT_FOUND
from .couchbase_layout import exc_kind
from .errors import StoreError

if TYPE_CHECKING:
    from .couchbase_store import CouchbaseStore

#: Compare-and-set attempts on a shard of the window index before giving up.
INDEX_ATTEMPTS = 50


def update(store: "CouchbaseStore", window: str, add: bool) -> int:
    """Add ``window`` to its shard of the window index (or remove it), by
    compare-and-set on the shard; returns the SDK calls made (2 when it
    changes, 1 when it is already so, more under contention)."""
    coll = store._collection()
    key = layout.index_key(window)
    calls = 0
    for _ in range(INDEX_ATTEMPTS):
        blob, cas = store._get(key)
        calls += 1
        names = layout.decode_index(blob, f"store {store.url}: document {key!r}")
        if (window in names) == add:
            return calls
        names = names | {window} if add else names - {window}
        calls += 1
        try:
            if cas is None:
                coll.insert(key, codec.encode(sorted(names)), **store._kw())
            elif names:
                coll.replace(key, codec.encode(sorted(names)), cas=cas, **store._kw())
            else:
                coll.remove(key, cas=cas, **store._kw())
            return calls
        except Exception as exc:
            if not exc_kind(exc) & {EXISTS, CAS, NOT_FOUND}:
                raise
            # another store changed the shard meanwhile: read it again
    raise StoreError(f"store {store.url}: window index document {key!r} changed under "
                     f"{INDEX_ATTEMPTS} compare-and-set attempts in a row")


def unindex(store: "CouchbaseStore", window: str) -> None:
    """Take a deleted window out of the index.  A store creating it again
    meanwhile may have found its name still listed and not added it: if
    its record exists now, the name goes back."""
    calls = update(store, window, add=False)
    blob, _ = store._get(store.meta_key(window))
    calls += 1
    if blob is not None:
        calls += update(store, window, add=True)
    store.stats.add(round_trips=calls)

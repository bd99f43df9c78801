"""Pluggable storage for the engines' level queues.

``open_store(url, **options)`` picks a backend by URL scheme:

=====================================  ==========================================
``memory://`` / ``memory://NAME``      in-process dicts (NAME shares one space)
``file:///abs/dir``, ``file:rel/dir``,  SQLite in WAL mode, ``<dir>/mta.sqlite3``
a plain path
``redis://``, ``rediss://``,           Redis (redis-py; hiredis when installed)
``redis+cluster://``, ``rediss+cluster://``
``couchbase://``, ``couchbases://``    Couchbase (SDK 4, imported lazily)
=====================================  ==========================================

Every store implements :class:`Store`: pair blobs keyed by ``(window,
epoch, level, index)`` written, read and deleted by ranges in one round trip
each, plus one metadata record per window with compare-and-set.  Errors
are in :mod:`stores.errors`; values are turned into blobs by
:mod:`stores.codec` (msgpack with extension types, never pickle).

Windows nobody uses any more (a killed task attempt's, an abandoned
query's) are found by the last use every window records:
``store.windows(older_than)`` lists them and ``store.sweep(older_than)``
deletes them (:mod:`stores.gc`; ``mta-spark gc`` on the command line).

Network backends connect lazily: ``open_store`` does no I/O and a backend
that is down makes the first operation raise :class:`StoreUnavailable`
after the bounded retries.

This package depends on :mod:`mta` and msgpack, and never on pyspark.
"""

from __future__ import annotations

from typing import Any, Callable

from .base import Store, Token
from .batch import Batch
from .checks import MAX_WINDOW_BYTES
from .stats import StoreStats
from .codec import decode, encode, register_codec, registered_codecs, unregister_codec
from .errors import (CasMismatch, CodecRegistrationError, CorruptValue, FencingError, FormatVersionError,
                     MissingData, StoreAuthenticationError, StoreClosed, StoreConfigError,
                     StoreError, StoreUnavailable, UnknownWindowOption)
from .pool import pooled_store
from .runs import Progress, check_run, finish_run, tasks_of
from .steps import Before
from .urls import normalize_url, redact_url, refused, scheme_of, typo_hint
from .window import WindowStorage

_backends: dict[str, Callable[..., Store]] = {}
_url_checks: dict[str, Callable[[str], Any]] = {}


def register_backend(scheme: str, factory: Callable[..., Store],
                     check: Callable[[str], Any] | None = None) -> None:
    """Make ``open_store`` open URLs of ``scheme`` with ``factory(url,
    **options)`` (a plug-in point for other backends); ``check(url)``, if
    given, is the parsing the factory does first, without connecting: it
    raises :class:`StoreConfigError` for a URL the factory would refuse."""
    _backends[scheme.lower()] = factory
    if check is None:
        _url_checks.pop(scheme.lower(), None)
    else:
        _url_checks[scheme.lower()] = check


def _memory(url: str, **options: Any) -> Store:
    from .memory_store import MemoryStore
    return MemoryStore(url, **options)


def _file(url: str, **options: Any) -> Store:
    from .sqlite_store import SQLiteStore
    return SQLiteStore(url, **options)


def _redis(url: str, **options: Any) -> Store:
    from .redis_store import RedisStore
    return RedisStore(url, **options)


def _couchbase(url: str, **options: Any) -> Store:
    from .couchbase_store import CouchbaseStore
    return CouchbaseStore(url, **options)


# each backend's URL parser, as its store's constructor runs it: modules that import no client library
def _memory_url(url: str) -> None:
    from .memory_store import memory_name
    memory_name(url)


def _file_url(url: str) -> None:
    from .urls import parse_file_url
    parse_file_url(url)


def _redis_url(url: str) -> None:
    from .redis_url import parse_redis_url
    parse_redis_url(url)


def _couchbase_url(url: str) -> None:
    from .couchbase_url import parse_couchbase_url
    parse_couchbase_url(url)


for _s, _f, _c in (("memory", _memory, _memory_url), ("file", _file, _file_url),
                   *((s, _redis, _redis_url) for s in ("redis", "rediss", "redis+cluster", "rediss+cluster")),
                   ("couchbase", _couchbase, _couchbase_url), ("couchbases", _couchbase, _couchbase_url)):
    register_backend(_s, _f, _c)


def open_store(url: str, **options: Any) -> Store:
    """Open the store at ``url`` (see the table in the module docstring).

    Options common to every backend: ``retries`` (5), ``backoff`` (0.05 s),
    ``backoff_max`` (2 s), ``timeout`` (6 s, one operation with its retries).  Backend options are documented in
    :mod:`stores.sqlite_store`, :mod:`stores.redis_store` and
    :mod:`stores.couchbase_store`.  An unknown scheme or a bad option raises
    :class:`StoreConfigError`.
    """
    return _factory(url)(url, **options)


def check_url(url: str) -> str:
    """``url``; raises :class:`StoreConfigError` if no backend opens it (an
    unknown scheme, naming the known ones) or its backend's URL parser
    refuses it (a malformed URL, an unknown parameter, a Redis database or
    timeout that is not a number, ...), as :func:`open_store` would, without
    connecting: a job checks its URL before any task runs.  The message
    shows the URL redacted."""
    _factory(url)
    check = _url_checks.get(scheme_of(url) or "file")
    if check is not None:
        try:
            check(url)
        except StoreConfigError as e:
            raise refused(url, e) from None
    return url


def _factory(url: str) -> Callable[..., Store]:
    """The backend that opens ``url`` (a plain path: the file store)."""
    if not isinstance(url, str) or not url:
        raise StoreConfigError("store URL must be a non-empty str")
    scheme = scheme_of(url)
    if scheme is None:
        return _file  # a plain path
    factory = _backends.get(scheme)
    if factory is None:
        known = ", ".join(f"{s}:" for s in sorted(_backends))
        raise StoreConfigError(f"unknown store URL scheme {scheme!r}; supported: {known} "
                               f"or a plain directory path{typo_hint(url)}")
    return factory


__all__ = [
    "FencingError",
    "WindowStorage", "Batch", "Before", "Progress", "check_run", "finish_run", "tasks_of",
    "open_store", "check_url", "register_backend", "normalize_url", "redact_url", "scheme_of", "pooled_store",
    "Store", "StoreStats", "Token", "MAX_WINDOW_BYTES",
    "encode", "decode", "register_codec", "unregister_codec", "registered_codecs",
    "StoreError", "StoreConfigError", "StoreClosed", "StoreUnavailable",
    "StoreAuthenticationError", "CasMismatch", "CorruptValue", "FormatVersionError",
    "MissingData", "CodecRegistrationError", "UnknownWindowOption",
]

"""The ``--store`` URL: normalised, and checked before Spark starts."""

from __future__ import annotations

import contextlib
import logging

import stores

from .errors import CLIError

_log = logging.getLogger(__name__)


def shown(url: str | None) -> str | None:
    """``url`` as the command prints it: its password replaced by ``***``."""
    return url and stores.redact_url(url)


def normalize_store(url: str | None) -> str | None:
    """File stores as absolute ``file://`` URLs (executors may not share the cwd)."""
    try:
        return stores.normalize_url(url)
    except stores.StoreConfigError as e:
        raise CLIError(str(e)) from None


@contextlib.contextmanager
def pinged(url: str, **options):
    """The store at ``url`` opened (``options``: :func:`stores.open_store`'s)
    and pinged, closed after: a :class:`CLIError` saying what failed, before
    anything reads or deletes windows."""
    from stores.errors import StoreError

    needs = f"store {shown(url)} needs a package that is not installed: %s"
    try:
        store = stores.open_store(url, **options)
    except StoreError as e:
        raise CLIError(f"bad store URL {shown(url)}: {e}") from None
    except ImportError as e:
        raise CLIError(needs % e) from None
    try:
        try:
            store.ping()
        except StoreError as e:
            raise CLIError(f"cannot use --store: {e}") from None
        except ImportError as e:
            raise CLIError(needs % e) from None
        yield store
    finally:
        with contextlib.suppress(Exception):
            store.close()


def check_store(url: str, *, retries: int = 1) -> None:
    """Open the store and ping it (few retries): fail clearly before Spark starts."""
    with pinged(url, retries=retries, backoff=0.05, backoff_max=0.2):
        pass


def batch_store(url: str | None) -> str | None:
    """A batch command's ``--store`` (``run``, ``demo``), normalised and,
    when given, pinged before Spark starts whatever the engine: a wrong URL
    fails in a second.  Whether the job's windows go there is the engine's
    rule (:func:`spark_ops.api.keeps_windows_in_store`), which the
    command's engine line states (:func:`spark_ops.api.choose_engine`)."""
    store = normalize_store(url)
    if store:
        check_store(store)
    return store


def warn_where_windows_go(url: str | None, engine: str, master: str) -> bool:
    """:func:`warn_file_store_on_cluster` for a job on ``engine``, which
    opens its store only when it keeps windows there.  True if it warned."""
    from ..api import keeps_windows_in_store

    return keeps_windows_in_store(engine) and warn_file_store_on_cluster(url, master)


def round_trips_note(url: str | None, trips: int) -> str:
    """The summary's account of the store: its URL and the job's round trips
    to it (0 where the engine kept the windows in executor memory); empty
    without a store."""
    return f"; store {shown(url)}: {trips:,} round trips" if url else ""


def warn_file_store_on_cluster(url: str | None, master: str) -> bool:
    """Warn on stderr when the windows go to a ``file:`` store (SQLite, one
    machine's) and ``master`` is not ``local``: executors on several nodes
    would each open their own file, or one file over a network file system,
    which SQLite's write-ahead log does not support.  Only a warning: a
    cluster whose executors all run on this machine is a valid set-up.
    True if it warned."""
    if not url or stores.scheme_of(url) != "file" or master.startswith("local"):
        return False
    _log.warning("--store %s is a SQLite file on one machine, and master %s may run executors on other "
                 "nodes: there each would open its own file, or one file over a network file system, which "
                 "SQLite does not support (it can corrupt the windows); use a redis:// or couchbase:// store "
                 "unless every executor runs on this machine", shown(url), master)
    return True

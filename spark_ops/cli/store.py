"""The ``--store`` URL: normalised, and checked before Spark starts."""

from __future__ import annotations

import contextlib

import stores

from .errors import CLIError


def shown(url: str | None) -> str | None:
    """``url`` as the command prints it: its password replaced by ``***``."""
    return url and stores.redact_url(url)


def normalize_store(url: str | None) -> str | None:
    """File stores as absolute ``file://`` URLs (executors may not share the cwd)."""
    try:
        return stores.normalize_url(url)
    except stores.StoreConfigError as e:
        raise CLIError(str(e)) from None


def check_store(url: str, *, retries: int = 1) -> None:
    """Open the store and ping it (few retries): fail clearly before Spark starts."""
    from stores.errors import StoreError

    try:
        store = stores.open_store(url, retries=retries, backoff=0.05, backoff_max=0.2)
    except StoreError as e:
        raise CLIError(f"bad store URL {shown(url)}: {e}") from None
    except ImportError as e:
        raise CLIError(f"store {shown(url)} needs a package that is not installed: {e}") from None
    try:
        store.ping()
    except StoreError as e:
        raise CLIError(f"cannot use --store: {e}") from None
    except ImportError as e:
        raise CLIError(f"store {shown(url)} needs a package that is not installed: {e}") from None
    finally:
        with contextlib.suppress(Exception):
            store.close()

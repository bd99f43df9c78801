"""Bounded exponential backoff around a store's backend calls.

:class:`stores.base.Store` runs every backend call through
:meth:`Retrying._run`: a transient failure (classified by the backend's
``_classify``) is retried after a delay that doubles up to a cap, with
jitter, until the retries or the operation's timeout run out
(:class:`~stores.errors.StoreUnavailable`); an authentication or
configuration error fails at once, with the backend's secrets scrubbed from
every message.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable, Optional, Sequence, TypeVar

from .errors import StoreAuthenticationError, StoreClosed, StoreConfigError, StoreError, StoreUnavailable

T = TypeVar("T")

#: Retries of transient failures, at WARNING (the ``stores`` package's logger).
_log = logging.getLogger("stores.base")

# Error classification returned by Store._classify.
TRANSIENT = "transient"
AUTH = "auth"
#: a configuration mistake (a certificate, a file, a setting): retrying cannot help
CONFIG = "config"


class Retrying:
    """The retry half of :class:`stores.base.Store` (see its options)."""

    url: str
    _closed: bool

    def _retry_policy(self, retries: int, backoff: float, backoff_max: float, timeout: float) -> None:
        """Check and keep the options of the retry policy."""
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise StoreConfigError(f"retries must be an int >= 0, got {retries!r}")
        try:
            backoff = float(backoff)
            backoff_max = float(backoff_max)
        except (TypeError, ValueError):
            raise StoreConfigError("backoff and backoff_max must be numbers") from None
        if not backoff >= 0 or not backoff_max >= backoff:
            raise StoreConfigError(
                f"need 0 <= backoff <= backoff_max, got {backoff!r} and {backoff_max!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise StoreConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        #: The longest one operation may take, retries included (seconds).
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = backoff
        self.backoff_max = backoff_max

    def _run(self, operation: str, window: Optional[str], fn: Callable[..., T],
             *args: Any) -> T:
        if self._closed:
            raise StoreClosed(f"{operation} on a closed store {self.url}")
        delay = self.backoff
        attempts = 0
        started = time.monotonic()
        while True:
            attempts += 1
            try:
                return fn(*args)
            except StoreError:
                raise
            except Exception as exc:
                kind = self._classify(exc)
                if kind is None:
                    raise StoreError(self._message(
                        operation, window, f"unexpected {type(exc).__name__}: "
                        f"{self._scrub(str(exc))}")) from exc
                if kind == CONFIG:
                    raise StoreConfigError(self._message(
                        operation, window, self._scrub(self._config_problem(exc)))) from exc
                if kind == AUTH:
                    raise StoreAuthenticationError(
                        self._message(operation, window, "authentication failed: "
                                      f"{type(exc).__name__}: {self._scrub(str(exc))}"),
                        url=self.url, operation=operation, window=window,
                        attempts=attempts) from exc
                self._on_transient_error(exc)
                sleep = delay * (0.5 + 0.5 * random.random())
                spent = time.monotonic() - started
                if attempts > self.retries or spent + sleep >= self.timeout:
                    where = f"{operation} on window {window!r}" if window is not None \
                        else operation
                    raise StoreUnavailable(
                        f"store {self.url} is unavailable: {where} failed after "
                        f"{attempts} attempt(s) in {spent:.1f} s (timeout {self.timeout:g} s): "
                        f"{type(exc).__name__}: {self._scrub(str(exc))}",
                        url=self.url, operation=operation, window=window,
                        attempts=attempts) from exc
                self.stats.add(retries=1)
                # self.url is redacted and _scrub removes the backend's secrets from its message
                _log.warning("store %s: %s failed (%s: %s); retry %d of %d in %.2f s", self.url,
                             f"{operation} on window {window!r}" if window is not None else operation,
                             type(exc).__name__, self._scrub(str(exc)), attempts, self.retries, sleep)
                time.sleep(sleep)
                delay = min(self.backoff_max, delay * 2)

    def _message(self, operation: str, window: Optional[str], detail: str) -> str:
        where = f"{operation} on window {window!r}" if window is not None else operation
        return f"store {self.url}: {where}: {detail}"

    def _scrub(self, text: str) -> str:
        """Remove secrets from a backend message (backends with a password
        override :meth:`_secrets`).  A secret given as another type than str
        (``password=123456789``, bytes) is removed as the text it is sent as."""
        for secret in self._secrets():
            if isinstance(secret, (bytes, bytearray)):
                secret = bytes(secret).decode("utf-8", "replace")
            if secret:
                text = text.replace(str(secret), "***")
        return text

    # ----------------------------------------------- backend interface

    def _secrets(self) -> Sequence[str]:
        return ()

    def _classify(self, exc: Exception) -> Optional[str]:
        """``TRANSIENT`` (retry), ``AUTH`` (fail at once with
        StoreAuthenticationError), ``CONFIG`` (fail at once with
        StoreConfigError, :meth:`_config_problem` saying why) or ``None`` (not
        a backend failure: wrap in StoreError at once)."""
        return None

    def _config_problem(self, exc: Exception) -> str:
        """What the configuration error ``exc`` (classified ``CONFIG``) means,
        naming the setting to fix."""
        return f"configuration error: {type(exc).__name__}: {exc}"

    def _on_transient_error(self, exc: Exception) -> None:
        """Called after each transient failure (e.g. drop a broken connection)."""

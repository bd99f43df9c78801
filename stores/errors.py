"""Exceptions raised by the stores.

Every error a store raises on purpose derives from :class:`StoreError`
(itself a :class:`mta.errors.MTAError`), so callers can catch them all at
once, or precisely:

* :class:`StoreUnavailable` -- the backend cannot be reached (down at start,
  connection dropped and still failing after the bounded retries, wrong
  credentials).  The message names the store URL (password redacted), the
  operation and the window.
* :class:`CasMismatch` -- a compare-and-set on a window's metadata lost: the
  record changed since it was read (or exists when absent was expected).
* :class:`CorruptValue` -- a blob failed its checksum or is not valid data.
* :class:`FormatVersionError` -- a blob or a store was written by a newer
  format than this code knows.
* :class:`MissingData` -- data that must exist is gone (raised by layers
  built on the stores, e.g. a level queue finding no pair where one must be).
* :class:`StoreConfigError` -- a bad URL or option (also a ``ValueError``).
* :class:`FencingError` -- a window's checkpoint was refused because a newer
  owner (a higher epoch) took the window over: this writer is stale.
* :class:`UnknownWindowOption` -- a window was opened in a store with an
  option no window takes (also a ``TypeError``).

No message ever contains a password: stores build messages from their
redacted ``url`` and scrub the secret from any backend message they quote.
"""

from __future__ import annotations

from typing import Any, Sequence

from mta.errors import MTAError


class StoreError(MTAError):
    """Base class of every error the stores raise on purpose."""


class StoreConfigError(StoreError, ValueError):
    """A store URL or option is invalid (unknown scheme, bad path, bad
    option value, backend library not installed, ...)."""


class StoreClosed(StoreError):
    """An operation was called on a store after :meth:`Store.close`."""


class StoreUnavailable(StoreError):
    """The backend could not be reached, or kept failing with transient
    errors for every retry.

    Attributes: ``url`` (redacted), ``operation``, ``window`` (``None`` for
    operations on no window) and ``attempts``.
    """

    def __init__(self, message: str, *, url: str = "", operation: str = "",
                 window: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.url = url
        self.operation = operation
        self.window = window
        self.attempts = attempts


class StoreAuthenticationError(StoreUnavailable):
    """The backend refused the credentials (never retried)."""


class CasMismatch(StoreError):
    """A compare-and-set lost.

    ``expected`` is the token the caller passed; ``actual`` is the record's
    current token as seen right after the failed attempt (``None`` when the
    record is absent).
    """

    def __init__(self, message: str, *, window: str = "", expected: Any = None,
                 actual: Any = None) -> None:
        super().__init__(message)
        self.window = window
        self.expected = expected
        self.actual = actual


class CorruptValue(StoreError, ValueError):
    """A blob failed its checksum, is truncated, or does not decode."""


class FormatVersionError(StoreError):
    """A blob (or a store's schema) has a format version this code does not
    know: it was written by a newer (or foreign) version."""


class MissingData(StoreError, LookupError):
    """Data that must exist is missing from the store."""


class CodecRegistrationError(StoreError, ValueError):
    """``register_codec`` was called with a bad or clashing type or code."""


__all__ = [
    "StoreError", "StoreConfigError", "StoreClosed", "StoreUnavailable",
    "StoreAuthenticationError", "CasMismatch", "CorruptValue",
    "FormatVersionError", "MissingData", "CodecRegistrationError", "UnknownWindowOption",
]


class FencingError(StoreError):
    """A newer owner took the window over: this engine's checkpoint is refused."""


class UnknownWindowOption(StoreError, TypeError):
    """Options a window in a store does not take, named with what the caller
    called (``entry``): the engine that opened the window, or whoever built
    that engine and passed its options on, which names itself with
    :meth:`raised_by` (:class:`mta.Window` does).  ``options``: the unknown
    names; ``accepted``: the options ``entry`` takes.  Values are not
    repeated: a misplaced option may hold a credential."""

    def __init__(self, entry: str, options: Sequence[str], accepted: Sequence[str]) -> None:
        self.entry, self.options, self.accepted = entry, tuple(options), tuple(accepted)
        names = ", ".join(map(repr, self.options))
        super().__init__(f"{entry}: unknown option{'s' * (len(self.options) > 1)} {names} for a window in a "
                         f"store; the options are {', '.join(self.accepted)}")

    def raised_by(self, entry: str, own: Sequence[str] = ()) -> "UnknownWindowOption":
        """This error as ``entry`` raises it, which takes options ``own`` besides these."""
        return type(self)(entry, self.options, (*own, *self.accepted))

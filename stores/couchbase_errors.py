"""What the Couchbase SDK's exceptions mean to a Couchbase store.

Exceptions are matched by class name (:func:`stores.couchbase_layout.exc_kind`),
so nothing here imports the SDK.  A missing document, an existing one and a
lost compare-and-set are answers the store acts on (:data:`NOT_FOUND`,
:data:`EXISTS`, :data:`CAS`); :func:`classify` tells the store's retries
which failures are an authentication problem and which are transient.
"""

from __future__ import annotations

from typing import Optional

from .base import AUTH, TRANSIENT
from .couchbase_layout import exc_kind

NOT_FOUND = "DocumentNotFoundException"
EXISTS = "DocumentExistsException"
CAS = "CasMismatchException"
AUTH_ERRORS = {"AuthenticationException"}
TRANSIENT_ERRORS = {
    "TimeoutException", "AmbiguousTimeoutException", "UnAmbiguousTimeoutException",
    "TemporaryFailException", "ServiceUnavailableException", "RequestCanceledException",
    "MissingConnectionException", "DocumentLockedException", "RateLimitedException",
    "DurabilitySyncWriteInProgressException", "DurabilitySyncWriteAmbiguousException",
}


def classify(exc: Exception) -> Optional[str]:
    """``AUTH``, ``TRANSIENT`` or ``None`` (raised as is), as
    :meth:`stores.retry.Retrying._classify` wants it."""
    names = exc_kind(exc)
    if names & AUTH_ERRORS:
        return AUTH
    if names & TRANSIENT_ERRORS or isinstance(exc, (OSError, TimeoutError)):
        return TRANSIENT
    return None
